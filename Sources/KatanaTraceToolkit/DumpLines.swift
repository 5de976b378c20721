#if canImport(Glibc)
import Glibc
#endif

/// `katana-trace dump`: each katana event as one JSON object on a line, keys sorted, fields as recorded, written to
/// standard output as they are read.
public struct DumpLines {
    private var out: [UInt8] = []
    private var count = 0

    public init() { out.reserveCapacity(1 << 16) }

    private mutating func text(_ value: String) { out.appendJSONString(value) }

    private enum Value {
        case number(String), text(String)
    }

    /// Writes one event's line.
    public mutating func add(_ event: TraceEvent) {
        count += 1
        let isDispatch = [.enqueue, .begin, .end, .budgetExceeded, .updaterInline].contains(event.role)
        // Keys in sorted order, so that a line is the same whatever produced it.
        var fields: [(String, Value)] = []
        if event.role == .budgetExceeded {
            fields.append(("actual_ns", .number(String(event.actualNanoseconds))))
            fields.append(("budget_ns", .number(String(event.budgetNanoseconds))))
        }
        if event.role == .updaterInline { fields.append(("duration_ns", .number(String(event.durationNanoseconds)))) }
        fields.append(("event", .text(event.event)))
        if isDispatch { fields.append(("id", .number(String(event.id)))) }
        if event.role == .intervalBegin || event.role == .intervalEnd { fields.append(("interval_id", .number(String(event.id)))) }
        if let kind = event.kind, event.role != .updaterInline { fields.append(("kind", .text(kind))) }
        if let name = event.name { fields.append(("name", .text(name))) }
        if let outcome = event.outcome { fields.append(("outcome", .text(outcome))) }
        if let parallelism = event.parallelism { fields.append(("parallelism", .number(String(parallelism)))) }
        if let parent = event.parentID { fields.append(("parent_id", .number(String(parent)))) }
        if let procname = event.procname { fields.append(("procname", .text(procname))) }
        if let queue = event.queue { fields.append(("queue", .text(queue))) }
        if event.role == .transitionBegin || event.role == .transitionEnd {
            fields.append(("transition_id", .number(String(event.id))))
        }
        fields.append(("ts", .number(String(event.timestamp))))
        if let vpid = event.vpid { fields.append(("vpid", .number(String(vpid)))) }
        if let vtid = event.vtid { fields.append(("vtid", .number(String(vtid)))) }
        out.append(UInt8(ascii: "{"))
        for (index, (key, value)) in fields.enumerated() {
            if index > 0 { out.append(contentsOf: Array(", ".utf8)) }
            text(key)
            out.append(contentsOf: Array(": ".utf8))
            switch value {
            case let .number(digits): out.append(contentsOf: Array(digits.utf8))
            case let .text(string): text(string)
            }
        }
        out.append(contentsOf: Array("}\n".utf8))
        if out.count >= 1 << 16 { flush() }
    }

    /// Writes the summary line and flushes.
    public mutating func finish(discarded: UInt64) {
        out.append(contentsOf: Array("{\"count\": \(count), \"discarded\": \(discarded), \"event\": \"_summary\"}\n".utf8))
        flush()
    }

    /// Writes what is buffered to standard output.
    public mutating func flush() {
        out.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(STDOUT_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break }  // a closed pipe: nothing more can be written
                offset += written
            }
        }
        out.removeAll(keepingCapacity: true)
    }
}

extension [UInt8] {
    /// Appends `text` as a JSON string literal: quotes, backslashes and control characters escaped.
    mutating func appendJSONString(_ text: String) {
        let hex = Array("0123456789abcdef".utf8)
        append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                append(UInt8(ascii: "\\"))
                append(byte)
            case 0..<0x20:
                append(contentsOf: Array("\\u00".utf8))
                append(hex[Int(byte >> 4)])
                append(hex[Int(byte & 15)])
            default:
                append(byte)
            }
        }
        append(UInt8(ascii: "\""))
    }
}
