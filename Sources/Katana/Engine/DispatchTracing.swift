import CKatanaTraceProvider
import KatanaTrace

// Every trace event of a dispatch is emitted from this file: the enqueue, begin, end and drop of an item of either
// kind (one function each, on the backend), and the store's choices around them — an inline updater's one combined
// event, a failure before its end, a latency budget's check. (Interval, budget and navigation events come from their
// own APIs.)

/// A dispatched item as the trace sees it: its ids, its type's name, its kind.
@usableFromInline
protocol TracedItem {
    static var kind: DispatchKind { get }
    var id: UInt64 { get }
    var parentID: UInt64 { get }
    var name: TraceName? { get }
}

extension LaneItem: TracedItem {
    @inlinable static var kind: DispatchKind { .stateUpdater }
}

extension SideEffectItem: TracedItem {
    @inlinable static var kind: DispatchKind { .sideEffect }
}

extension TraceBackend {
    /// An item's `dispatch_enqueue` (call only for traced items: `item.id != 0`).
    @inlinable
    func traceEnqueue<I: TracedItem>(_ item: I, route: DispatchRoute, depth: Int) {
        dispatchEnqueue(DispatchEnqueueEvent(
            id: item.id, parentID: item.parentID, kind: I.kind, name: item.name!, route: route,
            queueDepth: UInt32(clamping: depth)))
    }

    /// An item's `dispatch_begin` (call only for traced items).
    @inlinable
    func traceBegin<I: TracedItem>(_ item: I, route: DispatchRoute, parallelism: Int) {
        dispatchBegin(DispatchBeginEvent(
            id: item.id, parentID: item.parentID, kind: I.kind, name: item.name!, route: route,
            parallelism: UInt32(clamping: parallelism)))
    }

    /// An item's `dispatch_end` (call only for traced items).
    @inlinable
    func traceEnd<I: TracedItem>(_ item: I, route: DispatchRoute, outcome: DispatchOutcome) {
        dispatchEnd(DispatchEndEvent(id: item.id, kind: I.kind, name: item.name!, route: route, outcome: outcome))
    }

    /// An item that ends without running: cancelled before it started, or rejected because its store went away
    /// before it was ready. Its begin and its end, one after the other, so that every enqueue in a trace has both:
    /// the trace toolkit pairs all three, and a distributed-tracing span (started at the enqueue) ends here, with the
    /// error when there is one. `failure` is reported for an outcome of `.error` only.
    @usableFromInline
    func traceDropped<I: TracedItem>(_ item: I, route: DispatchRoute, outcome: DispatchOutcome, failure: (any Error)? = nil) {
        traceBegin(item, route: route, parallelism: 0)
        if outcome == .error, let failure { dispatchFailed(id: item.id, error: failure) }
        traceEnd(item, route: route, outcome: outcome)
    }
}

extension StoreEngine {
    /// An updater's `dispatch_enqueue`.
    @inlinable
    final func traceEnqueue(_ item: LaneItem, route: DispatchRoute, depth: Int) {
        tracer.traceEnqueue(item, route: route, depth: depth)
    }

    /// A side effect's `dispatch_enqueue`.
    @inlinable
    final func traceEnqueue(_ item: SideEffectItem, route: DispatchRoute, depth: Int) {
        tracer.traceEnqueue(item, route: route, depth: depth)
    }

    /// An updater's `dispatch_begin` (call only for traced items: `item.id != 0`).
    /// Returns the start time when its type has a latency budget (0 otherwise), for `traceEnd`.
    @inlinable @discardableResult
    final func traceBegin(_ item: LaneItem, route: DispatchRoute) -> UInt64 {
        tracer.traceBegin(item, route: route, parallelism: sideEffects.count)
        return budgets.start(for: type(of: item.updater))
    }

    /// An updater's `dispatch_end` (call only for traced items: `item.id != 0`), after
    /// `budget_exceeded` when it ran over its type's budget.
    @inlinable
    final func traceEnd(_ item: LaneItem, route: DispatchRoute, outcome: DispatchOutcome, started: UInt64 = 0) {
        if started != 0 {
            budgets.check(type(of: item.updater), started: started, id: item.id, kind: .stateUpdater, name: item.name!, tracer: tracer)
        }
        tracer.traceEnd(item, route: route, outcome: outcome)
    }

