import Foundation
import Katana
import KatanaTrace
import Testing

private struct Slow: Error {}

/// A side effect that runs its work inside named intervals.
private struct Fetch: SideEffect {
    let fail: Bool
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws {
        let value = try await context.interval("fetch") { () async throws -> Int in
            if fail { throw Slow() }
            return 41
        }
        try await context.interval("apply") { try await context.dispatch(Bump()).value }
        #expect(value == 41)
    }
}

@Suite struct IntervalTests {
    private func store(_ backend: any TraceBackend) -> TraceStore {
        TraceStore(stateInitializer: { TraceState() }, configuration: .init(traceBackend: backend))
    }

    @Test func intervalsNestUnderTheirSideEffectAndPairUp() async throws {
        let backend = InMemoryTraceBackend()
        let store = store(backend)
        try await store.dispatch(Fetch(fail: false)).value
        let events = backend.events
        let sideEffect = try #require(events.compactMap { event -> DispatchBeginEvent? in
            if case let .begin(b) = event, b.kind == .sideEffect { return b }
            return nil
        }.first)
        var begins: [UInt64: (parent: UInt64, name: String, index: Int)] = [:]
        var ends: [UInt64: (name: String, outcome: DispatchOutcome, index: Int)] = [:]
        for (index, event) in events.enumerated() {
            if case let .intervalBegin(id, parent, name) = event { begins[id] = (parent, name, index) }
            if case let .intervalEnd(id, name, outcome) = event { ends[id] = (name, outcome, index) }
        }
        #expect(begins.values.map(\.name).sorted() == ["apply", "fetch"])
        for (id, begin) in begins {
            #expect(begin.parent == sideEffect.id, "an interval's parent is its side effect")
            let end = try #require(ends[id])
            #expect(end.name == begin.name && end.outcome == .ok && end.index > begin.index)
        }
        // The updater dispatched inside "apply" is between that interval's begin and end.
        let apply = try #require(begins.first { $0.value.name == "apply" })
        let bump = try #require(events.firstIndex { if case let .begin(b) = $0 { b.kind == .stateUpdater } else { false } })
        #expect(apply.value.index < bump && bump < ends[apply.key]!.index)
    }

    @Test func aThrowingBodyEndsItsIntervalWithErrorAndRethrows() async throws {
        let backend = InMemoryTraceBackend()
        let store = store(backend)
        await #expect(throws: Slow.self) { try await store.dispatch(Fetch(fail: true)).value }
        let outcomes = backend.events.compactMap { event -> DispatchOutcome? in
            if case let .intervalEnd(_, name, outcome) = event, name == "fetch" { return outcome }
            return nil
        }
        #expect(outcomes == [.error])
        #expect(!backend.events.contains { if case let .intervalBegin(_, _, name) = $0 { name == "apply" } else { false } })
    }

    @Test func nothingIsEmittedWhenNobodyListensAndTheBodyStillRuns() async throws {
        let backend = InMemoryTraceBackend(enabled: false)
        let store = store(backend)
        try await store.dispatch(Fetch(fail: false)).value
        #expect(backend.events.isEmpty)
        #expect(store.state.counter == 1)
    }

    @Test func theFreeFunctionTracesOutsideSideEffects() async throws {
        let backend = InMemoryTraceBackend()
        let result = await traceInterval("load rows", backend: backend) { 7 }
        #expect(result == 7)
        guard case let .intervalBegin(id, parent, name) = backend.events.first,
              case let .intervalEnd(endID, endName, outcome) = backend.events.last else {
            Issue.record("events: \(backend.events)")
            return
        }
        #expect(parent == 0 && name == "load rows" && endID == id && endName == name && outcome == .ok)
        await #expect(throws: CancellationError.self) {
            try await traceInterval("cancelled", backend: backend) { throw CancellationError() }
        }
        if case let .intervalEnd(_, _, outcome) = backend.events.last { #expect(outcome == .cancelled) }
    }
}
