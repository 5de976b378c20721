import Foundation
import Histogram

/// A run's figures, as written by `--json` and read by `compare`. Latencies are in nanoseconds.
struct BenchResult: Codable, Equatable {
    static let currentSchema = "katana-bench/2"
    /// Schemas `compare` reads: /1 (one run, no `repetitions`) and /2.
    static let readableSchemas = ["katana-bench/1", currentSchema]

    var schema = BenchResult.currentSchema
    var scenario: String
    var parameters: [String: Parameter]
    var environment: Environment
    var durationSeconds: Double
    var throughput: [String: Double]
    var parallelism: Parallelism
    var harness: Harness
    /// Latency summaries over every repetition's samples (with `--repeat 1`, the one run's).
    var metrics: [String: MetricSummary]
    /// When, where and how the run was made (absent in katana-bench/1 results).
    var context: Context? = nil
    /// Every metric's histogram over all repetitions, in HdrHistogram's compressed V2 encoding (base64): `merge`
    /// and other HdrHistogram tools re-percentile them. Absent in katana-bench/1 results.
    var histograms: [String: String]? = nil
    /// Each repetition's own figures, in run order (`--repeat N`): what `compare` tests for significance. Absent in
    /// katana-bench/1 results, which are one repetition: the top-level figures.
    var repetitions: [Repetition]? = nil
    /// Ctrl-C stopped the run before its end: the figures cover what was measured until then.
    var interrupted: Bool? = nil

    /// One measured repetition: a fresh store, its warm-up, its measured phase.
    struct Repetition: Codable, Equatable {
        var durationSeconds: Double
        var throughput: [String: Double]
        var metrics: [String: MetricSummary]
        /// This repetition's histograms, encoded as the result's `histograms` are.
        var histograms: [String: String]? = nil
    }

    /// A parameter's value as typed (a number is a JSON number); two values are the same parameter value when
    /// they print the same, so a katana-bench/1 result's strings ("8") match a typed 8.
    enum Parameter: Codable, Equatable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
        case integer(Int), number(Double), text(String)

        init(stringLiteral value: String) { self = .text(value) }

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(Int.self) { self = .integer(value) }
            else if let value = try? container.decode(Double.self) { self = .number(value) }
            else { self = .text(try container.decode(String.self)) }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case let .integer(value): try container.encode(value)
            case let .number(value): try container.encode(value)
            case let .text(value): try container.encode(value)
            }
        }

        var description: String {
            switch self {
            case let .integer(value): "\(value)"
            case let .number(value): "\(value)"
            case let .text(value): value
            }
        }

        /// The value as a number, when it is one (a katana-bench/1 result wrote numbers as strings: "0.0").
        var numeric: Double? { if case let .text(value) = self { Double(value) } else { Double(description) } }

        static func == (a: Parameter, b: Parameter) -> Bool {
            if let x = a.numeric, let y = b.numeric { return x == y }
            return a.description == b.description
        }

        func hash(into hasher: inout Hasher) {
            if let numeric { hasher.combine(numeric) } else { hasher.combine(description) }
        }
    }

    /// The run's context, for whoever reads the result later.
    struct Context: Codable, Equatable {
        /// ISO 8601, UTC, when the run started.
        var date: String
        /// `git rev-parse HEAD` in the working directory, when it is in a repository.
        var gitCommit: String?
        var cpuModel: String?
        /// 1, 5 and 15 minute load averages when the run started (a busy machine explains a slow run).
        var loadAverage: [Double]
        var commandLine: [String]

        static func current() -> Context {
            var loads = [Double](repeating: 0, count: 3)
            let read = getloadavg(&loads, 3)
            let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
                .split(separator: "\n").first { $0.hasPrefix("model name") }?
                .split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
            return Context(date: ISO8601DateFormatter().string(from: Date()), gitCommit: gitCommit(), cpuModel: cpu,
                           loadAverage: read == 3 ? loads : [], commandLine: CommandLine.arguments)
        }

        /// The commit checked out in the working directory, if git is installed and it is a repository.
        static func gitCommit() -> String? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["git", "rev-parse", "--verify", "--quiet", "HEAD"]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            guard (try? process.run()) != nil else { return nil }
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let commit = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            return process.terminationStatus == 0 && commit.count == 40 ? commit : nil
        }
    }

    /// The figures `compare` tests: one per repetition.
    var samples: [Repetition] {
        repetitions ?? [Repetition(durationSeconds: durationSeconds, throughput: throughput, metrics: metrics, histograms: histograms)]
    }

    struct Parallelism: Codable, Equatable {
        var mean: Double
        var max: UInt64
    }

    struct Harness: Codable, Equatable {
        /// What recording one sample costs: a clock read plus a histogram record.
        var sampleCostNanoseconds: Double
    }

    struct Environment: Codable, Equatable {
        var katanaBenchVersion: String
        var swiftCompiler: String
        var os: String
        var kernel: String
        var machine: String
        var cpus: Int
        var memoryBytes: UInt64
        var buildConfiguration: String

        static func current() -> Environment {
            var name = utsname()
            uname(&name)
            func string<T>(_ field: T) -> String {
                withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            }
            #if DEBUG
            let configuration = "debug"
            #else
            let configuration = "release"
            #endif
            #if compiler(>=6.3)
            let compiler = "6.3+"
            #elseif compiler(>=6.2)
            let compiler = "6.2"
            #else
            let compiler = "6.1"
            #endif
            return Environment(
                katanaBenchVersion: "1", swiftCompiler: compiler, os: string(name.sysname), kernel: string(name.release),
                machine: string(name.machine), cpus: ProcessInfo.processInfo.activeProcessorCount,
                memoryBytes: ProcessInfo.processInfo.physicalMemory, buildConfiguration: configuration)
        }
    }
}

