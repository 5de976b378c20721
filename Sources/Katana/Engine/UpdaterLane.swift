import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// The updater lane: taking it, applying a dispatcher's own updater inline, queueing behind it, the flood policy's wait
// and handing the lane back. The rules themselves are `LaneState`'s; this is where the store acts on them.
extension StoreEngine {
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
        let thread = katana_thread_id()
        // The common case — the store ready, the lane idle, nothing queued — takes the lane with one compare-and-swap;
        // a lane another thread holds is waited for briefly (`spinTake`); anything else arrives under `laneLock`.
        // Taken before the trace identity is made, not after: between one dispatch's give-back and its thread's next
        // take, a second producer waiting for the lane takes it, and the shorter that gap, the less often the lane
        // changes cores. For the same reason the recording stays inside the hold: moved out, it widened the gap and
        // two producers got slower. Guarded by `katana-bench micro --only two-producers` and `--backend metrics`'s
        // two-producer line (figures in #48's closing note).
        let tookFast = laneWord.tryTake(thread: thread)
        let (id, name) = traceIdentity(of: type)
        if !tookFast, !laneWord.spinTake(thread: thread, nanoseconds: Self.laneWaitNanoseconds) {
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
            let failure = applyAndNotify(updater)
            releaseLane(thread: thread)
            return DispatchHandle(ranInline: failure, success: success)
        }
        if id == 0, listenersAreInline, !bypassInterceptors {
            // Untraced, through the interceptors (of either form) on this thread, without a lane item.
            return applyInline(UntracedRun(), updater, parentID: parentID, typed: typedLinks, thread: thread,
                               combined: false, success: success)
        }
        if direct, combinesWithoutItem(type) {
            // Traced as one event at its end, no interceptors, and no lane item either (it was most of what a recorded
            // dispatch cost over an unrecorded one in `katana-bench micro --backend flight-recorder`).
            if recordsDispatches { recordApplying(updater, id: id, parentID: parentID) }
            return applyInline(CombinedRun(id: id, parentID: parentID, name: name), updater, parentID: parentID,
                               typed: typedLinks, thread: thread, combined: true, success: success)
        }
        let item = LaneItem(updater: updater, cell: nil, id: id, parentID: parentID, name: name, bypass: bypassInterceptors)
        // Traced through a backend that combines, with no budget to check: one event at the end (enqueue and begin
        // are this moment, which it carries as its duration) instead of three — with or without interceptors.
        let combined = id != 0 && tracerCombinesInline && (budgets.nanoseconds.isEmpty || hasNoBudget(item))
        if id != 0, !combined { traceEnqueue(item, route: .updaterInline, depth: 0) }
        if listenersAreInline, !(item.bypass && intercepting) {
            return applyInline(item, updater, parentID: parentID, typed: typedLinks, thread: thread, combined: combined,
                               success: success)
        }
        // Listeners on their executor: the batch path, which reads them under `laneLock`.
        laneLock.lock()
        let listeners = listenersForBatch()
        laneLock.unlock()
        let result = process(item, route: .updaterInline, recordChanges: !listeners.isEmpty, combined: combined)
        deliverChanges(to: listeners)
        let handle = inlineHandle(result, success: success, parentID: parentID)
        releaseLane(thread: thread)
        return handle
    }

    /// The one inline path of every updater its dispatching thread applies but the untraced one without interceptors
    /// (`enqueueUpdater` spells that one out): between `trace`'s start and finish — nothing (``UntracedRun``), one event
    /// at the end without a lane item (``CombinedRun``), or by its lane item — apply it and tell the listeners now,
    /// through the interceptors when there are any (`applyInlineThroughLinks`); give the lane back; make the handle.
    /// Generic over the trace, so each kind's calls are specialised in, none tested per dispatch.
    @inlinable @inline(__always)
    final func applyInline<T: InlineRunTrace, U: AnyStateUpdater, V: Sendable>(
        _ trace: T, _ updater: U, parentID: UInt64, typed: Bool, thread: UInt, combined: Bool, success: V
    ) -> DispatchHandle<V> {
        if intercepting {
            return applyInlineThroughLinks(trace, updater, parentID: parentID, typed: typed, thread: thread,
                                           combined: combined, success: success)
        }
        let started = trace.start(self, combined: combined)
        let failure = applyAndNotify(updater)
        trace.finish(self, combined: combined, started: started, outcome: failure == nil ? .ok : .error, failure: failure)
        releaseLane(thread: thread)
        return DispatchHandle(ranInline: failure, success: success)
    }

    /// Applies an updater on this thread, which holds the lane, and hands the change straight to inline listeners.
    /// (Generic, so the direct paths and the typed chain's end apply it specialised, and the erased chain's end —
    /// its existential opened — through its witness, with one body here.) The listeners are read under the state
    /// lock, which every change of them holds too: a dispatch that took the lane lock-free holds no other lock.
    @inlinable @inline(__always)
    final func applyAndNotify<U: AnyStateUpdater>(_ updater: U) -> KatanaError? {
        var failure: KatanaError?
        lockedState.lock()
        let listeners = self.listeners
        if listeners.isEmpty {
            do { try updater._apply(at: &lockedState.value) } catch { failure = error }
            lockedState.unlock()
        } else if listenersNeedOldState {
            let old = lockedState.value
            do { try updater._apply(at: &lockedState.value) } catch { failure = error }
            let new = lockedState.value
            lockedState.unlock()
            if failure == nil { listeners.tell(old, new) }
        } else {
            // New-state listeners only: the state changes in place (no copy kept to copy-on-write against), and they
            // are lent it where it lies (`tell(inPlace:)`). The (old, new) form above needs no such help: there the
            // compiler already hands `new` over without a retain of its own (callgrind). One notifier for both that
            // took `old` as an optional made the gate's `fire_and_forget` 443 instructions, from 296.
            do { try updater._apply(at: &lockedState.value) } catch { failure = error }
            lockedState.unlock()
            if failure == nil { listeners.tell(inPlace: &lockedState.value) }
        }
        listenersTold = failure == nil ? UInt32(truncatingIfNeeded: listeners.count) : 0
        return failure
    }

    /// An item's trace identity: a fresh id and its type's name while a trace session listens, `(0, nil)` when not
    /// (id 0 means "not traced" everywhere in the lane). Always inlined: left to itself the compiler stopped
    /// inlining it into `enqueueUpdater` after an unrelated change there, a call on every traced dispatch (the
    /// callgrind gate's `fire_and_forget_*` rows).
    @inlinable @inline(__always)
    final func traceIdentity(of type: Any.Type) -> (id: UInt64, name: TraceName?) {
        guard tracingEnabled else { return (0, nil) }
        return (KatanaTracing.nextID(), TraceName.of(type))
    }

    /// Whether the backend listens: never for the no-op backend; a native provider's (or an in-process backend's)
    /// check called directly; else the existential's `isEnabled`.
    @inlinable
    final var tracingEnabled: Bool {
        if let check = enabledCheck { check() != 0 } else { !tracesNothing && tracer.isEnabled }
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
            let cell = makeCell(for: V.self)
            launchSideEffect(sideEffect, cell: cell, parentID: parentID)
            return DispatchHandle(cell)
        }
    }

    /// Re-enqueues an item that already has a handle (kept until ready, or forwarded by an interceptor). It never
    /// waits for room: it was dispatched already.
    @inlinable
    final func enqueueExisting(_ item: LaneItem, ignoringReadiness: Bool, alreadyTraced: Bool) {
        let thread = katana_thread_id()
        laneLock.lock()
        let arrival = lane.arrive(thread: thread, ignoringReadiness: ignoringReadiness, canWait: false)
        guard arrival == .applyInline else {
            enter(item, arrival, traced: !alreadyTraced)
            return
        }
        let listeners = listenersForBatch()
        if item.id != 0, !alreadyTraced { traceEnqueue(item, route: .updaterInline, depth: 0) }
        laneLock.unlock()
        finish(item, process(item, route: .updaterInline, recordChanges: !listeners.isEmpty))
        deliverChanges(to: listeners)
        resolveFinished()
        releaseLane(thread: thread)
    }

    /// Puts an item with a handle where `arrival` says (kept until ready, or queued in the lane) and traces where it went; for
    /// `.enqueueAndHelp` this thread holds the lane and helps drain it. Caller holds `laneLock`; this releases it.
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
            lane.enqueue(item)
            laneLock.unlock()
        case .enqueueAndHelp, .applyInline:
            // The previous holder ran out of helping limit and left work behind (or the lane was given up while
            // this thread waited for room): queue behind it and help.
            if traced { traceEnqueue(item, route: .updaterInline, depth: lane.pending.count) }
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
    final func releaseLane(thread: UInt = katana_thread_id()) {
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
}

