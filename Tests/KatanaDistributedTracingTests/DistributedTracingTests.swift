import Dispatch
import Foundation
import InMemoryTracing
import KatanaTestSupport
import Katana
import KatanaDistributedTracing
import KatanaTrace
import Testing
import Tracing

struct Counter: State { var value = 0; var log: [String] = [] }
typealias CounterStore = Store<Counter, EmptySideEffectDependencyContainer>

struct Increment: StateUpdater {
    func updateState(_ state: inout Counter) { state.value += 1 }
}

struct Refuse: ThrowingStateUpdater {
    struct No: Error, Equatable {}
    func updateState(_ state: inout Counter) throws { throw No() }
}

/// Dispatches and awaits two increments.
struct IncrementTwice: SideEffect {
    func sideEffect(_ context: SideEffectContext<Counter, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(Increment()).value
        try await context.dispatch(Increment()).value
    }
}

struct Fails: SideEffect {
    struct Boom: Error {}
    func sideEffect(_ context: SideEffectContext<Counter, EmptySideEffectDependencyContainer>) async throws { throw Boom() }
}

/// Blocks inside `updateState` until released, so the updater lane is held by another thread meanwhile.
struct Blocking: StateUpdater {
    let started: DispatchSemaphore, release: DispatchSemaphore
    func updateState(_ state: inout Counter) {
        started.signal()
        release.wait()
        state.log.append("blocking")
    }
}

private func store(_ backend: any TraceBackend, interceptors: [StoreInterceptor] = []) -> CounterStore {
    CounterStore(interceptors: interceptors, stateInitializer: { Counter() }, configuration: .init(traceBackend: backend))
}

/// A string or integer attribute, as text.
private func attribute(_ span: FinishedInMemorySpan, _ key: String) -> String? {
    switch span.attributes.get(key) {
    case let .string(value)?: value
    case let .int64(value)?: "\(value)"
    case let other?: "\(other)"
    case nil: nil
    }
}

