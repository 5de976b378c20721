import Dispatch
import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Testing

private func makeStore(_ backend: any TraceBackend, interceptors: [StoreInterceptor] = []) -> TraceStore {
    TraceStore(interceptors: interceptors, stateInitializer: { TraceState() }, configuration: .init(traceBackend: backend))
}

private extension InMemoryTraceBackend.Event {
    var dispatchID: UInt64? {
        switch self {
        case let .enqueue(e): e.id
        case let .begin(e): e.id
        case let .end(e): e.id
        default: nil
        }
    }
}

/// Every traced dispatch has exactly enqueue, begin, end, in that order.
private func expectWellFormed(_ events: [InMemoryTraceBackend.Event], sourceLocation: SourceLocation = #_sourceLocation) {
    var stages: [UInt64: [String]] = [:]
    for event in events {
        switch event {
        case let .enqueue(e): stages[e.id, default: []].append("enqueue")
        case let .begin(e): stages[e.id, default: []].append("begin")
        case let .end(e): stages[e.id, default: []].append("end")
        default: break
        }
    }
    for (id, seen) in stages {
        #expect(id != 0, sourceLocation: sourceLocation)
        #expect(seen == ["enqueue", "begin", "end"], "id \(id): \(seen)", sourceLocation: sourceLocation)
    }
}

@Suite struct InMemoryTracingTests {
    @Test func anInlineUpdaterEmitsEnqueueBeginEndWithEveryField() throws {
        let backend = InMemoryTraceBackend()
        let store = makeStore(backend)
        store.dispatch(Bump())
        let events = backend.events.filter { $0.dispatchID != nil }
        try #require(events.count == 3)
        guard case let .enqueue(enqueue) = events[0], case let .begin(begin) = events[1], case let .end(end) = events[2] else {
            Issue.record("unexpected events \(events)")
            return
        }
        let name = TraceName.of(Bump.self)
        #expect(enqueue == DispatchEnqueueEvent(id: enqueue.id, parentID: 0, kind: .stateUpdater, name: name, route: .updaterInline, queueDepth: 0))
        #expect(begin == DispatchBeginEvent(id: enqueue.id, parentID: 0, kind: .stateUpdater, name: name, route: .updaterInline, parallelism: 0))
        #expect(end == DispatchEndEvent(id: enqueue.id, kind: .stateUpdater, name: name, route: .updaterInline, outcome: .ok))
        #expect(name.string == "KatanaTraceTests.Bump")
    }

    @Test func storeReadyAndListenerBatchesAreTraced() async throws {
        let backend = InMemoryTraceBackend()
        let store = makeStore(backend)
        store.addListener { _, _ in }
        store.addListener { _, _ in }
        try await twoBumpsQueuedBehindABlockedUpdater(store)  // delivered in one or two batches (the lane's budget)
        let events = backend.events
        #expect(events.first == .storeReady(storeID: store.storeID, stateType: TraceName.of(TraceState.self)))
        var batches: [(changes: UInt32, listeners: UInt32)] = []
        for case let .listenersNotified(storeID, changes, listeners) in events where storeID == store.storeID {
            batches.append((changes, listeners))
        }
        // The blocked updater was applied inline (its listeners told after its end), the two queued ones in one or
        // two batches: each change reached both listeners.
        #expect(batches.map(\.changes).reduce(0, +) == 3, "batches: \(batches)")
        #expect(!batches.isEmpty && batches.allSatisfy { $0.listeners == 2 }, "batches: \(batches)")
    }

    /// A batch's delivery to the listeners is in the trace when its dispatches are, whatever the backend answers by
    /// the time the batch ends: tracing stopped while two traced updaters waited in the lane, their
    /// `listeners_notified` still follows their ends; a reader never finds traced changes delivered to nobody.
    @Test func aTracedBatchsDeliveryIsTracedAfterTracingStops() async throws {
        let backend = InMemoryTraceBackend()
        let store = makeStore(backend)
        store.addListener { _, _ in }
        try await twoBumpsQueuedBehindABlockedUpdater(store) { backend.setEnabled(false) }
        let bumpsEnded = backend.events.filter {
            if case let .end(end) = $0 { end.name == TraceName.of(Bump.self) } else { false }
        }
        #expect(bumpsEnded.count == 2)
        var changes: UInt32 = 0
        for case let .listenersNotified(storeID, told, _) in backend.events where storeID == store.storeID { changes += told }
        #expect(changes == 3, "the blocked updater's change and the two queued ones: \(backend.events)")
    }

    /// And the other way: untraced updaters (dispatched while nothing listened) are delivered untraced, though tracing
    /// started before their batch ended — a `listeners_notified` would speak of dispatches the trace does not hold.
    @Test func anUntracedBatchsDeliveryIsNotTracedWhenTracingStartsMeanwhile() async throws {
        let backend = InMemoryTraceBackend(enabled: false)
        let store = makeStore(backend)
        store.addListener { _, _ in }
        try await twoBumpsQueuedBehindABlockedUpdater(store) { backend.setEnabled(true) }
        let delivered = backend.events.filter {
            if case let .listenersNotified(storeID, _, _) = $0 { storeID == store.storeID } else { false }
        }
        #expect(delivered.isEmpty, "\(backend.events)")
    }

