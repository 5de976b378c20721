import Foundation
import KatanaRouter
import Testing

/// Builds trees from a compact description: destinations are created once per name, so two trees built from
/// the same `Places` share identities.
final class Places {
    private var made: [String: Destination] = [:]
    subscript(_ name: String) -> Destination {
        if let existing = made[name] { return existing }
        let destination = place(name)
        made[name] = destination
        return destination
    }

    func node(_ name: String, _ children: [NavigationNode] = [], active: Int? = nil) -> NavigationNode {
        NavigationNode(self[name], children: children, activeChild: active)
    }
}

func describe(_ changes: [NavigationChange]) -> [String] { changes.map(\.description) }

/// The calls a KatanaRouter 0.4 routable receives (its `NavigationTreeDiff`, the default style): pops of every
/// destination that leaves, deepest first, each from its own parent; pushes, and `change`s (which add every child of
/// their parent, in order) per parent; then the active-child changes, in post-order with the active route last.
/// Each expectation below was worked out by hand from 0.4's algorithm.
@Suite struct NavigationDiffTests {
    let p = Places()

    func state(_ root: NavigationNode?) throws -> NavigationState { try NavigationState(root: root) }

    @Test func traversalVisitsTheActiveRouteLast() throws {
        // root > [>x > [x1, >x2], y]: y is inactive, so it comes before x; under x, x1 before the active x2.
        let tree = try state(p.node("root", [p.node("x", [p.node("x1"), p.node("x2")], active: 1), p.node("y")], active: 0))
        #expect(tree.destinations(.preOrder) == [p["root"], p["y"], p["x"], p["x1"], p["x2"]])
        #expect(tree.destinations(.postOrder) == [p["y"], p["x1"], p["x2"], p["x"], p["root"]])
        #expect(tree.destinations(.preOrder).last == tree.activeLeaf)
    }

