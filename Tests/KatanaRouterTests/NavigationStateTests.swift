import Foundation
import Katana
import KatanaRouter
import KatanaTrace
import Testing

func place(_ id: String, _ kind: String? = nil) -> Destination {
    Destination(routableType: kind ?? id.capitalized, userIdentifier: id)
}

/// `tabs > [catalog > product, >cart]`, plus helpers to name nodes.
func shopTree() throws -> NavigationState {
    try NavigationState(root: NavigationNode(place("tabs"), children: [
        NavigationNode(place("catalog"), children: [NavigationNode(place("product"))], activeChild: 0),
        NavigationNode(place("cart")),
    ], activeChild: 1))
}

func names(_ destinations: [Destination]) -> [String] { destinations.map { $0.userIdentifier ?? "?" } }

@Suite struct NavigationStateTests {
    @Test func queriesFollowTheActiveRouteAndFindByEitherIdentifier() throws {
        let state = try shopTree()
        #expect(names(state.activeRoute) == ["tabs", "cart"])
        #expect(state.activeLeaf?.userIdentifier == "cart")
        #expect(state.count == 4)
        #expect(names(state.destinations(.preOrder)) == ["tabs", "catalog", "product", "cart"])
        #expect(names(state.destinations(.postOrder)) == ["product", "catalog", "cart", "tabs"])
        let product = try #require(state.destination(.user("product")))
        #expect(state.destination(.instance(product.instanceIdentifier)) == product)
        #expect(state.parent(of: .user("product"))?.userIdentifier == "catalog")
        #expect(state.parent(of: .user("tabs")) == nil)
        #expect(names(state.path(to: .user("product")) ?? []) == ["tabs", "catalog", "product"])
        #expect(state.isActive(.user("cart")) && !state.isActive(.user("product")))
        #expect(state.node(.user("nowhere")) == nil)
        #expect(NavigationState().activeLeaf == nil && NavigationState().destinations().isEmpty)
    }

    @Test func itIsAValueACopyChangesAlone() throws {
        let original = try shopTree()
        var copy = original
        try copy.addToActiveRoute(place("checkout"))
        try copy.setActive(.user("product"))
        #expect(names(original.activeRoute) == ["tabs", "cart"])
        #expect(original.count == 4)
        #expect(names(copy.activeRoute) == ["tabs", "catalog", "product"])
        #expect(names(copy.path(to: .user("checkout")) ?? []) == ["tabs", "cart", "checkout"])
    }

    @Test func changesDoWhatTheySay() throws {
        var state = NavigationState()
        try state.addToActiveRoute(place("home"))
        try state.addChildren([NavigationNode(place("a")), NavigationNode(place("b"))], to: .user("home"), activeChild: 1)
        #expect(names(state.activeRoute) == ["home", "b"])
        try state.addToActiveRoute(place("b1"))
        #expect(names(state.activeRoute) == ["home", "b", "b1"])
        try state.removeActiveLeaf()
        #expect(names(state.activeRoute) == ["home", "b"])
        // Removing the active child: the parent's last remaining child becomes active.
        try state.remove(.user("b"))
        #expect(names(state.activeRoute) == ["home", "a"])
        try state.addChildren([NavigationNode(place("c"))], to: .user("home"))
        #expect(names(state.activeRoute) == ["home", "a"], "adding without activeChild keeps the active one")
        // Removing a child before the active one keeps the same destination active.
        try state.setActive(.user("c"))
        try state.remove(.user("a"))
        #expect(names(state.activeRoute) == ["home", "c"])
        try state.setRoot(nil)
        #expect(state.activeLeaf == nil)
    }

