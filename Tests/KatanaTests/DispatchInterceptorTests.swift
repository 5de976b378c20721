import Dispatch
import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Testing

/// A `DispatchInterceptor` built from a closure, so each test states its interceptor's behaviour in one place.
struct Intercepting: DispatchInterceptor {
    let body: @Sendable (any Dispatchable, (any Dispatchable) throws -> Void) throws -> Void
    init(_ body: @escaping @Sendable (any Dispatchable, (any Dispatchable) throws -> Void) throws -> Void) { self.body = body }
    func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws { try body(item, next) }
}

/// The same behaviour written in the typed form: what the body passes on goes to `next` when it has the item's type
/// (the item itself or a changed copy) and to `forward` otherwise.
struct TypedIntercepting: TypedDispatchInterceptor {
    let body: @Sendable (any Dispatchable, (any Dispatchable) throws -> Void) throws -> Void
    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws {
        try body(item) { passed in
            if let same = passed as? Item { try next(same) } else { try forward(passed) }
        }
    }
}

/// How a test's interceptors reach the store: every behaviour must be the same whichever way.
enum InterceptorPlacement: String, CaseIterable, CustomTestStringConvertible {
    /// In `StoreConfiguration.interceptors`, updaters applied inline on the direct path.
    case configuration
    /// In the configuration, with listeners on a queue: updaters go through the batch path's chain.
    case configurationQueuedListeners
    /// Turned into closures with `storeInterceptor` and given to the initialiser.
    case closures
    /// As closures, with listeners on a queue: updaters go through the batch path's run of the closure chain.
    case closuresQueuedListeners
    /// The first in the configuration, the rest as closures (the two chains joined).
    case mixed
    /// In the configuration, written in the typed form: updaters reach the chain's end with their type.
    case typedConfiguration
    /// Typed, in the configuration, with listeners on a queue (the batch path calls them erased).
    case typedConfigurationQueuedListeners
    /// Typed, as closures.
    case typedClosures
    /// In the configuration, the forms alternating (typed, erased, typed…): the typed chain continues erased.
    case alternatingForms

    var testDescription: String { rawValue }

    private static func typed(_ interceptor: any DispatchInterceptor) -> any DispatchInterceptor {
        (interceptor as? Intercepting).map { TypedIntercepting(body: $0.body) } ?? interceptor
    }

    func store(_ interceptors: [any DispatchInterceptor], backend: any TraceBackend = NoOpTraceBackend()) -> TestStore {
        switch self {
        case .typedConfiguration:
            return Self.configuration.store(interceptors.map(Self.typed), backend: backend)
        case .typedConfigurationQueuedListeners:
            return Self.configurationQueuedListeners.store(interceptors.map(Self.typed), backend: backend)
        case .typedClosures:
            return Self.closures.store(interceptors.map(Self.typed), backend: backend)
        case .alternatingForms:
            let alternating = interceptors.enumerated().map { $0.offset % 2 == 0 ? Self.typed($0.element) : $0.element }
            return Self.configuration.store(alternating, backend: backend)
        case .configuration:
            return makeStore(configuration: .init(traceBackend: backend, interceptors: interceptors))
        case .configurationQueuedListeners:
            let store = makeStore(configuration: .init(listenerExecutor: .queue(DispatchQueue(label: "listeners")),
                                                       traceBackend: backend, interceptors: interceptors))
            store.addListener { _, _ in }
            return store
        case .closures:
            return makeStore(interceptors: interceptors.map(\.storeInterceptor), configuration: .init(traceBackend: backend))
        case .closuresQueuedListeners:
            let store = makeStore(interceptors: interceptors.map(\.storeInterceptor),
                                  configuration: .init(listenerExecutor: .queue(DispatchQueue(label: "listeners")),
                                                       traceBackend: backend))
            store.addListener { _, _ in }
            return store
        case .mixed:
            return makeStore(interceptors: interceptors.dropFirst().map(\.storeInterceptor),
                             configuration: .init(traceBackend: backend, interceptors: Array(interceptors.prefix(1))))
        }
    }
}

@Suite struct DispatchInterceptorTests {
    static let placements = InterceptorPlacement.allCases

