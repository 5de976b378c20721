import Foundation
import Katana
import KatanaTestSupport
import Testing

struct IncrementTwice: SideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(Increment()).value
        try await context.dispatch(Increment()).value
    }
}

@Suite struct StressTests {
    /// ≥1M updaters from two producers, with side effects running all along: the final count is exact and every
    /// handle resolves. Under `make test-tsan` a fifth of them: there the point is the races, which ThreadSanitizer
    /// finds in the first thousands of contended dispatches, and the million instrumented took 139 s, the longest test
    /// of its step (the plain `make test` run keeps the million).
    @Test func aMillionUpdatersFromTwoProducersPlusSideEffects() async throws {
        let store = makeStore()
        let listenerCalls = Collector<Int>()
        store.addListener { _, new in if new.counter % 100_000 == 0 { listenerCalls.append(new.counter) } }
        let perProducer = underThreadSanitizerSuite ? 100_000 : 500_000
        let sideEffects = underThreadSanitizerSuite ? 4_000 : 20_000
        let updaterHandles = Collector<[DispatchHandle<Void>]>()
        let sideEffectHandles = Collector<[DispatchHandle<Void>]>()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    await onThread {
                        var handles: [DispatchHandle<Void>] = []
                        handles.reserveCapacity(perProducer)
                        for _ in 0..<perProducer { handles.append(store.dispatch(Increment())) }
                        updaterHandles.append(handles)
                    }
                }
            }
            group.addTask {
                // In waves of 100, each awaited before the next: 20,000 dispatched at once put 20,000 tasks on the
                // cooperative pool's queue ahead of every other test's (two threads on a 2-core machine), and under
                // ThreadSanitizer the whole suite's tasks then waited 20-60 s to start.
                var handles: [DispatchHandle<Void>] = []
                for _ in 0..<(sideEffects / 100) {
                    let wave = (0..<100).map { _ in store.dispatch(IncrementTwice()) }
                    for handle in wave { _ = try? await handle.value }  // each is checked again below
                    handles += wave
                }
                sideEffectHandles.append(handles)
            }
        }
        var resolved = 0
        for batch in updaterHandles.all + sideEffectHandles.all {
            for handle in batch {
                try await handle.value
                resolved += 1
            }
        }
        #expect(resolved == 2 * perProducer + sideEffects)
        let expected = 2 * perProducer + 2 * sideEffects
        #expect(store.state.counter == expected)
        #expect(listenerCalls.all == Array(stride(from: 100_000, through: expected, by: 100_000)))
    }
}
