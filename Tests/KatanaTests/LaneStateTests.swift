import Dispatch
@testable import Katana
import Testing

/// The lane's rules as plain values: no threads, locks or clocks (threads are just numbers here).
@Suite struct LaneStateTests {
    let a: UInt = 0xA000, b: UInt = 0xB000, c: UInt = 0xC000

    func item(from thread: UInt) -> LaneItem {
        LaneItem(updater: Increment(), cell: nil, id: 0, parentID: 0, name: nil, bypass: false,
                 slot: LaneQueue.slot(of: thread))
    }

    func ready(limit: Int? = nil) -> LaneState {
        var lane = LaneState(backlogLimit: limit)
        let r1 = lane.takeEarlyItems()
        #expect(r1 == nil)
        return lane
    }

    @Test func beforeReadinessEverythingIsHeldAndHandedOverInOrder() {
        var lane = LaneState(backlogLimit: nil)
        let r2 = lane.arrive(thread: a)
        #expect(r2 == .keepUntilReady)
        lane.keepUntilReady(.updater(item(from: a)))
        let r3 = lane.arrive(thread: b)
        #expect(r3 == .keepUntilReady)
        lane.keepUntilReady(.updater(item(from: b)))
        // A held item re-entered by readiness goes to the lane even though the store is not marked ready yet.
        let r4 = lane.arrive(thread: c, ignoringReadiness: true)
        #expect(r4 == .applyInline)
        var nothing: [LaneItem] = []
        let r5 = lane.takeBatch(thread: c, upTo: 1, into: &nothing).taken
        #expect(!r5, "nothing queued: the lane is given up")
        let r6 = lane.takeEarlyItems()
        #expect(r6?.count == 2)
        #expect(lane.beforeReady, "still held until a round finds nothing more")
        let r7 = lane.takeEarlyItems()
        #expect(r7 == nil)
        #expect(!lane.beforeReady)
        let r8 = lane.arrive(thread: a)
        #expect(r8 == .applyInline)
    }

    @Test func anIdleLaneIsTakenByTheDispatcherAndABusyOneQueues() {
        var lane = ready()
        let r9 = lane.arrive(thread: a)
        #expect(r9 == .applyInline)
        #expect(lane.busy && lane.owner == a)
        let r10 = lane.arrive(thread: b)
        #expect(r10 == .enqueue)
        lane.pending.append(item(from: b))
        // Work arrived while A applied its own: A keeps the lane and helps drain it.
        #expect(lane.busy && lane.owner == a)
        var batch: [LaneItem] = []
        let r12 = lane.takeBatch(thread: a, upTo: 10, into: &batch).taken
        #expect(r12)
        #expect(batch.count == 1 && lane.progress == 1)
        batch.removeAll()
        let r13 = lane.takeBatch(thread: a, upTo: 10, into: &batch).taken
        #expect(!r13, "nothing left: the lane is idle again")
        #expect(!lane.busy)
    }

    @Test func aHolderGivesTheLaneBackWithoutTheLockOnlyWhenNothingWasQueuedSinceItTookIt() {
        var lane = ready()
        let took = lane.arrive(thread: a)
        #expect(took == .applyInline)
        #expect(lane.word.releaseIfNothingQueued())
        #expect(!lane.busy)
        // Another dispatcher takes the idle lane; one that arrives while it is busy marks it queued, so the holder's
        // lock-free give-back fails and the holder drains what was queued (under the lock).
        let tookAgain = lane.arrive(thread: b)
        #expect(tookAgain == .applyInline)
        let queued = lane.arrive(thread: c)
        #expect(queued == .enqueue)
        lane.pending.append(item(from: c))
        #expect(!lane.word.releaseIfNothingQueued())
        #expect(lane.busy && lane.owner == b)
        var batch: [LaneItem] = []
        let first = lane.takeBatch(thread: b, upTo: 10, into: &batch).taken
        #expect(first)
        batch.removeAll()
        let none = lane.takeBatch(thread: b, upTo: 10, into: &batch).taken
        #expect(!none)
        // Given up with the lock and nothing left: the mark is cleared, so the next holder gives back lock-free.
        let clean = lane.arrive(thread: a)
        #expect(clean == .applyInline)
        #expect(lane.word.releaseIfNothingQueued())
        // A turn that ends with work left leaves the mark, and whoever takes the lane next starts marked.
        let holder = lane.arrive(thread: a)
        #expect(holder == .applyInline)
        lane.pending.append(item(from: b))
        let left = lane.endHelpingTurn(thread: a)
        #expect(left)
        let behind = lane.arrive(thread: c)
        #expect(behind == .enqueueAndHelp)
        #expect(!lane.word.releaseIfNothingQueued())
    }

