import Foundation
import Katana
import KatanaTrace
import KatanaTestSupport
import Synchronization
import Testing

/// Waits until `parties` side effects are inside it at once; throws if that does not happen in time, which is
/// what happens when side effects run one at a time.
actor Rendezvous {
    private let parties: Int
    private var arrived = 0
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(parties: Int) { self.parties = parties }

    func arrive() async -> Bool {
        arrived += 1
        if arrived == parties {
            waiters.forEach { $0.resume() }
            waiters = []
            return true
        }
        let timeout = Task {
            try await Task.sleep(nanoseconds: 10_000_000_000)
            self.giveUp()
        }
        await withCheckedContinuation { waiters.append($0) }
        timeout.cancel()
        return arrived >= parties
    }

    private func giveUp() {
        waiters.forEach { $0.resume() }
        waiters = []
    }
}

struct MeetOthers: SideEffect {
    let rendezvous: Rendezvous
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        guard await rendezvous.arrive() else { throw TestError(code: 1) }
    }
}

struct SetFlagAtEnd: SideEffect {
    let flag: Atomic<Bool>.Reference
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        try await Task.sleep(nanoseconds: 5_000_000)
        flag.set()
    }
}

extension Atomic where Value == Bool {
    final class Reference: Sendable {
        let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }
}

struct Failing: SideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
        throw TestError(code: 42)
    }
}

struct AppendAndCheck: ReturningSideEffect {
    let values: Range<Int>
    /// Dispatches each value, awaits it, and reports whether getState() showed it every time.
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws -> Bool {
        for value in values {
            try await context.dispatch(Append(value: value)).value
            guard context.getState().log.contains(value) else { return false }
        }
        return true
    }
}

struct Parent: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws -> Int {
        let ok = try await context.dispatch(AppendAndCheck(values: 100..<110)).value
        try await context.dispatch(Increment()).value
        return ok ? context.getState().counter : -1
    }
}

struct ForOtherStore: SideEffect {
    func sideEffect(_ context: SideEffectContext<OtherState, EmptySideEffectDependencyContainer>) async throws {}
}

@Suite struct SideEffectTests {
    @Test func sideEffectsRunConcurrently() async throws {
        let store = makeStore()
        let rendezvous = Rendezvous(parties: 3)
        let handles = (0..<3).map { _ in store.dispatch(MeetOthers(rendezvous: rendezvous)) }
        for handle in handles { try await handle.value }
    }

    @Test func aSideEffectHandleResolvesAfterTheBodyReturns() async throws {
        let store = makeStore()
        let flag = Atomic<Bool>.Reference()
        try await store.dispatch(SetFlagAtEnd(flag: flag)).value
        #expect(flag.isSet)
    }

    @Test func aThrowingSideEffectRejectsItsHandleWithItsError() async {
        let store = makeStore()
        await #expect(throws: TestError(code: 42)) { try await store.dispatch(Failing()).value }
        // The store carries on.
        #expect(store.dispatch(Increment()).isResolved)
    }

    @Test func nestedDispatchIsAwaitableAndGetStateReflectsResolvedUpdaters() async throws {
        let store = makeStore()
        let counter = try await store.dispatch(Parent()).value
        #expect(counter == 1)
        #expect(store.state.log == Array(100..<110))
        let allSeen = try await store.dispatch(AppendAndCheck(values: 0..<200)).value
        #expect(allSeen)
    }

    @Test func aSideEffectForAnotherStoreTypeIsRejectedWithContextMismatch() async {
        let store = makeStore()
        let result = await store.anyDispatch(ForOtherStore()).result
        guard case let .failure(error as KatanaError) = result, case .contextTypeMismatch = error else {
            Issue.record("expected contextTypeMismatch, got \(result)")
            return
        }
    }

