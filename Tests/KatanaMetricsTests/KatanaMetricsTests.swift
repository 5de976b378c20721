import CoreMetrics
import Dispatch
import Foundation
import Katana
import KatanaFlightRecorder
import KatanaMetrics
import KatanaTestSupport
import KatanaTrace
import Prometheus
import Testing

struct Shop: State { var count = 0 }
typealias ShopStore = Store<Shop, EmptySideEffectDependencyContainer>

struct AddOne: StateUpdater {
    func updateState(_ state: inout Shop) { state.count += 1 }
}

struct Refuse: ThrowingStateUpdater {
    struct No: Error {}
    func updateState(_ state: inout Shop) throws { throw No() }
}

struct Swallowed: StateUpdater {
    func updateState(_ state: inout Shop) { state.count += 1000 }
}

/// Dispatches and awaits two `AddOne`s.
struct AddTwo: SideEffect {
    func sideEffect(_ context: SideEffectContext<Shop, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(AddOne()).value
        try await context.dispatch(AddOne()).value
    }
}

struct Fails: SideEffect {
    struct Boom: Error {}
    func sideEffect(_ context: SideEffectContext<Shop, EmptySideEffectDependencyContainer>) async throws { throw Boom() }
}

/// Runs until cancelled.
struct WaitsForCancellation: SideEffect {
    func sideEffect(_ context: SideEffectContext<Shop, EmptySideEffectDependencyContainer>) async throws {
        while true { try await Task.sleep(for: .milliseconds(1)) }
    }
}

/// Holds the updater lane (inside `updateState`) until released.
struct HoldsTheLane: StateUpdater {
    let started: DispatchSemaphore, release: DispatchSemaphore
    func updateState(_ state: inout Shop) {
        started.signal()
        release.wait()
    }
}

private func makeMetrics(_ backend: PrometheusBackend, typeLimit: Int = 100, types: [any Dispatchable.Type]? = nil) throws -> DispatchMetrics {
    try DispatchMetrics(.init(typeLimit: typeLimit, types: types, exportInterval: nil, factory: backend.factory))
}

private func name(_ type: Any.Type) -> String { String(reflecting: type) }

@Suite struct KatanaMetricsTests {
    /// Every bucket's count and the sum reach a backend with the same bounds exactly, from several threads at once.
    @Test func aBackendGetsEveryBucketAndSumExactly() throws {
        let backend = PrometheusBackend()
        let metrics = try makeMetrics(backend)
        let bounds = DispatchMetrics.defaultBuckets.map { Int($0.components.seconds) * 1_000_000_000 + Int($0.components.attoseconds / 1_000_000_000) }
        // Durations on and around every bound, and past the last, from four threads.
        let durations: [UInt64] = bounds.flatMap { [UInt64($0 - 1), UInt64($0), UInt64($0 + 1), UInt64($0 / 2 + 3)] } + [0, 20_000_000_000]
        let threads = 4, rounds = 50
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for round in 0..<rounds {
                for (index, duration) in durations.enumerated() where (index + round) % threads == thread {
                    metrics.updaterInline(UpdaterInlineEvent(id: 1, parentID: 0, name: TraceName.of(AddOne.self), parallelism: 0,
                                                             durationNanoseconds: duration, outcome: .ok))
                }
            }
        }
        metrics.export()
        let samples = backend.scrape()
        let labels = ["type": name(AddOne.self), "kind": "state_updater"]
        let recorded = (0..<rounds).flatMap { _ in durations }
        let buckets = samples.buckets(DispatchMetrics.Name.serviceTime, labels)
        #expect(buckets.count == bounds.count + 1)
        for bound in bounds {
            #expect(buckets[bound] == recorded.filter { $0 <= bound }.count, "le=\(bound) ns")
        }
        #expect(buckets[.max] == recorded.count)
        #expect(samples.sumNanoseconds(DispatchMetrics.Name.serviceTime, labels) == Int(recorded.reduce(0, +)))
        #expect(samples.integer(DispatchMetrics.Name.dispatches, labels.merging(["outcome": "ok"]) { $1 }) == recorded.count)
        // Inline: no wait, every one of them.
        #expect(samples.buckets(DispatchMetrics.Name.queueWait, labels)[100] == recorded.count)
        #expect(samples.sumNanoseconds(DispatchMetrics.Name.queueWait, labels) == 0)

