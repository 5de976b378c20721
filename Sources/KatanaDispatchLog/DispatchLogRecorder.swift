import Foundation
import Katana
import KatanaTrace

/// Records a store's dispatches into a dispatch log (``DispatchLogFormat``): give it to the store's configuration
/// (`StoreConfiguration(dispatchRecorder:)`), then ``finish(finalState:)`` when done. Every updater in the order the
/// store applies it, every side effect as it starts, each with its parent, its time and — for `Encodable` types — its
/// value; encoding and writing happen on the log's own thread.
public final class DispatchLogRecorder: DispatchRecorder {
    public let writer: DispatchLogWriter

    /// Starts a log at `path` for a store of `State`, with its initial state (written when `Encodable`).
    public init<State>(path: String, initialState: State, limitBytes: Int = 64 << 20) throws(DispatchLogError) {
        writer = try DispatchLogWriter(path: path, stateType: String(reflecting: State.self),
                                       initialState: (initialState as? any Encodable).map(EncodableValue.init), limitBytes: limitBytes)
    }

    public func applying(_ updater: any AnyStateUpdater, id: UInt64, parentID: UInt64) {
        writer.append(kind: .updater, type: TraceName.of(type(of: updater)).string, id: id, parentID: parentID,
                      value: (updater as? any Encodable).map(EncodableValue.init))
    }

    public func starting(_ sideEffect: any AnySideEffect, id: UInt64, parentID: UInt64) {
        writer.append(kind: .sideEffect, type: TraceName.of(type(of: sideEffect)).string, id: id, parentID: parentID,
                      value: (sideEffect as? any Encodable).map(EncodableValue.init))
    }

    /// Writes what is pending and the log's last line, with the final state when it is `Encodable`.
    public func finish<State>(finalState: State) throws(DispatchLogError) {
        try writer.finish(finalState: (finalState as? any Encodable).map(EncodableValue.init))
    }
}

/// A dispatched item's (or a state's) value, for the writer's thread: items and states are `Sendable`, and a
/// conditional cast cannot name `Sendable`.
struct EncodableValue: Encodable, @unchecked Sendable {
    let value: any Encodable
    init(_ value: any Encodable) { self.value = value }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}