/// Whether a thread holds the lane, whether updaters were queued in it since it was taken, and whether the store is
/// not ready yet (what is dispatched then is kept until it is): one atomic byte, so that the common dispatch — the store ready, the
/// lane idle with nothing queued — takes the lane with one compare-and-swap (``tryTake(thread:)``) and gives it back
/// with another (``releaseIfNothingQueued()``), without `laneLock`. Everything else that changes it does so with
/// `laneLock` held, by compare-and-swap where a lock-free taker could change it meanwhile: a producer that queues sets
/// `queued`, so it either lands before the holder's give-back (which then fails, and the holder takes the lock and
/// helps drain the lane) or sees the lane idle and takes it.
@usableFromInline
final class LaneWord: Sendable {
    @usableFromInline static let busy: UInt8 = 1
    @usableFromInline static let queued: UInt8 = 2
    /// The store is not ready: what is dispatched is kept until it is (see ``LaneState/earlyItems``), so nothing takes the lane
    /// lock-free. Cleared once, when the store becomes ready (``LaneState/takeEarlyItems()``).
    @usableFromInline static let notReady: UInt8 = 4
    @usableFromInline let bits = Atomic<UInt8>(LaneWord.notReady)
    /// The thread that holds the lane (meaningful while `busy`): written by the taker, read by producers deciding
    /// whether to wait for room, and by debug checks.
    @usableFromInline let owner = Atomic<UInt>(0)
    @usableFromInline init() {}

