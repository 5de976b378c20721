import Synchronization

// Listeners: changing the list (`PartialStore.addListener` registers and unsubscribes), and the boxes they live in.
// Telling them of a change is `tell`'s (`UpdaterLane.swift`); when a change is delivered — now, for an updater applied
// inline, or after a batch — is `applyAndNotify`'s (`UpdaterLane.swift`) and `deliverChanges`' (`Applying.swift`).
extension StoreEngine {
    /// The listeners for the items the lane holder applies next through the batch path, with `keepOldStates` set
    /// for them (whether each change must keep the state before it). Caller holds `laneLock` and the lane.
    @inlinable
    final func listenersForBatch() -> [ListenerBox<S>] {
        keepOldStates = listenersNeedOldState
        return listeners
    }

    /// Changes the listeners with both locks held: the state lock (an updater applied inline reads them under it,
    /// having taken the lane lock-free) and `laneLock` (the batch paths read them under it), in that order. From
    /// inside an updater this store is applying on this thread (a misuse), the state lock is this thread's already.
    final func changeListeners(_ change: (inout [ListenerBox<S>]) -> Void) {
        let applying = lockedState.isHeldByThisThread
        if !applying { lockedState.lock() }
        laneLock.lock()
        change(&listeners)
        listenersNeedOldState = listeners.contains { $0.needsOldState }
        laneLock.unlock()
        if !applying { lockedState.unlock() }
    }
}

@usableFromInline
final class ListenerBox<S: State>: Sendable {
    /// Called with `(old, new)`; a new-state listener is wrapped to ignore `old` (one closure either way: an optional
    /// per form cost unwrapping and reference counting on every call: the callgrind gate's `listeners_4`).
    @usableFromInline let listener: @Sendable (S, S) -> Void
    /// Whether it needs the state before each change (so the store must keep a copy of it).
    @usableFromInline let needsOldState: Bool
    @usableFromInline let active = Atomic<Bool>(true)

    @inlinable
    init(_ listener: @escaping @Sendable (S, S) -> Void) {
        self.listener = listener
        needsOldState = true
    }

    @inlinable
    init(newState listener: @escaping @Sendable (S) -> Void) {
        self.listener = { _, new in listener(new) }
        needsOldState = false
    }

    @usableFromInline
    func deactivate() { active.store(false, ordering: .releasing) }
}
