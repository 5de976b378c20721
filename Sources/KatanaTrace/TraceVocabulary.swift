/// What kind of work a dispatch is. Raw values are the `kind` enum of the `katana` LTTng provider.
public enum DispatchKind: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// A state updater (or a throwing one).
    case stateUpdater = 0
    /// A side effect, returning or not.
    case sideEffect = 1

    public var description: String { self == .stateUpdater ? "state_updater" : "side_effect" }
}

/// The route a dispatch took through its store: applied inline, queued in the updater lane, run in the side-effect
/// pool, or kept until the store was ready. Raw values and ``description``s are the `queue` enum of the `katana` LTTng
/// provider (the events' `queue` field).
public enum DispatchRoute: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// Applied by the thread that called `dispatch`, which found the updater lane idle.
    case updaterInline = 0
    /// Queued in the updater lane (it was busy when the item arrived) and applied by whichever thread drained it.
    case updaterQueue = 1
    /// The concurrent side-effect pool (Swift's global concurrent executor).
    case sideEffectPool = 2
    /// Kept because the store was not ready yet, and dispatched again once it was (`held` in traces).
    case keptUntilReady = 3

    public var description: String {
        switch self {
        case .updaterInline: "updater_inline"
        case .updaterQueue: "updater_queue"
        case .sideEffectPool: "side_effect_pool"
        case .keptUntilReady: "held"
        }
    }
}

/// How a dispatch ended. Raw values are the `outcome` enum of the `katana` LTTng provider.
public enum DispatchOutcome: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    /// The updater was applied / the side effect returned.
    case ok = 0
    /// The item ran and threw (or could not run: wrong state or context type).
    case error = 1
    /// An interceptor threw or swallowed the item, so it never ran.
    case blocked = 2
    /// The updater was applied, but an interceptor threw after its `next` returned: the state did change.
    case appliedWithError = 3
    /// The item was cancelled: an updater before it was applied, or a side effect (its body saw the cancellation).
    case cancelled = 4

    public var description: String {
        switch self {
        case .ok: "ok"
        case .error: "error"
        case .blocked: "blocked"
        case .appliedWithError: "applied_with_error"
        case .cancelled: "cancelled"
        }
    }
}

/// `dispatch` was called. `queueDepth` is how many updaters were waiting in the lane at that moment.
public struct DispatchEnqueueEvent: Sendable, Equatable {
    /// The dispatch's id, shared by its enqueue, begin and end (never 0).
    public var id: UInt64
    /// The id of the side effect that dispatched it through its context; 0 for a top-level dispatch.
    public var parentID: UInt64
    /// State updater or side effect.
    public var kind: DispatchKind
    /// The dispatched type's name.
    public var name: TraceName
    /// Where the item went or ran: inline, the updater queue, held before readiness, the side-effect pool.
    public var route: DispatchRoute
    /// Updaters waiting in the lane at that moment.
    public var queueDepth: UInt32

    /// An enqueue event with every field.
    public init(id: UInt64, parentID: UInt64, kind: DispatchKind, name: TraceName, route: DispatchRoute, queueDepth: UInt32) {
        self.id = id
        self.parentID = parentID
        self.kind = kind
        self.name = name
        self.route = route
        self.queueDepth = queueDepth
    }
}

/// The updater is about to be applied / the side effect's body is about to start.
/// `parallelism` is the number of side effects of this store in flight at that moment (this one included).
public struct DispatchBeginEvent: Sendable, Equatable {
    /// The dispatch's id, shared by its enqueue, begin and end (never 0).
    public var id: UInt64
    /// The id of the side effect that dispatched it through its context; 0 for a top-level dispatch.
    public var parentID: UInt64
    /// State updater or side effect.
    public var kind: DispatchKind
    /// The dispatched type's name.
    public var name: TraceName
    /// Where the item went or ran: inline, the updater queue, held before readiness, the side-effect pool.
    public var route: DispatchRoute
    /// Side effects of the store in flight at that moment, this one included.
    public var parallelism: UInt32

    /// A begin event with every field.
    public init(id: UInt64, parentID: UInt64, kind: DispatchKind, name: TraceName, route: DispatchRoute, parallelism: UInt32) {
        self.id = id
        self.parentID = parentID
        self.kind = kind
        self.name = name
        self.route = route
        self.parallelism = parallelism
    }
}

