import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// The updater lane: taking it, applying a dispatcher's own updater inline, queueing behind it, the flood policy's wait
// and handing the lane back. The rules themselves are `LaneState`'s; this is where the store acts on them.
extension PartialStore {
    /// Puts an updater in the lane, or applies it right here when the lane is idle. `typedLinks`: the caller knows
    /// the updater's type statically (a typed `dispatch`), so the protocol-form interceptors get it in their typed
    /// form and the chain's end applies it specialised. `anyDispatch` passes false: an updater whose type is known
    /// only at run time goes through them erased. Generic over the updater's type, so a typed dispatch does not box
    /// it in an existential (destroying one reads its type's value witnesses); `anyDispatch` calls it with the
    /// existential opened.
    @inlinable
    final func enqueueUpdater<U: AnyStateUpdater, V: Sendable>(
        _ updater: U, type: Any.Type, parentID: UInt64, success: V, bypassInterceptors: Bool,
        typedLinks: Bool = false
    ) -> DispatchHandle<V> {
        #if KATANA_INJECTED_REGRESSION
        InjectedRegression.perDispatch()
        #endif
        let (id, name) = traceIdentity(of: type)

        let thread = currentThreadID
        // The common case — the store ready, the lane idle, nothing queued — takes the lane with one compare-and-swap;
        // a lane another thread holds is waited for briefly (`spinTake`); anything else arrives under `laneLock`.
        if !laneWord.tryTake(thread: thread), !laneWord.spinTake(thread: thread, nanoseconds: Self.laneWaitNanoseconds) {
            // A task never waits for room (see `dispatchingThreadMayWait`); asked before taking the lock.
            let mayWait = Self.dispatchingThreadMayWait
            laneLock.lock()
            var arrival = lane.arrive(thread: thread, canWait: mayWait)
            if arrival == .waitForRoom { arrival = waitForRoom(thread: thread) }
            guard arrival == .applyInline else {
                let cell = queuedUpdaterCell(for: V.self)
                var item = LaneItem(updater: updater, cell: cell, id: id, parentID: parentID, name: name, bypass: bypassInterceptors)
                item.slot = LaneQueue.slot(of: thread)  // counts against this producer in the flood policy
                enter(item, arrival)
                return DispatchHandle(cell)
            }
            laneLock.unlock()
        }
        // This thread holds the lane, and no lock.
        let direct = !intercepting && listenersAreInline
        if direct, id == 0 {
            // Untraced, no interceptors. Apply, hand the change straight to the listeners, and give the lane back —
            // with the updater as it came (no lane item: it would box it in an existential, copy it and destroy
            // both: a large share of the callgrind gate's `fire_and_forget`).
            let failure = applyAndNotify(thread: thread) { (state: inout S) throws(KatanaError) in
                try updater._apply(to: &state)
            }
            releaseLane(thread: thread)
            return DispatchHandle(resolved: failure.map { .failure(KatanaError.surfaced($0)) } ?? .success(success))
        }
        if id == 0, listenersAreInline, !bypassInterceptors {
            // Untraced, through the interceptors (of either form) on this thread, without a lane item.
            return applyInlineThroughLinks(UntracedRun(), updater, parentID: parentID, typed: typedLinks, thread: thread,
                                           combined: false, success: success)
        }
        let item = LaneItem(updater: updater, cell: nil, id: id, parentID: parentID, name: name, bypass: bypassInterceptors)
        // Traced through a backend that combines, with no budget to check: one event at the end (enqueue and begin
        // are this moment, which it carries as its duration) instead of three — with or without interceptors.
        let combined = id != 0 && tracerCombinesInline && (budgets.nanoseconds.isEmpty || hasNoBudget(item))
        if id != 0, !combined { traceEnqueue(item, lane: .updaterInline, depth: 0) }

        if direct {
            // Traced, no interceptors: as the untraced direct path above, between the trace's start and end.
            let started = traceStart(item, lane: .updaterInline, combined: combined)
            let failure = applyAndNotify(thread: thread) { (state: inout S) throws(KatanaError) in
                try updater._apply(to: &state)
            }
            // No listeners_notified here: an inline change reaches the listeners before its end event.
            if let failure { traceFailure(id, failure) }
            traceFinish(item, lane: .updaterInline, combined: combined, started: started,
                        outcome: failure == nil ? .ok : .error)
            releaseLane(thread: thread)
            return DispatchHandle(resolved: failure.map { .failure(KatanaError.surfaced($0)) } ?? .success(success))
        }

        if listenersAreInline, !item.bypass {
            // Through the interceptors on this thread, without the batch buffers.
            return applyInlineThroughLinks(item, updater, parentID: parentID, typed: typedLinks, thread: thread,
                                           combined: combined, success: success)
        }
        // Listeners on their executor: the batch path, which reads them under `laneLock`.
        laneLock.lock()
        let listeners = listenersForBatch()
        laneLock.unlock()
        let result = process(item, lane: .updaterInline, recordChanges: !listeners.isEmpty, combined: combined)
        deliverChanges(to: listeners)
        let handle = inlineHandle(result, success: success, parentID: parentID)
        releaseLane(thread: thread)
        return handle
    }

