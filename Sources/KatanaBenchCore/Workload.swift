import ArgumentParser
import Foundation
import Katana
import KatanaTrace

/// A deterministic, traced workload of mixed updaters and nested side effects, whose shape fixes the maximum
/// parallelism: each round a parent side effect starts `children` children that wait for each other, so exactly
/// `children + 1` side effects are in flight at the peak. Used by the LTTng integration tests and to make the
/// sample trace.
struct Workload: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a deterministic traced workload (mixed updaters and nested side effects).")

    enum Backend: String, ExpressibleByArgument, CaseIterable {
        case lttng, memory, both, none
    }

    @Option(parsing: .unconditional, help: "Rounds: each is one parent side effect with its children.")
    var rounds: Int = 500
    @Option(parsing: .unconditional, help: "Children per parent; they rendezvous, so peak parallelism is children + 1.")
    var children: Int = 4
    @Option(parsing: .unconditional, help: "Updaters each child dispatches and awaits.")
    var updatersPerChild: Int = 25
    @Option(parsing: .unconditional, help: "Fire-and-forget updaters each parent dispatches.")
    var updatersPerParent: Int = 95
    @Option(help: "Trace backend: \(Backend.allCases.map(\.rawValue).joined(separator: ", ")).")
    var backend: Backend = .lttng
    @Option(parsing: .unconditional, help: "Before starting, wait up to this many seconds for an LTTng session to enable katana events (0: don't wait).")
    var waitForSession: Double = 0
    @Option(help: "Write a JSON summary (dispatch counts, in-memory maximum parallelism, final counter, pid) here.")
    var summary: String?
    @Option(parsing: .unconditional, help: "Give Child a latency budget of this many milliseconds (flight recorder: over it, katana:budget_exceeded).")
    var childBudgetMs: Double?
    @Option(parsing: .unconditional, help: "Make the first child of this round (1-based) slow by --slow-ms (0: none).")
    var slowRound: Int = 0
    @Option(parsing: .unconditional, help: "How many milliseconds the slow child sleeps.")
    var slowMs: Double = 50
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Before the rounds, dispatch this many items to a store that never becomes ready, cancel half of them and "
            + "release the store: each must still end in the trace (cancelled, or rejected with storeReleased)."))
    var heldAndDropped: Int = 0

    func validate() throws {
        try checkRange(rounds, 1...10_000_000, "--rounds")
        try checkRange(children, 1...1_000, "--children")
        try checkRange(updatersPerChild, 0...100_000, "--updaters-per-child")
        try checkRange(updatersPerParent, 0...100_000, "--updaters-per-parent")
        try checkRange(waitForSession, 0...3_600, "--wait-for-session", unit: "s")
        if let childBudgetMs, !(childBudgetMs.isFinite && childBudgetMs > 0 && childBudgetMs <= 3_600_000) {
            throw ValidationError("--child-budget-ms must be a positive number of milliseconds up to an hour (got \(childBudgetMs))")
        }
        guard slowRound >= 0, slowRound <= rounds else { throw ValidationError("--slow-round must be 0 to --rounds (got \(slowRound))") }
        guard slowMs.isFinite, slowMs >= 0, slowMs <= 60_000 else {
            throw ValidationError("--slow-ms must be 0 to 60000 (got \(slowMs))")
        }
        try checkRange(heldAndDropped, 0...1_000_000, "--held-and-dropped")
    }

    /// Items dispatched to a store whose state initializer never runs (so it holds them), every other pair cancelled,
    /// then the store released: updaters and side effects, each kept or cancelled.
    static func dropHeldItems(_ count: Int, traceBackend: any TraceBackend) async throws {
        let store = BenchStore(interceptors: [], stateInitializer: { BenchState() },
                               configuration: .init(stateInitializerExecutor: .custom { _ in }, traceBackend: traceBackend))
        var handles: [DispatchHandle<Void>] = []
        for index in 0..<count {
            let handle = index.isMultiple(of: 2) ? store.dispatch(Increment()) : store.dispatch(HeldWork())
            if index % 4 >= 2 { handle.cancel() }
            handles.append(handle)
        }
        _ = consume store
        for handle in handles {
            guard case .failure = await handle.result else {
                throw ValidationError("an item held by a store released before it was ready did not fail")
            }
        }
    }

    func run() async throws {
        let lttng: any TraceBackend = backend == .lttng || backend == .both ? try LinkedLTTng.require() : NoOpTraceBackend()
        if waitForSession > 0, backend == .lttng || backend == .both {
            let deadline = Date().addingTimeInterval(waitForSession)
            while !lttng.isEnabled, Date() < deadline { try await Task.sleep(nanoseconds: 10_000_000) }
            guard lttng.isEnabled else {
                throw ValidationError("no LTTng session enabled katana:* within \(waitForSession)s (is lttng-sessiond running?)")
            }
        }
        let memory = InMemoryTraceBackend()
        let traceBackend: any TraceBackend = switch backend {
        case .lttng: lttng
        case .memory: memory
        case .both: MultiplexTraceBackend([lttng, memory])
        case .none: NoOpTraceBackend()
        }
        if heldAndDropped > 0 { try await Self.dropHeldItems(heldAndDropped, traceBackend: traceBackend) }
        let budgets: LatencyBudgets = childBudgetMs.map { [.budget(Child.self, .microseconds(Int64($0 * 1_000)))] } ?? []
        let store = BenchStore(interceptors: [], stateInitializer: { BenchState() },
                               configuration: .init(traceBackend: traceBackend, latencyBudgets: budgets))
        store.addListener { _, _ in }
        for index in 0..<rounds {
            let round = Round(children: children, updatersPerChild: updatersPerChild, updatersPerParent: updatersPerParent,
                              slowFirstChildMs: index + 1 == slowRound ? slowMs : 0)
            try await store.dispatch(round).value
        }
        // Wait for the parents' fire-and-forget updaters.
        try await store.dispatch(Increment()).value
        let expected = rounds * (children * updatersPerChild + updatersPerParent) + 1
        guard store.state.counter == expected else {
            throw ValidationError("workload lost updates: counter \(store.state.counter), expected \(expected)")
        }
        if let summary {
            let events = memory.events
            var maxParallelism: UInt32 = 0
            var dispatches = 0
            for event in events {
                if case let .begin(begin) = event { maxParallelism = max(maxParallelism, begin.parallelism) }
                if case .enqueue = event { dispatches += 1 }
            }
            let object: [String: Any] = [
                "rounds": rounds, "children": children, "counter": store.state.counter,
                "dispatches": rounds * (1 + children + children * updatersPerChild + updatersPerParent) + 1 + heldAndDropped,
                "memory_dispatches": dispatches, "memory_max_parallelism": maxParallelism,
                // A session records every process: a reader picks this run's events by its pid (LTTng's vpid).
                "pid": Int(getpid()),
            ]
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            try data.write(to: URL(fileURLWithPath: summary))
        }
    }
}