    /// The common dispatch takes the lane with one compare-and-swap (no `laneLock`): only when the store is ready
    /// and the lane idle with nothing queued. Everything else goes the locked way, and sees a lane taken lock-free as
    /// busy.
    @Test func aDispatchTakesTheLaneLockFreeOnlyWhenReadyIdleAndEmpty() {
        var lane = LaneState(backlogLimit: nil)
        #expect(!lane.word.tryTake(thread: a), "before readiness every dispatch is held, in order")
        // A held item re-entered by readiness takes the lane; given back, the lane is still not ready.
        let reentered = lane.arrive(thread: c, ignoringReadiness: true)
        #expect(reentered == .applyInline)
        #expect(!lane.word.releaseIfNothingQueued(), "the lock-free give-back would drop the holding mark")
        var nothing: [LaneItem] = []
        let released = lane.takeBatch(thread: c, upTo: 1, into: &nothing).taken
        #expect(!released, "nothing queued: the lane is given up")
        #expect(!lane.word.tryTake(thread: a), "still holding until readiness finds nothing more")
        let rest = lane.takeEarlyItems()
        #expect(rest == nil)

        #expect(lane.word.tryTake(thread: a))
        #expect(lane.busy && lane.owner == a)
        #expect(!lane.word.tryTake(thread: b), "taken already")
        let behind = lane.arrive(thread: b)
        #expect(behind == .enqueue, "a locked arrival sees the lane taken lock-free as busy")
        lane.pending.append(item(from: b))
        #expect(!lane.word.releaseIfNothingQueued())
        #expect(lane.busy && lane.owner == a, "the failed give-back leaves the holder holding, to drain what was queued")
        var batch: [LaneItem] = []
        let one = lane.takeBatch(thread: a, upTo: 1, into: &batch).taken
        #expect(one)
        let none = lane.takeBatch(thread: a, upTo: 1, into: &batch).taken
        #expect(!none)

        #expect(lane.word.tryTake(thread: b))
        lane.pending.append(item(from: c))
        let left = lane.endHelpingTurn(thread: b)
        #expect(left)
        #expect(!lane.word.tryTake(thread: c), "work left behind is taken by whoever helps drain the lane, under the lock")
        let queue = lane.takeForQueue(thread: c)
        #expect(queue && lane.owner == c)
    }

    @Test func aDispatchWaitsForABusyLaneOnlyWhenAnotherThreadHoldsItAndNeverPastQueuedWork() {
        var lane = LaneState(backlogLimit: nil)
        #expect(!lane.word.spinTake(thread: a, nanoseconds: 1_000), "before readiness nothing takes the lane: held")
        let rest = lane.takeEarlyItems()
        #expect(rest == nil)
        #expect(lane.word.spinTake(thread: a, nanoseconds: 1_000), "an idle, empty lane is taken at once")
        #expect(lane.owner == a)

        // The holder dispatching (from an updater or a listener) must queue at once: waiting for itself, it would
        // wait the whole time for nothing (a minute here; the bound only keeps a broken check from hanging).
        let start = DispatchTime.now().uptimeNanoseconds
        #expect(!lane.word.spinTake(thread: a, nanoseconds: 60_000_000_000))
        #expect(DispatchTime.now().uptimeNanoseconds - start < 30_000_000_000, "the holder waited for its own lane")

        #expect(!lane.word.spinTake(thread: b, nanoseconds: 1_000), "a holder that stays: the wait ends, and b queues")
        let behind = lane.arrive(thread: b)
        #expect(behind == .enqueue)
        lane.pending.append(item(from: b))
        let left = lane.endHelpingTurn(thread: a)
        #expect(left)
        // Idle with b's item queued: c must not go ahead of it (it queues, and whoever helps drain the lane applies both in order).
        #expect(!lane.word.spinTake(thread: c, nanoseconds: 1_000))
        #expect(!lane.busy)
    }

