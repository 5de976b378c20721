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

    /// What the event is.
    public var role: Role
    /// The LTTng event's name without the provider (`dispatch_begin`, …).
    public var event: String
    /// When, in nanoseconds of the trace's clock (LTTng-UST's: CLOCK_MONOTONIC).
    public var timestamp: Int64
    /// The dispatch's id, or the interval's or transition's.
    public var id: UInt64
    /// The side effect that dispatched it (0: none), on the events that carry it.
    public var parentID: UInt64?
    /// The dispatched type's name, or the interval's or transition's.
    public var name: String?
    /// `state_updater` or `side_effect`, on a dispatch's events.
    public var kind: String?
    /// Where it runs (`updater_inline`, `updater_queue`, `side_effect_pool`), on enqueue, begin and end.
    public var queue: String?
    /// How it ended (`ok`, `error`, `cancelled`, …), on ends.
    public var outcome: String?
    /// Side effects in flight when it began, on begins.
    public var parallelism: Int64?
    /// An inline updater's service time.
    public var durationNanoseconds: UInt64
    /// A budget overrun's budget.
    public var budgetNanoseconds: UInt64
    /// A budget overrun's measured time.
    public var actualNanoseconds: UInt64
    /// The recording process (LTTng's `vpid` context), when recorded.
    public var vpid: Int64?
    /// The recording thread (LTTng's `vtid` context), when recorded.
    public var vtid: Int64?
    /// The thread's name (LTTng's `procname` context), when recorded.
    public var procname: String?
    /// The ids of `name`, `queue` and `outcome` in the reader's string table (0: absent): equal strings have equal
    /// ids, so consumers key on these instead of hashing the text. Dense and small.
    public var nameID: UInt32 = 0
    public var queueID: UInt32 = 0
    public var outcomeID: UInt32 = 0
    /// The id of `kind` (an inline updater's is `state_updater`'s).
    public var kindID: UInt32 = 0
    /// The id of `procname`.
    public var procnameID: UInt32 = 0

    /// A payload field this type has no property for (`queue_depth`, `store_id`, `state_type`, …).
    public struct PayloadField: Sendable, Equatable {
        /// An integer (signed or not, as the field is declared), or text: a string, or an enum's label.
        public enum Value: Sendable, Equatable {
            case signed(Int64), unsigned(UInt64), text(String)
        }

        /// The field's name, without TSDL's leading underscore.
        public var name: String
        /// What the event carried.
        public var value: Value
    }

    /// The event's other payload fields, in their declared order — only when the read asked for them.
    public var payload: [PayloadField] = []

    /// A field the event's role needs that the trace's metadata does not declare for it (renamed, or left out): the
    /// trace is valid CTF, so a read that asks for the payload (`dump`) gets the event as it is, with that field
    /// absent; any other read refuses the trace, naming the field.
    public var missingField: String?

    /// When what the event stands for began: an inline updater's event is at its end, its duration before it; any
    /// other event at its own time.
    var begins: Int64 {
        let duration = role == .updaterInline ? Int64(clamping: durationNanoseconds) : 0
        return timestamp >= duration ? timestamp - duration : 0
    }

    /// Whether it is a side effect's event (enqueue, begin or end).
    public var isSideEffect: Bool { kind == "side_effect" }

    /// An event; one made in memory (not read from a trace) leaves the string ids 0: its strings are keyed by their text.
    package init(role: Role, event: String, timestamp: Int64, id: UInt64, parentID: UInt64?, name: String?,
                 kind: String?, queue: String?, outcome: String?, parallelism: Int64?, durationNanoseconds: UInt64,
                 budgetNanoseconds: UInt64, actualNanoseconds: UInt64, vpid: Int64?, vtid: Int64?, procname: String?,
                 nameID: UInt32 = 0, queueID: UInt32 = 0, outcomeID: UInt32 = 0, kindID: UInt32 = 0, procnameID: UInt32 = 0) {
        (self.role, self.event, self.timestamp, self.id, self.parentID, self.name) = (role, event, timestamp, id, parentID, name)
        (self.kind, self.queue, self.outcome, self.parallelism) = (kind, queue, outcome, parallelism)
        (self.durationNanoseconds, self.budgetNanoseconds, self.actualNanoseconds) = (durationNanoseconds, budgetNanoseconds, actualNanoseconds)
        (self.vpid, self.vtid, self.procname) = (vpid, vtid, procname)
        (self.nameID, self.queueID, self.outcomeID, self.kindID, self.procnameID) = (nameID, queueID, outcomeID, kindID, procnameID)
    }
}

