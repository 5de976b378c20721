import Dispatch
import Foundation
import Katana
import KatanaRedux
import KatanaTrace
import Testing

// MARK: Fixtures

struct CounterState: Equatable, Sendable {
    var count: Int
    var history: [String] = []
}

struct IncrementAction: SimpleStandardAction {
    let rawPayload: Int
    init(payload: Int) { rawPayload = payload }
}

struct DecrementAction: StandardAction {
    let rawPayload: Int?
    let meta: (any Sendable)?
    let error: Bool
    init(payload: Int?, meta: (any Sendable)?, error: Bool) {
        rawPayload = payload
        self.meta = meta
        self.error = error
    }
}

struct ResetAction: Action {}

struct FailedFetch: FluxStandardAction {
    let payload: (any Sendable)?
    var error: Bool { true }
    var type: String { "FETCH_FAILED" }
}

/// The reducer most tests use: starts at 0, records the actions it saw.
let counterReducer: Reducer<CounterState> = { state, action in
    var state = state ?? CounterState(count: 0)
    switch action {
    case let add as IncrementAction: state.count += add.rawPayload
    case let sub as DecrementAction: state.count -= sub.rawPayload ?? 1
    case is ResetAction: state.count = 0
    default: break
    }
    state.history.append("\(type(of: action))")
    return state
}

/// A value shared between threads, behind a lock ThreadSanitizer sees.
final class Locked<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T  // guarded by lock
    init(_ value: T) { self.value = value }
    func withLock<R>(_ body: (inout T) -> R) -> R { lock.withLock { body(&value) } }
}

/// Collects values from any thread.
final class Collector<T: Sendable>: Sendable {
    private let storage = Locked<[T]>([])
    func append(_ value: T) { storage.withLock { $0.append(value) } }
    var values: [T] { storage.withLock { $0 } }
}

// MARK: Actions

@Suite struct ActionTests {
    @Test func fluxStandardActionsHaveTypePayloadMetaAndError() {
        let add = IncrementAction(payload: 3)
        #expect(add.type == "IncrementAction")
        #expect(add.payload as? Int == 3)
        #expect(add.meta == nil)
        #expect(add.error == false)

        let sub = DecrementAction(payload: 2, meta: "from a test", error: false)
        #expect(sub.payload as? Int == 2)
        #expect(sub.meta as? String == "from a test")
        let empty = DecrementAction(payload: nil, meta: nil, error: true)
        #expect(empty.payload == nil)
        #expect(empty.error)

        let failed = FailedFetch(payload: "timeout")
        #expect(failed.type == "FETCH_FAILED" && failed.error && failed.payload as? String == "timeout")
        #expect(DefaultAction().type == DefaultAction.type)
    }
}

// MARK: Store

@Suite struct ReduxStoreTests {
    @Test func dispatchReducesIntoTheStateInOrder() async throws {
        let store = createStore(reducer: counterReducer, state: CounterState(count: 10))
        #expect(store.state.count == 10)
        try store.dispatch(IncrementAction(payload: 5))
        try await store.dispatch(DecrementAction(payload: 3, meta: nil, error: false)).value
        #expect(store.getState().count == 12)
        #expect(store.state.history == ["IncrementAction", "DecrementAction"])
        try await store.dispatch(ResetAction()).value
        #expect(store.state.count == 0)
    }

    @Test func withoutAnInitialStateTheReducerMakesItFromDefaultAction() {
        let seen = Collector<String>()
        let store = createStore(reducer: { (state: CounterState?, action) in
            seen.append("\(state == nil ? "nil" : "state"), \(action)")
            return counterReducer(state, action)
        })
        #expect(seen.values == ["nil, DefaultAction()"])
        #expect(store.state == CounterState(count: 0, history: ["DefaultAction"]))
    }