extension Dictionary where Key == Metric, Value == LatencyHistogram {
    /// The histograms that hold samples, by metric name: what a result's `metrics` and `histograms` are made from.
    var recordedByName: [String: LatencyHistogram] {
        filter { $0.value.totalCount > 0 }.reduce(into: [:]) { $0[$1.key.name] = $1.value }
    }
}

extension BenchResult {
    /// Several runs as one result (`run --repeat`, `merge`): the first run's description with every repetition,
    /// latencies over every sample (`histograms`, summed by metric name), the median repetition's throughput, the
    /// durations summed, parallelism averaged and its peak, and marked interrupted if any run was.
    static func combining(_ runs: [BenchResult], repetitions: [Repetition], histograms: [String: LatencyHistogram]) -> BenchResult {
        var combined = runs[0]
        let recorded = histograms.filter { $0.value.totalCount > 0 }
        combined.repetitions = repetitions
        combined.histograms = recorded.mapValues(HistogramEncoding.encode)
        combined.metrics = recorded.mapValues(MetricSummary.init)
        combined.durationSeconds = repetitions.reduce(0) { $0 + $1.durationSeconds }
        combined.throughput = Dictionary(uniqueKeysWithValues: runs[0].throughput.keys.map { key in
            (key, median(repetitions.compactMap { $0.throughput[key] }))
        })
        combined.parallelism = .init(mean: runs.reduce(0) { $0 + $1.parallelism.mean } / Double(runs.count),
                                     max: runs.map(\.parallelism.max).max() ?? 0)
        combined.interrupted = runs.contains { $0.interrupted == true } ? true : nil
        return combined
    }

    /// `--repeat`'s repetitions as one result (`run`, `replay`): combined as `combining` does, with the context the
    /// run started in, and marked interrupted when Ctrl-C came between two repetitions (or while one was summarised).
    static func ofRepetitions(_ runs: [BenchResult], histograms: [Metric: LatencyHistogram], context: Context) -> BenchResult {
        var combined = combining(runs, repetitions: runs.flatMap(\.samples), histograms: histograms.recordedByName)
        combined.context = context
        if Interruption.shared.requested { combined.interrupted = true }
        return combined
    }

