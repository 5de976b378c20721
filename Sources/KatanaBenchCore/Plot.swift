import Foundation
import Histogram

/// The chart latency tools draw: latency by percentile, with a logarithmic percentile axis (0%, 90%, 99%,
/// 99.9%, …) so the tail gets as much room as the median, one line per histogram.
enum Plot {
    static let palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]

    static func svg(histograms: [Metric: LatencyHistogram], title: String) -> String {
        let width = 960.0, height = 560.0
        let left = 90.0, right = 30.0, top = 50.0, bottom = 70.0
        let plotWidth = width - left - right, plotHeight = height - top - bottom

        let series: [(Metric, [(x: Double, y: Double)])] = Metric.allCases.compactMap { metric in
            guard let histogram = histograms[metric], histogram.totalCount > 0 else { return nil }
            var points: [(Double, Double)] = []
            for step in histogram.percentiles(ticksPerHalfDistance: 5) {
                let percentile = step.percentileLevelIteratedTo
                guard percentile < 100 else { break }
                points.append((log10(1 / (1 - percentile / 100)), Double(max(step.value, 1))))
            }
            // End at the highest percentile the sample count supports, at the maximum.
            let last = log10(Double(histogram.totalCount))
            points.append((last, Double(max(histogram.max, 1))))
            return (metric, points)
        }
        let maxX = max(series.flatMap { $0.1.map(\.x) }.max() ?? 2, 2).rounded(.up)
        let values = series.flatMap { $0.1.map(\.y) }
        let minY = floor(log10(values.min() ?? 1))
        let maxY = max(ceil(log10(values.max() ?? 10)), minY + 1)

        func px(_ x: Double) -> Double { left + x / maxX * plotWidth }
        func py(_ value: Double) -> Double { top + plotHeight - (log10(value) - minY) / (maxY - minY) * plotHeight }

        var svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="13">
        <rect width="100%" height="100%" fill="white"/>
        <text x="\(width / 2)" y="28" text-anchor="middle" font-size="17">\(escape(title)): latency by percentile</text>

        """
        // Grid and axes.
        for decade in Int(minY)...Int(maxY) {
            let y = py(pow(10, Double(decade)))
            svg += "<line x1=\"\(left)\" y1=\"\(y)\" x2=\"\(left + plotWidth)\" y2=\"\(y)\" stroke=\"#ddd\"/>\n"
            svg += "<text x=\"\(left - 8)\" y=\"\(y + 4)\" text-anchor=\"end\">\(escape(Report.duration(pow(10, Double(decade)))))</text>\n"
        }
        for tick in 0...Int(maxX) {
            let x = px(Double(tick))
            let label = percentileLabel(tick)
            svg += "<line x1=\"\(x)\" y1=\"\(top)\" x2=\"\(x)\" y2=\"\(top + plotHeight)\" stroke=\"#ddd\"/>\n"
            svg += "<text x=\"\(x)\" y=\"\(top + plotHeight + 20)\" text-anchor=\"middle\">\(label)</text>\n"
        }
        svg += "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(plotWidth)\" height=\"\(plotHeight)\" fill=\"none\" stroke=\"#333\"/>\n"
        svg += "<text x=\"\(left + plotWidth / 2)\" y=\"\(height - 20)\" text-anchor=\"middle\">percentile (logarithmic: each step is ten times rarer)</text>\n"
        svg += "<text transform=\"translate(20 \(top + plotHeight / 2)) rotate(-90)\" text-anchor=\"middle\">latency (log scale)</text>\n"

        // One line per histogram, and the legend (on a white box, over the grid).
        svg += "<rect x=\"\(left + 6)\" y=\"\(top + 4)\" width=\"440\" height=\"\(Double(series.count) * 20 + 8)\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n"
        for (index, (metric, points)) in series.enumerated() {
            let color = palette[index % palette.count]
            let path = points.map { String(format: "%.1f,%.1f", px($0.x), py($0.y)) }.joined(separator: " ")
            svg += "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\" points=\"\(path)\"/>\n"
            let ly = top + 18 + Double(index) * 20
            svg += "<line x1=\"\(left + 14)\" y1=\"\(ly - 4)\" x2=\"\(left + 40)\" y2=\"\(ly - 4)\" stroke=\"\(color)\" stroke-width=\"3\"/>\n"
            svg += "<text x=\"\(left + 48)\" y=\"\(ly)\">\(escape(metric.label))</text>\n"
        }
        svg += "</svg>\n"
        return svg
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

    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}
