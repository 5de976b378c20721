import Dispatch
import Foundation
@testable import Katana
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
        await onThread {
            while !waiting.load(ordering: .acquiring) { sched_yield() }
            usleep(1_000)
        }
        #expect(word.releaseIfNothingQueued())
        await onThread { done.wait() }
        #expect(took.load(ordering: .acquiring) == 1, "the waiter queued although the lane was given back")
        #expect(word.owner.load(ordering: .relaxed) == waiter)
    }
}
