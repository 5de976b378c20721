import ArgumentParser
import Foundation

/// Merges results of the same scenario and parameters into one: the repetitions of all, and every metric
/// re-percentiled from the sum of their encoded histograms.
struct Merge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Merge katana-bench --json results of one scenario into one (repetitions kept, histograms summed and re-percentiled).")

    @Argument(help: "Results to merge (--json of runs with the same scenario and parameters).")
    var inputs: [String]
    @Option(name: [.short, .customLong("output")], help: "Where to write the merged result ('-': standard output).")
    var output: String
    @Flag(help: "Merge results measured with different parameters (the first result's parameters are kept).")
    var allowDifferentParameters = false

    func validate() throws {
        guard inputs.count >= 2 else { throw ValidationError("merge needs at least two results (got \(inputs.count))") }
        try checkWritable(file: output)
    }

    func run() throws {
        let merged: BenchResult
        do {
            merged = try Merge.merge(inputs.map { ($0, try Compare.load($0)) }, allowDifferentParameters: allowDifferentParameters)
        } catch let error as CompareError {
            FileHandle.standardError.write(Data("katana-bench merge: \(error)\n".utf8))
            throw ExitCode(2)
        }
        if output == "-" {
            FileHandle.standardError.write(Data((Report.table(merged) + "\n").utf8))
        } else {
            print(Report.table(merged))
        }
        do {
            try Report.writeJSON(merged, to: output)
        } catch {
            throw ValidationError("could not write \(output): \(error.localizedDescription)")
        }
    }

    static func merge(_ results: [(path: String, result: BenchResult)], allowDifferentParameters: Bool) throws -> BenchResult {
        let (firstPath, first) = results[0]
        var histograms: [String: LatencyHistogram] = [:]
        for (path, result) in results {
            guard result.scenario == first.scenario else {
                throw CompareError("\(path) is a \(result.scenario) run and \(firstPath) a \(first.scenario) run: merge like with like")
            }
            let different = Compare.differences(first, result)
            if !different.isEmpty, !allowDifferentParameters {
                throw CompareError("\(path) was measured with different parameters than \(firstPath) (\(different.joined(separator: ", "))); pass --allow-different-parameters to merge anyway")
            }
            let decoded: [String: LatencyHistogram]?
            do {
                decoded = try result.decodedHistograms()
            } catch {
                throw CompareError("\(path): \(error)")
            }
            guard let decoded else {
                throw CompareError("\(path) carries no encoded histograms (a katana-bench/1 result): its percentiles cannot be merged")
            }
            for (metric, histogram) in decoded { histograms[metric, default: makeHistogram()].add(histogram) }
        }
        var merged = BenchResult.combining(results.map(\.result), repetitions: results.flatMap(\.result.samples),
                                           histograms: histograms)
        merged.context = BenchResult.Context.current()
        return merged
    }
}
