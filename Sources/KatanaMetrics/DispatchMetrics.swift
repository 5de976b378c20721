internal import CKatanaMetrics
import CoreMetrics
import Foundation
import Katana
import KatanaTrace

/// Katana's dispatches as metrics of apple/swift-metrics: per dispatched type, the service time and the queue wait
/// as histograms and the dispatches by outcome as counters; the side effects in flight and the updater backlog as
/// gauges. Whatever backend the app bootstraps (swift-prometheus, swift-otel's metrics, StatsD) receives them.
///
/// Turn it on beside `MetricsSystem.bootstrap`, before creating stores:
///
///     MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
///     try DispatchMetrics.bootstrap()
///
/// A dispatching thread adds into counters of its own — no lock, no atomic read-modify-write, no allocation once
/// it has dispatched each type once — and the metrics reach the backend when they are exported: every
/// ``Configuration/exportInterval`` on a thread of their own, and whenever ``export()`` is called (call it in
/// the `/metrics` handler, just before the registry is rendered, and a scrape sees every dispatch that ended before
/// it). What each dispatch costs is measured by `katana-bench micro --backend metrics`.
///
/// A set of metrics lives for the whole process once made (its threads' counters are never freed); a process may
/// make at most 64. The first one made is the one a store records an inline updater into through a C function called
/// directly (the figure `micro` measures); later ones take the backend's `updaterInline` call, a few ns more.
public final class DispatchMetrics: DirectRecordingBackend, @unchecked Sendable {
    /// The metrics' names (Prometheus's conventions: base units, `_seconds`, `_total`), and their labels.
    public enum Name {
        /// Histogram (a swift-metrics `Timer`) of the time from a dispatch's begin to its end: an updater's apply, a
        /// side effect's body. Labels `type`, `kind`.
        public static let serviceTime = "katana_dispatch_service_seconds"
        /// Histogram (a `Timer`) of the time from a dispatch's enqueue to its begin; 0 for an updater applied inline.
        /// Labels `type`, `kind`.
        public static let queueWait = "katana_dispatch_queue_wait_seconds"
        /// Counter of ended dispatches. Labels `type`, `kind`, `outcome`.
        public static let dispatches = "katana_dispatches_total"
        /// Counter of dispatches that ran over their type's latency budget (`StoreConfiguration.latencyBudgets`).
        /// Labels `type`, `kind`.
        public static let budgetOverruns = "katana_dispatch_budget_overruns_total"
        /// Gauge of the side effects begun and not yet ended.
        public static let sideEffectsInFlight = "katana_side_effects_in_flight"
        /// Gauge of the updaters waiting in a store's lane (or for their store to be ready).
        public static let updaterBacklog = "katana_updater_backlog"
    }

    /// How a set of metrics buckets, bounds and exports what it records.
    public struct Configuration: Sendable {
        /// The histograms' bucket bounds (upper bounds, ascending, at most 64), for both histograms. Give the metrics
        /// backend the same bounds (swift-prometheus: `PrometheusMetricsFactory.durationHistogramBuckets`, see
        /// ``prometheusBuckets``): the counts it receives then land in its buckets exactly.
        public var buckets: [Duration]
        /// At most this many dispatched types get series of their own; dispatches of types seen after them count under
        /// the type `other`. A label value per type, never per value: generic or generated types cannot grow the
        /// series without bound.
        public var typeLimit: Int
        /// When set, only these types get series of their own (`typeLimit` then does not apply); all others are
        /// `other`.
        public var types: [any Dispatchable.Type]?
        /// How often the metrics are handed to the backend on a thread of their own; `nil`: only on ``export()``.
        public var exportInterval: Duration?
        /// The swift-metrics factory to create the metrics with; `nil`: `MetricsSystem.factory`.
        public var factory: (any MetricsFactory)?
        /// Labels added to every metric (e.g. `[("store", "orders")]`, when two sets of metrics record two stores).
        public var dimensions: [(String, String)]

        /// A configuration; every argument has the default the properties describe.
        public init(
            buckets: [Duration] = DispatchMetrics.defaultBuckets,
            typeLimit: Int = 100,
            types: [any Dispatchable.Type]? = nil,
            exportInterval: Duration? = .seconds(1),
            factory: (any MetricsFactory)? = nil,
            dimensions: [(String, String)] = []
        ) {
            self.buckets = buckets
            self.typeLimit = typeLimit
            self.types = types
            self.exportInterval = exportInterval
            self.factory = factory
            self.dimensions = dimensions
        }
    }

