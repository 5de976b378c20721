import Dispatch
import CKatanaTraceProvider
import Glibc
import KatanaTrace
import Synchronization

// The common dispatch, whole — the idle lane taken, the updater applied and the listeners told on the dispatching
// thread, the lane given back, the handle made; the entry to every other case (`applyOrQueue`); and how each kind of
// updater changes the state in place (`_apply(at:)`, at the end). Arriving at a busy lane is `LaneArrival.swift`'s;
// the lane's rules are `LaneState`'s; the state's lock is `Lock.swift`'s.
extension StoreEngine {
    /// Applies an updater right here when the lane is idle, or puts it in the lane. `typed`: the caller knows
    /// the updater's type statically (a typed `dispatch`), so the protocol-form interceptors get it in their typed
    /// form and the chain's end applies it specialised. `anyDispatch` passes false: an updater whose type is known
    /// only at run time goes through them erased. Generic over the updater's type, so a typed dispatch does not box
    /// it in an existential (destroying one reads its type's value witnesses); `anyDispatch` calls it with the
    /// existential opened.
    ///
    /// The common dispatch is all here: take the idle lane with one compare-and-swap on its word, apply the updater
    /// and tell the listeners (`applyAndNotify`), give the lane back with another compare-and-swap, return a handle
    /// already resolved. (The two compare-and-swaps are spelled out rather than called, as `LaneWord.tryTake` and
    /// `releaseIfNothingQueued` spell them for the lane's other takers: the walk the Architecture article counts,
    /// `make walk`.) Whether the store's dispatches may take this path was decided once, when it became ready
    /// (``InlinePlan``); an untraced dispatch through the interceptors goes straight to their run; everything else —
    /// traced, recorded, listeners on an executor, the lane busy or the store not ready — is `applyOrQueue`'s.
    @inlinable
    final func enqueueUpdater<U: AnyStateUpdater, V: Sendable>(
        _ updater: U, type: Any.Type, parentID: UInt64, success: V, bypassInterceptors: Bool,
        typed: Bool = false
    ) -> DispatchHandle<V> {
        let thread = katana_thread_id()
        // Taken before anything else, the trace identity included: between one dispatch's give-back and its thread's
        // next take, a second producer waiting for the lane takes it, and the shorter that gap, the less often the
        // lane changes cores. Guarded by `katana-bench micro --only two-producers` and `--backend metrics`'s
        // two-producer line (figures in #48's closing note).
        // (`1` is `LaneWord.busy`, spelled as a literal: see `LaneWord.init`.)
        let tookLane = laneWord.bits.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged
        if tookLane {
            laneWord.owner.store(thread, ordering: .relaxed)
            if inlinePlan == .plain || (inlinePlan == .plainUntraced && !tracingEnabled) {
                // Applied with the updater as it came (no lane item: it would box it in an existential, copy it and
                // destroy both — a large share of the callgrind gate's `fire_and_forget`).
                let failure = applyAndNotify(updater)
                if !laneWord.bits.compareExchange(expected: 1, desired: 0, ordering: .releasing).exchanged {
                    // Updaters were queued meanwhile (the word is marked `queued`, and only this holder clears it):
                    // apply them first; `releaseLane` would only try the same give-back again.
                    helpDrain()
                }
                return DispatchHandle(ranInline: failure, success: success)
            }
            if inlinePlan == .intercepted, !bypassInterceptors, !tracingEnabled {
                // Untraced through the interceptors, where `applyOrQueue` would send it after a dozen questions
                // (the callgrind gate's `interceptors_3`, `dispatch_interceptors_3`). Asked here rather than first
                // thing in `applyOrQueue`: the call into that large function was most of what the interceptors paid,
                // and the plain dispatch pays only a register more to keep (`fire_and_forget`).
                return applyInlineThroughInterceptors(UntracedRun(), updater, parentID: parentID, typed: typed,
                                                      combined: false, success: success)
            }
        }
        return applyOrQueue(updater, type: type, parentID: parentID, success: success,
                            bypassInterceptors: bypassInterceptors, typed: typed, thread: thread,
                            holdsLane: tookLane)
    }

