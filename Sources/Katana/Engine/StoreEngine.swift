import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

/// The engine behind a store: the updater lane, the state with the lock that guards it, listeners, readiness,
/// side-effect launch — its fields here, its work in the other files of `Engine/`, which extend it. A ``PartialStore``
/// (Katana's type-erased view of a `Store<S, D>`) holds it and forwards its API to it. Nothing holds the engine weakly:
/// what must not keep a store alive — a side effect's task, a listener's unsubscribe, the interceptors' deferred
/// `next` — holds the store weakly and reaches the engine through it. (A weak reference gives its object a side
/// table, and every retain of the object then takes the runtime's slow path: the engine, reached on every dispatch,
/// stays without one — the callgrind gate's `side_effect_round_trip`.)
@usableFromInline
final class StoreEngine<S: State>: @unchecked Sendable {
    // Why @unchecked Sendable is sound: every mutable stored property below is either guarded by the lock named
    // beside it, or owned by the lane holder — the one thread that took the lane (`lane.busy`), under `laneLock` or
    // lock-free (`enqueueUpdater`, `LaneWord.tryTake`: an acquiring compare-and-swap); ownership passes between
    // threads through `laneLock`, or through `laneWord` when a holder gives an idle lane back without the lock (a
    // releasing compare-and-swap, seen by the next taker's acquiring one): either orders the accesses. `chain`,
    // `steps`, `typedInterceptors`, `runsTyped`, `intercepting`, `inlinePlan` and `holderPlan` are written once, in
    // `becomeReady`, before the store is marked ready (the word's `notReady` bit cleared with a releasing store, under
    // `laneLock`), and only read after that.

    /// The identity the store reports in traces (`store_ready`, `listeners_notified`).
    @usableFromInline let storeID: UInt64
    /// The executors the store runs its own work on.
    @usableFromInline let configuration: StoreConfiguration

    @usableFromInline final let tracer: any TraceBackend
    /// Per-type latency budgets (flight recorder); checked only for traced dispatches.
    @usableFromInline final let budgets: LatencyBudgets
    @usableFromInline final let laneLock = Lock(adaptive: true)
    /// The state and the lock that guards it.
    @usableFromInline final let lockedState = LockedState<S>()
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
    /// The ends of the composed chain's runs (`steps`, then `chain`) that the lane's holder makes (read and changed by
    /// that thread only), and of a side effect's, made by the first one through the chain (see ``ChainEndBox``).
    @usableFromInline @exclusivity(unchecked) final var laneChainEnds = LaneChainEnds()
    @usableFromInline final let sideEffectChainEnd = AtomicLazyReference<ChainEndBox>()
    /// The configuration's protocol-form interceptors, bound to this store and composed (``InterceptorStep``): the
    /// chain from the first, from the second, …; the last one's `next` is `chain`, or else the end of the run in
    /// progress. (Referenced unretained from the store's own buffer: written once before ready; retained by hand and
    /// released in deinit.)
    @usableFromInline @exclusivity(unchecked) final var steps = UnsafeMutableBufferPointer<Unmanaged<InterceptorStep>>(start: nil, count: 0)
    /// The leading ones of the configuration's interceptors that are ``TypedDispatchInterceptor``s, bound to this store:
    /// a state updater dispatched with its type goes through these typed (``TypedChain``, composed per updater type),
    /// then through the rest erased. Written once before ready.
    @usableFromInline @exclusivity(unchecked) final var typedInterceptors: [any TypedDispatchInterceptor] = []
    /// Whether a typed dispatch goes through `typedInterceptors` typed: there are some, and no closures (with closures,
    /// every item goes through the whole chain erased). Written once before ready.
    @usableFromInline @exclusivity(unchecked) final var runsTyped = false
    /// Whether there are interceptors of either form.
    @usableFromInline @exclusivity(unchecked) final var intercepting = false  // written once before ready
    /// How an updater is applied when its dispatching thread finds the lane idle (``InlinePlan``).
    @usableFromInline @exclusivity(unchecked) final var inlinePlan = InlinePlan.general  // written once before ready
    /// How `applyOrQueue` applies an updater once its thread holds the lane (``HolderPlan``).
    @usableFromInline @exclusivity(unchecked) final var holderPlan = HolderPlan.batch  // written once before ready

