import Foundation
import Katana
import KatanaTrace
import Synchronization

/// Records a store's dispatches into a dispatch log (``DispatchLogFormat``): give it to the store's configuration
/// (`StoreConfiguration(dispatchRecorder:)`), then ``finish(finalState:)`` when done. Every updater in the order the
/// store applies it, every side effect as it starts, each with its parent, its time and — for `Encodable` types — its
/// value; encoding and writing happen on the log's own thread.
public final class DispatchLogRecorder: DispatchRecorder {
    /// The log's writer: its path, counts, `waitUntilWritten`.
    public let writer: DispatchLogWriter
    /// A checkpoint of the state (when it is `Encodable`) before every this-many updaters; 0: none.
    public let checkpointEvery: Int
    private let updaters = Atomic<Int>(0)

    /// Starts a log at `path` for a store of `State`, with its initial state (written when `Encodable`).
    ///
    /// - Parameters:
    ///   - limitBytes: the log's size limit: past it, items are counted, not written, and the log says where it was cut.
    ///   - checkpointEvery: log the state every this many updaters (0: never), so a replay's `--verify` can say
    ///     between which two items it first differs rather than only that the final states differ. Each checkpoint
    ///     costs the store one copy of the state on its next change and the writer's thread one encoding of it: with
    ///     a large state, checkpoint rarely (`katana-bench micro --only dispatch-log` measures an item's cost).
    public init<State>(path: String, initialState: State, limitBytes: Int = 64 << 20, checkpointEvery: Int = 1_000) throws(DispatchLogError) {
        guard checkpointEvery >= 0 else { throw DispatchLogError("checkpointEvery must be 0 (none) or more, not \(checkpointEvery)") }
        writer = try DispatchLogWriter(path: path, stateType: String(reflecting: State.self),
                                       initialState: (initialState as? any Encodable).map(EncodableValue.init), limitBytes: limitBytes)
        self.checkpointEvery = checkpointEvery
    }

    /// A recorder never finished (its store released, the app returned without calling ``finish(finalState:)``) still
    /// ends its log — complete, without a final state — and its writer's thread.
    deinit { try? writer.finish(finalState: nil) }

    public func applying(_ updater: any AnyStateUpdater, id: UInt64, parentID: UInt64, stateBefore: () -> any State) {
        if checkpointEvery > 0 {
            let count = updaters.wrappingAdd(1, ordering: .relaxed).oldValue
            if count > 0, count % checkpointEvery == 0, let state = stateBefore() as? any Encodable {
                writer.appendCheckpoint(state: EncodableValue(state))
            }
        }
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
