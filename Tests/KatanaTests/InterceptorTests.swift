import Foundation
import InMemoryLogging
import Katana
import KatanaTestSupport
import KatanaTrace
import Logging
import Synchronization
import Testing

struct Fetch: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws -> String { "fetched" }
}

func recording(_ tag: String, into recorder: Collector<String>) -> StoreInterceptor {
    { _ in { next in { item in
        recorder.append(tag)
        try next(item)
    } } }
}

/// An updater type of its own per `Tag`: `Nested<Nested<…>>` makes as many as a test needs.
struct AppendTagged<Tag>: StateUpdater {
    let value: Int
    func updateState(_ state: inout CounterState) { state.log.append(value) }
}

enum Nested<Inner> {}

/// Dispatches `AppendTagged<Nested<…<Tag>…>>(value:)`, `depth` levels of `Nested` deep: a type per depth.
func dispatchTagged<Tag>(_ store: TestStore, depth: Int, _: Tag.Type, value: Int) -> DispatchHandle<Void> {
    depth == 0 ? store.dispatch(AppendTagged<Tag>(value: value))
               : dispatchTagged(store, depth: depth - 1, Nested<Tag>.self, value: value)
}

@Suite struct InterceptorTests {
    /// The composed chain is kept in a box the store retains by hand: releasing the store must release it, and with
    /// it everything its interceptors captured.
    @Test func releasingTheStoreReleasesWhatItsInterceptorsCaptured() async throws {
        final class Captured: Sendable {}
        let watcher = WeakBox<Captured>()
        let storeWatcher = WeakBox<TestStore>()
        do {
            let captured = Captured()
            watcher.object = captured
            let holding: StoreInterceptor = { _ in { next in { item in
                withExtendedLifetime(captured) {}
                try next(item)
            } } }
            let store = makeStore(interceptors: [holding])
            storeWatcher.object = store
            try await store.dispatch(Increment()).value
            #expect(store.state.counter == 1)
        }
        #expect(await eventually { storeWatcher.object == nil }, "the store was not released")
        #expect(await eventually { watcher.object == nil }, "the store's interceptor chain outlived the store")
    }

    /// The closure chain's last `next` ends an inline run through an end made per updater type, kept in a few
    /// slots (`LaneChainEnds`); a queued updater's run and a side effect's have ends of their own. Forty updater
    /// types share the slots, inline, queued behind a held lane, and again inline: each item passes both
    /// interceptors once and is applied once, in dispatch order.
    @Test func updatersOfManyTypesThroughClosuresAreEachAppliedOnceInOrder() async throws {
        let seen = Collector<String>()
        let watching: StoreInterceptor = { _ in { next in { item in
            seen.append("\(type(of: item))")
            try next(item)
        } } }
        let store = makeStore(interceptors: [watching, watching])
        let types = 40
        for depth in 0..<types { try await dispatchTagged(store, depth: depth, Never.self, value: depth).value }
        let hold = await LaneHold.start(store, appending: -1)
        let queued = (0..<types).map { dispatchTagged(store, depth: $0, Never.self, value: 100 + $0) }
        await hold.release()
        for handle in queued { try await handle.value }
        try await store.dispatch(AppendFromSideEffect(value: 999)).value
        for depth in 0..<types { try await dispatchTagged(store, depth: depth, Never.self, value: 200 + depth).value }

        let expected = Array(0..<types) + [-1] + Array(100..<(100 + types)) + [999] + Array(200..<(200 + types))
        #expect(store.state.log == expected)
        #expect(seen.all.filter { $0.hasPrefix("AppendTagged<") }.count == 2 * 3 * types)
        #expect(Set(seen.all.filter { $0.hasPrefix("AppendTagged<") }).count == types)
    }

    @Test func theFirstInterceptorRunsFirst() async throws {
        let order = Collector<String>()
        let store = makeStore(interceptors: [recording("a", into: order), recording("b", into: order), recording("c", into: order)])
        try await store.dispatch(Increment()).value
        try await store.dispatch(AppendFromSideEffect(value: 1)).value
        #expect(Array(order.all.prefix(3)) == ["a", "b", "c"])
        #expect(store.state.counter == 1)
        #expect(store.state.log == [1])
    }

