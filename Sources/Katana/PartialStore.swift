import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

/// Unsubscribes a listener added with `addListener`. Calling it more than once is harmless.
public typealias StoreUnsubscribe = @Sendable () -> Void

/// A store seen with both its state and its dependency types erased (Katana's name): for code that works with
/// stores of any state, such as interceptors and libraries. Code that knows the state type but must not reach the
/// dependencies (views, routers, reducers) takes a ``PartialStore`` instead, which keeps the state typed.
public protocol AnyStore: AnyObject, Sendable {
    /// The current state, erased.
    var anyState: any State { get }
    /// Whether the state initializer has run and interceptors are set up.
    var isReady: Bool { get }
    /// Dispatches any item (see `Store.dispatch`).
    @discardableResult func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable>
}

/// The state machinery shared by every `Store<S, D>`: the updater lane, listeners, readiness, side-effect
/// launch. Hand a `PartialStore<S>` to code that must not see the store's dependencies.
///
/// ## Threading contract
/// - `dispatch` returns at once from any thread, and applies at most the combining budget of other threads' work;
///   the one wait is the flood policy's (`StoreConfiguration.backlogLimit`): a producer thread that already has
///   updaters queued in a full lane waits for room, never while the lane is stalled, and never inside a task.
/// - State updaters are applied one at a time, in a single global order that respects each producer's dispatch
///   order, even when an earlier one is slow. When the updater lane is idle, the dispatching thread applies its
///   own updater before `dispatch` returns (so awaiting its handle does not suspend); when the lane is busy the
///   updater is queued and applied in a batch by whichever thread holds the lane, or by the store's serial
///   updater queue.
/// - Listeners receive `(old, new)` for every applied updater, in order, on the configured listener executor,
///   before the updater's handle resolves.
/// - Side effects run concurrently with each other and with the lane, each in its own task on Swift's global
///   concurrent executor.
/// - Tracing: every dispatch emits `dispatch_enqueue`, `dispatch_begin` and `dispatch_end` to the store's
///   trace backend (LTTng by default), sharing one id; items dispatched from a side effect carry its id as
///   `parent_id`.
public class PartialStore<S: State>: AnyStore, SideEffectHost, @unchecked Sendable {
    // Why @unchecked Sendable is sound: every mutable stored property below is either guarded by the lock named
    // beside it, or owned by the lane holder — the one thread that took the lane (`lane.busy`), under `laneLock` or
    // lock-free (`laneWord.tryTake`, an acquiring compare-and-swap); ownership passes between threads through
    // `laneLock`, or through `laneWord` when a holder gives an idle lane back without the lock (a releasing
    // compare-and-swap, seen by the next taker's acquiring one): either orders the accesses. `chain`, `links` and
    // `intercepting` are written once, in `becomeReady`, before the store is marked ready (the word's `holding` bit
    // cleared with a releasing store, under `laneLock`), and only read after that.

    /// The identity stores report in traces (`store_ready`, `listeners_notified`).
    public final let storeID: UInt64
    /// The executors this store runs its own work on.
    public final let configuration: StoreConfiguration

    @usableFromInline final let tracer: any TraceBackend
    /// Per-type latency budgets (flight recorder); checked only for traced dispatches.
    @usableFromInline final let budgets: LatencyBudgets
    @usableFromInline final let laneLock = Lock(adaptive: true)
    @usableFromInline final let stateLock = Lock(adaptive: true)
    /// Shared by every pending handle of this store.
    @usableFromInline final let completionLock = Lock()
    /// The lane's busy/queued word (`lane.word`), reached without touching `lane`: the holder gives an idle lane back
    /// through it without `laneLock`.
    @usableFromInline final let laneWord = LaneWord()
    /// Where producers wait for room in a full lane (the flood policy).
    @usableFromInline final let room: Lock.Condition

    /// Katana's closure interceptors composed into one chain: written once before ready; retained by hand and
    /// released in deinit (see ``ClosureChain``).
    @usableFromInline @exclusivity(unchecked) final var chain: Unmanaged<ClosureChain<StoreInterceptorChain>>?
    /// Where the chain's last `next` finds an updater's inline run through it (see ``ClosureChainEnd``).
    @usableFromInline final let closureEnd = ClosureChainEnd()
    /// The configuration's protocol-form interceptors, bound to this store; run before `chain`.
    /// (Boxes referenced unretained from the store's own buffer, not an array of existentials: an interceptor is
    /// called in place from its box's `let`, where an element was copied out and destroyed around each call. Written
    /// once before ready; retained by hand and released in deinit.)
    @usableFromInline @exclusivity(unchecked) final var links = UnsafeMutableBufferPointer<Unmanaged<LinkBox>>(start: nil, count: 0)
    /// The leading ones of `links` that are ``TypedDispatchInterceptor``s, as a list (a state updater dispatched with
    /// its type goes through these typed, then through the rest erased). Retained by hand: set once before ready,
    /// released in deinit; read without reference counting.
    @usableFromInline @exclusivity(unchecked) final var firstTypedLink: Unmanaged<TypedLink>?
    /// Whether there are interceptors of either form.
    @usableFromInline @exclusivity(unchecked) final var intercepting = false  // written once before ready

    @usableFromInline final let sideEffects: SideEffectRegistry
    @usableFromInline final let updaterQueue: DispatchQueue
    @usableFromInline final let listenersAreInline: Bool
    /// The backend takes an updater applied inline as one event at its end (`TraceBackend.combinesInlineUpdaters`).
    @usableFromInline final let tracerCombinesInline: Bool
    /// `tracer.isEnabled` as a plain C function when the backend is a native provider (or the no-op one): asked on
    /// every dispatch, without the existential's copy, projection and witness call.
    @usableFromInline final let enabledCheck: (@convention(c) () -> Int32)?
    /// A native provider's `updater_inline`, called directly with the name's bytes (no event value, no retains).
    @usableFromInline final let nativeUpdaterInline:
        (@convention(c) (UInt64, UInt64, UnsafePointer<CChar>, UInt32, UInt32, UInt64, UInt8) -> Void)?


    /// Set (under `laneLock`) once nothing is held any more: from then on the lane never holds again, so an untraced
    /// side effect starts without taking `laneLock` — which every updater's dispatch takes too, and which side
    /// effects dispatched from one thread while others apply updaters otherwise contend for.
    @usableFromInline final let readyForSideEffects = Atomic<Bool>(false)

    // The fields above are read on every dispatch and written only before the store is shared (or once before it is
    // ready). The two groups below are written on every dispatch — the lane's by every producer, the holder's by the
    // thread applying — so each sits on cache lines of its own: with them interleaved, a producer reading `laneLock`
    // or `intercepting` missed its cache on every dispatch because the holder had just written `_state` or `lane` next
    // to it (the pads are never read).
    @usableFromInline final let padBeforeLane = CacheLinePad()

