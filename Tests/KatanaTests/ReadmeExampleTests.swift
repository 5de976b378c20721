import Katana
import Testing

// The README's quick start (and the Getting started article's), line for line: declarations here, statements in
// `quickStart()`, which the test runs (DocumentationSnippetTests checks every line of the page stands here).

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
    func updateState(_ state: inout AppState) { state.counter = newValue }
}

// Dependencies are injected into every side effect; tests pass fakes.
struct APIManager: Sendable {
    var randomNumber: @Sendable () async throws -> Int
}

struct AppDependencies: SideEffectDependencyContainer {
    let apiManager: APIManager
    init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {
        apiManager = APIManager(randomNumber: { Int.random(in: 1...100) })
    }
}

struct GenerateRandomNumberFromBackend: SideEffect {
    func sideEffect(_ context: SideEffectContext<AppState, AppDependencies>) async throws {
        let number = try await context.dependencies.apiManager.randomNumber()
        try await context.dispatch(SetCounter(newValue: number)).value
    }
}

// A side effect that returns a value.
struct CounterIsEven: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<AppState, AppDependencies>) async throws -> Bool {
        context.getState().counter % 2 == 0
    }
}


func quickStart() async throws -> (store: Store<AppState, AppDependencies>, isEven: Bool) {
    let store = Store<AppState, AppDependencies>()
    let unsubscribe = store.addListener { old, new in print("\(old.counter) → \(new.counter)") }

    store.dispatch(IncrementCounter())                                  // returns at once
    try await store.dispatch(IncrementCounter()).value                  // waits until applied
    try await store.dispatch(GenerateRandomNumberFromBackend()).value   // waits for the side effect
    let isEven = try await store.dispatch(CounterIsEven()).value        // a returning side effect's value
    unsubscribe()
    return (store, isEven)
}

@Suite struct ReadmeExampleTests {
    @Test func theQuickStartRunsAsThePageShowsIt() async throws {
        let (store, isEven) = try await quickStart()
        // Two increments, then the side effect sets a number from 1 to 100: the returned parity is the state's.
        #expect((1...100).contains(store.state.counter))
        #expect(isEven == store.state.counter.isMultiple(of: 2))
    }

    @Test func theQuickStartsSideEffectUsesInjectedDependencies() async throws {
        let store = Store<AppState, AppDependencies>(
            interceptors: [],
            stateInitializer: { AppState() },
            dependenciesInitializer: { _, _ in AppDependencies(apiManager: APIManager(randomNumber: { 42 })) }
        )
        let changes = Collector<Int>()
        let unsubscribe = store.addListener { old, new in changes.append(new.counter - old.counter) }
        store.dispatch(IncrementCounter())
        try await store.dispatch(IncrementCounter()).value
        try await store.dispatch(GenerateRandomNumberFromBackend()).value
        let isEven = try await store.dispatch(CounterIsEven()).value
        unsubscribe()
        #expect(store.state.counter == 42)
        #expect(isEven)
        #expect(changes.all == [1, 1, 40])
    }
}

extension AppDependencies {
    init(apiManager: APIManager) { self.apiManager = apiManager }
}
