import Foundation

/// Keeps the work a store hands its `stateInitializerExecutor` instead of running it, so the store stays not ready
/// (and holds what is dispatched) until `runHeld()`; never calling it keeps the store not ready for good.
public final class DeferredWork: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var work: (@Sendable () -> Void)?
    public init() {}
    public func hold(_ work: @escaping @Sendable () -> Void) { lock.withLock { self.work = work } }
    public func runHeld() { lock.withLock { work }?() }
}

extension Result {
    /// The failure, if this is one.
    public var error: (any Error)? { if case let .failure(error) = self { error } else { nil } }
}
