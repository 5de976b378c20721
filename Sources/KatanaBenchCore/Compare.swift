import ArgumentParser
import Foundation

/// Compares two `--json` results: a side-by-side table, exit 0 within the threshold, 1 on a regression
/// (improvements are reported, never fail), 2 on bad input.
struct Compare: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compare two katana-bench --json results; exit 1 on a regression beyond the threshold.")

    @Argument(help: "The baseline result (--json of an earlier run).")
    var baseline: String
    @Argument(help: "The current result.")
    var current: String
    @Option(help: "Allowed worsening, in percent (e.g. 10 or 10%).", transform: Compare.parsePercent)
    var threshold: Double = 10
    @Option(name: .long, parsing: .upToNextOption,
            help: "Metrics to judge, as <histogram>.<field> (e.g. side_effect.end_to_end.p99) or throughput.<name>. Default: every end-to-end p50 and p99, and throughput.")
    var metric: [String] = []

    static func parsePercent(_ text: String) throws -> Double {
        let trimmed = text.hasSuffix("%") ? String(text.dropLast()) : text
        guard let value = Double(trimmed), value >= 0, value.isFinite else {
            throw ValidationError("--threshold must be a non-negative percentage (got \(text))")
        }
        return value
    }

    enum Outcome: Equatable { case within, regression, improvement, missing }

    struct Row: Equatable {
        var metric: String
        var baseline: Double
        var current: Double
        var changePercent: Double
        var outcome: Outcome
    }

    func run() throws {
        let rows: [Row]
        do {
            rows = try Compare.rows(Compare.load(baseline), Compare.load(current), metrics: metric, threshold: threshold)
        } catch let error as CompareError {
            FileHandle.standardError.write(Data("katana-bench compare: \(error)\n".utf8))
            throw ExitCode(2)
        }
        print(Compare.table(rows, threshold: threshold))
        if rows.contains(where: { $0.outcome == .regression }) { throw ExitCode(1) }
    }

    static func load(_ path: String) throws -> BenchResult {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw CompareError("cannot read \(path): \(error.localizedDescription)")
        }
        let result: BenchResult
        do {
            result = try JSONDecoder().decode(BenchResult.self, from: data)
        } catch {
            throw CompareError("\(path) is not a katana-bench --json result (\(error))")
        }
        guard result.schema == BenchResult.currentSchema else {
            throw CompareError("\(path) has schema \(result.schema); this katana-bench reads \(BenchResult.currentSchema)")
        }
        return result
    }

    static func rows(_ base: BenchResult, _ cur: BenchResult, metrics: [String], threshold: Double) throws -> [Row] {
        guard base.scenario == cur.scenario else {
            throw CompareError("the results are of different scenarios (\(base.scenario) vs \(cur.scenario)); compare like with like")
        }
        guard base.environment.katanaBenchVersion == cur.environment.katanaBenchVersion else {
            throw CompareError("the results come from different katana-bench versions (\(base.environment.katanaBenchVersion) vs \(cur.environment.katanaBenchVersion))")
        }
        // By default, what either result measured: a metric on one side only is reported, not skipped.
        let names = metrics.isEmpty ? defaultMetrics(base) + defaultMetrics(cur).filter { !defaultMetrics(base).contains($0) } : metrics
        var rows: [Row] = []
        for name in names {
            let b = value(of: name, in: base), c = value(of: name, in: cur)
            if b == nil, c == nil, metrics.isEmpty { continue }  // a default metric neither run measured
            guard let b, let c else {
                if metrics.isEmpty || b != nil || c != nil {
                    // One side measured it and the other did not: the runs are not comparable on it.
                    let missing = b == nil ? "the baseline" : "the current result"
                    throw CompareError("metric \(name) is missing from \(missing): both results must measure the same metrics")
                }
                throw CompareError("unknown or missing metric \(name) (use <histogram>.<p50|p90|p99|p999|p9999|mean|max> or throughput.<name>)")
            }
            let higherIsBetter = name.hasPrefix("throughput.")
            let change = b == 0 ? (c == 0 ? 0 : 100) : (c - b) / b * 100
            let worsening = higherIsBetter ? -change : change
            let outcome: Outcome = worsening > threshold ? .regression : (worsening < -threshold ? .improvement : .within)
            rows.append(Row(metric: name, baseline: b, current: c, changePercent: change, outcome: outcome))
        }
        return rows
    }

    static func defaultMetrics(_ result: BenchResult) -> [String] {
        var names: [String] = []
        for metric in Metric.allCases where metric.rawValue.hasSuffix("end_to_end") && (result.metrics[metric.rawValue]?.count ?? 0) > 0 {
            names += ["\(metric.rawValue).p50", "\(metric.rawValue).p99"]
        }
        names.append("throughput.top_level_per_second")
        return names
    }

    static func value(of name: String, in result: BenchResult) -> Double? {
        if name.hasPrefix("throughput.") { return result.throughput[String(name.dropFirst("throughput.".count))] }
        guard let dot = name.lastIndex(of: ".") else { return nil }
        return result.metrics[String(name[..<dot])]?.value(String(name[name.index(after: dot)...]))
    }

    static func table(_ rows: [Row], threshold: Double) -> String {
        var lines = ["metric".padding(toLength: 40, withPad: " ", startingAt: 0) + "    baseline      current    change  verdict"]
        for row in rows {
            let isThroughput = row.metric.hasPrefix("throughput.")
            let b = isThroughput ? String(format: "%.0f/s", row.baseline) : Report.duration(row.baseline)
            let c = isThroughput ? String(format: "%.0f/s", row.current) : Report.duration(row.current)
            let verdict = switch row.outcome {
            case .within: "ok"
            case .regression: "REGRESSION"
            case .improvement: "improved"
            case .missing: "missing"
            }
            lines.append(row.metric.padding(toLength: 40, withPad: " ", startingAt: 0)
                + String(repeating: " ", count: max(12 - b.count, 0)) + b + " "
                + String(repeating: " ", count: max(12 - c.count, 0)) + c
                + String(format: "  %+7.1f%%  ", row.changePercent) + verdict)
        }
        lines.append(String(format: "threshold: %.1f%% worse fails; better is reported, never fails", threshold))
        return lines.joined(separator: "\n")
    }
}

/// Bad input to compare: exit status 2 with the message.
struct CompareError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
