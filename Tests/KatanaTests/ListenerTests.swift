import Dispatch
import Foundation
import Katana
import KatanaTrace
import Synchronization
import Testing

@Suite struct ListenerTests {
    @Test func listenersGetEveryChangeInOrder() async throws {
        let store = makeStore()
        let seen = Recorder<(Int, Int)>()
        store.addListener { old, new in seen.append((old.counter, new.counter)) }
        var last: DispatchHandle<Void>?
        for _ in 0..<1_000 { last = store.dispatch(Increment()) }
        try await last?.value
        let pairs = seen.all
        #expect(pairs.count == 1_000)
        #expect(pairs.map(\.0) == Array(0..<1_000))
        #expect(pairs.map(\.1) == Array(1...1_000))
    }

    @Test func listenersGetEveryChangeFromConcurrentProducersInTheStoresOrder() async throws {
        let store = makeStore()
        let seen = Recorder<(Int, Int)>()
        store.addListener { old, new in seen.append((old.counter, new.counter)) }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask { await onThread { for _ in 0..<20_000 { store.dispatch(Increment()) } } }
            }
        }
        #expect(await eventually { seen.count == 40_000 })
        let pairs = seen.all
        #expect(pairs.map(\.0) == Array(0..<40_000))
        #expect(pairs.allSatisfy { $0.1 == $0.0 + 1 })
    }

    @Test func listenersRunOnTheConfiguredExecutor() async throws {
        let queue = DispatchQueue(label: "listener-queue")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let store = makeStore(configuration: .init(listenerExecutor: .queue(queue), traceBackend: NoOpTraceBackend()))
        let onQueue = Recorder<Bool>()
        store.addListener { _, _ in onQueue.append(DispatchQueue.getSpecific(key: key) == 7) }
        for _ in 0..<100 { store.dispatch(Increment()) }
        #expect(await eventually { onQueue.count == 100 })
        #expect(onQueue.all.allSatisfy { $0 })
    }

    @Test func unsubscribeStopsTheListener() async throws {
        let store = makeStore()
        let calls = Counter()
        let unsubscribe = store.addListener { _, _ in calls.increment() }
        try await store.dispatch(Increment()).value
        unsubscribe()
        unsubscribe()
        try await store.dispatch(Increment()).value
        #expect(calls.value == 1)
    }

    @Test func addingAndRemovingListenersFromManyThreadsIsSafe() async throws {
        let store = makeStore()
        let stayer = Counter()
        store.addListener { _, _ in stayer.increment() }
        let transient = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    await onThread {
                        for _ in 0..<500 {
                            let off = store.addListener { _, _ in transient.increment() }
                            store.dispatch(Increment())
                            off()
                        }
                    }
                }
            }
        }
        // Every transient listener is gone: one more change reaches only the one that stayed.
        #expect(await eventually { stayer.value == 2_000 })
        let before = transient.value
        try await store.dispatch(Increment()).value
        #expect(await eventually { stayer.value == 2_001 })
        #expect(transient.value == before)
        #expect(store.state.counter == 2_001)
    }

    @Test func aListenerMayDispatchAndReadTheStore() async throws {
        let store = makeStore()
        let reads = Recorder<Int>()
        store.addListener { _, new in
            reads.append(store.state.counter)
            if new.counter < 5 { store.dispatch(Increment()) }
        }
        store.dispatch(Increment())
        #expect(await eventually { store.state.counter == 5 })
        #expect(await eventually { reads.count == 5 })
    }
}