    @Test func subscribersGetEveryNewStateButNotOnSubscribeAndStopWhenDisposed() async throws {
        let store = createStore(reducer: counterReducer, state: CounterState(count: 0))
        let seen = Collector<Int>()
        let subscription = store.subscribe { seen.append($0.count) }
        #expect(seen.values.isEmpty, "subscribing must not emit")
        #expect(subscription.disposed == false)
        try await store.dispatch(IncrementAction(payload: 1)).value
        try await store.dispatch(IncrementAction(payload: 2)).value
        #expect(seen.values == [1, 3])
        subscription.dispose()
        subscription.dispose()
        #expect(subscription.disposed)
        try await store.dispatch(IncrementAction(payload: 4)).value
        #expect(seen.values == [1, 3])
        #expect(store.state.count == 7)
    }

    @Test func combinedReducersRunInOrderOnTheSameState() async throws {
        let double: Reducer<CounterState> = { state, _ in
            var state = state!
            state.count *= 2
            return state
        }
        let store = createStore(reducer: combineReducers(counterReducer, double), state: CounterState(count: 1))
        try await store.dispatch(IncrementAction(payload: 2)).value
        #expect(store.state.count == 6)  // (1 + 2) * 2, not 1 * 2 + 2
    }

    struct AppState: Sendable, Equatable {
        var counter = 0
        var log: [String] = []
    }

    @Test func keyedPartsEachGetNilFirstThenTheirOwnPart() async throws {
        let counter: Reducer<Int> = { state, action in
            let value = state ?? 100
            return (action as? IncrementAction).map { value + $0.rawPayload } ?? value
        }
        let log: Reducer<[String]> = { state, action in (state ?? ["start"]) + ["\(type(of: action))"] }
        let reducer = combineReducers([part(\AppState.counter, counter), part(\AppState.log, log)], initial: { AppState() })
        let store = createStore(reducer: reducer)
        #expect(store.state == AppState(counter: 100, log: ["start", "DefaultAction"]))
        try await store.dispatch(IncrementAction(payload: 5)).value
        #expect(store.state == AppState(counter: 105, log: ["start", "DefaultAction", "IncrementAction"]))
    }

    @Test func dispatchingFromInsideAReducerIsAnErrorTheCallerSees() async throws {
        let box = Locked<ReduxStore<CounterState>?>(nil)
        let caught = Collector<KatanaError>()
        let reducer: Reducer<CounterState> = { state, action in
            if action is ResetAction, let store = box.withLock({ $0 }) {
                do { try store.dispatch(IncrementAction(payload: 1000)) } catch let error as KatanaError {
                    caught.append(error)
                } catch {}
                // Reading the state inside the reducer answers the reducer's own input instead of deadlocking.
                #expect(store.state == state)
            }
            return counterReducer(state, action)
        }
        let store = createStore(reducer: reducer, state: CounterState(count: 1))
        box.withLock { $0 = store }
        try await store.dispatch(ResetAction()).value
        try await store.dispatch(IncrementAction(payload: 2)).value
        #expect(caught.values == [.dispatchFromReducer("IncrementAction")])
        #expect(store.state.count == 2, "the nested action must not have been applied")
        #expect(store.state.history == ["ResetAction", "IncrementAction"])
        #expect("\(caught.values[0])".contains("reducer"))
    }

    @Test func concurrentDispatchersLoseNothingAndEachKeepsItsOrder() async throws {
        struct Tagged: Action { let producer: Int; let sequence: Int }
        struct Seen: Sendable { var lastPerProducer: [Int] = Array(repeating: -1, count: 4); var total = 0; var outOfOrder = 0 }
        let store = createStore(reducer: { (state: Seen?, action) in
            var seen = state ?? Seen()
            guard let tagged = action as? Tagged else { return seen }
            if tagged.sequence != seen.lastPerProducer[tagged.producer] + 1 { seen.outOfOrder += 1 }
            seen.lastPerProducer[tagged.producer] = tagged.sequence
            seen.total += 1
            return seen
        })
        let perProducer = 5_000
        let last = Locked<[DispatchHandle<Void>]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { producer in
            var handle: DispatchHandle<Void>?
            for sequence in 0..<perProducer { handle = try? store.dispatch(Tagged(producer: producer, sequence: sequence)) }
            last.withLock { $0.append(handle!) }
        }
        for handle in last.withLock({ $0 }) { try await handle.value }
        #expect(store.state.total == 4 * perProducer)
        #expect(store.state.outOfOrder == 0)
    }
}

