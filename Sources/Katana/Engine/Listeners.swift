import Synchronization

// Listeners: changing the list (`PartialStore.addListener` registers and unsubscribes), the boxes they live in, and telling them of a change. (When a change
// is delivered — now, for an updater applied inline, or after a batch — is `applyAndNotify`'s, `UpdaterLane.swift`,
// and `deliverChanges`', `Applying.swift`.)
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

extension Array {
    /// Tells every listener in this list still subscribed of a change. Each box is called without being retained:
    /// the list, which the caller holds for the whole loop, keeps them all alive (`for listener in listeners`
    /// retained and released each one: two atomic operations per listener per change; the callgrind gate's
    /// `listeners_4`).
    @inlinable @inline(__always)
    func tell<S: State>(_ old: S, _ new: S) where Element == ListenerBox<S> {
        withUnsafeBufferPointer { boxes in
            for index in boxes.indices {
                Unmanaged.passUnretained(boxes[index])._withUnsafeGuaranteedRef {
                    if $0.active.load(ordering: .acquiring) { $0.listener(old, new) }
                }
            }
        }
    }

    /// Tells every new-state listener in this list of a change (no listener needs the old state), as
    /// ``tell(_:_:)`` does.
    @inlinable @inline(__always)
    func tell<S: State>(new: S) where Element == ListenerBox<S> {
        tell(new, new)
    }

    /// Tells every new-state listener of a change to the state where it lies, lent to each, not copied. A copy
    /// retains what the state holds by reference and releases it after: a pair of atomic operations per change for a
    /// state with an array (callgrind, `katana-bench micro --only state-size`). `inout` is what lets the compiler
    /// lend it: nothing else may touch the state for the call's length. The caller holds the updater lane, so nothing
    /// changes the state until it gives the lane back (a listener's own dispatch is queued behind it), and other
    /// threads only read it, under the state lock (`whatAListenerIsHandedStaysAsItWasWhileItDispatches`).
    @inlinable @inline(__always)
    func tell<S: State>(inPlace new: inout S) where Element == ListenerBox<S> {
        tell(new, new)
    }
}
