import Dispatch
import Foundation
import Katana
import KatanaTestSupport
import Synchronization
import Testing

@Suite struct StoreOrderingTests {
    @Test func updatersApplyInDispatchOrder() async throws {
        let store = makeStore()
        var last: DispatchHandle<Void>?
        for value in 0..<5_000 { last = store.dispatch(Append(value: value)) }
        try await last?.value
        #expect(store.state.log == Array(0..<5_000))
    }

    @Test func aSlowUpdaterIsNotOvertakenAndDoesNotBlockOtherDispatchers() async throws {
        let store = makeStore()
        let hold = await LaneHold.start(store, appending: 1)

        // The lane is busy with the slow updater: this dispatch must return at once, unresolved.
        let fast = store.dispatch(Append(value: 2))
        #expect(!fast.isResolved)

        await hold.release()
        try await fast.value
        #expect(store.state.log == [1, 2])
    }

    @Test func eachProducersOrderIsKeptUnderConcurrency() async throws {
        let store = makeStore()
        let producers = 4
        let perProducer = 20_000
        let handles = Collector<DispatchHandle<Void>>()
        await withTaskGroup(of: Void.self) { group in
            for producer in 0..<producers {
                group.addTask {
                    await onThread {
                        var last: DispatchHandle<Void>?
                        for seq in 0..<perProducer { last = store.dispatch(Append(value: producer * 1_000_000 + seq)) }
                        handles.append(last!)
                    }
                }
            }
        }
        for handle in handles.all { try await handle.value }
        let log = store.state.log
        #expect(log.count == producers * perProducer)
        for producer in 0..<producers {
            let mine = log.filter { $0 / 1_000_000 == producer }.map { $0 % 1_000_000 }
            #expect(mine == Array(0..<perProducer), "producer \(producer) saw its updaters reordered")
        }
    }

    @Test func anUpdaterHandleResolvesAfterTheStateIsUpdated() async throws {
        let store = makeStore()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for value in 0..<200 {
                group.addTask {
                    try await store.dispatch(Append(value: value)).value
                    #expect(store.state.log.contains(value))
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func awaitingAnInlineAppliedUpdaterNeedsNoSuspension() async throws {
        let store = makeStore()
        let handle = store.dispatch(Increment())
        // The lane was idle, so dispatch applied the updater on this thread before returning.
        #expect(handle.isResolved)
        #expect(store.state.counter == 1)
        try await handle.value
    }

    @Test func manyAwaitersOfOneHandleAllResume() async throws {
        let store = makeStore()
        let gate = Gate()
        Thread { store.dispatch(BlockingAppend(value: 0, gate: gate)) }.start()
        await onThread { gate.started.wait() }
        let handle = store.dispatch(Append(value: 1))
        let resumed = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<5 {
                group.addTask {
                    _ = await handle.result
                    resumed.increment()
                }
            }
            group.addTask { gate.release.signal() }
        }
        #expect(resumed.value == 5)
        #expect(store.state.log == [0, 1])
    }

    /// Awaiting a handle runs on the awaiting task's executor (`value`, `result` and the cell's wait are
    /// `nonisolated(nonsending)`): inside an actor, the wait must suspend and leave the actor free for other calls,
    /// and resume there with the item's outcome once the lane applies it.
    @Test func aPendingHandleAwaitedInsideAnActorLeavesTheActorFreeAndResumesWithTheOutcome() async throws {
        let store = makeStore()
        let gate = Gate()
        Thread { store.dispatch(BlockingAppend(value: 0, gate: gate)) }.start()
        await onThread { gate.started.wait() }
        let handle = store.dispatch(Append(value: 1))  // queued behind the blocked updater
        let awaiter = HandleAwaiter()
        let waiting = Task { await awaiter.outcome(of: handle) }
        var started = false
        for _ in 0..<12_000 where !started {  // up to 120 s
            started = await awaiter.isWaiting
            if !started { try await Task.sleep(nanoseconds: 10_000_000) }
        }
        #expect(started)
        // The actor answers while its other call waits for the handle.
        let pinged = await within(seconds: 120) { await awaiter.ping() }
        #expect(pinged.finished, "the actor stayed busy while one of its calls awaited a pending handle")
        #expect(await awaiter.pings == 1)
        #expect(!handle.isResolved)
        gate.release.signal()
        let outcome = await within(seconds: 120) { await waiting.value }
        guard case let .finished(.success(result)) = outcome else {
            Issue.record("the awaiting actor never resumed: \(outcome)")
            return
        }
        #expect((try? result.get()) != nil, "\(result)")
        #expect(store.state.log == [0, 1])
        #expect(await awaiter.isWaiting == false)
    }
}

/// An actor that awaits a handle in one of its methods.
actor HandleAwaiter {
    private(set) var isWaiting = false
    private(set) var pings = 0

    func outcome(of handle: DispatchHandle<Void>) async -> Result<Void, any Error> {
        isWaiting = true
        defer { isWaiting = false }
        return await handle.result
    }

    func ping() { pings += 1 }
}
