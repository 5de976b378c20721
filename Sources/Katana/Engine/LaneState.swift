import CKatanaTraceProvider
import Dispatch
import Synchronization

/// The updater lane's rules, as a value: who holds the lane, what waits in it, what is kept before the store is
/// ready, and the flood policy. Each mutating transition says what the caller must do next; the caller holds the
/// store's `laneLock` around every call and does the work (applying, tracing, waking, waiting) outside; the holder's
/// lock-free give-back is ``LaneWord/releaseIfNothingQueued()``. No threads, clocks or locks in here (one atomic
/// byte, ``LaneWord``), so every rule is unit-tested as plain values (`LaneStateTests`).
@usableFromInline
struct LaneState {
    /// Updaters waiting for the lane, oldest first.
    @usableFromInline var pending = LaneQueue()
    /// Whether a thread holds the lane (it alone applies updaters), and whether updaters were queued meanwhile.
    @usableFromInline let word: LaneWord
    /// The thread that holds the lane (meaningful while `busy`).
    @inlinable var owner: UInt { word.owner.load(ordering: .relaxed) }
    /// Whether a thread holds the lane.
    @inlinable var busy: Bool { word.bits.load(ordering: .acquiring) & LaneWord.busy != 0 }
    /// Reset handle cells for queued updaters, handed over by the lane holder (`StoreEngine.resolveBatch`).
    @usableFromInline var spareCells: [HandleCell] = []
    /// Items dispatched before the store was ready; `nil` once it is.
    @usableFromInline var earlyItems: [EarlyItem]? = []
    /// `pending.count` past which producers with updaters queued wait for room (`Int.max`: no limit).
    @usableFromInline let backlogLimit: Int
    /// Producers waiting for room right now.
    @usableFromInline var roomWaiters = 0
    /// Counts batches taken from the lane: how a waiting producer tells a busy lane from a stalled one.
    @usableFromInline var progress: UInt64 = 0
    /// `progress` when a producer last waited for room for the stall timeout and saw no batch taken: until the lane
    /// moves again, nobody waits (a lane stuck behind a slow updater, or behind an updater that waits for a
    /// producer, must not hold producers, let alone deadlock them).
    @usableFromInline var stalledAt: UInt64 = .max

    @inlinable init(backlogLimit: Int?, word: LaneWord = LaneWord()) {
        self.backlogLimit = backlogLimit.map { Swift.max($0, 1) } ?? .max
        self.word = word
    }

    @inlinable var beforeReady: Bool { earlyItems != nil }

    /// What a producer must do with a new updater.
    @usableFromInline enum Arrival: Equatable {
        /// The store is not ready: keep it until it is (``keepUntilReady(_:)``).
        case keepUntilReady
        /// The lane is busy: queue it (``enqueue(_:)``) and return; the holder applies it.
        case enqueue
        /// The lane is full and this producer already has updaters in it: wait for room, then arrive again.
        case waitForRoom
        /// The lane was idle and empty: the caller now holds it, applies its own updater, then gives it back
        /// (``LaneWord/releaseIfNothingQueued()``, or, when work was queued meanwhile, by draining it with
        /// ``takeBatch(thread:upTo:into:)``).
        case applyInline
        /// The lane was idle with work left by a holder that reached its helping limit: the caller now holds
        /// it, queues its updater behind that work and helps drain it.
        case enqueueAndHelp
    }

    /// A new updater from thread `thread`. With `ignoringReadiness`, an item that was kept until ready already
    /// (or forwarded by an interceptor) goes to the lane even before the store is marked ready. `canWait: false`
    /// for items that must never wait for room (re-enqueued ones).
    @inlinable @inline(__always)
    mutating func arrive(thread: UInt, ignoringReadiness: Bool = false, canWait: Bool = true) -> Arrival {
        if !ignoringReadiness, earlyItems != nil { return .keepUntilReady }  // not ready yet (`beforeReady`)
        var bits = word.bits.load(ordering: .acquiring)
        while true {
            if bits & LaneWord.busy != 0 {
                // The lane's fullness asked here first: the rest of the flood policy only when it is full.
                if canWait, pending.count >= backlogLimit, mustWaitForRoom(thread: thread) { return .waitForRoom }
                // Marks the lane as having work queued (the caller queues it before giving `laneLock` up), unless the
                // holder gave the lane back meanwhile: then take it.
                let (done, seen) = word.bits.compareExchange(expected: bits, desired: bits | LaneWord.queued,
                                                             ordering: .acquiringAndReleasing)
                if done { return .enqueue }
                bits = seen
            } else {
                // Idle: take it, unless a dispatch took it lock-free meanwhile (then queue behind it).
                guard let seen = take(thread: thread, seen: bits) else {
                    return pending.count == 0 ? .applyInline : .enqueueAndHelp
                }
                bits = seen
            }
        }
    }

    /// The flood policy: wait only when the lane is full, held by another thread, not stalled, and this producer
    /// already has updaters queued — so an occasional dispatcher never waits, and the holder (an updater, listener or
    /// interceptor dispatching) never waits for itself. (A dispatch inside a task is never asked: `canWait` false.)
    /// Asked only of a full lane: its one caller, `arrive`, asks that first.
    @inlinable
    func mustWaitForRoom(thread: UInt) -> Bool {
        busy && owner != thread && stalledAt != progress && pending.hasQueued(slot: LaneQueue.slot(of: thread))
    }

    /// A producer's wait for room ended: `woken` by the holder, when a batch it took said so
    /// (``takeBatch(thread:upTo:into:)``), or the stall timeout ran out. If it ran out with no batch taken since `seen`
    /// (the `progress` when the wait began), the lane counts as stalled.
    @inlinable
    mutating func waitEnded(woken: Bool, progressWhenWaitBegan seen: UInt64) {
        if !woken, progress == seen { stalledAt = seen }
    }

