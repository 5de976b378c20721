#if canImport(Glibc)
import Glibc
#endif

/// `katana-trace dump`: each katana event as one JSON object on a line, keys sorted, fields as recorded, written to
/// standard output as they are read.
public struct DumpLines {
    private let out = TextBuffer()
    private var count = 0
    /// The fixed keys' `"key": ` and the separators, in raw memory (read millions of times: no reference counting).
    private let keyStore = RawBytes()
    private var keyTable: UnsafeMutablePointer<UInt8> { keyStore.base }
    private var keyRanges: [(start: Int, length: Int)] = []
    private let separatorAt: Int, lineEndAt: Int

    public init() {
        var table: [UInt8] = []
        for key in Self.keys {
            let literal = Self.keyLiteral(key)
            keyRanges.append((table.count, literal.count))
            table += literal
        }
        separatorAt = table.count
        table += Array(", ".utf8)
        lineEndAt = table.count
        table += Array("}\n".utf8)
        keyStore.set(table)
    }

    /// The fixed keys, in the sorted order a line has them; a payload field goes where its name sorts among them.
    private static let keys = ["actual_ns", "budget_ns", "duration_ns", "event", "id", "interval_id", "kind", "name",
                               "outcome", "parallelism", "parent_id", "procname", "queue", "transition_id", "ts", "vpid",
                               "vtid"]

    /// `"key": `
    private static func keyLiteral(_ key: String) -> [UInt8] { [UInt8](jsonString: key) + Array(": ".utf8) }

    /// The reader's strings as JSON literals, by their id (dense): each is escaped once.
    private var literals: [[UInt8]?] = []
    /// Event names as JSON literals (few).
    private var eventLiterals: [String: [UInt8]] = [:]
    /// Payload field names seen: where each goes among the fixed keys (its index, or `keys.count` after them all),
    /// and its `"name": ` bytes.
    private var payloadKeys: [(name: String, position: Int, bytes: [UInt8])] = []
    private var first = true

    private mutating func literal(_ id: UInt32, _ text: String) {
        let index = Int(id)
        guard index > 0 else { return out.append([UInt8](jsonString: text)) }
        if index < literals.count, let known = literals[index] { return out.append(known) }
        if index >= literals.count { literals += Array(repeating: nil, count: max(index + 1 - literals.count, 64)) }
        let bytes = [UInt8](jsonString: text)
        literals[index] = bytes
        out.append(bytes)
    }

    private mutating func eventLiteral(_ text: String) {
        if let known = eventLiterals[text] { return out.append(known) }
        let bytes = [UInt8](jsonString: text)
        eventLiterals[text] = bytes
        out.append(bytes)
    }

    private mutating func payloadKey(_ name: String) -> (position: Int, bytes: [UInt8]) {
        if let known = payloadKeys.first(where: { $0.name == name }) { return (known.position, known.bytes) }
        let position = Self.keys.firstIndex { $0 >= name } ?? Self.keys.count
        let bytes = Self.keyLiteral(name)
        payloadKeys.append((name, position, bytes))
        return (position, bytes)
    }

    private mutating func separate() {
        if !first { out.append(keyTable + separatorAt, count: 2) }
        first = false
    }

    /// A line's payload fields still to write, in order, with where each goes.
    private typealias Pending = [(position: Int, bytes: [UInt8], value: TraceEvent.PayloadField.Value)]
    private var pending: Pending = []

    /// Writes the payload fields that sort before fixed key `index` (all that are left: `keys.count`), then the key.
    private mutating func key(_ index: Int, _ next: inout Int) {
        while next < pending.count && pending[next].position <= index {
            separate()
            out.append(pending[next].bytes)
            switch pending[next].value {
            case .signed(let value): out.append(value)
            case .unsigned(let value): out.append(value)
            case .text(let text): out.append([UInt8](jsonString: text))  // rare: payload strings
            }
            next += 1
        }
        guard index < keyRanges.count else { return }
        separate()
        let range = keyRanges[index]
        out.append(keyTable + range.start, count: range.length)
    }

