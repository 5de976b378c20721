import Foundation
import Histogram
import KatanaTrace

/// The service's own record of its dispatches, kept apart from KatanaMetrics to check it: per type, how many ended
/// and an HdrHistogram of their service times (begin to end), as katana-bench keeps its latencies.
final class ServiceTimes: TraceBackend, @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var began: [UInt64: UInt64] = [:]
    private var ended: [String: Int] = [:]
    private var times: [String: Histogram<UInt64>] = [:]

    var isEnabled: Bool { true }
    /// The store reports an inline updater once, with its duration: the same figure KatanaMetrics gets.
    var combinesInlineUpdaters: Bool { true }

    func updaterInline(_ event: UpdaterInlineEvent) {
        lock.withLock { end(event.name.string, serviceTime: event.durationNanoseconds) }
    }

    func dispatchEnqueue(_ event: DispatchEnqueueEvent) {}

    func dispatchBegin(_ event: DispatchBeginEvent) {
        let now = DispatchTime.now().uptimeNanoseconds
        lock.withLock { began[event.id] = now }
    }

    func dispatchEnd(_ event: DispatchEndEvent) {
        let now = DispatchTime.now().uptimeNanoseconds
        lock.withLock {
            let start = began.removeValue(forKey: event.id)
            end(event.name.string, serviceTime: start.map { now - $0 })
        }
    }

    /// Counts an ended dispatch of `type` and records its service time when it began (lock held).
    private func end(_ type: String, serviceTime: UInt64?) {
        ended[type, default: 0] += 1
        guard let serviceTime else { return }
        var histogram = times[type] ?? Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
        _ = histogram.record(serviceTime)
        times[type] = histogram
    }

    /// `{"TYPE": {"ended": N, "service_p99_ns": P}}` as JSON.
    func report() throws -> Data {
        let figures: [String: [String: UInt64]] = lock.withLock {
            var figures: [String: [String: UInt64]] = [:]
            for (type, count) in ended {
                var entry = ["ended": UInt64(count)]
                if let histogram = times[type] {
                    entry["service_p99_ns"] = histogram.valueAtPercentile(99)
                    entry["service_count"] = histogram.totalCount
                }
                figures[type] = entry
            }
            return figures
        }
        return try JSONSerialization.data(withJSONObject: figures, options: [.sortedKeys, .prettyPrinted])
    }
}
