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

/// Which reader decodes a trace.
public enum TraceReader: String, CaseIterable, Sendable {
    /// The package's reader; a sound trace it does not know (floating-point fields, several clocks, …) is read by
    /// babeltrace2 when it is installed.
    case auto
    /// The package's reader only: a trace it does not know is refused, as a damaged one is.
    case native
    /// babeltrace2 only, the reference reader LTTng's users trust: to check the package's reader against it (the
    /// suite does, `analyzeAgreesWithBabeltrace2`), or when the package's reader is in doubt.
    case babeltrace2
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
    /// Which reader decodes the trace.
    public var reader = TraceReader.auto
    /// Keep only dispatches of these types (their names as recorded), and no intervals or transitions; empty: all.
    public var types: [String] = []
    /// Keep only dispatches that began within one of these windows (seconds after the trace's first event); nil: all.
    public var windows: [ClosedRange<Double>]?
    public init() {}
}

/// The package's own CTF reader (`CKatanaCTF`): decodes what LTTng-UST writes, strictly, and computes the analysis.
/// A trace it declines (a sound construct it does not know) is read by babeltrace2 when installed.
public enum NativeReader {
    static func message(_ error: [CChar]) -> String {
        String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A trace the package's reader declines, with `--reader native`.
    static func declinedError(_ declined: String) -> TraceToolkitError {
        TraceToolkitError("\(declined) (--reader native; --reader auto reads it with babeltrace2)")
    }

    /// The analysis over babeltrace2's events (the native reader declined the trace before any event).
    private static func analyzeWithBabeltrace2(
        trace: String, declined: String?, options: inout katana_ctf_options, out: UnsafeMutablePointer<FILE>,
        error: inout [CChar]
    ) throws(TraceToolkitError) -> Int32 {
        var status = katana_ctf_analysis_begin(trace, &options, &error, error.count)
        guard status == 0 else { return status }
        let discarded = try Babeltrace2Reader.read(trace: trace, declined: declined, progress: nil) { event in
            guard status == 0 else { return }
            status = event.withCEvent { katana_ctf_analysis_add($0, &error, error.count) }
        }
        guard status == 0 else { return status }
        return katana_ctf_analysis_end(discarded, out, &error, error.count)
    }

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
        // The reader copies the names as it takes the options.
        let types = options.types.map { UnsafePointer(strdup($0)) }
        defer { for type in types { free(UnsafeMutablePointer(mutating: type)) } }
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
        let bounds = (options.windows ?? []).flatMap { [$0.lowerBound, $0.upperBound] }
        return try types.withUnsafeBufferPointer { (names) throws(TraceToolkitError) -> Data in
          try bounds.withUnsafeBufferPointer { (bounds) throws(TraceToolkitError) -> Data in
            given.types = names.isEmpty ? nil : UnsafePointer(names.baseAddress)
            given.type_count = Int32(names.count)
            given.windows = bounds.isEmpty ? nil : bounds.baseAddress
            given.window_count = Int32(bounds.count / 2)
            var error = [CChar](repeating: 0, count: 1024)
            var status: Int32
            if options.reader == .babeltrace2 {
                status = try analyzeWithBabeltrace2(trace: trace, declined: nil, options: &given, out: out, error: &error)
            } else {
                status = withExtendedLifetime(progress) { katana_ctf_analyze(trace, &given, out, &error, error.count) }
                progress?.end()
            }
            if status == 4 {
                // Declined before any event: babeltrace2 reads the trace, the same analysis runs over its events.
                let declined = Self.message(error)
                guard options.reader == .auto else { fclose(out); free(buffer); throw Self.declinedError(declined) }
                rewind(out)
                status = try analyzeWithBabeltrace2(trace: trace, declined: declined, options: &given, out: out, error: &error)
            }
            fclose(out)
            defer { free(buffer) }
            guard status == 0 else { throw TraceToolkitError(Self.message(error)) }
            guard let buffer else { throw TraceToolkitError("\(trace): the reader wrote no report") }
            return Data(bytes: buffer, count: length)
          }
        }
    }
}

extension TraceEvent {
    /// The event as the C reader's struct, its strings valid during `body`.
    func withCEvent<R>(_ body: (UnsafePointer<katana_ctf_event>) -> R) -> R {
        var raw = katana_ctf_event()
        raw.role = role.ctf
        raw.timestamp_ns = timestamp
        raw.id = id
        raw.parent_id = parentID ?? 0
        raw.has_parent_id = parentID == nil ? 0 : 1
        raw.parallelism = parallelism ?? 0
        raw.has_parallelism = parallelism == nil ? 0 : 1
        raw.duration_ns = durationNanoseconds
        raw.budget_ns = budgetNanoseconds
        raw.actual_ns = actualNanoseconds
        raw.vpid = vpid ?? 0
        raw.has_vpid = vpid == nil ? 0 : 1
        raw.vtid = vtid ?? 0
        raw.has_vtid = vtid == nil ? 0 : 1
        // The strings, NUL-terminated, in one buffer the struct points into.
        var texts: [CChar] = []
        let offsets = [event, name, kind, queue, outcome, procname].map { text -> Int? in
            guard let text else { return nil }
            defer { texts += text.utf8CString }
            return texts.count
        }
        return texts.withUnsafeBufferPointer { buffer in
            let at = offsets.map { offset in offset.map { UnsafePointer(buffer.baseAddress! + $0) } }
            (raw.event, raw.name, raw.kind, raw.queue, raw.outcome, raw.procname) = (at[0], at[1], at[2], at[3], at[4], at[5])
            return withUnsafePointer(to: &raw, body)
        }
    }
}