    /// Applies an updater on this thread, which holds the lane, and hands the change straight to inline listeners.
    /// (`apply` applies the updater: a closure, so the direct paths and the typed chain's end apply it specialised
    /// and the erased chain's end through its witness, with one body here.) The listeners are read under the state
    /// lock, which every change of them holds too: a dispatch that took the lane lock-free holds no other lock.
    @inlinable @inline(__always)
    final func applyAndNotify(thread: UInt, _ apply: (inout S) throws(KatanaError) -> Void) -> KatanaError? {
        var failure: KatanaError?
        lockStateForApplying(thread: thread)
        let listeners = self.listeners
        if listeners.isEmpty {
            do { try apply(&_state) } catch { failure = error }
            unlockStateAfterApplying()
        } else if listenersNeedOldState {
            let old = _state
            do { try apply(&_state) } catch { failure = error }
            let new = _state
            unlockStateAfterApplying()
            if failure == nil { listeners.tell(old, new) }
        } else {
            // New-state listeners only: the state changes in place (no copy kept to copy-on-write against).
            do { try apply(&_state) } catch { failure = error }
            let new = _state
            unlockStateAfterApplying()
            if failure == nil { listeners.tell(new: new) }
        }
        return failure
    }

    /// Tells the backend what a traced dispatch failed with (before its end event). Out of line: only on failures.
    @usableFromInline @inline(never)
    final func traceFailure(_ id: UInt64, _ error: any Error) {
        tracer.dispatchFailed(id: id, error: error)
    }

    /// The handle of an updater applied inline, from what applying it gave.
    @inlinable
    final func inlineHandle<V: Sendable>(_ result: LaneResult, success: V, parentID: UInt64) -> DispatchHandle<V> {
        switch result {
        case .skipped:
            return .rejected(CancellationError())  // not reached: the caller's own item has no cell to cancel
        case let .done(error):
            return DispatchHandle(resolved: error.map { .failure(KatanaError.surfaced($0)) } ?? .success(success))
        case let .replacedBySideEffect(sideEffect):
            let cell = makeCell(for: V.self)
            launchSideEffect(sideEffect, cell: cell, parentID: parentID)
            return DispatchHandle(cell)
        }
    }

    /// Re-enqueues an item that already has a handle (held before ready, or forwarded by an interceptor). It never
    /// waits for room: it was dispatched already.
    @inlinable
    final func enqueueExisting(_ item: LaneItem, ignoringHeld: Bool, alreadyTraced: Bool) {
        let thread = currentThreadID
        laneLock.lock()
        let arrival = lane.arrive(thread: thread, ignoringHeld: ignoringHeld, canWait: false)
        guard arrival == .applyInline else {
            enter(item, arrival, traced: !alreadyTraced)
            return
        }
        let listeners = listenersForBatch()
        if item.id != 0, !alreadyTraced { traceEnqueue(item, lane: .updaterInline, depth: 0) }
        laneLock.unlock()
        finish(item, process(item, lane: .updaterInline, recordChanges: !listeners.isEmpty))
        deliverChanges(to: listeners)
        resolveFinished()
        releaseLane(thread: thread)
    }

