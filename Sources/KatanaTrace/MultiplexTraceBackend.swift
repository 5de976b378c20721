/// Sends every event to several backends, in order. Enabled when any of them is; an event goes to each backend
/// that is enabled at that moment.
public struct MultiplexTraceBackend: TransitionTraceBackend {
    /// The backends, in the order each event reaches them.
    public let backends: [any TraceBackend]

    /// Sends every event to each of `backends` that is enabled, in order.
    public init(_ backends: [any TraceBackend]) { self.backends = backends }

    public var isEnabled: Bool { backends.contains { $0.isEnabled } }

    /// Sends the enqueue to every enabled backend.
    public func dispatchEnqueue(_ event: DispatchEnqueueEvent) { for b in backends where b.isEnabled { b.dispatchEnqueue(event) } }
    /// Sends the begin to every enabled backend.
    public func dispatchBegin(_ event: DispatchBeginEvent) { for b in backends where b.isEnabled { b.dispatchBegin(event) } }
    /// Sends the end to every enabled backend.
    public func dispatchEnd(_ event: DispatchEndEvent) { for b in backends where b.isEnabled { b.dispatchEnd(event) } }
    /// Combines only when every backend does: a backend that timestamps each event must see each at its moment.
    public var combinesInlineUpdaters: Bool { backends.allSatisfy(\.combinesInlineUpdaters) }
    public func updaterInline(_ event: UpdaterInlineEvent) { for b in backends where b.isEnabled { b.updaterInline(event) } }
    public func storeReady(storeID: UInt64, stateType: TraceName) {
        for b in backends where b.isEnabled { b.storeReady(storeID: storeID, stateType: stateType) }
    }
    public func listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32) {
        for b in backends where b.isEnabled { b.listenersNotified(storeID: storeID, changes: changes, listeners: listeners) }
    }
    public func budgetExceeded(_ event: BudgetExceededEvent) { for b in backends where b.isEnabled { b.budgetExceeded(event) } }
    public func dispatchFailed(id: UInt64, error: any Error) { for b in backends where b.isEnabled { b.dispatchFailed(id: id, error: error) } }
    public var wrapsSideEffectBodies: Bool { backends.contains(where: \.wrapsSideEffectBodies) }
    /// Through every backend that wraps bodies, the first outermost.
    public func runSideEffectBody(id: UInt64, _ body: () async throws -> any Sendable) async throws -> any Sendable {
        try await run(id: id, from: backends.startIndex, body)
    }

    private func run(id: UInt64, from index: Int, _ body: () async throws -> any Sendable) async throws -> any Sendable {
        guard let next = backends[index...].firstIndex(where: { $0.wrapsSideEffectBodies && $0.isEnabled }) else {
            return try await body()
        }
        return try await backends[next].runSideEffectBody(id: id) { try await run(id: id, from: next + 1, body) }
    }
    public func intervalBegin(intervalID: UInt64, parentID: UInt64, name: StaticString) {
        for b in backends where b.isEnabled { b.intervalBegin(intervalID: intervalID, parentID: parentID, name: name) }
    }
    public func intervalEnd(intervalID: UInt64, name: StaticString, outcome: DispatchOutcome) {
        for b in backends where b.isEnabled { b.intervalEnd(intervalID: intervalID, name: name, outcome: outcome) }
    }
    public func transitionBegin(transitionID: UInt64, name: TraceName) {
        for case let b as any TransitionTraceBackend in backends where b.isEnabled {
            b.transitionBegin(transitionID: transitionID, name: name)
        }
    }
    /// Sends the transition's end to every enabled backend that records transitions.
    public func transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome) {
        for case let b as any TransitionTraceBackend in backends where b.isEnabled {
            b.transitionEnd(transitionID: transitionID, name: name, outcome: outcome)
        }
    }
}