// MARK: Middleware

@Suite struct MiddlewareTests {
    /// Records "name>" before and "<name" after passing the action on.
    func recording(_ name: String, into log: Collector<String>) -> Middleware<CounterState> {
        { _, _ in { next in { action in
            log.append("\(name)>\(type(of: action))")
            defer { log.append("<\(name)") }
            return try next(action)
        } } }
    }

    @Test func theFirstMiddlewareIsOutermost() async throws {
        let log = Collector<String>()
        let store = applyMiddleware([recording("a", into: log), recording("b", into: log)])(createStore)(counterReducer, CounterState(count: 0))
        try await store.dispatch(IncrementAction(payload: 1)).value
        #expect(log.values == ["a>IncrementAction", "b>IncrementAction", "<b", "<a"])
        #expect(store.state.count == 1)
    }

    @Test func dispatchFromMiddlewareReentersTheWholeChainAndGetStateIsCurrent() async throws {
        let log = Collector<String>()
        let states = Collector<Int>()
        // Turns a reset into "subtract the current count", dispatched anew through every middleware.
        let resetAsSubtract: Middleware<CounterState> = { getState, dispatch in { next in { action in
            guard action is ResetAction else {
                let handle = try next(action)
                states.append(getState().count)  // after next: the action is already reduced
                return handle
            }
            return try dispatch(DecrementAction(payload: getState().count, meta: "reset", error: false))
        } } }
        let store = createStore(reducer: counterReducer, state: CounterState(count: 0),
                                middleware: [recording("outer", into: log), resetAsSubtract])
        try await store.dispatch(IncrementAction(payload: 7)).value
        try await store.dispatch(ResetAction()).value
        #expect(store.state.count == 0)
        #expect(store.state.history == ["IncrementAction", "DecrementAction"])
        #expect(log.values == ["outer>IncrementAction", "<outer", "outer>ResetAction", "outer>DecrementAction", "<outer", "<outer"])
        #expect(states.values == [7, 0])
    }

    @Test func aMiddlewareThatDoesNotCallNextDropsTheActionAndOneThatThrowsReachesTheCaller() async throws {
        struct Refused: Error, Equatable {}
        let gate: Middleware<CounterState> = { _, _ in { next in { action in
            if action is ResetAction { throw Refused() }
            if let add = action as? IncrementAction, add.rawPayload < 0 { return try next(ResetAction()) }
            if action is DecrementAction { return try next(IncrementAction(payload: 0)) }
            return try next(action)
        } } }
        let store = createStore(reducer: counterReducer, state: CounterState(count: 3), middleware: [gate])
        #expect(throws: Refused()) { try store.dispatch(ResetAction()) }
        try await store.dispatch(IncrementAction(payload: 2)).value
        #expect(store.state.count == 5)
        #expect(store.state.history == ["IncrementAction"])
    }

    @Test func boundActionCreatorsMakeAndDispatchTheirAction() async throws {
        let store = createStore(reducer: counterReducer, state: CounterState(count: 0))
        let add = bindActionCreators(IncrementAction.self, dispatch: store.dispatch)
        let subtract = bindActionCreators(DecrementAction.self, dispatch: store.dispatch)
        _ = try add(10)
        try await subtract(4).value
        try await subtract(nil).value
        #expect(store.state.count == 5)
        #expect(store.state.history == ["IncrementAction", "DecrementAction", "DecrementAction"])
    }
}

// MARK: State stream

@Suite struct StateStreamTests {
    @Test func theStreamStartsWithTheCurrentStateThenEveryChangeInOrder() async throws {
        let store = createStore(reducer: counterReducer, state: CounterState(count: 1))
        var iterator = store.states().makeAsyncIterator()
        #expect(await iterator.next()?.count == 1)
        for payload in 1...50 { try store.dispatch(IncrementAction(payload: payload)) }
        var expected = 1
        for payload in 1...50 {
            expected += payload
            #expect(await iterator.next()?.count == expected)
        }
    }

