import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Synchronization
import Testing

/// Holds the state initializer's work until the test runs it.
final class DeferredExecutor: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var work: (@Sendable () -> Void)?

    var executor: StoreExecutor {
        .custom { work in
            self.lock.lock()
            self.work = work
            self.lock.unlock()
        }
    }

    func runHeldWork() {
        lock.lock()
        let work = self.work
        self.work = nil
        lock.unlock()
        work?()
    }
}

struct StartMarker: OnStartObserverDispatchable, StateUpdater {
    init?() {}
    func updateState(_ state: inout CounterState) { state.log.append(999) }
}

struct AppendFromSideEffect: SideEffect {
    let value: Int
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(Append(value: value)).value
    }
}

@Suite struct ReadinessTests {
    @Test func itemsDispatchedBeforeReadyAreHeldThenRunInOrder() async throws {
        let deferred = DeferredExecutor()
        let interceptorInits = Counter()
        let counting: StoreInterceptor = { _ in
            interceptorInits.increment()
            return { next in { try next($0) } }
        }
        let store = TestStore(
            interceptors: [counting, ObserverInterceptor.observe([.onStart([StartMarker.self])])],
            stateInitializer: {
                var state = CounterState()
                state.log = [100]
                return state
            },
            configuration: .init(stateInitializerExecutor: deferred.executor, traceBackend: NoOpTraceBackend())
        )
        #expect(!store.isReady)
        let first = store.dispatch(Append(value: 1))
        let sideEffect = store.dispatch(AppendFromSideEffect(value: 2))
        let third = store.dispatch(Append(value: 3))
        #expect(!first.isResolved && !sideEffect.isResolved && !third.isResolved)
        #expect(interceptorInits.value == 0)
        #expect(store.state.log == [])

        deferred.runHeldWork()
        #expect(store.isReady)
        try await first.value
        try await sideEffect.value
        try await third.value
        #expect(interceptorInits.value == 1)
        #expect(await eventually { store.state.log.contains(999) })
        let log = store.state.log
        #expect(log.first == 100)
        #expect(log.filter { $0 != 2 && $0 != 999 } == [100, 1, 3])
        // The onStart item was dispatched when the interceptors were initialised, after the held items.
        #expect(log.firstIndex(of: 999)! > log.firstIndex(of: 3)!)
    }

    @Test func theDefaultStoreIsReadyWhenInitReturns() {
        let store = makeStore()
        #expect(store.isReady)
        #expect(store.dispatch(Increment()).isResolved)
    }

    /// Ready means the initializer has run and the interceptors are set up (``PartialStore/isReady``): the items kept
    /// until then run after it, and see the store ready. (It read as not ready until every kept item had run, so a task
    /// that awaited the first dispatch could find the store not ready after it: `aStateInitializerOnAQueueMakesTheStoreReadyLater`
    /// failed so in 2 of 8 runs of the core suites under ThreadSanitizer.)
    @Test func itemsKeptUntilReadySeeTheStoreReady() async throws {
        let deferred = DeferredExecutor()
        let store = TestStore(interceptors: [], stateInitializer: { CounterState() },
                              configuration: .init(stateInitializerExecutor: deferred.executor, traceBackend: NoOpTraceBackend()))
        let seen = Collector<Bool>()
        store.addListener { [weak store] _, _ in seen.append(store?.isReady ?? false) }
        let first = store.dispatch(Increment()), second = store.dispatch(Increment())
        #expect(!store.isReady)
        deferred.runHeldWork()
        try await first.value
        try await second.value
        #expect(seen.all == [true, true], "what the kept items' listeners saw")
        #expect(store.isReady)
    }

    @Test func aStateInitializerOnAQueueMakesTheStoreReadyLater() async throws {
        let queue = DispatchQueue(label: "init")
        let store = TestStore(interceptors: [], stateInitializer: {
            var state = CounterState()
            state.counter = 41
            return state
        }, configuration: .init(stateInitializerExecutor: .queue(queue), traceBackend: NoOpTraceBackend()))
        try await store.dispatch(Increment()).value
        #expect(store.state.counter == 42)
        #expect(store.isReady)
    }
}