    /// The lane's rules and state (see `LaneState`): taken, queued and released under `laneLock`, except that an idle
    /// lane with nothing queued is taken through `laneWord` alone (`LaneWord.tryTake`), and a holder with nothing
    /// queued since it took the lane gives it back the same way.
    @usableFromInline @exclusivity(unchecked) final var lane: LaneState  // laneLock
    /// Changed with both `stateLock` and `laneLock` held (``changeListeners(_:)``), read with either.
    @usableFromInline @exclusivity(unchecked) final var listeners: [ListenerBox<S>] = []
    /// Whether any listener takes `(old, new)`: then every change keeps a copy of the state before it.
    @usableFromInline @exclusivity(unchecked) final var listenersNeedOldState = false  // as `listeners`

    @usableFromInline final let padBeforeHolder = CacheLinePad()

    /// The thread applying updaters under `stateLock` right now (0: none). Written only by that thread while it holds
    /// the lock; another thread can only ever read a value that is not its own id, so a stale read is harmless.
    @usableFromInline final let applyingThread = Atomic<UInt>(0)
    @usableFromInline @exclusivity(unchecked) final var drainBuffer: [LaneItem] = []  // lane holder
    @usableFromInline @exclusivity(unchecked) final var changes: [(S, S)] = []  // lane holder
    /// The lane holder's snapshot of `listenersNeedOldState` for the items it applies now.
    @usableFromInline @exclusivity(unchecked) final var keepOldStates = false  // lane holder
    /// New-state listeners only: a change was applied in this batch and not yet delivered.
    @usableFromInline @exclusivity(unchecked) final var newStatePending = false  // lane holder
    @usableFromInline @exclusivity(unchecked) final var finished: [FinishedUpdater] = []  // lane holder
    /// Cells resolved in the holder's last batch, to reuse once their handles are gone (`recycleCells`).
    @usableFromInline @exclusivity(unchecked) final var recyclable: [HandleCell] = []  // lane holder
    /// Reset cells waiting to be handed to the lane (`offerSpareCells`).
    @usableFromInline @exclusivity(unchecked) final var spareCells: [HandleCell] = []  // lane holder
    /// Waiters of the cells the holder resolved under `completionLock`, with the error each was resolved with (nil:
    /// applied), resumed once the lock is released (`wakeWaiters`).
    @usableFromInline @exclusivity(unchecked) final var wakeups: [(HandleCell.Wakeup, (any Error)?)] = []  // lane holder
    /// Last of this class's fields: the one whose size depends on `S`, so every field above has an offset known at
    /// compile time.
    @usableFromInline @exclusivity(unchecked) final var _state: S = S()  // stateLock
    @usableFromInline final let padAfterHolder = CacheLinePad()

    init(configuration: StoreConfiguration, tracer: any TraceBackend, contextPrototype: any ScopedSideEffectContext) {
        self.configuration = configuration
        self.tracer = tracer
        self.tracerCombinesInline = tracer.combinesInlineUpdaters
        let native = tracer as? NativeTraceBackend
        self.enabledCheck = if let native { native.enabledCheck } else if tracer is NoOpTraceBackend { { 0 } } else { nil }
        self.nativeUpdaterInline = native?.updaterInlineFunction
        self.budgets = configuration.latencyBudgets
        self.storeID = KatanaTracing.nextID()
        self.updaterQueue = DispatchQueue(label: "katana.store.updaters")
        self.listenersAreInline = configuration.listenerExecutor.isInline
        self.sideEffects = SideEffectRegistry(lock: completionLock, tracer: tracer, budgets: configuration.latencyBudgets,
                                              contextPrototype: contextPrototype)
        self.room = Lock.Condition(laneLock)
        self.lane = LaneState(backlogLimit: configuration.backlogLimit, word: laneWord)
        sideEffects.host = self
    }

    deinit {
        // Side effects still running are cancelled; items held before readiness are rejected (nothing else can be
        // pending: whoever holds the lane, or the updater queue's kick, holds the store).
        sideEffects.close()
        for link in links { link.release() }
        links.deallocate()
        firstTypedLink?.release()
        chain?.release()
        // Each ends in the trace too (its enqueue was traced as held): cancelled if it was, else rejected.
        for item in lane.held ?? [] {
            let (cell, id, parentID, name, kind): (HandleCell?, UInt64, UInt64, TraceName?, DispatchKind) = switch item {
            case let .updater(updater): (updater.cell, updater.id, updater.parentID, updater.name, .stateUpdater)
            case let .sideEffect(sideEffect): (sideEffect.cell, sideEffect.id, sideEffect.parentID, sideEffect.name, .sideEffect)
            }
            let cancelled = cell?.isCancelled ?? false
            if id != 0, let name {
                tracer.dispatchDropped(id: id, parentID: parentID, kind: kind, name: name, lane: .held,
                                       outcome: cancelled ? .cancelled : .error, failure: KatanaError.storeReleased)
            }
            cell?.resolve(.failure(KatanaError.storeReleased))
        }
    }

    // MARK: Reading

    /// The current state: reflects every updater whose handle has resolved. `S()` until the store is ready.
    ///
    /// Read from inside a state updater or reducer that this store is applying on the same thread (a misuse:
    /// updaters get the state as their argument), it returns the state as it is at that moment — the state the
    /// updater started from, plus whatever a `StateUpdater` already changed in place before the read — instead of
    /// deadlocking on the state lock.
    @inlinable
    public final var state: S {
        if stateLock.tryLock() {
            defer { stateLock.unlock() }
            return _state
        }
        if applyingThread.load(ordering: .relaxed) == currentThreadID {
            // This thread is inside an updater of this store, holding the state lock.
            return _state
        }
        stateLock.lock()
        defer { stateLock.unlock() }
        return _state
    }

    /// Takes the state lock to apply updaters, noting which thread holds it (see `state`).
    @inlinable
    final func lockStateForApplying(thread: UInt = currentThreadID) {
        stateLock.lock()
        applyingThread.store(thread, ordering: .relaxed)
    }

    @inlinable
    final func unlockStateAfterApplying() {
        applyingThread.store(0, ordering: .relaxed)
        stateLock.unlock()
    }

    public final var anyState: any State { state }

    /// Whether the state initializer has run and the interceptors are initialised. Items dispatched before
    /// that are held and run, in order, once it is.
    public final var isReady: Bool { laneLock.withLock { !lane.isHeld } }

    /// A context for a side effect (or, with no scope, for the interceptors): a `SideEffectContext` of the store's
    /// own types, so Katana 6's `context as? SideEffectContext<S, D>` works on what it receives.
    @usableFromInline final func makeContext(scope: HandleCell?) -> any AnySideEffectContext {
        sideEffects.contextPrototype.withScope(scope)
    }

    /// Listeners registered right now (those added with `addListener` and not yet unsubscribed).
    public final var listenerCount: Int { laneLock.withLock { listeners.count } }

    /// Side effects of this store running right now.
    public final var sideEffectsRunning: Int { sideEffects.count }

    // MARK: Listeners

    /// Calls `listener` with `(oldState, newState)` for every applied state updater from now on, in order, on
    /// the configured listener executor. Safe to call from any thread; the returned closure unsubscribes, after
    /// which the listener is not called again.
    @discardableResult
    public final func addListener(_ listener: @escaping @Sendable (_ oldState: S, _ newState: S) -> Void) -> StoreUnsubscribe {
        subscribe(ListenerBox(listener))
    }