    @Test(arguments: [
        ("unknown identifier", NavigationError.unknownDestination(.user("ghost"))),
        ("duplicate user identifier", NavigationError.duplicateUserIdentifier("cart")),
        ("removing the root", NavigationError.cannotRemoveRoot),
        ("invalid active child", NavigationError.invalidActiveChild(index: 3, childCount: 1)),
    ])
    func invalidRequestsChangeNothingAndSayWhy(_ request: String, _ expected: NavigationError) throws {
        var state = try shopTree()
        let before = state
        #expect(throws: expected) {
            switch request {
            case "unknown identifier": try state.remove(.user("ghost"))
            case "duplicate user identifier": try state.addToActiveRoute(place("cart"))
            case "removing the root": try state.remove(.user("tabs"))
            default: try state.addChildren([NavigationNode(place("x"))], to: .user("cart"), activeChild: 3)
            }
        }
        #expect(state == before)
        #expect(!expected.description.isEmpty)
    }

    @Test func aTreeWithRepeatedIdentifiersIsRefused() {
        let twin = place("twin")
        #expect(throws: NavigationError.duplicateInstanceIdentifier(twin.instanceIdentifier)) {
            try NavigationState(root: NavigationNode(place("root"), children: [NavigationNode(twin), NavigationNode(twin)]))
        }
        #expect(throws: NavigationError.duplicateUserIdentifier("same")) {
            try NavigationState(root: NavigationNode(place("same"), children: [NavigationNode(place("same"))]))
        }
        var empty = NavigationState()
        #expect(throws: NavigationError.emptyNavigation) { try empty.removeActiveLeaf() }
    }
}

struct AppState: RoutableState {
    var navigationState = NavigationState()
    var other = 0
}

typealias AppStore = Store<AppState, EmptySideEffectDependencyContainer>

@Suite struct NavigationActionTests {
    @Test func actionsChangeTheStoreAndInvalidOnesRejectTheirHandleWithTheReason() async throws {
        let backend = InMemoryTraceBackend()
        let store = AppStore(interceptors: [], stateInitializer: { AppState() }, configuration: .init(traceBackend: backend))
        try await store.dispatch(SetRootDestination(place("tabs"))).value
        try await store.dispatch(AddChildrenToDestination([place("feed"), place("inbox")], to: .user("tabs"), activeChild: 0)).value
        try await store.dispatch(AddNewDestination(place("post"))).value
        #expect(names(store.state.navigationState.activeRoute) == ["tabs", "feed", "post"])
        try await store.dispatch(ChangeActiveDestination(.user("inbox"))).value
        #expect(names(store.state.navigationState.activeRoute) == ["tabs", "inbox"])

        let before = store.state.navigationState
        await #expect(throws: NavigationError.unknownDestination(.user("ghost"))) {
            try await store.dispatch(RemoveDestination(.user("ghost"))).value
        }
        await #expect(throws: NavigationError.duplicateUserIdentifier("post")) {
            try await store.dispatch(AddNewDestination(place("post"))).value
        }
        await #expect(throws: NavigationError.cannotRemoveRoot) {
            try await store.dispatch(RemoveDestination(.user("tabs"))).value
        }
        #expect(store.state.navigationState == before)

        try await store.dispatch(RemoveCurrentDestination()).value
        #expect(names(store.state.navigationState.activeRoute) == ["tabs", "feed", "post"])

        // Traced under the actions' own names, with refusals as errors.
        let ends = backend.events.compactMap { event -> String? in
            guard case let .end(end) = event else { return nil }
            return "\(end.name.string.split(separator: ".").last!):\(end.outcome)"
        }
        #expect(ends == ["SetRootDestination:ok", "AddChildrenToDestination:ok", "AddNewDestination:ok",
                         "ChangeActiveDestination:ok", "RemoveDestination:error", "AddNewDestination:error",
                         "RemoveDestination:error", "RemoveCurrentDestination:ok"])
    }

    @Test func sideEffectsNavigateToo() async throws {
        struct OpenInbox: SideEffect {
            func sideEffect(_ context: SideEffectContext<AppState, EmptySideEffectDependencyContainer>) async throws {
                try await context.dispatch(SetRootDestination(place("home"))).value
                try await context.dispatch(AddNewDestination(place("inbox"))).value
            }
        }
        let store = AppStore()
        try await store.dispatch(OpenInbox()).value
        #expect(names(store.state.navigationState.activeRoute) == ["home", "inbox"])
    }
}
