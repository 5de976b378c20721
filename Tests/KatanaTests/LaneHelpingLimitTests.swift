import Dispatch
import Foundation
import Glibc
@testable import Katana
import KatanaTestSupport
import KatanaTrace
import Synchronization
import Testing

/// Counts how many times it was applied on one chosen thread.
final class AppliedOnThread: Sendable {
    let target = Atomic<UInt>(0)
    let count = Atomic<Int>(0)
    func mark() { target.store(UInt(pthread_self()), ordering: .relaxed) }
    func note() {
        if UInt(pthread_self()) == target.load(ordering: .relaxed) { count.add(1, ordering: .relaxed) }
    }
}

struct CountingIncrement: StateUpdater {
    let probe: AppliedOnThread
    func updateState(_ state: inout CounterState) {
        probe.note()
        state.counter += 1
    }
}

@Suite struct LaneHelpingLimitTests {
    /// Holds the lane on thread A with a blocking updater, lets thread B queue `count` updaters, releases A, and
    /// returns how many of B's updaters A's single `dispatch` call applied before it returned.
    func appliedByOneCall(_ store: TestStore, queued count: Int) async -> Int {
        let probe = AppliedOnThread()
        let gate = Gate()
        let returned = Atomic<Int>(-1)
        let done = DispatchSemaphore(value: 0)
        Thread {
            probe.mark()
            store.dispatch(BlockingAppend(value: 0, gate: gate))
            returned.store(probe.count.load(ordering: .relaxed), ordering: .relaxed)
            done.signal()
        }.start()
        await onThread { gate.started.wait() }
        await onThread {
            for _ in 0..<count { store.dispatch(CountingIncrement(probe: probe)) }
        }
        gate.release.signal()
        await onThread { done.wait() }
        return returned.load(ordering: .relaxed)
    }

    @Test func oneDispatchCallAppliesAtMostTheHelpingLimitOfOtherThreadsItems() async throws {
        let store = makeStore()
        let applied = await appliedByOneCall(store, queued: 100_000)
        #expect(applied <= 256, "one dispatch call applied \(applied) of another thread's 100,000 queued updaters")
        // And progress: everything is applied (by later callers or the store's queue).
        #expect(await eventually(seconds: 120) { store.state.counter == 100_000 })
    }

    @Test func aSlowInlineListenerEndsTheHelpingTurnAfterOneItem() async throws {
        let store = makeStore()
        store.addListener { _, _ in usleep(1_000) }
        let applied = await appliedByOneCall(store, queued: 1_000)
        #expect(applied <= 1, "a 1 ms listener: one dispatch call applied \(applied) queued updaters (and told the listener)")
        #expect(await eventually(seconds: 120) { store.state.counter == 1_000 })
    }
}

/// Records into `backend` and measures the longest time the lane went without beginning an updater (from the first
/// updater's begin to the last's): how long the lane stood still.
final class LaneStopWatch: TraceBackend, @unchecked Sendable {
    // `last` and `longest` are guarded by `lock`.
    private let backend: InMemoryTraceBackend
    private let lock = NSLock()
    private var last: UInt64 = 0
    private var longest: UInt64 = 0

    init(_ backend: InMemoryTraceBackend) { self.backend = backend }

    var longestStop: UInt64 { lock.withLock { longest } }
    /// Measures afresh from the next begin.
    func restart() { lock.withLock { (last, longest) = (0, 0) } }
    var isEnabled: Bool { backend.isEnabled }
    func dispatchEnqueue(_ event: DispatchEnqueueEvent) { backend.dispatchEnqueue(event) }
    func dispatchBegin(_ event: DispatchBeginEvent) {
        if event.kind == .stateUpdater {
            let now = DispatchTime.now().uptimeNanoseconds
            lock.withLock {
                if last != 0 { longest = max(longest, now &- last) }
                last = now
            }
        }
        backend.dispatchBegin(event)
    }
    func dispatchEnd(_ event: DispatchEndEvent) { backend.dispatchEnd(event) }
}

/// An updater that takes `microseconds` to apply.
struct SlowIncrement: StateUpdater {
    let microseconds: UInt32
    func updateState(_ state: inout CounterState) {
        usleep(microseconds)
        state.counter += 1
    }
}

/// A side effect that dispatches `rounds` updaters, awaiting each: what starved behind a flood.
struct AwaitEach: SideEffect {
    let rounds: Int
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        for _ in 0..<rounds { try await context.dispatch(Increment()).value }
    }
}

@Suite struct FloodPolicyTests {
    /// 4 threads fire-and-forget as fast as they can while a side effect awaits its updaters one at a time; returns
    /// the deepest backlog any of the side effect's updaters found at enqueue, the deepest overall, and whether the
    /// lane ever counted as stalled (a producer waited for room for the stall timeout and saw no batch taken).
    func flood(limit: Int?) async throws -> (awaited: UInt32, overall: UInt32, counter: Int, stalled: Bool) {
        let recorded = InMemoryTraceBackend()
        let store = makeStore(configuration: .init(traceBackend: recorded, backlogLimit: limit))
        let flooders = 4, perFlooder = 5_000, rounds = 200
        let floodersDone = DispatchSemaphore(value: 0)
        for _ in 0..<flooders {
            Thread {
                for _ in 0..<perFlooder { store.dispatch(Increment()) }
                floodersDone.signal()
            }.start()
        }
        let awaited = store.dispatch(AwaitEach(rounds: rounds))
        try await awaited.value
        await onThread { for _ in 0..<flooders { floodersDone.wait() } }
        try await store.dispatch(Increment()).value
        let counter = store.state.counter
        var sideEffectID: UInt64 = 0
        var deepestAwaited: UInt32 = 0, deepest: UInt32 = 0
        for case let .enqueue(event) in recorded.events {
            if event.kind == .sideEffect { sideEffectID = event.id; continue }
            deepest = max(deepest, event.queueDepth)
            if event.parentID == sideEffectID, sideEffectID != 0 { deepestAwaited = max(deepestAwaited, event.queueDepth) }
        }
        let stalled = store.engine.laneLock.withLock { store.engine.lane.stalledAt != .max }
        return (deepestAwaited, deepest, counter, stalled)
    }

