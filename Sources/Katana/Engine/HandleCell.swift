import Dispatch
import Synchronization

/// The shared, one-shot completion behind a pending handle. Not generic, so the lane resolves a batch of
/// handles without any runtime type lookups; the value is checked against the handle's type when awaited.
/// Every cell of a store shares the store's completion lock, so a batch resolves under one acquisition.
///
/// A cell also carries its item's cancellation: `phase` says whether the item is still waiting (in the lane, kept
/// until ready, or not yet started), running, or cancelled. The lane and the side-effect runner *claim* an item (waiting →
/// running) before they run it; `cancel()` wins only against a waiting item (which is then never run) or asks a
/// running side effect to stop. The claim is one compare-and-swap, so no item is both cancelled and applied.
@usableFromInline
final class HandleCell: @unchecked Sendable {
    // `outcome`, the waiters, `task`, `children` and `nextToken` are guarded by `lock`; `acceptsVoid` is
    // immutable; `phase` is atomic.
    @usableFromInline typealias Outcome = Result<any Sendable, any Error>
    @usableFromInline typealias Waiter = (token: UInt64, continuation: UnsafeContinuation<Outcome, Never>)

    @usableFromInline enum Phase {
        @usableFromInline static let waiting: UInt8 = 0
        @usableFromInline static let running: UInt8 = 1
        /// Cancelled before it ran: it never will; the handle already carries `CancellationError`.
        @usableFromInline static let cancelledBeforeStart: UInt8 = 2
        /// A running side effect asked to stop: its task is cancelled; the handle rejects when the body ends.
        @usableFromInline static let cancelRequested: UInt8 = 3
    }

    @usableFromInline let lock: Lock
    /// Whether `()` is an acceptable value (the handle of a state updater, a side effect or `anyDispatch`).
    /// Such handles only report completion, whatever the item (or an interceptor's replacement) produced.
    @usableFromInline let acceptsVoid: Bool
    @usableFromInline let phase = Atomic<UInt8>(Phase.waiting)
    /// Whether the cell is resolved; `outcome` is meaningful only then. Two plain fields rather than an optional
    /// `Result`: an optional of a multi-payload enum of existentials is tested and copied through the runtime's
    /// generic enum functions (the callgrind gate's `side_effect_round_trip`).
    @usableFromInline @exclusivity(unchecked) var isDone = false
    @usableFromInline @exclusivity(unchecked) var outcome: Outcome = .success(())  // written only when resolved
    @usableFromInline @exclusivity(unchecked) var waiter: Waiter?
    @usableFromInline @exclusivity(unchecked) var moreWaiters: [Waiter] = []
    /// Waiters whose task was cancelled before they were registered (rare).
    @usableFromInline @exclusivity(unchecked) var cancelledTokens: [UInt64] = []
    @usableFromInline @exclusivity(unchecked) var nextToken: UInt64 = 0
    /// The task running a side effect's body, so `cancel()` can cancel it (never fails: see `StoreEngine.start`).
    /// Kept after the cell resolves, until the cell goes, as a `Task` handle keeps its task: a finished task is its
    /// 304-byte object alone (the runtime releases its closure, which holds this cell, when it completes), and
    /// releasing it on resolution freed that object on the pool thread, from the dispatching thread's malloc arena —
    /// one locked free more per side effect than a plain `Task`, contending with the dispatching thread's mallocs for
    /// the arena's lock (`katana-bench micro --only side-effects` with many side effects in flight: twice as slow).
    @usableFromInline @exclusivity(unchecked) var task: Task<Void, any Error>?
    /// Side effects dispatched through this side effect's context (finished ones are pruned now and then):
    /// cancelled with it. They share this cell's lock (one per store), so their outcomes can be read under it.
    @usableFromInline @exclusivity(unchecked) var children: [HandleCell] = []
    @usableFromInline @exclusivity(unchecked) var pruneChildrenAt = 8
    /// A side effect's trace id (0: not traced), what its context reports as `parentID`. Written by `start` before
    /// the side effect's task exists, read only from inside that task.
    @usableFromInline @exclusivity(unchecked) var traceID: UInt64 = 0
    /// A running side effect's neighbours in its store's list of running side effects (`SideEffectRegistry`),
    /// guarded by the registry's lock, valid while the cell is in the list. Unretained: a running side effect's task
    /// holds its cell until it has left the list (each link retained was four reference-count operations more per
    /// side effect, on cells other threads touch).
    @usableFromInline @exclusivity(unchecked) var runningNext: Unmanaged<HandleCell>?
    @usableFromInline @exclusivity(unchecked) var runningPrevious: Unmanaged<HandleCell>?

