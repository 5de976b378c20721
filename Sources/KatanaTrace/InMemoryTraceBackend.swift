import Foundation

/// Records every event in memory, in emission order, so tests can assert on what a store traced.
public final class InMemoryTraceBackend: TransitionTraceBackend, @unchecked Sendable {
    /// One recorded event.
    public enum Event: Sendable, Equatable {
        case enqueue(DispatchEnqueueEvent)
        case begin(DispatchBeginEvent)
        case end(DispatchEndEvent)
        /// An updater applied inline, as one event (only when created with `combinesInlineUpdaters: true`).
        case updaterInline(UpdaterInlineEvent)
        case storeReady(storeID: UInt64, stateType: TraceName)
        case listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32)
        case transitionBegin(transitionID: UInt64, name: TraceName)
        case transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome)
        case intervalBegin(intervalID: UInt64, parentID: UInt64, name: String)
        case intervalEnd(intervalID: UInt64, name: String, outcome: DispatchOutcome)
        case budgetExceeded(BudgetExceededEvent)
    }

    // Guarded by `lock`.
    private let lock = NSLock()
    private var recorded: [Event] = []
    private var enabled: Bool
    /// Whether inline updaters arrive as one `updaterInline` event (as LTTng records them) rather than three.
    public let combinesInlineUpdaters: Bool

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

    public func dispatchEnqueue(_ event: DispatchEnqueueEvent) { append(.enqueue(event)) }
    public func dispatchBegin(_ event: DispatchBeginEvent) { append(.begin(event)) }
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
    public func transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome) {
        append(.transitionEnd(transitionID: transitionID, name: name, outcome: outcome))
    }
}
