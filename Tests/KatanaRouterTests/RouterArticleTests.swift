import Foundation
import Katana
import KatanaRouter
import Testing

// The Navigation with KatanaRouter article's snippet, line for line (DocumentationSnippetTests checks it), run.

struct ShopState: RoutableState { var navigationState = NavigationState() }

/// A routable that notes each call it gets (its own and its children's, in one shared list).
struct MyWindow: Routable {
    let calls: WindowCalls
    init(calls: WindowCalls = WindowCalls()) { self.calls = calls }

    func push(_ destination: Destination) async throws -> any Routable {
        calls.note("push \(destination)")
        return MyWindow(calls: calls)
    }
    func pop(_ destination: Destination) async throws { calls.note("pop \(destination)") }
    func change(removing removed: [Destination], adding added: [Destination]) async throws -> [Destination: any Routable] {
        calls.note("change -\(removed.count) +\(added.count)")
        return Dictionary(uniqueKeysWithValues: added.map { ($0, MyWindow(calls: calls) as any Routable) })
    }
    func changeActiveDestination(from: Destination?, to: Destination) async throws { calls.note("show \(to)") }
}

final class WindowCalls: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var calls: [String] = []
    func note(_ call: String) { lock.withLock { calls.append(call) } }
    var all: [String] { lock.withLock { calls } }
}

@Suite struct RouterArticleTests {
    @Test func theArticlesFlowReachesTheProduct() async throws {
        let catalog = Destination(routableType: "Catalog", userIdentifier: "catalog")
        let cart = Destination(routableType: "Cart", userIdentifier: "cart")
        let account = Destination(routableType: "Account", userIdentifier: "account")

        let store = Store<ShopState, EmptySideEffectDependencyContainer>()
        let router = Router(store: store, rootRoutable: MyWindow(), timeout: .seconds(5))
        router.start()
        try await store.dispatch(SetRootDestination(Destination(routableType: "Tabs", userIdentifier: "tabs"))).value
        try await store.dispatch(AddChildrenToDestination([catalog, cart, account], to: .user("tabs"), activeChild: 0)).value
        try await store.dispatch(AddNewDestination(Destination(routableType: "Product", contextData: 42))).value
        await router.waitUntilIdle()  // the routables have caught up

        #expect(store.state.navigationState.activeRoute.map(\.routableType) == ["Tabs", "Catalog", "Product"])
        router.stop()
    }
}
