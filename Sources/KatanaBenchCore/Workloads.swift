import Foundation
import Katana
import KatanaTrace
import Logging

/// Everything a timed item needs to report to: the recorders and the run's simulated-work settings.
final class RunContext: Sendable {
    let recorders: Recorders
    let updaterSpinNanoseconds: UInt64
    let spinNanoseconds: UInt64
    let sleepNanoseconds: UInt64
    let updatersPerSideEffect: Int
    let inFlight = AtomicCounter()

    /// Called first thing in a timed side effect's body: records its queue wait and the parallelism it found, and
    /// counts it in flight. Returns the body's start time; call `sideEffectEnded` when the body is done.
    @inline(__always)
    func sideEffectStarted(dispatchedAt: UInt64) -> UInt64 {
        let start = nowNanoseconds()
        recorders.record(.sideEffectQueueWait, start &- dispatchedAt)
        recorders.sampleParallelism(inFlight.add(1))
        return start
    }

    @inline(__always)
    func sideEffectEnded(startedAt start: UInt64) {
        inFlight.add(-1)
        recorders.record(.sideEffectService, nowNanoseconds() &- start)
    }

    /// The simulated work of a side effect: busy spin, then sleep.
    func simulatedWork() async throws {
        spin(nanoseconds: spinNanoseconds)
        if sleepNanoseconds > 0 { try await Task.sleep(nanoseconds: sleepNanoseconds) }
    }

    init(recorders: Recorders, updaterSpinNanoseconds: UInt64, spinNanoseconds: UInt64, sleepNanoseconds: UInt64, updatersPerSideEffect: Int) {
        self.recorders = recorders
        self.updaterSpinNanoseconds = updaterSpinNanoseconds
        self.spinNanoseconds = spinNanoseconds
        self.sleepNanoseconds = sleepNanoseconds
        self.updatersPerSideEffect = updatersPerSideEffect
    }
}

/// A state updater that records its queue wait (dispatch → applied) and service time (inside updateState).
/// The store applies updaters one at a time, so these samples land in the applying thread's recorder safely.
struct TimedUpdate: StateUpdater {
    let dispatchedAt: UInt64
    let run: RunContext

    func updateState(_ state: inout BenchState) {
        let start = nowNanoseconds()
        run.recorders.record(.updaterQueueWait, start &- dispatchedAt)
        spin(nanoseconds: run.updaterSpinNanoseconds)
        state.counter &+= 1
        if !state.payload.isEmpty { state.payload[state.counter % state.payload.count] &+= 1 }
        run.recorders.record(.updaterService, nowNanoseconds() &- start)
    }
}

/// Dispatches a TimedUpdate and records its end-to-end latency once awaited.
@inline(__always)
func timedUpdate(_ context: SideEffectContext<BenchState, BenchDependencies>, _ run: RunContext) async throws {
    let start = nowNanoseconds()
    try await context.dispatch(TimedUpdate(dispatchedAt: start, run: run)).value
    run.recorders.record(.updaterEndToEnd, nowNanoseconds() &- start)
}

/// The `side-effects` scenario's unit of work: simulated work (spin and/or sleep), then K updaters, each awaited.
struct TimedSideEffect: SideEffect {
    let dispatchedAt: UInt64
    let run: RunContext

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        let start = run.sideEffectStarted(dispatchedAt: dispatchedAt)
        defer { run.sideEffectEnded(startedAt: start) }
        try await run.simulatedWork()
        for _ in 0..<run.updatersPerSideEffect { try await timedUpdate(context, run) }
    }
}

// MARK: The `mixed` scenario: what an app does.

/// A user action: updates the state, fetches a profile (a nested side effect that "does I/O"), then updates
/// the state again and fires a couple of analytics updaters without waiting for them.
struct UserAction: SideEffect {
    let dispatchedAt: UInt64
    let run: RunContext

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        let start = run.sideEffectStarted(dispatchedAt: dispatchedAt)
        defer { run.sideEffectEnded(startedAt: start) }
        try await timedUpdate(context, run)
        try await context.dispatch(FetchProfile(dispatchedAt: nowNanoseconds(), run: run)).value
        for _ in 0..<max(run.updatersPerSideEffect - 1, 0) { try await timedUpdate(context, run) }
        context.dispatch(TimedUpdate(dispatchedAt: nowNanoseconds(), run: run))
    }
}

/// The nested side effect: simulated I/O (sleep) and CPU (spin), then one updater.
struct FetchProfile: SideEffect {
    let dispatchedAt: UInt64
    let run: RunContext

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        run.recorders.sampleParallelism(run.inFlight.add(1))
        defer { run.inFlight.add(-1) }
        try await context.interval("fetch profile I/O") { try await run.simulatedWork() }
        try await timedUpdate(context, run)
    }
}

/// Dispatched by the ObserverInterceptor after every FetchProfile, as an analytics hook would be.
struct ProfileFetched: StateUpdater, DispatchObserverDispatchable {
    init?(dispatchedItem: any Dispatchable, prevState: any State, currentState: any State) {}
    func updateState(_ state: inout BenchState) { state.counter &+= 1 }
}

/// The interceptors of the `mixed` scenario: a DispatchableLogger whose logger drops info-level messages (so it
/// costs its level check, as in production) and an ObserverInterceptor.
func mixedInterceptors() -> [StoreInterceptor] {
    var logger = Logger(label: "katana-bench")
    logger.logLevel = .error
    return [
        DispatchableLogger.interceptor(blackList: [TimedUpdate.self], logger: logger),
        ObserverInterceptor.observe([.onDispatch(FetchProfile.self, [ProfileFetched.self])]),
    ]
}