/// The updater was applied (or rejected) / the side effect's body returned or threw.
public struct DispatchEndEvent: Sendable, Equatable {
    /// The dispatch's id, shared by its enqueue, begin and end (never 0).
    public var id: UInt64
    /// State updater or side effect.
    public var kind: DispatchKind
    /// The dispatched type's name.
    public var name: TraceName
    /// Where the item went or ran: inline, the updater queue, held before readiness, the side-effect pool.
    public var route: DispatchRoute
    /// How it ended: ok, error, applied with error, blocked by an interceptor, or cancelled.
    public var outcome: DispatchOutcome

    /// An end event with every field.
    public init(id: UInt64, kind: DispatchKind, name: TraceName, route: DispatchRoute, outcome: DispatchOutcome) {
        self.id = id
        self.kind = kind
        self.name = name
        self.route = route
        self.outcome = outcome
    }
}

/// An updater applied inline — on the thread that dispatched it, which found the lane idle — reported once, at its
/// end, to a backend that `combinesInlineUpdaters`: it stands for an enqueue and a begin at (end − `durationNanoseconds`)
/// on `updaterInline` with queue depth 0, then an end with `outcome`. One event instead of three is what keeps a
/// recorded dispatch cheap: an LTTng event costs far more than the dispatch (the callgrind gate's
/// `fire_and_forget_lttng_recording` workload).
public struct UpdaterInlineEvent: Sendable, Equatable {
    /// The dispatch's id, shared by its enqueue, begin and end (never 0).
    public var id: UInt64
    /// The id of the side effect that dispatched it through its context; 0 for a top-level dispatch.
    public var parentID: UInt64
    /// The updater's type name.
    public var name: TraceName
    /// Side effects of the store in flight when the updater began.
    public var parallelism: UInt32
    /// From begin to end (monotonic clock).
    public var durationNanoseconds: UInt64
    /// How applying it ended.
    public var outcome: DispatchOutcome
    /// How many listeners its change was handed to (0 when it threw: no change): an inline updater tells them
    /// before its end, so its one event carries what a batch's `listeners_notified` says. Kept by the in-process
    /// backends (the flight recorder's window, which the live page reads); LTTng's `updater_inline` has no field
    /// for it.
    public var listeners: UInt32

    /// An inline updater's event with every field.
    public init(id: UInt64, parentID: UInt64, name: TraceName, parallelism: UInt32, durationNanoseconds: UInt64,
                outcome: DispatchOutcome, listeners: UInt32 = 0) {
        self.id = id
        self.parentID = parentID
        self.name = name
        self.parallelism = parallelism
        self.durationNanoseconds = durationNanoseconds
        self.outcome = outcome
        self.listeners = listeners
    }

    /// The three events it stands for, as a backend that records each would have seen them.
    public var expanded: (DispatchEnqueueEvent, DispatchBeginEvent, DispatchEndEvent) {
        (DispatchEnqueueEvent(id: id, parentID: parentID, kind: .stateUpdater, name: name, route: .updaterInline, queueDepth: 0),
         DispatchBeginEvent(id: id, parentID: parentID, kind: .stateUpdater, name: name, route: .updaterInline,
                            parallelism: parallelism),
         DispatchEndEvent(id: id, kind: .stateUpdater, name: name, route: .updaterInline, outcome: outcome))
    }
}

/// A dispatch took longer than the latency budget its type was given (`StoreConfiguration.latencyBudgets`): emitted
/// just before its `dispatch_end`, so a flight recorder can save what led up to it.
public struct BudgetExceededEvent: Sendable, Equatable {
    /// The dispatch's id, shared by its enqueue, begin and end (never 0).
    public var id: UInt64
    /// State updater or side effect.
    public var kind: DispatchKind
    /// The dispatched type's name.
    public var name: TraceName
    /// The type's budget.
    public var budgetNanoseconds: UInt64
    /// How long this dispatch took, begin to end.
    public var actualNanoseconds: UInt64

    /// A budget-exceeded event with every field.
    public init(id: UInt64, kind: DispatchKind, name: TraceName, budgetNanoseconds: UInt64, actualNanoseconds: UInt64) {
        self.id = id
        self.kind = kind
        self.name = name
        self.budgetNanoseconds = budgetNanoseconds
        self.actualNanoseconds = actualNanoseconds
    }
}
