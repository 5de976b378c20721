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
        let start = nowNanoseconds()
        run.recorders.record(.sideEffectQueueWait, start &- dispatchedAt)
        run.recorders.sampleParallelism(run.inFlight.add(1))
        defer { run.inFlight.add(-1) }
        spin(nanoseconds: run.spinNanoseconds)
        if run.sleepNanoseconds > 0 { try await Task.sleep(nanoseconds: run.sleepNanoseconds) }
        for _ in 0..<run.updatersPerSideEffect { try await timedUpdate(context, run) }
        run.recorders.record(.sideEffectService, nowNanoseconds() &- start)
    }
}

// MARK: The `mixed` scenario: what an app does.

/// A user action: updates the state, fetches a profile (a nested side effect that "does I/O"), then updates
/// the state again and fires a couple of analytics updaters without waiting for them.
struct UserAction: SideEffect {
    let dispatchedAt: UInt64
    let run: RunContext

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        let start = nowNanoseconds()
        run.recorders.record(.sideEffectQueueWait, start &- dispatchedAt)
        run.recorders.sampleParallelism(run.inFlight.add(1))
        defer { run.inFlight.add(-1) }
        try await timedUpdate(context, run)
        try await context.dispatch(FetchProfile(dispatchedAt: nowNanoseconds(), run: run)).value
        for _ in 0..<max(run.updatersPerSideEffect - 1, 0) { try await timedUpdate(context, run) }
        context.dispatch(TimedUpdate(dispatchedAt: nowNanoseconds(), run: run))
        run.recorders.record(.sideEffectService, nowNanoseconds() &- start)
    }
}

/// The nested side effect: simulated I/O (sleep) and CPU (spin), then one updater.
struct FetchProfile: SideEffect {
    let dispatchedAt: UInt64
    let run: RunContext

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        run.recorders.sampleParallelism(run.inFlight.add(1))
        defer { run.inFlight.add(-1) }
        spin(nanoseconds: run.spinNanoseconds)
        if run.sleepNanoseconds > 0 { try await Task.sleep(nanoseconds: run.sleepNanoseconds) }
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