        // A second export hands on only what is new.
        metrics.updaterInline(UpdaterInlineEvent(id: 1, parentID: 0, name: TraceName.of(AddOne.self), parallelism: 0,
                                                 durationNanoseconds: 700, outcome: .ok))
        metrics.export()
        let again = backend.scrape()
        #expect(again.buckets(DispatchMetrics.Name.serviceTime, labels)[.max] == recorded.count + 1)
        #expect(again.sumNanoseconds(DispatchMetrics.Name.serviceTime, labels) == Int(recorded.reduce(0, +)) + 700)
    }

    /// Dispatches through a store, counted by type, kind and outcome; histograms hold one value per dispatch that ran.
    @Test func aStoreCountsEveryDispatchByTypeAndOutcome() async throws {
        let backend = PrometheusBackend()
        let metrics = try makeMetrics(backend)
        let swallow: StoreInterceptor = { _ in { next in { item in
            if item is Swallowed { return }
            try next(item)
        } } }
        let store = ShopStore(interceptors: [swallow], stateInitializer: { Shop() }, configuration: .init(traceBackend: metrics))
        for _ in 0..<100 { store.dispatch(AddOne()) }
        for _ in 0..<3 { await #expect(throws: Refuse.No.self) { try await store.dispatch(Refuse()).value } }
        for _ in 0..<4 { try await store.dispatch(Swallowed()).value }
        for _ in 0..<10 { try await store.dispatch(AddTwo()).value }
        for _ in 0..<2 { await #expect(throws: Fails.Boom.self) { try await store.dispatch(Fails()).value } }
        let waiting = store.dispatch(WaitsForCancellation())
        #expect(await eventually {
            metrics.export()
            return backend.scrape().integer(DispatchMetrics.Name.sideEffectsInFlight) == 1
        })
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(await eventually { metrics.dispatchesInProgress == 0 })
        #expect(store.state.count == 120)

        metrics.export()
        let samples = backend.scrape()
        func count(_ type: Any.Type, _ kind: String, _ outcome: String) -> Int? {
            samples.integer(DispatchMetrics.Name.dispatches, ["type": name(type), "kind": kind, "outcome": outcome])
        }
        #expect(count(AddOne.self, "state_updater", "ok") == 120)
        #expect(count(Refuse.self, "state_updater", "error") == 3)
        #expect(count(Swallowed.self, "state_updater", "blocked") == 4)
        #expect(count(AddTwo.self, "side_effect", "ok") == 10)
        #expect(count(Fails.self, "side_effect", "error") == 2)
        #expect(count(WaitsForCancellation.self, "side_effect", "cancelled") == 1)
        #expect(samples.matching(DispatchMetrics.Name.dispatches).count == 6, "no series for outcomes that never happened")
        // A value per dispatch that ran (a blocked one never began: the interceptor swallowed it first).
        func histogramCount(_ metric: String, _ type: Any.Type, _ kind: String) -> Int? {
            samples.integer(metric + "_count", ["type": name(type), "kind": kind])
        }
        #expect(histogramCount(DispatchMetrics.Name.serviceTime, AddOne.self, "state_updater") == 120)
        #expect(histogramCount(DispatchMetrics.Name.queueWait, AddOne.self, "state_updater") == 120)
        #expect(histogramCount(DispatchMetrics.Name.serviceTime, AddTwo.self, "side_effect") == 10)
        #expect(histogramCount(DispatchMetrics.Name.serviceTime, Fails.self, "side_effect") == 2)
        #expect(samples.integer(DispatchMetrics.Name.sideEffectsInFlight) == 0)
        #expect(samples.integer(DispatchMetrics.Name.updaterBacklog) == 0)
    }

    /// Updaters queued behind a thread that holds the lane are the backlog, each timed from its enqueue.
    @Test func queuedUpdatersAreTheBacklogAndTheirWaitIsTimed() async throws {
        let backend = PrometheusBackend()
        let metrics = try makeMetrics(backend)
        let store = ShopStore(stateInitializer: { Shop() }, configuration: .init(traceBackend: metrics))
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holder = Thread { store.dispatch(HoldsTheLane(started: started, release: release)) }
        holder.start()
        started.wait()
        let queued = (0..<5).map { _ in store.dispatch(AddOne()) }
        metrics.export()
        #expect(backend.scrape().integer(DispatchMetrics.Name.updaterBacklog) == 5)
        try await Task.sleep(for: .milliseconds(2))
        release.signal()
        for handle in queued { try await handle.value }
        #expect(await eventually { metrics.dispatchesInProgress == 0 })
        metrics.export()
        let samples = backend.scrape()
        #expect(samples.integer(DispatchMetrics.Name.updaterBacklog) == 0)
        let labels = ["type": name(AddOne.self), "kind": "state_updater"]
        let waits = samples.buckets(DispatchMetrics.Name.queueWait, labels)
        #expect(waits[.max] == 5)
        #expect(waits[1_000_000] == 0, "each waited at least the 2 ms the lane was held")
    }

    /// A service that dispatches generated types keeps a bounded set of series: the first `typeLimit` types, then
    /// one `other` per kind.
    @Test func aFloodOfGenericTypesKeepsTheSeriesBounded() async throws {
        let backend = PrometheusBackend()
        let metrics = try makeMetrics(backend, typeLimit: 50)
        let store = ShopStore(stateInitializer: { Shop() }, configuration: .init(traceBackend: metrics))
        let distinct = 100_000
        for number in 0..<distinct { dispatchGenerated(number, into: store) }
        try await store.dispatch(AddOne()).value
        #expect(store.state.count == distinct + 1)
        #expect(metrics.seriesCount == 52)
        metrics.export()
        let samples = backend.scrape()
        let types = Set(samples.map { $0.labels["type"] }.compactMap { $0 })
        #expect(types.count == 51, "50 types and other")
        #expect(types.contains("other"))
        #expect(!types.contains(name(AddOne.self)), "dispatched after the limit: other")
        let total = samples.matching(DispatchMetrics.Name.dispatches).map { Int($0.value)! }.reduce(0, +)
        #expect(total == distinct + 1, "every dispatch counted, named or other")
        #expect(samples.integer(DispatchMetrics.Name.dispatches, ["type": "other", "outcome": "ok"]) == distinct + 1 - 50)
        #expect(samples.count < 51 * 70, "\(samples.count) samples")
    }

    /// Only the named types get series when the app names them.
    @Test func namedTypesAloneGetSeries() async throws {
        let backend = PrometheusBackend()
        let metrics = try makeMetrics(backend, types: [AddTwo.self])
        let store = ShopStore(stateInitializer: { Shop() }, configuration: .init(traceBackend: metrics))
        try await store.dispatch(AddTwo()).value
        try await store.dispatch(AddOne()).value
        metrics.export()
        let samples = backend.scrape()
        #expect(samples.integer(DispatchMetrics.Name.dispatches, ["type": name(AddTwo.self), "outcome": "ok"]) == 1)
        #expect(samples.integer(DispatchMetrics.Name.dispatches, ["type": "other", "kind": "state_updater", "outcome": "ok"]) == 3)
    }

    /// Configurations it cannot use are refused with one line, never a crash.
    @Test func unusableConfigurationsAreRefused() {
        let cases: [(DispatchMetrics.Configuration, String)] = [
            (.init(buckets: [.microseconds(2), .microseconds(1)], exportInterval: nil), "ascending"),
            (.init(buckets: [.zero], exportInterval: nil), "positive"),
            (.init(buckets: (1...65).map { .microseconds($0) }, exportInterval: nil), "at most 64"),
            (.init(typeLimit: -1, exportInterval: nil), "typeLimit"),
            (.init(typeLimit: 1 << 20, exportInterval: nil), "maxTypes"),
            (.init(exportInterval: .zero), "exportInterval"),
        ]
        for (configuration, expected) in cases {
            #expect { _ = try DispatchMetrics(configuration) } throws: { error in
                "\(error)".contains(expected) && !"\(error)".contains("\n")
            }
        }
    }

    /// With the flight recorder beside it, both record every dispatch.
    @Test func itRunsBesideTheFlightRecorder() async throws {
        let backend = PrometheusBackend()
        let metrics = try makeMetrics(backend)
        let combined = metrics.alongside(FlightRecorder.shared)
        #expect(combined is MultiplexTraceBackend)
        #expect(metrics.alongside(NoOpTraceBackend()) is DispatchMetrics)
        let before = FlightRecorder.shared.counts.recorded
        let store = ShopStore(stateInitializer: { Shop() }, configuration: .init(traceBackend: combined))
        for _ in 0..<10 { try await store.dispatch(AddTwo()).value }
        metrics.export()
        #expect(backend.scrape().integer(DispatchMetrics.Name.dispatches, ["type": name(AddOne.self), "outcome": "ok"]) == 20)
        #expect(FlightRecorder.shared.counts.recorded - before >= 30)
    }

    /// A store released with side effects in flight: each still ends, counted, and nothing stays in progress.
    @Test func aStoreReleasedMidFlightLeavesNothingInProgress() async throws {
        let backend = PrometheusBackend()
        let metrics = try makeMetrics(backend)
        var store: ShopStore? = ShopStore(stateInitializer: { Shop() }, configuration: .init(traceBackend: metrics))
        let handles = (0..<8).map { _ in store!.dispatch(WaitsForCancellation()) }
        #expect(await eventually { metrics.dispatchesInProgress == 8 })
        store = nil
        for handle in handles { _ = try? await handle.value }
        #expect(await eventually { metrics.dispatchesInProgress == 0 })
        metrics.export()
        let samples = backend.scrape()
        let ended = samples.matching(DispatchMetrics.Name.dispatches, ["type": name(WaitsForCancellation.self)]).map { Int($0.value)! }
        #expect(ended.reduce(0, +) == 8)
        #expect(samples.integer(DispatchMetrics.Name.sideEffectsInFlight) == 0)
    }
}

// MARK: Generated types

struct Generated<Tag>: StateUpdater {
    func updateState(_ state: inout Shop) { state.count += 1 }
}
enum Leaf {}
enum Zero<T> {}
enum One<T> {}

/// Dispatches `Generated<…>` of a type made from `number`'s 17 low bits: 131,072 distinct types.
func dispatchGenerated(_ number: Int, into store: ShopStore) {
    func step<T>(_ type: T.Type, _ bits: Int, _ depth: Int) {
        if depth == 0 {
            store.dispatch(Generated<T>())
        } else if bits & 1 == 0 {
            step(Zero<T>.self, bits >> 1, depth - 1)
        } else {
            step(One<T>.self, bits >> 1, depth - 1)
        }
    }
    step(Leaf.self, number, 17)
}
