import Dispatch
import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Testing

/// What `within` saw: the operation's result, or that it was still running when the time ran out.
enum Bounded<T: Sendable>: Sendable {
    case finished(Result<T, any Error>)
    case stillRunning
}

/// Runs `operation` and gives up waiting after `seconds` (a liveness guard: a hang fails the test instead of
/// hanging the suite; generous, because the TSan suite on two cores can hold a side effect up for tens of seconds). The operation's task is cancelled when time runs out.
func within<T: Sendable>(seconds: Double, _ operation: @escaping @Sendable () async throws -> T) async -> Bounded<T> {
    let box = Collector<Bounded<T>>()
    let task = Task {
        let result: Result<T, any Error>
        do { result = .success(try await operation()) } catch { result = .failure(error) }
        box.append(.finished(result))
    }
    _ = await eventually(seconds: seconds) { box.count > 0 }
    if let outcome = box.all.first { return outcome }
    task.cancel()
    return .stillRunning
}

extension Bounded {
    var error: (any Error)? {
        if case let .finished(.failure(error)) = self { return error }
        return nil
    }
    var finished: Bool {
        if case .finished = self { return true }
        return false
    }
}

/// A side effect that sleeps `seconds` unless cancelled. The tests give it an hour and cancel it: one that only
/// slept 120 s could finish before its cancellation, or before a 100 ms timer it races, when the TSan suite's
/// cooperative pool froze for ~140 s (both timers were then due at once).
struct SlowSideEffect: SideEffect {
    let seconds: Double
    let sawCancellation: Counter
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        do {
            try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
        } catch {
            sawCancellation.increment()
            throw error
        }
    }
}

/// Waits for its gate (on a thread of its own, not cooperatively: it never looks at cancellation), counts itself
/// finished and returns normally.
struct IgnoresCancellation: SideEffect {
    let gate: Gate
    let finished: Counter
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        await onThread { gate.release.wait() }
        finished.increment()
    }
}

struct ReturnSeven: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws -> Int { 7 }
}

/// Reads the store's state from inside `updateState`: the misuse that must not deadlock.
struct ReadsStoreWhileUpdating: StateUpdater {
    let read: @Sendable () -> CounterState
    let seen: Collector<Int>
    func updateState(_ state: inout CounterState) {
        seen.append(read().counter)
        state.counter += 1
    }
}

/// Dispatches an updater that reads the state through this side effect's context.
struct DispatchesAReader: SideEffect {
    let seen: Collector<Int>
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        let reader = context
        try await context.dispatch(ReadsStoreWhileUpdating(read: { reader.getState() }, seen: seen)).value
    }
}

/// Loops until a dispatch is rejected: dispatches every 10 ms.
struct LoopUntilRejected: SideEffect {
    let ended: Collector<String>
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        while true {
            try? await Task.sleep(nanoseconds: 10_000_000)
            do {
                try await context.dispatch(Increment()).value
            } catch {
                ended.append("\(error)")
                throw error
            }
        }
    }
}

@Suite struct StoreEdgeTests {
    // Row 1: items held before readiness resolve when the store goes away.
    @Test func heldItemsAreRejectedWithStoreReleasedWhenTheStoreGoesAway() async throws {
        let deferred = DeferredExecutor()
        var store: TestStore? = TestStore(
            interceptors: [], stateInitializer: { CounterState() },
            configuration: .init(stateInitializerExecutor: deferred.executor, traceBackend: NoOpTraceBackend()))
        let updater = store!.dispatch(Increment())
        let sideEffect = store!.dispatch(AppendFromSideEffect(value: 1))
        let returning = store!.dispatch(ReturnSeven())
        store = nil
        deferred.runHeldWork()
        let outcomes = await within(seconds: 120) {
            [await updater.result.isReleased, await sideEffect.result.isReleased, await returning.result.isReleased]
        }
        guard case let .finished(.success(released)) = outcomes else {
            Issue.record("handles of held items never resolved after the store was released")
            return
        }
        #expect(released == [true, true, true])
    }

    // Row 2: reading the state from inside an updater neither deadlocks nor breaks later dispatches.
    @Test func readingTheStateInsideAnUpdaterDoesNotDeadlock() async throws {
        let store = makeStore()
        store.dispatch(Increment())
        let seen = Collector<Int>()
        let outcome = await within(seconds: 120) {
            await onThread {
                store.dispatch(ReadsStoreWhileUpdating(read: { store.state }, seen: seen))
                store.dispatch(Increment())
                return store.state.counter
            }
        }
        guard case let .finished(.success(counter)) = outcome else {
            Issue.record("reading store.state inside updateState deadlocked the store")
            return
        }
        #expect(counter == 3)
        #expect(seen.all == [1], "the read inside the updater sees the state as the updater started it")
    }