    /// `enqueueUpdater`'s every other case: the lane taken but the dispatch traced, intercepted or its listeners on
    /// an executor; or the lane busy (a brief wait for it, then the queue) or the store not ready (kept until it is).
    /// Always inlined: called, a recorded dispatch paid the call's arguments and both functions' register saves (the
    /// callgrind gate's `fire_and_forget_flight_recorder` and `_metrics`), more than the larger frame costs the
    /// untraced ones (`fire_and_forget`, `dispatch_interceptors_3`).
    @inlinable @inline(__always)
    final func applyOrQueue<U: AnyStateUpdater, V: Sendable>(
        _ updater: U, type: Any.Type, parentID: UInt64, success: V, bypassInterceptors: Bool, typed: Bool,
        thread: UInt, holdsLane: Bool
    ) -> DispatchHandle<V> {
        // The trace, when there is one, is recorded while this thread holds the lane, not after it gives it back: moved
        // out, it widened the gap between two takes of one producer and two producers got slower (see
        // `enqueueUpdater`).
        let (id, name) = traceIdentity(of: type)
        if !holdsLane, !laneWord.spinTake(thread: thread, nanoseconds: laneWaitNanoseconds) {
            laneLock.lock()
            var arrival = lane.arrive(thread: thread)
            if case .waitForRoom = arrival {
                // A task never waits for room (see `dispatchingThreadMayWait`): it queues past the limit.
                arrival = Self.dispatchingThreadMayWait ? waitForRoom(thread: thread)
                                                        : lane.arrive(thread: thread, canWait: false)
            }
            guard case .applyInline = arrival else {
                // A spare cell if the lane has one (they accept `()`: only a handle that takes `()` gets one, every
                // updater's handle today; the check folds away in specialised code), else a new one.
                let spare = V.self == Void.self || V.self == (any Sendable).self ? lane.spareCells.popLast() : nil
                let cell = spare ?? HandleCell(lock: completionLock, for: V.self)
                // It counts against this producer (its slot) in the flood policy.
                let item = LaneItem(updater: updater, cell: cell, id: id, parentID: parentID, name: name,
                                    bypass: bypassInterceptors, slot: LaneQueue.slot(of: thread))
                enter(item, arrival)
                return DispatchHandle(cell)
            }
            laneLock.unlock()
        }
        // This thread holds the lane, and no lock. How it applies the updater was chosen when the store became ready
        // (``HolderPlan``); asked here is only what each dispatch changes: traced or not, past the interceptors or not.
        // Traced through a backend that combines, with no budget to check: one event at the end (enqueue and begin are
        // this moment, which it carries as its duration) instead of three — with or without interceptors. A budget is
        // the updater's own type's (`U`, as `traceEnd` checks it), not the `tracedAs:` one (`type`):
        // `CombinedInlineTracingTests.aBudgetedUpdaterTracedAsAnotherTypeIsTimed`.
        let combined = id != 0 && combines(U.self)
        switch holderPlan {
        case .direct:
            if id == 0 {
                let failure = applyAndNotify(updater)
                releaseLane()
                return DispatchHandle(ranInline: failure, success: success)
            }
            if combined {
                // Traced as one event at its end, and no lane item (it was most of what a recorded dispatch cost over
                // an unrecorded one in `katana-bench micro --backend flight-recorder`).
                if recordsDispatches { recordApplying(updater, id: id, parentID: parentID) }
                return applyInline(CombinedRun(id: id, parentID: parentID, name: name), updater, parentID: parentID,
                                   typed: typed, combined: true, success: success)
            }
        case .intercepted:
            if id == 0, !bypassInterceptors {
                // Untraced, through the interceptors (of either form) on this thread, without a lane item.
                return applyInline(UntracedRun(), updater, parentID: parentID, typed: typed,
                                   combined: false, success: success)
            }
        case .batch:
            break
        }
        let item = LaneItem(updater: updater, cell: nil, id: id, parentID: parentID, name: name, bypass: bypassInterceptors,
                            slot: LaneQueue.noSlot)
        if id != 0, !combined { traceEnqueue(item, route: .updaterInline, depth: 0) }
        // One that bypasses an intercepting store's interceptors takes the batch path too, which applies it past them.
        let appliedHere = switch holderPlan {
        case .direct: true
        case .intercepted: !item.bypass
        case .batch: false
        }
        if appliedHere {
            return applyInlineByItem(item, updater, parentID: parentID, typed: typed, combined: combined,
                                     success: success)
        }
        // Listeners on their executor: the batch path, which reads them under `laneLock`.
        laneLock.lock()
        let listeners = self.listeners
        keepOldStates = listeners.needsOldState
        laneLock.unlock()
        let result = process(item, route: .updaterInline, recordChanges: !listeners.boxes.isEmpty, combined: combined)
        deliverChanges(to: listeners, traced: id != 0)
        let handle = inlineHandle(result, success: success, parentID: parentID)
        releaseLane()
        return handle
    }