    @Test func queuedUpdatersReportTheDepthTheyFound() async throws {
        let backend = InMemoryTraceBackend()
        let store = makeStore(backend)
        try await twoBumpsQueuedBehindABlockedUpdater(store)
        let enqueues = backend.events.compactMap { event -> DispatchEnqueueEvent? in
            if case let .enqueue(e) = event, e.name == TraceName.of(Bump.self) { return e }
            return nil
        }
        #expect(enqueues.map(\.route) == [.updaterQueue, .updaterQueue])
        #expect(enqueues.map(\.queueDepth) == [0, 1])
        expectWellFormed(backend.events)
    }

    @Test func sideEffectsCarryParallelismAndTheirChildrenCarryTheirID() async throws {
        let backend = InMemoryTraceBackend()
        let store = makeStore(backend)
        try await store.dispatch(BumpTwice()).value
        let events = backend.events
        expectWellFormed(events)
        let sideEffectBegin = events.compactMap { event -> DispatchBeginEvent? in
            if case let .begin(e) = event, e.kind == .sideEffect { return e }
            return nil
        }
        try #require(sideEffectBegin.count == 1)
        #expect(sideEffectBegin[0].route == .sideEffectPool)
        #expect(sideEffectBegin[0].parallelism == 1)
        #expect(sideEffectBegin[0].name == TraceName.of(BumpTwice.self))
        let children = events.compactMap { event -> DispatchEnqueueEvent? in
            if case let .enqueue(e) = event, e.kind == .stateUpdater { return e }
            return nil
        }
        #expect(children.count == 2)
        #expect(children.allSatisfy { $0.parentID == sideEffectBegin[0].id })
    }

