import CLTTng

/// Emits every event as an LTTng-UST tracepoint of the `katana` provider. Near-free when no session enables
/// `katana:*`: `isEnabled` is one C call that reads the tracepoints' enabled flags.
///
/// Record with `lttng create S && lttng enable-event -u 'katana:*' && lttng start`, run, `lttng stop`,
/// `babeltrace2 ~/lttng-traces/S*`. If the session daemon is missing or dies, the tracepoints stay disabled
/// and the application carries on unaffected.
public struct LTTngTraceBackend: TransitionTraceBackend {
    public static let shared = LTTngTraceBackend()

    /// Whether this build has the tracepoint provider compiled in (the `LTTng` package trait).
    public static var isCompiledIn: Bool { katana_lttng_compiled_in() != 0 }

    public init() {}

    @inline(__always)
    public var isEnabled: Bool { katana_lttng_any_enabled() != 0 }

    public func dispatchEnqueue(_ e: DispatchEnqueueEvent) {
        katana_lttng_dispatch_enqueue(e.id, e.parentID, e.kind.rawValue, e.name.cString, e.lane.rawValue, e.queueDepth)
    }

    public func dispatchBegin(_ e: DispatchBeginEvent) {
        katana_lttng_dispatch_begin(e.id, e.parentID, e.kind.rawValue, e.name.cString, e.lane.rawValue, e.parallelism)
    }

    public func dispatchEnd(_ e: DispatchEndEvent) {
        katana_lttng_dispatch_end(e.id, e.kind.rawValue, e.name.cString, e.lane.rawValue, e.outcome.rawValue)
    }

    public func storeReady(storeID: UInt64, stateType: TraceName) {
        katana_lttng_store_ready(storeID, stateType.cString)
    }

    public func listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32) {
        katana_lttng_listeners_notified(storeID, changes, listeners)
    }

    public func transitionBegin(transitionID: UInt64, name: TraceName) {
        katana_lttng_transition_begin(transitionID, name.cString)
    }

    public func transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome) {
        katana_lttng_transition_end(transitionID, name.cString, outcome.rawValue)
    }
}