/// What `--held-and-dropped` dispatches as its side effects: never run (its store is released before it is ready).
struct HeldWork: SideEffect {
    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {}
}

/// One round: starts the children, which meet before finishing, and fires updaters of its own.
struct Round: SideEffect {
    let children: Int
    let updatersPerChild: Int
    let updatersPerParent: Int
    var slowFirstChildMs: Double = 0

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        let meeting = Meeting(parties: children)
        let handles = (0..<children).map {
            context.dispatch(Child(updaters: updatersPerChild, meeting: meeting, slowMs: $0 == 0 ? slowFirstChildMs : 0))
        }
        for index in 0..<updatersPerParent { context.dispatch(TouchPayload(byte: UInt8(truncatingIfNeeded: index))) }
        for handle in handles { try await handle.value }
    }
}

struct Child: SideEffect {
    let updaters: Int
    let meeting: Meeting
    var slowMs: Double = 0

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        await meeting.arrive()
        if slowMs > 0 { try await Task.sleep(for: .microseconds(Int64(slowMs * 1_000))) }
        for _ in 0..<updaters { try await context.dispatch(Increment()).value }
    }
}

/// Suspends each arriving child until all `parties` have arrived.
actor Meeting {
    private let parties: Int
    private var arrived = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(parties: Int) { self.parties = parties }

    func arrive() async {
        arrived += 1
        if arrived == parties {
            waiting.forEach { $0.resume() }
            waiting = []
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }
}
