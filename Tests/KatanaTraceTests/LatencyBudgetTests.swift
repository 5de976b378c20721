import Foundation
import Katana
import KatanaTrace
import Testing

private struct SlowUpdate: StateUpdater {
    let microseconds: UInt32
    func updateState(_ state: inout TraceState) {
        usleep(microseconds)
        state.counter += 1
    }
}

private struct QuickUpdate: StateUpdater {
    func updateState(_ state: inout TraceState) { state.counter += 1 }
}

private struct SlowSideEffect: SideEffect {
    let milliseconds: Int
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws {
        try await Task.sleep(for: .milliseconds(milliseconds))
        try await context.dispatch(QuickUpdate()).value
    }
}

private struct SlowAnswer: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws -> Int {
        try await Task.sleep(for: .milliseconds(5))
        return 42
    }
}

@Suite struct LatencyBudgetTests {
    private func store(_ backend: any TraceBackend, _ budgets: LatencyBudgets) -> TraceStore {
        TraceStore(stateInitializer: { TraceState() }, configuration: .init(traceBackend: backend, latencyBudgets: budgets))
    }

    private func exceeded(_ backend: InMemoryTraceBackend) -> [BudgetExceededEvent] {
        backend.events.compactMap { if case let .budgetExceeded(e) = $0 { e } else { nil } }
    }

    @Test func aDispatchOverItsBudgetIsReportedJustBeforeItsEnd() async throws {
        let backend = InMemoryTraceBackend()
        // Budgets far below or far above what each takes, so a loaded machine cannot change the verdicts.
        let store = store(backend, [.budget(SlowSideEffect.self, .milliseconds(2)), .budget(SlowUpdate.self, .milliseconds(2)),
                                    .budget(SlowAnswer.self, .milliseconds(1)), .budget(QuickUpdate.self, .seconds(30))])
        try await store.dispatch(SlowSideEffect(milliseconds: 10)).value
        try await store.dispatch(SlowUpdate(microseconds: 20_000)).value
        #expect(try await store.dispatch(SlowAnswer()).value == 42)
        try await store.dispatch(QuickUpdate()).value
        let reports = exceeded(backend)
        #expect(reports.map(\.name) == [TraceName.of(SlowSideEffect.self), TraceName.of(SlowUpdate.self), TraceName.of(SlowAnswer.self)])
        let sideEffect = try #require(reports.first)
        #expect(sideEffect.kind == .sideEffect && sideEffect.budgetNanoseconds == 2_000_000)
        #expect(sideEffect.actualNanoseconds >= 10_000_000)
        #expect(reports.count == 3 && reports[1].kind == .stateUpdater && reports[1].actualNanoseconds >= 20_000_000)
        // Right before the dispatch's own end.
        let events = backend.events
        let index = try #require(events.firstIndex { if case .budgetExceeded = $0 { true } else { false } })
        guard case let .end(end) = events[index + 1] else { Issue.record("after budget_exceeded: \(events[index + 1])"); return }
        #expect(end.id == sideEffect.id)
        // The quick updaters (inside SlowSideEffect and on their own) stayed within their budget.
        #expect(!reports.contains { $0.name == TraceName.of(QuickUpdate.self) })
    }

    @Test func withinBudgetOrUnbudgetedOrUntracedNothingIsReported() async throws {
        let backend = InMemoryTraceBackend()
        // Far above a 1 ms side effect, as the test above says its budgets must be: under ThreadSanitizer this suite's
        // tasks were seen to wait 12–16 s for a thread of the cooperative pool at start-up, past the 10 s it had.
        let store = store(backend, [.budget(SlowSideEffect.self, .seconds(600))])
        try await store.dispatch(SlowSideEffect(milliseconds: 1)).value
        try await store.dispatch(SlowUpdate(microseconds: 2_000)).value  // no budget
        #expect(exceeded(backend).isEmpty)
        #expect(backend.events.contains { if case .end = $0 { true } else { false } })

        let silent = InMemoryTraceBackend(enabled: false)
        let untraced = self.store(silent, [.budget(SlowSideEffect.self, .nanoseconds(1))])
        try await untraced.dispatch(SlowSideEffect(milliseconds: 1)).value
        #expect(silent.events.isEmpty)
    }

    @Test func budgetsAreReadBack() {
        let budgets: LatencyBudgets = [.budget(SlowUpdate.self, .microseconds(250))]
        #expect(budgets.budget(for: SlowUpdate.self) == .microseconds(250))
        #expect(budgets.budget(for: SlowSideEffect.self) == nil)
        #expect(!budgets.isEmpty && LatencyBudgets([]).isEmpty)
    }
}
