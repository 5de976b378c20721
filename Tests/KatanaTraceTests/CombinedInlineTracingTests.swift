import CKatanaTraceProvider
import Foundation
import Katana
import KatanaTrace
import Testing

/// An updater that takes a known time to apply, so a recorded duration can be checked against it.
private struct SlowBump: StateUpdater {
    func updateState(_ state: inout TraceState) {
        usleep(3_000)
        state.counter += 1
    }
}

private struct Refuse: ThrowingStateUpdater {
    struct Refused: Error {}
    func updateState(_ state: inout TraceState) throws { throw Refused() }
}

/// A side effect whose one child is applied inline (the lane is idle when it dispatches it).
private struct BumpOnce: SideEffect {
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(Bump()).value
    }
}

private func combining() -> InMemoryTraceBackend { InMemoryTraceBackend(combinesInlineUpdaters: true) }

private func store(_ backend: any TraceBackend, interceptors: [StoreInterceptor] = [],
                   budgets: LatencyBudgets = []) -> TraceStore {
    TraceStore(interceptors: interceptors, stateInitializer: { TraceState() },
               configuration: .init(traceBackend: backend, latencyBudgets: budgets))
}

private extension InMemoryTraceBackend {
    /// The dispatch events, as (kind of event, name): `inline`, `enqueue`, `begin`, `end`.
    var dispatchEvents: [(String, String)] {
        events.compactMap { event in
            switch event {
            case let .updaterInline(e): ("inline", e.name.string)
            case let .enqueue(e): ("enqueue", e.name.string)
            case let .begin(e): ("begin", e.name.string)
            case let .end(e): ("end", e.name.string)
            default: nil
            }
        }
    }

    var inlineEvents: [UpdaterInlineEvent] {
        events.compactMap { if case let .updaterInline(e) = $0 { e } else { nil } }
    }
}

/// A backend that `combinesInlineUpdaters` (LTTng does) gets an updater applied inline as ONE event at its end,
/// carrying what the three would have: id, parent, name, parallelism at its begin, its duration and outcome. Queued,
/// held and budgeted updaters and side effects keep the three events at the moments they happen.
@Suite struct CombinedInlineTracingTests {
    /// An inline updater hands its change to the listeners before its end: its one event says to how many (none when
    /// it threw), directly or after an interceptor; traced as three events (a backend that does not combine), a
    /// `listeners_notified` after its end says it, as a batch's does.
    @Test func anInlineUpdatersEventCountsTheListenersItsChangeReached() throws {
        let backend = combining()
        let plain = store(backend)
        let intercepted = store(backend, interceptors: [{ _ in { next in { try next($0) } } }])
        for _ in 0..<2 { plain.addListener { _, _ in } }
        intercepted.addListener { _, _ in }
        plain.dispatch(Bump())
        plain.dispatch(Refuse())
        intercepted.dispatch(Bump())
        #expect(backend.inlineEvents.map(\.listeners) == [2, 0, 1], "\(backend.inlineEvents)")

        let threeEvents = InMemoryTraceBackend()
        let traced = store(threeEvents)
        for _ in 0..<2 { traced.addListener { _, _ in } }
        traced.dispatch(Bump())
        traced.dispatch(Refuse())
        let order = threeEvents.events.compactMap { event -> String? in
            switch event {
            case let .end(e): "end \(e.outcome)"
            case let .listenersNotified(storeID, changes, listeners) where storeID == traced.storeID: "told \(changes) \(listeners)"
            default: nil
            }
        }
        #expect(order == ["end ok", "told 1 2", "end error"], "\(order)")
    }

    @Test func anInlineUpdaterIsOneEventCarryingItsDuration() throws {
        let backend = combining()
        let store = store(backend)
        store.dispatch(SlowBump())
        let events = backend.dispatchEvents
        #expect(events.map(\.0) == ["inline"], "\(events)")
        let event = try #require(backend.inlineEvents.first)
        #expect(event.id != 0 && event.parentID == 0)
        #expect(event.name == TraceName.of(SlowBump.self))
        #expect(event.outcome == .ok && event.parallelism == 0)
        // It slept 3 ms while applied: the duration is measured around the apply, not made up.
        #expect(event.durationNanoseconds >= 3_000_000 && event.durationNanoseconds < 10_000_000_000, "\(event.durationNanoseconds)")
        #expect(store.state.counter == 1)
    }

    @Test func aRefusedInlineUpdaterCarriesTheErrorOutcome() async throws {
        let backend = combining()
        let store = store(backend)
        #expect(await store.dispatch(Refuse()).result.isFailure)
        #expect(backend.inlineEvents.map(\.outcome) == [.error])
    }