extension TraceEvent.Role {
    /// The C reader's roles (`KATANA_CTF_OTHER` … `KATANA_CTF_INLINE`, in that order), one table both ways.
    private static let byCTF: [TraceEvent.Role] = [
        .other, .enqueue, .begin, .end, .budgetExceeded, .intervalBegin, .intervalEnd, .transitionBegin,
        .transitionEnd, .updaterInline,
    ]

    init(ctf raw: Int32) {
        self = Self.byCTF.indices.contains(Int(raw)) ? Self.byCTF[Int(raw)] : .other
    }

    /// The role's `KATANA_CTF_*` value.
    var ctf: Int32 { Int32(Self.byCTF.firstIndex(of: self) ?? 0) }
}

/// Progress on standard error, for a person: events read, their rate and the share of the trace's bytes read, on
/// one line rewritten in place. Only when standard error is a terminal (a log or a pipe gets nothing).
final class ProgressLine {
    private let label: String
    private let showsShare: Bool
    private let started = DispatchTime.now().uptimeNanoseconds
    private var shown = false

    /// `showsShare`: whether the native reader's byte counts apply (not when babeltrace2 reads).
    init?(_ label: String, showsShare: Bool = true) {
        guard isatty(STDERR_FILENO) == 1 else { return nil }
        self.label = label
        self.showsShare = showsShare
    }