    @Test func aTurnThatRunsOutOfBudgetLeavesWorkForTheNextDispatcherOrTheQueue() {
        var lane = ready()
        let r14 = lane.arrive(thread: a)
        #expect(r14 == .applyInline)
        for _ in 0..<3 { lane.pending.append(item(from: b)) }
        var batch: [LaneItem] = []
        let r15 = lane.takeBatch(thread: a, upTo: 1, into: &batch).taken
        #expect(r15)
        let r16 = lane.endHelpingTurn(thread: a)
        #expect(r16, "work is left: someone must take it")
        #expect(!lane.busy)
        // The next dispatcher finds work left behind: it takes the lane and helps drain it, behind that work.
        let r17 = lane.arrive(thread: c)
        #expect(r17 == .enqueueAndHelp)
        #expect(lane.owner == c)
        let r18 = lane.takeForQueue(thread: b)
        #expect(!r18, "the queue does not take a lane someone holds")
        let r19 = lane.endHelpingTurn(thread: c)
        #expect(r19, "two items are still left: the queue must take them")
        let r20 = lane.takeForQueue(thread: b)
        #expect(r20)
        #expect(lane.owner == b)
    }

    @Test func theFloodPolicyHoldsOnlyProducersThatAlreadyHaveItemsQueued() {
        var lane = ready(limit: 4)
        let r21 = lane.arrive(thread: a)
        #expect(r21 == .applyInline)  // A holds the lane (a slow updater, say)
        for _ in 0..<4 {
            let r22 = lane.arrive(thread: b)
            #expect(r22 == .enqueue)
            lane.pending.append(item(from: b))
        }
        let r23 = lane.arrive(thread: b)
        #expect(r23 == .waitForRoom, "B is flooding a full lane")
        let r24 = lane.arrive(thread: c)
        #expect(r24 == .enqueue, "C has nothing queued: it never waits")
        let r25 = lane.arrive(thread: a)
        #expect(r25 == .enqueue, "the holder never waits for itself")
        let r26 = lane.arrive(thread: b, canWait: false)
        #expect(r26 == .enqueue, "re-enqueued items never wait")
        // Waking: only once the backlog is down to half the limit, or the lane is given up.
        lane.roomWaiters = 1
        var batch: [LaneItem] = []
        let r27 = lane.takeBatch(thread: a, upTo: 1, into: &batch)
        #expect(r27.taken && !r27.wakeProducers, "3 left of a limit of 4: the waiters stay")
        batch.removeAll()
        let r27b = lane.takeBatch(thread: a, upTo: 1, into: &batch)
        #expect(r27b.taken && r27b.wakeProducers, "2 left: down to half the limit")
        lane.roomWaiters = 0
        batch.removeAll()
        let r27c = lane.takeBatch(thread: a, upTo: 1, into: &batch)
        #expect(r27c.taken && !r27c.wakeProducers, "nobody waits: nobody to wake")
        let r28 = lane.arrive(thread: b)
        #expect(r28 == .enqueue)
        lane.roomWaiters = 1
        let r28b = lane.takeBatch(thread: a, upTo: 0, into: &batch)
        #expect(!r28b.taken && r28b.wakeProducers, "the lane given up, with work left: a waiter takes it")
    }