    @Test func aSideEffectsInlineChildCarriesItsParentAndTheParallelism() async throws {
        let backend = combining()
        let store = store(backend)
        try await store.dispatch(BumpOnce()).value
        let sideEffect = try #require(backend.events.compactMap { event -> DispatchBeginEvent? in
            if case let .begin(e) = event, e.kind == .sideEffect { return e } else { return nil }
        }.first)
        let child = try #require(backend.inlineEvents.first)
        #expect(child.parentID == sideEffect.id)
        #expect(child.parallelism == 1, "the side effect that dispatched it was in flight")
    }

    @Test func queuedUpdatersKeepTheirThreeEvents() async throws {
        let backend = combining()
        let store = store(backend)
        try await twoBumpsQueuedBehindABlockedUpdater(store)
        let bumps = backend.dispatchEvents.filter { $0.1 == "KatanaTraceTests.Bump" }.map(\.0)
        #expect(bumps.filter { $0 == "enqueue" }.count == 2, "\(bumps)")
        #expect(bumps.filter { $0 == "end" }.count == 2, "\(bumps)")
        #expect(!bumps.contains("inline"))
    }

    @Test func aBudgetedTypeIsTimedWithItsThreeEvents() throws {
        let backend = combining()
        let store = store(backend, budgets: [.budget(SlowBump.self, .microseconds(10))])
        store.dispatch(SlowBump())
        store.dispatch(Bump())
        let events = backend.dispatchEvents
        #expect(events.filter { $0.1.hasSuffix("SlowBump") }.map(\.0) == ["enqueue", "begin", "end"], "\(events)")
        #expect(events.filter { $0.1.hasSuffix(".Bump") }.map(\.0) == ["inline"], "\(events)")
        #expect(backend.events.contains { if case .budgetExceeded = $0 { true } else { false } })
    }

    /// A budget is its updater's type's, also when the dispatch is traced under another type's name (`tracedAs:`,
    /// as KatanaRedux and KatanaRouter dispatch their actions): timed with its three events, under the traced name,
    /// with or without interceptors.
    @Test(arguments: [false, true]) func aBudgetedUpdaterTracedAsAnotherTypeIsTimed(throughInterceptors: Bool) throws {
        let backend = combining()
        let passOn: StoreInterceptor = { _ in { next in { item in try next(item) } } }
        let store = store(backend, interceptors: throughInterceptors ? [passOn] : [],
                          budgets: [.budget(SlowBump.self, .microseconds(10))])
        store.dispatch(SlowBump(), tracedAs: Bump.self)
        let events = backend.dispatchEvents
        #expect(events.map(\.0) == ["enqueue", "begin", "end"] && events.allSatisfy { $0.1.hasSuffix(".Bump") }, "\(events)")
        let exceeded = backend.events.compactMap { if case let .budgetExceeded(e) = $0 { e } else { nil } }
        #expect(exceeded.map(\.name.string) == events.prefix(1).map(\.1), "\(backend.events)")
    }

    /// Apps run a logger and an observer interceptor on every dispatch: an inline updater through them is one event
    /// too, bracketing the whole chain, with the chain's outcome.
    @Test func throughInterceptorsAnInlineUpdaterIsOneEventWithTheChainsOutcome() async throws {
        let backend = combining()
        let blockRefusals: StoreInterceptor = { _ in { next in { item in
            if item is Refuse { throw CancellationError() }
            try next(item)
        } } }
        let store = store(backend, interceptors: [blockRefusals])
        store.dispatch(SlowBump())
        _ = await store.dispatch(Refuse()).result
        #expect(backend.dispatchEvents.map(\.0) == ["inline", "inline"], "\(backend.dispatchEvents)")
        #expect(backend.inlineEvents.map(\.outcome) == [.ok, .blocked])
        #expect(backend.inlineEvents[0].durationNanoseconds >= 3_000_000)
        #expect(store.state.counter == 1)
    }

    @Test func aMultiplexCombinesOnlyWhenEveryBackendDoes() throws {
        let first = combining(), second = combining(), plain = InMemoryTraceBackend()
        store(MultiplexTraceBackend([first, second])).dispatch(Bump())
        #expect(first.dispatchEvents.map(\.0) == ["inline"])
        #expect(second.dispatchEvents.map(\.0) == ["inline"])
        let mixed = combining()
        store(MultiplexTraceBackend([mixed, plain])).dispatch(Bump())
        #expect(mixed.dispatchEvents.map(\.0) == ["enqueue", "begin", "end"])
        #expect(plain.dispatchEvents.map(\.0) == ["enqueue", "begin", "end"])
    }

    @Test func aBackendThatDoesNotCombineStillSeesThreeEventsFromUpdaterInline() {
        let plain = InMemoryTraceBackend()
        let name = TraceName("Example.Updater")
        plain.updaterInline(UpdaterInlineEvent(id: 7, parentID: 3, name: name, parallelism: 2, durationNanoseconds: 5,
                                               outcome: .error))
        #expect(plain.events == [
            .enqueue(DispatchEnqueueEvent(id: 7, parentID: 3, kind: .stateUpdater, name: name, route: .updaterInline, queueDepth: 0)),
            .begin(DispatchBeginEvent(id: 7, parentID: 3, kind: .stateUpdater, name: name, route: .updaterInline, parallelism: 2)),
            .end(DispatchEndEvent(id: 7, kind: .stateUpdater, name: name, route: .updaterInline, outcome: .error)),
        ])
    }
}