    @usableFromInline final let sideEffects: SideEffectRegistry
    @usableFromInline final let updaterQueue: DispatchQueue
    @usableFromInline final let listenersAreInline: Bool
    /// How an updater its dispatching thread applies is traced (``TracePlan``).
    @usableFromInline final let tracePlan: TracePlan
    /// `tracer.isEnabled` as a plain C function when the backend is a native provider: asked on every dispatch,
    /// without the existential's copy, projection and witness call. Nil when the answer never changes
    /// (`tracesNothing`, `tracesEverything`) or only the backend itself can give it.
    @usableFromInline final let enabledCheck: (@convention(c) () -> Int32)?
    /// The backend is the no-op one and there is no dispatch recorder: nothing is ever traced, and the untraced
    /// dispatch asks nothing (callgrind's `fire_and_forget`).
    @usableFromInline final let tracesNothing: Bool
    /// Every dispatch is traced, whatever any session does: a dispatch recorder gives each an id, and a backend that
    /// records in this process (the flight recorder, the metrics) records each. Nothing is asked per dispatch: a call
    /// to a check that always said yes was two indirect calls per recorded dispatch (the callgrind gate's
    /// `fire_and_forget_flight_recorder`, `_metrics`).
    @usableFromInline final let tracesEverything: Bool
    /// A native provider's `updater_inline`, called directly with the name's bytes (no event value, no retains).
    @usableFromInline final let nativeUpdaterInline:
        (@convention(c) (UInt64, UInt64, UnsafePointer<CChar>, UInt32, UInt32, UInt64, UInt8) -> Void)?
    /// ``StoreConfiguration/dispatchRecorder``: told of every updater applied and side effect started.
    @usableFromInline final let dispatchRecorder: (any DispatchRecorder)?
    /// `dispatchRecorder != nil`, as one byte the dispatch paths test (rather than the optional existential's box).
    @usableFromInline final let recordsDispatches: Bool
    /// The ids of the updater whose interceptor chain the lane's holder is running, for the dispatch recorder told at
    /// the chain's end (`recordAtChainEnd`). Set and read by the lane's holder only; used only with a dispatch recorder.
    @usableFromInline final var chainRecord: (id: UInt64, parentID: UInt64) = (0, 0)
    /// An in-process backend's `updater_inline` (the flight recorder's, the metrics'), given the start token (its end is its one clock read).
    @usableFromInline final let directUpdaterInline:
        (@convention(c) (UInt64, UInt64, UnsafePointer<CChar>, UInt32, UInt64, UInt8, UInt32) -> Void)?

    // The lane's limits. Stored rather than computed: a debug build calls a computed constant's accessor on every
    // read, and these are read on every queued dispatch (the Architecture article's walks, `make walk`).
    /// How much of other producers' work a dispatching thread that holds the lane may apply before it hands the
    /// rest to the store's queue (`helpDrain`): enough to avoid a thread hop per item under contention, small enough
    /// that `dispatch` stays short.
    @usableFromInline final let helpingItemLimit = 256
    @usableFromInline final let helpingTimeLimitNanoseconds: UInt64 = 20_000
    /// How long a dispatch that finds the lane held by another thread waits for it before queueing its updater
    /// (`LaneWord.spinTake`). Queueing at once fed itself under contention: while one producer held the lane and
    /// combined, the others queued behind it — an item, a handle cell and a lock pair each, the cells crossing
    /// cores — so every dispatch became a queued one. Waiting a few microseconds instead lets the holder run its
    /// own dispatches inline meanwhile, as an unfair lock lets its holder run on.
    @usableFromInline final let laneWaitNanoseconds: UInt64 = 2_000
    /// Most handle cells the lane's holder keeps for reuse (each ~200 bytes: `resolveBatch`).
    @usableFromInline final let spareCellLimit = 512

