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

@Suite struct NavigationDiffTests {
    let p = Places()

    func state(_ root: NavigationNode?) throws -> NavigationState { try NavigationState(root: root) }

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

    @Test func severalChangesUnderOneParentAreOneChange() throws {
        let old = try state(p.node("tabs", [p.node("a"), p.node("b")], active: 0))
        let new = try state(p.node("tabs", [p.node("a"), p.node("c"), p.node("d")], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .change(parent: p["tabs"], removed: [p["b"]], added: [p["c"], p["d"]]),
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

    @Test func fromNothingToADeepTreePushesTopDownWithActiveChildren() throws {
        let new = try state(p.node("app", [
            p.node("tabs", [p.node("feed", [p.node("post")], active: 0), p.node("inbox")], active: 1),
        ], active: 0))
        #expect(describe(NavigationDiff.changes(from: NavigationState(), to: new)) == [
            "push App(app) onto root",
            "push Tabs(tabs) onto App(app)",
            "changeActiveDestination App(app): none -> Tabs(tabs)",
            "change Tabs(tabs): remove [] add [Feed(feed), Inbox(inbox)]",
            "changeActiveDestination Tabs(tabs): none -> Inbox(inbox)",
            "push Post(post) onto Feed(feed)",
            "changeActiveDestination Feed(feed): none -> Post(post)",
        ])
    }

    @Test func fromATreeToNothingPopsOnlyTheRoot() throws {
        let old = try state(p.node("app", [p.node("tabs", [p.node("feed")], active: 0)], active: 0))
        #expect(NavigationDiff.changes(from: old, to: NavigationState()) == [.pop(p["app"], parent: nil)])
        #expect(NavigationDiff.changes(from: old, to: old).isEmpty)
    }

    @Test func twoDisjointSubtreesSwappedBetweenParents() throws {
        // left holds x (with x1), right holds y (with y1); afterwards left holds y and right holds x.
        let old = try state(p.node("root", [
            p.node("left", [p.node("x", [p.node("x1")], active: 0)], active: 0),
            p.node("right", [p.node("y", [p.node("y1")], active: 0)], active: 0),
        ], active: 0))
        let new = try state(p.node("root", [
            p.node("left", [p.node("y", [p.node("y1")], active: 0)], active: 0),
            p.node("right", [p.node("x", [p.node("x1")], active: 0)], active: 0),
        ], active: 0))
        #expect(NavigationDiff.changes(from: old, to: new) == [
            .change(parent: p["left"], removed: [p["x"]], added: [p["y"]]),
            .changeActiveDestination(parent: p["left"], from: nil, to: p["y"]),
            .push(p["y1"], parent: p["y"]),
            .changeActiveDestination(parent: p["y"], from: nil, to: p["y1"]),
            .change(parent: p["right"], removed: [p["y"]], added: [p["x"]]),
            .changeActiveDestination(parent: p["right"], from: nil, to: p["x"]),
            .push(p["x1"], parent: p["x"]),
            .changeActiveDestination(parent: p["x"], from: nil, to: p["x1"]),
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
        #expect(NavigationDiff.changes(from: old, to: new) == [.change(parent: nil, removed: [p["tabs"]], added: [p["login"]])])
    }

    @Test func reorderingChildrenIsNotAChange() throws {
        let old = try state(p.node("tabs", [p.node("a"), p.node("b")], active: 0))
        let new = try state(p.node("tabs", [p.node("b"), p.node("a")], active: 1))
        #expect(NavigationDiff.changes(from: old, to: new).isEmpty)
    }
}