    /// Calls `listener` with the new state after every applied state updater from now on, in order, on the
    /// configured listener executor — without the old state, so the store keeps no copy of it: a large state
    /// changed in place costs what a small one does (an `(old, new)` listener makes every change copy the state).
    /// Changes applied together in one batch (while other threads were dispatching) may arrive as one call with
    /// the state after the last of them, as Redux's `subscribe` behaves. Unsubscribe with the returned closure.
    @discardableResult
    public final func addListener(newState listener: @escaping @Sendable (_ newState: S) -> Void) -> StoreUnsubscribe {
        subscribe(ListenerBox(newState: listener))
    }

    final func subscribe(_ box: ListenerBox<S>) -> StoreUnsubscribe {
        changeListeners {
            $0.append(box)
        }
        return { [weak self] in
            box.deactivate()
            self?.changeListeners { $0.removeAll { $0 === box } }
        }
    }

    /// The listeners for the items the lane holder applies next through the batch path, with `keepOldStates` set
    /// for them (whether each change must keep the state before it). Caller holds `laneLock` and the lane.
    @inlinable
    final func listenersForBatch() -> [ListenerBox<S>] {
        keepOldStates = listenersNeedOldState
        return listeners
    }

    /// Changes the listeners with both locks held: the state lock (an updater applied inline reads them under it,
    /// having taken the lane lock-free) and `laneLock` (the batch paths read them under it), in that order. From
    /// inside an updater this store is applying on this thread (a misuse), the state lock is this thread's already.
    final func changeListeners(_ change: (inout [ListenerBox<S>]) -> Void) {
        let applying = applyingThread.load(ordering: .relaxed) == currentThreadID
        if !applying { stateLock.lock() }
        laneLock.lock()
        change(&listeners)
        listenersNeedOldState = listeners.contains { $0.needsOldState }
        laneLock.unlock()
        if !applying { stateLock.unlock() }
    }

    // MARK: Dispatching

