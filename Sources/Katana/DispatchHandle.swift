/// The result of one dispatch. `dispatch` returns it at once; await ``value`` (or ``result``) to wait for the
/// item to finish: for a state updater, until the state is updated and listeners were handed the change; for a
/// side effect, until its body returns. Awaiting suspends the task (it never blocks a thread), and returns
/// without suspending when the item already finished, as an updater applied inline by `dispatch` has.
///
/// Handles are cheap to copy; any number of tasks may await the same handle. Dropping one is fine: the item
/// runs anyway.
public struct DispatchHandle<Value: Sendable>: Sendable {
    @usableFromInline
    enum Storage: Sendable {
        case resolved(Result<Value, any Error>)
        case pending(HandleCell<Value>)
    }

    @usableFromInline let storage: Storage

    @inlinable init(_ cell: HandleCell<Value>) { storage = .pending(cell) }
    @inlinable init(resolved: Result<Value, any Error>) { storage = .resolved(resolved) }

    @inlinable static func rejected(_ error: any Error) -> DispatchHandle { DispatchHandle(resolved: .failure(error)) }

    /// The item's outcome: its value, or what the item or an interceptor threw, or a ``KatanaError``.
    public var value: Value {
        get async throws { try await result.get() }
    }

    /// The item's outcome as a `Result`.
    public var result: Result<Value, any Error> {
        get async {
            switch storage {
            case let .resolved(result): result
            case let .pending(cell): await cell.wait()
            }
        }
    }

    /// Whether the item has finished (a snapshot: it may finish right after this returns `false`).
    public var isResolved: Bool {
        switch storage {
        case .resolved: true
        case let .pending(cell): cell.isResolved
        }
    }
}

/// The shared, one-shot completion behind a pending handle. Every cell of a store shares the store's
/// completion lock, so the lane resolves a whole batch of handles under one acquisition.
@usableFromInline
class AnyHandleCell: @unchecked Sendable {
    // `lock` guards the subclass's result and waiters.
    @usableFromInline let lock: Lock

    @inlinable init(lock: Lock) { self.lock = lock }

    /// Resolves with an erased value. Must be called with `lock` held. Later calls are ignored.
    @usableFromInline func resolveLocked(_ result: Result<any Sendable, any Error>) { fatalError("abstract") }

    /// Whether `()` is an acceptable value (the handle of a state updater, a side effect or `anyDispatch`).
    @usableFromInline var acceptsVoid: Bool { fatalError("abstract") }

    @usableFromInline final func resolve(_ result: Result<any Sendable, any Error>) {
        lock.lock()
        resolveLocked(result)
        lock.unlock()
    }
}

@usableFromInline
final class HandleCell<Value: Sendable>: AnyHandleCell, @unchecked Sendable {
    // Guarded by `lock`. At most one waiter is stored inline; more go to `moreWaiters`.
    private var outcome: Result<Value, any Error>?
    private var waiter: UnsafeContinuation<Result<Value, any Error>, Never>?
    private var moreWaiters: [UnsafeContinuation<Result<Value, any Error>, Never>] = []

    @usableFromInline var isResolved: Bool { lock.withLock { outcome != nil } }

    @usableFromInline override var acceptsVoid: Bool { Value.self == Void.self || Value.self == (any Sendable).self }

    @usableFromInline override func resolveLocked(_ result: Result<any Sendable, any Error>) {
        switch result {
        case let .success(value):
            if Value.self == Void.self {
                // A Void handle only reports completion, whatever the item (or its replacement) produced.
                resolveTypedLocked(.success(() as! Value))
            } else if let typed = value as? Value {
                resolveTypedLocked(.success(typed))
            } else {
                resolveTypedLocked(.failure(KatanaError.returnValueTypeMismatch(
                    expected: "\(Value.self)", got: "\(type(of: value))")))
            }
        case let .failure(error):
            resolveTypedLocked(.failure(error))
        }
    }

    func resolveTypedLocked(_ result: Result<Value, any Error>) {
        guard outcome == nil else { return }
        outcome = result
        // Resuming only enqueues the waiting task on its executor, so doing it under the lock is safe.
        waiter?.resume(returning: result)
        waiter = nil
        for other in moreWaiters { other.resume(returning: result) }
        moreWaiters = []
    }

    @usableFromInline func wait() async -> Result<Value, any Error> {
        lock.lock()
        if let outcome {
            lock.unlock()
            return outcome
        }
        lock.unlock()
        return await withUnsafeContinuation { continuation in
            lock.lock()
            if let outcome {
                lock.unlock()
                continuation.resume(returning: outcome)
                return
            }
            if waiter == nil { waiter = continuation } else { moreWaiters.append(continuation) }
            lock.unlock()
        }
    }
}