    /// Its encoded histograms decoded, by metric name; nil for a katana-bench/1 result, which carries none.
    func decodedHistograms() throws -> [String: LatencyHistogram]? {
        guard let histograms else { return nil }
        var decoded: [String: LatencyHistogram] = [:]
        for (name, text) in histograms.sorted(by: { $0.key < $1.key }) {
            let histogram: LatencyHistogram
            do {
                histogram = try HistogramEncoding.decode(text)
            } catch {
                throw HistogramEncoding.Failure("histogram \(name) is damaged (\(error))")
            }
            if let foreign = histogram.foreignLayout { throw HistogramEncoding.Failure("histogram \(name): \(foreign)") }
            decoded[name] = histogram
        }
        return decoded
    }
}

/// One histogram's summary.
struct MetricSummary: Codable, Equatable {
    var count: UInt64
    var mean: Double
    var p50: UInt64
    var p90: UInt64
    var p99: UInt64
    var p999: UInt64
    var p9999: UInt64
    var max: UInt64

    init(_ histogram: LatencyHistogram) {
        count = histogram.totalCount
        mean = histogram.totalCount == 0 ? 0 : histogram.mean
        p50 = histogram.valueAtPercentile(50)
        p90 = histogram.valueAtPercentile(90)
        p99 = histogram.valueAtPercentile(99)
        p999 = histogram.valueAtPercentile(99.9)
        p9999 = histogram.valueAtPercentile(99.99)
        max = histogram.max
    }

    /// A field by name (`p50`, `p99`, `mean`, …), for `compare --metric`.
    func value(_ field: String) -> Double? {
        switch field {
        case "count": Double(count)
        case "mean": mean
        case "p50": Double(p50)
        case "p90": Double(p90)
        case "p99": Double(p99)
        case "p999": Double(p999)
        case "p9999": Double(p9999)
        case "max": Double(max)
        default: nil
        }
    }
}

enum Report {
    /// A duration in the unit that keeps it readable.
    static func duration(_ nanoseconds: Double) -> String {
        switch nanoseconds {
        case ..<1_000: String(format: "%.0f ns", nanoseconds)
        case ..<1_000_000: String(format: "%.2f µs", nanoseconds / 1e3)
        case ..<1_000_000_000: String(format: "%.2f ms", nanoseconds / 1e6)
        default: String(format: "%.2f s", nanoseconds / 1e9)
        }
    }

    /// The run in one line, for the chart: workers, loop, time measured, repetitions, build, CPUs.
    static func subtitle(_ result: BenchResult) -> String {
        let p = result.parameters
        var parts = ["\(p["workers"] ?? "?") workers", "\(p["loop"] ?? "?") loop" + (p["rate_per_s"].map { " at \($0)/s" } ?? "")]
        parts.append(String(format: "%.2f s measured", result.durationSeconds))
        if let repetitions = result.repetitions, repetitions.count > 1 { parts.append("\(repetitions.count) repetitions") }
        for (key, label) in [("spin_us", "µs spin"), ("sleep_us", "µs sleep"), ("updater_spin_us", "µs updater spin")] {
            if let value = p[key], value != .number(0) { parts.append("\(value) \(label)") }
        }
        parts.append("\(result.environment.buildConfiguration) build, \(result.environment.cpus) CPUs")
        if result.interrupted == true { parts.append("INTERRUPTED") }
        return parts.joined(separator: " · ")
    }

    /// Metric names in display order: the ones this process knows in their order, then any others alphabetically
    /// (a result of a scenario defined in another program).
    static func orderedMetricNames(_ names: some Sequence<String>) -> [String] {
        let known = BenchMetric.all.map(\.name)
        let present = Set(names)
        return known.filter(present.contains) + present.subtracting(known).sorted()
    }

