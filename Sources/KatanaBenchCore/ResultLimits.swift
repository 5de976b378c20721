import Foundation
import Histogram

/// The largest figures katana-bench writes, which `compare` and `merge` check every result they read against: with
/// every input inside them, no sum, median, mean or ratio they compute can overflow (a total past the largest
/// `Double` once made `merge` fail only when writing, with Foundation's "the data isn't in the correct format").
/// Wide on purpose: a result past them was not written by katana-bench, or was damaged.
enum ResultLimits {
    /// Seconds measured by one run or repetition (about 31 years).
    static let durationSeconds = 1e9
    /// Items per second.
    static let throughput = 1e15
    /// Side effects in flight.
    static let parallelism = 1e9
    /// A latency, in nanoseconds: katana-bench's histograms stop at 60 s; this is far past that.
    static let latencyNanoseconds = 1e13
    /// Samples in one histogram (2^53: every count is exact as a `Double`, and sums of many results stay exact).
    static let samples: UInt64 = 1 << 53
    /// What a sample costs to record, in nanoseconds.
    static let sampleCostNanoseconds = 1e9

    /// The layout of every histogram katana-bench writes (`makeHistogram`): 1 ns to 60 s, three significant digits.
    /// Histograms of another layout are refused rather than summed: their values would not fit the merged histogram
    /// (HdrHistogram traps on a value past its range).
    static let histogramLowest: UInt64 = 1
    static let histogramHighest: UInt64 = 60_000_000_000
    static let histogramDigits = SignificantDigits.three
}

extension BenchResult {
    /// The first figure outside `ResultLimits`, named by its JSON path and value; nil when every figure is inside.
    func firstOutOfRange() -> String? {
        func check(_ value: Double, _ limit: Double, _ path: String) -> String? {
            value.isFinite && value >= 0 && value <= limit ? nil : past(path, "\(value)", limit)
        }
        func past(_ path: String, _ value: String, _ limit: Double) -> String {
            "\(path) is \(value), past the \(limit.formatted(.number.notation(.scientific))) katana-bench writes at most"
        }
        func check(_ runs: (durationSeconds: Double, throughput: [String: Double], metrics: [String: MetricSummary]),
                   at prefix: String) -> String? {
            if let problem = check(runs.durationSeconds, ResultLimits.durationSeconds, "\(prefix)durationSeconds") { return problem }
            for (name, value) in runs.throughput.sorted(by: { $0.key < $1.key }) {
                if let problem = check(value, ResultLimits.throughput, "\(prefix)throughput.\(name)") { return problem }
            }
            for (name, summary) in runs.metrics.sorted(by: { $0.key < $1.key }) {
                let path = "\(prefix)metrics.\(name)"
                if summary.count > ResultLimits.samples {
                    return past("\(path).count", "\(summary.count)", Double(ResultLimits.samples))
                }
                let latencies: [(String, Double)] = [
                    ("mean", summary.mean), ("p50", Double(summary.p50)), ("p90", Double(summary.p90)),
                    ("p99", Double(summary.p99)), ("p999", Double(summary.p999)), ("p9999", Double(summary.p9999)),
                    ("max", Double(summary.max)),
                ]
                for (field, value) in latencies {
                    if let problem = check(value, ResultLimits.latencyNanoseconds, "\(path).\(field)") { return problem }
                }
            }
            return nil
        }
        if let problem = check((durationSeconds, throughput, metrics), at: "") { return problem }
        if let problem = check(parallelism.mean, ResultLimits.parallelism, "parallelism.mean") { return problem }
        if Double(parallelism.max) > ResultLimits.parallelism {
            return past("parallelism.max", "\(parallelism.max)", ResultLimits.parallelism)
        }
        if let problem = check(harness.sampleCostNanoseconds, ResultLimits.sampleCostNanoseconds, "harness.sampleCostNanoseconds") {
            return problem
        }
        for (index, repetition) in (repetitions ?? []).enumerated() {
            if let problem = check((repetition.durationSeconds, repetition.throughput, repetition.metrics),
                                   at: "repetitions[\(index)].") {
                return problem
            }
        }
        return nil
    }
}

extension LatencyHistogram {
    /// Why this histogram cannot be one katana-bench wrote (another layout), or nil when it has katana-bench's.
    var foreignLayout: String? {
        guard lowestDiscernibleValue != ResultLimits.histogramLowest || highestTrackableValue != ResultLimits.histogramHighest
            || numberOfSignificantValueDigits != ResultLimits.histogramDigits else { return nil }
        return "its layout is \(lowestDiscernibleValue)–\(highestTrackableValue) ns at \(numberOfSignificantValueDigits.rawValue) "
            + "significant digits, where katana-bench writes \(ResultLimits.histogramLowest)–\(ResultLimits.histogramHighest) ns "
            + "at \(ResultLimits.histogramDigits.rawValue): not written by katana-bench"
    }
}
