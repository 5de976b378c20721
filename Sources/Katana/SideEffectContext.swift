import KatanaTrace

/// What a side effect receives: the store's dependencies, its state, and a way to dispatch more items.
/// Items dispatched through a context are traced as children of the side effect (`parent_id`).
///
/// The context holds the store weakly: if the store is released while a side effect still runs, `getState()`
/// returns the state's `init()` value and dispatches are rejected with ``KatanaError/storeReleased``.
public struct SideEffectContext<S: State, D: SideEffectDependencyContainer>: Sendable {
    /// The store's dependencies (kept once per store, beside its weak reference, not copied into every context).
    /// The store, while it lives.
    /// The handle cell of the side effect this context belongs to (nil for the interceptors' context): what it
    /// dispatches is cancelled with it. It also holds the side effect's trace id.
    ///
    /// A context is these two references and nothing else, whatever the dependencies: it fits in an
    /// `any AnySideEffectContext` without a heap box, and its layout does not depend on `S` or `D`, so it is copied
    /// with two retains even where it is not specialised. (With the dependencies stored here, a container of two
    /// closures made every side effect box its context on the heap and copy both closures twice:
    /// `SideEffectContextLayoutTests.aContextIsTwoWordsWhateverTheDependencies` guards it.)
    @inlinable public var dependencies: D { environment.dependencies }
    @usableFromInline let environment: ContextEnvironment<S, D>
    // A `let`: a `var` gets a default (nil), whose initialiser a debug build enters for every context made (the
    // side-effect walk, `make walk`).
    @usableFromInline let scope: HandleCell?

    @inlinable init(environment: ContextEnvironment<S, D>, scope: HandleCell?) {
        self.environment = environment
        self.scope = scope
    }

    /// The trace id of the side effect this context belongs to (0 for the interceptors' context, or when tracing
    /// was off).
    @inlinable public var parentID: UInt64 { scope?.traceID ?? 0 }

    /// Whether the side effect this context belongs to was cancelled (``DispatchHandle/cancel()`` or its store was
    /// released). Its body also sees `Task.isCancelled`.
    public var isCancelled: Bool { scope?.isCancelled ?? false }

    /// The state as of now: it reflects every updater whose handle has resolved.
    @inlinable public func getState() -> S { environment.store?.state ?? S() }

    /// Dispatches a state updater as a child of this side effect (cancelled with it); returns its handle.
    @inlinable @discardableResult
    public func dispatch<U: StateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        guard let store = environment.store else { return .rejected(KatanaError.storeReleased) }
        if let scope, scope.isCancelled { return .rejected(CancellationError()) }
        return store.engine.enqueueUpdater(updater, type: U.self, parentID: parentID, success: (), bypassInterceptors: false,
                                          typed: true)
    }

    /// Dispatches a throwing state updater as a child of this side effect (cancelled with it); returns its handle.
    @inlinable @discardableResult
    public func dispatch<U: ThrowingStateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        guard let store = environment.store else { return .rejected(KatanaError.storeReleased) }
        if let scope, scope.isCancelled { return .rejected(CancellationError()) }
        return store.engine.enqueueUpdater(updater, type: U.self, parentID: parentID, success: (), bypassInterceptors: false,
                                          typed: true)
    }

    /// Dispatches a side effect as a child of this one (cancelled with it); returns its handle.
    @inlinable @discardableResult
    public func dispatch<E: SideEffect>(_ sideEffect: E) -> DispatchHandle<Void> {
        guard let store = environment.store else { return .rejected(KatanaError.storeReleased) }
        return adopted(store.engine.enqueueSideEffect(sideEffect, type: E.self, parentID: parentID, as: Void.self))
    }

    @inlinable @discardableResult
    public func dispatch<E: ReturningSideEffect>(_ sideEffect: E) -> DispatchHandle<E.ReturnValue> {
        guard let store = environment.store else { return .rejected(KatanaError.storeReleased) }
        return adopted(store.engine.enqueueSideEffect(sideEffect, type: E.self, parentID: parentID, as: E.ReturnValue.self))
    }

    @discardableResult
    public func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable> {
        guard let store = environment.store else { return .rejected(KatanaError.storeReleased) }
        if let scope, scope.isCancelled { return .rejected(CancellationError()) }
        return adopted(store.engine.anyDispatch(item, parentID: parentID))
    }

    /// Ties a dispatched item's handle to this context's side effect, so cancelling it cancels the item.
    @inlinable
    func adopted<V>(_ handle: DispatchHandle<V>) -> DispatchHandle<V> {
        if let scope, case let .pending(cell) = handle.storage { scope.adopt(cell) }
        return handle
    }
}

