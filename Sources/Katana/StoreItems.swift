import KatanaTrace
import Synchronization

/// An updater waiting in the lane. `cell` is nil only for the caller's own item on the inline path.
@usableFromInline
struct LaneItem {
    @usableFromInline var updater: any AnyStateUpdater
    @usableFromInline var cell: HandleCell?
    @usableFromInline var id: UInt64
    @usableFromInline var parentID: UInt64
    @usableFromInline var name: TraceName?
    @usableFromInline var bypass: Bool
    /// The producer slot it counts against in the lane (`LaneQueue.noSlot`: none).
    @usableFromInline var slot: UInt8 = LaneQueue.noSlot

    @inlinable
    init(updater: any AnyStateUpdater, cell: HandleCell?, id: UInt64, parentID: UInt64, name: TraceName?, bypass: Bool) {
        self.updater = updater
        self.cell = cell
        self.id = id
        self.parentID = parentID
        self.name = name
        self.bypass = bypass
    }
}

@usableFromInline
struct SideEffectItem: Sendable {
    @usableFromInline var sideEffect: any AnySideEffect
    @usableFromInline var cell: HandleCell
    @usableFromInline var id: UInt64
    @usableFromInline var parentID: UInt64
    @usableFromInline var name: TraceName?
    @usableFromInline var bypass: Bool

    @inlinable
    init(sideEffect: any AnySideEffect, cell: HandleCell, id: UInt64, parentID: UInt64, name: TraceName?, bypass: Bool) {
        self.sideEffect = sideEffect
        self.cell = cell
        self.id = id
        self.parentID = parentID
        self.name = name
        self.bypass = bypass
    }
}

@usableFromInline
enum HeldItem {
    case updater(LaneItem)
    case sideEffect(SideEffectItem)
}

@usableFromInline
final class ListenerBox<S: State>: Sendable {
    /// An `(old, new)` listener, or nil for a new-state one.
    @usableFromInline let listener: (@Sendable (S, S) -> Void)?
    /// A new-state listener (`addListener(newState:)`), or nil.
    @usableFromInline let newStateListener: (@Sendable (S) -> Void)?
    @usableFromInline let active = Atomic<Bool>(true)

    @inlinable
    init(_ listener: @escaping @Sendable (S, S) -> Void) {
        self.listener = listener
        newStateListener = nil
    }

    @inlinable
    init(newState listener: @escaping @Sendable (S) -> Void) {
        self.listener = nil
        newStateListener = listener
    }

    /// Whether it needs the state before each change (so the store must keep a copy of it).
    @inlinable var needsOldState: Bool { listener != nil }

    @usableFromInline
    func deactivate() { active.store(false, ordering: .releasing) }

    @inlinable
    func call(_ old: S, _ new: S) {
        guard active.load(ordering: .acquiring) else { return }
        if let listener { listener(old, new) } else { newStateListener?(new) }
    }

    /// For a batch delivered without old states (no listener needs them).
    @inlinable
    func call(new: S) {
        guard active.load(ordering: .acquiring) else { return }
        if let newStateListener { newStateListener(new) } else { listener?(new, new) }
    }
}
