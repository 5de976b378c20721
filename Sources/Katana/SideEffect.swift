/// The type-erased form of the side-effect protocols; what interceptors and `anyDispatch` see.
public protocol AnySideEffect: Dispatchable {
    /// Runs the side effect with an erased context and returns its result (`()` for ``SideEffect``).
    /// Throws ``KatanaError/contextTypeMismatch(expected:got:)`` when the context's store has other
    /// state or dependency types than the side effect declares.
    func anySideEffect(_ context: AnySideEffectContext) async throws -> any Sendable
}

/// Asynchronous logic: reads the state, talks to the outside world through `Dependencies`, and dispatches
/// more items. Side effects run concurrently with each other, on Swift's global concurrent executor.
public protocol SideEffect: AnySideEffect {
    associatedtype StateType: State
    associatedtype Dependencies: SideEffectDependencyContainer
    func sideEffect(_ context: SideEffectContext<StateType, Dependencies>) async throws
}

/// A side effect that produces a value: `let user = try await store.dispatch(FetchUser()).value`.
public protocol ReturningSideEffect: AnySideEffect {
    associatedtype StateType: State
    associatedtype Dependencies: SideEffectDependencyContainer
    associatedtype ReturnValue: Sendable
    func sideEffect(_ context: SideEffectContext<StateType, Dependencies>) async throws -> ReturnValue
}

extension SideEffect {
    public func anySideEffect(_ context: AnySideEffectContext) async throws -> any Sendable {
        try await sideEffect(context.typed(StateType.self, Dependencies.self))
    }
}

extension ReturningSideEffect {
    public func anySideEffect(_ context: AnySideEffectContext) async throws -> any Sendable {
        try await sideEffect(context.typed(StateType.self, Dependencies.self))
    }
}
