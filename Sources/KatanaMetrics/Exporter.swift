internal import CKatanaMetrics
import CoreMetrics
import Dispatch
import Foundation
import KatanaTrace

/// Hands what the dispatching threads recorded to swift-metrics: it sums every thread's counters and passes on what
/// is new since its last export.
///
/// A histogram reaches swift-metrics as the values it holds (a `Timer` takes one value per call): each bucket's new
/// samples are recorded at their mean — the bucket's new sum over its new count, split into whole nanoseconds so the
/// values add up to that sum — which lies in the bucket. A backend with the same bounds therefore gets every
/// bucket's count and the histogram's sum exactly (`KatanaMetricsTests.aBackendGetsEveryBucketAndSumExactly`).
final class Exporter: @unchecked Sendable {
    private let context: OpaquePointer
    private let configuration: DispatchMetrics.Configuration
    /// The set's bucket bounds in nanoseconds (read once from the C set).
    let bounds: [UInt64]
    // Guarded by `lock` (NSLock, which ThreadSanitizer understands): one export at a time.
    private let lock = NSLock()
    private var series: [Series] = []
    private var gauges: (inFlight: Gauge, backlog: Gauge)?
    private var timer: (any DispatchSourceTimer)?
    private var totals = katana_metrics_series()

    init(context: OpaquePointer, configuration: DispatchMetrics.Configuration) {
        self.context = context
        self.configuration = configuration
        var bounds = [UInt64](repeating: 0, count: Int(KATANA_METRICS_MAX_BUCKETS))
        bounds.removeLast(bounds.count - Int(katana_metrics_bounds(context, &bounds)))
        self.bounds = bounds
    }

    /// One (type, kind) series: its metrics, and what has been handed to them so far.
    private final class Series {
        let dimensions: [(String, String)]
        let serviceTime: CoreMetrics.Timer
        let queueWait: CoreMetrics.Timer
        var outcomes: [Counter?] = Array(repeating: nil, count: DispatchOutcome.allCases.count)
        var overruns: Counter?
        var exported = katana_metrics_series()
        // The sums handed on, per bucket: what was recorded beyond them waits for its count (see `replay`).
        var serviceSums: [Int64]
        var waitSums: [Int64]

        init(dimensions: [(String, String)], buckets: Int, factory: any MetricsFactory) {
            self.dimensions = dimensions
            serviceTime = CoreMetrics.Timer(label: DispatchMetrics.Name.serviceTime, dimensions: dimensions, factory: factory)
            queueWait = CoreMetrics.Timer(label: DispatchMetrics.Name.queueWait, dimensions: dimensions, factory: factory)
            serviceSums = Array(repeating: 0, count: buckets + 1)
            waitSums = Array(repeating: 0, count: buckets + 1)
        }
    }

    deinit { timer?.cancel() }