    /// The cell of a pending handle whose value is `V` (a `Void` or erased handle accepts an updater's `()`).
    /// Not inlinable: an inlinable initialiser calls a function per field's initial value (its declaration's), where
    /// this one sets them in its own body — thirteen functions of the side-effect walk (`make walk`) for one call
    /// more per new cell (a queued updater's cell is mostly reused; the callgrind gate's `side_effect_round_trip`).
    /// `Void` is asked first: a `Void` handle's cell (every updater's, most side effects') never looks up the erased
    /// type's metadata.
    @usableFromInline
    init<V: Sendable>(lock: Lock, for _: V.Type) {
        self.lock = lock
        acceptsVoid = V.self == Void.self || V.self == (any Sendable).self
    }

    @usableFromInline var isResolved: Bool { lock.withLock { isDone } }

    /// Resolves the cell with `result` and resumes its waiters. Must be called with `lock` held. Later calls are
    /// ignored.
    @inlinable
    func resolveLocked(_ result: Outcome) {
        guard !isDone else { return }
        outcome = result
        resolveLocked()
    }

    /// Resolves the cell with `outcome` as it stands — `.success(())`, an updater applied, unless `resolveLocked(_:)`
    /// wrote another — and resumes its waiters. Must be called with `lock` held. Later calls are ignored. The lane
    /// resolves whole batches of applied updaters here without writing `outcome` (each write of the existential pair
    /// went through `Result`'s witnesses), and copies it only for a waiter (the callgrind gate's
    /// `awaited_round_trip`, `side_effect_round_trip`). Only such a cell is reused (`resetLocked`).
    ///
    /// The waiters are resumed under the completion lock. Resuming a task takes that task's status lock, and a task
    /// being cancelled runs its cancellation handlers under it: safe only because the one handler that touches this
    /// lock, `stopWaiting`, never waits for it (see there). Resuming under the lock also orders the resume before the
    /// waiter's next look at the cell, as ThreadSanitizer needs to see it.
    @inlinable
    func resolveLocked() {
        lock.assertHeldByThisThread("a handle resolved without the completion lock")
        guard !isDone else { return }
        isDone = true
        if waiter != nil {
            waiter?.continuation.resume(returning: outcome)
            waiter = nil
            if !moreWaiters.isEmpty {
                for other in moreWaiters { other.continuation.resume(returning: outcome) }
                moreWaiters = []
            }
        }
        if !children.isEmpty { children = [] }
    }

    /// Makes a resolved cell nobody else references a new, waiting one (for a queued updater: its own lock's
    /// `acceptsVoid`, no trace id). Must be called with `lock` held, and only with the caller's reference the only one.
    @inlinable
    func resetLocked() {
        lock.assertHeldByThisThread("a handle reset without the completion lock")
        assert(isDone && waiter == nil && moreWaiters.isEmpty, "a cell reused before it was resolved")
        // Only a cell resolved as applied is reused, so `outcome` still holds the `.success(())` that
        // `resolveLocked()` hands the next waiters.
        if case .failure = outcome { assertionFailure("a cell reused after it was resolved with an error") }
        phase.store(Phase.waiting, ordering: .relaxed)
        isDone = false
        // A side effect's cell that an interceptor gave to an updater in its place still holds the side effect's
        // finished task: the new item must not cancel it (nor keep it).
        if task != nil { task = nil }
        if !cancelledTokens.isEmpty { cancelledTokens = [] }
        traceID = 0
    }

