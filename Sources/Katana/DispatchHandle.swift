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
        case pending(HandleCell)
    }

    @usableFromInline let storage: Storage

    @inlinable init(_ cell: HandleCell) { storage = .pending(cell) }
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
            case let .pending(cell): HandleCell.typed(await cell.wait(), as: Value.self)
            }
        }
    }

    public func cancel() {}

    /// Whether the item has finished (a snapshot: it may finish right after this returns `false`).
    public var isResolved: Bool {
        switch storage {
        case .resolved: true
        case let .pending(cell): cell.isResolved
        }
    }
}

/// The shared, one-shot completion behind a pending handle. Not generic, so the lane resolves a batch of
/// handles without any runtime type lookups; the value is checked against the handle's type when awaited.
/// Every cell of a store shares the store's completion lock, so a batch resolves under one acquisition.
@usableFromInline
final class HandleCell: @unchecked Sendable {
    // `outcome`, `waiter` and `moreWaiters` are guarded by `lock`; `acceptsVoid` is immutable.
    @usableFromInline typealias Outcome = Result<any Sendable, any Error>

    @usableFromInline let lock: Lock
    /// Whether `()` is an acceptable value (the handle of a state updater, a side effect or `anyDispatch`).
    /// Such handles only report completion, whatever the item (or an interceptor's replacement) produced.
    @usableFromInline let acceptsVoid: Bool
    @usableFromInline var outcome: Outcome?
    @usableFromInline var waiter: UnsafeContinuation<Outcome, Never>?
    @usableFromInline var moreWaiters: [UnsafeContinuation<Outcome, Never>] = []

    @inlinable
    init(lock: Lock, acceptsVoid: Bool) {
        self.lock = lock
        self.acceptsVoid = acceptsVoid
    }

    @usableFromInline var isResolved: Bool { lock.withLock { outcome != nil } }

    /// Resolves the cell. Must be called with `lock` held. Later calls are ignored.
    @inlinable
    func resolveLocked(_ result: Outcome) {
        guard outcome == nil else { return }
        outcome = result
        // Resuming only enqueues the waiting task on its executor, so doing it under the lock is safe.
        if let waiter {
            waiter.resume(returning: result)
            self.waiter = nil
            for other in moreWaiters { other.resume(returning: result) }
            moreWaiters = []
        }
    }

    @inlinable
    func resolve(_ result: Outcome) {
        lock.lock()
        resolveLocked(result)
        lock.unlock()
    }

    @usableFromInline
    func wait() async -> Outcome {
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

    /// The outcome as seen by a handle of type `Value`.
    @usableFromInline
    static func typed<Value: Sendable>(_ outcome: Outcome, as: Value.Type) -> Result<Value, any Error> {
        switch outcome {
        case let .failure(error): return .failure(error)
        case let .success(value):
            if Value.self == Void.self { return .success(() as! Value) }
            if let typed = value as? Value { return .success(typed) }
            return .failure(KatanaError.returnValueTypeMismatch(expected: "\(Value.self)", got: "\(type(of: value))"))
        }
    }
}