    /// The one inline path of every updater its dispatching thread applies but the untraced one without interceptors
    /// (`enqueueUpdater` spells that one out): between `trace`'s start and finish — nothing (``UntracedRun``), one event
    /// at the end without a lane item (``CombinedRun``), or by its lane item — apply it and tell the listeners now,
    /// through the interceptors when there are any (`applyInlineThroughInterceptors`); give the lane back; make the handle.
    /// Generic over the trace, so each kind's calls are specialised in, none tested per dispatch.
    @inlinable @inline(__always)
    final func applyInline<T: InlineRunTrace, U: AnyStateUpdater, V: Sendable>(
        _ trace: T, _ updater: U, parentID: UInt64, typed: Bool, combined: Bool, success: V
    ) -> DispatchHandle<V> {
        if intercepting {
            return applyInlineThroughInterceptors(trace, updater, parentID: parentID, typed: typed,
                                                  combined: combined, success: success)
        }
        let started = trace.start(self, combined: combined)
        let failure = applyAndNotify(updater)
        trace.finish(self, combined: combined, started: started, outcome: failure == nil ? .ok : .error, failure: failure)
        releaseLane()
        return DispatchHandle(ranInline: failure, success: success)
    }

    /// `applyInline` by the updater's lane item (traced as three events: a backend that does not combine, or a type
    /// with a latency budget), out of line. Inlined, `enqueueUpdater` held a fourth copy of the updater's own code,
    /// and for an updater larger than a line that took it past the size beyond which the optimiser inlines nothing
    /// more, even what is marked always: a recorded dispatch then called `applyInline`, `_apply(at:)` and the handle's
    /// initialiser (the callgrind gate's `fire_and_forget_writing_flight_recorder`).
    @inlinable @inline(never)
    final func applyInlineByItem<U: AnyStateUpdater, V: Sendable>(
        _ item: LaneItem, _ updater: U, parentID: UInt64, typed: Bool, combined: Bool, success: V
    ) -> DispatchHandle<V> {
        applyInline(item, updater, parentID: parentID, typed: typed, combined: combined, success: success)
    }