    @Test func sideEffectsRunningCountsWhatIsInFlight() async throws {
        let store = makeStore()
        let rendezvous = Rendezvous(parties: 3)
        let first = store.dispatch(MeetOthers(rendezvous: rendezvous))
        let second = store.dispatch(MeetOthers(rendezvous: rendezvous))
        #expect(await eventually { store.sideEffectsRunning == 2 })
        let third = store.dispatch(MeetOthers(rendezvous: rendezvous))
        for handle in [first, second, third] { try await handle.value }
        #expect(await eventually { store.sideEffectsRunning == 0 })
    }
}

/// A context is two references, whatever the dependencies: handing it out as `any AnySideEffectContext` never boxes
/// it on the heap, and copying it never copies the dependencies.
@Suite struct SideEffectContextLayoutTests {
    final class ClassDependencies: SideEffectDependencyContainer, @unchecked Sendable {
        init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {}
    }

    /// Four words of dependencies (two closures: the container most apps write first).
    struct ClosureDependencies: SideEffectDependencyContainer {
        let dispatch: AnyDispatch
        let getState: GetState
        init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {
            self.dispatch = dispatch
            self.getState = getState
        }
    }

    @Test func aContextIsTwoWordsWhateverTheDependencies() {
        let words = 2 * MemoryLayout<Int>.size
        #expect(MemoryLayout<SideEffectContext<CounterState, ClassDependencies>>.size == words)
        #expect(MemoryLayout<SideEffectContext<CounterState, EmptySideEffectDependencyContainer>>.size == words)
        #expect(MemoryLayout<SideEffectContext<CounterState, ClosureDependencies>>.size == words)
    }
}

/// The dependencies live as long as their store, no longer: they are kept once per store (every context hands out
/// that one container), and their closures reach the store without keeping it — or the dependencies — alive.
@Suite struct SideEffectDependencyLifetimeTests {
    final class TrackedDependencies: SideEffectDependencyContainer, @unchecked Sendable {
        // Immutable after init; `token` only reports the container's release.
        let dispatch: AnyDispatch
        let getState: GetState
        let token: ReleaseToken
        static let released = Collector<Bool>()
        init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {
            self.dispatch = dispatch
            self.getState = getState
            token = ReleaseToken(released: Self.released)
        }
    }
    typealias TrackedStore = Store<CounterState, TrackedDependencies>

    /// A container of its own, so only the test below creates (and releases) `TrackedDependencies`.
    final class PlainDependencies: SideEffectDependencyContainer, @unchecked Sendable {
        init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {}
    }

    struct Identity: ReturningSideEffect {
        func sideEffect(_ context: SideEffectContext<CounterState, PlainDependencies>) async throws -> ObjectIdentifier {
            ObjectIdentifier(context.dependencies)
        }
    }

    @Test func everyContextHandsOutTheStoresOneContainer() async throws {
        let store = Store<CounterState, PlainDependencies>()
        let seen = try await store.dispatch(Identity()).value
        #expect(seen == ObjectIdentifier(store.dependencies))
        #expect(try await store.dispatch(Identity()).value == seen)
    }

    @Test func theDependenciesGoWithTheirStoreAndTheirClosuresThenRejectDispatches() async throws {
        var store: TrackedStore? = TrackedStore(interceptors: [], stateInitializer: { CounterState() },
                                                configuration: .init(traceBackend: NoOpTraceBackend()))
        let weakStore = WeakBox<TrackedStore>()
        weakStore.object = store
        let (dispatch, getState) = (store!.dependencies.dispatch, store!.dependencies.getState)
        _ = try await dispatch(Increment()).value
        #expect((getState() as? CounterState)?.counter == 1)
        let before = TrackedDependencies.released.all.count
        store = nil
        #expect(await eventually { weakStore.object == nil }, "the dependencies' closures keep their store alive")
        #expect(await eventually { TrackedDependencies.released.all.count == before + 1 },
                "the dependencies outlive their store (a cycle through their closures)")
        let outcome = await dispatch(Increment()).result
        guard case let .failure(error) = outcome, (error as? KatanaError) == .storeReleased else {
            Issue.record("a released store's dispatch closure: \(outcome)")
            return
        }
        #expect((getState() as? CounterState) == CounterState())
    }
}