    @inlinable
    func resolve(_ result: Outcome) {
        lock.lock()
        resolveLocked(result)
        lock.unlock()
    }

    // MARK: Claiming and cancelling

    /// Takes a side effect's item to start it: `true` if it was waiting, or if it is the handle of a queued updater
    /// that the lane claimed before an interceptor put this side effect in its place (running; or asked to stop since,
    /// which the body then sees); `false` if it was cancelled before it started (its handle already says so), and
    /// then it must not run. Taking the lane's claim for a cancellation dropped the side effect and left its handle
    /// pending for ever (`DispatchInterceptorTests.aQueuedUpdaterReplacedByASideEffectRunsItAndResolvesItsHandle`).
    @inlinable
    func claim() -> Bool {
        let (claimed, found) = phase.compareExchange(expected: Phase.waiting, desired: Phase.running,
                                                     ordering: .acquiringAndReleasing)
        return claimed || found != Phase.cancelledBeforeStart
    }

    /// Takes a lane item to apply it: `true` if it was waiting, or was claimed already by the side effect an
    /// interceptor replaced with it; `false` if it was cancelled (then it must not be applied).
    /// One compare-and-swap: what it found, when it did not claim the item, is the phase to judge by (a second look
    /// could only see a later one).
    @inlinable
    func claimForLane() -> Bool {
        let (claimed, found) = phase.compareExchange(expected: Phase.waiting, desired: Phase.running,
                                                     ordering: .acquiringAndReleasing)
        return claimed || found == Phase.running
    }

    /// Whether a running side effect was asked to stop (or a waiting item was cancelled).
    @inlinable
    var isCancelled: Bool {
        let now = phase.load(ordering: .acquiring)
        return now == Phase.cancelRequested || now == Phase.cancelledBeforeStart
    }

    /// Cancels the item: a waiting one never runs and is rejected with `CancellationError` now; a running side effect
    /// has its task cancelled (and its children's), and is rejected when its body ends. A finished item is left alone.
    @usableFromInline
    func cancel() {
        while true {
            let now = phase.load(ordering: .acquiring)
            if now == Phase.waiting {
                if phase.compareExchange(expected: now, desired: Phase.cancelledBeforeStart, ordering: .acquiringAndReleasing).exchanged {
                    resolve(.failure(CancellationError()))
                    return
                }
            } else if now == Phase.running {
                if phase.compareExchange(expected: now, desired: Phase.cancelRequested, ordering: .acquiringAndReleasing).exchanged {
                    lock.lock()
                    let task = isDone ? nil : self.task
                    let children = self.children
                    lock.unlock()
                    // Outside the lock: cancelling a task runs its cancellation handlers (see `stopWaiting`).
                    lock.assertNotHeldByThisThread("a task is cancelled under the completion lock")
                    task?.cancel()
                    for child in children { child.cancel() }
                    return
                }
            } else {
                return
            }
        }
    }

    /// Records the task running this side effect's body; cancels it at once if cancellation came first.
    @usableFromInline
    func attach(_ task: Task<Void, any Error>) {
        lock.lock()
        if !isDone { self.task = task }
        lock.unlock()
        if isCancelled {
            lock.assertNotHeldByThisThread("a task is cancelled under the completion lock")
            task.cancel()
        }
    }

    /// Registers a side effect dispatched through this one's context, to be cancelled with it; cancels the child at
    /// once if this one is cancelled already.
    @usableFromInline
    func adopt(_ child: HandleCell) {
        lock.lock()
        if isCancelled || isDone {
            lock.unlock()
            child.cancel()
            return
        }
        if children.count >= pruneChildrenAt {
            children.removeAll { $0.isDone }  // same lock: every cell of a store shares it
            pruneChildrenAt = max(8, children.count * 2)
        }
        children.append(child)
        lock.unlock()
    }

    // MARK: Waiting