    /// Katana 6's erased form dispatches through `AnySideEffectContext.dispatch`: traced as the side effect's
    /// children exactly as the typed context's dispatches are.
    @Test func anErasedContextsDispatchesAreTheSideEffectsChildren() async throws {
        struct ErasedBumpTwice: ReturningSideEffect {
            func sideEffect(_ context: AnySideEffectContext) async throws -> Int {
                try await context.dispatch(Bump()).value
                context.dispatch(Bump())
                return (context.getAnyState() as? TraceState)?.counter ?? -1
            }
        }
        let backend = InMemoryTraceBackend()
        let store = makeStore(backend)
        #expect(try await store.dispatch(ErasedBumpTwice()).value >= 1)
        let events = backend.events
        expectWellFormed(events)
        let sideEffect = try #require(events.compactMap { event -> DispatchBeginEvent? in
            if case let .begin(e) = event, e.kind == .sideEffect { return e }
            return nil
        }.first)
        #expect(sideEffect.name == TraceName.of(ErasedBumpTwice.self))
        let children = events.compactMap { event -> DispatchEnqueueEvent? in
            if case let .enqueue(e) = event, e.kind == .stateUpdater { return e }
            return nil
        }
        #expect(children.count == 2)
        #expect(children.allSatisfy { $0.parentID == sideEffect.id && $0.name == TraceName.of(Bump.self) })
    }

    @Test func outcomesAreOkErrorAndBlocked() async throws {
        let backend = InMemoryTraceBackend()
        let blockBumps: StoreInterceptor = { _ in { next in { item in
            if item is Bump { throw CancellationError() }
            if item is BumpTwice { return }
            try next(item)
        } } }
        let store = makeStore(backend, interceptors: [blockBumps])
        _ = await store.dispatch(Bump()).result
        _ = await store.dispatch(BumpTwice()).result
        _ = await store.dispatch(Explode()).result
        _ = await store.anyDispatch(ForWrongState()).result
        let outcomes = backend.events.compactMap { event -> (String, DispatchOutcome)? in
            if case let .end(e) = event { return (e.name.string, e.outcome) }
            return nil
        }
        #expect(outcomes.map(\.0) == ["KatanaTraceTests.Bump", "KatanaTraceTests.BumpTwice", "KatanaTraceTests.Explode", "KatanaTraceTests.ForWrongState"])
        #expect(outcomes.map(\.1) == [.blocked, .blocked, .error, .error])
    }

    @Test func heldItemsAreEnqueuedOnceAsHeldThenRun() async throws {
        let backend = InMemoryTraceBackend()
        let deferred = DeferredWork()
        let store = TraceStore(interceptors: [], stateInitializer: { TraceState() },
                               configuration: .init(stateInitializerExecutor: .custom { deferred.hold($0) }, traceBackend: backend))
        let handle = store.dispatch(Bump())
        #expect(!store.isReady)
        deferred.runHeld()
        try await handle.value
        let events = backend.events.filter { $0.dispatchID != nil }
        expectWellFormed(events)
        guard case let .enqueue(enqueue) = events.first else {
            Issue.record("no enqueue")
            return
        }
        #expect(enqueue.route == .keptUntilReady)
        #expect(events.count == 3)
    }

    // Issue #36 row 3: items held before readiness that were cancelled, or rejected when their store went away, had
    // their enqueue traced and never their end.
    @Test func heldItemsEndWithTheirOutcomeWhenTheStoreGoesAwayBeforeItIsReady() async throws {
        let backend = InMemoryTraceBackend()
        let deferred = DeferredWork()
        var store: TraceStore? = TraceStore(
            interceptors: [], stateInitializer: { TraceState() },
            configuration: .init(stateInitializerExecutor: .custom { deferred.hold($0) }, traceBackend: backend))
        store!.dispatch(Bump())
        let cancelledUpdater = store!.dispatch(Bump())
        let sideEffect = store!.dispatch(BumpTwice())
        let cancelledSideEffect = store!.dispatch(BumpTwice())
        cancelledUpdater.cancel()
        cancelledSideEffect.cancel()
        store = nil
        #expect(await sideEffect.result.error as? KatanaError == .storeReleased)
        #expect(await cancelledSideEffect.result.error is CancellationError)
        let events = backend.events.filter { $0.dispatchID != nil }
        expectWellFormed(events)
        let ends = events.compactMap { event -> DispatchEndEvent? in if case let .end(end) = event { end } else { nil } }
        #expect(ends.map(\.outcome) == [.error, .cancelled, .error, .cancelled])
        #expect(ends.allSatisfy { $0.route == .keptUntilReady })
    }

    @Test func heldItemsCancelledBeforeTheStoreIsReadyEndCancelledWhenItIs() async throws {
        let backend = InMemoryTraceBackend()
        let deferred = DeferredWork()
        let store = TraceStore(
            interceptors: [], stateInitializer: { TraceState() },
            configuration: .init(stateInitializerExecutor: .custom { deferred.hold($0) }, traceBackend: backend))
        let updater = store.dispatch(Bump())
        let sideEffect = store.dispatch(BumpTwice())
        updater.cancel()
        sideEffect.cancel()
        deferred.runHeld()
        #expect(await updater.result.error is CancellationError)
        #expect(await sideEffect.result.error is CancellationError)
        #expect(await eventually { backend.events.filter { if case .end = $0 { true } else { false } }.count == 2 })
        let events = backend.events.filter { $0.dispatchID != nil }
        expectWellFormed(events)
        let ends = events.compactMap { event -> DispatchEndEvent? in if case let .end(end) = event { end } else { nil } }
        #expect(ends.map(\.outcome) == [.cancelled, .cancelled])
        #expect(store.state.counter == 0)
    }

    @Test func aDisabledBackendGetsNothingAndTheStoreStillWorks() async throws {
        let backend = InMemoryTraceBackend(enabled: false)
        let store = makeStore(backend)
        try await store.dispatch(BumpTwice()).value
        #expect(backend.events.isEmpty)
        #expect(store.state.counter == 2)
    }

    @Test func concurrentMixedDispatchesAreAllWellFormedWithUniqueIDs() async throws {
        let backend = InMemoryTraceBackend()
        let store = makeStore(backend)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<200 {
                        store.dispatch(Bump())
                        store.dispatch(BumpTwice())
                    }
                }
            }
        }
        try await store.dispatch(Bump()).value
        #expect(await eventually { store.state.counter == 4 * 200 * 3 + 1 })
        #expect(await eventually { store.sideEffectsRunning == 0 })
        let events = backend.events
        expectWellFormed(events)
        let ids = events.compactMap { event -> UInt64? in
            if case let .enqueue(e) = event { return e.id }
            return nil
        }
        #expect(ids.count == 4 * 200 * 4 + 1)
        #expect(Set(ids).count == ids.count)
    }

    @Test func multiplexFeedsEveryEnabledBackend() async throws {
        let on = InMemoryTraceBackend()
        let off = InMemoryTraceBackend(enabled: false)
        let store = makeStore(MultiplexTraceBackend([on, off]))
        try await store.dispatch(Bump()).value
        #expect(on.events.count == 4)  // store_ready + enqueue, begin, end
        #expect(off.events.isEmpty)
    }

    @Test func traceNamesAreInternedAndCarryACString() {
        let first = TraceName.of(BumpTwice.self)
        let second = TraceName.of(BumpTwice.self)
        #expect(first == second)
        #expect(first.cString == second.cString)
        #expect(String(cString: first.cString) == String(reflecting: BumpTwice.self))
    }
}

struct Blocking: StateUpdater {
    let gate: Gate
    func updateState(_ state: inout TraceState) {
        gate.started.signal()
        gate.release.wait()
    }
}

final class Gate: Sendable {
    let started = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
}

/// Holds the updater lane with a blocked updater, dispatches two `Bump`s (so both queue behind it), lets it go,
/// and waits for both.
func twoBumpsQueuedBehindABlockedUpdater(
    _ store: Store<TraceState, EmptySideEffectDependencyContainer>, whileQueued: () -> Void = {}
) async throws {
    let gate = Gate()
    Thread { store.dispatch(Blocking(gate: gate)) }.start()
    await onThread { gate.started.wait() }
    let first = store.dispatch(Bump())
    let second = store.dispatch(Bump())
    whileQueued()
    gate.release.signal()
    try await first.value
    try await second.value
}
