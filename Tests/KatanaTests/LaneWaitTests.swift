import Dispatch
import Foundation
@testable import Katana
import KatanaTestSupport
import KatanaTrace
import Synchronization
import Testing

/// The brief wait for a lane another thread holds (`LaneWord.spinTake`), with real threads.
@Suite struct LaneWaitTests {
    @Test func aWaitingDispatchTakesTheLaneWhenItsHolderGivesItBack() async {
        let word = LaneWord()
        word.bits.store(0, ordering: .releasing)  // ready, idle
        let holder: UInt = 0xA000, waiter: UInt = 0xB000
        #expect(word.tryTake(thread: holder))
        let waiting = Atomic<Bool>(false)
        let took = Atomic<Int>(-1)
        let done = DispatchSemaphore(value: 0)
        Thread {
            waiting.store(true, ordering: .releasing)
            // A minute: only a broken wait (one that never sees the give-back) runs into it.
            took.store(word.spinTake(thread: waiter, nanoseconds: 60_000_000_000) ? 1 : 0, ordering: .releasing)
            done.signal()
        }.start()
        // The give-back on a thread of its own too: back on a task it waited for a pool thread, and under TSan's
        // suite the pool was busy for longer than the waiter's minute (CI, stop 58).
        let gaveBack = await onThread { () -> Bool in
            while !waiting.load(ordering: .acquiring) { sched_yield() }
            usleep(1_000)
            return word.releaseIfNothingQueued()
        }
        #expect(gaveBack)
        await onThread { done.wait() }
        #expect(took.load(ordering: .acquiring) == 1, "the waiter queued although the lane was given back")
        #expect(word.owner.load(ordering: .relaxed) == waiter)
    }
}

/// The flood policy makes a *thread* that already has updaters queued in a full lane wait for room. A task never
/// waits: its thread is one of the cooperative pool's (two on a 2-core machine), and the pool runs every side effect
/// and every other task of the process — several side effects awaiting their updaters on one pool thread counted as
/// one producer with updaters queued, and a flood of 1M updaters blocked both pool threads for minutes.
@Suite struct TasksNeverWaitForRoomTests {
    @Test func aTaskDispatchingIntoAFullLaneQueuesWithoutWaiting() async throws {
        let store = makeStore(configuration: .init(traceBackend: NoOpTraceBackend(), backlogLimit: 2))
        let hold = await LaneHold.start(store, appending: 0)
        // From a task: two updaters queue (the lane is held), the third finds the lane full with this thread's
        // updaters in it — a thread would wait there for room (and, the lane not moving, for the stall timeout).
        await Task { for _ in 0..<3 { store.dispatch(Increment()) } }.value
        let (stalled, waiters) = store.engine.laneLock.withLock { (store.engine.lane.stalledAt == store.engine.lane.progress, store.engine.lane.roomWaiters) }
        #expect(!stalled, "a dispatch inside a task waited for room until the lane counted as stalled")
        #expect(waiters == 0)
        await hold.release()
        try await store.dispatch(Increment()).value
        #expect(store.state.counter == 4, "nothing lost")
    }

    /// A thread still waits (the flood policy): the same three dispatches from a thread end only once the lane counts
    /// as stalled (the hold applies nothing for the stall timeout).
    @Test func aThreadDispatchingIntoAFullLaneStillWaitsForRoom() async throws {
        let store = makeStore(configuration: .init(traceBackend: NoOpTraceBackend(), backlogLimit: 2))
        let hold = await LaneHold.start(store, appending: 0)
        await onThread { for _ in 0..<3 { store.dispatch(Increment()) } }
        #expect(store.engine.laneLock.withLock { store.engine.lane.stalledAt == store.engine.lane.progress },
                "a thread's dispatch into a full lane did not wait for room")
        await hold.release()
        try await store.dispatch(Increment()).value
        #expect(store.state.counter == 4, "nothing lost")
    }
}
