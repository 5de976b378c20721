import Katana
import Testing

// The README's quick start, compiled and run so it stays true.

struct AppState: State {
    var counter: Int = 0
}

struct IncrementCounter: StateUpdater {
    func updateState(_ state: inout AppState) {
        state.counter += 1
    }
}

struct SetCounter: StateUpdater {
    let newValue: Int
    func updateState(_ state: inout AppState) {
        state.counter = newValue
    }
}

/// Talks to the backend. Tests inject a fake through the dependency container.
struct APIManager: Sendable {
    var randomNumber: @Sendable () async throws -> Int
}

struct AppDependencies: SideEffectDependencyContainer {
    let apiManager: APIManager

    init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {
        apiManager = APIManager(randomNumber: { Int.random(in: 1...100) })
    }

    init(apiManager: APIManager) { self.apiManager = apiManager }
}

struct GenerateRandomNumberFromBackend: SideEffect {
    func sideEffect(_ context: SideEffectContext<AppState, AppDependencies>) async throws {
        let number = try await context.dependencies.apiManager.randomNumber()
        try await context.dispatch(SetCounter(newValue: number)).value
    }
}

struct CounterIsEven: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<AppState, AppDependencies>) async throws -> Bool {
        context.getState().counter % 2 == 0
    }
}

@Suite struct ReadmeExampleTests {
    @Test func theQuickStartWorks() async throws {
        let store = Store<AppState, AppDependencies>(
            interceptors: [],
            stateInitializer: { AppState() },
            dependenciesInitializer: { _, _ in AppDependencies(apiManager: APIManager(randomNumber: { 42 })) }
        )
        let changes = Recorder<Int>()
        let unsubscribe = store.addListener { old, new in changes.append(new.counter - old.counter) }

        store.dispatch(IncrementCounter())                              // returns at once
        try await store.dispatch(IncrementCounter()).value              // waits until applied
        try await store.dispatch(GenerateRandomNumberFromBackend()).value
        let isEven = try await store.dispatch(CounterIsEven()).value
        unsubscribe()

        #expect(store.state.counter == 42)
        #expect(isEven)
        #expect(changes.all == [1, 1, 40])
    }
}