@Suite struct DistributedTracingTests {
    @Test func aDispatchIsAChildOfTheRequestSpanWithItsAttributes() async throws {
        let tracer = InMemoryTracer()
        let store = store(DistributedTraceBackend(tracer: tracer))
        try await tracer.withSpan("request") { _ in try await store.dispatch(Increment()).value }
        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "request" })
        let updater = try #require(spans.first { $0.operationName == "katana.updater" })
        #expect(updater.traceID == request.traceID)
        #expect(updater.parentSpanID == request.spanID)
        #expect(attribute(updater, "katana.type")?.hasSuffix("Increment") == true)
        #expect(attribute(updater, "katana.queue") == "updater_inline")
        #expect(attribute(updater, "katana.queue_depth") == "0")
        #expect(attribute(updater, "katana.outcome") == "ok")
        #expect(updater.events.map(\.name) == ["begin"])
        #expect(store.state.value == 1)
    }

    @Test func aSideEffectsBodyRunsInItsSpanSoItsDispatchesAreItsChildren() async throws {
        let tracer = InMemoryTracer()
        let store = store(DistributedTraceBackend(tracer: tracer))
        try await tracer.withSpan("request") { _ in try await store.dispatch(IncrementTwice()).value }
        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "request" })
        let sideEffect = try #require(spans.first { $0.operationName == "katana.side_effect" })
        let updaters = spans.filter { $0.operationName == "katana.updater" }
        #expect(sideEffect.parentSpanID == request.spanID)
        #expect(attribute(sideEffect, "katana.type")?.hasSuffix("IncrementTwice") == true)
        #expect(attribute(sideEffect, "katana.queue") == "side_effect_pool")
        #expect(attribute(sideEffect, "katana.parallelism") == "1")
        #expect(updaters.count == 2)
        #expect(updaters.allSatisfy { $0.parentSpanID == sideEffect.spanID && $0.traceID == request.traceID })
        #expect(store.state.value == 2)
    }

    @Test func anUpdaterAppliedLaterOnAnotherThreadStillBelongsToItsDispatcher() async throws {
        let tracer = InMemoryTracer()
        let store = store(DistributedTraceBackend(tracer: tracer))
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        // Another thread holds the lane with a blocking updater, outside any request.
        let holder = Thread { store.dispatch(Blocking(started: started, release: release)) }
        holder.start()
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { started.wait(); continuation.resume() }
        }
        let handle = tracer.withSpan("request") { _ in store.dispatch(Increment()) }
        release.signal()
        try await handle.value
        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "request" })
        let queued = try #require(spans.first { attribute($0, "katana.type")?.hasSuffix("Increment") == true })
        #expect(queued.parentSpanID == request.spanID, "parented to the dispatcher's context, not the lane holder's")
        #expect(attribute(queued, "katana.queue_depth") == "0")
        #expect(queued.events.map(\.name) == ["begin"])
        // Its span started at enqueue, before the lane was released: the begin event comes after the start.
        let begin = try #require(queued.events.first)
        #expect(begin.nanosecondsSinceEpoch >= queued.startInstant.nanosecondsSinceEpoch)
        let blocking = try #require(spans.first { attribute($0, "katana.type")?.hasSuffix("Blocking") == true })
        #expect(blocking.parentSpanID == nil, "dispatched outside any span: a root")
        #expect(store.state.log == ["blocking"] && store.state.value == 1)
    }

    @Test func errorsAreRecordedOnTheSpanWithAnErrorStatus() async throws {
        let tracer = InMemoryTracer()
        let store = store(DistributedTraceBackend(tracer: tracer))
        await #expect(throws: Fails.Boom.self) { try await store.dispatch(Fails()).value }
        await #expect(throws: Refuse.No.self) { try await store.dispatch(Refuse()).value }
        let spans = tracer.finishedSpans
        let sideEffect = try #require(spans.first { $0.operationName == "katana.side_effect" })
        #expect(sideEffect.errors.count == 1 && sideEffect.errors.first?.error is Fails.Boom)
        #expect(sideEffect.status?.code == .error)
        #expect(attribute(sideEffect, "katana.outcome") == "error")
        let refused = try #require(spans.first { $0.operationName == "katana.updater" })
        #expect(refused.errors.count == 1)
        #expect(refused.status?.code == .error)
        #expect(attribute(refused, "katana.outcome") == "error")
    }

    @Test func blockedAndCancelledItemsEndWithTheirOutcome() async throws {
        let tracer = InMemoryTracer()
        let blocker: StoreInterceptor = { _ in { next in { item in
            if item is Increment { return }
            try next(item)
        } } }
        let store = store(DistributedTraceBackend(tracer: tracer), interceptors: [blocker])
        try await store.dispatch(Increment()).value
        let outcomes = tracer.finishedSpans.compactMap { attribute($0, "katana.outcome") }
        #expect(outcomes == ["blocked"])
        #expect(tracer.finishedSpans.first?.status == nil, "a blocked item is not an error")
    }

    // Issue #36 row 3: the span of an item held before readiness started at its enqueue and never ended when the
    // item was cancelled or its store went away; it ends now, with the error when the store went away.
    @Test func heldItemsSpansEndWhenTheStoreGoesAwayBeforeItIsReady() async throws {
        let tracer = InMemoryTracer()
        let held = DeferredWork()
        var store: CounterStore? = CounterStore(
            interceptors: [], stateInitializer: { Counter() },
            configuration: .init(stateInitializerExecutor: .custom { held.hold($0) },
                                 traceBackend: DistributedTraceBackend(tracer: tracer)))
        let updater = store!.dispatch(Increment())
        let sideEffect = store!.dispatch(IncrementTwice())
        let cancelled = store!.dispatch(IncrementTwice())
        cancelled.cancel()
        #expect(tracer.activeSpans.count == 3)
        store = nil
        #expect(await updater.result.error != nil)
        #expect(await sideEffect.result.error != nil)
        #expect(tracer.activeSpans.isEmpty, "spans left open: \(tracer.activeSpans.map(\.operationName))")
        let spans = tracer.finishedSpans
        #expect(spans.map { attribute($0, "katana.outcome") } == ["error", "error", "cancelled"])
        for span in spans.prefix(2) {
            #expect(span.errors.count == 1, "the span ends with the error")
            #expect(span.errors.first.map { "\($0.error)" } == "\(KatanaError.storeReleased)")
            #expect(span.status?.code == .error)
        }
        #expect(spans[2].errors.isEmpty && spans[2].status == nil, "a cancelled item is not an error")
    }

    @Test func withTheNoOpTracerNothingIsTraced() async throws {
        let backend = DistributedTraceBackend(tracer: NoOpTracer())
        #expect(!backend.isEnabled)
        let recorder = InMemoryTraceBackend()
        let store = store(MultiplexTraceBackend([backend, recorder]))
        try await store.dispatch(IncrementTwice()).value
        #expect(store.state.value == 2)
        #expect(!recorder.events.isEmpty, "the other backend still records")
    }

    @Test func togetherWithAnotherBackendBothSeeEveryDispatchAndTheBodyKeepsItsSpan() async throws {
        let tracer = InMemoryTracer()
        let recorder = InMemoryTraceBackend()
        let store = store(MultiplexTraceBackend([recorder, DistributedTraceBackend(tracer: tracer)]))
        try await tracer.withSpan("request") { _ in try await store.dispatch(IncrementTwice()).value }
        let spans = tracer.finishedSpans
        let sideEffect = try #require(spans.first { $0.operationName == "katana.side_effect" })
        #expect(spans.filter { $0.operationName == "katana.updater" }.allSatisfy { $0.parentSpanID == sideEffect.spanID })
        let ends = recorder.events.filter { if case .end = $0 { true } else { false } }
        #expect(ends.count == 3)
    }

    @Test func anUnsampledRequestGetsNoSpansAndASampledOneAllOfThem() async throws {
        let tracer = InMemoryTracer()
        // "Sampled" here: the request span's operation is not "health check".
        let unsampled = Recorder()
        let backend = DistributedTraceBackend(tracer: tracer, isSampled: { context in
            let name = tracer.activeSpan(identifiedBy: context)?.operationName
            if name == "health check" { unsampled.note() }
            return name != "health check"
        })
        let store = store(backend)
        try await tracer.withSpan("health check") { _ in try await store.dispatch(IncrementTwice()).value }
        #expect(tracer.finishedSpans.map(\.operationName) == ["health check"], "nothing under an unsampled request")
        #expect(unsampled.count == 3, "the side effect, and its two updaters in the context it inherited")
        tracer.clearFinishedSpans()
        try await tracer.withSpan("checkout") { _ in try await store.dispatch(IncrementTwice()).value }
        #expect(tracer.finishedSpans.filter { $0.operationName.hasPrefix("katana.") }.count == 3)
        // Outside any context: a root span, whatever isSampled would say.
        tracer.clearFinishedSpans()
        try await store.dispatch(Increment()).value
        #expect(tracer.finishedSpans.map(\.operationName) == ["katana.updater"])
        #expect(store.state.value == 5)
    }

    /// `isSampled` is asked about the binding current at each dispatch, read straight from the task-local storage:
    /// the innermost one in a task, a binding to `nil` (outside any context), and a plain thread's synchronous binding.
    @Test func thePredicateSeesTheContextCurrentAtEachDispatch() async throws {
        let tracer = InMemoryTracer()
        let store = store(DistributedTraceBackend(tracer: tracer, isSampled: { context in
            tracer.activeSpan(identifiedBy: context)?.operationName != "health check"
        }))
        let checkout = try await tracer.withSpan("checkout") { span in
            try await tracer.withSpan("health check") { _ in try await store.dispatch(Increment()).value }
            try await store.dispatch(Increment()).value
            try await ServiceContext.$current.withValue(nil) { try await store.dispatch(Increment()).value }
            return span.spanID
        }
        var updaters = tracer.finishedSpans.filter { $0.operationName == "katana.updater" }
        #expect(updaters.map(\.parentSpanID) == [checkout, nil], "skipped in health check, then checkout's child, then a root")

        // A thread outside any task, its context bound with the synchronous `withValue`.
        tracer.clearFinishedSpans()
        let health = tracer.startSpan("health check"), order = tracer.startSpan("order")
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                ServiceContext.$current.withValue(health.context) { store.dispatch(Increment()) }
                ServiceContext.$current.withValue(order.context) {
                    store.dispatch(Increment())
                    ServiceContext.$current.withValue(health.context) { store.dispatch(Increment()) }
                }
                done.resume()
            }
        }
        updaters = tracer.finishedSpans.filter { $0.operationName == "katana.updater" }
        #expect(updaters.map(\.parentSpanID) == [order.spanID])
        health.end(); order.end()
        #expect(store.state.value == 6)
    }

    @Test func aUserIntervalIsASpanInsideItsSideEffect() async throws {
        let tracer = InMemoryTracer()
        let store = store(DistributedTraceBackend(tracer: tracer))
        try await store.dispatch(Measured()).value
        let spans = tracer.finishedSpans
        let sideEffect = try #require(spans.first { $0.operationName == "katana.side_effect" })
        let interval = try #require(spans.first { $0.operationName == "katana.interval" })
        #expect(interval.parentSpanID == sideEffect.spanID)
        #expect(attribute(interval, "katana.type") == "load")
        #expect(attribute(interval, "katana.outcome") == "ok")
    }
}