    @inlinable mutating func keepUntilReady(_ item: EarlyItem) { earlyItems?.append(item) }

    /// The holder takes up to `limit` of the oldest pending updaters into `buffer` (empty) as one batch. `taken`
    /// false: the lane is given up, idle again — nothing was pending, or `limit` is 0: the holder's helping turn is
    /// over (it reached its helping limit), and what is left stays for whoever takes the lane next (then the caller
    /// must make sure someone does: the store's queue). `wakeProducers`: producers wait for room (the flood policy),
    /// and the backlog is down to half the limit, or the lane was given up (one of them takes it).
    @inlinable
    mutating func takeBatch(thread: UInt, upTo limit: Int, into buffer: inout [LaneItem])
        -> (taken: Bool, wakeProducers: Bool) {
        // Debug builds check that only the lane's holder takes its batches (swift-nio's habit for event loops). The
        // word is read here, not through `busy` and `owner`: a debug build calls each accessor, on every batch.
        assert(word.bits.load(ordering: .acquiring) & LaneWord.busy != 0 && word.owner.load(ordering: .relaxed) == thread,
               "a batch taken by a thread that does not hold the lane")
        if limit == 0 || pending.count == 0 {
            // `queued` stays set if work is left, so that a lock-free give-back never skips it; `notReady` as it was.
            // While the lane is busy only the holder and producers holding `laneLock` change the word: a plain store.
            let left = pending.count == 0 ? 0 : LaneWord.queued
            word.bits.store(word.bits.load(ordering: .relaxed) & LaneWord.notReady | left, ordering: .releasing)
            return (false, roomWaiters > 0)
        }
        pending.take(upTo: limit, into: &buffer)
        progress &+= 1
        return (true, roomWaiters > 0 && pending.count <= backlogLimit / 2)
    }

    /// The store's queue takes the lane if it is idle with work pending. `true`: it holds the lane now.
    @inlinable
    mutating func takeForQueue(thread: UInt) -> Bool {
        var bits = word.bits.load(ordering: .acquiring)
        while bits & LaneWord.busy == 0, pending.count != 0 {
            guard let seen = take(thread: thread, seen: bits) else { return true }
            bits = seen
        }
        return false
    }

    /// The store became ready: hands over what was kept, in order. Items dispatched while those run are kept too,
    /// so call again until it returns `nil`, which marks the store ready.
    @inlinable
    mutating func takeEarlyItems() -> [EarlyItem]? {
        guard let items = earlyItems, !items.isEmpty else {
            earlyItems = nil
            word.bits.bitwiseAnd(~LaneWord.notReady, ordering: .releasing)  // from now on, dispatches may take it lock-free
            return nil
        }
        earlyItems = []
        return items
    }

    /// Takes the idle lane (the word was `seen`, without `busy`), with `laneLock` held; `queued` stays set if work is
    /// pending, for the next holder. Returns nil when taken, else the word as it is now: a dispatch took the lane
    /// lock-free meanwhile (``LaneWord/tryTake(thread:)``), or the word changed otherwise; the caller decides again.
    @inlinable @inline(__always)
    mutating func take(thread: UInt, seen: UInt8) -> UInt8? {
        assert(seen & LaneWord.busy == 0, "the lane was taken twice")
        let desired = seen & LaneWord.notReady | LaneWord.busy | (pending.count == 0 ? 0 : LaneWord.queued)
        let (done, now) = word.bits.compareExchange(expected: seen, desired: desired, ordering: .acquiringAndReleasing)
        guard done else { return now }
        word.owner.store(thread, ordering: .relaxed)
        return nil
    }
}

// The lane's word, beside the rules that read it: its bits are constants read across the lane's transitions, and a
// debug build reads a constant of another file through an accessor call on every use (the Architecture article's
// walks, `make walk`).

/// Whether a thread holds the lane, whether updaters were queued in it since it was taken, and whether the store is
/// not ready yet (what is dispatched then is kept until it is): one atomic byte, so that the common dispatch — the store ready, the
/// lane idle with nothing queued — takes the lane with one compare-and-swap (``tryTake(thread:)``) and gives it back
/// with another (``releaseIfNothingQueued()``), without `laneLock`. Everything else that changes it does so with
/// `laneLock` held, by compare-and-swap where a lock-free taker could change it meanwhile: a producer that queues sets
/// `queued`, so it either lands before the holder's give-back (which then fails, and the holder takes the lock and
/// helps drain the lane) or sees the lane idle and takes it; a change of listeners sets it the same way
/// (``markQueuedIfHeld()``), to hear when the holder is done with the list it replaced.
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
    /// word is exactly `busy`); otherwise the caller drains what was queued, and ``LaneState/takeBatch(thread:upTo:into:)`` gives
    /// the lane up under the lock once nothing is pending.
    @inlinable @inline(__always)
    func releaseIfNothingQueued() -> Bool {
        bits.compareExchange(expected: LaneWord.busy, desired: 0, ordering: .releasing).exchanged
    }

    /// Marks a held lane `queued`, so that its holder's lock-free give-back fails and it gives the lane up under
    /// `laneLock`: what must wait until the holder is done waits there (a listener list it may still be reading:
    /// `StoreEngine.keepWhileLaneHeld`). `false`: the lane is idle, nobody to wait for. Caller holds `laneLock`.
    func markQueuedIfHeld() -> Bool {
        var seen = bits.load(ordering: .acquiring)
        while seen & LaneWord.busy != 0 {
            let (done, now) = bits.compareExchange(expected: seen, desired: seen | LaneWord.queued,
                                                   ordering: .acquiringAndReleasing)
            if done { return true }
            seen = now
        }
        return false
    }
}
