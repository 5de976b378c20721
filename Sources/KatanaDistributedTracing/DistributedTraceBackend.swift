import Foundation
import KatanaTrace
import Tracing

/// The Swift runtime's task-local lookup, the call `TaskLocal.get()` makes: the address of the value bound to `key`
/// in the current task (or, outside a task, on this thread), or nil when none is bound. Called directly so that an
/// unsampled dispatch does not pay `get()`'s unspecialised copy of the value through its type's witnesses.
@_silgen_name("swift_task_localValueGet")
private func taskLocalValue(_ key: UnsafeRawPointer) -> UnsafeMutableRawPointer?

/// Katana's dispatches as spans of swift-distributed-tracing, in the trace of the request that dispatched them.
///
/// ```swift
/// InstrumentationSystem.bootstrap(otelTracer)          // the app's tracer (swift-otel, …), as usual
/// let store = Store<AppState, AppDependencies>(configuration: .init(traceBackend: DistributedTraceBackend()))
/// ```
///
/// Each dispatched item is a span (`katana.updater` or `katana.side_effect`; user intervals `katana.interval`)
/// with the attributes `katana.type`, `katana.queue`, `katana.queue_depth`, `katana.parallelism` and
/// `katana.outcome`. A dispatch's span is a child of the `ServiceContext` current where `dispatch` was called
/// (a server request's span, say). It starts when the item is enqueued and carries a `begin` event when the
/// item starts, so an updater that waited in the lane shows its wait; an updater applied later on another thread
/// still belongs to its dispatcher's trace. A side effect's body runs with its own span's context current, so
/// what it dispatches or calls (an HTTP client, a database driver) becomes its children. Errors are recorded on
/// the span and set its status.
///
/// With the no-op tracer (no `InstrumentationSystem.bootstrap`) the backend answers `isEnabled == false` and the
/// store traces nothing. A request its tracer does not sample still gets (non-recording) spans from most tracers;
/// `isSampled` skips them: with swift-otel, `DistributedTraceBackend(isSampled: { $0.otelIsSampled })`. To trace to
/// LTTng as well, put both in a ``MultiplexTraceBackend``.
public final class DistributedTraceBackend: TraceBackend, @unchecked Sendable {
    private let tracer: any Tracer
    private let isSampled: (@Sendable (ServiceContext) -> Bool)?
    /// Whether the tracer is a real one (not the no-op tracer).
    private let tracing: Bool

    /// Whether this dispatch gets a span: a real tracer, and (with `isSampled`) a current context it samples. The
    /// store asks once per dispatch, before anything else, so a dispatch in an unsampled request costs this check only.
    public var isEnabled: Bool {
        guard tracing else { return false }
        guard let isSampled, let slot = taskLocalValue(contextKey) else { return true }
        // The bound value in place (what `ServiceContext.current` would copy out through the unspecialised
        // `TaskLocal.get()`): the predicate borrows it.
        guard let current = slot.assumingMemoryBound(to: ServiceContext?.self).pointee else { return true }
        return isSampled(current)
    }

    /// `ServiceContext.$current`'s key in the runtime's task-local storage: the `TaskLocal` object's address, as
    /// `TaskLocal.key` defines it.
    private let contextKey = UnsafeRawPointer(Unmanaged.passUnretained(ServiceContext.$current).toOpaque())

    // Guarded by `lock`: the spans of dispatches and intervals started and not yet ended, by id.
    private let lock = NSLock()
    private var spans: [UInt64: any Span] = [:]
    private var intervals: [UInt64: any Span] = [:]

    /// A backend starting spans with `tracer` (by default the one the app bootstrapped). `isSampled`, when given,
    /// is asked about the context current at each dispatch (when there is one): a dispatch in a context it says is
    /// not sampled gets no span, and neither does anything its side effect dispatches. A dispatch outside any
    /// context starts a root span, which the tracer samples as it does any root.
    public init(tracer: any Tracer = InstrumentationSystem.tracer, isSampled: (@Sendable (ServiceContext) -> Bool)? = nil) {
        self.tracer = tracer
        self.isSampled = isSampled
        tracing = !(tracer is NoOpTracer)
    }

    public var wrapsSideEffectBodies: Bool { true }

    /// Starts the dispatch's span, a child of the context current where `dispatch` was called.
    public func dispatchEnqueue(_ event: DispatchEnqueueEvent) {
        let span = tracer.startSpan(Self.operationName(event.kind), context: ServiceContext.current ?? .topLevel,
                                    ofKind: .internal)
        span.attributes["katana.type"] = event.name.string
        span.attributes["katana.queue"] = event.route.description
        span.attributes["katana.queue_depth"] = Int(event.queueDepth)
        lock.withLock { spans[event.id] = span }
    }

    /// Adds a `begin` event to the dispatch's span, with the queue and the parallelism.
    public func dispatchBegin(_ event: DispatchBeginEvent) {
        guard let span = lock.withLock({ spans[event.id] }) else { return }
        span.attributes["katana.queue"] = event.route.description
        span.attributes["katana.parallelism"] = Int(event.parallelism)
        span.addEvent(SpanEvent(name: "begin"))
    }

    public func dispatchFailed(id: UInt64, error: any Error) {
        guard let span = lock.withLock({ spans[id] }) else { return }
        span.recordError(error)
    }

    /// Ends the dispatch's span with its outcome (an error status for `error` and `applied_with_error`).
    public func dispatchEnd(_ event: DispatchEndEvent) {
        guard let span = lock.withLock({ spans.removeValue(forKey: event.id) }) else { return }
        span.attributes["katana.outcome"] = event.outcome.description
        switch event.outcome {
        case .ok: break
        case .error, .appliedWithError: span.setStatus(SpanStatus(code: .error, message: event.outcome.description))
        case .blocked, .cancelled: break
        }
        span.end()
    }

    public func runSideEffectBody(id: UInt64, _ body: () async throws -> any Sendable) async throws -> any Sendable {
        guard let span = lock.withLock({ spans[id] }) else { return try await body() }
        return try await ServiceContext.$current.withValue(span.context) { try await body() }
    }

    public func intervalBegin(intervalID: UInt64, parentID: UInt64, name: StaticString) {
        let span = tracer.startSpan("katana.interval", context: ServiceContext.current ?? .topLevel, ofKind: .internal)
        span.attributes["katana.type"] = "\(name)"
        lock.withLock { intervals[intervalID] = span }
    }

    public func intervalEnd(intervalID: UInt64, name: StaticString, outcome: DispatchOutcome) {
        guard let span = lock.withLock({ intervals.removeValue(forKey: intervalID) }) else { return }
        span.attributes["katana.outcome"] = outcome.description
        if outcome == .error { span.setStatus(SpanStatus(code: .error)) }
        span.end()
    }

    private static func operationName(_ kind: DispatchKind) -> String {
        switch kind {
        case .stateUpdater: "katana.updater"
        case .sideEffect: "katana.side_effect"
        }
    }
}
