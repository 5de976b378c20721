/// A destination for Katana's trace events, in the style of swift-log's `LogHandler`.
///
/// The Store asks `isEnabled` once per dispatch, before it computes a name or an id; when it answers `false`
/// nothing else is called for that dispatch. Every method may be called from any thread, concurrently.
/// Events of one dispatch share an `id` and are emitted in the order enqueue, begin, end; a dispatch that was
/// already under way when the backend became enabled is not traced (its id is 0 and it is skipped).
public protocol TraceBackend: Sendable {
    /// Whether anyone listens. Must be cheap: it is on every dispatch's path.
    var isEnabled: Bool { get }
    /// `dispatch` was called (``DispatchEnqueueEvent``).
    func dispatchEnqueue(_ event: DispatchEnqueueEvent)
    /// The item starts (``DispatchBeginEvent``).
    func dispatchBegin(_ event: DispatchBeginEvent)
    /// The item ended (``DispatchEndEvent``).
    func dispatchEnd(_ event: DispatchEndEvent)
    /// Whether this backend takes an updater applied inline as one `updaterInline` event at its end (timestamped
    /// there, carrying its duration) instead of enqueue, begin and end at the moments they happen. The store reads it
    /// once, when it is created. Default `false`: the three events, as before.
    var combinesInlineUpdaters: Bool { get }
    /// An updater applied inline, reported at its end (only to a backend that `combinesInlineUpdaters`).
    func updaterInline(_ event: UpdaterInlineEvent)
    /// A store finished initialising its state and interceptors.
    func storeReady(storeID: UInt64, stateType: TraceName)
    /// `listeners` listeners were handed `changes` (old, new) pairs in one batch — or an inline updater's change, right
    /// after its end event (an updater reported as one ``updaterInline(_:)`` event carries the count instead).
    func listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32)
    /// A user interval (`SideEffectContext.interval`, `traceInterval`) started. `parentID` is the side effect it
    /// runs in (0 outside one); `intervalID` pairs it with its end.
    func intervalBegin(intervalID: UInt64, parentID: UInt64, name: StaticString)
    /// The interval's body returned (`ok`), threw (`error`) or was cancelled (`cancelled`).
    func intervalEnd(intervalID: UInt64, name: StaticString, outcome: DispatchOutcome)
    /// A dispatch exceeded its type's latency budget (service time, begin to end).
    func budgetExceeded(_ event: BudgetExceededEvent)
    /// What a traced dispatch failed with, just before its `dispatchEnd` with outcome `error` (a refusing or
    /// mismatched updater, a throwing side effect). Default: ignored.
    func dispatchFailed(id: UInt64, error: any Error)
    /// Whether the store runs traced side effects through ``runSideEffectBody(id:_:)``. Read once, when the store is
    /// created. Default `false` (they run directly).
    var wrapsSideEffectBodies: Bool { get }
    /// Runs the traced side effect `id` on its task — its `dispatchBegin`, interceptors, body and `dispatchEnd` —
    /// inside `body`: a backend that propagates context (distributed tracing) makes the side effect's span current
    /// here, so what the side effect dispatches or calls becomes its child. Must call `body` once (a backend that
    /// does not gets the side effect run without it). Only called when ``wrapsSideEffectBodies``.
    func runSideEffectBody(id: UInt64, _ body: () async throws -> any Sendable) async throws -> any Sendable
}

/// A backend that also records navigation transitions (KatanaRouter): its own protocol, so the Store's backend
/// vocabulary is only the Store's. The router traces through the store's backend when it is one of these
/// (the in-memory, LTTng and multiplex backends are) and skips transitions otherwise.
public protocol TransitionTraceBackend: TraceBackend {
    /// A navigation transition, or one routable call inside it, started / finished. `transitionID` pairs the two.
    func transitionBegin(transitionID: UInt64, name: TraceName)
    /// The transition `transitionID` ended with `outcome`.
    func transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome)
}

extension TraceBackend {
    public var combinesInlineUpdaters: Bool { false }
    /// For a backend that does not combine, the three events it stands for (their times are all now).
    public func updaterInline(_ event: UpdaterInlineEvent) {
        let (enqueue, begin, end) = event.expanded
        dispatchEnqueue(enqueue)
        dispatchBegin(begin)
        dispatchEnd(end)
    }
    public func storeReady(storeID: UInt64, stateType: TraceName) {}
    public func listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32) {}
    public func intervalBegin(intervalID: UInt64, parentID: UInt64, name: StaticString) {}
    public func intervalEnd(intervalID: UInt64, name: StaticString, outcome: DispatchOutcome) {}
    public func budgetExceeded(_ event: BudgetExceededEvent) {}
    public func dispatchFailed(id: UInt64, error: any Error) {}
    public var wrapsSideEffectBodies: Bool { false }
    public func runSideEffectBody(id: UInt64, _ body: () async throws -> any Sendable) async throws -> any Sendable {
        try await body()
    }
}

/// Discards everything and answers `isEnabled == false`, so a traced Store pays one check per dispatch.
public struct NoOpTraceBackend: TraceBackend {
    /// The backend that records nothing.
    public init() {}
    public var isEnabled: Bool { false }
    /// Yes: a store that traces anyway — a dispatch recorder gives every dispatch an id — then takes its one-event
    /// inline path rather than building three events to discard (`katana-bench micro --only dispatch-log`).
    public var combinesInlineUpdaters: Bool { true }
    /// Discards the event.
    public func updaterInline(_ event: UpdaterInlineEvent) {}
    /// Discards the event.
    public func dispatchEnqueue(_ event: DispatchEnqueueEvent) {}
    /// Discards the event.
    public func dispatchBegin(_ event: DispatchBeginEvent) {}
    /// Discards the event.
    public func dispatchEnd(_ event: DispatchEndEvent) {}
}