    func start(every interval: Duration) {
        lock.lock()
        defer { lock.unlock() }
        guard timer == nil else { return }
        let source = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "katana.metrics.export"))
        let nanoseconds = Int(clamping: interval.clampedNanoseconds)
        source.schedule(deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds),
                        leeway: .nanoseconds(nanoseconds / 10))
        source.setEventHandler { [weak self] in self?.export() }
        source.resume()
        timer = source
    }

    func stop() {
        lock.lock()
        let source = timer
        timer = nil
        lock.unlock()
        source?.cancel()
    }

    func export() {
        lock.lock()
        defer { lock.unlock() }
        // The configured factory, else the one swift-metrics has now (an app may bootstrap it after making these).
        let factory = configuration.factory ?? MetricsSystem.factory
        let count = Int(katana_metrics_series_count(context))
        while series.count < count {
            var kind: UInt8 = 0
            let name = katana_metrics_series_name(context, UInt32(series.count), &kind).map { String(cString: $0) } ?? "other"
            let kindName = DispatchKind(rawValue: kind)?.description ?? "state_updater"
            series.append(Series(dimensions: configuration.dimensions + [("type", name), ("kind", kindName)],
                                 buckets: bounds.count, factory: factory))
        }
        for (index, exported) in series.enumerated() {
            katana_metrics_collect(context, UInt32(index), &totals)
            hand(totals, to: exported, factory: factory)
        }
        var inFlight: Int64 = 0, backlog: Int64 = 0, timing: UInt64 = 0
        katana_metrics_gauges(context, &inFlight, &backlog, &timing)
        let gauges = self.gauges ?? (Gauge(label: DispatchMetrics.Name.sideEffectsInFlight, dimensions: configuration.dimensions, factory: factory),
                                     Gauge(label: DispatchMetrics.Name.updaterBacklog, dimensions: configuration.dimensions, factory: factory))
        self.gauges = gauges
        gauges.inFlight.record(inFlight)
        gauges.backlog.record(backlog)
    }

    private func hand(_ totals: katana_metrics_series, to series: Series, factory: any MetricsFactory) {
        var totals = totals
        withUnsafeBytes(of: &totals.outcomes) { now in
            withUnsafeBytes(of: &series.exported.outcomes) { before in
                for outcome in DispatchOutcome.allCases {
                    let index = Int(outcome.rawValue)
                    let new = now.load(fromByteOffset: index * 8, as: UInt64.self)
                        &- before.load(fromByteOffset: index * 8, as: UInt64.self)
                    guard new > 0 else { continue }
                    let counter = series.outcomes[index]
                        ?? Counter(label: DispatchMetrics.Name.dispatches, dimensions: series.dimensions + [("outcome", outcome.description)],
                                   factory: factory)
                    series.outcomes[index] = counter
                    counter.increment(by: Int64(clamping: new))
                }
            }
        }
        if totals.overruns > series.exported.overruns {
            let counter = series.overruns ?? Counter(label: DispatchMetrics.Name.budgetOverruns, dimensions: series.dimensions, factory: factory)
            series.overruns = counter
            counter.increment(by: Int64(clamping: totals.overruns - series.exported.overruns))
        }
        replay(counts: &totals.service_count, sums: &totals.service_sum, before: &series.exported.service_count,
               handed: &series.serviceSums, into: series.serviceTime)
        replay(counts: &totals.wait_count, sums: &totals.wait_sum, before: &series.exported.wait_count,
               handed: &series.waitSums, into: series.queueWait)
        series.exported = totals
    }

    /// Records each bucket's new samples into `timer` at their mean, whole nanoseconds adding up to the bucket's new
    /// sum. A sum read a moment before its count may hold a sample not yet counted: what goes beyond the counted
    /// samples' room in the bucket stays in `handed`'s difference for the next export.
    private func replay<Buckets>(counts: inout Buckets, sums: inout Buckets, before: inout Buckets, handed: inout [Int64],
                                 into timer: CoreMetrics.Timer) {
        withUnsafeBytes(of: &counts) { counts in
            withUnsafeBytes(of: &sums) { sums in
                withUnsafeBytes(of: &before) { before in
                    for bucket in 0...bounds.count {
                        let offset = bucket * 8
                        let new = counts.load(fromByteOffset: offset, as: UInt64.self) &- before.load(fromByteOffset: offset, as: UInt64.self)
                        guard new > 0 else { continue }
                        let samples = Int64(clamping: new)
                        let low = bucket == 0 ? 0 : Int64(clamping: bounds[bucket - 1] + 1)
                        let high = bucket < bounds.count ? Int64(clamping: bounds[bucket]) : Int64.max / 4
                        let pending = Int64(clamping: sums.load(fromByteOffset: offset, as: UInt64.self)) &- handed[bucket]
                        var (mean, extra) = pending.quotientAndRemainder(dividingBy: samples)
                        if mean < low {
                            (mean, extra) = (low, 0)
                        } else if mean >= high {
                            (mean, extra) = (high, 0)
                        }
                        for _ in 0..<extra { timer.recordNanoseconds(mean + 1) }
                        for _ in extra..<samples { timer.recordNanoseconds(mean) }
                        handed[bucket] &+= mean &* samples &+ extra
                    }
                }
            }
        }
    }
}