    @Test func aFloodCannotPushAnAwaitedUpdaterBehindMoreThanTheBacklogLimit() async throws {
        let limit = 64
        let result = try await flood(limit: limit)
        #expect(result.counter == 4 * 5_000 + 200 + 1, "nothing lost")
        // The limit holds while the lane moves. A lane that took no batch for the stall timeout (100 ms) lets
        // producers through by design (it may be waiting for one of them), so the bound is checked only when the
        // lane never counted as stalled (under ThreadSanitizer the holder was seen to stop for seconds inside the
        // Swift runtime's metadata lock).
        //
        // Each producer with items queued waits at the limit, so at most one item per producer thread gets past it —
        // but a producer that finds the lane given up with work left (a holder's helping turn ran out) takes it,
        // queues behind that work and helps drain it, unasked: it does the lane's work instead of waiting. Instrumented,
        // a helping turn (20 µs) ends after an item or two, such takes come back to back, and on a loaded machine the
        // backlog reached 73 to 81 (in 4 of 16 runs beside other test processes; the lane never stalled; those
        // enqueues were the helpers'), so there the bound is twice the limit: still far below an unbounded flood's.
        let bound = UInt32(underThreadSanitizerSuite ? 2 * limit : limit + 8)
        if !result.stalled {
            #expect(result.overall <= bound, "backlog reached \(result.overall) with a limit of \(limit)")
            #expect(result.awaited <= bound, "an awaited updater found \(result.awaited) items ahead of it")
        }
    }

    @Test func withoutALimitNothingHoldsProducersBack() async throws {
        // Behind a held lane every dispatch queues; with no limit, none of them waits for room.
        let backend = InMemoryTraceBackend()
        let store = makeStore(configuration: .init(traceBackend: backend, backlogLimit: nil))
        let hold = await LaneHold.start(store, appending: 0)
        await onThread { for _ in 0..<10_000 { store.dispatch(Increment()) } }
        let depths = backend.events.compactMap { event -> UInt32? in
            if case let .enqueue(e) = event, e.name == TraceName.of(Increment.self) { return e.queueDepth }
            return nil
        }
        #expect(depths.max() == 9_999)
        await hold.release()
        try await store.dispatch(Increment()).value
        #expect(store.state.counter == 10_001)
    }

    /// After a stall, the store's queue drains what piled up without looking stalled itself: a lane that is slow
    /// but moving holds producers again, so a flood after the stall waits instead of piling up. (The queue once took
    /// everything pending as one batch: while 300 slow items were applied no batch was taken, waiting producers
    /// took the lane for stalled and flooded on — in a ThreadSanitizer run, the flood scenario's queue reached 8 GB.)
    @Test func afterAStallASlowButMovingLaneHoldsProducersAgain() async throws {
        let recorded = InMemoryTraceBackend()
        let backend = LaneStopWatch(recorded)
        let store = makeStore(configuration: .init(traceBackend: backend, backlogLimit: 8))
        let hold = await LaneHold.start(store, appending: 0)
        // Behind the held lane: 8 slow items queue, the producer waits for the stall timeout, then queues the rest.
        await onThread { for _ in 0..<300 { store.dispatch(SlowIncrement(microseconds: 1_000)) } }
        backend.restart()
        await hold.release()
        // The lane now applies 300 items of 1 ms: a flood of fast ones meanwhile must wait for room.
        let flood = 5_000
        await onThread { for _ in 0..<flood { store.dispatch(Increment()) } }
        try await store.dispatch(Increment()).value
        #expect(store.state.counter == 300 + flood + 1, "nothing lost")
        let depths = recorded.events.compactMap { event -> UInt32? in
            if case let .enqueue(e) = event, e.name == TraceName.of(Increment.self) { return e.queueDepth }
            return nil
        }
        // Held: each fast item finds at most the slow leftovers and the limit ahead of it, never the flood — while
        // the lane moves (a lane stopped for the stall timeout, as ThreadSanitizer's runtime can stop it, lets
        // producers through by design).
        if backend.longestStop < 90_000_000 {
            #expect(depths.max() ?? 0 < 1_000, "the flood piled up behind a moving lane: \(depths.max() ?? 0) items ahead")
        }
    }

    @Test func aStalledLaneDoesNotHoldProducersForever() async throws {
        // The lane's holder waits for something that comes only after the producer's last dispatch: with a limit of
        // 8, the producer waits once for the stall timeout, then the lane counts as stalled and it carries on.
        let store = makeStore(configuration: .init(backlogLimit: 8))
        let hold = await LaneHold.start(store, appending: 0)
        await onThread { for _ in 0..<1_000 { store.dispatch(Increment()) } }
        await hold.release()
        try await store.dispatch(Increment()).value
        #expect(store.state.counter == 1_001)
        #expect(store.state.log == [0])
    }
}
