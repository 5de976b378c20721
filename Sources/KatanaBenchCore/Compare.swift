import ArgumentParser
import Foundation

/// Compares two `--json` results, each one or more repetitions (`run --repeat N`): per metric the medians, each
/// side's spread and a one-sided Mann–Whitney U test. A metric regresses only when it is worse by more than its
/// threshold *and* the difference is significant; exit 0 without regressions (improvements are reported, never
/// fail), 1 on a regression, 2 on bad input (including results measured with different parameters).
struct Compare: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare two katana-bench --json results; exit 1 on a significant regression beyond its threshold.",
        discussion: """
        Each result holds one or more repetitions (run --repeat N). Per metric, compare takes each side's median \
        and spread, and asks a one-sided Mann-Whitney U test whether the current repetitions tend to be worse \
        than the baseline's. A REGRESSION is both: worse by more than the metric's threshold and p < --alpha. \
        With too few repetitions for the test to reach --alpha (fewer than 4 per side at 0.05), the threshold \
        alone decides and the output says so. Results measured with different parameters are refused.
        """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case text, markdown }

    @Argument(help: "The baseline result (--json of an earlier run).")
    var baseline: String
    @Argument(help: "The current result.")
    var current: String
    @Option(parsing: .unconditionalSingleValue, help: "Allowed worsening: a percentage for every metric (10 or 10%), or <metric>=<percentage> for one (side_effect.end_to_end.p99=30%). Repeat for several. Default 10%.")
    var threshold: [String] = []
    @Option(parsing: .unconditional, help: "Significance level of the one-sided Mann-Whitney U test, between 0 and 0.5.")
    var alpha: Double = 0.05
    @Option(name: .long, parsing: .upToNextOption,
            help: "Metrics to judge, as <histogram>.<field> (e.g. side_effect.end_to_end.p99) or throughput.<name>. Default: every end-to-end p50 and p99, and throughput.")
    var metric: [String] = []
    @Flag(help: "Compare results measured with different parameters (e.g. to measure a deliberate change).")
    var allowDifferentParameters = false
    @Option(help: "text, or markdown (a table for a pull-request comment).")
    var format: Format = .text

    /// The thresholds: the default and the per-metric ones.
    struct Thresholds: Equatable {
        var all: Double = 10
        var perMetric: [String: Double] = [:]
        func of(_ metric: String) -> Double { perMetric[metric] ?? all }
    }

    static func parseThresholds(_ values: [String]) throws -> Thresholds {
        var thresholds = Thresholds()
        for value in values {
            if let equals = value.firstIndex(of: "=") {
                let name = String(value[..<equals])
                guard !name.isEmpty else { throw ValidationError("--threshold \(value): name a metric before '='") }
                thresholds.perMetric[name] = try parsePercent(String(value[value.index(after: equals)...]), option: value)
            } else {
                thresholds.all = try parsePercent(value, option: value)
            }
        }
        return thresholds
    }

    static func parsePercent(_ text: String, option: String) throws -> Double {
        let trimmed = text.hasSuffix("%") ? String(text.dropLast()) : text
        guard let value = Double(trimmed), value >= 0, value <= 10_000 else {
            throw ValidationError("--threshold must be a percentage from 0 to 10000, optionally after <metric>= (got \(option))")
        }
        return value
    }

    func validate() throws {
        _ = try Compare.parseThresholds(threshold)
        guard alpha > 0, alpha <= 0.5 else { throw ValidationError("--alpha must be above 0 and at most 0.5 (got \(alpha))") }
    }

    enum Outcome: String, Equatable { case within = "ok", regression = "REGRESSION", improvement = "improved", notSignificant = "not significant" }

    struct Row: Equatable {
        var metric: String
        var baseline: Double
        var current: Double
        /// Each side's spread: the largest distance of a repetition from the median, in percent of the median.
        var baselineSpread: Double
        var currentSpread: Double
        var changePercent: Double
        var threshold: Double
        /// One-sided p of the current side being worse (nil when a side has one repetition).
        var p: Double?
        var outcome: Outcome
    }

    struct Comparison {
        var rows: [Row]
        var baselineRepetitions: Int
        var currentRepetitions: Int
        /// Whether the test can reach alpha with these sample sizes; when not, thresholds alone decide.
        var testable: Bool
        var differentParameters: [String]
        var regressions: Int { rows.filter { $0.outcome == .regression }.count }
    }

    func run() throws {
        let comparison: Comparison
        do {
            comparison = try Compare.compare(Compare.load(baseline), Compare.load(current), metrics: metric,
                                             thresholds: Compare.parseThresholds(threshold), alpha: alpha,
                                             allowDifferentParameters: allowDifferentParameters)
        } catch let error as CompareError {
            FileHandle.standardError.write(Data("katana-bench compare: \(error)\n".utf8))
            throw ExitCode(2)
        }
        switch format {
        case .text: print(Compare.table(comparison, alpha: alpha))
        case .markdown: print(Compare.markdown(comparison, alpha: alpha))
        }
        if comparison.regressions > 0 { throw ExitCode(1) }
    }

    static func load(_ path: String) throws -> BenchResult {
        switch existingType(of: path) {
        case nil: throw CompareError("cannot read \(path): no such file")
        case .typeDirectory?: throw CompareError("cannot read \(path): it is a directory, not a --json result")
        case .typeRegular?: break
        default: throw CompareError("cannot read \(path): not a regular file (a FIFO, device or socket is not a --json result)")
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CompareError("cannot read \(path): \(FileManager.default.isReadableFile(atPath: path) ? error.localizedDescription : "permission denied")")
        }
        let result: BenchResult
        do {
            result = try JSONDecoder().decode(BenchResult.self, from: data)
        } catch {
            // Foundation calls a number out of its field's range (a negative count) "not valid JSON": say what it is.
            if let json = try? JSONSerialization.jsonObject(with: data), let negative = firstNegativeNumber(in: json) {
                throw CompareError("\(path) is not a katana-bench --json result (\(negative) is negative: counts and latencies cannot be)")
            }
            throw CompareError("\(path) is not a katana-bench --json result (\(describe(error)))")
        }
        guard BenchResult.readableSchemas.contains(result.schema) else {
            throw CompareError("\(path) has schema \(result.schema); this katana-bench reads \(BenchResult.readableSchemas.joined(separator: " and "))")
        }
        if let problem = result.firstOutOfRange() { throw CompareError("\(path): \(problem)") }
        return result
    }

    /// The path of the first negative number in a parsed JSON value (`metrics.updater.end_to_end.count`), if any.
    static func firstNegativeNumber(in json: Any, at path: String = "") -> String? {
        switch json {
        case let object as [String: Any]:
            for key in object.keys.sorted() {
                if let found = firstNegativeNumber(in: object[key]!, at: path.isEmpty ? key : "\(path).\(key)") { return found }
            }
        case let array as [Any]:
            for (index, element) in array.enumerated() {
                if let found = firstNegativeNumber(in: element, at: "\(path)[\(index)]") { return found }
            }
        case let number as NSNumber where !(json is Bool) && number.doubleValue < 0:
            return path
        default:
            break
        }
        return nil
    }

    /// A decoding error in one line: what was wrong, and where.
    static func describe(_ error: any Error) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
        }
        switch error as? DecodingError {
        case let .typeMismatch(_, context), let .valueNotFound(_, context):
            return "\(path(context)): \(context.debugDescription)"
        case let .keyNotFound(key, context):
            return "missing \((context.codingPath + [key]).map(\.stringValue).joined(separator: "."))"
        case let .dataCorrupted(context):
            return context.codingPath.isEmpty ? "not valid JSON" : "\(path(context)): \(context.debugDescription)"
        default:
            return error.localizedDescription
        }
    }

    /// The parameters two results differ in (workload parameters, build configuration, CPU count).
    static func differences(_ base: BenchResult, _ cur: BenchResult) -> [String] {
        var a = base.parameters, b = cur.parameters
        a["build"] = .text(base.environment.buildConfiguration)
        b["build"] = .text(cur.environment.buildConfiguration)
        a["cpus"] = .integer(base.environment.cpus)
        b["cpus"] = .integer(cur.environment.cpus)
        return Set(a.keys).union(b.keys).sorted().compactMap { key in
            a[key] == b[key] ? nil : "\(key) \(a[key]?.description ?? "unset") vs \(b[key]?.description ?? "unset")"
        }
    }

    static func compare(_ base: BenchResult, _ cur: BenchResult, metrics: [String], thresholds: Thresholds,
                        alpha: Double, allowDifferentParameters: Bool) throws -> Comparison {
        guard base.scenario == cur.scenario else {
            throw CompareError("the results are of different scenarios (\(base.scenario) vs \(cur.scenario)); compare like with like")
        }
        guard base.environment.katanaBenchVersion == cur.environment.katanaBenchVersion else {
            throw CompareError("the results come from different katana-bench versions (\(base.environment.katanaBenchVersion) vs \(cur.environment.katanaBenchVersion))")
        }
        let different = differences(base, cur)
        if !different.isEmpty, !allowDifferentParameters {
            throw CompareError("the results were measured with different parameters (\(different.joined(separator: ", "))): compare like with like, or pass --allow-different-parameters")
        }
        // By default, what either result measured: a metric on one side only is reported, not skipped.
        let names = metrics.isEmpty ? defaultMetrics(base) + defaultMetrics(cur).filter { !defaultMetrics(base).contains($0) } : metrics
        for name in thresholds.perMetric.keys where !names.contains(name) {
            throw CompareError("--threshold names \(name), which is not among the metrics compared (\(names.joined(separator: ", ")))")
        }
        let baseSamples = base.samples, curSamples = cur.samples
        let testable = MannWhitney.smallestP(baseSamples.count, curSamples.count) < alpha
        var rows: [Row] = []
        for name in names {
            let b = baseSamples.map { value(of: name, in: $0) }, c = curSamples.map { value(of: name, in: $0) }
            let bKnown = b.allSatisfy { $0 != nil }, cKnown = c.allSatisfy { $0 != nil }
            if !bKnown, !cKnown, metrics.isEmpty { continue }  // a default metric neither run measured
            guard bKnown, cKnown else {
                if metrics.isEmpty || bKnown || cKnown {
                    // One side measured it and the other did not: the runs are not comparable on it.
                    let missing = bKnown ? "the current result" : "the baseline"
                    throw CompareError("metric \(name) is missing from \(missing): both results must measure the same metrics")
                }
                throw CompareError("unknown or missing metric \(name) (use <histogram>.<p50|p90|p99|p999|p9999|mean|max> or throughput.<name>)")
            }
            let baseValues = b.map { $0! }, curValues = c.map { $0! }
            let higherIsBetter = name.hasPrefix("throughput.")
            let bm = median(baseValues), cm = median(curValues)
            let change = bm == 0 ? (cm == 0 ? 0 : 100) : (cm - bm) / bm * 100
            let worsening = higherIsBetter ? -change : change
            let limit = thresholds.of(name)
            // One-sided in each direction: "worse" is larger for latencies, smaller for throughput.
            let pWorse = higherIsBetter ? MannWhitney.pGreater(baseValues, than: curValues) : MannWhitney.pGreater(curValues, than: baseValues)
            let pBetter = higherIsBetter ? MannWhitney.pGreater(curValues, than: baseValues) : MannWhitney.pGreater(baseValues, than: curValues)
            let outcome: Outcome
            if worsening > limit {
                outcome = !testable || pWorse < alpha ? .regression : .notSignificant
            } else if worsening < -limit {
                outcome = !testable || pBetter < alpha ? .improvement : .notSignificant
            } else {
                outcome = .within
            }
            rows.append(Row(metric: name, baseline: bm, current: cm, baselineSpread: spread(baseValues),
                            currentSpread: spread(curValues), changePercent: change, threshold: limit,
                            p: baseValues.count > 1 || curValues.count > 1 ? (worsening >= 0 ? pWorse : pBetter) : nil,
                            outcome: outcome))
        }
        return Comparison(rows: rows, baselineRepetitions: baseSamples.count, currentRepetitions: curSamples.count,
                          testable: testable, differentParameters: different)
    }

    /// The largest distance of a value from the median, in percent of the median.
    static func spread(_ values: [Double]) -> Double {
        let m = median(values)
        guard m != 0 else { return 0 }
        return values.map { abs($0 - m) }.max()! / m * 100
    }

    static func defaultMetrics(_ result: BenchResult) -> [String] {
        var names: [String] = []
        for name in Report.orderedMetricNames(result.metrics.keys) where name.hasSuffix("end_to_end") && (result.metrics[name]?.count ?? 0) > 0 {
            names += ["\(name).p50", "\(name).p99"]
        }
        names.append("throughput.top_level_per_second")
        return names
    }

    static func value(of name: String, in repetition: BenchResult.Repetition) -> Double? {
        if name.hasPrefix("throughput.") { return repetition.throughput[String(name.dropFirst("throughput.".count))] }
        guard let dot = name.lastIndex(of: ".") else { return nil }
        return repetition.metrics[String(name[..<dot])]?.value(String(name[name.index(after: dot)...]))
    }

    static func formatted(_ value: Double, _ metric: String) -> String {
        metric.hasPrefix("throughput.") ? String(format: "%.0f/s", value) : Report.duration(value)
    }

    static func summary(_ comparison: Comparison, alpha: Double) -> [String] {
        var lines = [String(format: "%d vs %d repetitions. A regression is worse by more than its threshold and significant (one-sided Mann-Whitney U, p < %g); better is reported, never fails.",
                            comparison.baselineRepetitions, comparison.currentRepetitions, alpha)]
        if !comparison.testable {
            lines.append(String(format: "Too few repetitions for the test to reach p < %g: thresholds alone decide (run --repeat 5 or more on both sides).", alpha))
        }
        if !comparison.differentParameters.isEmpty {
            lines.append("Parameters differ (allowed): \(comparison.differentParameters.joined(separator: ", ")).")
        }
        return lines
    }

    static func table(_ comparison: Comparison, alpha: Double) -> String {
        let header = ["metric", "baseline", "±", "current", "±", "change", "threshold", "p", "verdict"]
        let cells = comparison.rows.map { row in
            [row.metric, formatted(row.baseline, row.metric), String(format: "%.1f%%", row.baselineSpread),
             formatted(row.current, row.metric), String(format: "%.1f%%", row.currentSpread),
             String(format: "%+.1f%%", row.changePercent), String(format: "%g%%", row.threshold),
             row.p.map { String(format: "%.3f", $0) } ?? "-", row.outcome.rawValue]
        }
        let widths = header.indices.map { index in ([header[index]] + cells.map { $0[index] }).map(\.count).max()! }
        func line(_ row: [String]) -> String {
            row.enumerated().map { index, cell in
                index == 0 || index == row.count - 1 ? cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[index] - cell.count) + cell
            }.joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        return ([line(header)] + cells.map(line) + summary(comparison, alpha: alpha)).joined(separator: "\n")
    }

    static func markdown(_ comparison: Comparison, alpha: Double) -> String {
        let verdict = comparison.regressions == 0 ? "no regression" : "**\(comparison.regressions) regression\(comparison.regressions == 1 ? "" : "s")**"
        var lines = ["### katana-bench compare: \(verdict)", "",
                     "| metric | baseline | current | change | threshold | p | verdict |",
                     "|---|--:|--:|--:|--:|--:|---|"]
        for row in comparison.rows {
            let outcome = row.outcome == .regression ? "**REGRESSION**" : row.outcome.rawValue
            lines.append("| `\(row.metric)` | \(formatted(row.baseline, row.metric)) ±\(String(format: "%.1f", row.baselineSpread))% "
                + "| \(formatted(row.current, row.metric)) ±\(String(format: "%.1f", row.currentSpread))% "
                + "| \(String(format: "%+.1f", row.changePercent))% | \(String(format: "%g", row.threshold))% "
                + "| \(row.p.map { String(format: "%.3f", $0) } ?? "–") | \(outcome) |")
        }
        lines.append("")
        lines += summary(comparison, alpha: alpha)
        return lines.joined(separator: "\n")
    }
}

/// Bad input to compare: exit status 2 with the message.
struct CompareError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
