import CKatanaCTF
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One katana event from the native reader, its strings converted to Swift once per distinct string.
public struct TraceEvent: Sendable {
    /// What the event is.
    public enum Role: Sendable, Equatable {
        case enqueue, begin, end, budgetExceeded, intervalBegin, intervalEnd, transitionBegin, transitionEnd
        /// An updater applied inline: one event at its end standing for its enqueue and begin at (end − duration).
        case updaterInline
        case other
    }

    public var role: Role
    /// The LTTng event's name without the provider (`dispatch_begin`, …).
    public var event: String
    public var timestamp: Int64
    /// The dispatch's id, or the interval's or transition's.
    public var id: UInt64
    public var parentID: UInt64?
    /// The dispatched type's name, or the interval's or transition's.
    public var name: String?
    public var kind: String?
    public var queue: String?
    public var outcome: String?
    public var parallelism: Int64?
    public var durationNanoseconds: UInt64
    public var budgetNanoseconds: UInt64
    public var actualNanoseconds: UInt64
    public var vpid: Int64?
    public var vtid: Int64?
    /// The thread's name (LTTng's `procname` context), when recorded.
    public var procname: String?

    /// Whether it is a side effect's event (enqueue, begin or end).
    public var isSideEffect: Bool { kind == "side_effect" }
}

/// Progress on standard error, for a person: events read, their rate and the share of the trace's bytes read, on
/// one line rewritten in place. Only when standard error is a terminal (a log or a pipe gets nothing).
final class ProgressLine {
    private let label: String
    private let started = DispatchTime.now().uptimeNanoseconds
    private var shown = false

    init?(_ label: String) {
        guard isatty(STDERR_FILENO) == 1 else { return nil }
        self.label = label
    }

    func show(events: UInt64) {
        var read: UInt64 = 0, total: UInt64 = 0
        katana_ctf_bytes(&read, &total)
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let rate = seconds > 0 ? Int(Double(events) / seconds) : 0
        let share = total > 0 ? Int(Double(read) * 100 / Double(total)) : 0
        FileHandle.standardError.write(Data("\r\(label): \(events) events, \(rate) events/s, \(share) % of the trace read ".utf8))
        shown = true
    }

    /// Ends the line, if anything was shown.
    func end() {
        if shown { FileHandle.standardError.write(Data("\n".utf8)) }
        shown = false
    }
}

/// Reads a trace's katana events in timestamp order through the package's CTF reader, streaming: nothing is kept but
/// the distinct strings.
public enum EventStream {
    /// Hands every katana event under `trace` to `body`, in timestamp order. Returns the events the tracer discarded.
    /// Throws a ``TraceToolkitError`` naming the place when the trace is damaged. One read per process (the reader
    /// keeps its state in statics). With `progress`, a line on standard error every half million events when it is a
    /// terminal.
    public static func read(
        trace: String, progress label: String? = nil, _ body: (TraceEvent) -> Void
    ) throws(TraceToolkitError) -> UInt64 {
        try withoutActuallyEscaping(body) { (body) throws(TraceToolkitError) -> UInt64 in
            let reading = Reading(body: body, progress: label.flatMap(ProgressLine.init))
            var discarded: UInt64 = 0
            var error = [CChar](repeating: 0, count: 1024)
            let status = withExtendedLifetime(reading) {
                katana_ctf_read(trace, { event, context in
                    Unmanaged<Reading>.fromOpaque(context!).takeUnretainedValue().take(event!.pointee)
                    return 0
                }, Unmanaged.passUnretained(reading).toOpaque(), &discarded, &error, error.count)
            }
            reading.progress?.end()
            guard status == 0 else {
                throw TraceToolkitError(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            return discarded
        }
    }

    /// The state of one read: the consumer, the converted strings, the progress line.
    private final class Reading {
        let body: (TraceEvent) -> Void
        let progress: ProgressLine?
        var events: UInt64 = 0
        /// The reader's strings are interned (one address per distinct string): each is converted once.
        var strings: [UnsafePointer<CChar>: String] = [:]

        init(body: @escaping (TraceEvent) -> Void, progress: ProgressLine?) {
            self.body = body
            self.progress = progress
        }

        func text(_ pointer: UnsafePointer<CChar>?) -> String? {
            guard let pointer else { return nil }
            if let known = strings[pointer] { return known }
            let made = String(cString: pointer)
            strings[pointer] = made
            return made
        }

        static func role(_ raw: Int32) -> TraceEvent.Role {
            switch Int(raw) {
            case Int(KATANA_CTF_ENQUEUE): .enqueue
            case Int(KATANA_CTF_BEGIN): .begin
            case Int(KATANA_CTF_END): .end
            case Int(KATANA_CTF_BUDGET): .budgetExceeded
            case Int(KATANA_CTF_INTERVAL_BEGIN): .intervalBegin
            case Int(KATANA_CTF_INTERVAL_END): .intervalEnd
            case Int(KATANA_CTF_TRANSITION_BEGIN): .transitionBegin
            case Int(KATANA_CTF_TRANSITION_END): .transitionEnd
            case Int(KATANA_CTF_INLINE): .updaterInline
            default: .other
            }
        }

        func take(_ raw: katana_ctf_event) {
            events += 1
            if let progress, events % UInt64(KATANA_CTF_PROGRESS_EVERY) == 0 { progress.show(events: events) }
            body(TraceEvent(
                role: Self.role(raw.role), event: text(raw.event) ?? "?", timestamp: raw.timestamp_ns, id: raw.id,
                parentID: raw.has_parent_id != 0 ? raw.parent_id : nil, name: text(raw.name), kind: text(raw.kind),
                queue: text(raw.queue), outcome: text(raw.outcome),
                parallelism: raw.has_parallelism != 0 ? raw.parallelism : nil, durationNanoseconds: raw.duration_ns,
                budgetNanoseconds: raw.budget_ns, actualNanoseconds: raw.actual_ns,
                vpid: raw.has_vpid != 0 ? raw.vpid : nil, vtid: raw.has_vtid != 0 ? raw.vtid : nil,
                procname: text(raw.procname)))
        }
    }
}