/// The erased context: what interceptors and ``AnySideEffect`` receive, as in Katana 6. Every context a store hands
/// out is a ``SideEffectContext`` of the store's own state and dependency types, so Katana 6's cast works:
///
/// ```swift
/// guard let context = context as? SideEffectContext<AppState, AppDependencies> else { … }
/// ```
///
/// It succeeds for the store's types and gives `nil` for any other. ``typed(_:_:)`` does the same and throws
/// ``KatanaError/contextTypeMismatch(expected:got:)`` instead.
public protocol AnySideEffectContext: Sendable {
    /// The trace id of the side effect this context belongs to (0 for an interceptor's context, or when tracing
    /// was off): what is dispatched through it is traced with it as `parent_id`.
    var parentID: UInt64 { get }
    /// Whether the side effect this context belongs to was cancelled.
    var isCancelled: Bool { get }
    /// The store's dependencies.
    var anyDependencies: (any SideEffectDependencyContainer)? { get }
    /// The store's current state, or `nil` if the store is gone.
    func getAnyState() -> (any State)?
    /// Dispatches any item as a child of this context's side effect (cancelled with it).
    @discardableResult func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable>
}

/// `AnySideEffectContext.typed`, generic only over the target types: called on an existential, a protocol-extension
/// method stays generic over the opened `Self` and is never specialised, so every side effect looked up
/// `SideEffectContext<S, D>`'s metadata at run time (the callgrind gate's `side_effect_round_trip`); this one is
/// specialised in the side effect's module, where that metadata is a static.
///
/// A context of the store's very types (every context a store hands out) is taken with a comparison of two metadata
/// pointers, where `as?` from an existential goes through the runtime's general cast (`side_effect_round_trip`). The
/// existential is opened twice, to compare and then to take the value: one opened function returning `T?` (it is
/// unspecialised — the opened type is known at run time only) went through `T`'s enum witnesses, and `type(of:)`
/// through the runtime's dynamic-type lookup.
@inlinable
func typedContext<S: State, D: SideEffectDependencyContainer>(
    _ context: any AnySideEffectContext, _: S.Type, _: D.Type
) throws -> SideEffectContext<S, D> {
    if isExactly(context, SideEffectContext<S, D>.self) { return unchecked(context, as: SideEffectContext<S, D>.self) }
    if let typed = context as? SideEffectContext<S, D> { return typed }
    throw KatanaError.contextTypeMismatch(expected: "\(SideEffectContext<S, D>.self)", got: "\(type(of: context))")
}

@inlinable
func isExactly<C: AnySideEffectContext, T>(_: C, _: T.Type) -> Bool { C.self == T.self }

/// `value` as a `T`, which the caller checked is its very type.
@inlinable
func unchecked<C: AnySideEffectContext, T>(_ value: C, as _: T.Type) -> T { unsafeBitCast(value, to: T.self) }

extension AnySideEffectContext {
    /// The typed context for a side effect declaring `S` and `D`; throws when the store has other types.
    /// (Inlinable, so the side effect's own module specialises it: the target type's metadata is then cached there
    /// instead of looked up on every side effect.)
    @inlinable
    public func typed<S: State, D: SideEffectDependencyContainer>(_: S.Type, _: D.Type) throws -> SideEffectContext<S, D> {
        try typedContext(self, S.self, D.self)
    }

