/// A Redux reducer: the next state from the current one (`nil` before there is any) and an action. Reducers must
/// be pure and quick: they run one at a time, in dispatch order, while every other action waits.
public typealias Reducer<S> = @Sendable (_ state: S?, _ action: any Action) -> S

/// One reducer from several for the same state, applied in order: each gets the previous one's result.
public func combineReducers<S>(_ reducers: [Reducer<S>]) -> Reducer<S> {
    precondition(!reducers.isEmpty, "combineReducers needs at least one reducer")
    return { state, action in
        var current = state
        for reducer in reducers { current = reducer(current, action) }
        return current!
    }
}

/// One reducer from several for the same state (variadic form of ``combineReducers(_:)-([Reducer<S>])``).
public func combineReducers<S>(_ reducers: Reducer<S>...) -> Reducer<S> { combineReducers(reducers) }

/// One part of a state reduced by its own reducer: build them with ``part(_:_:)`` and join them with
/// ``combineReducers(_:initial:)`` (Redux's keyed `combineReducers`).
public struct ReducerPart<S: Sendable>: Sendable {
    let reduce: @Sendable (_ whole: inout S, _ isInitial: Bool, _ action: any Action) -> Void
}

/// The part of the state at `keyPath`, reduced by `reducer`. On the very first action (no state yet) the part's
/// reducer gets `nil`, so it supplies the part's initial value, exactly as with a whole-state reducer.
public func part<S, Part>(_ keyPath: WritableKeyPath<S, Part> & Sendable, _ reducer: @escaping Reducer<Part>) -> ReducerPart<S> {
    ReducerPart { whole, isInitial, action in
        whole[keyPath: keyPath] = reducer(isInitial ? nil : whole[keyPath: keyPath], action)
    }
}

/// A whole-state reducer from one reducer per part. The state type's `init()` gives the parts nobody reduces.
public func combineReducers<S: Sendable>(_ parts: [ReducerPart<S>], initial: @escaping @Sendable () -> S) -> Reducer<S> {
    { state, action in
        var whole = state ?? initial()
        for part in parts { part.reduce(&whole, state == nil, action) }
        return whole
    }
}
