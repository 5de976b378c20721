/// Runs `body` as a named interval traced to `backend` (by default the process's `KatanaTracing.backend`): the
/// free-function form of `SideEffectContext.interval`, for code outside side effects (pass `parentID` to nest it
/// under a dispatch whose id you know). With nobody listening it costs one check.
///
///     let rows = try await traceInterval("load rows") { try await database.rows() }
@inlinable
public func traceInterval<T>(
    _ name: StaticString,
    parentID: UInt64 = 0,
    backend: any TraceBackend = KatanaTracing.backend,
    _ body: () async throws -> T
) async rethrows -> T {
    // One call site of `body`, so that with nobody listening the optimiser can inline it as if unwrapped.
    let id = backend.isEnabled ? KatanaTracing.nextID() : 0
    if id != 0 { backend.intervalBegin(intervalID: id, parentID: parentID, name: name) }
    do {
        let result = try await body()
        if id != 0 { backend.intervalEnd(intervalID: id, name: name, outcome: .ok) }
        return result
    } catch {
        if id != 0 { backend.intervalEnd(intervalID: id, name: name, outcome: DispatchOutcome(intervalError: error)) }
        throw error
    }
}

extension Duration {
    /// Whole nanoseconds, 0 for a negative duration (a budget, a bucket bound, an interval: never negative here).
    package var clampedNanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        return seconds <= 0 && attoseconds <= 0
            ? 0 : UInt64(clamping: seconds) &* 1_000_000_000 &+ UInt64(clamping: attoseconds / 1_000_000_000)
    }
}

extension DispatchOutcome {
    /// How an interval whose body ended with `error` (nil: returned) ends.
    public init(intervalError error: (any Error)?) {
        switch error {
        case nil: self = .ok
        case is CancellationError: self = .cancelled
        default: self = .error
        }
    }
}
