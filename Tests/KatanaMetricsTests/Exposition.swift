import CoreMetrics
import Foundation
import KatanaMetrics
import Prometheus

/// A swift-prometheus registry with the metrics' buckets, and its text exposition read back as samples: what a
/// Prometheus server would scrape from it.
struct PrometheusBackend {
    let registry = PrometheusCollectorRegistry()
    let factory: PrometheusMetricsFactory

    init(buckets: [Duration] = DispatchMetrics.defaultBuckets) {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = [
            DispatchMetrics.Name.serviceTime: buckets, DispatchMetrics.Name.queueWait: buckets,
        ]
        self.factory = factory
    }

    /// One line of the exposition: a metric name, its labels, its value.
    struct Sample {
        let name: String
        let labels: [String: String]
        let value: String
    }

    /// The registry as a scrape would read it.
    func scrape() -> [Sample] {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self).split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#") else { return nil }
            let (series, value) = (line[..<line.lastIndex(of: " ")!], line[line.index(after: line.lastIndex(of: " ")!)...])
            guard let brace = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: String(value)) }
            var labels: [String: String] = [:]
            for pair in series[series.index(after: brace)..<series.index(before: series.endIndex)].split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                labels[String(parts[0])] = String(parts[1].dropFirst().dropLast())
            }
            return Sample(name: String(series[..<brace]), labels: labels, value: String(value))
        }
    }
}

extension [PrometheusBackend.Sample] {
    /// The samples of `name` whose labels include `labels`.
    func matching(_ name: String, _ labels: [String: String] = [:]) -> [PrometheusBackend.Sample] {
        filter { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }
    }

    /// The one value of `name` with `labels` as an integer (nil when absent).
    func integer(_ name: String, _ labels: [String: String] = [:]) -> Int? {
        let found = matching(name, labels)
        guard found.count == 1 else { return nil }
        // Counters are written as integers, gauges as doubles ("1.0").
        return Int(found[0].value) ?? Double(found[0].value).flatMap { $0.rounded() == $0 ? Int($0) : nil }
    }

    /// A histogram's `_sum` in nanoseconds (swift-prometheus writes seconds with up to 18 decimals).
    func sumNanoseconds(_ name: String, _ labels: [String: String]) -> Int? {
        let found = matching(name + "_sum", labels)
        guard found.count == 1 else { return nil }
        let parts = found[0].value.split(separator: ".")
        guard let seconds = Int(parts[0]) else { return nil }
        let fraction = parts.count > 1 ? String(parts[1]) : "0"
        let attoseconds = Int(fraction.padding(toLength: 18, withPad: "0", startingAt: 0))!
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// A histogram's cumulative bucket counts, by upper bound in nanoseconds (+Inf as Int.max).
    func buckets(_ name: String, _ labels: [String: String]) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for sample in matching(name + "_bucket", labels) {
            let bound = sample.labels["le"]!
            let key: Int
            if bound == "+Inf" {
                key = .max
            } else {
                let parts = bound.split(separator: ".")
                let fraction = parts.count > 1 ? String(parts[1]) : "0"
                key = Int(parts[0])! * 1_000_000_000 + Int(fraction.padding(toLength: 18, withPad: "0", startingAt: 0))! / 1_000_000_000
            }
            counts[key] = Int(sample.value)
        }
        return counts
    }
}
