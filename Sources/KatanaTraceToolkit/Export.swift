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

    /// Reads `trace` with `reader` and writes it to `output` in `format`; the file appears only when the export
    /// succeeded.
    public static func run(trace: String, to output: String, format: Format, reader: TraceReader = .auto,
                           progress: Bool = true)
        throws(TraceToolkitError) -> ExportSummary
    {
        let file = try ExportFile(path: output)
        let label = progress ? "export" : nil
        var summary = switch format {
        case .perfetto: try write(trace, through: Timeline(sink: PerfettoSink(file: file)), reader: reader, progress: label)
        case .json: try write(trace, through: Timeline(sink: ChromeJSONSink(file: file)), reader: reader, progress: label)
        }
        summary.bytes = file.written
        return summary
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

    private static func write<Sink: TimelineSink>(_ trace: String, through timeline: Timeline<Sink>, reader: TraceReader,
                                                  progress: String?) throws(TraceToolkitError) -> ExportSummary
    {
        var timeline = timeline
        let discarded = try EventStream.read(trace: trace, reader: reader, progress: progress) { timeline.take($0) }
        return try timeline.finish(discarded: discarded)
    }
}
