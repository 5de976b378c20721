import Katana

/// A Redux middleware: given `getState` and the store's whole `dispatch` (which runs every middleware again),
/// returns a wrapper of `next` (the rest of the chain). Call `next(action)` to pass the action on, dispatch another
/// action instead, or return without either to drop it.
public typealias Middleware<S> = @Sendable (
    _ getState: @escaping @Sendable () -> S,
    _ dispatch: @escaping DispatchFunction
) -> @Sendable (_ next: @escaping DispatchFunction) -> DispatchFunction

/// Makes a store: ReduxKit's and ReSwift's `createStore`.
public typealias StoreCreator<S: Sendable> = (_ reducer: @escaping Reducer<S>, _ state: S?) -> ReduxStore<S>

/// A store reducing with `reducer` from `state` (or from `reducer(nil, DefaultAction())`).
public func createStore<S: Sendable>(reducer: @escaping Reducer<S>, state: S? = nil) -> ReduxStore<S> {
    ReduxStore(reducer: reducer, state: state)
}

/// A store whose dispatch runs through `middleware` first (the first element is outermost).
public func createStore<S: Sendable>(reducer: @escaping Reducer<S>, state: S? = nil, middleware: [Middleware<S>]) -> ReduxStore<S> {
    applyMiddleware(middleware)(createStore)(reducer, state)
}

/// ReduxKit's store enhancer: `applyMiddleware([logger, thunk])(createStore)(reducer, state)`. The first
/// middleware runs first; `dispatch` inside a middleware re-enters the whole chain; `getState` reads the current
/// state.
public func applyMiddleware<S: Sendable>(_ middleware: [Middleware<S>]) -> (@escaping StoreCreator<S>) -> StoreCreator<S> {
    { next in
        { reducer, state in
            let store = next(reducer, state)
            store.install(middleware)
            return store
        }
    }
}

/// An action creator bound to `dispatch`: `let add = bindActionCreators(Add.self, dispatch: store.dispatch)`,
/// then `try add(5)` makes `Add(payload: 5, meta: nil, error: false)` and dispatches it.
public func bindActionCreators<A: StandardAction>(
    _ type: A.Type, dispatch: @escaping DispatchFunction
) -> @Sendable (A.PayloadType?) throws -> DispatchHandle<Void> {
    { payload in try dispatch(A(payload: payload, meta: nil, error: false)) }
}

/// An action creator for a ``SimpleStandardAction``: `try add(5)` dispatches `Add(payload: 5)`.
public func bindActionCreators<A: SimpleStandardAction>(
    _ type: A.Type, dispatch: @escaping DispatchFunction
) -> @Sendable (A.PayloadType) throws -> DispatchHandle<Void> {
    { payload in try dispatch(A(payload: payload)) }
}