    /// Applies an updater on this thread, which holds the lane, and hands the change straight to inline listeners.
    /// (Generic, so the direct paths and the typed chain's end apply it specialised, and the erased chain's end —
    /// its existential opened — through its witness, with one body here.) The listeners are read under the state
    /// lock, which every change of them holds too: a dispatch that took the lane lock-free holds no other lock. They
    /// are read as their list's pointer and count, no reference kept: a list replaced meanwhile stays until this
    /// thread gives the lane back (``ListenerList``).
    @inlinable @inline(__always)
    final func applyAndNotify<U: AnyStateUpdater>(_ updater: U) -> KatanaError? {
        var failure: KatanaError?
        lockedState.lock()
        let listeners = self.listeners.boxes
        if listeners.isEmpty {
            do { try updater._apply(at: &lockedState.value) } catch { failure = error }
            lockedState.unlock()
        } else if self.listeners.needsOldState {
            let old = lockedState.value
            do { try updater._apply(at: &lockedState.value) } catch { failure = error }
            lockedState.unlock()
            if failure == nil { listeners.tell(old, &lockedState.value) }
        } else {
            // New-state listeners only: the state changes in place (no copy kept to copy-on-write against), and they
            // ignore `old`, which is the stand-in. (`old` as an optional instead made every dispatch unwrap and count
            // references again: the callgrind gate's `fire_and_forget`.)
            do { try updater._apply(at: &lockedState.value) } catch { failure = error }
            lockedState.unlock()
            if failure == nil { listeners.tell(oldStateStandIn, &lockedState.value) }
        }
        listenersTold = failure == nil ? UInt32(truncatingIfNeeded: listeners.count) : 0
        return failure
    }

    /// An item's trace identity: a fresh id and its type's name while a trace session listens, `(0, nil)` when not
    /// (id 0 means "not traced" everywhere in the lane). Always inlined: left to itself the compiler stopped
    /// inlining it into `enqueueUpdater` after an unrelated change there, a call on every traced dispatch (the
    /// callgrind gate's `fire_and_forget_*` rows).
    /// (It asks the backend as `tracingEnabled` does, written out rather than called: a debug build entered both
    /// functions on every side effect's dispatch, the Architecture article's walk, `make walk`. Change both together.)
    @inlinable @inline(__always)
    final func traceIdentity(of type: Any.Type) -> (id: UInt64, name: TraceName?) {
        let enabled = if let check = enabledCheck { check() != 0 }
                      else { tracesEverything || (!tracesNothing && tracer.isEnabled) }
        guard enabled else { return (0, nil) }
        return (KatanaTracing.nextID(), TraceName.of(type))
    }

    /// Whether the backend listens: never for the no-op backend; a native provider's (or an in-process backend's)
    /// check called directly; else the existential's `isEnabled`. (`traceIdentity` asks the same, written out.)
    @inlinable
    final var tracingEnabled: Bool {
        if let check = enabledCheck { check() != 0 } else { tracesEverything || (!tracesNothing && tracer.isEnabled) }
    }

    /// The handle of an updater applied inline, from what applying it gave.
    @inlinable
    final func inlineHandle<V: Sendable>(_ result: LaneResult, success: V, parentID: UInt64) -> DispatchHandle<V> {
        switch result {
        case .skipped:
            return .rejected(CancellationError())  // not reached: the caller's own item has no cell to cancel
        case let .done(error):
            return DispatchHandle(ranInline: error, success: success)
        case let .replacedBySideEffect(sideEffect):
            let cell = HandleCell(lock: completionLock, for: V.self)
            launchSideEffect(sideEffect, cell: cell, parentID: parentID)
            return DispatchHandle(cell)
        }
    }

    /// Gives the lane up; items that arrived meanwhile are applied first (see `helpDrain`).
    @inlinable @inline(__always)
    final func releaseLane() {
        // Nothing queued since the lane was taken (the common case): give it back without the lock.
        if laneWord.releaseIfNothingQueued() { return }
        // Marked queued (or held before readiness): help drain, whose first batch, under the lock, gives the lane up
        // when nothing is pending after all.
        helpDrain()
    }

    @usableFromInline
    enum LaneResult {
        case skipped
        case done((any Error)?)
        case replacedBySideEffect(any AnySideEffect)
    }
}

