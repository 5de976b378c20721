import Katana
import KatanaTestSupport
import Testing

struct BothKinds: StateUpdater, SideEffect {
    func updateState(_ state: inout CounterState) {}
    func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {}
}

struct NeitherKind: Dispatchable {}

func katanaError<V>(_ handle: DispatchHandle<V>) async -> KatanaError? {
    if case let .failure(error as KatanaError) = await handle.result { return error }
    return nil
}

@Suite struct ErrorTests {
    @Test func anUpdaterForAnotherStateIsRejected() async {
        let store = makeStore()
        let error = await katanaError(store.anyDispatch(OtherUpdater()))
        #expect(error == .stateTypeMismatch(expected: "CounterState", got: "OtherUpdater"))
        #expect(store.state == CounterState())
    }

    @Test func anItemOfBothKindsIsRejected() async {
        let error = await katanaError(makeStore().anyDispatch(BothKinds()))
        #expect(error == .ambiguousDispatchable("BothKinds"))
    }

    @Test func anItemOfNeitherKindIsRejected() async {
        let error = await katanaError(makeStore().anyDispatch(NeitherKind()))
        #expect(error == .notDispatchable("NeitherKind"))
    }

    @Test func errorsDescribeWhatToDo() {
        #expect(KatanaError.ambiguousDispatchable("X").description.contains("split it into two types"))
        #expect(KatanaError.stateTypeMismatch(expected: "A", got: "B").description.contains("dispatch it to a store"))
    }

    @Test func anyDispatchCarriesAReturningSideEffectsValue() async throws {
        let store = makeStore()
        let value = try await store.anyDispatch(Fetch()).value
        #expect(value as? String == "fetched")
        withExtendedLifetime(store) {}  // side effects do not keep their store alive
    }

    @Test func aContextOutlivingItsStoreRejectsDispatches() async throws {
        struct Escape: ReturningSideEffect {
            func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws
                -> SideEffectContext<CounterState, EmptySideEffectDependencyContainer> { context }
        }
        var store: TestStore? = makeStore()
        let context = try await store!.dispatch(Escape()).value
        store = nil
        #expect(await eventually { context.getState() == CounterState() })
        let error = await katanaError(context.dispatch(Increment()))
        #expect(error == .storeReleased)
    }
}