    @Test func concurrentDispatchesReachTheStreamOnceEachInVersionOrder() async throws {
        let store = createStore(reducer: counterReducer, state: CounterState(count: 0))
        let stream = store.states()
        let producers = Task.detached {
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                for _ in 0..<500 { _ = try? store.dispatch(IncrementAction(payload: 1)) }
            }
        }
        var counts: [Int] = []
        for await state in stream {
            counts.append(state.count)
            if state.count == 1_000 { break }
        }
        await producers.value
        // Every value from the first seen up to 1000, each once, increasing.
        #expect(counts == Array(counts.first!...1_000))
    }

    @Test func leavingTheLoopEndsTheSubscription() async throws {
        let store = createStore(reducer: counterReducer, state: CounterState(count: 0))
        #expect(store.store.listenerCount == 0)
        do {
            var iterator = store.states().makeAsyncIterator()
            #expect(store.store.listenerCount == 1)
            _ = await iterator.next()
        }
        // The stream is gone: its termination removed its listener.
        #expect(store.store.listenerCount == 0)

        let task = Task {
            for await state in store.states() where state.count >= 3 { return state.count }
            return -1
        }
        while store.store.listenerCount == 0 { await Task.yield() }
        for _ in 0..<3 { try store.dispatch(IncrementAction(payload: 1)) }
        #expect(await task.value == 3)
        #expect(store.store.listenerCount == 0)
    }
}

// MARK: Tracing

@Suite struct ReduxTracingTests {
    @Test func actionsAppearInTracesUnderTheirOwnTypeNames() async throws {
        let backend = InMemoryTraceBackend()
        let store = ReduxStore(reducer: counterReducer, state: CounterState(count: 0),
                               configuration: .init(traceBackend: backend))
        try await store.dispatch(IncrementAction(payload: 1)).value
        try await store.dispatch(ResetAction()).value
        let names = backend.events.compactMap { event -> String? in
            if case let .end(end) = event { return "\(end.kind):\(end.name.string):\(end.outcome)" }
            return nil
        }
        #expect(names == ["state_updater:KatanaReduxTests.IncrementAction:ok", "state_updater:KatanaReduxTests.ResetAction:ok"])
        let begins = backend.events.filter { if case .begin = $0 { true } else { false } }
        let enqueues = backend.events.filter { if case .enqueue = $0 { true } else { false } }
        #expect(begins.count == 2 && enqueues.count == 2)
    }
}

// MARK: The README's example, compiled and run so it stays true

enum ReadmeExample {
    struct AppState: Sendable { var count = 0 }

    struct IncrementAction: SimpleStandardAction {
        let rawPayload: Int
        init(payload: Int) { rawPayload = payload }
    }

    static let reducer: Reducer<AppState> = { state, action in
        var state = state ?? AppState()
        if let increment = action as? IncrementAction { state.count += increment.rawPayload }
        return state
    }
}

@Suite struct ReadmeReduxExampleTests {
    @Test func theReadmeExampleRunsAndPrintsWhatItSays() async throws {
        typealias AppState = ReadmeExample.AppState
        typealias IncrementAction = ReadmeExample.IncrementAction
        let printed = Collector<String>()
        let logger: Middleware<AppState> = { getState, _ in { next in { action in
            printed.append("dispatching \(type(of: action))")
            defer { printed.append("state is now \(getState().count)") }
            return try next(action)
        } } }

        let store = createStore(reducer: ReadmeExample.reducer, middleware: [logger])
        let subscription = store.subscribe { printed.append("subscriber: \($0.count)") }
        let increment = bindActionCreators(IncrementAction.self, dispatch: store.dispatch)
        try await increment(2).value
        try await store.dispatch(IncrementAction(payload: 3)).value
        subscription.dispose()
        #expect(store.state.count == 5)
        #expect(printed.values == [
            "dispatching IncrementAction", "subscriber: 2", "state is now 2",
            "dispatching IncrementAction", "subscriber: 5", "state is now 5",
        ])
    }
}
