import Foundation
import Katana

/// A dispatch log as read: its header, its whole items in order, how it ended, and what was damaged.
public struct DispatchLog: Sendable {
    /// The first line: the state's type, when recording started, the initial state.
    public var header: DispatchLogHeader
    /// The whole items, in the order they were logged.
    public var entries: [DispatchLogEntry]
    /// The state as logged now and then (``DispatchLogRecorder``'s `checkpointEvery`), in order.
    public var checkpoints: [Checkpoint] = []
    /// How the log ended: complete, cut, or without an end line.
    public var end: DispatchLogEnd
    /// Set when part of the log could not be read: the items up to the damage are in `entries`, nothing after it.
    public var damage: Damage?

    /// The state after every item up to `afterSequence` (and none after it), as JSON.
    public struct Checkpoint: Sendable, Equatable {
        /// The last item the state includes.
        public var afterSequence: UInt64
        /// The state, as JSON.
        public var state: Data
        /// The log's line it came from (1-based), for messages.
        public var line: Int
        /// A checkpoint.
        public init(afterSequence: UInt64, state: Data, line: Int) {
            self.afterSequence = afterSequence
            self.state = state
            self.line = line
        }
    }

    /// What was left out, and where it started.
    public struct Damage: Sendable, Equatable, CustomStringConvertible {
        /// The first line that could not be read (1-based).
        public var line: Int
        /// Why.
        public var reason: String
        /// Lines and bytes from there to the end of the file, none of which were read.
        public var droppedLines: Int
        /// Bytes from the damaged line to the end of the file.
        public var droppedBytes: Int

        /// A description of damage.
        public init(line: Int, reason: String, droppedLines: Int, droppedBytes: Int) {
            self.line = line
            self.reason = reason
            self.droppedLines = droppedLines
            self.droppedBytes = droppedBytes
        }

        public var description: String {
            "line \(line): \(reason); \(droppedLines) line\(droppedLines == 1 ? "" : "s") (\(droppedBytes) bytes) from there on left out"
        }
    }
}

/// Reads dispatch logs (``DispatchLogFormat``): a log cut short or damaged gives what is whole before the damage and
/// says how much was left out; a log of a newer format is refused, naming both versions.
public enum DispatchLogReader {
    /// Reads the log at `path`; a one-line error when it cannot be read, is no dispatch log or is of a newer format.
    public static func read(_ path: String) throws(DispatchLogError) -> DispatchLog {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DispatchLogError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        return try read(data, name: path)
    }

