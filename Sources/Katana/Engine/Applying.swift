import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Applying a batch's items under the state lock (each between its trace begin and end), and delivering the changes
// to the listeners. (An updater applied inline by its dispatching thread: `applyAndNotify`, `UpdaterLane.swift`.)
extension StoreEngine {
    /// A lane item cancelled before the lane reached it: not applied; its handle rejects with `CancellationError`.
    @usableFromInline
    final func skipCancelled(_ item: LaneItem, cell: HandleCell, route: DispatchRoute) {
        if item.id != 0 { tracer.traceDropped(item, route: route, outcome: .cancelled) }
        cell.resolve(.failure(CancellationError()))
    }

    /// Applies one lane item (through the interceptors unless it bypasses them). Called by the lane holder.
    /// `combined`: an inline updater whose enqueue was not traced, recorded as one event at its end (`traceFinish`).
    @inlinable
    final func process(_ item: LaneItem, route: DispatchRoute, recordChanges: Bool, combined: Bool = false) -> LaneResult {
        if let cell = item.cell, !cell.claimForLane() {
            skipCancelled(item, cell: cell, route: route)
            return .skipped
        }
        guard intercepting, !item.bypass else {
            lockedState.lock()
            defer { lockedState.unlock() }
            guard item.id != 0 else {
                do { try applyLocked(item.updater, recordChanges: recordChanges) } catch { return .done(error) }
                return .done(nil)
            }
            return .done(applyTracedLocked(item, route: route, recordChanges: recordChanges, combined: combined))
        }
        // Through the interceptors: begin and end bracket the whole chain (the updater is applied by `next`).
        let started = item.id != 0 ? traceStart(item, route: route, combined: combined) : (0, 0)
        let (result, outcome) = runUpdaterChain(item.updater, recordChanges: recordChanges)
        if item.id != 0 {
            if case let .done(error?) = result { traceFailure(item.id, error) }
            traceFinish(item, route: route, combined: combined, started: started, outcome: outcome)
        }
        return result
    }

    /// Applies one traced updater past the interceptors, between its `dispatch_begin` and `dispatch_end`; returns
    /// what it threw. The caller holds the state lock and the lane. (An untraced one, its callers apply with
    /// `applyLocked` directly: the queued walk, `make walk`, entered this function for nothing.)
    @inlinable
    final func applyTracedLocked(_ item: LaneItem, route: DispatchRoute, recordChanges: Bool, combined: Bool = false) -> KatanaError? {
        assert(item.id != 0, "an untraced item is applied with applyLocked")
        let started = traceStart(item, route: route, combined: combined)
        var failure: KatanaError?
        do { try applyLocked(item.updater, recordChanges: recordChanges) } catch { failure = error }
        if let failure { traceFailure(item.id, failure) }
        traceFinish(item, route: route, combined: combined, started: started, outcome: failure == nil ? .ok : .error)
        return failure
    }

    @inlinable
    final func apply(_ updater: any AnyStateUpdater, recordChanges: Bool) throws(KatanaError) {
        lockedState.lock()
        defer { lockedState.unlock() }
        try applyLocked(updater, recordChanges: recordChanges)
    }

    /// Applies one updater for a batch; the caller holds the state lock and the lane. With `recordChanges`, the
    /// change is recorded for the listeners (`deliverChanges`): the (old, new) pair, or for new-state listeners only,
    /// that there was one. The state changes in place: without a copy kept for `(old, new)` listeners, a state
    /// changed in place is not copied on write.
    @inlinable
    final func applyLocked(_ updater: any AnyStateUpdater, recordChanges: Bool) throws(KatanaError) {
        lockedState.assertHeldByThisThread("an updater applied without the state lock")
        if recordChanges, keepOldStates {
            let old = lockedState.value
            try updater._apply(at: &lockedState.value)
            changes.append((old, lockedState.value))
        } else {
            try updater._apply(at: &lockedState.value)
            if recordChanges { newStatePending = true }
        }
    }

    /// Tells the listeners of `list` of the changes the batch recorded (`applyLocked`), now or on their executor, and
    /// — when the batch held a `traced` item — traces them as one `listeners_notified`. (An updater applied inline
    /// tells its listeners in `applyAndNotify`, and its trace event carries how many: `traceFinish`.) Traced by its
    /// items rather than by asking the backend again: a batch whose dispatches the trace shows has its delivery there
    /// too, and one whose dispatches it does not, not — as for a dispatch applied inline.
    @inlinable
    final func deliverChanges(to list: ListenerList<S>, traced: Bool) {
        let listeners = list.boxes  // `list` is kept until the last of them is told, on their executor too
        var delivered = 0
        if newStatePending {
            // New-state listeners only: the state after the batch, once.
            newStatePending = false
            delivered = 1
            let state = lockedState.withLock { lockedState.value }
            let standIn = oldStateStandIn
            if listenersAreInline {
                var state = state
                listeners.tell(standIn, &state)
            } else {
                configuration.listenerExecutor.run {
                    var state = state
                    list.boxes.tell(standIn, &state)
                }
            }
        }
        if changes.count == 1, listenersAreInline {
            // One change (an item applied through the interceptors, or a batch of one): taken out of the buffer
            // without the general removal's range bookkeeping.
            delivered += 1
            var (old, new) = changes.removeLast()
            listeners.tell(old, &new)
        } else if !changes.isEmpty {
            delivered += changes.count
            if listenersAreInline {
                for (old, var new) in changes {
                    listeners.tell(old, &new)
                }
            } else {
                let batch = changes
                configuration.listenerExecutor.run {
                    for (old, var new) in batch {
                        list.boxes.tell(old, &new)
                    }
                }
            }
            changes.removeAll(keepingCapacity: true)
        }
        if delivered > 0, traced {
            tracer.listenersNotified(storeID: storeID, changes: UInt32(clamping: delivered), listeners: UInt32(clamping: listeners.count))
        }
    }

}