/// An inline updater's duration is measured with the CPU's tick counter once it is calibrated against
/// CLOCK_MONOTONIC (20 ms after the first measurement), and with CLOCK_MONOTONIC before that: both must agree with
/// the monotonic clock on a known wait.
@Suite struct ShortDurationTests {
    private static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    @Test func tickDurationsAgreeWithTheMonotonicClock() async throws {
        // Calibrate: the first token takes the calibration's first point (if no earlier one did); any token taken
        // 20 ms or more later is a tick count (top bit set). No deadline: under ThreadSanitizer a starved pool can
        // hold one `Task.sleep` for seconds, which only makes the wait longer.
        let first = Self.monotonicNanoseconds()
        _ = katana_duration_start()
        while Self.monotonicNanoseconds() - first < 21_000_000 {
            try await Task.sleep(for: .milliseconds(5))
        }
        let token = katana_duration_start()
        let calibrated = token >> 63 == 1
        #if arch(x86_64) || arch(arm64)
        let invariant = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)).map {
            $0.contains(" constant_tsc") && $0.contains(" nonstop_tsc")
        } ?? false
        #expect(calibrated || !invariant, "an invariant TSC should be calibrated 20 ms after the first measurement")
        #endif
        for wait in [2_000, 10_000, 40_000] as [UInt32] {  // microseconds
            // The measurement's two reads lie between an outer and an inner pair of monotonic reads, so it must lie
            // between those spans (give or take the calibrated rate's error) however long the thread was preempted.
            let outerStart = Self.monotonicNanoseconds()
            let start = katana_duration_start()
            let innerStart = Self.monotonicNanoseconds()
            usleep(wait)
            let innerEnd = Self.monotonicNanoseconds()
            let measured = katana_duration_ns(start)
            let outer = Self.monotonicNanoseconds() - outerStart, inner = innerEnd - innerStart
            #expect(measured + inner / 200 + 1_000 >= inner, "measured \(measured) ns, at least \(inner) ns passed (ticks: \(calibrated))")
            #expect(measured <= outer + outer / 200 + 1_000, "measured \(measured) ns, at most \(outer) ns passed (ticks: \(calibrated))")
            #expect(measured >= UInt64(wait) * 1_000 * 99 / 100)
        }
    }
}

/// Names are interned pointers with a per-thread direct-mapped cache of 64 slots: many types on many threads must
/// still each get their own name (slots collide and are replaced, never confused).
@Suite struct TraceNameInterningTests {
    private struct Box<T> {}

    /// `Box<Box<…<Int>…>>`, `depth` deep: as many distinct types as asked for.
    private static func types(_ count: Int) -> [Any.Type] {
        func wrap(_ type: Any.Type) -> Any.Type {
            func open<T>(_: T.Type) -> Any.Type { Box<T>.self }
            return _openExistential(type, do: open)
        }
        var result: [Any.Type] = [Int.self]
        while result.count < count { result.append(wrap(result.last!)) }
        return result
    }

    @Test func equalStringsAreOneNameAndTypeNamesAreTheirReflection() {
        #expect(TraceName("katana.example") == TraceName("katana.example"))
        #expect(TraceName("katana.example").cString == TraceName("katana.example").cString)
        #expect(TraceName("katana.example") != TraceName("katana.other"))
        #expect(TraceName.of(Bump.self) == TraceName(String(reflecting: Bump.self)))
        #expect(TraceName("héllo").utf8Count == 6)
        #expect(Set([TraceName("a"), TraceName("a"), TraceName("b")]).count == 2)
    }

    @Test func manyTypesOnManyThreadsEachGetTheirOwnName() async {
        let types = Self.types(300)
        let expected = types.map { String(reflecting: $0) }
        #expect(Set(expected).count == types.count)
        let wrong = await withTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<20 {
                        for index in types.indices {
                            let at = (index * 7 + worker * 13 + round) % types.count
                            let name = TraceName.of(types[at])
                            if name.string != expected[at] || String(cString: name.cString) != expected[at] { wrong += 1 }
                        }
                    }
                    return wrong
                }
            }
            return await group.reduce(0, +)
        }
        #expect(wrong == 0)
    }
}

private extension Result {
    var isFailure: Bool { if case .failure = self { true } else { false } }
}
