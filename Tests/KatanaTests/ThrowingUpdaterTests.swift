import Dispatch
import Foundation
import Katana
import KatanaTrace
import Testing

struct NotEnough: Error, Equatable {
    let have: Int
}

/// Takes `amount` off the counter, refusing (after touching the state) when there is not enough.
struct Withdraw: ThrowingStateUpdater {
    let amount: Int
    func updateState(_ state: inout CounterState) throws {
        state.log.append(-amount)  // a change that must not survive a refusal
        guard state.counter >= amount else { throw NotEnough(have: state.counter) }
        state.counter -= amount
    }
}

func counterState(_ counter: Int, _ log: [Int]) -> CounterState {
    var state = CounterState()
    state.counter = counter
    state.log = log
    return state
}

@Suite struct ThrowingUpdaterTests {
    @Test func aRefusalLeavesTheStateAsItWasAndRejectsTheHandleWithTheUpdatersError() async throws {
        let backend = InMemoryTraceBackend()
        let store = makeStore(configuration: .init(traceBackend: backend))
        let changes = Counter()
        store.addListener { _, _ in changes.increment() }
        for _ in 0..<3 { store.dispatch(Increment()) }
        try await store.dispatch(Withdraw(amount: 2)).value
        #expect(store.state == counterState(1, [-2]))
        await #expect(throws: NotEnough(have: 1)) { try await store.dispatch(Withdraw(amount: 5)).value }
        #expect(store.state == counterState(1, [-2]), "a refused updater must not change the state")
        #expect(changes.value == 4, "listeners hear of applied updaters only")
        let outcomes = backend.events.compactMap { event -> DispatchOutcome? in
            if case let .end(end) = event, end.name.string.hasSuffix("Withdraw") { return end.outcome }
            return nil
        }
        #expect(outcomes == [.ok, .error])
    }

    @Test func aRefusalInABatchDoesNotDisturbItsNeighbours() async throws {
        let store = makeStore()
        let hold = await LaneHold.start(store, appending: 1)
        // Queued behind the blocked updater: applied in one batch by the lane holder.
        let first = store.dispatch(Increment())
        let refused = store.dispatch(Withdraw(amount: 10))
        let last = store.dispatch(Append(value: 2))
        await hold.release()
        try await first.value
        await #expect(throws: NotEnough(have: 1)) { try await refused.value }
        try await last.value
        #expect(store.state == counterState(1, [1, 2]))
    }

    @Test func anInterceptorSeesTheUpdatersOwnErrorFromNext() async throws {
        let seen = Recorder<String>()
        let interceptor: StoreInterceptor = { _ in { next in { item in
            do { try next(item) } catch {
                seen.append("\(error)")
                throw error
            }
        } } }
        let store = makeStore(interceptors: [interceptor])
        await #expect(throws: NotEnough(have: 0)) { try await store.dispatch(Withdraw(amount: 1)).value }
        #expect(seen.all == ["NotEnough(have: 0)"])
        #expect(store.state == CounterState())
    }

    @Test func anyDispatchAndSideEffectsReachThrowingUpdatersToo() async throws {
        let store = makeStore()
        await #expect(throws: NotEnough(have: 0)) { try await store.anyDispatch(Withdraw(amount: 1)).value }
        struct WithdrawTwice: SideEffect {
            func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
                try await context.dispatch(Increment()).value
                try await context.dispatch(Withdraw(amount: 1)).value
                try await context.dispatch(Withdraw(amount: 1)).value
            }
        }
        await #expect(throws: NotEnough(have: 0)) { try await store.dispatch(WithdrawTwice()).value }
        #expect(store.state.counter == 0)
    }
}