    /// 100 ns to 10 s in steps of 1, 2.5 and 5: an inline updater takes a fraction of a microsecond, a side effect
    /// that waits on the network tens of milliseconds (swift-prometheus's own default starts at 5 ms).
    public static let defaultBuckets: [Duration] = [
        .nanoseconds(100), .nanoseconds(250), .nanoseconds(500),
        .microseconds(1), .nanoseconds(2_500), .microseconds(5),
        .microseconds(10), .microseconds(25), .microseconds(50),
        .microseconds(100), .microseconds(250), .microseconds(500),
        .milliseconds(1), .microseconds(2_500), .milliseconds(5),
        .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10),
    ]

    /// A configuration this type cannot use, in one line.
    public struct ConfigurationError: Error, CustomStringConvertible {
        /// What is wrong.
        public var description: String
    }

    let context: OpaquePointer
    let configuration: Configuration
    private let isPrimary: Bool
    private let exporter: Exporter

    /// Makes a set of metrics; record into it by making it a store's trace backend (or use ``bootstrap(_:)``).
    public init(_ configuration: Configuration = .init()) throws(ConfigurationError) {
        let nanoseconds = configuration.buckets.map(\.clampedNanoseconds)
        guard configuration.typeLimit >= 0 else {
            throw ConfigurationError(description: "typeLimit \(configuration.typeLimit): give 0 or more")
        }
        if let interval = configuration.exportInterval, interval <= .zero {
            throw ConfigurationError(description: "exportInterval \(interval): give a positive interval, or nil")
        }
        var error = [CChar](repeating: 0, count: 256)
        let limit = UInt32(clamping: configuration.types?.count ?? configuration.typeLimit)
        guard let context = katana_metrics_create(nanoseconds, UInt32(clamping: nanoseconds.count), limit, &error, error.count) else {
            throw ConfigurationError(description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        self.context = context
        self.configuration = configuration
        self.isPrimary = katana_metrics_is_primary(context) != 0
        if let types = configuration.types {
            _ = katana_metrics_reserve(context, nil, 0, 1)  // only the named types from now on
            for type in types { _ = katana_metrics_reserve(context, TraceName.of(type).cString, Self.kind(of: type).rawValue, 1) }
        }
        exporter = Exporter(context: context, configuration: configuration)
        if let interval = configuration.exportInterval { exporter.start(every: interval) }
    }

    /// Makes a set of metrics and makes it the trace backend of stores created from now on, beside the one they
    /// had (LTTng, the flight recorder): call it once, beside `MetricsSystem.bootstrap`, before creating stores.
    @discardableResult
    public static func bootstrap(_ configuration: Configuration = .init()) throws(ConfigurationError) -> DispatchMetrics {
        let metrics = try DispatchMetrics(configuration)
        KatanaTracing.bootstrap(metrics.alongside(KatanaTracing.backend))
        return metrics
    }

    /// This set of metrics together with `other` (a trace backend that records events: LTTng, the flight recorder):
    /// a `MultiplexTraceBackend` of both, or these metrics alone when `other` records nothing.
    public func alongside(_ other: any TraceBackend) -> any TraceBackend {
        if other is NoOpTraceBackend { return self }
        if let other = other as? DispatchMetrics, other === self { return self }
        return MultiplexTraceBackend([other, self])
    }

    /// Hands the backend what was recorded since the last export: counter increments, the histograms' new values,
    /// the gauges' current values. Safe from any thread; exports run one at a time. Dispatching threads never wait
    /// for it.
    public func export() { exporter.export() }

    /// Stops the periodic export (``export()`` still works).
    public func stopExporting() { exporter.stop() }

    /// The bucket bounds as swift-prometheus takes them, for each of the two histograms' names:
    /// `factory.durationHistogramBuckets.merge(metrics.prometheusBuckets) { $1 }`.
    public var prometheusBuckets: [String: [Duration]] {
        [Name.serviceTime: configuration.buckets, Name.queueWait: configuration.buckets]
    }

    /// One (type, kind) series' totals since these metrics were made, as ``totals()`` reads them.
    public struct Totals: Sendable {
        /// The dispatched type's name; nil for `other` (types past the limit, or not named).
        public var type: String?
        /// Whether the type is a state updater or a side effect.
        public var kind: DispatchKind
        /// Dispatches ended, by outcome.
        public var outcomes: [DispatchOutcome: UInt64]
        /// Service times by bucket: `serviceCounts[i]` ended within `(bounds[i − 1], bounds[i]]`, the last past the
        /// last bound. The bounds are ``Configuration/buckets``.
        public var serviceCounts: [UInt64]
        /// The service times' sum.
        public var serviceSumNanoseconds: UInt64
        /// Dispatches that ran over their latency budget.
        public var budgetOverruns: UInt64
    }

    /// Every series' totals now, summed over the dispatching threads' shards (which never wait for it), and the
    /// bucket bounds in nanoseconds — what a live page (KatanaInspector) shows without waiting for an export.
    public func totals() -> (series: [Totals], boundsNanoseconds: [UInt64]) {
        let bounds = exporter.bounds
        var raw = katana_metrics_series()
        let series = (0..<katana_metrics_series_count(context)).map { index in
            var kind: UInt8 = 0
            let name = katana_metrics_series_name(context, index, &kind).map { String(cString: $0) }
            katana_metrics_collect(context, index, &raw)
            var outcomes: [DispatchOutcome: UInt64] = [:]
            var counts: [UInt64] = []
            var sum: UInt64 = 0
            withUnsafeBytes(of: raw.outcomes) { words in
                for outcome in DispatchOutcome.allCases {
                    let count = words.load(fromByteOffset: Int(outcome.rawValue) * 8, as: UInt64.self)
                    if count > 0 { outcomes[outcome] = count }
                }
            }
            withUnsafeBytes(of: raw.service_count) { words in
                counts = (0...bounds.count).map { words.load(fromByteOffset: $0 * 8, as: UInt64.self) }
            }
            withUnsafeBytes(of: raw.service_sum) { words in
                sum = (0...bounds.count).reduce(0) { $0 &+ words.load(fromByteOffset: $1 * 8, as: UInt64.self) }
            }
            return Totals(type: name, kind: DispatchKind(rawValue: kind) ?? .stateUpdater, outcomes: outcomes,
                          serviceCounts: counts, serviceSumNanoseconds: sum, budgetOverruns: raw.overruns)
        }
        return (series, bounds)
    }

    /// The number of (type, kind) series recorded so far, the two `other` series included.
    public var seriesCount: Int { Int(katana_metrics_series_count(context)) }

    /// Dispatches being timed: an updater from its enqueue to its begin, a side effect to its end (a few words of
    /// memory each).
    public var dispatchesInProgress: Int {
        var inFlight: Int64 = 0, queued: Int64 = 0, timing: UInt64 = 0
        katana_metrics_gauges(context, &inFlight, &queued, &timing)
        return Int(timing)
    }

    /// For benchmarks: nanoseconds per record of what a recorded inline updater cannot do without — the duration
    /// clock's start and end and one value added into a bucket of a per-thread histogram with these metrics' bounds
    /// (katana-bench micro's floor for this backend).
    package func floorNanoseconds(count: Int) -> Double {
        Double(katana_metrics_floor(context, UInt64(max(1, count)))) / Double(max(1, count))
    }

    static func kind(of type: any Dispatchable.Type) -> DispatchKind {
        type is any AnySideEffect.Type ? .sideEffect : .stateUpdater
    }

    // MARK: TraceBackend

    /// Always: the metrics record every dispatch of a store that has them as its backend.
    public var isEnabled: Bool { true }
    /// Yes: an updater applied inline is one record at its end.
    public var combinesInlineUpdaters: Bool { true }
    package var updaterInlineSinceFunction: (@convention(c) (UInt64, UInt64, UnsafePointer<CChar>, UInt32, UInt64, UInt8, UInt32) -> Void)? {
        isPrimary ? katana_metrics_updater_inline_since : nil
    }

    /// Records an updater applied inline: its service time, a wait of 0, its outcome.
    public func updaterInline(_ event: UpdaterInlineEvent) {
        katana_metrics_updater_inline(context, event.name.cString, event.durationNanoseconds, event.outcome.rawValue)
    }

    /// Notes when the dispatch was enqueued (and whether it waits in the lane).
    public func dispatchEnqueue(_ event: DispatchEnqueueEvent) {
        let queued = event.kind == .stateUpdater && (event.route == .updaterQueue || event.route == .keptUntilReady)
        katana_metrics_enqueue(context, event.id, event.kind.rawValue, queued ? 1 : 0)
    }

    /// Records the dispatch's queue wait.
    public func dispatchBegin(_ event: DispatchBeginEvent) {
        katana_metrics_begin(context, event.id, event.kind.rawValue, event.name.cString)
    }

    /// Records the dispatch's service time and outcome.
    public func dispatchEnd(_ event: DispatchEndEvent) {
        katana_metrics_end(context, event.id, event.kind.rawValue, event.name.cString, event.outcome.rawValue)
    }

    /// Counts the overrun.
    public func budgetExceeded(_ event: BudgetExceededEvent) {
        katana_metrics_budget_exceeded(context, event.kind.rawValue, event.name.cString)
    }
}