    /// Every way to read the state answers from inside an updater: the partial store, the erased store, and a
    /// side effect's context (its `getState` handed to the updater it dispatches).
    @Test func everyStateReaderAnswersInsideAnUpdater() async throws {
        let store = makeStore()
        store.dispatch(Increment())
        let partial: PartialStore<CounterState> = store
        let erased: any AnyStore = store
        let seen = Collector<Int>()
        let outcome = await within(seconds: 120) {
            try await store.dispatch(ReadsStoreWhileUpdating(read: { partial.state }, seen: seen)).value
            try await store.dispatch(ReadsStoreWhileUpdating(read: { erased.anyState as! CounterState }, seen: seen)).value
            try await store.dispatch(DispatchesAReader(seen: seen)).value
            return store.state.counter
        }
        guard case let .finished(.success(counter)) = outcome else {
            Issue.record("a state reader deadlocked inside an updater: \(outcome)")
            return
        }
        #expect(counter == 4)
        #expect(seen.all == [1, 2, 3])
    }

    @Test func readingTheStateInsideAQueuedUpdaterDoesNotDeadlock() async throws {
        let store = makeStore()
        let hold = await LaneHold.start(store, appending: 0)
        let seen = Collector<Int>()
        let handle = store.dispatch(ReadsStoreWhileUpdating(read: { store.state }, seen: seen))
        await hold.release()
        let outcome = await within(seconds: 120) { try await handle.value }
        #expect(outcome.finished, "a queued updater reading store.state deadlocked the lane")
        #expect(seen.all == [0])
    }

