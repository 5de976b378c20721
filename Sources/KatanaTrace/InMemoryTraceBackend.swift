import Foundation

/// Records every event in memory, in emission order, so tests can assert on what a store traced.
public final class InMemoryTraceBackend: TransitionTraceBackend, @unchecked Sendable {
    /// One recorded event.
    public enum Event: Sendable, Equatable {
        /// A dispatch was enqueued.
        case enqueue(DispatchEnqueueEvent)
        /// A dispatch began.
        case begin(DispatchBeginEvent)
        /// A dispatch ended.
        case end(DispatchEndEvent)
        /// An updater applied inline, as one event (only when created with `combinesInlineUpdaters: true`).
        case updaterInline(UpdaterInlineEvent)
        /// A store became ready.
        case storeReady(storeID: UInt64, stateType: TraceName)
        /// Listeners were handed changes.
        case listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32)
        /// A navigation transition (or a routable call in it) began.
        case transitionBegin(transitionID: UInt64, name: TraceName)
        /// A navigation transition (or a routable call in it) ended.
        case transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome)
        /// A user interval began.
        case intervalBegin(intervalID: UInt64, parentID: UInt64, name: String)
        /// A user interval ended.
        case intervalEnd(intervalID: UInt64, name: String, outcome: DispatchOutcome)
        /// A dispatch exceeded its type's latency budget.
        case budgetExceeded(BudgetExceededEvent)
    }

    // Guarded by `lock`.
    private let lock = NSLock()
    private var recorded: [Event] = []
    private var enabled: Bool
    /// Whether inline updaters arrive as one `updaterInline` event (as LTTng records them) rather than three.
    public let combinesInlineUpdaters: Bool

    /// A backend recording when `enabled`; with `combinesInlineUpdaters`, an inline updater is one
    /// ``Event/updaterInline(_:)`` event, as LTTng records it, instead of three.
    public init(enabled: Bool = true, combinesInlineUpdaters: Bool = false) {
        self.enabled = enabled
        self.combinesInlineUpdaters = combinesInlineUpdaters
    }

    public var isEnabled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return enabled
    }

    /// Turns recording on or off (off: the store behaves as with no listener).
    public func setEnabled(_ on: Bool) {
        lock.lock()
        enabled = on
        lock.unlock()
    }

    /// Everything recorded so far, in order.
    public var events: [Event] {
        lock.lock()
        defer { lock.unlock() }
        return recorded
    }

    /// Forgets everything recorded so far.
    public func reset() {
        lock.lock()
        recorded.removeAll()
        lock.unlock()
    }

    private func append(_ event: Event) {
        lock.lock()
        recorded.append(event)
        lock.unlock()
    }

    /// Records the enqueue.
    public func dispatchEnqueue(_ event: DispatchEnqueueEvent) { append(.enqueue(event)) }
    /// Records the begin.
    public func dispatchBegin(_ event: DispatchBeginEvent) { append(.begin(event)) }
    /// Records the end.
    public func dispatchEnd(_ event: DispatchEndEvent) { append(.end(event)) }
    public func updaterInline(_ event: UpdaterInlineEvent) {
        if combinesInlineUpdaters {
            append(.updaterInline(event))
        } else {
            let (enqueue, begin, end) = event.expanded
            lock.lock()
            recorded += [.enqueue(enqueue), .begin(begin), .end(end)]
            lock.unlock()
        }
    }
    public func storeReady(storeID: UInt64, stateType: TraceName) { append(.storeReady(storeID: storeID, stateType: stateType)) }
    public func listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32) {
        append(.listenersNotified(storeID: storeID, changes: changes, listeners: listeners))
    }
    public func budgetExceeded(_ event: BudgetExceededEvent) { append(.budgetExceeded(event)) }
    public func intervalBegin(intervalID: UInt64, parentID: UInt64, name: StaticString) {
        append(.intervalBegin(intervalID: intervalID, parentID: parentID, name: "\(name)"))
    }
    public func intervalEnd(intervalID: UInt64, name: StaticString, outcome: DispatchOutcome) {
        append(.intervalEnd(intervalID: intervalID, name: "\(name)", outcome: outcome))
    }
    public func transitionBegin(transitionID: UInt64, name: TraceName) { append(.transitionBegin(transitionID: transitionID, name: name)) }
    /// Records the transition's end.
    public func transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome) {
        append(.transitionEnd(transitionID: transitionID, name: name, outcome: outcome))
    }
}
