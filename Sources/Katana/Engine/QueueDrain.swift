import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Applying other producers' queued updaters: a dispatching thread that finds work behind the lane helps with a bounded
// amount of it; the store's serial queue drains the rest.
extension StoreEngine {
    /// Applies pending items on this thread, within the helping limit, then gives the lane up. The limit counts
    /// items, not batches: at most `helpingItemLimit` of them, taken in chunks of 1, 2, 4, … with the clock read
    /// after each chunk, so one slow item (or slow inline listener) ends the turn at once. If work is left, the lane
    /// is released with it still pending: the next dispatching thread takes the lane and continues (under contention
    /// producers take turns, with no thread hop), and a kick on the updater queue guarantees progress if no dispatch
    /// comes. So one `dispatch` call never applies more than the helping limit of other threads' items.
    @inlinable
    final func helpDrain() {
        var left = helpingItemLimit
        var chunk = 1
        var limit = 1
        let start = DispatchTime.now().uptimeNanoseconds
        while let count = drainBatch(route: .updaterInline, limit: limit) {
            left -= count
            chunk &*= 2
            let inTime = DispatchTime.now().uptimeNanoseconds &- start <= helpingTimeLimitNanoseconds
            limit = left > 0 && inTime ? Swift.min(chunk, left) : 0  // 0: the turn is over, and the lane is given up
        }
    }

    /// Takes the lane if it is idle with work pending, and drains it all.
    @inlinable
    final func kick() {
        laneLock.lock()
        let taken = lane.takeForQueue(thread: katana_thread_id())
        laneLock.unlock()
        if taken { drainQueue() }
    }

    /// Runs on the updater queue while it holds the lane: applies everything pending, in batches that each take
    /// about `queueBatchNanoseconds` (the batch size doubles while batches are quicker, and shrinks in proportion
    /// when one was slower). Waiting producers tell a moving lane from a stalled one by the batches taken, so a
    /// batch must never outlast the stall timeout while the lane moves: the whole backlog taken at once (after a
    /// stall, a backlog of slow items) looked stalled, and producers flooded past the backlog limit without end
    /// (`LaneHelpingLimitTests.afterAStallASlowButMovingLaneHoldsProducersAgain`).
    @inlinable
    final func drainQueue() {
        var limit = Self.queueBatchFirstLimit
        while true {
            let start = DispatchTime.now().uptimeNanoseconds
            guard drainBatch(route: .updaterQueue, limit: limit) != nil else { return }
            let took = DispatchTime.now().uptimeNanoseconds &- start
            limit = Self.nextQueueBatchLimit(after: limit, took: took)
        }
    }

    @usableFromInline static var queueBatchFirstLimit: Int { 64 }
    @usableFromInline static var queueBatchNanoseconds: UInt64 { 1_000_000 }

    /// The next batch's size: double while a batch takes less than `queueBatchNanoseconds` (up to 4,096 items), else
    /// scaled down so it would take about that long (at least one item).
    @inlinable
    static func nextQueueBatchLimit(after limit: Int, took: UInt64) -> Int {
        if took < queueBatchNanoseconds { return Swift.min(limit &* 2, 4_096) }
        let scaled = UInt64(limit) &* queueBatchNanoseconds / Swift.max(took, 1)
        return Swift.max(1, Int(scaled))
    }

    /// Applies up to `limit` pending items as one batch and returns how many items that was. When nothing is pending,
    /// or `limit` is 0 (a helping turn is over), gives the lane up and returns nil; work left then goes to the store's
    /// queue, unless a dispatch takes the lane first. Called only by the lane holder; the one place it gives the lane
    /// up under `laneLock`.
    @inlinable
    final func drainBatch(route: DispatchRoute, limit: Int) -> Int? {
        let thread = katana_thread_id()
        laneLock.lock()
        let (taken, wakeProducers) = lane.takeBatch(thread: thread, upTo: limit, into: &drainBuffer)
        if wakeProducers { room.broadcast() }
        // The cells this holder recycled go to the producers, whether it holds on or gives the lane up: the two sets
        // are swapped when the holder has more (the fewer come back to it to fill).
        if spareCells.count > lane.spareCells.count { swap(&spareCells, &lane.spareCells) }
        guard taken else {
            let left = lane.pending.count != 0
            var replaced: [ListenerList<S>] = []  // kept while the lane was held (`keepWhileLaneHeld`)
            if !replacedListeners.isEmpty { swap(&replaced, &replacedListeners) }
            laneLock.unlock()
            extendLifetime(replaced)  // let go outside the lock: what a listener holds may reach the store
            if left { updaterQueue.async { self.kick() } }
            return nil
        }
        let listeners = self.listeners
        keepOldStates = listeners.needsOldState  // what `applyLocked` records for them
        laneLock.unlock()

        let record = !listeners.boxes.isEmpty
        let count = drainBuffer.count
        var traced = false  // whether the batch held a traced item: its delivery is traced then (`deliverChanges`)
        if !intercepting {
            // No interceptors: apply the whole batch under one acquisition of the state lock. The items are used in
            // place and their cells moved, not copied: each copy of an item or a cell was a reference count changed
            // on a cell the producer's core had just written (its handle), several per item.
            lockedState.lock()
            for index in drainBuffer.indices {
                if drainBuffer[index].cell?.claimForLane() == false {
                    let cell = drainBuffer[index].cell.take()!  // resolved as cancelled here
                    skipCancelled(drainBuffer[index], cell: cell, route: route)
                    continue
                }
                // Untraced, applied as it is; traced, between its begin and end (`applyTracedLocked`).
                var failure: KatanaError?
                if drainBuffer[index].id == 0 {
                    do { try applyLocked(drainBuffer[index].updater, recordChanges: record) } catch { failure = error }
                } else {
                    traced = true
                    failure = applyTracedLocked(drainBuffer[index], route: route, recordChanges: record)
                }
                if let failure, let cell = drainBuffer[index].cell.take() {
                    finished.append(FinishedUpdater(cell: cell, error: failure))
                }
            }
            lockedState.unlock()
            deliverChanges(to: listeners, traced: traced)
            resolveBatch()
            return count
        }
        for item in drainBuffer {
            if item.id != 0 { traced = true }
            finish(item, process(item, route: route, recordChanges: record))
        }
        drainBuffer.removeAll(keepingCapacity: true)
        deliverChanges(to: listeners, traced: traced)
        resolveBatch()
        return count
    }
}
