import Benchmark
import Foundation
import InMemoryTracing
import Katana
import KatanaDistributedTracing
import KatanaFlightRecorder
import KatanaLTTng
import KatanaMetrics
import KatanaTrace
import Tracing

// What each benchmark measures is one Store operation, repeated `scaledIterations` times per measured iteration.
//
// Thresholds (the gate's rules, checked by `swift package benchmark thresholds check` against Thresholds/):
// - allocation counts are deterministic, so they are absolute: any rise beyond the tolerance fails;
// - wall clock is reported here, never judged against a stored figure: on this shared 2-core VM even the
//   ~200 µs side-effect iteration's p90 moved +70 % and +118 % between unchanged CI runs (threshold files record
//   one moment of one machine). Wall clock is judged by the A/B step instead (../scripts/perf-gate ab: the
//   previous commit and this one, built and run interleaved in the same job, failing only when every round is
//   worse). Instruction counts, which this VM cannot read from hardware, come from the callgrind gate.

struct Counter: State {
    var value = 0
}

struct Increment: StateUpdater {
    func updateState(_ state: inout Counter) { state.value &+= 1 }
}

struct IncrementAndAwait: SideEffect {
    func sideEffect(_ context: SideEffectContext<Counter, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(Increment()).value
    }
}

typealias CounterStore = Store<Counter, EmptySideEffectDependencyContainer>

/// The gate's self-test (`scripts/perf-gate benchmarks --inject-regression` sets KATANA_INJECT_REGRESSION=1): every
/// store gets one more listener, which allocates on every change, so the check must see a dispatch allocate. Read at
/// run time, so the self-test runs the build the gate has just checked instead of compiling Katana again.
let injectedRegression = ProcessInfo.processInfo.environment["KATANA_INJECT_REGRESSION"] == "1"

/// What the injected listener allocates: a class instance, which the optimiser cannot keep on the stack once it
/// escapes into `blackHole`.
final class InjectedAllocation {
    let value: Int
    init(_ value: Int) { self.value = value }
}

struct PassThrough: TypedDispatchInterceptor {
    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws { try next(item) }
}

struct ErasedPassThrough: DispatchInterceptor {
    func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws { try next(item) }
}

/// A store with `listeners` listeners and `interceptors` pass-through closure interceptors (or `dispatchInterceptors`
/// of the protocol form: typed, or erased with `erased`), ready before it is measured.
func makeStore(listeners: Int = 1, interceptors: Int = 0, dispatchInterceptors: Int = 0, erased: Bool = false,
               backend: any TraceBackend = NoOpTraceBackend()) async -> CounterStore {
    let passThrough: StoreInterceptor = { _ in { next in { item in try next(item) } } }
    let store = CounterStore(interceptors: Array(repeating: passThrough, count: interceptors),
                             stateInitializer: { Counter() },
                             configuration: .init(traceBackend: backend,
                                                  interceptors: erased ? Array(repeating: ErasedPassThrough(), count: dispatchInterceptors)
                                                                      : Array(repeating: PassThrough(), count: dispatchInterceptors)))
    for _ in 0..<listeners { store.addListener { _, new in blackHole(new.value) } }
    if injectedRegression { store.addListener { _, new in blackHole(InjectedAllocation(new.value)) } }
    // Readiness: the first dispatch is held until the store is ready, so awaiting one waits for it.
    try? await store.dispatch(Increment()).value
    return store
}

/// Deterministic counts: absolute, a small allowance for the run-to-run noise of a p90 over thousands of samples.
var countThresholds: [BenchmarkMetric: BenchmarkThresholds] { [
    .mallocCountTotal: .init(absolute: [.p90: 1]),
] }
var countMetrics: [BenchmarkMetric] { [.wallClock, .mallocCountTotal] }

