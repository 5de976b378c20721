/// What a side effect receives: the store's dependencies, its state, and a way to dispatch more items.
/// Items dispatched through a context are traced as children of the side effect (`parent_id`).
///
/// The context holds the store weakly: if the store is released while a side effect still runs, `getState()`
/// returns the state's `init()` value and dispatches are rejected with ``KatanaError/storeReleased``.
public struct SideEffectContext<S: State, D: SideEffectDependencyContainer>: Sendable {
    public let dependencies: D
    @usableFromInline weak var store: Store<S, D>?
    /// The trace id of the side effect this context belongs to (0 when tracing was off).
    public let parentID: UInt64
    /// The handle cell of the side effect this context belongs to: what it dispatches is cancelled with it.
    @usableFromInline let scope: HandleCell?

    @inlinable init(store: Store<S, D>, parentID: UInt64, scope: HandleCell?) {
        self.store = store
        self.dependencies = store.dependencies
        self.parentID = parentID
        self.scope = scope
    }

    /// Whether the side effect this context belongs to was cancelled (``DispatchHandle/cancel()`` or its store was
    /// released). Its body also sees `Task.isCancelled`.
    public var isCancelled: Bool { scope?.isCancelled ?? false }

    /// The state as of now: it reflects every updater whose handle has resolved.
    @inlinable public func getState() -> S { store?.state ?? S() }

    @inlinable @discardableResult
    public func dispatch<U: StateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        guard let store else { return .rejected(KatanaError.storeReleased) }
        if let scope, scope.isCancelled { return .rejected(CancellationError()) }
        return store.dispatchUpdater(updater, parentID: parentID)
    }

    @inlinable @discardableResult
    public func dispatch<U: ThrowingStateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        guard let store else { return .rejected(KatanaError.storeReleased) }
        if let scope, scope.isCancelled { return .rejected(CancellationError()) }
        return store.dispatchUpdater(updater, parentID: parentID)
    }

    @inlinable @discardableResult
    public func dispatch<E: SideEffect>(_ sideEffect: E) -> DispatchHandle<Void> {
        guard let store else { return .rejected(KatanaError.storeReleased) }
        return adopted(store.dispatchSideEffect(sideEffect, parentID: parentID, as: Void.self))
    }

    @inlinable @discardableResult
    public func dispatch<E: ReturningSideEffect>(_ sideEffect: E) -> DispatchHandle<E.ReturnValue> {
        guard let store else { return .rejected(KatanaError.storeReleased) }
        return adopted(store.dispatchSideEffect(sideEffect, parentID: parentID, as: E.ReturnValue.self))
    }

    @discardableResult
    public func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable> {
        guard let store else { return .rejected(KatanaError.storeReleased) }
        if let scope, scope.isCancelled { return .rejected(CancellationError()) }
        return adopted(store.anyDispatch(item, parentID: parentID))
    }

    /// Ties a dispatched item's handle to this context's side effect, so cancelling it cancels the item.
    @inlinable
    func adopted<V>(_ handle: DispatchHandle<V>) -> DispatchHandle<V> {
        if let scope, case let .pending(cell) = handle.storage { scope.adopt(cell) }
        return handle
    }
}

/// The erased context: what interceptors and ``AnySideEffect`` receive.
public struct AnySideEffectContext: Sendable {
    @usableFromInline weak var store: (any StoreInternals)?
    public let parentID: UInt64
    @usableFromInline let scope: HandleCell?

    @inlinable init(store: any StoreInternals, parentID: UInt64, scope: HandleCell? = nil) {
        self.store = store
        self.parentID = parentID
        self.scope = scope
    }

    /// Whether the side effect this context belongs to was cancelled.
    public var isCancelled: Bool { scope?.isCancelled ?? false }

    /// The store's dependencies, or `nil` if the store is gone.
    public var anyDependencies: (any SideEffectDependencyContainer)? { store?.anyDependencies }

    /// The store's current state, or `nil` if the store is gone.
    public func getAnyState() -> (any State)? { store?.anyState }

    /// Dispatches any item as a child of this context's side effect (cancelled with it).
    @discardableResult
    public func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable> {
        guard let store else { return .rejected(KatanaError.storeReleased) }
        if let scope, scope.isCancelled { return .rejected(CancellationError()) }
        let handle = store.anyDispatch(item, parentID: parentID)
        if let scope, case let .pending(cell) = handle.storage { scope.adopt(cell) }
        return handle
    }

    /// The typed context for a side effect declaring `S` and `D`.
    public func typed<S: State, D: SideEffectDependencyContainer>(_: S.Type, _: D.Type) throws -> SideEffectContext<S, D> {
        guard let store else { throw KatanaError.storeReleased }
        guard let typed = store as? Store<S, D> else {
            throw KatanaError.contextTypeMismatch(expected: "Store<\(S.self), \(D.self)>", got: "\(type(of: store))")
        }
        return SideEffectContext(store: typed, parentID: parentID, scope: scope)
    }
}
