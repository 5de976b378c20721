/// The single source of truth of an application. A value type; the store owns the only mutable copy.
public protocol State: Sendable {
    /// The state before the store's `stateInitializer` has produced the real one.
    init()
}

/// Anything that can be given to `Store.dispatch`: a ``StateUpdater`` or a side effect
/// (``SideEffect`` / ``ReturningSideEffect``). A type must be exactly one of the two kinds.
public protocol Dispatchable: Sendable {
    /// This item as a state updater, or `nil`. Katana's own kind check (a witness call instead of a runtime
    /// existential cast, which costs over a thousand instructions): leave it to the default implementations.
    var _katanaStateUpdater: (any AnyStateUpdater)? { get }
    /// This item as a side effect, or `nil` (see `_katanaStateUpdater`).
    var _katanaSideEffect: (any AnySideEffect)? { get }
}

extension Dispatchable {
    @inlinable public var _katanaStateUpdater: (any AnyStateUpdater)? { nil }
    @inlinable public var _katanaSideEffect: (any AnySideEffect)? { nil }
}

extension AnyStateUpdater {
    @inlinable public var _katanaStateUpdater: (any AnyStateUpdater)? { self }
}

extension AnySideEffect {
    @inlinable public var _katanaSideEffect: (any AnySideEffect)? { self }
}
