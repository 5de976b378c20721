import Foundation
import Testing
@testable import Katana
import KatanaTestSupport
import KatanaTrace

/// The typed chain's steps hold each interceptor with its own type (`makeTypedStep`), and a run keeps what an interceptor
/// forwards instead of an updater in a retained box until the run is over: interceptors of any layout must run in
/// order with their own values, and a forwarded item must be released once it has run.
@Suite struct TypedInterceptorLinkTests {
    /// Larger than an existential's inline buffer (boxed out of line when it was stored as one).
    struct Wide: TypedDispatchInterceptor {
        let name: String
        let a: Int, b: Int, c: Int, d: Int, e: Int
        let seen: Collector<String>
        func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                           forward: (any Dispatchable) throws -> Void) throws {
            seen.append("\(name):\(a + b + c + d + e)")
            try next(item)
        }
    }

    final class Counting: TypedDispatchInterceptor, @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var count = 0
        let seen: Collector<String>
        init(seen: Collector<String>) { self.seen = seen }
        func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                           forward: (any Dispatchable) throws -> Void) throws {
            let count = lock.withLock { self.count += 1; return self.count }
            seen.append("counting:\(count)")
            try next(item)
        }
    }

    struct Bare: TypedDispatchInterceptor {
        let seen: Collector<String>
        func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                           forward: (any Dispatchable) throws -> Void) throws {
            seen.append("bare")
            try next(item)
        }
    }

    @Test func interceptorsOfEveryLayoutRunInOrderWithTheirOwnValues() async throws {
        let seen = Collector<String>()
        let store = makeStore(configuration: .init(traceBackend: NoOpTraceBackend(), interceptors: [
            Wide(name: "wide", a: 1, b: 2, c: 3, d: 4, e: 5, seen: seen), Counting(seen: seen), Bare(seen: seen),
        ]))
        try await store.dispatch(Increment()).value
        try await store.dispatch(Increment()).value
        #expect(seen.all == ["wide:15", "counting:1", "bare", "wide:15", "counting:2", "bare"])
        #expect(store.state.counter == 2)
    }

    struct Tracked: SideEffect {
        let token: ReleaseToken
        func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
            try await context.dispatch(Append(value: 9)).value
        }
    }

    /// Forwards a `Tracked` side effect instead of every `Increment` (and throws after forwarding when `thenThrow`).
    struct ForwardingSideEffect: TypedDispatchInterceptor {
        let released: Collector<Bool>
        let thenThrow: Bool
        func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                           forward: (any Dispatchable) throws -> Void) throws {
            guard item is Increment else { return try next(item) }
            try forward(Tracked(token: ReleaseToken(released: released)))
            if thenThrow { throw TestError(code: 3) }
        }
    }

    @Test(arguments: [false, true])
    func aSideEffectForwardedInsteadOfAnUpdaterIsReleasedOnceTheRunIsOver(thenThrow: Bool) async throws {
        let released = Collector<Bool>()
        let store = makeStore(configuration: .init(traceBackend: NoOpTraceBackend(), interceptors: [
            ForwardingSideEffect(released: released, thenThrow: thenThrow), Bare(seen: Collector<String>()),
        ]))
        let result = await store.dispatch(Increment()).result
        if thenThrow {
            // Blocked after forwarding: the forwarded side effect is dropped with the run, and released.
            guard case let .failure(error) = result, error as? TestError == TestError(code: 3) else {
                Issue.record("expected TestError(code: 3), got \(result)")
                return
            }
            #expect(store.state.log.isEmpty)
        } else {
            guard case .success = result else {
                Issue.record("expected success, got \(result)")
                return
            }
            #expect(store.state.log == [9])
        }
        #expect(store.state.counter == 0)
        // The run kept the forwarded item in a retained box; taken once, it must not outlive its work.
        #expect(await eventually(seconds: 10) { released.all == [true] })
    }
}
