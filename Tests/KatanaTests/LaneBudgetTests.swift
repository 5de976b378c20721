import Dispatch
import Foundation
import Glibc
import Katana
import KatanaTrace
import Synchronization
import Testing

/// Counts how many times it was applied on one chosen thread.
final class AppliedOnThread: Sendable {
    let target = Atomic<UInt>(0)
    let count = Atomic<Int>(0)
    func mark() { target.store(UInt(pthread_self()), ordering: .relaxed) }
    func note() {
        if UInt(pthread_self()) == target.load(ordering: .relaxed) { count.add(1, ordering: .relaxed) }
    }
}

struct CountingIncrement: StateUpdater {
    let probe: AppliedOnThread
    func updateState(_ state: inout CounterState) {
        probe.note()
        state.counter += 1
    }
}

@Suite struct LaneBudgetTests {
    /// Holds the lane on thread A with a blocking updater, lets thread B queue `count` updaters, releases A, and
    /// returns how many of B's updaters A's single `dispatch` call applied before it returned.
    func appliedByOneCall(_ store: TestStore, queued count: Int) async -> Int {
        let probe = AppliedOnThread()
        let gate = Gate()
        let returned = Atomic<Int>(-1)
        let done = DispatchSemaphore(value: 0)
        Thread {
            probe.mark()
            store.dispatch(BlockingAppend(value: 0, gate: gate))
            returned.store(probe.count.load(ordering: .relaxed), ordering: .relaxed)
            done.signal()
        }.start()
        await onThread { gate.started.wait() }
        await onThread {
            for _ in 0..<count { store.dispatch(CountingIncrement(probe: probe)) }
        }
        gate.release.signal()
        await onThread { done.wait() }
        return returned.load(ordering: .relaxed)
    }

    @Test func oneDispatchCallAppliesAtMostTheBudgetOfOtherThreadsItems() async throws {
        let store = makeStore()
        let applied = await appliedByOneCall(store, queued: 100_000)
        #expect(applied <= 256, "one dispatch call applied \(applied) of another thread's 100,000 queued updaters")
        // And progress: everything is applied (by later callers or the store's queue).
        #expect(await eventually(seconds: 60) { store.state.counter == 100_000 })
    }

    @Test func aSlowInlineListenerEndsTheHelpingTurnAfterOneItem() async throws {
        let store = makeStore()
        store.addListener { _, _ in usleep(1_000) }
        let applied = await appliedByOneCall(store, queued: 1_000)
        #expect(applied <= 1, "a 1 ms listener: one dispatch call applied \(applied) queued updaters (and told the listener)")
        #expect(await eventually(seconds: 60) { store.state.counter == 1_000 })
    }
}
