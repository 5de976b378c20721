import KatanaRedux
import Testing

// The Migrating from ReduxKit or ReSwift article's snippet, line for line (DocumentationSnippetTests checks it), run.
// `IncrementAction` is the one ReduxTests.swift declares, as the article does.

private struct AppState: Sendable { var count = 0 }

private func reduxArticle() async throws -> Int {
    let reducer: Reducer<AppState> = { state, action in
        var state = state ?? AppState()
        if let increment = action as? IncrementAction { state.count += increment.rawPayload }
        return state
    }

    let logger: Middleware<AppState> = { getState, _ in { next in { action in
        print("dispatching \(type(of: action))")
        defer { print("state is now \(getState().count)") }
        return try next(action)
    } } }

    let store = createStore(reducer: reducer, middleware: [logger])
    let subscription = store.subscribe { print("subscriber: \($0.count)") }
    let increment = bindActionCreators(IncrementAction.self, dispatch: store.dispatch)
    try await increment(2).value
    try await store.dispatch(IncrementAction(payload: 3)).value
    subscription.dispose()
    print(store.state.count)  // 5
    return store.state.count
}

@Suite struct ReduxArticleTests {
    @Test func theArticlesCounterEndsAtFive() async throws {
        #expect(try await reduxArticle() == 5)
    }
}
