import Foundation
import Katana
import KatanaTestSupport
import Logging
import Testing

// The Interceptors, The flight recorder and Your own intervals articles' snippets, line for line, with the types
// they name; DocumentationSnippetTests checks every line of the pages stands in a compiled source.

let auditLog = Logger(label: "audit")

struct DeleteAccount: StateUpdater {
    func updateState(_ state: inout AppState) { state.counter = 0 }
}

struct Tick: StateUpdater {
    func updateState(_ state: inout AppState) { state.counter += 1 }
}

struct Login: StateUpdater {
    func updateState(_ state: inout AppState) {}
}

struct ApplyPage: StateUpdater {
    let count: Int
    func updateState(_ state: inout AppState) { state.counter += count }
}

/// Stands for an HTTP client.
struct ProfileAPI: Sendable {
    func profile(_ id: Int) async throws -> Int { id * 2 }
}

/// Dispatched by the observer after each `Login`; its fetch is a named interval.
struct FetchProfile: SideEffect, DispatchObserverDispatchable {
    init() {}
    init?(dispatchedItem: any Dispatchable, prevState: any State, currentState: any State) {}

    func sideEffect(_ context: SideEffectContext<AppState, AppDependencies>) async throws {
        let (api, id) = (ProfileAPI(), 21)
        let profile = try await context.interval("fetch profile") { try await api.profile(id) }
        try await context.dispatch(ApplyPage(count: profile)).value
    }
}

struct Audit: TypedDispatchInterceptor {
    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws {
        if item is DeleteAccount { auditLog.notice("account deleted") }
        try next(item)
    }
}

func interceptorsArticleStore() -> Store<AppState, AppDependencies> {
    let store = Store<AppState, AppDependencies>(stateInitializer: { AppState() }, configuration: .init(interceptors: [
        DispatchableLogger.Interceptor(blackList: [Tick.self]),
        ObserverInterceptor.Interceptor([.onDispatch(Login.self, [FetchProfile.self])]),
        Audit(),
    ]))
    return store
}

func flightRecorderArticleStore() -> Store<AppState, AppDependencies> {
    let store = Store<AppState, AppDependencies>(stateInitializer: AppState.init, configuration: .init(latencyBudgets: [
        .budget(FetchProfile.self, .milliseconds(50)),
        .budget(ApplyPage.self, .microseconds(200)),
    ]))
    return store
}

@Suite struct DocumentationSnippetRunTests {
    @Test func theInterceptorsArticlesStoreLogsObservesAndAudits() async throws {
        let store = interceptorsArticleStore()
        try await store.dispatch(Tick()).value
        try await store.dispatch(Login()).value
        // The observer dispatched FetchProfile after Login; its interval fetched 42 and applied it.
        #expect(await eventually(seconds: 120) { store.state.counter == 43 })
        try await store.dispatch(DeleteAccount()).value
        #expect(store.state.counter == 0)
    }

    @Test func theFlightRecorderArticlesStoreRunsWithItsBudgets() async throws {
        let store = flightRecorderArticleStore()
        try await store.dispatch(FetchProfile()).value
        #expect(store.state.counter == 42)
    }
}
