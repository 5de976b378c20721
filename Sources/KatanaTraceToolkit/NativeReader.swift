import CKatanaCTF
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Why a trace could not be turned into a report: one line for the user.
public struct TraceToolkitError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// What `analyze` keeps and lists.
public struct AnalysisOptions: Sendable {
    /// The N longest dispatches to list (0: none).
    public var top = 0
    /// Keep dispatches that began at least this many seconds after the trace's first event.
    public var begin: Double?
    /// Keep dispatches that began at most this many seconds after it.
    public var end: Double?
    /// Keep dispatches whose service took at least this long.
    public var minDurationNanoseconds: Int64 = 0
    /// A descriptor the reader writes a dot to every 20,000 events, or -1.
    public var progressDescriptor: Int32 = -1
    /// Show progress on standard error when it is a terminal.
    public var showsProgress = false
    public init() {}
}

/// The package's own CTF reader (`CKatanaCTF`): decodes what LTTng-UST writes, strictly, and computes the analysis.
public enum NativeReader {
    /// Reads the trace(s) under `trace` and returns the analysis as the reader's JSON document. Throws a
    /// ``TraceToolkitError`` naming the place when the trace is damaged or uses something the reader does not know.
    /// One analysis per process (the reader keeps its state in statics).
    public static func analyzeJSON(trace: String, options: AnalysisOptions) throws(TraceToolkitError) -> Data {
        var given = katana_ctf_options()
        given.top = Int32(clamping: options.top)
        given.has_begin = options.begin == nil ? 0 : 1
        given.begin_s = options.begin ?? 0
        given.has_end = options.end == nil ? 0 : 1
        given.end_s = options.end ?? 0
        given.min_duration_ns = options.minDurationNanoseconds
        given.progress_fd = options.progressDescriptor
        let progress = options.showsProgress ? ProgressLine("analyze") : nil
        if let progress {
            given.progress = { events, context in
                Unmanaged<ProgressLine>.fromOpaque(context!).takeUnretainedValue().show(events: events)
            }
            given.progress_context = Unmanaged.passUnretained(progress).toOpaque()
        }
        var buffer: UnsafeMutablePointer<CChar>?
        var length = 0
        guard let out = open_memstream(&buffer, &length) else { throw TraceToolkitError("cannot allocate the report") }
        var error = [CChar](repeating: 0, count: 1024)
        let status = withExtendedLifetime(progress) { katana_ctf_analyze(trace, &given, out, &error, error.count) }
        progress?.end()
        fclose(out)
        defer { free(buffer) }
        guard status == 0 else {
            throw TraceToolkitError(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        guard let buffer else { throw TraceToolkitError("\(trace): the reader wrote no report") }
        return Data(bytes: buffer, count: length)
    }
}