    static func table(_ result: BenchResult) -> String {
        var lines: [String] = []
        let p = result.parameters
        lines.append("katana-bench \(result.scenario): \(p["workers"] ?? "?") workers, \(p["loop"] ?? "?") loop"
            + (p["rate_per_s"].map { " at \($0)/s" } ?? "")
            + String(format: ", %.2f s measured (%@ build, %d CPUs)", result.durationSeconds, result.environment.buildConfiguration, result.environment.cpus))
        if result.interrupted == true { lines.append("INTERRUPTED (Ctrl-C): the figures cover what was measured until then") }
        lines.append("")
        let columns = ["metric", "count", "mean", "p50", "p90", "p99", "p99.9", "p99.99", "max"]
        var rows: [[String]] = []
        for name in orderedMetricNames(result.metrics.keys) {
            guard let m = result.metrics[name], m.count > 0 else { continue }
            rows.append([name, "\(m.count)", duration(m.mean), duration(Double(m.p50)), duration(Double(m.p90)),
                         duration(Double(m.p99)), duration(Double(m.p999)), duration(Double(m.p9999)), duration(Double(m.max))])
        }
        let widths = columns.indices.map { index in ([columns[index]] + rows.map { $0[index] }).map(\.count).max()! }
        func format(_ row: [String]) -> String {
            row.enumerated().map { index, cell in
                index == 0 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[index] - cell.count) + cell
            }.joined(separator: "  ")
        }
        lines.append(format(columns))
        lines.append(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
        lines.append(contentsOf: rows.map(format))
        lines.append("")
        lines.append(String(format: "throughput: %.0f top-level/s, %.0f updaters applied/s",
                            result.throughput["top_level_per_second"] ?? 0, result.throughput["updaters_applied_per_second"] ?? 0))
        if let flood = result.throughput["flood_dispatches_per_second"] {
            let flooders = p["flooders"]?.description ?? "?", limit = p["backlog_limit"]?.description ?? "?"
            lines.append(String(format: "flood: %@ threads, %.0f fire-and-forget dispatches/s, backlog limit %@", flooders, flood, limit))
        }
        if result.parallelism.max > 0 {
            lines.append(String(format: "parallelism (side effects in flight at body start): mean %.2f, max %llu",
                                result.parallelism.mean, result.parallelism.max))
        }
        if let repetitions = result.repetitions, repetitions.count > 1 {
            let rates = repetitions.compactMap { $0.throughput["top_level_per_second"] }.sorted()
            if let low = rates.first, let high = rates.last {
                lines.append(String(format: "%d repetitions (latencies above: all samples; throughput: median), top-level/s per repetition %.0f to %.0f",
                                    repetitions.count, low, high))
            }
        }
        lines.append(String(format: "harness: %.1f ns per recorded sample (clock read + histogram record)", result.harness.sampleCostNanoseconds))
        return lines.joined(separator: "\n")
    }

    static func writeJSON(_ result: BenchResult, to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try writeOutput(encoder.encode(result), to: path)
    }

    /// One `<metric>.hgrm` per non-empty histogram, in HdrHistogram's percentile-distribution format, values in µs
    /// (as HdrHistogram's plotter expects).
    static func writeHgrm(_ histograms: [Metric: LatencyHistogram], to directory: String) throws {
        for (metric, histogram) in histograms where histogram.totalCount > 0 {
            var text = ""
            histogram.outputPercentileDistribution(to: &text, outputValueUnitScalingRatio: 1_000)
            try writeOutput(Data(text.utf8), to: (directory as NSString).appendingPathComponent("\(metric.name).hgrm"))
        }
    }

    /// The cost of one recorded sample on this machine: a clock read and a histogram record (median of 5).
    static func measureSampleCost() -> Double {
        var histogram = makeHistogram()
        var costs: [Double] = []
        for _ in 0..<5 {
            let n = 200_000
            let start = nowNanoseconds()
            var previous = start
            for _ in 0..<n {
                let now = nowNanoseconds()
                _ = histogram.record(now &- previous &+ 1)
                previous = now
            }
            costs.append(Double(nowNanoseconds() - start) / Double(n))
        }
        return median(costs)
    }
}
