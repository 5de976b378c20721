import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import KatanaTraceToolkit

typealias TraceExport = KatanaTraceToolkit.Export

/// `katana-trace`: the trace toolkit of Katana for Linux, built by SwiftPM from this package.
@main
struct KatanaTraceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "katana-trace",
        abstract: "Read LTTng recordings of Katana stores: latencies, parallelism, nesting, the longest dispatches.",
        discussion: """
            Traces are read by the package's own CTF reader. A damaged trace ends with one line and status 2. A sound \
            trace using a construct that reader does not know (floating-point fields, several clocks, …) is read by \
            babeltrace2 when it is installed (a note on standard error says so); babeltrace2 is stopped if it prints \
            nothing for KATANA_TRACE_STALL_SECONDS (default 30).
            """,
        version: "katana-trace \(KatanaRelease.version)",
        subcommands: [Record.self, Check.self, Analyze.self, Export.self, Dump.self]
    )

    /// A trace the toolkit cannot read ends with exit status 2 and one line on standard error; bad arguments with
    /// ArgumentParser's usage message (status 64).
    static func main() {
        // A parent may have started this process with signals blocked (a test runner, some service managers), and
        // children inherit the mask: Ctrl-C, `timeout` and `kill` must still end a long read — and with it the
        // babeltrace2 a fallback read runs (`aFallbackReadLeavesNoChildWhenTheToolkitIsKilled`) — and
        // `lttng-sessiond --daemonize`, which `record` may start, waits for SIGUSR1 from its child before it returns
        // (`katanaTraceRecordStopsTheSessionDaemonItStarted` hung on it). So none stays blocked.
        var none = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, nil)
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let exit as StatusExit {
            Foundation.exit(exit.status)
        } catch let refused as Refused {
            FileHandle.standardError.write(Data((refused.description + "\n").utf8))
            Foundation.exit(2)
        } catch {
            exit(withError: error)
        }
    }
}

extension TraceReader: ExpressibleByArgument {}

/// The trace argument and the reader, shared by every command that reads one.
struct TraceSource: ParsableArguments {
    @Argument(help: "The recording: a folder with the trace's metadata and streams (any depth).")
    var trace: String

    @Option(help: """
        auto (the package's reader; babeltrace2 for a sound trace it does not know), native (that reader only) or \
        babeltrace2 (the reference reader only).
        """)
    var reader: TraceReader = .auto
}

/// The part of a recording `export` and `dump` take. `--begin`/`--end` are `analyze`'s (seconds after the trace's
/// first event); `--slowest` takes the dispatches `analyze --top` lists, within `--begin`/`--end` when given.
struct WindowOptions: ParsableArguments {
    @Option(help: "From S seconds after the trace's first event (analyze: the dispatches that began from then).")
    var begin: Double?

    @Option(help: "To S seconds after it (analyze: the dispatches that began until then).")
    var end: Double?

    @Option(help: """
        Around the N longest dispatches (service time; those analyze --top N lists): each from its dispatch call to \
        its end, with --margin before and after, overlapping ones merged.
        """)
    var slowest: Int?

    @Option(help: "The time kept before and after each of --slowest's dispatches (default 1ms; e.g. 500us, 10ms).")
    var margin: String?

    @Option(name: .customLong("type"), help: """
        Only dispatches of this type, its name as recorded (repeat for more): in an export under the side effects \
        they run in; no intervals or transitions.
        """)
    var types: [String] = []

    /// The types asked for, or nil: all.
    var typeSet: Set<String>? { types.isEmpty ? nil : Set(types) }

    func validate() throws {
        for (name, value) in [("--begin", begin), ("--end", end)] {
            if let value, !(value.isFinite && value >= 0) {
                throw ValidationError("\(name) must be a number of seconds, 0 or more")
            }
        }
        if let begin, let end, end < begin { throw ValidationError("--end (\(end)) is before --begin (\(begin))") }
        if let slowest, !(1...100_000).contains(slowest) {
            throw ValidationError("--slowest must be between 1 and 100000, got \(slowest)")
        }
        if let margin {
            guard slowest != nil else { throw ValidationError("--margin applies to --slowest") }
            _ = try Analyze.duration(margin, option: "--margin")
        }
    }