    @Test func aStalledLaneStopsHoldingProducersUntilItMovesAgain() {
        var lane = ready(limit: 2)
        let r29 = lane.arrive(thread: a)
        #expect(r29 == .applyInline)
        lane.pending.append(item(from: b))
        lane.pending.append(item(from: b))
        let r30 = lane.arrive(thread: b)
        #expect(r30 == .waitForRoom)
        // Woken in time: not a stall, B waits again.
        lane.waitEnded(woken: true, progressWhenWaitBegan: lane.progress)
        let r31 = lane.arrive(thread: b)
        #expect(r31 == .waitForRoom)
        // The stall timeout ran out with a batch taken meanwhile: busy, not stalled.
        let before = lane.progress
        var batch: [LaneItem] = []
        let r32 = lane.takeBatch(thread: a, upTo: 1, into: &batch).taken
        #expect(r32)
        lane.pending.append(item(from: b))
        lane.waitEnded(woken: false, progressWhenWaitBegan: before)
        let r33 = lane.arrive(thread: b)
        #expect(r33 == .waitForRoom)
        // The timeout ran out and nothing moved: stalled, so B goes in.
        lane.waitEnded(woken: false, progressWhenWaitBegan: lane.progress)
        let r34 = lane.arrive(thread: b)
        #expect(r34 == .enqueue)
        // As soon as the lane moves again, the policy holds again.
        batch.removeAll()
        let r35 = lane.takeBatch(thread: a, upTo: 1, into: &batch).taken
        #expect(r35)
        lane.pending.append(item(from: b))
        #expect(lane.pending.count >= 2)
        let r36 = lane.arrive(thread: b)
        #expect(r36 == .waitForRoom)
    }

    @Test func withoutALimitNobodyWaits() {
        var lane = ready(limit: nil)
        let r37 = lane.arrive(thread: a)
        #expect(r37 == .applyInline)
        for _ in 0..<10_000 { lane.pending.append(item(from: b)) }
        let r38 = lane.arrive(thread: b)
        #expect(r38 == .enqueue)
    }
}

/// The lane queue's per-producer counts, which the flood policy reads: right after every kind of take.
@Suite struct LaneQueueTests {
    func item(slot: UInt8) -> LaneItem {
        LaneItem(updater: Increment(), cell: nil, id: 0, parentID: 0, name: nil, bypass: false, slot: slot)
    }

    @Test func countsFollowEveryTake() {
        var queue = LaneQueue()
        var buffer: [LaneItem] = []
        for slot: UInt8 in [1, 1, 2, LaneQueue.noSlot] { queue.append(item(slot: slot)) }
        #expect(queue.hasQueued(slot: 1) && queue.hasQueued(slot: 2) && !queue.hasQueued(slot: 3))
        #expect(!queue.hasQueued(slot: LaneQueue.noSlot))
        queue.take(upTo: 2, into: &buffer)  // a prefix: both of slot 1's
        #expect(buffer.count == 2 && queue.count == 2)
        #expect(!queue.hasQueued(slot: 1) && queue.hasQueued(slot: 2))
        buffer.removeAll()
        queue.take(upTo: .max, into: &buffer)  // the rest
        #expect(!queue.hasQueued(slot: 2) && queue.count == 0)
        // A short batch taken whole, then a long one.
        buffer.removeAll()
        for _ in 0..<3 { queue.append(item(slot: 5)) }
        queue.take(upTo: .max, into: &buffer)
        #expect(!queue.hasQueued(slot: 5))
        buffer.removeAll()
        for index in 0..<200 { queue.append(item(slot: UInt8(index % 64))) }
        queue.take(upTo: .max, into: &buffer)
        #expect(buffer.count == 200)
        #expect((0..<64).allSatisfy { !queue.hasQueued(slot: UInt8($0)) })
        queue.append(item(slot: 7))
        #expect(queue.hasQueued(slot: 7) && !queue.hasQueued(slot: 8))
    }
}

private extension LaneState {
    /// A helping turn's end as the holder spells it (`StoreEngine.drainBatch` with a limit of 0): the lane given up.
    /// `true`: work is left, and someone must take it.
    mutating func endHelpingTurn(thread: UInt) -> Bool {
        var none: [LaneItem] = []
        let took = takeBatch(thread: thread, upTo: 0, into: &none).taken
        #expect(!took && none.isEmpty, "a batch of 0 takes nothing and gives the lane up")
        return pending.count != 0
    }
}