    /// Set (under `laneLock`) once nothing is held any more: from then on the lane never holds again, so an untraced
    /// side effect starts without taking `laneLock` — which every updater's dispatch takes too, and which side
    /// effects dispatched from one thread while others apply updaters otherwise contend for.
    @usableFromInline final let readyForSideEffects = Atomic<Bool>(false)
    /// Set once the initial state is in and the interceptors are set up, before the items kept until then run (they
    /// see the store ready, as the public `isReady` promises): `ReadinessTests.itemsKeptUntilReadySeeTheStoreReady`.
    @usableFromInline final let initialized = Atomic<Bool>(false)

    // The fields above are read on every dispatch and written only before the store is shared (or once before it is
    // ready). The two groups below are written on every dispatch — the lane's by every producer, the holder's by the
    // thread applying — so each sits on cache lines of its own: with them interleaved, a producer reading `laneLock`
    // or `intercepting` missed its cache on every dispatch because the holder had just written the state or `lane`
    // next to it (the pads are never read; the state has an object of its own, `lockedState`).
    @usableFromInline final let padBeforeLane = CacheLinePad()

    /// The lane's rules and state (see `LaneState`): taken, queued and released under `laneLock`, except that an idle
    /// lane with nothing queued is taken through `laneWord` alone (`LaneWord.tryTake`), and a holder with nothing
    /// queued since it took the lane gives it back the same way.
    @usableFromInline @exclusivity(unchecked) final var lane: LaneState  // laneLock
    /// Replaced with both the state lock and `laneLock` held (``changeListeners(_:)``), read with either.
    @usableFromInline @exclusivity(unchecked) final var listeners = ListenerList<S>([])
    /// Lists replaced while a thread held the lane, kept until it gives the lane up (``keepWhileLaneHeld(_:)``).
    @usableFromInline @exclusivity(unchecked) final var replacedListeners: [ListenerList<S>] = []  // laneLock

    @usableFromInline final let padBeforeHolder = CacheLinePad()

    @usableFromInline @exclusivity(unchecked) final var drainBuffer: [LaneItem] = []  // lane holder
    @usableFromInline @exclusivity(unchecked) final var changes: [(S, S)] = []  // lane holder
    /// The lane holder's snapshot of `listeners.needsOldState` for the items it applies now, taken under `laneLock`
    /// with the list it then tells of them (`drainBatch`, and the batch paths of one item): whether each change keeps
    /// the state before it (`applyLocked`).
    @usableFromInline @exclusivity(unchecked) final var keepOldStates = false  // lane holder
    /// How many listeners the lane holder's last inline change was handed to (`applyAndNotify`), for that updater's
    /// trace event: read before the lane is given back, so no other change comes between.
    @usableFromInline @exclusivity(unchecked) final var listenersTold: UInt32 = 0  // lane holder
    /// New-state listeners only: a change was applied in this batch and not yet delivered.
    @usableFromInline @exclusivity(unchecked) final var newStatePending = false  // lane holder
    @usableFromInline @exclusivity(unchecked) final var finished: [FinishedUpdater] = []  // lane holder
    /// Cells resolved in the holder's last batch, to reuse once their handles are gone (`resolveBatch`).
    @usableFromInline @exclusivity(unchecked) final var recyclable: [HandleCell] = []  // lane holder
    /// Reset cells waiting to be handed to the lane (`drainBatch`).
    @usableFromInline @exclusivity(unchecked) final var spareCells: [HandleCell] = []  // lane holder
    @usableFromInline final let padAfterHolder = CacheLinePad()

    /// What the listener notifier (`tell`) is handed as the state before a change when no listener needs it (every
    /// one takes the new state only, and its box ignores `old`): a state of its own, so the state after the change
    /// can be lent in place without being passed twice. Made once, as the state's initial value is (`S()`).
    /// The last stored property: its size is `S`'s, so every field after it would have an offset the engine's
    /// unspecialised methods read from the class's metadata (`traceInlineStart` and `traceInlineEnd` did: the
    /// callgrind gate's `fire_and_forget_flight_recorder`).
    @usableFromInline final let oldStateStandIn = S()