    /// An updater's begin (call only for traced items): when `combined` (an inline updater, a backend that combines,
    /// no budget) only the start time and the parallelism, for `traceFinish`; else `dispatch_begin` and the budget's
    /// start time. Out of line, so the untraced fast path stays small enough for the compiler to specialise the
    /// updater's apply into it.
    @usableFromInline @inline(never)
    final func traceStart(_ item: LaneItem, route: DispatchRoute, combined: Bool) -> (started: UInt64, parallelism: UInt32) {
        if let dispatchRecorder {
            // Through the interceptors, the dispatch recorder is told at the chain's end, of what they pass on (an updater
            // they drop is never applied): `DispatchLogTests.theLogHoldsWhatTheInterceptorsLetThrough`.
            if intercepting, !item.bypass {
                chainRecord = (item.id, item.parentID)
            } else {
                dispatchRecorder.applying(item.updater, id: item.id, parentID: item.parentID, stateBefore: { lockedState.value })
            }
        }
        if combined { return (katana_duration_start(), UInt32(clamping: sideEffects.count)) }
        return (traceBegin(item, route: route), 0)
    }

    /// An updater's end (call only for traced items): one `updater_inline` event carrying its duration when
    /// `combined`, else `dispatch_end` after the begin `traceStart` emitted. `listeners`: how many listeners an
    /// updater applied inline handed its change to (`listenersTold`), carried by its one event, or — three events —
    /// told in a `listeners_notified` after its end, as a batch's are; 0 where the lane's batch tells them (its own
    /// `listeners_notified`).
    @usableFromInline @inline(never)
    final func traceFinish(_ item: LaneItem, route: DispatchRoute, combined: Bool,
                           started: (started: UInt64, parallelism: UInt32), outcome: DispatchOutcome, listeners: UInt32 = 0) {
        if combined, let emit = nativeUpdaterInline, let name = item.name {
            emit(item.id, item.parentID, name.cString, name.utf8Count, started.parallelism,
                 katana_duration_ns(started.started), outcome.rawValue)
        } else if combined, let record = directUpdaterInline, let name = item.name {
            record(item.id, item.parentID, name.cString, started.parallelism, started.started, outcome.rawValue, listeners)
        } else if combined {
            tracer.updaterInline(UpdaterInlineEvent(
                id: item.id, parentID: item.parentID, name: item.name!, parallelism: started.parallelism,
                durationNanoseconds: katana_duration_ns(started.started), outcome: outcome, listeners: listeners))
        } else {
            traceEnd(item, route: route, outcome: outcome, started: started.started)
            if listeners > 0 { tracer.listenersNotified(storeID: storeID, changes: 1, listeners: listeners) }
        }
    }

    /// Whether a traced updater of `type` applied by its dispatching thread is traced as one event at its end, as the
    /// store's ``TracePlan`` says: only a store with budgets asks the type (``hasNoBudget(_:)``). Inlined: called, it
    /// was a call on every recorded dispatch for what is one byte compared in a store without budgets (the callgrind
    /// gate's `fire_and_forget_flight_recorder`, `_metrics`).
    @inlinable @inline(__always)
    final func combines(_ type: Any.Type) -> Bool {
        switch tracePlan {
        case .combined: true
        case .combinedUnlessBudgeted: hasNoBudget(type)
        case .threeEvents: false
        }
    }

    /// Whether `type` has no latency budget in this store. Out of line (see `traceStart`).
    @usableFromInline @inline(never)
    final func hasNoBudget(_ type: Any.Type) -> Bool { budgets.limit(for: type) == nil }

    /// Tells the dispatch recorder of the updater an interceptor chain's end is about to apply — what the interceptors
    /// passed on, under the ids of the dispatch whose chain it is (`chainRecord`).
    @usableFromInline @inline(never)
    final func recordAtChainEnd<U: AnyStateUpdater>(_ updater: U) {
        dispatchRecorder?.applying(updater, id: chainRecord.id, parentID: chainRecord.parentID, stateBefore: { lockedState.value })
    }

    /// Tells the dispatch recorder of an updater about to be applied. Out of line (and generic, so the updater is boxed
    /// here, not in the caller): the untraced path stays as the compiler specialises it.
    @usableFromInline @inline(never)
    final func recordApplying<U: AnyStateUpdater>(_ updater: U, id: UInt64, parentID: UInt64) {
        dispatchRecorder?.applying(updater, id: id, parentID: parentID, stateBefore: { lockedState.value })
    }

    /// The start of an updater traced as one event, with no lane item: its start token and the parallelism.
    @usableFromInline @inline(never)
    final func traceInlineStart() -> (started: UInt64, parallelism: UInt32) {
        (katana_duration_start(), UInt32(clamping: sideEffects.count))
    }