    @Test func aThrowingInterceptorBlocksTheItemAndRejectsItsHandle() async {
        let blocker: StoreInterceptor = { _ in { next in { item in
            if item is Increment { throw TestError(code: 7) }
            try next(item)
        } } }
        let store = makeStore(interceptors: [blocker])
        await #expect(throws: TestError(code: 7)) { try await store.dispatch(Increment()).value }
        await #expect(throws: TestError(code: 7)) { try await store.anyDispatch(Increment()).value }
        #expect(store.state.counter == 0)
        await #expect(throws: Never.self) { try await store.dispatch(Append(value: 1)).value }
    }

    @Test func aSwallowingInterceptorDropsTheItemButResolvesItsHandle() async throws {
        let swallow: StoreInterceptor = { _ in { next in { item in
            if item is Increment || item is Fetch || item is AppendFromSideEffect { return }
            try next(item)
        } } }
        let store = makeStore(interceptors: [swallow])
        try await store.dispatch(Increment()).value
        try await store.dispatch(AppendFromSideEffect(value: 3)).value
        #expect(store.state == CounterState())
        // A returning side effect has no value to give: its handle is rejected with a typed error.
        let result = await store.dispatch(Fetch()).result
        guard case let .failure(error as KatanaError) = result, case .returningSideEffectNotExecuted = error else {
            Issue.record("expected returningSideEffectNotExecuted, got \(result)")
            return
        }
    }

    @Test func callingNextWithAnotherItemDispatchesThatOneInstead() async throws {
        let replace: StoreInterceptor = { _ in { next in { item in
            if let append = item as? Append { return try next(Append(value: append.value * 10)) }
            if item is AppendFromSideEffect { return try next(Append(value: -1)) }
            if item is Increment { return try next(AppendFromSideEffect(value: 77)) }
            try next(item)
        } } }
        let store = makeStore(interceptors: [replace])
        try await store.dispatch(Append(value: 4)).value
        #expect(store.state.log == [40])
        try await store.dispatch(AppendFromSideEffect(value: 5)).value
        #expect(store.state.log == [40, -1])
        // An updater replaced by a side effect: its handle resolves when the side effect has finished. The side
        // effect's own Append(77) goes through the interceptors too, so it lands as 770.
        try await store.dispatch(Increment()).value
        #expect(store.state.log == [40, -1, 770])
        #expect(store.state.counter == 0)
    }

    @Test func stateReadAfterNextIsTheNewState() async throws {
        let seen = Collector<(Int, Int)>()
        let observer: StoreInterceptor = { context in { next in { item in
            let before = (context.getAnyState() as? CounterState)?.counter ?? -1
            try next(item)
            let after = (context.getAnyState() as? CounterState)?.counter ?? -1
            seen.append((before, after))
        } } }
        let store = makeStore(interceptors: [observer])
        try await store.dispatch(Increment()).value
        try await store.dispatch(Increment()).value
        #expect(seen.all.map(\.0) == [0, 1])
        #expect(seen.all.map(\.1) == [1, 2])
    }

    @Test func aDeferredNextDispatchesTheItemPastTheInterceptors() async throws {
        let passes = Counter()
        let deferring: StoreInterceptor = { _ in { next in { item in
            passes.increment()
            if item is Increment {
                DispatchQueue.global().async { try? next(item) }
                return
            }
            try next(item)
        } } }
        let store = makeStore(interceptors: [deferring])
        store.dispatch(Increment())
        #expect(await eventually { store.state.counter == 1 })
        #expect(passes.value == 1)
    }

