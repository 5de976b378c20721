/// The type-erased form of ``StateUpdater``. Conform to ``StateUpdater`` instead; this protocol is what
/// interceptors and `anyDispatch` see.
public protocol AnyStateUpdater: Dispatchable {
    /// Katana's erased form: returns a new state built from `currentState`.
    /// Throws ``KatanaError/stateTypeMismatch(expected:got:)`` (`expected`: the state given, `got`: this updater)
    /// when `currentState` is not the updater's state type.
    func updatedState(currentState: any State) throws -> any State

    /// Applies the updater in place to the state at `state`, of type `T`. The store calls this: it avoids copying the
    /// state. A pointer rather than an `inout` argument, so an updater of the same state type changes it through the
    /// pointer rebound to its `StateType` here, with no helper to take the pointer in: the store's dispatch walk
    /// (`make walk`) and, for an updater applied through an existential, a generic call less (the callgrind gate's
    /// `interceptors_3`). Throws ``KatanaError/stateTypeMismatch(expected:got:)`` when `T` is not the updater's state
    /// type. (Its implementations, one per kind of updater, sit with the store's code that calls them:
    /// `Engine/UpdaterLane.swift`.)
    func _apply<T: State>(at state: UnsafeMutablePointer<T>) throws(KatanaError)
}

/// A pure, synchronous change of the state. The store applies updaters one at a time, in dispatch order.
///
/// `updateState` runs while the store holds its state lock: it must not read or dispatch to the store
/// (use a ``SideEffect`` for that) and should be quick, since every other updater waits for it.
public protocol StateUpdater<StateType>: AnyStateUpdater {
    /// The state this updater changes.
    associatedtype StateType: State
    /// Changes `state` in place: pure and quick, applied under the store's state lock, one updater at a time.
    func updateState(_ state: inout StateType)
}

extension StateUpdater {
    public func updatedState(currentState: any State) throws -> any State {
        guard var typed = currentState as? StateType else {
            throw KatanaError.stateTypeMismatch(expected: "\(type(of: currentState))", got: "\(Self.self)")
        }
        updateState(&typed)
        return typed
    }
}

/// A state updater built from a closure: `store.dispatch(ClosureStateUpdater { $0.counter += 1 })`-style code in
/// tests and small tools, where declaring a type would be noise.
public struct ClosureStateUpdater<StateType: State>: StateUpdater {
    private let body: @Sendable (inout StateType) -> Void

    /// An updater that runs `update` on the state.
    public init(_ body: @escaping @Sendable (inout StateType) -> Void) { self.body = body }

    /// Runs the closure on the state.
    public func updateState(_ state: inout StateType) { body(&state) }
}

/// A state updater that can refuse: `updateState` throws instead of changing the state (a request that does not
/// apply to the current state, say). The store then leaves the state exactly as it was — the updater works on a
/// copy that replaces the state only when it returns — tells no listener, traces the dispatch with outcome
/// `error`, and rejects the dispatch handle with the thrown error.
///
/// The copy is what makes a refusal leave no trace, and it has a price: a collection of the state that the updater
/// changes is copied whole (the state before still holds it), on every dispatch that changes it. For a large state,
/// an updater that can decide before it changes anything is a ``ValidatingStateUpdater``: it changes the state in
/// place (`katana-bench micro --only refusable-updaters`).
public protocol ThrowingStateUpdater<StateType>: AnyStateUpdater {
    /// The state this updater changes.
    associatedtype StateType: State
    /// Changes `state` in place, or throws to leave it unchanged (the handle rejects with the error).
    func updateState(_ state: inout StateType) throws
}

extension ThrowingStateUpdater {
    public func updatedState(currentState: any State) throws -> any State {
        guard var typed = currentState as? StateType else {
            throw KatanaError.stateTypeMismatch(expected: "\(type(of: currentState))", got: "\(Self.self)")
        }
        try updateState(&typed)
        return typed
    }
}

/// A state updater that can refuse, and decides whether it does before it changes anything: `validate` reads the
/// state and throws to refuse; `updateValidatedState` then changes it and cannot fail. The store applies it as a
/// ``ThrowingStateUpdater`` — a refusal leaves the state as it was, tells no listener, traces the dispatch with
/// outcome `error` and rejects the handle with the error — but changes the state in place, where a
/// ``ThrowingStateUpdater`` works on a copy: a large state's collections are not copied on each dispatch.
///
/// ```swift
/// struct Withdraw: ValidatingStateUpdater {
///     let amount: Int
///     func validate(_ state: Account) throws {
///         guard state.balance >= amount else { throw AccountError.insufficientFunds }
///     }
///     func updateValidatedState(_ state: inout Account) { state.balance -= amount }
/// }
/// ```
public protocol ValidatingStateUpdater<StateType>: ThrowingStateUpdater {
    /// The state this updater changes (restated so a conforming type's `validate` and `updateValidatedState` name it).
    associatedtype StateType
    /// Throws when the updater does not apply to `state` (the handle rejects with the error); returns to let
    /// `updateValidatedState` change it.
    func validate(_ state: StateType) throws
    /// Changes `state` in place; called only after `validate` returned for this same state.
    func updateValidatedState(_ state: inout StateType)
}

extension ValidatingStateUpdater {
    /// `validate`, then `updateValidatedState`: the updater as a ``ThrowingStateUpdater`` (for code that applies
    /// updaters itself, as Katana's `updatedState(currentState:)` does).
    public func updateState(_ state: inout StateType) throws {
        try validate(state)
        updateValidatedState(&state)
    }
}
