import Dispatch
import CKatanaTraceProvider
import Glibc
import KatanaTrace
import Synchronization

// Arriving at a lane another thread holds, or before the store is ready: the lane's word and the brief wait for it
// (`LaneWord.spinTake`), queueing behind the holder (`enter`), the flood policy's wait, and re-enqueueing an item that
// already has a handle. (The dispatch that finds the lane idle never comes here: `UpdaterLane.swift`.)
extension StoreEngine {
    /// Re-enqueues an item that already has a handle (kept until ready, or forwarded by an interceptor). It never
    /// waits for room: it was dispatched already.
    @inlinable
    final func enqueueExisting(_ item: LaneItem, ignoringReadiness: Bool, alreadyTraced: Bool) {
        let thread = pthread_self()
        laneLock.lock()
        let arrival = lane.arrive(thread: thread, ignoringReadiness: ignoringReadiness, canWait: false)
        guard case .applyInline = arrival else {
            enter(item, arrival, traced: !alreadyTraced)
            return
        }
        let listeners = listenersForBatch()
        if item.id != 0, !alreadyTraced { traceEnqueue(item, route: .updaterInline, depth: 0) }
        laneLock.unlock()
        finish(item, process(item, route: .updaterInline, recordChanges: !listeners.isEmpty))
        deliverChanges(to: listeners)
        resolveFinished()
        releaseLane(thread: thread)
    }

    /// Puts an item with a handle where `arrival` says (kept until ready, or queued in the lane) and traces where it went; for
    /// `.enqueueAndHelp` this thread holds the lane and helps drain it. Caller holds `laneLock`; this releases it.
    @inlinable
    final func enter(_ item: LaneItem, _ arrival: LaneState.Arrival, traced: Bool = true) {
        let traced = traced && item.id != 0
        switch arrival {
        case .keepUntilReady:
            if traced { traceEnqueue(item, route: .keptUntilReady, depth: lane.earlyItems?.count ?? 0) }
            lane.keepUntilReady(.updater(item))
            laneLock.unlock()
        case .enqueue, .waitForRoom:
            if traced { traceEnqueue(item, route: .updaterQueue, depth: lane.pending.count) }
            lane.enqueue(item)
            laneLock.unlock()
        case .enqueueAndHelp, .applyInline:
            // The previous holder ran out of helping limit and left work behind (or the lane was given up while
            // this thread waited for room): queue behind it and help.
            if traced { traceEnqueue(item, route: .updaterInline, depth: lane.pending.count) }
            lane.enqueue(item)
            laneLock.unlock()
            helpDrain()
        }
    }

    /// How much of other producers' work a dispatching thread that holds the lane may apply before it hands
    /// the rest to the store's queue: enough to avoid a thread hop per item under contention, small enough that
    /// `dispatch` stays short.
    @usableFromInline static var helpingItemLimit: Int { 256 }
    @usableFromInline static var helpingTimeLimitNanoseconds: UInt64 { 20_000 }

    /// How long a dispatch that finds the lane held by another thread waits for it before queueing its updater
    /// (`LaneWord.spinTake`). Queueing at once fed itself under contention: while one producer held the lane and
    /// combined, the others queued behind it — an item, a handle cell and a lock pair each, the cells crossing
    /// cores — so every dispatch became a queued one. Waiting a few microseconds instead lets the holder run its
    /// own dispatches inline meanwhile, as an unfair lock lets its holder run on.
    @usableFromInline static var laneWaitNanoseconds: UInt64 { 2_000 }

    /// Whether a dispatch on this thread may wait for room in a full lane (the flood policy): not inside a task. A
    /// task's thread is one of Swift's cooperative pool, which runs every side effect and every other task of the
    /// process (two threads on a 2-core machine): waiting there stalls them all. And the policy counts producers by
    /// thread, so side effects that each await their updaters one at a time, taking turns on one pool thread, looked
    /// like one producer with updaters queued — under a flood they blocked the pool's threads one after the other.
    /// A task's updaters queue past the limit instead; back-pressure applies to threads. (Only asked on the slow path:
    /// the lane busy after the brief wait for it.)
    @inlinable
    static var dispatchingThreadMayWait: Bool { withUnsafeCurrentTask { $0 == nil } }

    /// How long a producer waits for room with no batch taken from the lane before the lane counts as stalled.
    @usableFromInline static var backPressureStallNanoseconds: UInt64 { 100_000_000 }

    /// The flood policy's wait (see `LaneState.mustWaitForRoom`): on `room`, with `laneLock` held, until the lane
    /// says otherwise; returns the arrival the lane then gives (never `.waitForRoom`).
    @usableFromInline
    final func waitForRoom(thread: UInt) -> LaneState.Arrival {
        while true {
            let seen = lane.progress
            lane.roomWaiters += 1
            let woken = room.wait(nanoseconds: Self.backPressureStallNanoseconds)
            lane.roomWaiters -= 1
            lane.waitEnded(woken: woken, progressWhenWaitBegan: seen)
            let arrival = lane.arrive(thread: thread)
            if arrival != .waitForRoom { return arrival }
        }
    }

    /// Wakes producers waiting for room when the lane says so. Caller holds `laneLock`.
    @inlinable
    final func wakeProducersIfRoom() {
        if lane.shouldWakeProducers { room.broadcast() }
    }

}

