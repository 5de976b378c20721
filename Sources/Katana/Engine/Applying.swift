import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Applying one lane item under the state lock, its trace begin and end, and delivering the changes to listeners.
extension PartialStore {
    /// The one place an updater's `dispatch_begin` is emitted (call only for traced items: `item.id != 0`).
    /// Returns the start time when its type has a latency budget (0 otherwise), for `traceEnd`.
    @inlinable @discardableResult
    final func traceBegin(_ item: LaneItem, lane: DispatchLane) -> UInt64 {
        tracer.dispatchBegin(DispatchBeginEvent(
            id: item.id, parentID: item.parentID, kind: .stateUpdater, name: item.name!, lane: lane,
            parallelism: UInt32(clamping: sideEffects.count)))
        return budgets.start(for: type(of: item.updater))
    }

    /// The one place an updater's `dispatch_end` is emitted (call only for traced items: `item.id != 0`), after
    /// `budget_exceeded` when it ran over its type's budget.
    @inlinable
    final func traceEnd(_ item: LaneItem, lane: DispatchLane, outcome: DispatchOutcome, started: UInt64 = 0) {
        if started != 0 {
            budgets.check(type(of: item.updater), started: started, id: item.id, kind: .stateUpdater, name: item.name!, tracer: tracer)
        }
        tracer.dispatchEnd(DispatchEndEvent(id: item.id, kind: .stateUpdater, name: item.name!, lane: lane, outcome: outcome))
    }

    /// Whether the item's type has no latency budget (a budgeted one is traced as three events, to time it).
    @usableFromInline @inline(never)
    final func hasNoBudget(_ item: LaneItem) -> Bool { budgets.limit(for: type(of: item.updater)) == nil }

    /// An updater's begin (call only for traced items): when `combined` (an inline updater, a backend that combines,
    /// no budget) only the start time and the parallelism, for `traceFinish`; else `dispatch_begin` and the budget's
    /// start time. Out of line, so the untraced fast path stays small enough for the compiler to specialise the
    /// updater's apply into it.
    @usableFromInline @inline(never)
    final func traceStart(_ item: LaneItem, lane: DispatchLane, combined: Bool) -> (started: UInt64, parallelism: UInt32) {
        if combined { return (katana_duration_start(), UInt32(clamping: sideEffects.count)) }
        return (traceBegin(item, lane: lane), 0)
    }

    /// An updater's end (call only for traced items): one `updater_inline` event carrying its duration when
    /// `combined`, else `dispatch_end` after the begin `traceStart` emitted.
    @usableFromInline @inline(never)
    final func traceFinish(_ item: LaneItem, lane: DispatchLane, combined: Bool,
                           started: (started: UInt64, parallelism: UInt32), outcome: DispatchOutcome) {
        if combined, let emit = nativeUpdaterInline, let name = item.name {
            emit(item.id, item.parentID, name.cString, name.utf8Count, started.parallelism,
                 katana_duration_ns(started.started), outcome.rawValue)
        } else if combined {
            tracer.updaterInline(UpdaterInlineEvent(
                id: item.id, parentID: item.parentID, name: item.name!, parallelism: started.parallelism,
                durationNanoseconds: katana_duration_ns(started.started), outcome: outcome))
        } else {
            traceEnd(item, lane: lane, outcome: outcome, started: started.started)
        }
    }

    /// A lane item cancelled before the lane reached it: not applied; its handle rejects with `CancellationError`.
    @usableFromInline
    final func skipCancelled(_ item: LaneItem, cell: HandleCell, lane: DispatchLane) {
        if item.id != 0 {
            tracer.dispatchDropped(id: item.id, parentID: item.parentID, kind: .stateUpdater, name: item.name!, lane: lane,
                                   outcome: .cancelled)
        }
        cell.resolve(.failure(CancellationError()))
    }