    /// Writes one event's line: keys in sorted order, so that a line is the same whatever produced it.
    public mutating func add(_ event: TraceEvent) {
        count += 1
        first = true
        // The payload fields no property holds (a name a property has already is skipped), in name order. (One
        // buffer for every line: no allocation per line.)
        pending.removeAll(keepingCapacity: true)
        if !event.payload.isEmpty {
            for field in event.payload {
                let (position, bytes) = payloadKey(field.name)
                if position < Self.keys.count && Self.keys[position] == field.name { continue }
                pending.append((position, bytes, field.value))
            }
            pending.sort { $0.bytes.lexicographicallyPrecedes($1.bytes) }
        }
        var next = 0
        let isDispatch = [.enqueue, .begin, .end, .budgetExceeded, .updaterInline].contains(event.role)
        out.append(UInt8(ascii: "{"))
        if event.role == .budgetExceeded {
            key(0, &next); out.append(event.actualNanoseconds)
            key(1, &next); out.append(event.budgetNanoseconds)
        }
        if event.role == .updaterInline { key(2, &next); out.append(event.durationNanoseconds) }
        key(3, &next); eventLiteral(event.event)
        if isDispatch { key(4, &next); out.append(event.id) }
        if event.role == .intervalBegin || event.role == .intervalEnd { key(5, &next); out.append(event.id) }
        if let kind = event.kind, event.role != .updaterInline { key(6, &next); literal(event.kindID, kind) }
        if let name = event.name { key(7, &next); literal(event.nameID, name) }
        if let outcome = event.outcome { key(8, &next); literal(event.outcomeID, outcome) }
        if let parallelism = event.parallelism { key(9, &next); out.append(parallelism) }
        if let parent = event.parentID { key(10, &next); out.append(parent) }
        if let procname = event.procname { key(11, &next); literal(event.procnameID, procname) }
        if let queue = event.queue { key(12, &next); literal(event.queueID, queue) }
        if event.role == .transitionBegin || event.role == .transitionEnd { key(13, &next); out.append(event.id) }
        key(14, &next); out.append(event.timestamp)
        if let vpid = event.vpid { key(15, &next); out.append(vpid) }
        if let vtid = event.vtid { key(16, &next); out.append(vtid) }
        key(keyRanges.count, &next)
        out.append(keyTable + lineEndAt, count: 2)
        if out.count >= 1 << 16 { flush() }
    }

    /// Which events a dump with windows or types keeps: those within a window (an inline updater's whole run
    /// overlapping one), and of a dispatch of one of the types (no other event then).
    public struct Selection {
        private var windows: [ClosedRange<Int64>]?
        private var types: Set<String>?
        /// The trace's first event's time: given (`EventStream.rangeOrigin()`), else the first event's.
        public var origin: Int64?

        /// `windows`: seconds after the trace's first event, ascending and disjoint (nil: all of it); `types`: the
        /// dispatched types' names (nil: all).
        public init(windows: [ClosedRange<Double>]?, types: Set<String>? = nil) {
            self.windows = windows?.map { Export.nanosecondsAfterOrigin($0.lowerBound)...Export.nanosecondsAfterOrigin($0.upperBound) }
            self.types = types
        }

        /// Whether the dump shows `event` (called for each event, in order).
        public mutating func takes(_ event: TraceEvent) -> Bool {
            if let types {
                let dispatch: Set<TraceEvent.Role> = [.enqueue, .begin, .end, .updaterInline, .budgetExceeded]
                guard dispatch.contains(event.role), let name = event.name, types.contains(name) else { return false }
            }
            guard let windows else { return true }
            let starts = event.begins
            let origin = self.origin ?? starts  // the first event's (as the windows' origin is)
            self.origin = origin
            let from = starts.subtractingReportingOverflow(origin), to = event.timestamp.subtractingReportingOverflow(origin)
            guard !from.overflow, !to.overflow else { return false }
            return windows.contains { $0.lowerBound <= to.partialValue && from.partialValue <= $0.upperBound }
        }
    }

    /// Writes the summary line and flushes.
    public mutating func finish(discarded: UInt64) {
        out.append(Array("{\"count\": \(count), \"discarded\": \(discarded), \"event\": \"_summary\"}\n".utf8))
        flush()
    }

    /// Writes what is buffered to standard output.
    public mutating func flush() { out.drain(to: STDOUT_FILENO) }
}

/// Bytes in raw memory, freed with their owner.
private final class RawBytes {
    private(set) var base = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)

    func set(_ bytes: [UInt8]) {
        base.deallocate()
        base = .allocate(capacity: bytes.count)
        base.initialize(from: bytes, count: bytes.count)
    }

    deinit { base.deallocate() }
}

extension [UInt8] {
    /// `text` as a JSON string literal.
    init(jsonString text: String) {
        self = []
        appendJSONString(text)
    }

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
