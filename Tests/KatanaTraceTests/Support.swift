import Foundation
import KatanaTestSupport
import Katana
import KatanaTrace
import Testing

extension Trait where Self == ConditionTrait {
    /// For a suite whose subject is the `katana-trace` command (what its child processes print, and the files it writes
    /// or reads in one thread): skipped under `make test-tsan`. The child there is the release build `make test`
    /// ran the same tests against (KATANA_TRACE_EXECUTABLE; the Makefile says why), so the instrumented process only
    /// starts it and waits: nothing for ThreadSanitizer to check. Long chains of such children were what the step's
    /// last minutes waited for, slowed by the instrumented tests beside them.
    static var checkedInChildProcesses: Self {
        .disabled(if: underThreadSanitizerSuite, "its subject is katana-trace's child processes, which make test ran; nothing here is instrumented")
    }

    /// For a recording test whose subject is how `katana-trace record` (or `katana-bench --trace` through it) runs a
    /// session — starting and stopping the daemon, signals, late registration, a live relay, what analyze and export
    /// read back: skipped under `make test-tsan`, as above. What they record is a few hundred dispatches; the
    /// recording tests that stay run the instrumented workloads at size.
    static var aboutTheRecordingCommand: Self {
        .disabled(if: underThreadSanitizerSuite, "its subject is how katana-trace record runs a session, which make test ran against the same build; the recording tests that stay run the instrumented workloads")
    }
}

struct TraceState: State, Equatable {
    var counter = 0
    init() {}
}

typealias TraceStore = Store<TraceState, EmptySideEffectDependencyContainer>

struct Bump: StateUpdater {
    func updateState(_ state: inout TraceState) { state.counter += 1 }
}

struct WrongState: State {}
struct ForWrongState: StateUpdater {
    func updateState(_ state: inout WrongState) {}
}

struct BumpTwice: SideEffect {
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(Bump()).value
        try await context.dispatch(Bump()).value
    }
}

struct Explode: SideEffect {
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws {
        throw CancellationError()
    }
}

/// Runs a command to completion and returns its exit status and output.
/// Runs a command found on PATH (through `/usr/bin/env`).
@discardableResult
func run(_ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, out: String, err: String) {
    try runProcess(URL(fileURLWithPath: "/usr/bin/env"), arguments, environment: environment)
}

/// `run` for tests: the caller's task suspends while the command runs, instead of holding one of the cooperative
/// pool's threads (two on a 2-core machine) that every other test's tasks need meanwhile.
@discardableResult
func runSuspending(_ arguments: [String], environment: [String: String]? = nil) async throws -> (status: Int32, out: String, err: String) {
    try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/env"), arguments, environment: environment)
}

enum Paths {
    /// The package root, found from this file's path.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The katana-bench executable built next to this test binary.
    static var katanaBench: URL { builtExecutable(named: "katana-bench") }
    /// The KatanaRouter example, built next to this test binary.
    static var routerExample: URL { builtExecutable(named: "katana-router-example") }

}