    /// The windows in seconds after the trace's first event, or nil: the whole trace. `--slowest` reads the trace
    /// once more first (an analysis in a child process: the reader reads one trace per process).
    func windows(_ source: TraceSource) throws -> [ClosedRange<Double>]? {
        guard let slowest else {
            if begin == nil && end == nil { return nil }
            return [(begin ?? 0)...(end ?? .infinity)]
        }
        let margin = Double(try margin.map { try Analyze.duration($0, option: "--margin") } ?? 1_000_000) / 1e9
        var arguments = ["analyze", "--json", "--top", "\(slowest)", "--reader", source.reader.rawValue]
        for type in types { arguments += ["--type", type] }
        if let begin { arguments += ["--begin", "\(begin)"] }
        if let end { arguments += ["--end", "\(end)"] }
        let analysis = try Self.runSelf(arguments + [source.trace])
        guard let document = try? JSONSerialization.jsonObject(with: analysis) as? [String: Any],
              let top = document["top"] as? [[String: Any]]
        else { throw Refused(description: "katana-trace: \(source.trace): its analysis gave no list of the longest dispatches") }
        let windows = top.compactMap { entry -> ClosedRange<Double>? in
            guard let began = entry["begin_s"] as? Double, let service = entry["service_ns"] as? Double else { return nil }
            let wait = (entry["queue_wait_ns"] as? Double) ?? 0
            return max(0, began - wait / 1e9 - margin)...(began + service / 1e9 + margin)
        }
        guard !windows.isEmpty else {
            throw Refused(description: "katana-trace: \(source.trace): no dispatch to take --slowest around\(begin != nil || end != nil ? " between --begin and --end" : "")")
        }
        return windows
    }

    /// Runs this executable with `arguments`; its standard output, or its one-line error as ours.
    private static func runSelf(_ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Its output read to the end while it runs (a full pipe would stop it); its standard error is one line.
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let said = errors.fileHandleForReading.readDataToEndOfFile()
        guard process.terminationStatus == 0 else {
            let line = String(decoding: said, as: UTF8.self).split(separator: "\n").last.map(String.init)
            throw Refused(description: line ?? "katana-trace: the analysis for --slowest ended with status \(process.terminationStatus)")
        }
        return data
    }
}

/// Exit status 2 with one line: the trace (or an argument) is the problem.
struct Refused: Error, CustomStringConvertible {
    var description: String
}

struct Analyze: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Per-type latencies, side effects in flight over time, nesting, budget overruns, the longest dispatches.")

    @OptionGroup var source: TraceSource

    @Flag(help: "Print the report as JSON.")
    var json = false

    @Option(help: "List the N longest dispatches (service time) with timestamp, id, type, thread and parent chain.")
    var top: Int?

    /// `--begin`/`--end`, `--slowest`/`--margin` and `--type`, as in export and dump: here they keep the dispatches
    /// that began in the windows.
    @OptionGroup var window: WindowOptions

    @Option(name: .customLong("min-duration"), help: "Keep dispatches whose service took at least D (e.g. 500us, 2ms).")
    var minDuration: String?

    @Flag(help: "Print each type's service-time distribution.")
    var histogram = false

    func validate() throws {
        if let top, !(1...100_000).contains(top) { throw ValidationError("--top must be between 1 and 100000, got \(top)") }
        if let minDuration { _ = try Self.duration(minDuration) }
    }

    /// A duration such as `500us`, `2ms`, `1.5s` or a number of nanoseconds.
    static func duration(_ text: String, option: String = "--min-duration") throws -> Int64 {
        let units: [(String, Double)] = [("ns", 1), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)]
        var number = Substring(text), scale = 1.0
        for (suffix, factor) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            scale = factor
            break
        }
        guard let value = Double(number), value.isFinite, value >= 0, value * scale < 9.2e18 else {
            throw ValidationError("\(option): \(text) is not a duration (e.g. 500us, 2ms, 1.5s)")
        }
        return Int64(value * scale)
    }

    func run() throws {
        var options = AnalysisOptions()
        options.top = top ?? 0
        options.begin = window.begin
        options.end = window.end
        if window.slowest != nil { options.windows = try window.windows(source) }
        options.minDurationNanoseconds = try minDuration.map { try Self.duration($0) } ?? 0
        options.types = window.types
        options.showsProgress = true
        options.reader = source.reader
        do {
            let document = try NativeReader.analyzeJSON(trace: source.trace, options: options)
            if json {
                FileHandle.standardOutput.write(document)
                if document.last != UInt8(ascii: "\n") { print("") }
                return
            }
            let report = try AnalysisReport.decode(document)
            print(report.text(histogram: histogram))
        } catch let error as TraceToolkitError {
            throw Refused(description: "katana-trace: \(error.description)")
        }
    }
}

