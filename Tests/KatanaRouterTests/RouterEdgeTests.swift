import Foundation
import Katana
import KatanaRouter
import Testing

/// A chain `depth` destinations deep, each the only (active) child of the one above, built on a thread of its own:
/// 100,000 levels take seconds under ThreadSanitizer, which must not hold up the cooperative pool other tests'
/// side effects run on.
func chainOffPool(depth: Int) async -> NavigationNode {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: chain(depth: depth)) }.start()
    }
}

/// A chain `depth` destinations deep, each the only (active) child of the one above.
func chain(depth: Int) -> NavigationNode {
    var node = NavigationNode(place("level-\(depth)"))
    for level in stride(from: depth - 1, through: 1, by: -1) {
        node = NavigationNode(place("level-\(level)"), children: [node], activeChild: 0)
    }
    return node
}

/// The edges of KatanaRouter: trees too deep to walk recursively, invalid active children, routers nobody stops.
@Suite struct RouterEdgeTests {
    @Test func aTreeDeeperThanTheLimitIsRefusedAndDroppedWithoutCrashing() async throws {
        let store = AppStore()
        try await store.dispatch(SetRootDestination(place("app"))).value
        let deep = await chainOffPool(depth: 100_000)
        let result = await store.dispatch(SetRootDestination(deep)).result
        #expect(throws: NavigationError.tooDeep(limit: NavigationState.maximumDepth)) { try result.get() }
        #expect(names(store.state.navigationState.activeRoute) == ["app"], "the state is unchanged")
        // Comparing and releasing a 100,000-deep tree walk it without recursion (a thread's stack holds ~58,000
        // levels of recursive release).
        #expect(deep == deep)
        #expect(deep != NavigationNode(place("level-1"), children: deep.children, activeChild: 0))
    }

    @Test func theDeepestAcceptedTreeWorksEndToEnd() async throws {
        let store = AppStore()
        let limit = NavigationState.maximumDepth
        try await store.dispatch(SetRootDestination(chain(depth: limit))).value
        #expect(store.state.navigationState.activeRoute.count == limit)
        #expect(store.state.navigationState.activeLeaf?.userIdentifier == "level-\(limit)")
        // One more level under the active leaf is refused, whichever action asks for it.
        await #expect(throws: NavigationError.tooDeep(limit: limit)) {
            try await store.dispatch(AddNewDestination(place("one-too-many"))).value
        }
        await #expect(throws: NavigationError.tooDeep(limit: limit)) {
            try await store.dispatch(AddChildrenToDestination([NavigationNode(place("below"))],
                                                              to: .user("level-\(limit)"))).value
        }
        // A shallower place still takes children.
        try await store.dispatch(AddChildrenToDestination([NavigationNode(place("side"))], to: .user("level-10"))).value
        #expect(store.state.navigationState.count == limit + 1)
        store.dispatch(SetRootDestination(nil as NavigationNode?))
        #expect(store.state.navigationState.root == nil)
    }

    @Test func anInvalidActiveChildIsRefusedNeverTrapped() async throws {
        let node = NavigationNode(place("tabs"), children: [], activeChild: 3)
        #expect(node.activeChild == nil)
        let withOne = NavigationNode(place("tabs"), children: [NavigationNode(place("only"))], activeChild: -1)
        #expect(withOne.activeChild == nil)
        #expect(throws: NavigationError.invalidActiveChild(index: 3, childCount: 0)) { try NavigationState(root: node) }
        let store = AppStore()
        try await store.dispatch(SetRootDestination(place("app"))).value
        await #expect(throws: NavigationError.invalidActiveChild(index: 3, childCount: 0)) {
            try await store.dispatch(SetRootDestination(node)).value
        }
        await #expect(throws: NavigationError.invalidActiveChild(index: -1, childCount: 1)) {
            try await store.dispatch(AddChildrenToDestination([withOne], to: .user("app"))).value
        }
        #expect(names(store.state.navigationState.activeRoute) == ["app"])
    }

    @Test func aRouterReleasedWithoutStopUnregistersItself() async throws {
        let store = AppStore()
        let log = CallLog()
        #expect(store.listenerCount == 0)
        do {
            let router = Router(store: store, rootRoutable: RecordingRoutable(owner: "window", log: log), onIssue: log.issue)
            router.start()
            #expect(store.listenerCount == 1)
            try await store.dispatch(SetRootDestination(place("app"))).value
            await router.waitUntilIdle()
        }
        #expect(store.listenerCount == 0, "the released router's listener is still registered")
        try await store.dispatch(AddNewDestination(place("after-release"))).value
        #expect(log.all == ["window push app"])
    }
}
