import Dispatch
import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Testing

/// Writes one element of the state's log in place.
struct Overwrite: StateUpdater {
    let index: Int
    let value: Int
    func updateState(_ state: inout CounterState) {
        state.counter += 1
        state.log[index] = value
    }
}

/// A store whose state holds a 1,000-element log, so a copy of the state's storage shows as a new buffer address.
func makeLoggedStore(configuration: StoreConfiguration = .init(traceBackend: NoOpTraceBackend())) -> TestStore {
    TestStore(stateInitializer: {
        var state = CounterState()
        state.log = Array(repeating: 0, count: 1_000)
        return state
    }, configuration: configuration)
}

func bufferAddress(_ state: CounterState) -> Int {
    state.log.withUnsafeBufferPointer { Int(bitPattern: $0.baseAddress) }
}

@Suite struct NewStateListenerTests {
    @Test func aNewStateListenerGetsEveryStateInOrder() async throws {
        let store = makeStore()
        let seen = Collector<Int>()
        store.addListener(newState: { seen.append($0.counter) })
        var last: DispatchHandle<Void>?
        for _ in 0..<1_000 { last = store.dispatch(Increment()) }
        try await last?.value
        #expect(seen.all == Array(1...1_000))
    }

    /// The point of the form: no copy of the old state is kept, so an updater writing into the state changes it in
    /// place — the storage never moves. An (old, new) listener makes every change copy it (the control).
    @Test func theStateChangesInPlaceWithNewStateListenersOnly() async throws {
        let inPlace = makeLoggedStore()
        let addresses = Collector<Int>()
        inPlace.addListener(newState: { addresses.append(bufferAddress($0)) })
        for index in 0..<100 { try await inPlace.dispatch(Overwrite(index: index, value: index)).value }
        #expect(addresses.count == 100)
        #expect(Set(addresses.all).count == 1, "the log's storage was copied \(Set(addresses.all).count - 1) times")

        let copied = makeLoggedStore()
        let copies = Collector<Int>()
        copied.addListener { _, new in copies.append(bufferAddress(new)) }
        for index in 0..<100 { try await copied.dispatch(Overwrite(index: index, value: index)).value }
        #expect(Set(copies.all).count > 1, "with an (old, new) listener every change copies the state")
    }

    @Test func bothFormsTogetherGetEveryChange() async throws {
        let store = makeStore()
        let pairs = Collector<(Int, Int)>()
        let states = Collector<Int>()
        store.addListener { old, new in pairs.append((old.counter, new.counter)) }
        store.addListener(newState: { states.append($0.counter) })
        var last: DispatchHandle<Void>?
        for _ in 0..<500 { last = store.dispatch(Increment()) }
        try await last?.value
        #expect(pairs.all.map(\.1) == Array(1...500))
        #expect(states.all == Array(1...500), "beside an (old, new) listener every change is delivered")
    }

    @Test func unsubscribingTheLastOldNewListenerStopsTheCopies() async throws {
        let store = makeLoggedStore()
        let unsubscribe = store.addListener { _, _ in }
        let addresses = Collector<Int>()
        store.addListener(newState: { addresses.append(bufferAddress($0)) })
        for index in 0..<10 { try await store.dispatch(Overwrite(index: index, value: 1)).value }
        #expect(Set(addresses.all).count > 1)
        unsubscribe()
        for index in 0..<50 { try await store.dispatch(Overwrite(index: index, value: 2)).value }
        #expect(Set(addresses.all.suffix(49)).count == 1, "after the (old, new) listener left, no more copies")
    }

    /// Two producers: batches may be coalesced, but the states arrive in order and the last is the final state.
    @Test func concurrentProducersDeliverIncreasingStatesEndingWithTheLast() async throws {
        let store = makeStore()
        let seen = Collector<Int>()
        store.addListener(newState: { seen.append($0.counter) })
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask { await onThread { for _ in 0..<20_000 { store.dispatch(Increment()) } } }
            }
        }
        #expect(await eventually { seen.all.last == 40_000 })
        let states = seen.all
        #expect(zip(states, states.dropFirst()).allSatisfy { $0 < $1 }, "states arrive in the store's order")
        #expect(states.count <= 40_000)
    }

    @Test func aNewStateListenerRunsOnTheConfiguredExecutor() async throws {
        let queue = DispatchQueue(label: "new-state-listener-queue")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 9)
        let store = makeStore(configuration: .init(listenerExecutor: .queue(queue), traceBackend: NoOpTraceBackend()))
        let seen = Collector<(Bool, Int)>()
        store.addListener(newState: { seen.append((DispatchQueue.getSpecific(key: key) == 9, $0.counter)) })
        for _ in 0..<100 { store.dispatch(Increment()) }
        #expect(await eventually { seen.all.last?.1 == 100 })
        #expect(seen.all.allSatisfy { $0.0 })
    }
}