struct Measured: SideEffect {
    func sideEffect(_ context: SideEffectContext<Counter, EmptySideEffectDependencyContainer>) async throws {
        try await context.interval("load") { try await Task.sleep(nanoseconds: 1_000_000) }
    }
}

/// Counts calls from any thread.
final class Recorder: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var calls = 0
    func note() { lock.withLock { calls += 1 } }
    var count: Int { lock.withLock { calls } }
}


// The Distributed tracing article's snippet, as written (DocumentationSnippetTests checks it). It bootstraps the
// process's tracer, which may happen once per process: the test below builds it once.
private typealias AppState = Counter
private typealias AppDependencies = EmptySideEffectDependencyContainer

func distributedTracingArticle(tracer: any Tracer) -> Store<Counter, EmptySideEffectDependencyContainer> {
    InstrumentationSystem.bootstrap(tracer)   // the app's tracer, as for any instrumented library
    let store = Store<AppState, AppDependencies>(stateInitializer: AppState.init,
                                                 configuration: .init(traceBackend: DistributedTraceBackend()))
    // No spans for requests the sampler dropped (swift-otel): DistributedTraceBackend(isSampled: { $0.otelIsSampled })
    // LTTng as well: .init(traceBackend: MultiplexTraceBackend([KatanaTracing.backend, DistributedTraceBackend()]))
    return store
}

@Suite struct DistributedTracingArticleTests {
    /// The article's store and the tracer it bootstrapped, made once per process.
    static let article: (tracer: InMemoryTracer, store: Store<Counter, EmptySideEffectDependencyContainer>) = {
        let tracer = InMemoryTracer()
        return (tracer, distributedTracingArticle(tracer: tracer))
    }()

    @Test func theArticlesStoreTracesIntoTheBootstrappedTracer() async throws {
        let (tracer, store) = Self.article
        try await tracer.withSpan("article request") { _ in try await store.dispatch(IncrementTwice()).value }
        #expect(store.state.value == 2)
        let spans = tracer.finishedSpans
        let request = try #require(spans.first { $0.operationName == "article request" })
        #expect(spans.contains { $0.operationName == "katana.side_effect" && $0.parentSpanID == request.spanID }, "\(spans.map(\.operationName))")
    }
}