func fast() -> Benchmark.Configuration {
    .init(metrics: countMetrics, warmupIterations: 10, scalingFactor: .kilo, maxDuration: .seconds(1),
          maxIterations: 2_000, thresholds: countThresholds)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark("updater-dispatch-fire-and-forget", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore()
    }

    Benchmark("updater-dispatch-awaited", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { try await store.dispatch(Increment()).value }
    } setup: {
        await makeStore()
    }

    Benchmark("listener-delivery-4-listeners", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(listeners: 4)
    }

    Benchmark("interceptor-chain-3-interceptors", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(interceptors: 3)
    }

    // Three TypedDispatchInterceptors (the typed chain); then three erased DispatchInterceptors.
    Benchmark("dispatch-interceptors-3", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(dispatchInterceptors: 3)
    }

    Benchmark("dispatch-interceptors-3-erased", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(dispatchInterceptors: 3, erased: true)
    }

    // A side effect that dispatches and awaits one updater: 100 in flight at once, awaited together (~200 µs).
    Benchmark("side-effect-round-trip-100-concurrent",
              configuration: .init(metrics: countMetrics, warmupIterations: 5, scalingFactor: .one,
                                   maxDuration: .seconds(2), maxIterations: 500,
                                   thresholds: countThresholds)) { benchmark, store in
        for _ in benchmark.scaledIterations {
            var handles: [DispatchHandle<Void>] = []
            handles.reserveCapacity(100)
            for _ in 0..<100 { handles.append(store.dispatch(IncrementAndAwait())) }
            for handle in handles { try await handle.value }
        }
    } setup: {
        await makeStore()
    }

    Benchmark("tracing-none", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(backend: NoOpTraceBackend())
    }

    // An app that opted into LTTng (links KatanaLTTng), no session listening: one check per dispatch.
    Benchmark("tracing-lttng-compiled-in-no-session", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(backend: LTTngTracing.backend)
    }

    // Tracing on: every dispatch's three events recorded (in memory, so the run needs no session daemon). The
    // LTTng session's own cost is in the README (katana-bench micro --backend lttng under a session).
    Benchmark("tracing-in-memory-recording", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(backend: InMemoryTraceBackend())
    }

    // The in-process flight recorder: every dispatch recorded into this thread's ring, with no session and no daemon
    // (issue #41: no allocation per dispatch in steady state; its cost against an unrecorded dispatch is
    // katana-bench micro --backend flight-recorder's, its instructions the callgrind gate's).
    Benchmark("tracing-flight-recorder", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(backend: FlightRecorder.shared)
    }

    // KatanaMetrics: every dispatch added into this thread's counters (issue #48: no allocation per dispatch in steady
    // state; its cost against an unrecorded dispatch is katana-bench micro --backend metrics's, its instructions the
    // callgrind gate's). Exported by hand only: the periodic export's own thread allocates as it creates series.
    Benchmark("tracing-metrics", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(backend: try! DispatchMetrics(.init(exportInterval: nil)))
    }

    // Distributed tracing with nothing bootstrapped (the no-op tracer): the backend says it is disabled, so a
    // dispatch costs one `isEnabled` call more than tracing-none and allocates nothing (issue #18: ≤ 50 ns, 0).
    Benchmark("tracing-distributed-noop-tracer", configuration: fast()) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(backend: DistributedTraceBackend(tracer: NoOpTracer()))
    }

    // A real tracer, but every dispatch in a context `isSampled` rejects (a request the sampler dropped): no span is
    // made; a dispatch costs the context's task-local read and the predicate (issue #18: ≤ 50 ns, 0 allocations).
    Benchmark("tracing-distributed-unsampled", configuration: fast()) { benchmark, store in
        ServiceContext.$current.withValue(.topLevel) {
            for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
        }
    } setup: {
        await makeStore(backend: DistributedTraceBackend(tracer: InMemoryTracer(), isSampled: { _ in false }))
    }

    // Every dispatch a span of InMemoryTracing (which keeps each finished span: one dispatch per iteration, so the
    // run keeps at most a few thousand). The figure is reported in the README; its allocations are held.
    Benchmark("tracing-distributed-in-memory-spans",
              configuration: .init(metrics: countMetrics, warmupIterations: 10, scalingFactor: .one,
                                   maxDuration: .seconds(1), maxIterations: 5_000, thresholds: countThresholds)) { benchmark, store in
        for _ in benchmark.scaledIterations { store.dispatch(Increment()) }
    } setup: {
        await makeStore(backend: DistributedTraceBackend(tracer: InMemoryTracer()))
    }
}