    /// An updater runs through the closures inline, on the dispatching thread; the chain's last `next` knows that
    /// run by its thread. A `next` kept from an earlier dispatch and called from another thread meanwhile is a
    /// deferred call: its item is dispatched anew, after the running one — never taken as the running one's `next`.
    @Test func aKeptNextCalledFromAnotherThreadDuringADispatchIsDispatchedAnewAfterIt() async throws {
        let kept = Collector<StoreInterceptorNext>()
        let interceptor: StoreInterceptor = { _ in { next in { item in
            if let append = item as? Append {
                if append.value == 1 { kept.append(next) }
                if append.value == 2 {
                    let returned = DispatchSemaphore(value: 0)
                    let keptNext = kept.all.first
                    Thread {
                        try? keptNext?(Append(value: 3))
                        returned.signal()
                    }.start()
                    returned.wait()
                }
            }
            try next(item)
        } } }
        let store = makeStore(interceptors: [interceptor])
        try await store.dispatch(Append(value: 1)).value
        try await store.dispatch(Append(value: 2)).value
        #expect(await eventually { store.state.log.count == 3 })
        #expect(store.state.log == [1, 2, 3])
    }

    /// A `next` kept past its store's life refuses what it is given, with `storeReleased`: it neither applies the
    /// item to a released store nor crashes (the chain's last `next` holds the store weakly).
    @Test func aNextKeptPastItsStoresLifeThrowsStoreReleased() async throws {
        let kept = Collector<StoreInterceptorNext>()
        let storeWatcher = WeakBox<TestStore>()
        do {
            let keeping: StoreInterceptor = { _ in { next in
                kept.append(next)
                return { item in try next(item) }
            } }
            let store = makeStore(interceptors: [keeping])
            storeWatcher.object = store
            try await store.dispatch(Increment()).value
            #expect(store.state.counter == 1)
        }
        #expect(await eventually { storeWatcher.object == nil }, "the store was not released")
        let next = try #require(kept.all.first)
        #expect(throws: KatanaError.storeReleased) { try next(Increment()) }
    }

    @Test func middlewareWorksAsAnInterceptor() async throws {
        let seen = Collector<String>()
        let middleware: StoreMiddleware = { getState, dispatch in { next in { action in
            seen.append("\(type(of: action)) at \((getState() as? CounterState)?.counter ?? -1)")
            if action is Increment { dispatch(Append(value: 42)) }
            next(action)
        } } }
        let store = makeStore(interceptors: [middlewareToInterceptor(middleware)])
        try await store.dispatch(Increment()).value
        #expect(await eventually { store.state.log == [42] })
        #expect(store.state.counter == 1)
        #expect(seen.all == ["Increment at 0", "Append at 1"])
    }

    @Test func middlewareCannotHideAnErrorFromTheRestOfTheChain() async {
        let passThrough: StoreMiddleware = { _, _ in { next in { next($0) } } }
        let blocker: StoreInterceptor = { _ in { _ in { _ in throw TestError(code: 9) } } }
        let store = makeStore(interceptors: [middlewareToInterceptor(passThrough), blocker])
        await #expect(throws: TestError(code: 9)) { try await store.dispatch(Increment()).value }
    }

    @Test(arguments: [false, true]) func dispatchableLoggerLogsEveryItemButTheBlackListed(asDispatchInterceptor: Bool) async throws {
        let handler = InMemoryLogHandler()
        let logger = Logger(label: "test") { _ in handler }
        let store = asDispatchInterceptor
            ? makeStore(configuration: .init(traceBackend: NoOpTraceBackend(),
                                             interceptors: [DispatchableLogger.Interceptor(blackList: [Append.self], logger: logger)]))
            : makeStore(interceptors: [DispatchableLogger.interceptor(blackList: [Append.self], logger: logger)])
        try await store.dispatch(Increment()).value
        try await store.dispatch(Append(value: 1)).value
        try await store.dispatch(AppendFromSideEffect(value: 2)).value
        let messages = handler.entries.map { "\($0.message)" }
        #expect(messages == ["dispatched KatanaTests.Increment", "dispatched KatanaTests.AppendFromSideEffect"])
        #expect(store.state.log == [1, 2])
    }
}
