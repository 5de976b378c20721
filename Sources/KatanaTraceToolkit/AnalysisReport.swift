import Foundation

/// The analysis of a recording: per-type latencies, side effects in flight over time, nesting, budget overruns,
/// intervals, navigation transitions and the longest dispatches — the document `katana-trace analyze --json`
/// prints, as the CTF reader writes it.
public struct AnalysisReport: Decodable, Sendable {
    /// Which reader decoded the trace (`native`: the package's own CTF reader).
    public var reader: String
    /// Dispatches seen (enqueued or begun in the trace).
    public var dispatches: Int
    /// Dispatches whose enqueue, begin and end are all in the trace.
    public var complete: Int
    /// Events the tracer discarded (full buffers): the figures are then incomplete.
    public var discardedEvents: Int
    /// Katana events read.
    public var events: Int
    /// The window the dispatches were kept from.
    public var window: Window
    /// Per-type figures, the busiest first.
    public var types: [TypeStats]
    /// Side effects in flight, in equal slices of the trace.
    public var parallelismTimeline: [ParallelismSlice]
    /// The most side effects in flight at once.
    public var maxParallelism: Int
    /// Who dispatched what.
    public var nesting: Nesting
    /// Dispatches over their type's latency budget.
    public var overBudget: OverBudget?
    /// `context.interval` and `traceInterval` intervals, per name.
    public var intervals: [IntervalStats]?
    /// KatanaRouter's navigation transitions, per name.
    public var transitions: [TransitionStats]?
    /// The longest dispatches (service time), when asked for with `--top`.
    public var top: [TopDispatch]?

    /// What `--begin`, `--end` and `--min-duration` kept.
    public struct Window: Decodable, Sendable {
        public var beginS: Double?
        public var endS: Double?
        public var minDurationNs: Int
        public var dispatches: Int
        /// How many windows (`--slowest`) the dispatches were kept in, if any.
        public var windows: Int?
        /// The types kept (`--type`), if not all.
        public var types: [String]?
    }

    /// Percentiles of a duration, in nanoseconds.
    public struct Durations: Decodable, Sendable {
        public var p50: Double
        public var p99: Double?
        public var max: Double
        public var stddev: Double?
    }

    /// One dispatched type's figures.
    public struct TypeStats: Decodable, Sendable {
        public var name: String
        public var kind: String
        public var count: Int
        public var queueWaitNs: Durations
        public var serviceNs: Durations
        public var serviceDistribution: [Bucket]?
    }

    /// A bucket of a service-time distribution.
    public struct Bucket: Decodable, Sendable {
        public var fromNs: Double
        public var toNs: Double
        public var count: Int
    }

    /// Side effects in flight during one slice of the trace.
    public struct ParallelismSlice: Decodable, Sendable {
        public var fromMs: Double
        public var toMs: Double
        public var meanInFlight: Double
        public var maxInFlight: Int
    }

    /// Parent → child counts; `roots` are the top-level dispatches per type.
    public struct Nesting: Decodable, Sendable {
        public var roots: [String: Int]
        public var children: [Edge]
        public struct Edge: Decodable, Sendable {
            public var parent: String
            public var child: String
            public var count: Int
        }
    }

    /// A dispatch's ancestor, nearest first.
    public struct Ancestor: Decodable, Sendable {
        public var name: String?
        public var id: UInt64
    }

    /// Budget overruns: how many, and the first of them.
    public struct OverBudget: Decodable, Sendable {
        public var count: Int
        public var dispatches: [Overrun]
        public struct Overrun: Decodable, Sendable {
            public var atS: Double
            public var name: String
            public var id: UInt64
            public var kind: String
            public var actualNs: Double
            public var budgetNs: Double
            public var vtid: Int
            public var parents: [Ancestor]
        }
    }

    /// One interval name's durations and where it ran.
    public struct IntervalStats: Decodable, Sendable {
        public var name: String
        public var count: Int
        public var durationNs: Durations
        public var parents: [String: Int]
    }

    /// One transition name's durations and outcomes.
    public struct TransitionStats: Decodable, Sendable {
        public var name: String
        public var count: Int
        public var durationNs: Durations
        public var outcomes: [String: Int]
    }

    /// One of the longest dispatches.
    public struct TopDispatch: Decodable, Sendable {
        public var rank: Int
        public var serviceNs: Double
        public var queueWaitNs: Double
        public var beginS: Double
        public var id: UInt64
        public var vtid: Int
        public var name: String
        public var kind: String
        public var outcome: String
        public var parents: [Ancestor]?
    }

    /// Decodes the reader's JSON document.
    public static func decode(_ json: Data) throws -> AnalysisReport {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(AnalysisReport.self, from: json)
    }
}