    func show(events: UInt64) {
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        let rate = seconds > 0 ? Int(Double(events) / seconds) : 0
        var line = "\r\(label): \(events) events, \(rate) events/s"
        if showsShare {
            var read: UInt64 = 0, total: UInt64 = 0
            katana_ctf_bytes(&read, &total)
            line += ", \(total > 0 ? Int(Double(read) * 100 / Double(total)) : 0) % of the trace read"
        }
        FileHandle.standardError.write(Data((line + " ").utf8))
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
    /// terminal. A trace the native reader declines (a sound construct it does not know) is read by babeltrace2
    /// when it is installed (a note on standard error says so), else the error says what to install; `reader` chooses
    /// one reader instead.
    ///
    /// `from` and `to` (seconds after the trace's first event) let the native reader skip what lies outside them:
    /// packets that end before `from` are not decoded, and the read ends after `to`. Events outside may still come
    /// (a packet reaching into the range brings its earlier events): `body` filters. The read ends early (without
    /// an error) once `stop`, asked after each event, says so.
    public static func read(
        trace: String, reader: TraceReader = .auto, progress label: String? = nil, payload: Bool = false,
        from: Double? = nil, to: Double? = nil, stop: (() -> Bool)? = nil, _ body: (TraceEvent) -> Void
    ) throws(TraceToolkitError) -> UInt64 {
        if reader == .babeltrace2 {
            return try Babeltrace2Reader.read(trace: trace, declined: nil, progress: label, payload: payload, stop: stop, body)
        }
        return try withoutActuallyEscaping(body) { (body) throws(TraceToolkitError) -> UInt64 in
          try withoutActuallyEscaping(stop ?? { false }) { (stop) throws(TraceToolkitError) -> UInt64 in
            let reading = Reading(trace: trace, body: body, progress: label.flatMap { ProgressLine($0) }, payload: payload,
                                  stop: stop)
            var discarded: UInt64 = 0
            var error = [CChar](repeating: 0, count: 1024)
            katana_ctf_set_range(from == nil ? 0 : 1, from ?? 0, to == nil ? 0 : 1, to ?? 0)
            let status = withExtendedLifetime(reading) {
                katana_ctf_read(trace, { event, context in
                    Unmanaged<Reading>.fromOpaque(context!).takeUnretainedValue().take(event!.pointee) ? 0 : 1
                }, Unmanaged.passUnretained(reading).toOpaque(), &discarded, &error, error.count)
            }
            reading.progress?.end()
            if let refused = reading.refused { throw refused }
            let message = NativeReader.message(error)
            if status == 4 {
                guard reader == .auto else { throw NativeReader.declinedError(message) }
                return try Babeltrace2Reader.read(trace: trace, declined: message, progress: label, payload: payload,
                                                  stop: stop, body)
            }
            guard status == 0 else { throw TraceToolkitError(message) }
            return discarded
          }
        }
    }

    /// The trace's first event's time (an inline updater's beginning) during a native read given `from` or `to`, which
    /// does not hand on what comes before `from`; nil otherwise (the first event handed on is the first).
    public static func rangeOrigin() -> Int64? {
        var origin: Int64 = 0
        return katana_ctf_origin(&origin) != 0 ? origin : nil
    }

    /// The state of one read: the consumer, the converted strings, the progress line.
    private final class Reading {
        let trace: String
        let body: (TraceEvent) -> Void
        let stop: () -> Bool
        let progress: ProgressLine?
        let payload: Bool
        var events: UInt64 = 0
        /// Why the read stopped: an event that lacks a field its role needs, in a read that does not take the payload.
        var refused: TraceToolkitError?
        /// The reader's strings by their id (dense, small): each is converted once.
        var strings: [String?] = []
        /// Field names and texts of the payload by their address (the reader keeps them for good).
        var texts: [UnsafePointer<CChar>: String] = [:]

        init(trace: String, body: @escaping (TraceEvent) -> Void, progress: ProgressLine?, payload: Bool,
             stop: @escaping () -> Bool) {
            self.trace = trace
            self.body = body
            self.stop = stop
            self.progress = progress
            self.payload = payload
        }

        func text(_ pointer: UnsafePointer<CChar>) -> String {
            if let known = texts[pointer] { return known }
            let made = String(cString: pointer)
            texts[pointer] = made
            return made
        }

        func text(_ id: UInt32, _ pointer: UnsafePointer<CChar>?) -> String? {
            guard id != 0, let pointer else { return nil }
            let index = Int(id)
            if index < strings.count, let known = strings[index] { return known }
            if index >= strings.count { strings += Array(repeating: nil, count: max(index + 1 - strings.count, 64)) }
            let made = String(cString: pointer)
            strings[index] = made
            return made
        }

        static func role(_ raw: Int32) -> TraceEvent.Role { TraceEvent.Role(ctf: raw) }

        /// Hands the event on; false (stop reading) for an event lacking a field its role needs, unless the read
        /// takes the payload (a dump shows such events as they are).
        func take(_ raw: katana_ctf_event) -> Bool {
            if let missing = raw.missing, !payload {
                refused = TraceToolkitError("\(trace): event katana:\(String(cString: raw.event)) has no field '\(String(cString: missing))'")
                return false
            }
            events += 1
            if let progress, events % UInt64(KATANA_CTF_PROGRESS_EVERY) == 0 { progress.show(events: events) }
            var event = TraceEvent(
                role: Self.role(raw.role), event: text(raw.event_id, raw.event) ?? "?", timestamp: raw.timestamp_ns,
                id: raw.id, parentID: raw.has_parent_id != 0 ? raw.parent_id : nil, name: text(raw.name_id, raw.name),
                kind: text(raw.kind_id, raw.kind), queue: text(raw.queue_id, raw.queue),
                outcome: text(raw.outcome_id, raw.outcome),
                parallelism: raw.has_parallelism != 0 ? raw.parallelism : nil, durationNanoseconds: raw.duration_ns,
                budgetNanoseconds: raw.budget_ns, actualNanoseconds: raw.actual_ns,
                vpid: raw.has_vpid != 0 ? raw.vpid : nil, vtid: raw.has_vtid != 0 ? raw.vtid : nil,
                procname: text(raw.procname_id, raw.procname),
                nameID: raw.name_id, queueID: raw.queue_id, outcomeID: raw.outcome_id, kindID: raw.kind_id,
                procnameID: raw.procname_id)
            if payload, raw.extra_count > 0, let extra = raw.extra {
                event.payload = (0..<Int(raw.extra_count)).map { index in
                    let field = extra[index]
                    let value: TraceEvent.PayloadField.Value = if field.is_text != 0, let text = field.text {
                        .text(self.text(text))
                    } else if field.is_signed != 0 {
                        .signed(Int64(bitPattern: field.value))
                    } else {
                        .unsigned(field.value)
                    }
                    return TraceEvent.PayloadField(name: self.text(field.name), value: value)
                }
            }
            if let missing = raw.missing { event.missingField = String(cString: missing) }
            body(event)
            return !stop()
        }
    }
}
