import CKatanaCTF
import Foundation

/// `katana-trace export`: a recording as a file for a timeline viewer, streamed (memory bounded by what is in flight).
public enum Export {
    /// The file format.
    public enum Format: String, CaseIterable, Sendable {
        /// Perfetto's native protobuf trace (`.pftrace`): compact, interned, with nested tracks. Open it at
        /// ui.perfetto.dev.
        case perfetto
        /// Chrome's trace-event JSON: for small traces and tools that want JSON.
        case json
    }

    /// The largest file the export writes unless told otherwise: Perfetto's UI works within the memory a browser
    /// gives a page (2 GB is typical) and a loaded protobuf trace takes 2–4 times its file's size there (Perfetto's
    /// "Visualising large traces"), so 512 MiB is about the most it opens.
    public static let perfettoUILimit = 512 << 20

    /// How far before a window the native reader starts decoding: a side effect still running as the window opens
    /// is shown from the window's edge with its name and parent only if its begin was read.
    static let lookbackSeconds = 1.0

    /// Reads `trace` with `reader` and writes it to `output` in `format`; the file appears only when the export
    /// succeeded.
    ///
    /// `windows` (seconds after the trace's first event, as `analyze --begin/--end`; overlapping ones are merged)
    /// limit what is shown: what they cut is shown to their edges, marked `cut`, with the parents it began under; the
    /// native reader skips the packets that end well before the first. `sizeLimit`: the export ends, and nothing is
    /// written, as soon as its size is projected past it (from the share of the windows, or of the trace, read).
    /// `types`: only dispatches of these types (their names as recorded), under the side effects they run in; no
    /// intervals or transitions.
    public static func run(trace: String, to output: String, format: Format, reader: TraceReader = .auto,
                           progress: Bool = true, windows: [ClosedRange<Double>]? = nil, types: Set<String>? = nil,
                           sizeLimit: Int? = nil)
        throws(TraceToolkitError) -> ExportSummary
    {
        let file = try ExportFile(path: output)
        if let sizeLimit { file.limit = (sizeLimit, { tooLarge(trace, bytes: Double($0), share: 1, limit: sizeLimit) }) }
        let label = progress ? "export" : nil
        let merged = windows.map(merge)
        let nanoseconds = merged?.map { nanosecondsAfterOrigin($0.lowerBound)...nanosecondsAfterOrigin($0.upperBound) }
        let read = Read(trace: trace, reader: reader, progress: label, windows: merged, sizeLimit: sizeLimit, file: file)
        var summary = switch format {
        case .perfetto: try write(read, through: Timeline(sink: PerfettoSink(file: file), windows: nanoseconds, types: types))
        case .json: try write(read, through: Timeline(sink: ChromeJSONSink(file: file), windows: nanoseconds, types: types))
        }
        summary.bytes = file.written
        return summary
    }

    /// Windows sorted, and merged where they overlap or touch.
    public static func merge(_ windows: [ClosedRange<Double>]) -> [ClosedRange<Double>] {
        var merged: [ClosedRange<Double>] = []
        for window in windows.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, window.lowerBound <= last.upperBound {
                merged[merged.count - 1] = last.lowerBound...max(last.upperBound, window.upperBound)
            } else {
                merged.append(window)
            }
        }
        return merged
    }

    /// Seconds as nanoseconds, saturating (an open end is `.infinity`).
    static func nanosecondsAfterOrigin(_ seconds: Double) -> Int64 {
        let value = (seconds * 1e9).rounded()
        if value.isNaN { return 0 }
        return value >= 9.2e18 ? .max : value <= -9.2e18 ? .min : Int64(value)
    }

    private struct Read {
        var trace: String
        var reader: TraceReader
        var progress: String?
        var windows: [ClosedRange<Double>]?
        var sizeLimit: Int?
        var file: ExportFile
    }

    /// Events already in memory, in timestamp order (the in-process flight recorder's window, for KatanaInspector),
    /// written to `output` as a Perfetto file by the same timeline as a recording's export.
    package static func perfetto(events: some Sequence<TraceEvent>, to output: String) throws(TraceToolkitError) -> ExportSummary {
        let file = try ExportFile(path: output)
        var timeline = Timeline(sink: PerfettoSink(file: file))
        for event in events { timeline.take(event) }
        var summary = try timeline.finish(discarded: 0)
        summary.bytes = file.written
        return summary
    }

    private static func write<Sink: TimelineSink>(_ read: Read, through timeline: Timeline<Sink>)
        throws(TraceToolkitError) -> ExportSummary
    {
        var timeline = timeline
        var events = 0
        var refusal: TraceToolkitError?
        let from = read.windows?.first.map { $0.lowerBound - lookbackSeconds }
        let to = read.windows?.last.flatMap { $0.upperBound.isFinite ? $0.upperBound : nil }
        let discarded = try EventStream.read(trace: read.trace, reader: read.reader, progress: read.progress, from: from,
                                             to: to, stop: { refusal != nil }) { event in
            if events == 0 { timeline.origin = EventStream.rangeOrigin() }
            timeline.take(event)
            events += 1
            // Every 1,024 events: the size so far over the share read so far, once that share says something.
            guard let limit = read.sizeLimit, events & 0x3FF == 0, refusal == nil,
                  let share = timeline.shownShare ?? readShare(), share >= 0.01, read.file.written >= min(1 << 22, limit / 8)
            else { return }
            let projected = Double(read.file.written) / share
            if projected > Double(limit) { refusal = tooLarge(read.trace, bytes: projected, share: share, limit: limit) }
        }
        if let refusal { throw refusal }
        var summary = try timeline.finish(discarded: discarded)
        if read.windows != nil, read.reader != .babeltrace2 {
            var bytes: UInt64 = 0
            katana_ctf_skipped(&summary.skippedPackets, &bytes)
        }
        return summary
    }

    /// The share of the trace's event data the native reader has read, packets it skipped left out (nil: unknown,
    /// as when babeltrace2 reads).
    private static func readShare() -> Double? {
        var read: UInt64 = 0, total: UInt64 = 0, skippedPackets: UInt64 = 0, skipped: UInt64 = 0
        katana_ctf_bytes(&read, &total)
        katana_ctf_skipped(&skippedPackets, &skipped)
        guard total > skipped, read > skipped else { return nil }
        return Double(read - skipped) / Double(total - skipped)
    }

    /// The one line that refuses an export past its size limit.
    private static func tooLarge(_ trace: String, bytes: Double, share: Double, limit: Int) -> TraceToolkitError {
        let projected = share < 1 ? " (projected from the first \(max(1, Int(share * 100))) % of it)" : ""
        let why = limit == perfettoUILimit
            ? "about the most Perfetto's UI opens (a browser gives it about 2 GB, and a trace takes 2-4 times its size there)"
            : "the limit asked for"
        return TraceToolkitError(
            "\(trace): the export would be about \(megabytes(bytes))\(projected), past \(megabytes(Double(limit))), \(why): "
                + "export a window (--begin/--end, or --slowest N), or pass --force")
    }

    private static func megabytes(_ bytes: Double) -> String {
        bytes >= 1e9 ? String(format: "%.1f GB", bytes / 1e9)
            : bytes >= 1e6 ? "\(Int((bytes / 1e6).rounded())) MB" : "\(Int((bytes / 1e3).rounded())) kB"
    }
}
