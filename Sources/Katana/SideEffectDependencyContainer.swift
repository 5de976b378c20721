/// Dispatches any item; what a dependency container and middleware receive.
public typealias AnyDispatch = @Sendable (any Dispatchable) -> DispatchHandle<any Sendable>
/// Reads the store's current state.
public typealias GetState = @Sendable () -> any State

/// Everything side effects need from the outside world (API clients, clocks, storage), created once per store
/// and handed to every side effect as `context.dependencies`. Tests substitute a container of fakes.
public protocol SideEffectDependencyContainer: Sendable {
    /// Made once per store, with the store's `dispatch` and `getState` (held weakly: the container does not keep
    /// the store alive).
    init(dispatch: @escaping AnyDispatch, getState: @escaping GetState)
}

/// The container for stores whose side effects need no dependencies.
public struct EmptySideEffectDependencyContainer: SideEffectDependencyContainer {
    /// A container with nothing in it.
    public init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {}
}