    @Test(arguments: placements) func theFirstRunsFirstAndEveryItemGoesThrough(_ placement: InterceptorPlacement) async throws {
        let order = Collector<String>()
        func tag(_ name: String) -> Intercepting { Intercepting { item, next in order.append(name); try next(item) } }
        let store = placement.store([tag("a"), tag("b"), tag("c")])
        try await store.dispatch(Increment()).value
        try await store.dispatch(AppendFromSideEffect(value: 1)).value
        // The updater, then the side effect, then the Append the side effect dispatches: each through a, b, c.
        #expect(order.all == Array(repeating: ["a", "b", "c"], count: 3).flatMap { $0 })
        #expect(store.state.counter == 1)
        #expect(store.state.log == [1])
    }

    @Test(arguments: placements) func throwingBlocksAndRejectsTheHandleWithTheError(_ placement: InterceptorPlacement) async {
        let backend = InMemoryTraceBackend()
        let store = placement.store([Intercepting { item, next in
            if item is Increment || item is AppendFromSideEffect { throw TestError(code: 7) }
            try next(item)
        }], backend: backend)
        await #expect(throws: TestError(code: 7)) { try await store.dispatch(Increment()).value }
        await #expect(throws: TestError(code: 7)) { try await store.dispatch(AppendFromSideEffect(value: 1)).value }
        #expect(store.state == CounterState())
        await #expect(throws: Never.self) { try await store.dispatch(Append(value: 2)).value }
        #expect(store.state.log == [2])
        let outcomes = backend.events.compactMap { event -> (String, DispatchOutcome)? in
            guard case let .end(end) = event else { return nil }
            return (end.name.description, end.outcome)
        }
        #expect(outcomes.contains { $0.0.hasSuffix("Increment") && $0.1 == .blocked })
        #expect(outcomes.contains { $0.0.hasSuffix("Append") && $0.1 == .ok })
    }

    @Test(arguments: placements) func notCallingNextDropsTheItemAndResolvesItsHandle(_ placement: InterceptorPlacement) async throws {
        let store = placement.store([Intercepting { item, next in
            if item is Increment || item is AppendFromSideEffect || item is Fetch { return }
            try next(item)
        }])
        try await store.dispatch(Increment()).value
        try await store.dispatch(AppendFromSideEffect(value: 3)).value
        #expect(store.state == CounterState())
        let result = await store.dispatch(Fetch()).result
        guard case let .failure(error as KatanaError) = result, case .returningSideEffectNotExecuted = error else {
            Issue.record("expected returningSideEffectNotExecuted, got \(result)")
            return
        }
    }

    @Test(arguments: placements) func throwingAfterNextSaysTheItemWasApplied(_ placement: InterceptorPlacement) async throws {
        let store = placement.store([Intercepting { item, next in
            try next(item)
            if item is Increment { throw TestError(code: 9) }
        }])
        let told = Counter()
        store.addListener { _ in told.increment() }
        let result = await store.dispatch(Increment()).result
        guard case let .failure(error as KatanaError) = result, case let .appliedButInterceptorThrew(failure) = error else {
            Issue.record("expected appliedButInterceptorThrew, got \(result)")
            return
        }
        #expect(failure.error as? TestError == TestError(code: 9))
        #expect(store.state.counter == 1)
        #expect(await eventually { told.value == 1 }, "the listeners hear of an applied change")
    }

    @Test(arguments: placements) func nextWithAnotherItemDispatchesThatOneInstead(_ placement: InterceptorPlacement) async throws {
        let store = placement.store([Intercepting { item, next in
            if let append = item as? Append { return try next(Append(value: append.value * 10)) }
            if item is AppendFromSideEffect { return try next(Append(value: -1)) }
            if item is Increment { return try next(AppendFromSideEffect(value: 77)) }
            if item is Fetch { return try next(Increment()) }
            try next(item)
        }])
        try await store.dispatch(Append(value: 4)).value
        #expect(store.state.log == [40])
        try await store.dispatch(AppendFromSideEffect(value: 5)).value
        #expect(store.state.log == [40, -1])
        // An updater replaced by a side effect resolves when the side effect has finished; its Append goes
        // through the interceptor too.
        try await store.dispatch(Increment()).value
        #expect(store.state.log == [40, -1, 770])
        // A returning side effect replaced by an updater: the updater is applied, but it has no String to give.
        let fetched = await store.dispatch(Fetch()).result
        guard case let .failure(error as KatanaError) = fetched, case .returnValueTypeMismatch = error else {
            Issue.record("expected returnValueTypeMismatch, got \(fetched)")
            return
        }
        #expect(store.state.counter == 1)
    }

