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

/// Takes `amount` off the counter and writes it into the log's first entry, refusing before it changes anything
/// when there is not enough.
struct Spend: ValidatingStateUpdater {
    let amount: Int
    func validate(_ state: CounterState) throws {
        guard state.counter >= amount else { throw NotEnough(have: state.counter) }
    }
    func updateValidatedState(_ state: inout CounterState) {
        state.counter -= amount
        state.log[0] = -amount
    }
}

/// `Spend` as a `ThrowingStateUpdater`, the form that works on a copy.
struct SpendOnACopy: ThrowingStateUpdater {
    let amount: Int
    func updateState(_ state: inout CounterState) throws {
        guard state.counter >= amount else { throw NotEnough(have: state.counter) }
        state.counter -= amount
        state.log[0] = -amount
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
        let seen = Collector<String>()
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

    /// How a dispatch reaches the state: applied as dispatched, queued behind another updater and applied by the lane's
    /// holder, or through an interceptor (applied through its witness at the chain's end).
    enum Path: String, CaseIterable, Sendable { case inline, queued, intercepted }

    /// A store whose log has room to grow (so appending never moves it) and a first entry to write, with `counter`.
    static func spendingStore(_ path: Path, counter: Int) async throws -> TestStore {
        let passOn: StoreInterceptor = { _ in { next in { item in try next(item) } } }
        let store = makeStore(interceptors: path == .intercepted ? [passOn] : [])
        try await store.dispatch(ClosureStateUpdater<CounterState> { state in
            state.log.reserveCapacity(64)
            state.log.append(0)
            state.counter = counter
        }).value
        return store
    }

    /// Dispatches `updater` the way `path` says and returns what its handle gave.
    static func dispatch<U: ThrowingStateUpdater>(_ updater: U, to store: TestStore, _ path: Path) async -> Result<Void, any Error>
        where U.StateType == CounterState {
        let handle: DispatchHandle<Void>
        if path == .queued {
            let hold = await LaneHold.start(store, appending: 7)
            handle = store.dispatch(updater)
            await hold.release()
        } else {
            handle = store.dispatch(updater)
        }
        do { return .success(try await handle.value) } catch { return .failure(error) }
    }

    /// The log's storage, by address: the same after a change made in place, another after a copy.
    static func logStorage(_ store: TestStore) -> Int {
        store.state.log.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) }
    }

    /// A validating updater refuses as a throwing one does — the state as it was, no listener told, outcome `error`,
    /// the handle rejected with its error — and applies as one does, on every path.
    @Test(arguments: Path.allCases)
    func aValidatingUpdaterRefusesAndAppliesAsAThrowingOne(path: Path) async throws {
        let backend = InMemoryTraceBackend()
        let passOn: StoreInterceptor = { _ in { next in { item in try next(item) } } }
        let store = makeStore(interceptors: path == .intercepted ? [passOn] : [], configuration: .init(traceBackend: backend))
        try await store.dispatch(ClosureStateUpdater<CounterState> { $0.log = [0]; $0.counter = 3 }).value
        let changes = Counter()
        store.addListener { _, _ in changes.increment() }
        let held = path == .queued ? [7] : []

        let refused = await Self.dispatch(Spend(amount: 5), to: store, path)
        #expect(throws: NotEnough(have: 3)) { try refused.get() }
        #expect(store.state == counterState(3, [0] + held), "a refused updater must not change the state")
        #expect(changes.value == held.count, "listeners hear of applied updaters only")

        try await Self.dispatch(Spend(amount: 2), to: store, path).get()
        #expect(store.state == counterState(1, [-2] + held + held))
        // Through anyDispatch and a side effect's context too.
        await #expect(throws: NotEnough(have: 1)) { try await store.anyDispatch(Spend(amount: 2)).value }
        struct SpendFromASideEffect: SideEffect {
            func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
                try await context.dispatch(Spend(amount: 1)).value
                try await context.dispatch(Spend(amount: 1)).value
            }
        }
        await #expect(throws: NotEnough(have: 0)) { try await store.dispatch(SpendFromASideEffect()).value }
        #expect(store.state.counter == 0)
        // As a throwing updater, for code that applies updaters itself: validate, then update.
        #expect(throws: NotEnough(have: 0)) { _ = try Spend(amount: 1).updatedState(currentState: store.state) }
        let outcomes = backend.events.compactMap { event -> DispatchOutcome? in
            if case let .end(end) = event, end.name.string.hasSuffix(".Spend") { return end.outcome }
            if case let .updaterInline(inline) = event, inline.name.string.hasSuffix(".Spend") { return inline.outcome }
            return nil
        }
        #expect(outcomes == [.error, .ok, .error, .ok, .error], "\(outcomes)")
    }

    /// What sets the two forms apart: a throwing updater changes a copy of the state, so the log it writes into is
    /// copied whole; a validating one changes the state in place — on every path.
    @Test(arguments: Path.allCases)
    func aValidatingUpdaterChangesTheStateInPlace(path: Path) async throws {
        let inPlace = try await Self.spendingStore(path, counter: 10)
        let before = Self.logStorage(inPlace)
        try await Self.dispatch(Spend(amount: 1), to: inPlace, path).get()
        #expect(inPlace.state.log[0] == -1 && inPlace.state.counter == 9)
        #expect(Self.logStorage(inPlace) == before, "the log was copied")

        let onACopy = try await Self.spendingStore(path, counter: 10)
        let copied = Self.logStorage(onACopy)
        try await Self.dispatch(SpendOnACopy(amount: 1), to: onACopy, path).get()
        #expect(onACopy.state.log[0] == -1 && onACopy.state.counter == 9)
        #expect(Self.logStorage(onACopy) != copied, "a throwing updater works on a copy")
    }
}