    /// Dispatches a state updater (Katana 6's `dispatch` on the erased context). A wrong state type rejects the
    /// handle with ``KatanaError/stateTypeMismatch(expected:got:)``.
    @discardableResult
    public func dispatch<U: StateUpdater>(_ updater: U) -> DispatchHandle<Void> { anyDispatch(updater).retyped(as: Void.self) }

    /// Dispatches a state updater that may refuse (its error rejects the handle).
    @discardableResult
    public func dispatch<U: ThrowingStateUpdater>(_ updater: U) -> DispatchHandle<Void> { anyDispatch(updater).retyped(as: Void.self) }

    /// Dispatches a side effect.
    @discardableResult
    public func dispatch<E: SideEffect>(_ sideEffect: E) -> DispatchHandle<Void> { anyDispatch(sideEffect).retyped(as: Void.self) }

    /// Dispatches a returning side effect; the handle carries its value.
    @discardableResult
    public func dispatch<E: ReturningSideEffect>(_ sideEffect: E) -> DispatchHandle<E.ReturnValue> {
        anyDispatch(sideEffect).retyped(as: E.ReturnValue.self)
    }
}

extension SideEffectContext: AnySideEffectContext {
    public var anyDependencies: (any SideEffectDependencyContainer)? { dependencies }
    public func getAnyState() -> (any State)? { environment.store?.state }
}

/// A store keeps one context of its own types as a prototype and hands out copies with each side effect's scope:
/// copying through the prototype's own witness table builds the existential without looking up
/// `SideEffectContext<S, D>`'s metadata and conformance on every side effect (unspecialised generic code would).
///
/// The copy is made in a protocol extension, generic over the conforming type, and its scope set through a
/// requirement: made in `SideEffectContext`'s own method, returning it as the existential looked up
/// `SideEffectContext<S, D>`'s metadata from `S` and `D` on every side effect; here the conformance hands that
/// metadata over (guarded by the callgrind gate's `side_effect_round_trip`).
@usableFromInline
protocol ScopedSideEffectContext: AnySideEffectContext {
    mutating func setScope(_ scope: HandleCell?)
    /// What every context of the store shares (its `ContextEnvironment<S, D>`): a side effect of the store's own types
    /// makes its typed context from it (`SideEffect._katanaRun(in:scope:)`).
    var environmentObject: AnyObject { get }
}

extension ScopedSideEffectContext {
    /// A copy with `scope`, as the erased context a side effect receives (returned as that existential directly: as an
    /// `any ScopedSideEffectContext` it was copied once more, and the store's reference retained, converting it).
    @usableFromInline
    func withScope(_ scope: HandleCell?) -> any AnySideEffectContext {
        var copy = self
        copy.setScope(scope)
        return copy
    }
}

extension SideEffectContext: ScopedSideEffectContext {
    @usableFromInline mutating func setScope(_ scope: HandleCell?) {
        self = SideEffectContext(environment: environment, scope: scope)
    }
    @usableFromInline var environmentObject: AnyObject { environment }
}

// MARK: - User intervals

extension SideEffectContext {
    /// Runs `body` as a named interval inside this side effect — the counterpart of an os_signpost interval: when a
    /// trace backend listens, `interval_begin`/`interval_end` events carry this side effect as their parent, so an
    /// app's network calls and heavy work show inside its side effects (babeltrace2, Perfetto, Trace Compass,
    /// `katana-trace analyze`). With nobody listening it costs one check. Returns what `body` returns; its
    /// error (or cancellation) ends the interval with that outcome and is rethrown.
    ///
    ///     let profile = try await context.interval("fetch profile") { try await api.profile(id) }
    @inlinable
    public func interval<T>(_ name: StaticString, _ body: () async throws -> T) async rethrows -> T {
        // The backend is asked through the environment (not copied here to live across `body`'s suspension points:
        // copying an existential costs more than the whole disabled path), and `body` has one call site, so with
        // nobody listening this inlines to one check around the body.
        let id = environment.intervalBegin(name, parentID: parentID)
        do {
            let result = try await body()
            if id != 0 { environment.intervalEnd(id, name, error: nil) }
            return result
        } catch {
            if id != 0 { environment.intervalEnd(id, name, error: error) }
            throw error
        }
    }
}
