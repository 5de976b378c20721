import KatanaRedux
import Testing

// The Migrating from ReduxKit or ReSwift article's snippet, as written (DocumentationSnippetTests checks it stands
// whole here), run: its types are local to the function, so they stand where the page puts them.

private func reduxArticle() async throws -> Int {
    struct AppState: Sendable { var count = 0 }

    struct IncrementAction: SimpleStandardAction {
        let rawPayload: Int
        init(payload: Int) { rawPayload = payload }
    }

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
