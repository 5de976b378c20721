import Foundation
import Katana
import KatanaTrace
import Logging

/// Everything a timed item needs to report to: the latencies and the run's simulated-work settings.
final class RunContext: Sendable {
    let latencies: RunLatencies
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
        latencies.record(.sideEffectQueueWait, start &- dispatchedAt)
        latencies.sampleParallelism(inFlight.add(1))
        return start
    }

    @inline(__always)
    func sideEffectEnded(startedAt start: UInt64) {
        inFlight.add(-1)
        latencies.record(.sideEffectService, nowNanoseconds() &- start)
    }

    /// The simulated work of a side effect: busy spin, then sleep.
    func simulatedWork() async throws {
        spin(nanoseconds: spinNanoseconds)
        if sleepNanoseconds > 0 { try await Task.sleep(nanoseconds: sleepNanoseconds) }
    }

    init(latencies: RunLatencies, updaterSpinNanoseconds: UInt64, spinNanoseconds: UInt64, sleepNanoseconds: UInt64, updatersPerSideEffect: Int) {
        self.latencies = latencies
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
        run.latencies.record(.updaterQueueWait, start &- dispatchedAt)
        spin(nanoseconds: run.updaterSpinNanoseconds)
        state.counter &+= 1
        if !state.payload.isEmpty { state.payload[state.counter % state.payload.count] &+= 1 }
        run.latencies.record(.updaterService, nowNanoseconds() &- start)
    }
}

/// Dispatches a TimedUpdate and records its end-to-end latency once awaited.
@inline(__always)
func timedUpdate(_ context: SideEffectContext<BenchState, BenchDependencies>, _ run: RunContext) async throws {
    let start = nowNanoseconds()
    try await context.dispatch(TimedUpdate(dispatchedAt: start, run: run)).value
    run.latencies.record(.updaterEndToEnd, nowNanoseconds() &- start)
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
        run.latencies.sampleParallelism(run.inFlight.add(1))
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

// MARK: - The built-in scenarios, defined as any user's are

enum BuiltInScenarios {
    static let all = [
        builtIn("updaters", "P producers dispatching updaters, each awaited", endToEnd: .updaterEndToEnd, workersFromProducers: true) { store, run in
            { _ in try await store.dispatch(TimedUpdate(dispatchedAt: nowNanoseconds(), run: run)).value }
        },
        builtIn("side-effects", "C workers, each keeping one side effect in flight that dispatches and awaits K updaters",
                endToEnd: .sideEffectEndToEnd) { store, run in
            { _ in try await store.dispatch(TimedSideEffect(dispatchedAt: nowNanoseconds(), run: run)).value }
        },
        builtIn("mixed", "an app: nested side effects, listeners, a logger and an observer interceptor",
                endToEnd: .sideEffectEndToEnd, interceptors: true) { store, run in
            { _ in try await store.dispatch(UserAction(dispatchedAt: nowNanoseconds(), run: run)).value }
        },
        builtIn("flood", "F threads firing updaters as fast as they can while C workers run side effects",
                endToEnd: .sideEffectEndToEnd, flood: true) { store, run in
            { _ in try await store.dispatch(TimedSideEffect(dispatchedAt: nowNanoseconds(), run: run)).value }
        },
    ]

    /// A built-in scenario: a BenchStore configured from katana-bench's knobs, the item `item` makes for it, and
    /// the measured-phase hooks every built-in shares (stall injection, flooders, waiting for fire-and-forget work).
    static func builtIn(_ name: String, _ summary: String, endToEnd: BenchMetric, workersFromProducers: Bool = false,
                        interceptors: Bool = false, flood: Bool = false,
                        item: @escaping @Sendable (BenchStore, RunContext) -> @Sendable (Int) async throws -> Void) -> BenchScenario {
        var scenario = BenchScenario(name, summary: summary, endToEnd: endToEnd) { context in
            let knobs = context.knobs
            let run = RunContext(latencies: context.latencies, updaterSpinNanoseconds: UInt64(knobs.updaterSpinUs * 1_000),
                                 spinNanoseconds: UInt64(knobs.spinUs * 1_000), sleepNanoseconds: UInt64(knobs.sleepUs * 1_000),
                                 updatersPerSideEffect: knobs.updatersPerSideEffect)
            let payload = knobs.payload
            let store = BenchStore(interceptors: interceptors ? mixedInterceptors() : [],
                                   stateInitializer: { BenchState(payloadBytes: payload) },
                                   configuration: .init(traceBackend: context.traceBackend, backlogLimit: knobs.backlogLimit))
            for _ in 0..<knobs.listeners { store.addListener { _, new in blackHole(new.counter) } }
            // flood: the flooding threads run from warm-up to the end of the measured phase.
            let flooders = flood ? Flooders(count: knobs.flooders, store: store, run: run) : nil
            flooders?.start()
            let phase = MeasuredPhase()
            return BenchWorkload(
                whenMeasuring: { deadline in
                    phase.start(counter: store.state.counter,
                                stalls: knobs.stallEvery.map { StallInjector(every: $0, milliseconds: knobs.stallMs, store: store) })
                    // Flooders stop when the measured time is up, not when the last worker's side effect gets
                    // through: without a backlog limit that could take far longer than the run.
                    if let deadline { flooders?.stop(at: deadline) }
                },
                finish: {
                    let flooded = flooders?.stop() ?? 0
                    // Wait for fire-and-forget work (mixed, flood) so every sample is in before merging.
                    try await store.dispatch(Increment()).value
                    while store.sideEffectsRunning > 0 { try await Task.sleep(nanoseconds: 1_000_000) }
                    var counts = ["updaters_applied": Double(phase.finish(counter: store.state.counter))]
                    if flooders != nil { counts["flood_dispatches"] = Double(flooded) }
                    return counts
                },
                item: item(store, run))
        }
        scenario.workersFromProducers = workersFromProducers
        scenario.builtIn = true
        return scenario
    }
}

/// The built-ins' measured phase: the counter when it began (to count updaters applied) and the stall injector.
final class MeasuredPhase: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var startCounter = 0
    private var stalls: StallInjector?

    func start(counter: Int, stalls: StallInjector?) {
        stalls?.start()
        lock.withLock {
            startCounter = counter
            self.stalls = stalls
        }
    }

    /// Stops the stalls; the updaters applied since `start`.
    func finish(counter: Int) -> Int {
        let (start, stalls) = lock.withLock { (startCounter, self.stalls) }
        stalls?.stop()
        return counter - start
    }
}
