import Dispatch

// Katana 6's names where this port spells things differently: thin aliases and initialisers that only forward, so
// Katana 6 code compiles unchanged (apart from Hydra → async/await). The Migrating from Katana 6 article has the table.

/// Katana 6's name for the `dispatch` a dependency container receives (``AnyDispatch``).
public typealias PromisableStoreDispatch = AnyDispatch

/// Katana 6's erased listener: `(oldState, newState)` as `any State` (see ``PartialStore/addAnyListener(_:)``).
public typealias AnyStoreListener = @Sendable (_ oldState: any State, _ newState: any State) -> Void

/// Katana 6's typed listener (what ``PartialStore/addListener(_:)`` takes).
public typealias StoreListener<S: State> = @Sendable (_ oldState: S, _ newState: S) -> Void

/// Katana 6's state initializer closure (what `Store.init(interceptors:stateInitializer:configuration:)` takes).
public typealias StateInitializer<S: State> = @Sendable () -> S

extension PartialStore {
    /// Katana 6's `addAnyListener`: ``addListener(_:)`` with the states erased.
    @discardableResult
    public final func addAnyListener(_ listener: @escaping AnyStoreListener) -> StoreUnsubscribe {
        addListener { old, new in listener(old, new) }
    }
}

extension StoreConfiguration {
    /// Katana 6's spelling: the state initializer and the listeners each on a dispatch queue, the main queue unless
    /// given (as in Katana 6 — on Linux the main queue runs only under `dispatchMain()`, which is why this port's own
    /// default is ``StoreExecutor/inline``). Forwards to `init(stateInitializerExecutor:listenerExecutor:)`.
    public init(stateInitializerAsyncProvider: DispatchQueue, listenersAsyncProvider: DispatchQueue = .main) {
        self.init(stateInitializerExecutor: .queue(stateInitializerAsyncProvider), listenerExecutor: .queue(listenersAsyncProvider))
    }

    /// Katana 6's spelling with only the listeners' queue given (the state initializer on the main queue, as in
    /// Katana 6).
    public init(listenersAsyncProvider: DispatchQueue) {
        self.init(stateInitializerAsyncProvider: .main, listenersAsyncProvider: listenersAsyncProvider)
    }
}

extension Store {
    /// Katana 6's name for how a store builds its dependencies (what `init(…dependenciesInitializer:…)` takes).
    public typealias DependenciesInitializer = (_ dispatch: @escaping AnyDispatch, _ getState: @escaping GetState) -> D
}

extension Dispatchable {
    /// Katana 6's description of a dispatched item: its type's full name (what `DispatchableLogger` logs).
    public var debugDescription: String { String(reflecting: type(of: self)) }
}
