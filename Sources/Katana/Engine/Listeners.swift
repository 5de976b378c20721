import Synchronization

// Listeners: changing the list (`PartialStore.addListener` registers and unsubscribes), and the boxes they live in.
// Telling them of a change is `tell`'s (`UpdaterLane.swift`); when a change is delivered — now, for an updater applied
// inline, or after a batch — is `applyAndNotify`'s (`UpdaterLane.swift`) and `deliverChanges`' (`Applying.swift`).
extension StoreEngine {
    /// Changes the listeners with both locks held: the state lock (an updater applied inline reads them under it,
    /// having taken the lane lock-free) and `laneLock` (the batch paths read them under it), in that order. From
    /// inside an updater this store is applying on this thread (a misuse), the state lock is this thread's already.
    /// The list replaced is let go after both locks are given back (what a listener holds may dispatch when it is
    /// released), or later, when the lane is given up (``keepWhileLaneHeld(_:)``).
    final func changeListeners(_ change: (inout [ListenerBox<S>]) -> Void) {
        let applying = lockedState.isHeldByThisThread
        if !applying { lockedState.lock() }
        laneLock.lock()
        var boxes = Array(listeners.boxes)
        change(&boxes)
        let replaced = listeners
        listeners = ListenerList(boxes)
        keepWhileLaneHeld(replaced)
        laneLock.unlock()
        if !applying { lockedState.unlock() }
        extendLifetime(replaced)
    }

    /// A thread that took the lane lock-free reads the listeners under the state lock and tells them after giving
    /// that lock back, without a reference of its own (`applyAndNotify`): a list replaced while the lane is held stays
    /// until the lane is given up. Marking the word `queued` makes the holder's lock-free give-back fail, so it gives
    /// the lane up under `laneLock` (`drainBatch`, `helpDrain`), which lets the list go. Caller holds `laneLock`.
    /// (`ListenerTests.aListenerUnsubscribedFromAnotherThreadDuringADeliveryIsReleasedAfterItOutsideTheLocks`,
    /// `listenersReplacedDuringEveryDeliveryDoNotPileUp`.)
    final func keepWhileLaneHeld(_ replaced: ListenerList<S>) {
        if laneWord.markQueuedIfHeld() { replacedListeners.append(replaced) }
    }
}

/// A store's listeners as one list that never changes: a change of them makes a new one (`changeListeners`). The
/// boxes sit in memory the list owns, so the thread that applies an updater reads them as a plain pointer and count
/// under the state lock and tells them after, with no reference counted per change (an array it kept was one
/// retain and one release per dispatch: the callgrind gate's `fire_and_forget`). What keeps that memory alive while
/// it tells them: `StoreEngine.keepWhileLaneHeld(_:)`.
@usableFromInline
final class ListenerList<S: State>: @unchecked Sendable {
    // Why @unchecked Sendable is sound: both fields are set in `init` and never changed; the memory `boxes` points to
    // is written there and only read after.
    @usableFromInline let boxes: UnsafeBufferPointer<ListenerBox<S>>
    /// Whether any listener takes `(old, new)`: then every change keeps a copy of the state before it.
    @usableFromInline let needsOldState: Bool

    init(_ boxes: [ListenerBox<S>]) {
        if boxes.isEmpty {
            self.boxes = UnsafeBufferPointer(start: nil, count: 0)
        } else {
            let memory = UnsafeMutableBufferPointer<ListenerBox<S>>.allocate(capacity: boxes.count)
            _ = memory.initialize(from: boxes)
            self.boxes = UnsafeBufferPointer(memory)
        }
        needsOldState = boxes.contains { $0.needsOldState }
    }

    deinit {
        UnsafeMutableBufferPointer(mutating: boxes).deinitialize()
        boxes.deallocate()
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