/// Whether a thread holds the lane, whether updaters were queued in it since it was taken, and whether the store is
/// not ready yet (what is dispatched then is kept until it is): one atomic byte, so that the common dispatch — the store ready, the
/// lane idle with nothing queued — takes the lane with one compare-and-swap (``tryTake(thread:)``) and gives it back
/// with another (``releaseIfNothingQueued()``), without `laneLock`. Everything else that changes it does so with
/// `laneLock` held, by compare-and-swap where a lock-free taker could change it meanwhile: a producer that queues sets
/// `queued`, so it either lands before the holder's give-back (which then fails, and the holder takes the lock and
/// helps drain the lane) or sees the lane idle and takes it.
@usableFromInline
final class LaneWord: Sendable {
    @usableFromInline static let busy: UInt8 = 1
    @usableFromInline static let queued: UInt8 = 2
    /// The store is not ready: what is dispatched is kept until it is (see ``LaneState/earlyItems``), so nothing takes the lane
    /// lock-free. Cleared once, when the store becomes ready (``LaneState/takeEarlyItems()``).
    @usableFromInline static let notReady: UInt8 = 4
    @usableFromInline let bits = Atomic<UInt8>(LaneWord.notReady)
    /// The thread that holds the lane (meaningful while `busy`): written by the taker, read by producers deciding
    /// whether to wait for room, and by debug checks.
    @usableFromInline let owner = Atomic<UInt>(0)
    @usableFromInline init() {
        // `enqueueUpdater` spells `busy` as a literal on the common dispatch: read through this constant, every
        // dispatch called its accessor in the debug build the Architecture article's walk is counted from.
        assert(LaneWord.busy == 1, "enqueueUpdater's take and give-back spell busy as 1")
    }

    /// Takes the lane if the store is ready and the lane idle with nothing queued: then the caller holds it, applies
    /// its own updater and gives it back (``releaseIfNothingQueued()``, else under `laneLock`). `false`: take
    /// `laneLock` and arrive (``LaneState/arrive(thread:ignoringReadiness:canWait:)``).
    @inlinable @inline(__always)
    func tryTake(thread: UInt) -> Bool {
        guard bits.compareExchange(expected: 0, desired: LaneWord.busy, ordering: .acquiring).exchanged else {
            return false
        }
        owner.store(thread, ordering: .relaxed)
        return true
    }

    /// `tryTake` for a lane another thread holds: watches the word for up to `nanoseconds` and takes the lane the
    /// moment it is idle with nothing queued — also through a holder's helping turn, so the waiter goes right
    /// after the work queued before it. `false`: queue instead (also at once for the holder itself, an updater or
    /// listener dispatching, and before the store is ready).
    ///
    /// A back-off, not a lock: the dispatch never waits longer than this, and a holder that stays (a slow updater,
    /// a long backlog) makes it queue as before. See `StoreEngine.laneWaitNanoseconds` for why and what it costs.
    ///
    /// The first ``looksWithoutPause`` looks come back to back, so a short hold is noticed at once. After them the
    /// waiter pauses between looks (`katana_cpu_relax`), twice as long each time, up to ``maxPausesBetweenLooks``:
    /// each look pulls the word's line to this core and the holder's next take pulls it back, so a waiter looking
    /// back to back slowed the very holder it waited for — the one that keeps taking the lane between its own
    /// dispatches while another producer waits (`katana-bench micro --only two-producers`, pausing against looking
    /// back to back, interleaved).
    /// Out of line: only a dispatch that found the lane busy calls it, and the common dispatch's code stays as it was.
    @usableFromInline @inline(never)
    func spinTake(thread: UInt, nanoseconds: UInt64) -> Bool {
        if owner.load(ordering: .relaxed) == thread { return false }
        var deadline: UInt64 = 0
        var looks = 0
        var pauses = 0  // 0 while looking back to back
        while true {
            let bits = bits.load(ordering: .relaxed)
            if bits & LaneWord.notReady != 0 { return false }
            if bits == 0, tryTake(thread: thread) { return true }
            if pauses == 0 {
                looks &+= 1
                guard looks & 63 == 0 else { continue }
                if looks == LaneWord.looksWithoutPause { pauses = 1 }
            } else {
                for _ in 0..<pauses { katana_cpu_relax() }
                if pauses < LaneWord.maxPausesBetweenLooks { pauses &*= 2 }
            }
            // Every 64 looks back to back, then after every pause.
            let now = DispatchTime.now().uptimeNanoseconds
            if deadline == 0 {
                deadline = now &+ nanoseconds
            } else if now >= deadline {
                return false
            }
        }
    }

    /// Looks at a busy lane's word in `spinTake` before the waiter starts pausing between them (a multiple of 64).
    @usableFromInline static let looksWithoutPause = 128

    /// The most pauses between two looks at a busy lane's word in `spinTake`, so a wait that runs out overruns its
    /// time by at most that many pauses. Fewer looked often enough to slow the holder (`katana-bench micro --only
    /// two-producers`, interleaved sets of settings); more made waits that run out (a holder helping drain the lane, under
    /// `run -s mixed`) longer.
    @usableFromInline static let maxPausesBetweenLooks = 16

    /// The holder's give-back without `laneLock`: succeeds when no updater was queued since the lane was taken (the
    /// word is exactly `busy`); otherwise the caller takes the lock and calls ``LaneState/release(thread:)``.
    @inlinable @inline(__always)
    func releaseIfNothingQueued() -> Bool {
        bits.compareExchange(expected: LaneWord.busy, desired: 0, ordering: .releasing).exchanged
    }
}
