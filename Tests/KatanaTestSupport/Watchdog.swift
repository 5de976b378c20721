import Foundation
import Synchronization

/// Fails a test whose calls stop returning, from a thread of its own. A deadlock that takes Swift's cooperative pool
/// also takes every `Task`-based timeout (and `eventually`), and the test would hang until CI's limit with nothing
/// said; the watchdog is a plain thread, so it still runs. The test calls ``progress()`` each time a call returns;
/// when none has for `stallSeconds`, the watchdog prints what was stuck and ends the process (`fatalError`): the test
/// run fails with that message instead of hanging.
///
/// The bound is a liveness bound, wide on purpose: a deadlock never recovers, so a wide bound only delays its report.
/// Under `make test-tsan` (KATANA_TSAN_SUITE set) it is four times as wide. There the instrumented suite's other tests
/// have held both threads of a 2-core machine's cooperative pool for over 120 s, and a scenario whose side effects
/// had not yet started was reported as a deadlock (a CI run; the same scenario alone takes 2.5 s under TSan).
public final class Watchdog: Sendable {
    private let name: String
    private let ticks = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let step = Atomic<Int>(0)

    /// Starts watching. `what` names the scenario in the failure message.
    public init(_ what: String, stallSeconds: Double = 120) {
        name = what
        let stallSeconds = underThreadSanitizerSuite ? stallSeconds * 4 : stallSeconds
        let thread = Thread { [self] in watch(stallSeconds: stallSeconds) }
        thread.name = "watchdog"
        thread.start()
    }

    /// A call returned: the test is making progress. `at` says where it is, for the failure message.
    public func progress(at position: Int = -1) {
        ticks.add(1, ordering: .relaxed)
        if position >= 0 { step.store(position, ordering: .relaxed) }
    }

    /// The scenario is over: the watchdog stops. Call it on every path out of the test (`defer`).
    public func stop() { stopped.store(true, ordering: .relaxed) }

    private func watch(stallSeconds: Double) {
        var seen = ticks.load(ordering: .relaxed)
        var since = Date()
        while !stopped.load(ordering: .relaxed) {
            Thread.sleep(forTimeInterval: 0.1)
            let now = ticks.load(ordering: .relaxed)
            if now != seen {
                (seen, since) = (now, Date())
            } else if Date().timeIntervalSince(since) > stallSeconds {
                let message = "watchdog: \(name): no call returned for \(Int(stallSeconds)) s after \(now) returned "
                    + "(last position \(step.load(ordering: .relaxed))) — a deadlock; ending the test process\n"
                FileHandle.standardError.write(Data(message.utf8))
                fatalError(message)
            }
        }
    }
}
