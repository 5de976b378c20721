@testable import Katana
import KatanaTestSupport
import KatanaTrace
import Testing

/// What a finished side effect leaves behind. Its handle keeps the side effect's task (a finished task: see
/// `HandleCell.task`), and that task's closure holds the cell while it runs: nothing of the side effect may outlive
/// its work through that loop — neither what the side effect captured, nor the cell once the handle is gone.
@Suite struct SideEffectLifetimeTests {
    struct Holding: SideEffect {
        let token: ReleaseToken
        func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
            try await context.dispatch(Increment()).value
        }
    }

    @Test func aFinishedSideEffectIsReleasedWhileItsHandleIsKept() async throws {
        let store = makeStore()
        let released = Collector<Bool>()
        let handle = store.dispatch(Holding(token: ReleaseToken(released: released)))
        try await handle.value
        #expect(store.state.counter == 1)
        #expect(await eventually(seconds: 30) { released.all == [true] })
        // The handle still works: resolved, its value again, a cancel that changes nothing.
        #expect(handle.isResolved)
        handle.cancel()
        try await handle.value
    }

    @Test func aFinishedSideEffectsCellIsReleasedWithItsHandle() async throws {
        let store = makeStore()
        let released = Collector<Bool>()
        let cell = WeakBox<HandleCell>()
        do {
            let handle = store.dispatch(Holding(token: ReleaseToken(released: released)))
            guard case let .pending(pending) = handle.storage else {
                Issue.record("a side effect's handle is always pending when dispatched")
                return
            }
            cell.object = pending
        }
        #expect(await eventually(seconds: 30) { store.state.counter == 1 && store.sideEffectsRunning == 0 })
        #expect(await eventually(seconds: 30) { released.all == [true] })
        #expect(await eventually(seconds: 30) { cell.object == nil }, "the cell and its finished task hold each other")
    }
}