/// Ends the process with `status` (the recorded command's, for `record`).
struct StatusExit: Error {
    var status: Int32
}

struct Record: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record a command's run in a fresh LTTng session (katana:* with vpid, vtid and procname).",
        discussion: """
            Starts lttng-sessiond if none runs. The session (and trigger) are destroyed on success, failure, Ctrl-C \
            and SIGTERM. Prints the trace's folder; exits with the command's status (2 when recording could not be \
            set up). --snapshot keeps only the last SIZE × N in memory (default 1M × 4) and saves it each time \
            a dispatch goes over its latency budget (StoreConfiguration.latencyBudgets).
            """)

    @Option(name: [.customShort("o"), .long], help: "The trace's folder (must not exist or be empty; default: a new one in $TMPDIR).")
    var output: String?

    @Option(name: .customLong("subbuf-size"), help: "The channel's sub-buffer size (default 8M; 1M with --snapshot).")
    var subbufSize: String?

    @Option(name: .customLong("num-subbuf"), help: "The channel's number of sub-buffers (default 8; 4 with --snapshot).")
    var numSubbuf: Int?

    @Flag(name: .customLong("snapshot"), help: "A snapshot session (LTTng's flight-recorder mode), saved when a dispatch goes over its latency budget.")
    var snapshot = false

    @Argument(parsing: .postTerminator, help: "-- COMMAND [ARGS…]: what to run and record.")
    var command: [String] = []

    func run() throws {
        var options = RecordingOptions()
        options.output = output
        options.subbufferSize = subbufSize
        options.subbufferCount = numSubbuf
        options.snapshot = snapshot
        options.command = command
        throw StatusExit(status: LTTngRecording.record(options))
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Integrity: every dispatch enqueued, begun and ended once, in order; nothing discarded.",
        discussion: "Prints a JSON summary; exits 0 when the trace is whole, 1 when it has problems, 2 when it cannot be read.")

    @OptionGroup var source: TraceSource

    func run() throws {
        let report: IntegrityReport
        do {
            report = try IntegrityCheck.run(trace: source.trace, reader: source.reader)
        } catch {
            throw Refused(description: "katana-trace: \(error.description)")
        }
        if report.discarded > 0 {
            FileHandle.standardError.write(Data("katana-trace: WARNING: \(report.discarded) events were DISCARDED by the tracer\n".utf8))
        }
        print(report.json)
        if !report.problems.isEmpty { throw StatusExit(status: 1) }
    }
}

extension TraceExport.Format: ExpressibleByArgument {}

struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The recording as a file for a timeline viewer: Perfetto's protobuf (default) or Chrome's JSON.",
        discussion: """
            Updaters are slices on the thread that applied them; side effects, queue waits, intervals and navigation \
            transitions are asynchronous slices grouped by type; flows lead from a parent side effect to what it \
            dispatched and from each dispatch call to its begin; a counter shows side effects in flight; budget \
            overruns are instants. Open the file at ui.perfetto.dev. The file appears only when the export succeeded.
            """)

    @OptionGroup var source: TraceSource

    @Option(name: [.customShort("o"), .long], help: "The file to write (e.g. trace.pftrace).")
    var output: String

    @Option(help: "perfetto (protobuf, the default) or json (Chrome's trace-event format, for small traces).")
    var format: TraceExport.Format = .perfetto

    @OptionGroup var window: WindowOptions

    @Option(name: .customLong("max-size"), help: """
        Refuse (status 2, no file) an export projected past SIZE (e.g. 100M, 2G): by default 512M, about the most \
        Perfetto's UI opens.
        """)
    var maxSize: String?

    @Flag(help: "Write the file whatever its size.")
    var force = false

    func validate() throws {
        if let maxSize { _ = try Self.size(maxSize) }
    }

    /// A size such as `512M`, `2G`, `60K` or a number of bytes.
    static func size(_ text: String) throws -> Int {
        let units: [(String, Double)] = [("K", 1024), ("M", 1_048_576), ("G", 1_073_741_824)]
        var number = Substring(text), scale = 1.0
        for (suffix, factor) in units where text.uppercased().hasSuffix(suffix) {
            number = text.dropLast()
            scale = factor
        }
        guard let value = Double(number), value.isFinite, value > 0, value * scale < 9e18 else {
            throw ValidationError("--max-size: \(text) is not a size (e.g. 100M, 2G)")
        }
        return Int(value * scale)
    }

    func run() throws {
        let windows = try window.windows(source)
        let limit = force ? nil : try maxSize.map { try Self.size($0) } ?? TraceExport.perfettoUILimit
        do {
            let summary = try TraceExport.run(trace: source.trace, to: output, format: format, reader: source.reader,
                                              windows: windows, types: window.typeSet, sizeLimit: limit)
            if summary.discarded > 0 {
                FileHandle.standardError.write(Data("katana-trace: WARNING: \(summary.discarded) events were DISCARDED by the tracer\n".utf8))
            }
            let part = windows == nil && window.typeSet == nil
                ? "\(summary.incompleteDispatches) cut by the trace's ends"
                : "\(summary.incompleteDispatches) more shown in part: cut by a window's edges or the trace's ends, or parents shown from their child"
            let skipped = summary.skippedPackets > 0 ? "; \(summary.skippedPackets) packets before the window skipped unread" : ""
            print("\(output): \(summary.dispatches) dispatches (\(part)), \(summary.bytes) bytes\(skipped)")
        } catch {
            throw Refused(description: "katana-trace: \(error.description)")
        }
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The katana events as JSON lines, as recorded (an inline updater is one updater_inline event).",
        discussion: "The last line is a summary: {\"event\": \"_summary\", \"count\": N, \"discarded\": N}.")

    @OptionGroup var source: TraceSource

    @OptionGroup var window: WindowOptions

    func run() throws {
        var lines = DumpLines()
        let windows = try window.windows(source).map(TraceExport.merge)
        var selected = windows == nil && window.typeSet == nil ? nil : DumpLines.Selection(windows: windows, types: window.typeSet)
        do throws(TraceToolkitError) {
            let discarded = try EventStream.read(trace: source.trace, reader: source.reader, progress: "dump", payload: true,
                                                 from: windows?.first?.lowerBound,
                                                 to: windows?.last.flatMap { $0.upperBound.isFinite ? $0.upperBound : nil }) { event in
                if selected != nil, selected?.origin == nil { selected?.origin = EventStream.rangeOrigin() }
                if selected?.takes(event) ?? true { lines.add(event) }
            }
            lines.finish(discarded: discarded)
        } catch {
            lines.flush()
            throw Refused(description: "katana-trace: \(error.description)")
        }
    }
}