    /// Waits for the outcome. A cancelled waiting task stops waiting at once with `CancellationError`; the item
    /// itself is not cancelled by that.
    @usableFromInline
    nonisolated(nonsending) func wait() async -> Outcome {
        lock.lock()
        if isDone {
            let outcome = outcome
            lock.unlock()
            return outcome
        }
        return await unlockAndSuspend()
    }

    /// `wait()` for a handle that reports only completion: the error the cell was resolved with, or nil for success
    /// (whatever the value). Reads only the error out of a resolved cell.
    @usableFromInline
    nonisolated(nonsending) func waitForFailure() async -> (any Error)? {
        lock.lock()
        if isDone {
            let failure: (any Error)? = if case let .failure(error) = outcome { error } else { nil }
            lock.unlock()
            return failure
        }
        if case let .failure(error) = await unlockAndSuspend() { return error }
        return nil
    }

    /// Suspends until the cell resolves (or the waiting task is cancelled: then `CancellationError`). Called with
    /// `lock` held, by a waiter that found the cell unresolved: takes the waiter's token and releases the lock before
    /// it suspends.
    @usableFromInline
    nonisolated(nonsending) func unlockAndSuspend() async -> Outcome {
        let token = nextToken
        nextToken &+= 1
        lock.unlock()
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { continuation in
                lock.lock()
                if isDone {
                    let outcome = outcome
                    lock.unlock()
                    continuation.resume(returning: outcome)
                    return
                }
                if let index = cancelledTokens.firstIndex(of: token) {
                    cancelledTokens.remove(at: index)
                    lock.unlock()
                    continuation.resume(returning: .failure(CancellationError()))
                    return
                }
                if waiter == nil { waiter = (token, continuation) } else { moreWaiters.append((token, continuation)) }
                lock.unlock()
            }
        } onCancel: {
            stopWaiting(token)
        }
    }

    @usableFromInline
    func stopWaiting(_ token: UInt64) {
        // A cancellation handler runs under the cancelled task's status lock, while a thread resolving this cell holds
        // the completion lock and resumes that very task, which needs the status lock: waiting for the lock here
        // deadlocked both, and then every task of the process (`CancellationDeadlockTests`). So only try it; when it
        // is busy, stop the wait from another thread (the waiter may meanwhile be resumed with the cell's outcome).
        guard lock.tryLock() else {
            DispatchQueue.global().async { self.stopWaitingBlocking(token) }
            return
        }
        removeWaiterAndUnlock(token)
    }

    /// `stopWaiting` off the cancelling thread: here waiting for the lock is fine.
    @usableFromInline
    func stopWaitingBlocking(_ token: UInt64) {
        lock.lock()
        removeWaiterAndUnlock(token)
    }

    /// Removes the waiter `token` (or remembers it as cancelled before it registered), releases the lock, and resumes
    /// the removed waiter with `CancellationError`.
    @usableFromInline
    func removeWaiterAndUnlock(_ token: UInt64) {
        var removed: UnsafeContinuation<Outcome, Never>?
        if let waiter, waiter.token == token {
            removed = waiter.continuation
            if moreWaiters.isEmpty { self.waiter = nil } else { self.waiter = moreWaiters.removeFirst() }
        } else if let index = moreWaiters.firstIndex(where: { $0.token == token }) {
            removed = moreWaiters.remove(at: index).continuation
        } else if !isDone {
            cancelledTokens.append(token)
        }
        lock.unlock()
        removed?.resume(returning: .failure(CancellationError()))
    }

    /// The outcome as seen by a handle of type `Value`.
    @inlinable
    static func typed<Value: Sendable>(_ outcome: Outcome, as: Value.Type) -> Result<Value, any Error> {
        switch outcome {
        case let .failure(error): return .failure(error)
        case let .success(value):
            if Value.self == Void.self { return .success(() as! Value) }
            if let typed = value as? Value { return .success(typed) }
            return .failure(KatanaError.returnValueTypeMismatch(expected: "\(Value.self)", got: "\(type(of: value))"))
        }
    }
}