    /// An updater that waited in the lane, replaced by a side effect: the lane had claimed the updater's handle before
    /// the interceptors ran, and the side effect, handed that handle, must run and resolve it rather than take the
    /// claim for a cancellation (it returned without running, and whoever awaited the handle waited for ever: seen
    /// as a hang of `nextWithAnotherItemDispatchesThatOneInstead` under ThreadSanitizer, where the updater sometimes
    /// found the lane still held by the thread finishing the previous dispatch).
    @Test(arguments: placements) func aQueuedUpdaterReplacedByASideEffectRunsItAndResolvesItsHandle(_ placement: InterceptorPlacement) async throws {
        let store = placement.store([Intercepting { item, next in
            if item is Increment { return try next(AppendFromSideEffect(value: 77)) }
            try next(item)
        }])
        try await store.dispatch(Append(value: 1)).value
        let hold = await LaneHold.start(store, appending: 2)
        let handle = store.dispatch(Increment())
        await hold.release()
        #expect(await eventually(seconds: 30) { handle.isResolved }, "the replaced updater's handle never resolved")
        guard handle.isResolved else { return }
        try await handle.value
        #expect(store.state.log == [1, 2, 77])
        #expect(store.state.counter == 0)
    }

    /// The same, cancelled by its interceptor after the lane claimed it and before the side effect was put in its
    /// place: the side effect starts cancelled and its handle rejects with `CancellationError` (never left pending).
    @Test(arguments: placements) func aQueuedUpdaterCancelledAndReplacedByASideEffectRejectsItsHandle(_ placement: InterceptorPlacement) async throws {
        let pending = Collector<DispatchHandle<Void>>()
        let store = placement.store([Intercepting { item, next in
            if item is Increment {
                pending.all.first?.cancel()
                return try next(AppendFromSideEffect(value: 77))
            }
            try next(item)
        }])
        try await store.dispatch(Append(value: 1)).value
        let hold = await LaneHold.start(store, appending: 2)
        let handle = store.dispatch(Increment())
        pending.append(handle)
        await hold.release()
        #expect(await eventually(seconds: 30) { handle.isResolved }, "the replaced updater's handle never resolved")
        guard handle.isResolved else { return }
        await #expect(throws: CancellationError.self) { try await handle.value }
        #expect(store.state.log.prefix(2) == [1, 2])
    }

    @Test(arguments: placements) func stateReadAfterNextIsTheNewOne(_ placement: InterceptorPlacement) async throws {
        let seen = Collector<(Int, Int)>()
        let store = placement.store([Reading(seen: seen)])
        try await store.dispatch(Increment()).value
        try await store.dispatch(Increment()).value
        #expect(seen.all.map(\.0) == [0, 1])
        #expect(seen.all.map(\.1) == [1, 2])
    }

    @Test(arguments: placements) func callingNextTwiceDispatchesTheSecondAnewPastTheInterceptors(_ placement: InterceptorPlacement) async throws {
        let calls = Counter()
        let store = placement.store([Intercepting { item, next in
            calls.increment()
            try next(item)
            if item is Append { try next(Append(value: 2)) }
        }])
        try await store.dispatch(Append(value: 1)).value
        #expect(await eventually { store.state.log == [1, 2] })
        #expect(calls.value == 1, "the second item went past the interceptors")
    }

