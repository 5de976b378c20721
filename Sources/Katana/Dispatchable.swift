/// The single source of truth of an application. A value type; the store owns the only mutable copy.
public protocol State: Sendable {
    /// The state before the store's `stateInitializer` has produced the real one.
    init()
}

/// Anything that can be given to `Store.dispatch`: a ``StateUpdater`` or a side effect
/// (``SideEffect`` / ``ReturningSideEffect``). A type must be exactly one of the two kinds.
public protocol Dispatchable: Sendable {}