    /// Applies one lane item (through the interceptors unless it bypasses them). Called by the lane holder.
    /// `combined`: an inline updater whose enqueue was not traced, recorded as one event at its end (`traceFinish`).
    @inlinable
    final func process(_ item: LaneItem, lane: DispatchLane, recordChanges: Bool, combined: Bool = false) -> LaneResult {
        if let cell = item.cell, !cell.claimForLane() {
            skipCancelled(item, cell: cell, lane: lane)
            return .skipped
        }
        guard intercepting, !item.bypass else {
            lockStateForApplying()
            defer { unlockStateAfterApplying() }
            return .done(applyTracedLocked(item, lane: lane, recordChanges: recordChanges, combined: combined))
        }
        // Through the interceptors: begin and end bracket the whole chain (the updater is applied by `next`).
        let started = item.id != 0 ? traceStart(item, lane: lane, combined: combined) : (0, 0)
        let (result, outcome) = runUpdaterChain(item.updater, recordChanges: recordChanges)
        if item.id != 0 {
            if case let .done(error?) = result { traceFailure(item.id, error) }
            traceFinish(item, lane: lane, combined: combined, started: started, outcome: outcome)
        }
        return result
    }

    /// Applies one updater past the interceptors, between its `dispatch_begin` and `dispatch_end`; returns what it
    /// threw. The caller holds `stateLock` and the lane.
    @inlinable
    final func applyTracedLocked(_ item: LaneItem, lane: DispatchLane, recordChanges: Bool, combined: Bool = false) -> KatanaError? {
        let started = item.id != 0 ? traceStart(item, lane: lane, combined: combined) : (0, 0)
        var failure: KatanaError?
        do { try applyLocked(item.updater, recordChanges: recordChanges) } catch { failure = error }
        if item.id != 0 {
            if let failure { traceFailure(item.id, failure) }
            traceFinish(item, lane: lane, combined: combined, started: started, outcome: failure == nil ? .ok : .error)
        }
        return failure
    }

    @inlinable
    final func apply(_ updater: any AnyStateUpdater, recordChanges: Bool) throws(KatanaError) {
        lockStateForApplying()
        defer { unlockStateAfterApplying() }
        try applyLocked(updater, recordChanges: recordChanges)
    }

    /// Applies one updater; the caller holds `stateLock` and the lane. With `recordChanges`, the (old, new) pair
    /// goes to the batch's `changes` for the listeners.
    @inlinable
    final func applyLocked(_ updater: any AnyStateUpdater, recordChanges: Bool) throws(KatanaError) {
        stateLock.assertHeldByThisThread("an updater applied without the state lock")
        if recordChanges, keepOldStates {
            let old = _state
            try updater._apply(to: &_state)
            changes.append((old, _state))
        } else if recordChanges {
            try updater._apply(to: &_state)
            newStatePending = true
        } else {
            try updater._apply(to: &_state)
        }
    }

    @inlinable
    final func deliverChanges(to listeners: [ListenerBox<S>]) {
        if newStatePending {
            // New-state listeners only: the state after the batch, once.
            newStatePending = false
            let state = stateLock.withLock { _state }
            if listenersAreInline {
                listeners.tell(new: state)
            } else {
                configuration.listenerExecutor.run {
                    listeners.tell(new: state)
                }
            }
            if tracingEnabled {
                tracer.listenersNotified(storeID: storeID, changes: 1, listeners: UInt32(clamping: listeners.count))
            }
        }
        guard !changes.isEmpty else { return }
        let count = changes.count
        if count == 1, listenersAreInline {
            // One change (an item applied through the interceptors, or a batch of one): taken out of the buffer
            // without the general removal's range bookkeeping.
            let (old, new) = changes.removeLast()
            listeners.tell(old, new)
            if tracingEnabled {
                tracer.listenersNotified(storeID: storeID, changes: 1, listeners: UInt32(clamping: listeners.count))
            }
            return
        }
        if listenersAreInline {
            for (old, new) in changes {
                listeners.tell(old, new)
            }
        } else {
            let batch = changes
            configuration.listenerExecutor.run {
                for (old, new) in batch {
                    listeners.tell(old, new)
                }
            }
        }
        changes.removeAll(keepingCapacity: true)
        if tracingEnabled {
            tracer.listenersNotified(storeID: storeID, changes: UInt32(clamping: count), listeners: UInt32(clamping: listeners.count))
        }
    }
}
