import Foundation
import Histogram

/// The chart latency tools draw: latency by percentile, with a logarithmic percentile axis (0%, 90%, 99%,
/// 99.9%, …) so the tail gets as much room as the median, one line per histogram — and, with a baseline, the
/// baseline's lines dashed in the same colours. The legend sits below the data area, never over a line.
enum Plot {
    static let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]

    struct Series {
        var metric: Metric
        var points: [(x: Double, y: Double)]
        var count: UInt64
    }

    static func series(_ histograms: [Metric: LatencyHistogram]) -> [Series] {
        BenchMetric.all.compactMap { metric in
            guard let histogram = histograms[metric], histogram.totalCount > 0 else { return nil }
            var points: [(Double, Double)] = []
            for step in histogram.percentiles(ticksPerHalfDistance: 5) {
                let percentile = step.percentileLevelIteratedTo
                guard percentile < 100 else { break }
                points.append((log10(1 / (1 - percentile / 100)), Double(max(step.value, 1))))
            }
            // End at the highest percentile the sample count supports, at the maximum.
            points.append((log10(Double(histogram.totalCount)), Double(max(histogram.max, 1))))
            return Series(metric: metric, points: points, count: histogram.totalCount)
        }
    }

    static func svg(histograms: [Metric: LatencyHistogram], title: String, subtitle: String = "",
                    baseline: [Metric: LatencyHistogram]? = nil, baselineName: String = "baseline") -> String {
        let current = series(histograms)
        let previous = baseline.map(series) ?? []
        let legendRows = current.count + (previous.isEmpty ? 0 : 1)
        let width = 1000.0, left = 100.0, right = 70.0, top = subtitle.isEmpty ? 50.0 : 72.0
        let plotHeight = 420.0, plotWidth = width - left - right
        let legendTop = top + plotHeight + 62
        let height = legendTop + Double(legendRows) * 20 + 16

        let all = current + previous
        let maxX = max(all.flatMap { $0.points.map(\.x) }.max() ?? 2, 2).rounded(.up)
        let values = all.flatMap { $0.points.map(\.y) }
        let minY = floor(log10(values.min() ?? 1))
        let maxY = max(ceil(log10(values.max() ?? 10)), minY + 1)

        func px(_ x: Double) -> Double { left + x / maxX * plotWidth }
        func py(_ value: Double) -> Double { top + plotHeight - (log10(value) - minY) / (maxY - minY) * plotHeight }

        var svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="13">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(width / 2)" y="28" text-anchor="middle" font-size="17">\(escape(title)): latency by percentile</text>

        """
        if !subtitle.isEmpty {
            svg += "<text x=\"\(width / 2)" + "\" y=\"50\" text-anchor=\"middle\" fill=\"#555\">\(escape(subtitle))</text>\n"
        }
        // Grid and axes: one tick per decade of latency, labelled in the unit that keeps it a whole number.
        for decade in Int(minY)...Int(maxY) {
            let y = py(pow(10, Double(decade)))
            svg += "<line x1=\"\(left)\" y1=\"\(y)\" x2=\"\(left + plotWidth)\" y2=\"\(y)\" stroke=\"#ddd\"/>\n"
            svg += "<text x=\"\(left - 8)\" y=\"\(y + 4)\" text-anchor=\"end\">\(escape(decadeLabel(decade)))</text>\n"
        }
        for tick in 0...Int(maxX) {
            let x = px(Double(tick))
            svg += "<line x1=\"\(x)\" y1=\"\(top)\" x2=\"\(x)\" y2=\"\(top + plotHeight)\" stroke=\"#ddd\"/>\n"
            svg += "<text x=\"\(x)\" y=\"\(top + plotHeight + 20)\" text-anchor=\"middle\">\(percentileLabel(tick))</text>\n"
        }
        svg += "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(plotWidth)\" height=\"\(plotHeight)\" fill=\"none\" stroke=\"#333\"/>\n"
        svg += "<text x=\"\(left + plotWidth / 2)\" y=\"\(top + plotHeight + 44)\" text-anchor=\"middle\">percentile (logarithmic: each step is ten times rarer)</text>\n"
        svg += "<text transform=\"translate(22 \(top + plotHeight / 2)) rotate(-90)\" text-anchor=\"middle\">latency (log scale)</text>\n"

        func line(_ points: [(x: Double, y: Double)], _ color: String, dashed: Bool) -> String {
            let path = points.map { String(format: "%.1f,%.1f", px($0.x), py($0.y)) }.joined(separator: " ")
            return "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"\(dashed ? " stroke-dasharray=\"7 4\" stroke-opacity=\"0.8\"" : "") points=\"\(path)\"/>\n"
        }
        func color(_ metric: Metric) -> String { palette[metric.index % palette.count] }
        for entry in previous { svg += line(entry.points, color(entry.metric), dashed: true) }
        for entry in current { svg += line(entry.points, color(entry.metric), dashed: false) }

        // The legend, below the axes: one row per line, with its sample count.
        for (index, entry) in current.enumerated() {
            let y = legendTop + Double(index) * 20
            svg += "<line x1=\"\(left)\" y1=\"\(y - 4)\" x2=\"\(left + 28)\" y2=\"\(y - 4)\" stroke=\"\(color(entry.metric))\" stroke-width=\"3\"/>\n"
            let baselineCount = previous.first { $0.metric == entry.metric }.map { "; baseline \(grouped($0.count))" } ?? ""
            svg += "<text x=\"\(left + 36)\" y=\"\(y)\">\(escape(entry.metric.label)) — \(grouped(entry.count)) samples\(baselineCount)</text>\n"
        }
        if !previous.isEmpty {
            let y = legendTop + Double(current.count) * 20
            svg += "<line x1=\"\(left)\" y1=\"\(y - 4)\" x2=\"\(left + 28)\" y2=\"\(y - 4)\" stroke=\"#555\" stroke-width=\"2\" stroke-dasharray=\"7 4\"/>\n"
            svg += "<text x=\"\(left + 36)\" y=\"\(y)\">dashed: \(escape(baselineName)) (same colours; solid: this run)</text>\n"
        }
        svg += "</svg>\n"
        return svg
    }

    /// 10^decade ns as a whole number of the largest unit that fits: "10 ns", "1 µs", "100 ms", "10 s".
    static func decadeLabel(_ decade: Int) -> String {
        let units = [(9, "s"), (6, "ms"), (3, "µs"), (0, "ns")]
        let (power, unit) = units.first { decade >= $0.0 } ?? (0, "ns")
        return "1" + String(repeating: "0", count: max(decade - power, 0)) + " " + unit
    }

    /// 0 → "0%", 1 → "90%", 2 → "99%", 3 → "99.9%", …
    static func percentileLabel(_ tick: Int) -> String {
        switch tick {
        case 0: "0%"
        case 1: "90%"
        case 2: "99%"
        default: "99." + String(repeating: "9", count: tick - 2) + "%"
        }
    }

    static func grouped(_ count: UInt64) -> String {
        let digits = Array(String(count))
        return String(digits.enumerated().flatMap { index, digit in
            (index > 0 && (digits.count - index) % 3 == 0 ? [","] : []) + [digit]
        })
    }

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
