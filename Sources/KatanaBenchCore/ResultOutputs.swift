import ArgumentParser
import Foundation

/// Where `run` and `replay` write a result besides the table: `--json`, `--hgrm`, `--plot`.
struct ResultOutputs: ParsableArguments {
    @Option(help: "Write all figures, parameters and environment as JSON to this file.")
    var json: String?
    @Option(help: "Write HdrHistogram percentile-distribution (.hgrm) files into this directory.")
    var hgrm: String?
    @Option(help: "Write a latency-by-percentile SVG chart to this file.")
    var plot: String?

    /// Fails before anything is measured, not after, when an output cannot be written (the command's `validate`
    /// calls it, where its own order of checks puts it).
    func check() throws {
        for path in [json, plot].compactMap({ $0 }) { try checkWritable(file: path) }
        if let hgrm { try checkWritable(directory: hgrm) }
    }

    /// Prints the table: on standard output, or on standard error with `--json -` (standard output is then the JSON
    /// alone).
    func show(_ table: String) {
        if json == "-" {
            FileHandle.standardError.write(Data((table + "\n").utf8))
        } else {
            print(table)
        }
    }

    /// Writes each output asked for; one line when one cannot be written. `baseline` (for the chart) is read only
    /// when there is a chart to draw.
    func write(_ result: BenchResult, histograms: [Metric: LatencyHistogram], title: String,
               baseline: () throws -> [Metric: LatencyHistogram]? = { nil }, baselineName: String = "") throws {
        do {
            if let json { try Report.writeJSON(result, to: json) }
            if let hgrm { try Report.writeHgrm(histograms, to: hgrm) }
            if let plot {
                let chart = Plot.svg(histograms: histograms, title: title, subtitle: Report.subtitle(result),
                                     baseline: try baseline(), baselineName: baselineName)
                try writeOutput(Data(chart.utf8), to: plot)
            }
        } catch {
            throw ValidationError("could not write the output: \(error.localizedDescription)")
        }
    }
}