    /// Puts an item with a handle where `arrival` says (held, or queued in the lane) and traces where it went; for
    /// `.enqueueAndHelp` this thread holds the lane and helps drain it. Caller holds `laneLock`; this releases it.
    @inlinable
    final func enter(_ item: LaneItem, _ arrival: LaneState.Arrival, traced: Bool = true) {
        let traced = traced && item.id != 0
        switch arrival {
        case .hold:
            if traced { traceEnqueue(item, lane: .held, depth: lane.held?.count ?? 0) }
            lane.hold(.updater(item))
            laneLock.unlock()
        case .enqueue, .waitForRoom:
            if traced { traceEnqueue(item, lane: .updaterQueue, depth: lane.pending.count) }
            lane.enqueue(item)
            laneLock.unlock()
        case .enqueueAndHelp, .applyInline:
            // The previous holder ran out of helping limit and left work behind (or the lane was given up while
            // this thread waited for room): queue behind it and help.
            if traced { traceEnqueue(item, lane: .updaterInline, depth: lane.pending.count) }
            lane.enqueue(item)
            laneLock.unlock()
            helpDrain()
        }
    }

    /// How much of other producers' work a dispatching thread that holds the lane may apply before it hands
    /// the rest to the store's queue: enough to avoid a thread hop per item under contention, small enough that
    /// `dispatch` stays short.
    @usableFromInline static var helpingItemLimit: Int { 256 }
    @usableFromInline static var helpingTimeLimitNanoseconds: UInt64 { 20_000 }

    /// How long a dispatch that finds the lane held by another thread waits for it before queueing its updater
    /// (`LaneWord.spinTake`). Queueing at once fed itself under contention: while one producer held the lane and
    /// combined, the others queued behind it — an item, a handle cell and a lock pair each, the cells crossing
    /// cores — so every dispatch became a queued one. Waiting a few microseconds instead lets the holder run its
    /// own dispatches inline meanwhile, as an unfair lock lets its holder run on.
    @usableFromInline static var laneWaitNanoseconds: UInt64 { 2_000 }

    /// Whether a dispatch on this thread may wait for room in a full lane (the flood policy): not inside a task. A
    /// task's thread is one of Swift's cooperative pool, which runs every side effect and every other task of the
    /// process (two threads on a 2-core machine): waiting there stalls them all. And the policy counts producers by
    /// thread, so side effects that each await their updaters one at a time, taking turns on one pool thread, looked
    /// like one producer with updaters queued — under a flood they blocked the pool's threads one after the other.
    /// A task's updaters queue past the limit instead; back-pressure applies to threads. (Only asked on the slow path:
    /// the lane busy after the brief wait for it.)
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

    /// Wakes producers waiting for room when the lane says so. Caller holds `laneLock`.
    @inlinable
    final func wakeProducersIfRoom() {
        if lane.shouldWakeProducers { room.broadcast() }
    }

    /// Gives the lane up; items that arrived meanwhile are applied first (see `helpDrain`).
    @inlinable @inline(__always)
    final func releaseLane(thread: UInt = currentThreadID) {
        // Nothing queued since the lane was taken (the common case): give it back without the lock.
        if laneWord.releaseIfNothingQueued() { return }
        laneLock.lock()
        let release = lane.release(thread: thread)
        laneLock.unlock()
        if release == .help { helpDrain() }
    }

    @usableFromInline
    enum LaneResult {
        case skipped
        case done((any Error)?)
        case replacedBySideEffect(any AnySideEffect)
    }

    @inlinable
    final func traceEnqueue(_ item: LaneItem, lane: DispatchLane, depth: Int) {
        tracer.dispatchEnqueue(DispatchEnqueueEvent(
            id: item.id, parentID: item.parentID, kind: .stateUpdater, name: item.name!, lane: lane,
            queueDepth: UInt32(clamping: depth)))
    }
}