    init(configuration: StoreConfiguration, tracer: any TraceBackend, contextPrototype: any ScopedSideEffectContext) {
        self.configuration = configuration
        self.tracer = tracer
        self.tracePlan = if !tracer.combinesInlineUpdaters { .threeEvents }
                         else if configuration.latencyBudgets.isEmpty { .combined } else { .combinedUnlessBudgeted }
        let native = tracer as? NativeTraceBackend
        let direct = tracer as? any DirectRecordingBackend
        self.tracesEverything = configuration.dispatchRecorder != nil || direct != nil
        self.enabledCheck = tracesEverything ? nil : native?.enabledCheck
        self.tracesNothing = configuration.dispatchRecorder == nil && tracer is NoOpTraceBackend
        self.nativeUpdaterInline = native?.updaterInlineFunction
        self.directUpdaterInline = direct?.updaterInlineSinceFunction
        self.dispatchRecorder = configuration.dispatchRecorder
        self.recordsDispatches = configuration.dispatchRecorder != nil
        self.budgets = configuration.latencyBudgets
        self.storeID = KatanaTracing.nextID()
        self.updaterQueue = DispatchQueue(label: "katana.store.updaters")
        self.listenersAreInline = configuration.listenerExecutor.isInline
        self.sideEffects = SideEffectRegistry(lock: completionLock, tracer: tracer, dispatchRecorder: configuration.dispatchRecorder,
                                              budgets: configuration.latencyBudgets,
                                              contextPrototype: contextPrototype)
        self.room = Lock.Condition(laneLock)
        self.lane = LaneState(backlogLimit: configuration.backlogLimit, word: laneWord)
    }

    deinit {
        // Side effects still running are cancelled; items kept until readiness are rejected (nothing else can be
        // pending: whoever holds the lane, or the updater queue's kick, holds the engine).
        sideEffects.close()
        for step in steps { step.release() }
        steps.deallocate()
        chain?.release()
        laneChainEnds.deallocate()
        rejectEarlyItems()
    }

    // MARK: Reading

    /// The current state: reflects every updater whose handle has resolved. `S()` until the store is ready.
    ///
    /// Read from inside a state updater or reducer that this store is applying on the same thread (a misuse:
    /// updaters get the state as their argument), it returns the state as it is at that moment — the state the
    /// updater started from, plus whatever a `StateUpdater` already changed in place before the read — instead of
    /// deadlocking on the state lock.
    @inlinable
    var state: S {
        if lockedState.tryLock() {
            defer { lockedState.unlock() }
            return lockedState.value
        }
        if lockedState.isHeldByThisThread {
            // This thread is inside an updater of this store, holding the state lock.
            return lockedState.value
        }
        lockedState.lock()
        defer { lockedState.unlock() }
        return lockedState.value
    }

    @usableFromInline var isReady: Bool { initialized.load(ordering: .acquiring) }

    @usableFromInline var listenerCount: Int { laneLock.withLock { listeners.boxes.count } }

    // MARK: Dispatching

    @usableFromInline
    final func anyDispatch(_ item: any Dispatchable, parentID: UInt64) -> DispatchHandle<any Sendable> {
        anyDispatch(item, parentID: parentID, bypassInterceptors: false)
    }

    @usableFromInline
    final func anyDispatch(_ item: any Dispatchable, parentID: UInt64, bypassInterceptors: Bool) -> DispatchHandle<any Sendable> {
        switch ItemKind(of: item) {
        case let .stateUpdater(updater):
            return enqueueUpdater(updater, type: type(of: item), parentID: parentID, success: () as any Sendable,
                                  bypassInterceptors: bypassInterceptors)
        case let .sideEffect(sideEffect):
            return enqueueSideEffect(sideEffect, type: type(of: item), parentID: parentID, as: (any Sendable).self,
                                     bypassInterceptors: bypassInterceptors)
        case .ambiguous:
            return .rejected(KatanaError.ambiguousDispatchable("\(type(of: item))"))
        case .neither:
            return .rejected(KatanaError.notDispatchable("\(type(of: item))"))
        }
    }
}
