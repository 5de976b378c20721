import Foundation

/// Whether this run is `make test-tsan`'s (it sets KATANA_TSAN_SUITE): there the point is races, instrumented code runs
/// several times slower, and tests whose breadth is not about races (recording sizes, the million-updater stress) run smaller, while liveness
/// bounds widen; the trace tests whose subject is the katana-trace command skip (`checkedInChildProcesses`).
public let underThreadSanitizerSuite = ProcessInfo.processInfo.environment["KATANA_TSAN_SUITE"] != nil