/// How a store applies an updater whose dispatching thread finds the lane idle, chosen once, when the store becomes
/// ready (its interceptors are bound then; its backend, recorder and listeners' executor were given at creation), so
/// the common dispatch asks one byte instead of each of those (`enqueueUpdater`).
@usableFromInline
enum InlinePlan: UInt8, Sendable {
    /// Apply and tell the listeners, nothing else: no interceptors, listeners told on the dispatching thread, and a
    /// backend that never traces (the no-op one, without a dispatch recorder).
    case plain
    /// As `plain` while no trace session listens; a traced dispatch takes the general path. (A backend that traces
    /// while a session listens: LTTng's, or one of the app's own.)
    case plainUntraced
    /// Through the interceptors on the dispatching thread while no trace session listens (listeners told there too,
    /// no dispatch recorder); a traced dispatch, or one that bypasses them, takes the general path.
    case intercepted
    /// Always the general path (`applyOrQueue`): every dispatch traced (a dispatch recorder, the flight recorder or
    /// the metrics as the backend: `tracesEverything`), or listeners on an executor.
    case general
}

/// How a store applies an updater once its dispatching thread holds the lane in `applyOrQueue` (traced, recorded, or
/// after the brief wait for a busy lane), chosen once when the store becomes ready, like ``InlinePlan``: what the
/// store's interceptors and listeners' executor make of every dispatch is decided there, not asked per dispatch.
@usableFromInline
enum HolderPlan: UInt8, Sendable {
    /// No interceptors, listeners told on the dispatching thread: applied here (untraced, combined into one event,
    /// or by its lane item).
    case direct
    /// Through the interceptors on the dispatching thread, listeners told there too; one that bypasses them takes
    /// the batch path.
    case intercepted
    /// Listeners on an executor: the batch path (`process`, then the listeners read under `laneLock`).
    case batch
}

/// How a traced updater that its dispatching thread applies is traced, chosen when the store is made (its backend and
/// budgets are fixed then): `combines(_:)` answers from it.
@usableFromInline
enum TracePlan: UInt8, Sendable {
    /// As one event at its end (`updater_inline`, carrying its duration): a backend that combines
    /// (`TraceBackend.combinesInlineUpdaters`), and no latency budgets.
    case combined
    /// As `combined`, but an updater of a type with a budget as three events, to time it against the budget.
    case combinedUnlessBudgeted
    /// As three events (`dispatch_enqueue`, `dispatch_begin`, `dispatch_end`): a backend that does not combine.
    case threeEvents
}

extension UnsafeBufferPointer {
    /// Tells every listener in this list still subscribed of a change: the state before it, and the state after it,
    /// lent where it lies. The store's one listener notifier: an updater applied inline (`applyAndNotify`) and a
    /// batch's changes (`deliverChanges`), listeners of both forms (a new-state listener's box ignores `old`: with
    /// none that needs it, the caller passes the store's ``StoreEngine/oldStateStandIn``).
    ///
    /// `new` is `inout` so that the compiler may lend it to each listener rather than copy it: a copy retains what
    /// the state holds by reference and releases it after, whenever the updater's own code was not inlined (the
    /// callgrind gate's `fire_and_forget_writing`). Nothing else touches it for the call's length: the caller holds
    /// the updater lane, so nothing changes the state until it gives the lane back (a listener's own dispatch is
    /// queued behind it), and other threads only read it, under the state lock
    /// (`ListenerTests.whatAListenerIsHandedStaysAsItWasWhileItDispatches`).
    ///
    /// Neither a box nor its closure is retained: the list's owner (``ListenerList``), kept alive for the whole loop,
    /// keeps them all alive. Each listener is called from its box lent to a closure (`_withUnsafeGuaranteedRef`):
    /// read from the list directly, its closure was retained and released around every call; `for box in self`, the
    /// box too — two atomic operations per listener per change either way (the callgrind gate's `listeners_4`).
    @inlinable @inline(__always)
    func tell<S: State>(_ old: S, _ new: inout S) where Element == ListenerBox<S> {
        for index in indices {
            Unmanaged.passUnretained(self[index])._withUnsafeGuaranteedRef {
                if $0.active.load(ordering: .acquiring) { $0.listener(old, new) }
            }
        }
    }
}