    /// Dispatches a state updater. Returns at once; the handle resolves once the state is updated.
    @inlinable @discardableResult
    public final func dispatch<U: StateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        enqueueUpdater(updater, type: U.self, parentID: 0, success: (), bypassInterceptors: false, typedLinks: true)
    }

    /// Dispatches a state updater that may refuse: when it throws, the state is unchanged and the handle carries
    /// its error.
    @inlinable @discardableResult
    public final func dispatch<U: ThrowingStateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        enqueueUpdater(updater, type: U.self, parentID: 0, success: (), bypassInterceptors: false, typedLinks: true)
    }

    /// Dispatches a state updater that traces show under another type's name. For adapters whose one updater type
    /// carries many kinds of request (the reducer API's actions, say): traces then name what the app dispatched.
    @inlinable @discardableResult
    public final func dispatch<U: StateUpdater>(_ updater: U, tracedAs type: Any.Type) -> DispatchHandle<Void> where U.StateType == S {
        enqueueUpdater(updater, type: type, parentID: 0, success: (), bypassInterceptors: false, typedLinks: true)
    }

    /// Dispatches a state updater that may refuse, under another type's name in traces (see above).
    @inlinable @discardableResult
    public final func dispatch<U: ThrowingStateUpdater>(_ updater: U, tracedAs type: Any.Type) -> DispatchHandle<Void> where U.StateType == S {
        enqueueUpdater(updater, type: type, parentID: 0, success: (), bypassInterceptors: false, typedLinks: true)
    }

    /// Dispatches any item: a state updater, a side effect or a returning side effect. The handle carries the
    /// side effect's return value (`()` for the others). Items of the wrong state type, or that are both or
    /// neither kind, reject the handle with a ``KatanaError``.
    @discardableResult
    public final func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable> {
        anyDispatch(item, parentID: 0)
    }

    @usableFromInline
    final func anyDispatch(_ item: any Dispatchable, parentID: UInt64) -> DispatchHandle<any Sendable> {
        anyDispatch(item, parentID: parentID, bypassInterceptors: false)
    }

    @usableFromInline
    final func anyDispatch(_ item: any Dispatchable, parentID: UInt64, bypassInterceptors: Bool) -> DispatchHandle<any Sendable> {
        let asUpdater = item._katanaStateUpdater
        let asSideEffect = item._katanaSideEffect
        if asUpdater != nil && asSideEffect != nil {
            return .rejected(KatanaError.ambiguousDispatchable("\(type(of: item))"))
        }
        if let updater = asUpdater {
            return enqueueUpdater(updater, type: type(of: item), parentID: parentID, success: () as any Sendable,
                                  bypassInterceptors: bypassInterceptors)
        }
        if let sideEffect = asSideEffect {
            return enqueueSideEffect(sideEffect, type: type(of: item), parentID: parentID, as: (any Sendable).self,
                                     bypassInterceptors: bypassInterceptors)
        }
        return .rejected(KatanaError.notDispatchable("\(type(of: item))"))
    }

    @inlinable
    final func dispatchUpdater<U: StateUpdater>(_ updater: U, parentID: UInt64) -> DispatchHandle<Void> where U.StateType == S {
        enqueueUpdater(updater, type: U.self, parentID: parentID, success: (), bypassInterceptors: false, typedLinks: true)
    }

    @inlinable
    final func dispatchUpdater<U: ThrowingStateUpdater>(_ updater: U, parentID: UInt64) -> DispatchHandle<Void> where U.StateType == S {
        enqueueUpdater(updater, type: U.self, parentID: parentID, success: (), bypassInterceptors: false, typedLinks: true)
    }

    @inlinable
    final func dispatchSideEffect<E: AnySideEffect, V: Sendable>(_ sideEffect: E, parentID: UInt64, as: V.Type) -> DispatchHandle<V> {
        enqueueSideEffect(sideEffect, type: E.self, parentID: parentID, as: V.self, bypassInterceptors: false)
    }

    // MARK: Items

    /// An item's trace identity: a fresh id and its type's name while a trace session listens, `(0, nil)` when not
    /// (id 0 means "not traced" everywhere in the lane).
    @inlinable
    final func traceIdentity(of type: Any.Type) -> (id: UInt64, name: TraceName?) {
        guard tracingEnabled else { return (0, nil) }
        return (KatanaTracing.nextID(), TraceName.of(type))
    }

    /// Whether the backend listens: a native provider's (or the no-op backend's) check called directly, else the
    /// existential's `isEnabled`.
    @inlinable
    final var tracingEnabled: Bool { if let check = enabledCheck { check() != 0 } else { tracer.isEnabled } }

    /// A pending handle's cell, for a handle whose value is `V` (a `Void` or erased handle accepts an updater's `()`).
    @inlinable
    final func makeCell<V: Sendable>(for: V.Type) -> HandleCell {
        HandleCell(lock: completionLock, acceptsVoid: V.self == Void.self || V.self == (any Sendable).self)
    }

    // MARK: The updater lane

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

    /// One of the configuration's interceptors, bound to this store.
    @usableFromInline
    final class LinkBox {
        @usableFromInline let interceptor: any DispatchInterceptor
        init(_ interceptor: any DispatchInterceptor) { self.interceptor = interceptor }
    }

    /// What the end of an inline run through the protocol-form interceptors saw: whether `next` reached it (a second
    /// call dispatches anew), whether it applied the updater, and what an interceptor forwarded instead of one.
    /// Trivial, so nothing has to destroy it (a value of a type nested in the generic store is destroyed through its
    /// metadata: ~6 % of a dispatch through 3 typed interceptors): the replacement, rare, is kept retained in a box
    /// and taken once with `takeReplacement()`.
    @usableFromInline
    struct LinkEnd {
        @usableFromInline var nextCalled = false
        @usableFromInline var applied = false
        @usableFromInline var replacementBox: Unmanaged<ReplacementBox>?
        @inlinable init() {}

        /// Keeps `item` as the replacement (the end is reached once before it is taken, so there is none yet).
        @usableFromInline
        mutating func setReplacement(_ item: any Dispatchable) {
            replacementBox?.release()
            replacementBox = Unmanaged.passRetained(ReplacementBox(item))
        }

        /// The replacement, if any, giving up the box (call once, when the run is over).
        @inlinable
        mutating func takeReplacement() -> (any Dispatchable)? {
            guard let box = replacementBox else { return nil }
            replacementBox = nil
            return box.takeRetainedValue().item
        }
    }

    /// What an interceptor forwarded instead of an updater, kept by a ``LinkEnd`` until its run is over.
    @usableFromInline
    final class ReplacementBox {
        @usableFromInline let item: any Dispatchable
        init(_ item: any Dispatchable) { self.item = item }
    }

    /// The chain's end for the updater as dispatched, passed on by every interceptor in the typed form: applied as an
    /// updater without interceptors is (specialised).
    @inlinable @inline(__always)
    final func typedLinkEnd<U: AnyStateUpdater>(
        _ updater: U, _ end: inout LinkEnd, _ thread: UInt
    ) throws {
        guard !end.nextCalled else {
            _ = anyDispatch(updater, parentID: 0, bypassInterceptors: true)
            return
        }
        try applyAtLinkEnd(&end, thread) { (state: inout S) throws(KatanaError) in
            try updater._apply(to: &state)
        }
    }

    /// The chain's end for an item passed on erased (or forwarded instead): its kind checked, an updater applied
    /// through its witness, anything else kept as the replacement.
    @inlinable
    final func linkEnd(
        _ forwarded: any Dispatchable, _ end: inout LinkEnd, _ thread: UInt
    ) throws {
        guard !end.nextCalled else {
            _ = anyDispatch(forwarded, parentID: 0, bypassInterceptors: true)
            return
        }
        guard let updater = forwarded._katanaStateUpdater, forwarded._katanaSideEffect == nil else {
            end.nextCalled = true
            end.setReplacement(forwarded)
            return
        }
        try applyAtLinkEnd(&end, thread) { (state: inout S) throws(KatanaError) in
            try updater._apply(to: &state)
        }
    }

    /// `linkEnd` where the dispatched updater's type `U` is known: an item of exactly that type (the dispatched updater
    /// passed on, the common case) takes the typed chain's end and is applied specialised, where the erased end asks it
    /// for its updater and its side effect through two witnesses and applies it through a third (the callgrind
    /// gate's `dispatch_interceptors_3`);
    /// anything else goes the erased way.
    @inlinable @inline(__always)
    final func linkEnd<U: AnyStateUpdater>(
        _ forwarded: any Dispatchable, as _: U.Type, _ end: inout LinkEnd, _ thread: UInt
    ) throws {
        if let updater = sameType(forwarded, as: U.self) {
            try typedLinkEnd(updater, &end, thread)
        } else {
            try linkEnd(forwarded, &end, thread)
        }
    }

    /// Both ends' first `next`: apply (through `apply`) and tell the listeners; a refusal is thrown back up the chain.
    @inlinable @inline(__always)
    final func applyAtLinkEnd(
        _ end: inout LinkEnd, _ thread: UInt,
        _ apply: (inout S) throws(KatanaError) -> Void
    ) throws {
        end.nextCalled = true
        if let failure = applyAndNotify(thread: thread, apply) {
            throw KatanaError.surfaced(failure)
        }
        end.applied = true
    }

    /// Applies an updater inline through the protocol-form interceptors (no closure chain, inline listeners): the
    /// chain's end applies it and tells the listeners, as an updater without interceptors is (so an interceptor that
    /// throws after `next` reports an item that was applied and whose change the listeners were told). `updater` is
    /// the dispatched updater: with `typed`, the interceptors get it in their typed form. `trace` is its lane item
    /// when traced, else ``UntracedRun`` (an untraced updater gets no lane item: it would box the updater in an
    /// existential, copy it and destroy both). Called with the lane held; gives it back. (Never inlined: in
    /// `enqueueUpdater`'s body it changed how the common paths there were optimised — a traced dispatch cost ~110
    /// instructions more.)
    @inlinable @inline(never)
    final func applyInlineThroughLinks<U: AnyStateUpdater, V: Sendable, T: InlineRunTrace>(
        _ trace: T, _ updater: U, parentID: UInt64, typed: Bool, thread: UInt, combined: Bool, success: V
    ) -> DispatchHandle<V> {
        let started = trace.start(self, combined: combined)
        var thrown: (any Error)?
        if let chain {
            // Closures (after any protocol-form interceptors, erased): the chain's last `next` reaches this run
            // through `closureEnd`.
            var run = ClosureRun(store: Unmanaged.passUnretained(self), thread: thread)
            let links = !self.links.isEmpty
            do {
                try withUnsafeMutablePointer(to: &run) { pointer in
                    try closureEnd.with(UnsafeMutableRawPointer(pointer), thread: thread, end: { item, raw in
                        let run = raw.assumingMemoryBound(to: ClosureRun.self)
                        try run.pointee.store._withUnsafeGuaranteedRef {
                            try $0.linkEnd(item, as: U.self, &run.pointee.end, run.pointee.thread)
                        }
                    }) {
                        if links { try runLinks(updater, from: 0) { try chain($0) } } else { try chain(updater) }
                    }
                }
            } catch {
                thrown = error
            }
            return finishInlineRun(trace, updater, parentID: parentID, &run.end, thrown: thrown, combined: combined,
                                   started: started, thread: thread, success: success)
        }
        if typed, let first = firstTypedLink {
            var run = TypedRun(store: self, first: first, thread: thread)
            do {
                try withUnsafeMutablePointer(to: &run) { try Self.runTypedLinks(updater, $0) }
            } catch {
                thrown = error
            }
            return finishInlineRun(trace, updater, parentID: parentID, &run.end, thrown: thrown, combined: combined,
                                   started: started, thread: thread, success: success)
        }
        var end = LinkEnd()
        do {
            try runLinks(updater, from: 0, end: { try self.linkEnd($0, as: U.self, &end, thread) })
        } catch {
            thrown = error
        }
        return finishInlineRun(trace, updater, parentID: parentID, &end, thrown: thrown, combined: combined,
                               started: started, thread: thread, success: success)
    }

    /// The end of `applyInlineThroughLinks`: traces the outcome, gives the lane back and returns the handle.
    @inlinable @inline(__always)
    final func finishInlineRun<U: AnyStateUpdater, V: Sendable, T: InlineRunTrace>(
        _ trace: T, _ updater: U, parentID: UInt64, _ end: inout LinkEnd, thrown: (any Error)?,
        combined: Bool, started: (started: UInt64, parallelism: UInt32), thread: UInt, success: V
    ) -> DispatchHandle<V> {
        if thrown == nil, end.applied, end.replacementBox == nil {
            // Passed on and applied: the common case, without building a lane result.
            trace.finish(self, combined: combined, started: started, outcome: .ok, failure: nil)
            releaseLane(thread: thread)
            return DispatchHandle(resolved: .success(success))
        }
        let (result, outcome) = chainResult(updater, thrown: thrown, nextCalled: end.nextCalled, applied: end.applied,
                                            replacement: end.takeReplacement())
        if case let .done(error?) = result {
            trace.finish(self, combined: combined, started: started, outcome: outcome, failure: error)
        } else {
            trace.finish(self, combined: combined, started: started, outcome: outcome, failure: nil)
        }
        let handle = inlineHandle(result, success: success, parentID: parentID)
        releaseLane(thread: thread)
        return handle
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
    /// `.enqueueAndCombine` this thread holds the lane and combines. Caller holds `laneLock`; this releases it.
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
        case .enqueueAndCombine, .applyInline:
            // The previous holder ran out of combining budget and left work behind (or the lane was given up while
            // this thread waited for room): queue behind it and help.
            if traced { traceEnqueue(item, lane: .updaterInline, depth: lane.pending.count) }
            lane.enqueue(item)
            laneLock.unlock()
            combine()
        }
    }

    /// How much of other producers' work a dispatching thread that holds the lane may apply before it hands
    /// the rest to the store's queue: enough to avoid a thread hop per item under contention, small enough that
    /// `dispatch` stays short.
    @usableFromInline static var combiningItemBudget: Int { 256 }
    @usableFromInline static var combiningTimeBudgetNanoseconds: UInt64 { 20_000 }

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

    /// Gives the lane up; items that arrived meanwhile are applied first (see `combine`).
    @inlinable @inline(__always)
    final func releaseLane(thread: UInt = currentThreadID) {
        // Nothing queued since the lane was taken (the common case): give it back without the lock.
        if laneWord.releaseIfNothingQueued() { return }
        laneLock.lock()
        let release = lane.release(thread: thread)
        laneLock.unlock()
        if release == .combine { combine() }
    }

    /// Applies pending items on this thread, within the combining budget, then gives the lane up. The budget counts
    /// items, not batches: at most `combiningItemBudget` of them, taken in chunks of 1, 2, 4, … with the clock read
    /// after each chunk, so one slow item (or slow inline listener) ends the turn at once. If work is left, the lane
    /// is released with it still pending: the next dispatching thread takes the lane and continues (under contention
    /// producers take turns, with no thread hop), and a kick on the updater queue guarantees progress if no dispatch
    /// comes. So one `dispatch` call never applies more than the budget of other threads' items.
    @inlinable
    final func combine() {
        var left = Self.combiningItemBudget
        var chunk = 1
        let start = DispatchTime.now().uptimeNanoseconds
        while left > 0 {
            guard let count = drainBatch(lane: .updaterInline, limit: Swift.min(chunk, left)) else { return }
            left -= count
            if DispatchTime.now().uptimeNanoseconds &- start > Self.combiningTimeBudgetNanoseconds { break }
            chunk &*= 2
        }
        laneLock.lock()
        let leftover = lane.endTurn(thread: currentThreadID)
        wakeProducersIfRoom()
        offerSpareCells()
        laneLock.unlock()
        if leftover { updaterQueue.async { self.kick() } }
    }

    /// Takes the lane if it is idle with work pending, and drains it all.
    @inlinable
    final func kick() {
        laneLock.lock()
        let taken = lane.takeForQueue(thread: currentThreadID)
        laneLock.unlock()
        if taken { drainQueue() }
    }

    /// Runs on the updater queue while it holds the lane: applies everything pending, in batches that each take
    /// about `queueBatchNanoseconds` (the batch size doubles while batches are quicker, and shrinks in proportion
    /// when one was slower). Waiting producers tell a moving lane from a stalled one by the batches taken, so a
    /// batch must never outlast the stall timeout while the lane moves: the whole backlog taken at once (after a
    /// stall, 300 items of 1 ms) looked stalled, and producers flooded past the backlog limit without end.
    @inlinable
    final func drainQueue() {
        var limit = Self.queueBatchFirstLimit
        while true {
            let start = DispatchTime.now().uptimeNanoseconds
            guard drainBatch(lane: .updaterQueue, limit: limit) != nil else { return }
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

    /// Applies up to `limit` pending items as one batch and returns how many items that was; when nothing is
    /// pending, gives the lane up and returns nil. Called only by the lane holder.
    @inlinable
    final func drainBatch(lane: DispatchLane, limit: Int) -> Int? {
        let thread = currentThreadID
        laneLock.lock()
        guard self.lane.takeBatch(thread: thread, upTo: limit, into: &drainBuffer) else {
            offerSpareCells()  // the lane is given up: what this holder recycled goes to the producers
            laneLock.unlock()
            return nil
        }
        wakeProducersIfRoom()
        offerSpareCells()
        let listeners = listenersForBatch()
        laneLock.unlock()

        let record = !listeners.isEmpty
        let count = drainBuffer.count
        if !intercepting {
            // No interceptors: apply the whole batch under one acquisition of the state lock. The items are used in
            // place and their cells moved, not copied: each copy of an item or a cell was a reference count changed
            // on a cell the producer's core had just written (its handle), several per item.
            lockStateForApplying(thread: thread)
            for index in drainBuffer.indices {
                if drainBuffer[index].cell?.claimForLane() == false {
                    let cell = drainBuffer[index].cell.take()!  // resolved as cancelled here
                    skipCancelled(drainBuffer[index], cell: cell, lane: lane)
                    continue
                }
                if let failure = applyTracedLocked(drainBuffer[index], lane: lane, recordChanges: record),
                   let cell = drainBuffer[index].cell.take() {
                    finished.append(FinishedUpdater(cell: cell, error: failure))
                }
            }
            unlockStateAfterApplying()
            deliverChanges(to: listeners)
            resolveDrained()
            return count
        }
        for item in drainBuffer {
            finish(item, process(item, lane: lane, recordChanges: record))
        }
        drainBuffer.removeAll(keepingCapacity: true)
        deliverChanges(to: listeners)
        resolveFinished()
        return count
    }

    /// Resolves a batch applied without interceptors (after its changes were delivered): the updaters that threw
    /// (in `finished`), and the cells still in `drainBuffer`, which are then kept to be reused (`recycleCells`).
    @inlinable
    final func resolveDrained() {
        completionLock.lock()
        recycleCells()
        for item in finished {
            let failure = KatanaError.surfaced(item.error!)
            if let wakeup = item.cell.resolveLocked(.failure(failure)) { wakeups.append((wakeup, failure)) }
        }
        for index in drainBuffer.indices {
            guard let cell = drainBuffer[index].cell.take() else { continue }
            resolveAppliedLocked(cell)
        }
        completionLock.unlock()
        wakeWaiters()
        if !finished.isEmpty { finished.removeAll(keepingCapacity: true) }
        drainBuffer.removeAll(keepingCapacity: true)
    }

    @inlinable
    final func finish(_ item: LaneItem, _ result: LaneResult) {
        guard let cell = item.cell else { return }
        switch result {
        case .skipped: break
        case let .done(error): finished.append(FinishedUpdater(cell: cell, error: error))
        case let .replacedBySideEffect(sideEffect): launchSideEffect(sideEffect, cell: cell, parentID: item.parentID)
        }
    }

    @inlinable
    final func resolveFinished() {
        guard !finished.isEmpty || !recyclable.isEmpty else { return }
        completionLock.lock()
        recycleCells()
        for item in finished {
            if let error = item.error {
                let failure = KatanaError.surfaced(error)
                if let wakeup = item.cell.resolveLocked(.failure(failure)) { wakeups.append((wakeup, failure)) }
            } else {
                resolveAppliedLocked(item.cell)
            }
        }
        completionLock.unlock()
        wakeWaiters()
        finished.removeAll(keepingCapacity: true)
    }

    /// Resolves an applied updater's cell with `()`, and offers it for reuse when it accepts `()` (``recycleCells``
    /// checks it one batch later). `completionLock` held; called by the lane holder.
    @inlinable @inline(__always)
    final func resolveAppliedLocked(_ cell: HandleCell) {
        if let wakeup = cell.resolveAppliedLocked() { wakeups.append((wakeup, nil)) }
        if cell.acceptsVoid { recyclable.append(cell) }
    }

    /// Resumes the waiters of the cells just resolved, now that `completionLock` is released (see
    /// `HandleCell.Wakeup`: never under it). Called by the lane holder.
    @inlinable @inline(__always)
    final func wakeWaiters() {
        guard !wakeups.isEmpty else { return }
        completionLock.assertNotHeldByThisThread("a handle's waiters are resumed under the completion lock")
        for (wakeup, failure) in wakeups { wakeup.resume(with: failure.map { .failure($0) } ?? .success(())) }
        wakeups.removeAll(keepingCapacity: true)
    }

    /// Cells of updaters resolved in the holder's previous batch whose handles are gone (the lane's reference is the
    /// only one left: a fire-and-forget dispatch) are reset and kept for new queued updaters, in `spareCells`: a
    /// queued updater then costs no allocation, and under contention the cell's memory is not freed on one core and
    /// allocated on the other. Checked one batch late and with `completionLock` held, so every read a handle made of
    /// its cell (under that lock) is ordered before the reset. Called by the lane holder.
    @inlinable
    final func recycleCells() {
        while var cell = recyclable.popLast() {
            guard spareCells.count < Self.spareCellLimit, isKnownUniquelyReferenced(&cell) else { continue }
            cell.resetLocked()
            spareCells.append(cell)
        }
    }

    /// Most cells a store keeps for reuse (each ~200 bytes).
    @usableFromInline static var spareCellLimit: Int { 512 }

    /// A cell for a queued updater: a spare one if the lane has any, else a new one. Caller holds `laneLock`.
    @inlinable
    final func queuedUpdaterCell<V: Sendable>(for: V.Type) -> HandleCell {
        // Spare cells accept `()`: only a handle that takes `()` gets one (every updater's handle today; the check
        // folds away in specialised code).
        if V.self == Void.self || V.self == (any Sendable).self, let cell = lane.spareCells.popLast() { return cell }
        return makeCell(for: V.self)
    }

    /// Hands the holder's spare cells to the lane, where producers take them (the two sets are swapped when the
    /// holder has more: the fewer come back to it to fill). Caller holds `laneLock` and the lane.
    @inlinable
    final func offerSpareCells() {
        if spareCells.count > lane.spareCells.count { swap(&spareCells, &lane.spareCells) }
    }

    @usableFromInline
    enum LaneResult {
        case skipped
        case done((any Error)?)
        case replacedBySideEffect(any AnySideEffect)
    }

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

    /// An inline run through the leading typed interceptors: what their `next` and `forward` need, in one place on the
    /// caller's stack, so each is a closure over a pointer to it. (The chain's end reads the listeners itself, under
    /// the state lock, when it applies the updater.)
    @usableFromInline
    struct TypedRun {
        /// Unretained: the caller holds the store (a strong copy of it is a side-table retain: the store has weak
        /// references).
        @usableFromInline let store: Unmanaged<PartialStore<S>>
        /// The link whose interceptor is running: set before each call and restored after it (the calls nest).
        @usableFromInline var current: Unmanaged<TypedLink>
        @usableFromInline var end = LinkEnd()
        @usableFromInline let thread: UInt

        @inlinable
        init(store: PartialStore<S>, first: Unmanaged<TypedLink>, thread: UInt) {
            self.store = Unmanaged.passUnretained(store)
            self.current = first
            self.thread = thread
        }
    }

    /// An updater's inline run through the closure chain, on the caller's stack: what the chain's last `next` needs
    /// (reached through ``ClosureChainEnd``, so the closure made once in `becomeReady` applies it specialised).
    @usableFromInline
    struct ClosureRun {
        /// Unretained: the caller holds the store.
        @usableFromInline let store: Unmanaged<PartialStore<S>>
        @usableFromInline var end = LinkEnd()
        @usableFromInline let thread: UInt

        @inlinable
        init(store: Unmanaged<PartialStore<S>>, thread: UInt) {
            self.store = store
            self.thread = thread
        }
    }

    /// Runs the protocol-form interceptors on a state updater, the leading typed ones in their typed form: while each
    /// passes the updater on with `next`, it stays of its type `U` and the chain's end applies it specialised; from
    /// the first erased interceptor on, or what an interceptor forwards instead, the rest of the chain runs erased.
    /// One `next` and one `forward` serve every link (each a closure over `run`); each link is called through its
    /// class method (``TypedLinkOf``), and the list is followed without reference counting.
    @inlinable
    static func runTypedLinks<U: AnyStateUpdater>(
        _ updater: U, _ run: UnsafeMutablePointer<TypedRun>
    ) throws {
        func forward(_ item: any Dispatchable) throws {
            let index = run.pointee.current._withUnsafeGuaranteedRef { $0.index }
            try run.pointee.store._withUnsafeGuaranteedRef {
                try $0.runLinks(item, from: index + 1) { try erasedEnd($0, run) }
            }
        }
        func next(_ passed: U) throws {
            let link = run.pointee.current
            let (following, index, isLast) = link._withUnsafeGuaranteedRef { ($0.next, $0.index, $0.isLast) }
            guard let following else {
                if isLast { return try typedEnd(passed, run) }
                return try run.pointee.store._withUnsafeGuaranteedRef {
                    try $0.runLinks(passed, from: index + 1) { try erasedEnd($0, run) }
                }
            }
            run.pointee.current = following
            defer { run.pointee.current = link }
            try following._withUnsafeGuaranteedRef { try $0.intercept(passed, next: next, forward: forward) }
        }
        try run.pointee.current._withUnsafeGuaranteedRef {
            try $0.intercept(updater, next: next, forward: forward)
        }
    }

    /// The end for the updater passed on in its own type: applied specialised (inlined into `next`).
    @inlinable @inline(__always)
    static func typedEnd<U: AnyStateUpdater>(
        _ updater: U, _ run: UnsafeMutablePointer<TypedRun>
    ) throws {
        try run.pointee.store._withUnsafeGuaranteedRef {
            try $0.typedLinkEnd(updater, &run.pointee.end, run.pointee.thread)
        }
    }

    /// The end for an item passed on erased, or forwarded instead (rare: kept out of `next`).
    @inlinable @inline(never)
    static func erasedEnd(
        _ item: any Dispatchable, _ run: UnsafeMutablePointer<TypedRun>
    ) throws {
        try run.pointee.store._withUnsafeGuaranteedRef {
            try $0.linkEnd(item, &run.pointee.end, run.pointee.thread)
        }
    }

    /// Runs the protocol-form interceptors from `index` on; the last one's `next` calls `end`.
    @inlinable
    final func runLinks(_ item: any Dispatchable, from index: Int, end: (any Dispatchable) throws -> Void) throws {
        guard index < links.count else { return try end(item) }
        try links[index]._withUnsafeGuaranteedRef { link in
            try link.interceptor.intercept(item) { forwarded in try runLinks(forwarded, from: index + 1, end: end) }
        }
    }

    @inlinable
    final func runUpdaterChain(_ updater: any AnyStateUpdater, recordChanges: Bool) -> (LaneResult, DispatchOutcome) {
        guard let chain else { return runUpdaterLinks(updater, recordChanges: recordChanges) }
        // Closures: their end (`interceptedNext`) finds this interception in thread-local storage.
        var frame = InterceptionFrame(store: ObjectIdentifier(self), kind: .stateUpdater, recordChanges: recordChanges,
                                      applyUpdater: { store, updater, record throws(KatanaError) in
                                          try unsafeDowncast(store, to: PartialStore<S>.self).apply(updater, recordChanges: record)
                                      })
        let links = !self.links.isEmpty
        let thrown: (any Error)? = InterceptionFrames.with(&frame) {
            do {
                if links { try runLinks(updater, from: 0) { try chain($0) } } else { try chain(updater) }
                return nil
            } catch {
                return error
            }
        }
        return chainResult(updater, thrown: thrown, nextCalled: frame.nextCalled, applied: frame.applied,
                           replacement: frame.replacement)
    }

    /// `runUpdaterChain` with protocol-form interceptors only: the chain's end is a closure on this stack.
    @inlinable
    final func runUpdaterLinks(_ updater: any AnyStateUpdater, recordChanges: Bool) -> (LaneResult, DispatchOutcome) {
        var thrown: (any Error)?
        var nextCalled = false, applied = false
        var replacement: (any Dispatchable)?
        do {
            try runLinks(updater, from: 0) { item in
                guard !nextCalled else {
                    _ = anyDispatch(item, parentID: 0, bypassInterceptors: true)
                    return
                }
                nextCalled = true
                if let updater = item._katanaStateUpdater, item._katanaSideEffect == nil {
                    do { try apply(updater, recordChanges: recordChanges) } catch { throw KatanaError.surfaced(error) }
                    applied = true
                } else {
                    replacement = item
                }
            }
        } catch {
            thrown = error
        }
        return chainResult(updater, thrown: thrown, nextCalled: nextCalled, applied: applied, replacement: replacement)
    }

    /// What an updater's pass through the interceptors comes to, and its outcome for the trace.
    @inlinable
    final func chainResult(
        _ updater: any AnyStateUpdater, thrown: (any Error)?, nextCalled: Bool, applied: Bool, replacement: (any Dispatchable)?
    ) -> (LaneResult, DispatchOutcome) {
        if let thrown {
            if applied {
                let failure = InterceptorFailure(error: thrown, item: "\(type(of: updater))")
                return (.done(KatanaError.appliedButInterceptorThrew(failure)), .appliedWithError)
            }
            return (.done(thrown), nextCalled ? .error : .blocked)
        }
        guard nextCalled else { return (.done(nil), .blocked) }
        guard let replacement else { return (.done(nil), .ok) }
        if let sideEffect = replacement._katanaSideEffect, replacement._katanaStateUpdater == nil {
            return (.replacedBySideEffect(sideEffect), .ok)
        }
        return (.done(KatanaError.notDispatchable("\(type(of: replacement))")), .error)
    }

    /// The end of the interceptor chain.
    @usableFromInline
    final func interceptedNext(_ item: any Dispatchable) throws {
        if let frame = InterceptionFrames.current(for: ObjectIdentifier(self)), !frame.pointee.nextCalled {
            frame.pointee.nextCalled = true
            if frame.pointee.kind == .stateUpdater, let updater = item._katanaStateUpdater, item._katanaSideEffect == nil {
                do {
                    if let applyUpdater = frame.pointee.applyUpdater {
                        try applyUpdater(self, updater, frame.pointee.recordChanges)
                    } else {
                        try apply(updater, recordChanges: frame.pointee.recordChanges)
                    }
                } catch { throw KatanaError.surfaced(error) }
                frame.pointee.applied = true
            } else {
                frame.pointee.replacement = item
            }
            return
        }
        // A second call, or one made after the handler returned: dispatch anew, past the interceptors.
        _ = anyDispatch(item, parentID: 0, bypassInterceptors: true)
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

    @inlinable
    final func traceEnqueue(_ item: LaneItem, lane: DispatchLane, depth: Int) {
        tracer.dispatchEnqueue(DispatchEnqueueEvent(
            id: item.id, parentID: item.parentID, kind: .stateUpdater, name: item.name!, lane: lane,
            queueDepth: UInt32(clamping: depth)))
    }

    // MARK: Side effects

    @inlinable
    final func enqueueSideEffect<V: Sendable>(
        _ sideEffect: any AnySideEffect, type: Any.Type, parentID: UInt64, as: V.Type, bypassInterceptors: Bool
    ) -> DispatchHandle<V> {
        let cell = makeCell(for: V.self)
        let (id, name) = traceIdentity(of: type)
        let item = SideEffectItem(sideEffect: sideEffect, cell: cell, id: id, parentID: parentID, name: name,
                                  bypass: bypassInterceptors, discardsValue: V.self == Void.self)
        if id == 0, readyForSideEffects.load(ordering: .acquiring) {
            start(item)
            return DispatchHandle(cell)
        }
        laneLock.lock()
        if lane.isHeld {
            if id != 0 { traceEnqueue(item, lane: .held, depth: lane.held?.count ?? 0) }
            lane.hold(.sideEffect(item))
            laneLock.unlock()
            return DispatchHandle(cell)
        }
        if id != 0 { traceEnqueue(item, lane: .sideEffectPool, depth: lane.pending.count) }
        laneLock.unlock()
        start(item)
        return DispatchHandle(cell)
    }

    @inlinable
    final func traceEnqueue(_ item: SideEffectItem, lane: DispatchLane, depth: Int) {
        tracer.dispatchEnqueue(DispatchEnqueueEvent(
            id: item.id, parentID: item.parentID, kind: .sideEffect, name: item.name!, lane: lane,
            queueDepth: UInt32(clamping: depth)))
    }

    /// Starts a side effect that an interceptor put in place of a state updater.
    @inlinable
    final func launchSideEffect(_ sideEffect: any AnySideEffect, cell: HandleCell, parentID: UInt64) {
        let (id, name) = traceIdentity(of: type(of: sideEffect))
        let item = SideEffectItem(sideEffect: sideEffect, cell: cell, id: id, parentID: parentID, name: name, bypass: true)
        if id != 0 { traceEnqueue(item, lane: .sideEffectPool, depth: 0) }
        start(item)
    }

    /// Runs the interceptors for a side effect, on its task, before its body. Only for a side effect that has
    /// interceptors to run: one without (none configured, or it bypasses them) gets its context from the registry in
    /// `SideEffectRunner.prepare`, without reaching the store.
    @usableFromInline
    final func intercept(_ item: SideEffectItem) -> SideEffectStep {
        assert(intercepting && !item.bypass, "prepare runs a side effect without interceptors itself")
        let context = makeContext(scope: item.cell)
        var thrown: (any Error)?
        var nextCalled = false
        var replacement: (any Dispatchable)?
        if let chain {
            var frame = InterceptionFrame(store: ObjectIdentifier(self), kind: .sideEffect, recordChanges: false)
            thrown = InterceptionFrames.with(&frame) {
                do {
                    try runLinks(item.sideEffect, from: 0) { try chain($0) }
                    return nil
                } catch {
                    return error
                }
            }
            (nextCalled, replacement) = (frame.nextCalled, frame.replacement)
        } else {
            do {
                try runLinks(item.sideEffect, from: 0) { forwarded in
                    guard !nextCalled else {
                        _ = anyDispatch(forwarded, parentID: 0, bypassInterceptors: true)
                        return
                    }
                    nextCalled = true
                    replacement = forwarded
                }
            } catch {
                thrown = error
            }
        }
        if let thrown { return .done(.blocked, .failure(thrown)) }
        guard nextCalled, let toRun = replacement else {
            if item.cell.acceptsVoid { return .done(.blocked, .success(())) }
            return .done(.blocked, .failure(KatanaError.returningSideEffectNotExecuted("\(type(of: item.sideEffect))")))
        }
        if let sideEffect = toRun._katanaSideEffect, toRun._katanaStateUpdater == nil {
            return .body(sideEffect, context)
        }
        if let updater = toRun._katanaStateUpdater, toRun._katanaSideEffect == nil {
            // An interceptor forwarded a state updater instead: it goes down the lane, and this handle resolves
            // when it has been applied.
            let (id, name) = traceIdentity(of: type(of: updater))
            enqueueExisting(LaneItem(updater: updater, cell: item.cell, id: id, parentID: item.parentID, name: name, bypass: true),
                            ignoringHeld: true, alreadyTraced: false)
            return .done(.ok, nil)
        }
        return .done(.error, .failure(KatanaError.notDispatchable("\(type(of: toRun))")))
    }

    // MARK: Readiness

    /// Sets the initial state, initialises the interceptors (which may dispatch, e.g. `.onStart` items) and runs
    /// every held item in dispatch order. Items dispatched while this runs are held too, so order is kept.
    final func becomeReady(initialState: S, interceptors: [StoreInterceptor]) {
        stateLock.withLock { _state = initialState }
        intercepting = !configuration.interceptors.isEmpty || !interceptors.isEmpty
        sideEffects.intercepts = intercepting
        // One context for the interceptors of both forms.
        let context = intercepting ? makeContext(scope: nil) : nil
        if let context, !configuration.interceptors.isEmpty {
            let bound = configuration.interceptors.map { $0.bind(to: context) }
            let buffer = UnsafeMutableBufferPointer<Unmanaged<LinkBox>>.allocate(capacity: bound.count)
            _ = buffer.initialize(from: bound.map { Unmanaged.passRetained(LinkBox($0)) })
            links = buffer
            let typed = Array(bound.prefix { $0 is any TypedDispatchInterceptor })
            var list: TypedLink?
            for (index, link) in typed.enumerated().reversed() {
                let interceptor = link as! any TypedDispatchInterceptor
                list = makeTypedLink(interceptor, index: index, next: list, isLast: index == bound.count - 1)
            }
            firstTypedLink = list.map { Unmanaged.passRetained($0) }
        }
        if let context, !interceptors.isEmpty {
            // The chain's last `next`: an updater's inline run on this thread (no weak load, no thread-local lookup)
            // ends there; a side effect's or a queued item's interception (thread-local frame), or a deferred call,
            // goes through the store.
            let elsewhere: @Sendable (any Dispatchable) throws -> Void = { [weak self] item in
                guard let self else { throw KatanaError.storeReleased }
                try self.interceptedNext(item)
            }
            chain = Unmanaged.passRetained(composeChain(interceptors, context: context, end: closureEnd, done: (),
                                                        elsewhere: elsewhere))
        }
        if tracer.isEnabled { tracer.storeReady(storeID: storeID, stateType: TraceName.of(S.self)) }
        while true {
            laneLock.lock()
            let taken = lane.takeHeld()
            if taken == nil { readyForSideEffects.store(true, ordering: .releasing) }
            laneLock.unlock()
            guard let items = taken else { return }
            for item in items {
                switch item {
                case let .updater(updater): enqueueExisting(updater, ignoringHeld: true, alreadyTraced: true)
                case let .sideEffect(sideEffect): start(sideEffect)
                }
            }
        }
    }
}

/// Composes Katana's interceptors into one chain whose last `next` ends an inline run through `end`, or else calls
/// `elsewhere`. Generic over the chain's result on purpose: the interceptors arrive in an array, which holds function
/// values in their most general form (a result returned indirectly), and code that names their concrete type wraps
/// each one taken out of it (and each `next` passed into it) in a re-abstraction thunk — two more calls per link on
/// every dispatch. A function returning `R` has that form already: every link stays as the array holds it, and the
/// last `next`, made here, is made in that form too (made by the caller, it was wrapped once going in).
@usableFromInline
func composeChain<Context, R: Sendable>(
    _ interceptors: [@Sendable (Context) -> @Sendable (@escaping @Sendable (any Dispatchable) throws -> R)
                        -> @Sendable (any Dispatchable) throws -> R],
    context: Context, end: ClosureChainEnd, done: R,
    elsewhere: @escaping @Sendable (any Dispatchable) throws -> Void
) -> ClosureChain<@Sendable (any Dispatchable) throws -> R> {
    let last: @Sendable (any Dispatchable) throws -> R = { item in
        if try end.handle(item) { return done }
        try elsewhere(item)
        return done
    }
    let handlers = interceptors.map { $0(context) }
    var next = last
    for handler in handlers.reversed() { next = handler(next) }
    return ClosureChain(next)
}
