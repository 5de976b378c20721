import Foundation

/// A dispatch log: what a store was dispatched, in order, as JSON lines — a header, one line per item, and a last line
/// saying how the log ended. Written by ``DispatchLogWriter``, read by ``DispatchLogReader``.
///
/// ```
/// {"katana_dispatch_log":1,"state_type":"App.State","started_unix_ns":…,"initial_state":{…}}
/// {"seq":1,"t_ns":1200,"kind":"updater","type":"App.AddItem","id":7,"parent":0,"value":{…}}
/// {"end":"complete","final_state":{…}}      or      {"end":"cut","reason":"size limit","at_ns":…,"items_dropped":12}
/// ```
///
/// `t_ns` counts from `started_unix_ns` on the monotonic clock; `value` is there for items that are `Encodable`
/// (the type name alone for the others); `parent` is the id of the side effect that dispatched the item (0: top level).
public enum DispatchLogFormat {
    /// The version this build writes, and the newest it reads.
    public static let version = 1
}

/// What a dispatched item was.
public enum DispatchLogKind: String, Sendable, Codable {
    /// A state updater, logged as the store applied it.
    case updater
    /// A side effect, logged as the store started it.
    case sideEffect = "side_effect"
}

/// The log's first line.
public struct DispatchLogHeader: Sendable, Equatable {
    /// The format version the log was written in.
    public var version: Int
    /// The store's state type, `String(reflecting:)`.
    public var stateType: String
    /// When recording started, nanoseconds since the Unix epoch.
    public var startedUnixNanoseconds: UInt64
    /// The state when recording started, as JSON, when the state is `Encodable`.
    public var initialState: Data?

    /// A header; `version` is the format's.
    public init(version: Int = DispatchLogFormat.version, stateType: String, startedUnixNanoseconds: UInt64, initialState: Data?) {
        self.version = version
        self.stateType = stateType
        self.startedUnixNanoseconds = startedUnixNanoseconds
        self.initialState = initialState
    }
}

/// One dispatched item.
public struct DispatchLogEntry: Sendable, Equatable {
    /// 1 for the first item, then one more per item written.
    public var sequence: UInt64
    /// When the store applied it (an updater) or started it (a side effect): nanoseconds since recording started. For
    /// an updater applied as it was dispatched — the store's usual case — that is when it was dispatched; one that
    /// waited its turn in the lane is logged when its turn came, in the order the state saw it.
    public var offsetNanoseconds: UInt64
    /// Updater or side effect.
    public var kind: DispatchLogKind
    /// Its type, `String(reflecting:)`.
    public var type: String
    /// Its dispatch id (the trace's), and its parent's (0: top level).
    public var id: UInt64
    /// The id of the side effect that dispatched it; 0 for a top-level dispatch.
    public var parentID: UInt64
    /// Its value as JSON, when its type is `Encodable`.
    public var value: Data?
    /// The log's line it came from (1-based), for messages.
    public var line: Int

    /// An entry; `line` only matters for messages.
    public init(sequence: UInt64, offsetNanoseconds: UInt64, kind: DispatchLogKind, type: String, id: UInt64, parentID: UInt64,
                value: Data?, line: Int = 0) {
        self.sequence = sequence
        self.offsetNanoseconds = offsetNanoseconds
        self.kind = kind
        self.type = type
        self.id = id
        self.parentID = parentID
        self.value = value
        self.line = line
    }
}

/// How a log ended.
public enum DispatchLogEnd: Sendable, Equatable {
    /// Recording stopped normally; the state then, as JSON, when the state is `Encodable`.
    case complete(finalState: Data?)
    /// The log reached its size limit: items from `atNanoseconds` on were not written (`itemsDropped` of them).
    case cut(reason: String, atNanoseconds: UInt64, itemsDropped: UInt64)
    /// The log has no last line: the process ended while recording (or the file was cut short).
    case unfinished
}