    /// Takes the lane if the store is ready and the lane idle with nothing queued: then the caller holds it, applies
    /// its own updater and gives it back (``releaseIfNothingQueued()``, else under `laneLock`). `false`: take
    /// `laneLock` and arrive (``LaneState/arrive(thread:ignoringReadiness:canWait:)``).
    @inlinable @inline(__always)
    func tryTake(thread: UInt) -> Bool {
        guard bits.compareExchange(expected: 0, desired: LaneWord.busy, ordering: .acquiring).exchanged else {
            return false
        }
        owner.store(thread, ordering: .relaxed)
        return true
    }

    /// `tryTake` for a lane another thread holds: watches the word for up to `nanoseconds` and takes the lane the
    /// moment it is idle with nothing queued — also through a holder's helping turn, so the waiter goes right
    /// after the work queued before it. `false`: queue instead (also at once for the holder itself, an updater or
    /// listener dispatching, and before the store is ready).
    ///
    /// A back-off, not a lock: the dispatch never waits longer than this, and a holder that stays (a slow updater,
    /// a long backlog) makes it queue as before. See `StoreEngine.laneWaitNanoseconds` for why and what it costs.
    ///
    /// The first ``looksWithoutPause`` looks come back to back, so a short hold is noticed at once. After them the
    /// waiter pauses between looks (`katana_cpu_relax`), twice as long each time, up to ``maxPausesBetweenLooks``:
    /// each look pulls the word's line to this core and the holder's next take pulls it back, so a waiter looking
    /// back to back slowed the very holder it waited for — the one that keeps taking the lane between its own
    /// dispatches while another producer waits (`katana-bench micro --only two-producers`, pausing against looking
    /// back to back, interleaved).
    /// Out of line: only a dispatch that found the lane busy calls it, and the common dispatch's code stays as it was.
    @usableFromInline @inline(never)
    func spinTake(thread: UInt, nanoseconds: UInt64) -> Bool {
        if owner.load(ordering: .relaxed) == thread { return false }
        var deadline: UInt64 = 0
        var looks = 0
        var pauses = 0  // 0 while looking back to back
        while true {
            let bits = bits.load(ordering: .relaxed)
            if bits & LaneWord.notReady != 0 { return false }
            if bits == 0, tryTake(thread: thread) { return true }
            if pauses == 0 {
                looks &+= 1
                guard looks & 63 == 0 else { continue }
                if looks == LaneWord.looksWithoutPause { pauses = 1 }
            } else {
                for _ in 0..<pauses { katana_cpu_relax() }
                if pauses < LaneWord.maxPausesBetweenLooks { pauses &*= 2 }
            }
            // Every 64 looks back to back, then after every pause.
            let now = DispatchTime.now().uptimeNanoseconds
            if deadline == 0 {
                deadline = now &+ nanoseconds
            } else if now >= deadline {
                return false
            }
        }
    }

    /// Looks at a busy lane's word in `spinTake` before the waiter starts pausing between them (a multiple of 64).
    @usableFromInline static let looksWithoutPause = 128

    /// The most pauses between two looks at a busy lane's word in `spinTake`, so a wait that runs out overruns its
    /// time by at most that many pauses. Fewer looked often enough to slow the holder (`katana-bench micro --only
    /// two-producers`, interleaved sets of settings); more made waits that run out (a holder helping drain the lane, under
    /// `run -s mixed`) longer.
    @usableFromInline static let maxPausesBetweenLooks = 16

    /// The holder's give-back without `laneLock`: succeeds when no updater was queued since the lane was taken (the
    /// word is exactly `busy`); otherwise the caller takes the lock and calls ``LaneState/release(thread:)``.
    @inlinable @inline(__always)
    func releaseIfNothingQueued() -> Bool {
        bits.compareExchange(expected: LaneWord.busy, desired: 0, ordering: .releasing).exchanged
    }
}