    /// Reads a log from its bytes; `name` is for messages.
    public static func read(_ data: Data, name: String) throws(DispatchLogError) -> DispatchLog {
        var lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        // A complete file ends with a newline: the last (empty) piece is not a line; a non-empty one is a cut line.
        let endsWithNewline = data.last == UInt8(ascii: "\n")
        if endsWithNewline { lines.removeLast() }
        guard let first = lines.first, let header = try? JSONSerialization.jsonObject(with: Data(first)) as? [String: Any],
              let version = header["katana_dispatch_log"] as? Int else {
            throw DispatchLogError("\(name) is not a Katana dispatch log (its first line is no katana_dispatch_log header)")
        }
        guard version <= DispatchLogFormat.version else {
            throw DispatchLogError("\(name) is a version \(version) dispatch log; this build reads versions up to \(DispatchLogFormat.version): update Katana")
        }
        guard version >= 1, let stateType = header["state_type"] as? String, let started = (header["started_unix_ns"] as? NSNumber)?.uint64Value else {
            throw DispatchLogError("\(name): its header lacks state_type or started_unix_ns")
        }
        var log = DispatchLog(header: DispatchLogHeader(version: version, stateType: stateType, startedUnixNanoseconds: started,
                                                        initialState: Self.rawJSON(first, key: "initial_state")),
                              entries: [], end: .unfinished, damage: nil)
        func damaged(at index: Int, _ reason: String) {
            let rest = lines[index...]
            log.damage = DispatchLog.Damage(line: index + 1, reason: reason, droppedLines: rest.count,
                                            droppedBytes: rest.reduce(0) { $0 + $1.count + 1 } - (endsWithNewline ? 0 : 1))
        }
        var index = 1
        while index < lines.count {
            let line = lines[index]
            let isLast = index == lines.count - 1
            guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                damaged(at: index, isLast && !endsWithNewline ? "cut short" : "not a JSON object")
                break
            }
            if let end = object["end"] as? String {
                switch end {
                case "complete": log.end = .complete(finalState: Self.rawJSON(line, key: "final_state"))
                case "cut":
                    log.end = .cut(reason: object["reason"] as? String ?? "?", atNanoseconds: (object["at_ns"] as? NSNumber)?.uint64Value ?? 0,
                                   itemsDropped: (object["items_dropped"] as? NSNumber)?.uint64Value ?? 0)
                default:
                    damaged(at: index, "an end of unknown kind '\(end)'")
                }
                if log.damage == nil, index + 1 < lines.count { damaged(at: index + 1, "lines after the log's end") }
                break
            }
            if let after = (object["checkpoint_after"] as? NSNumber)?.uint64Value {
                guard after == log.entries.last?.sequence ?? 0, let state = Self.rawJSON(line, key: "state") else {
                    damaged(at: index, "a checkpoint after item \(after) where item \(log.entries.last?.sequence ?? 0) was the last")
                    break
                }
                log.checkpoints.append(DispatchLog.Checkpoint(afterSequence: after, state: state, line: index + 1))
                index += 1
                continue
            }
            guard let sequence = (object["seq"] as? NSNumber)?.uint64Value, let offset = (object["t_ns"] as? NSNumber)?.uint64Value,
                  let kind = (object["kind"] as? String).flatMap(DispatchLogKind.init(rawValue:)), let type = object["type"] as? String,
                  let id = (object["id"] as? NSNumber)?.uint64Value, let parent = (object["parent"] as? NSNumber)?.uint64Value else {
                damaged(at: index, "an item without seq, t_ns, kind, type, id or parent")
                break
            }
            let expected = (log.entries.last?.sequence ?? 0) + 1
            guard sequence == expected else {
                damaged(at: index, "item \(sequence) where item \(expected) was due (items are missing)")
                break
            }
            log.entries.append(DispatchLogEntry(sequence: sequence, offsetNanoseconds: offset, kind: kind, type: type, id: id,
                                                parentID: parent, value: object["value"] == nil ? nil : Self.rawJSON(line, key: "value"),
                                                line: index + 1))
            index += 1
        }
        return log
    }

    /// The JSON text of `key`'s value in a one-object line, as it was written (re-encoded: key order sorted).
    private static func rawJSON(_ line: Data.SubSequence, key: String) -> Data? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any], let value = object[key],
              !(value is NSNull) else { return nil }
        return try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
    }
}

/// The types a replay knows, by the name a log gives them (`String(reflecting:)`), to decode its items.
public struct DispatchLogTypes: Sendable {
    private var decoders: [String: @Sendable (Data) throws -> any Dispatchable] = [:]

    /// No types yet: register each the logs may hold.
    public init() {}

    /// Registers `type`: its items are decoded from their logged values.
    public mutating func register<T: Dispatchable & Decodable>(_ type: T.Type) {
        register(type, as: String(reflecting: type))
    }

    /// Registers `type` for items a log names `name`: a type renamed since the log was written
    /// (`register(Checkout.self, as: "Shop.PlaceOrder")`), or another body for the same item.
    public mutating func register<T: Dispatchable & Decodable>(_ type: T.Type, as name: String) {
        decoders[name] = { data in try JSONDecoder().decode(T.self, from: data) }
    }

    /// Whether items of `type` (a log's name for it) can be decoded.
    public func knows(_ type: String) -> Bool { decoders[type] != nil }

    /// The item an entry stands for; a one-line error naming the type and the log's line when the type is not
    /// registered (renamed since the log was written?), or when its value does not decode.
    public func item(_ entry: DispatchLogEntry) throws(DispatchLogError) -> any Dispatchable {
        guard let decode = decoders[entry.type] else {
            throw DispatchLogError("line \(entry.line): \(entry.type) is not a type this replay knows (renamed since the log was written? register it)")
        }
        guard let value = entry.value else {
            throw DispatchLogError("line \(entry.line): \(entry.type) was logged without a value (it was not Encodable when recorded)")
        }
        do {
            return try decode(value)
        } catch {
            throw DispatchLogError("line \(entry.line): \(entry.type)'s value does not decode: \(error)")
        }
    }
}
