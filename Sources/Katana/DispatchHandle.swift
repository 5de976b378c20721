import Synchronization

/// The result of one dispatch. `dispatch` returns it at once; await ``value`` (or ``result``) to wait for the
/// item to finish: for a state updater, until the state is updated and listeners were handed the change; for a
/// side effect, until its body returns. Awaiting suspends the task (it never blocks a thread), and returns
/// without suspending when the item already finished, as an updater applied inline by `dispatch` has.
///
/// Handles are cheap to copy; any number of tasks may await the same handle. Dropping one is fine: the item
/// runs anyway. A task awaiting a handle that is cancelled stops waiting at once (throws `CancellationError`);
/// the item carries on unless ``cancel()`` is called.
///
/// What a handle holds once its item finished is its outcome; a side effect's handle also keeps the side effect's
/// finished task (about 300 bytes, as a `Task` handle does; what the side effect captured is released when its body
/// ends), so keep handles only as long as you need them.
public struct DispatchHandle<Value: Sendable>: Sendable {
    @usableFromInline
    enum Storage: Sendable {
        case succeeded(Value)
        case failed(any Error)
        case pending(HandleCell)
    }

    @usableFromInline let storage: Storage

    @inlinable init(_ cell: HandleCell) { storage = .pending(cell) }
    @inlinable init(resolved: Result<Value, any Error>) {
        switch resolved {
        case let .success(value): storage = .succeeded(value)
        case let .failure(error): storage = .failed(error)
        }
    }

    @inlinable static func rejected(_ error: any Error) -> DispatchHandle { DispatchHandle(resolved: .failure(error)) }

    /// The item's outcome: its value, or what the item or an interceptor threw, or a ``KatanaError``.
    /// (Inlinable, as is ``result``: specialised in the caller's module, this handle's storage and the value's type
    /// need no run-time metadata lookup, which unspecialised costs more than the rest of an awaited side effect's
    /// handle: the callgrind gate's `side_effect_round_trip` and `awaited_round_trip`.)
    @inlinable
    public nonisolated(nonsending) var value: Value {
        get async throws {
            switch storage {
            case let .succeeded(value):
                return value
            case let .failed(error):
                throw error
            case let .pending(cell):
                if Value.self == Void.self {
                    // A `Void` handle only reports completion: its outcome's error, if any, is all there is to read
                    // (copying the whole outcome out and converting it shows in `side_effect_round_trip`).
                    if let failure = await cell.waitForFailure() { throw failure }
                    return () as! Value
                }
                return try HandleCell.typed(await cell.wait(), as: Value.self).get()
            }
        }
    }

    /// The item's outcome as a `Result`: ``value``'s, caught.
    @inlinable
    public nonisolated(nonsending) var result: Result<Value, any Error> {
        get async {
            do { return .success(try await value) } catch { return .failure(error) }
        }
    }

    /// Cancels the item, as far as it can still be cancelled:
    /// - a **state updater** still waiting in the lane (or kept until the store is ready) is never applied, and
    ///   the handle rejects with `CancellationError` at once; one already applied is not undone (no-op);
    /// - a **side effect** not started yet never starts (rejected at once); a running one has its task cancelled
    ///   (its body sees `Task.isCancelled`, `Task.sleep` throws), and so have the side effects it dispatched through
    ///   its context; its handle rejects with `CancellationError` when the body ends, whatever the body returned;
    ///   updaters it dispatches after this are rejected;
    /// - a finished item: nothing happens.
    ///
    /// Traces show outcome `cancelled`. Cancelling a task that *awaits* a handle only stops that wait.
    public func cancel() {
        if case let .pending(cell) = storage { cell.cancel() }
    }

    /// Whether the item has finished (a snapshot: it may finish right after this returns `false`).
    public var isResolved: Bool {
        switch storage {
        case .succeeded, .failed: true
        case let .pending(cell): cell.isResolved
        }
    }
}

extension DispatchHandle where Value == any Sendable {
    /// The same item's handle, seen with the value type `T` (checked when awaited, as every pending handle's is).
    @inlinable
    func retyped<T: Sendable>(as: T.Type) -> DispatchHandle<T> {
        switch storage {
        case let .pending(cell): DispatchHandle<T>(cell)
        case let .succeeded(value): DispatchHandle<T>(resolved: HandleCell.typed(.success(value), as: T.self))
        case let .failed(error): .rejected(error)
        }
    }
}
