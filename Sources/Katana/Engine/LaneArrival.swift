import Dispatch
import CKatanaTraceProvider
import Glibc
import KatanaTrace
import Synchronization

// Arriving at a lane another thread holds, or before the store is ready: queueing behind the holder (`enter`), the
// flood policy's wait, and re-enqueueing an item that already has a handle. (The dispatch that finds the lane idle
// never comes here: `UpdaterLane.swift`; the lane's word and the brief wait for it, `LaneWord.spinTake`, are
// `LaneState.swift`'s.)
extension StoreEngine {
    /// Re-enqueues an item that already has a handle (kept until ready, or forwarded by an interceptor). It never
    /// waits for room: it was dispatched already.
    @inlinable
    final func enqueueExisting(_ item: LaneItem, ignoringReadiness: Bool, alreadyTraced: Bool) {
        let thread = katana_thread_id()
        laneLock.lock()
        let arrival = lane.arrive(thread: thread, ignoringReadiness: ignoringReadiness, canWait: false)
        guard case .applyInline = arrival else {
            enter(item, arrival, traced: !alreadyTraced)
            return
        }
        let listeners = self.listeners
        keepOldStates = listeners.needsOldState
        if item.id != 0, !alreadyTraced { traceEnqueue(item, route: .updaterInline, depth: 0) }
        laneLock.unlock()
        finish(item, process(item, route: .updaterInline, recordChanges: !listeners.boxes.isEmpty))
        deliverChanges(to: listeners, traced: item.id != 0)
        resolveBatch()
        releaseLane()
    }

    /// Puts an item with a handle where `arrival` says (kept until ready, or queued in the lane) and traces where it went; for
    /// `.enqueueAndHelp` this thread holds the lane and helps drain it. Caller holds `laneLock`; this releases it.
    /// An item goes in the lane only after `.enqueue`, which marked the word `queued` (so the holder's lock-free
    /// give-back fails and it drains the item), or while this thread holds the lane and then helps drain it.
    @inlinable
    final func enter(_ item: LaneItem, _ arrival: LaneState.Arrival, traced: Bool = true) {
        let traced = traced && item.id != 0
        switch arrival {
        case .keepUntilReady:
            if traced { traceEnqueue(item, route: .keptUntilReady, depth: lane.earlyItems?.count ?? 0) }
            lane.keepUntilReady(.updater(item))
            laneLock.unlock()
        case .enqueue, .waitForRoom:
            if traced { traceEnqueue(item, route: .updaterQueue, depth: lane.pending.count) }
            lane.pending.append(item)
            laneLock.unlock()
        case .enqueueAndHelp, .applyInline:
            // The previous holder ran out of helping limit and left work behind (or the lane was given up while
            // this thread waited for room): queue behind it and help.
            if traced { traceEnqueue(item, route: .updaterInline, depth: lane.pending.count) }
            lane.pending.append(item)
            laneLock.unlock()
            helpDrain()
        }
    }

    /// Whether a dispatch on this thread may wait for room in a full lane (the flood policy): not inside a task. A
    /// task's thread is one of Swift's cooperative pool, which runs every side effect and every other task of the
    /// process (two threads on a 2-core machine): waiting there stalls them all. And the policy counts producers by
    /// thread, so side effects that each await their updaters one at a time, taking turns on one pool thread, looked
    /// like one producer with updaters queued — under a flood they blocked the pool's threads one after the other.
    /// A task's updaters queue past the limit instead; back-pressure applies to threads. (Asked only when the lane
    /// says this producer would wait: `applyOrQueue`.)
    @inlinable
    static var dispatchingThreadMayWait: Bool { withUnsafeCurrentTask { $0 == nil } }

    /// How long a producer waits for room with no batch taken from the lane before the lane counts as stalled.
    @usableFromInline static var backPressureStallNanoseconds: UInt64 { 100_000_000 }

    /// The flood policy's wait (see `LaneState.mustWaitForRoom`): on `room`, with `laneLock` held, until the lane
    /// says otherwise; returns the arrival the lane then gives (never `.waitForRoom`).
    @usableFromInline
    final func waitForRoom(thread: UInt) -> LaneState.Arrival {
        while true {
            let seen = lane.progress
            lane.roomWaiters += 1
            let woken = room.wait(nanoseconds: Self.backPressureStallNanoseconds)
            lane.roomWaiters -= 1
            lane.waitEnded(woken: woken, progressWhenWaitBegan: seen)
            let arrival = lane.arrive(thread: thread)
            if arrival != .waitForRoom { return arrival }
        }
    }
}