extension DispatchHandle {
    /// The handle of an item the dispatching thread ran to its end: `success`, or what it threw (an updater's own
    /// error as it threw it). Every inline path makes its handle here. Always inlined, as `_apply(at:)` is (below).
    @inlinable @inline(__always) init<Failure: Error>(ranInline failure: Failure?, success: Value) {
        if let failure { storage = .failed(KatanaError.surfaced(failure)) } else { storage = .succeeded(success) }
    }
}

// How each kind of updater changes the state in place: the store's side of `AnyStateUpdater._apply(at:)`, beside
// `applyAndNotify` and the batch's `applyLocked`, its callers (the updater protocols and Katana's erased
// `updatedState(currentState:)` are `StateUpdater.swift`'s). Each is always inlined: specialised, the type check folds
// away and with it the error a dispatch could report, so the store's handle is made without one. Left to the compiler,
// an updater too large to inline kept `_apply` and the handle's initialiser out of line, two calls more per dispatch
// (the callgrind gate's `fire_and_forget_writing`).

extension AnyStateUpdater {
    /// An updater known only by its erased form: Katana's `updatedState(currentState:)`, its result stored back.
    public func _apply<T: State>(at state: UnsafeMutablePointer<T>) throws(KatanaError) {
        guard let updated = try? updatedState(currentState: state.pointee), let typed = updated as? T else {
            throw KatanaError.stateTypeMismatch(expected: "\(T.self)", got: "\(type(of: self))")
        }
        state.pointee = typed
    }
}

extension StateUpdater {
    @inlinable @inline(__always)
    public func _apply<T: State>(at state: UnsafeMutablePointer<T>) throws(KatanaError) {
        guard T.self == StateType.self else {
            throw KatanaError.stateTypeMismatch(expected: "\(T.self)", got: "\(Self.self)")
        }
        // T and StateType are the same type (checked above): mutate in place, so a copy-on-write state is not copied.
        updateState(&UnsafeMutableRawPointer(state).assumingMemoryBound(to: StateType.self).pointee)
    }
}

extension ThrowingStateUpdater {
    @inlinable @inline(__always)
    public func _apply<T: State>(at state: UnsafeMutablePointer<T>) throws(KatanaError) {
        guard T.self == StateType.self else {
            throw KatanaError.stateTypeMismatch(expected: "\(T.self)", got: "\(Self.self)")
        }
        // `updateState` on a copy of the state (a `StateType`: `T` is `StateType`), stored back only if it returns.
        let typed = UnsafeMutableRawPointer(state).assumingMemoryBound(to: StateType.self)
        var copy = typed.pointee
        do {
            try updateState(&copy)
        } catch {
            throw KatanaError.updaterThrew(UpdaterFailure(error: error, updater: "\(Self.self)"))
        }
        typed.pointee = copy
    }
}

extension ValidatingStateUpdater {
    @inlinable @inline(__always)
    public func _apply<T: State>(at state: UnsafeMutablePointer<T>) throws(KatanaError) {
        guard T.self == StateType.self else {
            throw KatanaError.stateTypeMismatch(expected: "\(T.self)", got: "\(Self.self)")
        }
        // `validate` on the state (a `StateType`: `T` is `StateType`), then `updateValidatedState` on it in place — no
        // copy: `ThrowingUpdaterTests.aValidatingUpdaterChangesTheStateInPlace`.
        let typed = UnsafeMutableRawPointer(state).assumingMemoryBound(to: StateType.self)
        do {
            try validate(typed.pointee)
        } catch {
            throw KatanaError.updaterThrew(UpdaterFailure(error: error, updater: "\(Self.self)"))
        }
        updateValidatedState(&typed.pointee)
    }
}