    @Test func pushUnderTheActiveLeafIsAPushAndAnActiveChange() throws {
        let old = try state(p.node("home", [p.node("feed")], active: 0))
        var new = old
        try new.addToActiveRoute(p["post"])
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .push(p["post"], parent: p["feed"]),
            .changeActiveDestination(parent: p["feed"], from: nil, to: p["post"]),
        ])
    }

    @Test func removingTheCurrentDestinationIsAPop() throws {
        let old = try state(p.node("home", [p.node("feed", [p.node("post")], active: 0)], active: 0))
        var new = old
        try new.removeActiveLeaf()
        #expect(NavigationDiff.changes(from: old, to: new) == [.pop(p["post"], parent: p["feed"])])
    }

    @Test func aChangeAddsEveryChildOfItsParentInOrder() throws {
        let old = try state(p.node("tabs", [p.node("a"), p.node("b")], active: 0))
        let new = try state(p.node("tabs", [p.node("a"), p.node("c"), p.node("d")], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .change(parent: p["tabs"], removed: [p["b"]], added: [p["a"], p["c"], p["d"]]),
        ])
    }

    @Test func aNewActiveChildIsChangeActiveDestination() throws {
        let old = try state(p.node("tabs", [p.node("a"), p.node("b")], active: 1))
        var new = old
        try new.setActive(.user("a"))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .changeActiveDestination(parent: p["tabs"], from: p["b"], to: p["a"]),
        ])
    }

    @Test func movingTheActiveChildToANewDestinationPushesThenChangesIt() throws {
        let old = try state(p.node("tabs", [p.node("a")], active: 0))
        let new = try state(p.node("tabs", [p.node("a"), p.node("b")], active: 1))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .push(p["b"], parent: p["tabs"]),
            .changeActiveDestination(parent: p["tabs"], from: p["a"], to: p["b"]),
        ])
    }

    @Test func fromNothingToADeepTreePushesThenSetsActiveChildrenBottomUp() throws {
        let new = try state(p.node("app", [
            p.node("tabs", [p.node("feed", [p.node("post")], active: 0), p.node("inbox")], active: 1),
        ], active: 0))
        #expect(describe(NavigationDiff.changes(from: NavigationState(), to: new)) == [
            "push App(app) onto root",
            "push Tabs(tabs) onto App(app)",
            "change Tabs(tabs): remove [] add [Feed(feed), Inbox(inbox)]",
            "push Post(post) onto Feed(feed)",
            "changeActiveDestination Feed(feed): none -> Post(post)",
            "changeActiveDestination Tabs(tabs): none -> Inbox(inbox)",
            "changeActiveDestination App(app): none -> Tabs(tabs)",
        ])
    }

    @Test func fromATreeToNothingPopsEveryNodeDeepestFirst() throws {
        let old = try state(p.node("app", [p.node("tabs", [p.node("feed")], active: 0)], active: 0))
        #expect(NavigationDiff.changes(from: old, to: NavigationState()) == [
            .pop(p["feed"], parent: p["tabs"]), .pop(p["tabs"], parent: p["app"]), .pop(p["app"], parent: nil),
        ])
        #expect(NavigationDiff.changes(from: old, to: old).isEmpty)
    }

    @Test func removingASubtreePopsEachNodeFromItsOwnParentDeepestFirst() throws {
        // home > [settings, >feed > [a, >b]] → home > [settings]: feed's two children leave together (a change
        // that removes both), then feed itself.
        let old = try state(p.node("home", [p.node("settings"), p.node("feed", [p.node("a"), p.node("b")], active: 1)], active: 1))
        let new = try state(p.node("home", [p.node("settings")], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .change(parent: p["feed"], removed: [p["a"], p["b"]], added: []),
            .pop(p["feed"], parent: p["home"]),
            .changeActiveDestination(parent: p["home"], from: nil, to: p["settings"]),
        ])
    }

    @Test func replacingASubtreePopsTheOldNodesAndChangesTheParent() throws {
        let old = try state(p.node("tabs", [p.node("feed", [p.node("post")])], active: 0))
        let new = try state(p.node("tabs", [p.node("inbox", [p.node("message")], active: 0)], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .pop(p["post"], parent: p["feed"]),
            .change(parent: p["tabs"], removed: [p["feed"]], added: [p["inbox"]]),
            .push(p["message"], parent: p["inbox"]),
            .changeActiveDestination(parent: p["inbox"], from: nil, to: p["message"]),
            .changeActiveDestination(parent: p["tabs"], from: nil, to: p["inbox"]),
        ])
    }

    @Test func severalChangesUnderDifferentParentsArePopsThenPushesThenActiveChanges() throws {
        let old = try state(p.node("root", [p.node("left", [p.node("l1")], active: 0), p.node("right", [p.node("r1")], active: 0)], active: 0))
        let new = try state(p.node("root", [p.node("left", [p.node("l1"), p.node("l2")], active: 1), p.node("right"),
                                            p.node("extra")], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .pop(p["r1"], parent: p["right"]),
            .push(p["extra"], parent: p["root"]),
            .push(p["l2"], parent: p["left"]),
            .changeActiveDestination(parent: p["left"], from: p["l1"], to: p["l2"]),
        ])
    }

    @Test func twoDisjointSubtreesSwappedBetweenParents() throws {
        // left holds x (with x1), right holds y (with y1); afterwards left holds y and right holds x. 0.4 would not
        // tell the routables (both are still in the tree); here a destination that moved leaves its old place and
        // arrives at its new one, with what is under it.
        let old = try state(p.node("root", [
            p.node("left", [p.node("x", [p.node("x1")], active: 0)], active: 0),
            p.node("right", [p.node("y", [p.node("y1")], active: 0)], active: 0),
        ], active: 0))
        let new = try state(p.node("root", [
            p.node("left", [p.node("y", [p.node("y1")], active: 0)], active: 0),
            p.node("right", [p.node("x", [p.node("x1")], active: 0)], active: 0),
        ], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .pop(p["y1"], parent: p["y"]),
            .pop(p["x1"], parent: p["x"]),
            .change(parent: p["right"], removed: [p["y"]], added: [p["x"]]),
            .push(p["x1"], parent: p["x"]),
            .change(parent: p["left"], removed: [p["x"]], added: [p["y"]]),
            .push(p["y1"], parent: p["y"]),
            .changeActiveDestination(parent: p["x"], from: nil, to: p["x1"]),
            .changeActiveDestination(parent: p["right"], from: nil, to: p["x"]),
            .changeActiveDestination(parent: p["y"], from: nil, to: p["y1"]),
            .changeActiveDestination(parent: p["left"], from: nil, to: p["y"]),
        ])
    }

    @Test func tabsAddedWithOneActive() throws {
        let old = try state(p.node("app"))
        var new = old
        try new.addChildren([p.node("feed"), p.node("inbox"), p.node("me")], to: .user("app"), activeChild: 1)
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .change(parent: p["app"], removed: [], added: [p["feed"], p["inbox"], p["me"]]),
            .changeActiveDestination(parent: p["app"], from: nil, to: p["inbox"]),
        ])
    }

    @Test func replacingTheRootIsAChangeOfTheRouterRoot() throws {
        let old = try state(p.node("tabs", [p.node("feed")], active: 0))
        let new = try state(p.node("login"))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .pop(p["feed"], parent: p["tabs"]),
            .change(parent: nil, removed: [p["tabs"]], added: [p["login"]]),
        ])
    }

    @Test func reorderingChildrenIsNotAChange() throws {
        let old = try state(p.node("tabs", [p.node("a"), p.node("b")], active: 0))
        let new = try state(p.node("tabs", [p.node("b"), p.node("a")], active: 1))
        #expect(NavigationDiff.changes(from: old, to: new).isEmpty)
    }

    // MARK: The compact style (opt-in)

    @Test func theCompactStylePopsOnlyTheTopOfARemovedSubtreeAndListsOnlyWhatIsAdded() throws {
        let old = try state(p.node("app", [p.node("tabs", [p.node("a"), p.node("b")], active: 0)], active: 0))
        #expect(NavigationDiff.changes(from: old, to: NavigationState(), style: .compact) == [.pop(p["app"], parent: nil)])
        let new = try state(p.node("app", [p.node("tabs", [p.node("a"), p.node("c"), p.node("d")], active: 0)], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new, style: .compact) == [
            .change(parent: p["tabs"], removed: [p["b"]], added: [p["c"], p["d"]]),
        ])
        let deep = try state(p.node("app", [
            p.node("tabs", [p.node("feed", [p.node("post")], active: 0), p.node("inbox")], active: 1),
        ], active: 0))
        #expect(describe(NavigationDiff.changes(from: NavigationState(), to: deep, style: .compact)) == [
            "push App(app) onto root",
            "push Tabs(tabs) onto App(app)",
            "changeActiveDestination App(app): none -> Tabs(tabs)",
            "change Tabs(tabs): remove [] add [Feed(feed), Inbox(inbox)]",
            "changeActiveDestination Tabs(tabs): none -> Inbox(inbox)",
            "push Post(post) onto Feed(feed)",
            "changeActiveDestination Feed(feed): none -> Post(post)",
        ])
    }
}
