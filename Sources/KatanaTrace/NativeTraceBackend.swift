import CKatanaTraceProvider

/// Emits every event through a native tracing provider linked into the process — today KatanaLTTng's LTTng-UST
/// tracepoints. A provider registers itself when its object is linked in, so adding its product to an app's
/// target is the whole opt-in: `KatanaTracing.defaultBackend` is then this backend, with no code.
///
/// Near-free when nobody records: `isEnabled` is one call into the provider, which reads its enabled flags.
public struct NativeTraceBackend: TransitionTraceBackend, @unchecked Sendable {
    // The provider's table is immutable and lives for the whole process; its functions may be called from any thread.
    @usableFromInline let provider: UnsafePointer<katana_trace_provider>

    /// The provider this process links, if any (registered before `main` by the provider's constructor).
    public static var linked: NativeTraceBackend? {
        katana_trace_registered_provider().map(NativeTraceBackend.init(provider:))
    }

    /// For provider modules: a backend over `provider`'s table, which must live for the whole process.
    package init(provider: UnsafePointer<katana_trace_provider>) { self.provider = provider }

    /// The provider's name, e.g. `lttng-ust`.
    public var providerName: String { String(cString: provider.pointee.name) }

    @inlinable
    public var isEnabled: Bool { provider.pointee.any_enabled() != 0 }

    /// The provider's check for interval events, for callers that hold this backend as `any TraceBackend`: asked
    /// directly, without the existential's projection and witness call, it keeps a user interval within a few ns.
    package var intervalsEnabledCheck: @convention(c) () -> Int32 { provider.pointee.intervals_enabled }

    /// The provider's every-event check, for a store to ask directly on each dispatch (no existential, no witness).
    package var enabledCheck: @convention(c) () -> Int32 { provider.pointee.any_enabled }

    /// The provider's `updater_inline`, for a store to call directly on its hottest traced path.
    package var updaterInlineFunction: @convention(c) (UInt64, UInt64, UnsafePointer<CChar>, UInt32, UInt32, UInt64, UInt8) -> Void {
        provider.pointee.updater_inline
    }

    /// Emits `katana:dispatch_enqueue`.
    public func dispatchEnqueue(_ e: DispatchEnqueueEvent) {
        provider.pointee.dispatch_enqueue(e.id, e.parentID, e.kind.rawValue, e.name.cString, e.route.rawValue, e.queueDepth)
    }

    /// Emits `katana:dispatch_begin`.
    public func dispatchBegin(_ e: DispatchBeginEvent) {
        provider.pointee.dispatch_begin(e.id, e.parentID, e.kind.rawValue, e.name.cString, e.route.rawValue, e.parallelism)
    }

    /// Emits `katana:dispatch_end`.
    public func dispatchEnd(_ e: DispatchEndEvent) {
        provider.pointee.dispatch_end(e.id, e.kind.rawValue, e.name.cString, e.route.rawValue, e.outcome.rawValue)
    }

    /// LTTng records an inline updater as one `katana:updater_inline` event (a third of the cost of three).
    public var combinesInlineUpdaters: Bool { true }

    public func updaterInline(_ e: UpdaterInlineEvent) {
        provider.pointee.updater_inline(e.id, e.parentID, e.name.cString, e.name.utf8Count, e.parallelism,
                                        e.durationNanoseconds, e.outcome.rawValue)
    }

    public func storeReady(storeID: UInt64, stateType: TraceName) {
        provider.pointee.store_ready(storeID, stateType.cString)
    }

    public func listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32) {
        provider.pointee.listeners_notified(storeID, changes, listeners)
    }

    public func budgetExceeded(_ e: BudgetExceededEvent) {
        provider.pointee.budget_exceeded(e.id, e.kind.rawValue, e.name.cString, e.budgetNanoseconds, e.actualNanoseconds)
    }

    public func intervalBegin(intervalID: UInt64, parentID: UInt64, name: StaticString) {
        name.withCStringPointer { provider.pointee.interval_begin(intervalID, parentID, $0) }
    }

    public func intervalEnd(intervalID: UInt64, name: StaticString, outcome: DispatchOutcome) {
        name.withCStringPointer { provider.pointee.interval_end(intervalID, $0, outcome.rawValue) }
    }

    public func transitionBegin(transitionID: UInt64, name: TraceName) {
        provider.pointee.transition_begin(transitionID, name.cString)
    }

    /// Emits `katana:transition_end`.
    public func transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome) {
        provider.pointee.transition_end(transitionID, name.cString, outcome.rawValue)
    }
}

extension StaticString {
    /// The string as a NUL-terminated C string: its own storage when it has one (a literal), else a copy.
    func withCStringPointer<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        if hasPointerRepresentation {
            return utf8Start.withMemoryRebound(to: CChar.self, capacity: utf8CodeUnitCount + 1) { body($0) }
        }
        return "\(self)".withCString(body)
    }
}

/// A backend that records in this process through C functions a store calls directly on its hottest traced path —
/// KatanaFlightRecorder's rings, KatanaMetrics' counters: the inline updater's one event without the existential,
/// the event value or a retain, the updater's start token passed on so its end is the only other clock read. It
/// records every dispatch of a store it is the backend of (`isEnabled` is always true), so the store asks it nothing
/// per dispatch.
package protocol DirectRecordingBackend: TraceBackend {
    /// Records an updater applied inline: (id, parent id, NUL-terminated name, parallelism, start token from
    /// `katana_duration_start`, outcome, listeners handed its change), at its end; nil when this instance has no such
    /// function (the store then calls ``TraceBackend/updaterInline(_:)``).
    var updaterInlineSinceFunction: (@convention(c) (UInt64, UInt64, UnsafePointer<CChar>, UInt32, UInt64, UInt8, UInt32) -> Void)? { get }
}
