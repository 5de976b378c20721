/// The type-erased form of the side-effect protocols; what interceptors and `anyDispatch` see.
public protocol AnySideEffect: Dispatchable {
    /// Runs the side effect with an erased context and returns its result (`()` for ``SideEffect``).
    /// Throws ``KatanaError/contextTypeMismatch(expected:got:)`` when the context's store has other
    /// state or dependency types than the side effect declares.
    func anySideEffect(_ context: AnySideEffectContext) async throws -> any Sendable

    /// Katana's own entry, what the store calls to run the side effect: leave it to the default implementations. A
    /// ``SideEffect`` of the store's own state and dependency types is handed its typed context, made from what the
    /// store's contexts share; anything else goes through ``anySideEffect(_:)`` with the erased context, as in Katana 6.
    /// (So a ``SideEffect`` of the store's types that implements ``anySideEffect(_:)`` itself is run by its typed
    /// `sideEffect(_:)`, as Katana 6's default `anySideEffect` would have run it.) The arguments are the store's,
    /// erased: a requirement of a public protocol names public types only.
    func _katanaRun(in store: AnyObject, scope: AnyObject) async throws -> any Sendable
}

extension AnySideEffect {
    @inlinable
    public func _katanaRun(in store: AnyObject, scope: AnyObject) async throws -> any Sendable {
        let registry = unsafeDowncast(store, to: SideEffectRegistry.self)
        return try await anySideEffect(registry.contextPrototype.withScope(unsafeDowncast(scope, to: HandleCell.self)))
    }
}

/// Asynchronous logic: reads the state, talks to the outside world through `Dependencies`, and dispatches
/// more items. Side effects run concurrently with each other, on Swift's global concurrent executor.
public protocol SideEffect: AnySideEffect {
    /// The state of the store the side effect is dispatched to.
    associatedtype StateType: State
    /// The store's dependency container, handed to the side effect through its context.
    associatedtype Dependencies: SideEffectDependencyContainer
    /// The side effect's work, on a task of its own: read the state, use the dependencies, dispatch more. Throwing
    /// rejects the handle with the error.
    func sideEffect(_ context: SideEffectContext<StateType, Dependencies>) async throws
}

/// A side effect that produces a value: `let user = try await store.dispatch(FetchUser()).value`.
///
/// Write **one** of the two `sideEffect` methods:
/// - the typed one, `sideEffect(_: SideEffectContext<StateType, Dependencies>)`, whose context was checked against
///   the store's types before the body runs (a mismatch rejects the handle with
///   ``KatanaError/contextTypeMismatch(expected:got:)``);
/// - or Katana 6's erased one, `sideEffect(_: AnySideEffectContext)`, for libraries that do not know the app's
///   types: cast it yourself (`context as? SideEffectContext<AppState, AppDependencies>`) or dispatch through it.
///   Its `StateType` and `Dependencies` default to ``ErasedState`` and ``EmptySideEffectDependencyContainer``.
///
/// Each has a default that calls the other, so the one you write is the one that runs.
public protocol ReturningSideEffect: AnySideEffect {
    /// The state of the store the side effect is dispatched to.
    associatedtype StateType: State = ErasedState
    /// The store's dependency container, handed to the side effect through its context.
    associatedtype Dependencies: SideEffectDependencyContainer = EmptySideEffectDependencyContainer
    /// What the side effect returns through its handle's `value`.
    associatedtype ReturnValue: Sendable
    func sideEffect(_ context: SideEffectContext<StateType, Dependencies>) async throws -> ReturnValue
    func sideEffect(_ context: AnySideEffectContext) async throws -> ReturnValue
}

/// The `StateType` of a ``ReturningSideEffect`` written against the erased context (Katana 6's form): it names
/// no state type of its own, and is never a store's state.
public struct ErasedState: State {
    public init() {}
}

extension SideEffect {
    // Always inlined into the conforming type's witness, so `typedContext` is specialised there (the context's type
    // is then a static, not a run-time lookup of `SideEffectContext<S, D>` and its optional on every side effect).
    @inlinable @inline(__always)
    public func anySideEffect(_ context: AnySideEffectContext) async throws -> any Sendable {
        try await sideEffect(typedContext(context, StateType.self, Dependencies.self))
    }

    /// The store's types are the side effect's (every store's environment is a `ContextEnvironment` of its own types,
    /// compared as one metadata pointer): its context is made typed, where the erased one was copied out of the store's
    /// prototype into an existential, then opened twice to check its type and take it (six functions of the
    /// side-effect walk, `make walk`; the callgrind gate's `side_effect_round_trip`). Another store's types: Katana
    /// 6's erased form, whose `typedContext` rejects it with ``KatanaError/contextTypeMismatch(expected:got:)``.
    /// Always inlined into the conforming type's witness, where the environment's type is a static.
    @inlinable @inline(__always)
    public func _katanaRun(in store: AnyObject, scope: AnyObject) async throws -> any Sendable {
        let registry = unsafeDowncast(store, to: SideEffectRegistry.self)
        let cell = unsafeDowncast(scope, to: HandleCell.self)
        let context = if registry.environmentType == ObjectIdentifier(ContextEnvironment<StateType, Dependencies>.self) {
            SideEffectContext(environment: unsafeDowncast(registry.environment, to: ContextEnvironment<StateType, Dependencies>.self),
                              scope: cell)
        } else {
            try typedContext(registry.contextPrototype.withScope(cell), StateType.self, Dependencies.self)
        }
        try await sideEffect(context)
        return ()
    }
}

extension ReturningSideEffect {
    @inlinable @inline(__always)
    public func anySideEffect(_ context: AnySideEffectContext) async throws -> any Sendable {
        try await sideEffect(context as any AnySideEffectContext)
    }

    /// Katana 6's erased form, for a side effect that wrote the typed one: checks the context's types, then runs it.
    @inlinable @inline(__always)
    public func sideEffect(_ context: AnySideEffectContext) async throws -> ReturnValue {
        try await sideEffect(typedContext(context, StateType.self, Dependencies.self))
    }

    /// The typed form, for a side effect that wrote Katana 6's erased one: runs that.
    public func sideEffect(_ context: SideEffectContext<StateType, Dependencies>) async throws -> ReturnValue {
        try await sideEffect(context as any AnySideEffectContext)
    }
}