    /// The one event of an updater traced without a lane item (``CombinedRun``), after its failure, if any.
    @usableFromInline @inline(never)
    final func traceInlineEnd(id: UInt64, parentID: UInt64, name: TraceName?, started: (started: UInt64, parallelism: UInt32),
                              failure: (any Error)?) {
        if let failure { traceFailure(id, failure) }
        let outcome = failure == nil ? DispatchOutcome.ok : .error
        guard let name else { return }
        if let emit = nativeUpdaterInline {
            emit(id, parentID, name.cString, name.utf8Count, started.parallelism, katana_duration_ns(started.started), outcome.rawValue)
        } else if let record = directUpdaterInline {
            record(id, parentID, name.cString, started.parallelism, started.started, outcome.rawValue, listenersTold)
        } else {
            tracer.updaterInline(UpdaterInlineEvent(id: id, parentID: parentID, name: name, parallelism: started.parallelism,
                                                    durationNanoseconds: katana_duration_ns(started.started), outcome: outcome,
                                                    listeners: listenersTold))
        }
    }

    /// Tells the backend what a traced dispatch failed with (before its end event). Out of line: only on failures.
    @usableFromInline @inline(never)
    final func traceFailure(_ id: UInt64, _ error: any Error) {
        tracer.dispatchFailed(id: id, error: error)
    }
}

/// How an updater its dispatching thread applies is traced (`StoreEngine.applyInline`, with or without interceptors):
/// by its lane item, as one event without one (``CombinedRun``), or not at all (``UntracedRun``, whose calls vanish
/// once specialised).
@usableFromInline
protocol InlineRunTrace {
    func start<S: State>(_ store: StoreEngine<S>, combined: Bool) -> (started: UInt64, parallelism: UInt32)
    func finish<S: State>(_ store: StoreEngine<S>, combined: Bool, started: (started: UInt64, parallelism: UInt32),
                          outcome: DispatchOutcome, failure: (any Error)?)
}

/// An updater traced as one `updater_inline` event at its end, without a lane item (a backend that combines, no budget
/// for its type, no interceptors): its start is a start token and the parallelism.
@usableFromInline
struct CombinedRun: InlineRunTrace {
    @usableFromInline let id: UInt64
    @usableFromInline let parentID: UInt64
    @usableFromInline let name: TraceName?

    @inlinable init(id: UInt64, parentID: UInt64, name: TraceName?) {
        self.id = id
        self.parentID = parentID
        self.name = name
    }

    @inlinable
    func start<S: State>(_ store: StoreEngine<S>, combined: Bool) -> (started: UInt64, parallelism: UInt32) {
        store.traceInlineStart()
    }
    @inlinable
    func finish<S: State>(_ store: StoreEngine<S>, combined: Bool, started: (started: UInt64, parallelism: UInt32),
                          outcome: DispatchOutcome, failure: (any Error)?) {
        store.traceInlineEnd(id: id, parentID: parentID, name: name, started: started, failure: failure)
    }
}

/// An untraced inline run: no lane item, nothing to emit.
@usableFromInline
struct UntracedRun: InlineRunTrace {
    @inlinable init() {}
    @inlinable
    func start<S: State>(_ store: StoreEngine<S>, combined: Bool) -> (started: UInt64, parallelism: UInt32) { (0, 0) }
    @inlinable
    func finish<S: State>(_ store: StoreEngine<S>, combined: Bool, started: (started: UInt64, parallelism: UInt32),
                          outcome: DispatchOutcome, failure: (any Error)?) {}
}

extension LaneItem: InlineRunTrace {
    @inlinable
    func start<S: State>(_ store: StoreEngine<S>, combined: Bool) -> (started: UInt64, parallelism: UInt32) {
        guard id != 0 else { return (0, 0) }
        store.listenersTold = 0  // the chain may apply nothing: then no listener was told
        return store.traceStart(self, route: .updaterInline, combined: combined)
    }
    @inlinable
    func finish<S: State>(_ store: StoreEngine<S>, combined: Bool, started: (started: UInt64, parallelism: UInt32),
                          outcome: DispatchOutcome, failure: (any Error)?) {
        guard id != 0 else { return }
        if let failure { store.traceFailure(id, failure) }
        store.traceFinish(self, route: .updaterInline, combined: combined, started: started, outcome: outcome,
                          listeners: store.listenersTold)
    }
}