    /// `next` called from another thread while the interceptor waits for it (a hop to a queue of the app's, say): that
    /// thread has no run of this store in progress, so the item is dispatched anew, past the interceptors, as a
    /// closure's kept `next` is — applied exactly once, after the run; nothing waits on the lane the waiting thread
    /// holds, and the next dispatch goes through as usual.
    @Test(arguments: placements) func nextCalledFromAnotherThreadAppliesTheItemOnceAndNeverHangs(_ placement: InterceptorPlacement) async throws {
        let calls = Counter()
        let store = placement.store([Intercepting { item, next in
            calls.increment()
            guard let append = item as? Append, append.value == 1 else { return try next(item) }
            // `next` does not outlive `intercept`: the thread lets go of it before `intercept` goes on.
            withoutActuallyEscaping(next) { next in
                let lent = Lent(next)
                let returned = DispatchSemaphore(value: 0)
                Thread {
                    try? lent.next?(item)
                    lent.next = nil
                    returned.signal()
                }.start()
                returned.wait()
            }
        }])
        _ = await store.dispatch(Append(value: 1)).result
        #expect(await eventually { store.state.log == [1] })
        try await store.dispatch(Append(value: 2)).value
        #expect(await eventually { store.state.log == [1, 2] })
        #expect(calls.value == 2, "the item dispatched anew went past the interceptors")
    }

    /// A `next` lent to another thread for the length of a call.
    final class Lent: @unchecked Sendable {
        var next: ((any Dispatchable) throws -> Void)?  // set, called and cleared by the borrowing thread, in turn
        init(_ next: @escaping (any Dispatchable) throws -> Void) { self.next = next }
    }

    @Test(arguments: placements) func callingNextTwiceOnASideEffectRunsItOnceAndDispatchesTheSecondAnew(_ placement: InterceptorPlacement) async throws {
        let sideEffectCalls = Counter()
        let store = placement.store([Intercepting { item, next in
            try next(item)
            guard item is AppendFromSideEffect else { return }
            sideEffectCalls.increment()
            try next(AppendFromSideEffect(value: 2))
        }])
        try await store.dispatch(AppendFromSideEffect(value: 1)).value
        // The second side effect runs on its own task, concurrently with the first: both appends arrive, in either order.
        #expect(await eventually { store.state.log.sorted() == [1, 2] })
        #expect(sideEffectCalls.value == 1, "the second side effect went past the interceptors")
    }

    @Test(arguments: placements) func aBoundContextDispatchesAndEachStoreGetsItsOwnBinding(_ placement: InterceptorPlacement) async throws {
        let bindings = Counter()
        let audit = Auditing(bindings: bindings)
        let first = placement.store([audit]), second = placement.store([audit])
        try await first.dispatch(Append(value: 1)).value
        #expect(bindings.value == 2, "bound once per store")
        // The bound interceptor dispatches an Increment through its own store's context after every Append.
        #expect(await eventually { first.state.counter == 1 })
        #expect(second.state.counter == 0)
    }

    /// The store keeps its interceptors as long as it lives, and no longer (`DispatchInterceptor.bind(to:)`): what one
    /// captures stays alive with the store and is released with it, whichever way the interceptor reached it (the
    /// configuration's are links the store retains by hand and releases in its deinit).
    @Test(arguments: placements) func theStoreKeepsItsInterceptorsExactlyAsLongAsItLives(_ placement: InterceptorPlacement) async throws {
        final class Captured: Sendable {}
        let captured = WeakBox<Captured>()
        let released = WeakBox<TestStore>()
        var store: TestStore?
        do {
            let held = Captured()
            captured.object = held
            store = placement.store([Intercepting { item, next in
                withExtendedLifetime(held) {}
                try next(item)
            }])
        }
        try await store?.dispatch(Increment()).value
        #expect(store?.state.counter == 1)
        #expect(captured.object != nil, "the store let go of its interceptor while it lives")
        released.object = store
        store = nil
        #expect(await eventually { released.object == nil }, "the store was not released")
        #expect(await eventually { captured.object == nil }, "an interceptor outlived its store")
    }