    // Row 3: a cancelled task stops waiting at once; a side effect can be cancelled.
    @Test func aCancelledTaskAwaitingAHandleStopsWaitingPromptly() async throws {
        let store = makeStore()
        let sawCancellation = Counter()
        let handle = store.dispatch(SlowSideEffect(seconds: 3_600, sawCancellation: sawCancellation))
        defer { handle.cancel() }
        let outcome = await within(seconds: 120) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await handle.value }
                group.addTask {
                    try await Task.sleep(nanoseconds: 100_000_000)
                    throw TestError(code: 1)
                }
                defer { group.cancelAll() }
                try await group.next()
            }
        }
        #expect(outcome.error as? TestError == TestError(code: 1), "the timeout pattern waited for the side effect: \(outcome)")
        #expect(sawCancellation.value == 0, "cancelling a waiter does not cancel the item")
        #expect(!handle.isResolved)
    }

    @Test func cancellingASideEffectCancelsItsBodyAndRejectsItsHandle() async throws {
        let store = makeStore()
        let sawCancellation = Counter()
        let handle = store.dispatch(SlowSideEffect(seconds: 3_600, sawCancellation: sawCancellation))
        #expect(await eventually { store.sideEffectsRunning == 1 })
        handle.cancel()
        let outcome = await within(seconds: 120) { try await handle.value }
        #expect(outcome.error is CancellationError, "\(outcome)")
        #expect(sawCancellation.value == 1, "the body saw Task.isCancelled")
    }

    /// A cancelled side effect's handle rejects with `CancellationError` whatever its body does — here it ignores the
    /// cancellation and returns normally — for a `Void` handle (which drops the returned value) as for one that
    /// carries it.
    @Test(arguments: [true, false])
    func aRunningSideEffectThatIgnoresItsCancellationStillRejectsItsHandle(voidHandle: Bool) async throws {
        let store = makeStore()
        let gate = Gate()
        let finished = Counter()
        let body = IgnoresCancellation(gate: gate, finished: finished)
        let voidTyped = voidHandle ? store.dispatch(body) : nil
        let erased = voidHandle ? nil : store.anyDispatch(body)
        #expect(await eventually { store.sideEffectsRunning == 1 })
        voidTyped?.cancel()
        erased?.cancel()
        gate.release.signal()
        let outcome = await within(seconds: 120) {
            if let voidTyped { try await voidTyped.value } else { _ = try await erased!.value }
        }
        #expect(outcome.error is CancellationError, "\(outcome)")
        #expect(finished.value == 1, "the body ran to its end")
    }

    // The running side effects are an intrusive list (unretained links): leaving from its head, middle and tail
    // must keep it whole, so releasing the store still reaches every side effect left in it.
    @Test func releasingTheStoreCancelsTheSideEffectsStillRunningAfterOthersLeftFromAnywhereInTheList() async throws {
        let sawCancellation = Counter()
        let watcher = WeakBox<TestStore>()
        var handles: [DispatchHandle<Void>] = []
        do {
            let store = makeStore()
            watcher.object = store
            for _ in 0..<5 {
                handles.append(store.dispatch(SlowSideEffect(seconds: 3_600, sawCancellation: sawCancellation)))
                // One at a time, so they enter the list in dispatch order (the last one is the list's head).
                let running = handles.count
                #expect(await eventually(seconds: 120) { store.sideEffectsRunning == running })
            }
            for index in [4, 2, 0] {  // the head, one in the middle, the tail
                let handle = handles[index]
                handle.cancel()
                let outcome = await within(seconds: 120) { try await handle.value }
                #expect(outcome.error is CancellationError, "side effect \(index): \(outcome)")
            }
            #expect(await eventually(seconds: 120) { store.sideEffectsRunning == 2 })
        }
        #expect(await eventually(seconds: 120) { watcher.object == nil }, "a running side effect kept the store alive")
        for index in [1, 3] {
            let handle = handles[index]
            let outcome = await within(seconds: 120) { try await handle.value }
            #expect(outcome.finished, "side effect \(index) was never cancelled when its store went away")
            #expect(outcome.error is CancellationError || (outcome.error as? KatanaError) == .storeReleased, "\(outcome)")
        }
        #expect(sawCancellation.value == 5, "every body saw its cancellation")
    }

    // Row 4: side effects in flight do not keep the store alive.
    @Test func theStoreDeinitialisesWithASideEffectInFlight() async throws {
        let ended = Collector<String>()
        let watcher = WeakBox<TestStore>()
        var handle: DispatchHandle<Void>?
        do {
            let store = makeStore()
            watcher.object = store
            handle = store.dispatch(LoopUntilRejected(ended: ended))
            #expect(await eventually(seconds: 120) { store.state.counter >= 2 })
        }
        #expect(await eventually(seconds: 120) { watcher.object == nil }, "a running side effect kept the store alive")
        let running = try #require(handle)
        let outcome = await within(seconds: 120) { try await running.value }
        #expect(outcome.finished, "the side effect's handle never resolved after the store went away")
        #expect(outcome.error is CancellationError || (outcome.error as? KatanaError) == .storeReleased, "\(outcome)")
    }

    // Row 7: an interceptor that throws after `next` applied the item says the item was applied.
    @Test func anInterceptorFailingAfterNextSaysTheItemWasApplied() async throws {
        let failsAfter: StoreInterceptor = { _ in { next in { item in
            try next(item)
            throw TestError(code: 7)
        } } }
        let store = makeStore(interceptors: [failsAfter])
        let outcome = await store.dispatch(Increment()).result
        #expect(store.state.counter == 1)
        guard case let .failure(error) = outcome, case let .appliedButInterceptorThrew(failure) = error as? KatanaError else {
            Issue.record("expected appliedButInterceptorThrew, got \(outcome)")
            return
        }
        #expect(failure.error as? TestError == TestError(code: 7))
        #expect("\(error)".contains("was applied"))

        let blocks: StoreInterceptor = { _ in { _ in { _ in throw TestError(code: 8) } } }
        let blocked = makeStore(interceptors: [blocks])
        let refused = await blocked.dispatch(Increment()).result
        #expect((try? refused.get()) == nil)
        if case let .failure(error) = refused { #expect(error as? TestError == TestError(code: 8)) }
        #expect(blocked.state.counter == 0)
    }

    // Row 8: the mismatch message names the updater's state and the store's state the right way round.
    @Test func aStateTypeMismatchNamesBothTypesTheRightWayRound() async throws {
        let store = makeStore()
        let outcome = await store.anyDispatch(OtherUpdater()).result
        guard case let .failure(error) = outcome, case let .stateTypeMismatch(expected, got) = error as? KatanaError else {
            Issue.record("expected stateTypeMismatch, got \(outcome)")
            return
        }
        #expect(expected.hasSuffix("CounterState"), "expected is the state the store holds: \(expected)")
        #expect(got.hasSuffix("OtherUpdater"), "got is the updater that cannot update it: \(got)")
        let message = "\(error)"
        #expect(message.contains("OtherUpdater cannot update") && message.contains("CounterState"), "\(message)")
        // The erased entry point reports the same way.
        #expect(throws: KatanaError.stateTypeMismatch(expected: "\(CounterState.self)", got: "\(OtherUpdater.self)")) {
            _ = try OtherUpdater().updatedState(currentState: CounterState())
        }
    }
}

extension Result {
    var isReleased: Bool {
        if case let .failure(error) = self { return (error as? KatanaError) == .storeReleased }
        return false
    }
}