    @Test(arguments: placements) func concurrentProducersLoseNothingThroughTheChain(_ placement: InterceptorPlacement) async {
        let seen = Counter()
        let store = placement.store([Intercepting { item, next in seen.increment(); try next(item) }])
        let perThread = 5_000
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask { await onThread { for _ in 0..<perThread { store.dispatch(Increment()) } } }
            }
        }
        #expect(await eventually { store.state.counter == 4 * perThread })
        #expect(seen.value == 4 * perThread)
    }

    @Test(arguments: placements)
    func anInlineUpdaterThroughTheInterceptorsIsOneCombinedEventWithTheChainsOutcome(_ placement: InterceptorPlacement) async throws {
        let backend = InMemoryTraceBackend(combinesInlineUpdaters: true)
        let store = placement.store([Intercepting { item, next in
            if item is Increment { return }
            try next(item)
        }], backend: backend)
        try await store.dispatch(Increment()).value
        try await store.dispatch(Append(value: 1)).value
        let inline = backend.events.compactMap { event -> UpdaterInlineEvent? in
            if case let .updaterInline(inline) = event { return inline }
            return nil
        }
        #expect(inline.map(\.outcome) == [.blocked, .ok])
    }
}

/// Records (state before, state after) around `next` (written in the typed form).
private struct Reading: TypedDispatchInterceptor {
    let seen: Collector<(Int, Int)>
    var context: (any AnySideEffectContext)?

    func bind(to context: any AnySideEffectContext) -> any DispatchInterceptor {
        Reading(seen: seen, context: context)
    }

    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws {
        let before = (context?.getAnyState() as? CounterState)?.counter ?? -1
        try next(item)
        let after = (context?.getAnyState() as? CounterState)?.counter ?? -1
        seen.append((before, after))
    }
}

/// Counts its bindings; a bound copy dispatches an Increment after each Append it passes on.
private struct Auditing: DispatchInterceptor {
    let bindings: Counter
    var context: (any AnySideEffectContext)?

    func bind(to context: any AnySideEffectContext) -> any DispatchInterceptor {
        bindings.increment()
        return Auditing(bindings: bindings, context: context)
    }

    func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws {
        try next(item)
        if item is Append { context?.anyDispatch(Increment()) }
    }
}

// The README's `DispatchInterceptor` example ("Three interceptor forms"), compiled and run so it stays true.
private enum ReadmeInterceptorExample {
    struct AppState: State { var deleted = false; var profileFetches = 0; var ticks = 0 }
    struct AppDependencies: SideEffectDependencyContainer {
        init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {}
    }
    struct DeleteAccount: StateUpdater { func updateState(_ state: inout AppState) { state.deleted = true } }
    struct Tick: StateUpdater { func updateState(_ state: inout AppState) { state.ticks += 1 } }
    struct Login: StateUpdater { func updateState(_ state: inout AppState) {} }
    struct FetchProfile: DispatchObserverDispatchable, StateUpdater {
        init?(dispatchedItem: any Dispatchable, prevState: any State, currentState: any State) {}
        func updateState(_ state: inout AppState) { state.profileFetches += 1 }
    }
    static let audited = Collector<String>()
    struct AuditLog { func notice(_ message: String) { audited.append(message) } }
    static let auditLog = AuditLog()

    struct Audit: TypedDispatchInterceptor {
        func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                           forward: (any Dispatchable) throws -> Void) throws {
            if item is DeleteAccount { auditLog.notice("account deleted") }
            try next(item)
        }
    }

    static func makeStore() -> Store<AppState, AppDependencies> {
        let store = Store<AppState, AppDependencies>(stateInitializer: { AppState() }, configuration: .init(interceptors: [
            DispatchableLogger.Interceptor(blackList: [Tick.self]),
            ObserverInterceptor.Interceptor([.onDispatch(Login.self, [FetchProfile.self])]),
            Audit(),
        ]))
        return store
    }
}

@Suite struct ReadmeDispatchInterceptorExampleTests {
    @Test func theReadmesInterceptorsLogObserveAndAudit() async throws {
        let store = ReadmeInterceptorExample.makeStore()
        try await store.dispatch(ReadmeInterceptorExample.Login()).value
        try await store.dispatch(ReadmeInterceptorExample.DeleteAccount()).value
        #expect(await eventually { store.state.profileFetches == 1 })
        #expect(store.state.deleted)
        #expect(ReadmeInterceptorExample.audited.all == ["account deleted"])
    }
}
