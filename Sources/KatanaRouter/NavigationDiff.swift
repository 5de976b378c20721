/// One thing a routable must do to go from one navigation state to the next. `parent` is the destination whose
/// routable receives the call (`nil`: the router's root routable, for the root itself).
public enum NavigationChange: Sendable, Equatable, CustomStringConvertible {
    /// Show `destination` under `parent` (it is new there).
    case push(Destination, parent: Destination?)
    /// Take `destination` (and everything under it) away from `parent`.
    case pop(Destination, parent: Destination?)
    /// Several destinations removed from and/or added to `parent` at once (tabs replaced, a root swapped).
    case change(parent: Destination?, removed: [Destination], added: [Destination])
    /// `parent`'s active child is now `to` (`from`: the previous active child, if it is still there).
    case changeActiveDestination(parent: Destination, from: Destination?, to: Destination)

    public var description: String {
        func name(_ destination: Destination?) -> String { destination.map(\.description) ?? "root" }
        return switch self {
        case let .push(destination, parent): "push \(destination) onto \(name(parent))"
        case let .pop(destination, parent): "pop \(destination) from \(name(parent))"
        case let .change(parent, removed, added):
            "change \(name(parent)): remove [\(removed.map(\.description).joined(separator: ", "))] add [\(added.map(\.description).joined(separator: ", "))]"
        case let .changeActiveDestination(parent, from, to):
            "changeActiveDestination \(name(parent)): \(from.map(\.description) ?? "none") -> \(to)"
        }
    }
}

/// Turns two navigation states into the routable calls that lead from the first to the second.
///
/// The rules, applied to every destination present in both trees (matched by instance identifier), parents
/// before children, and to the router's root (whose only child is the tree's root):
/// 1. Its children are compared as sets. One added and none removed: `push`. One removed and none added: `pop`.
///    More than one, or some of each: a single `change` with both lists (in tree order).
/// 2. Then, if its active child is a different destination than before: `changeActiveDestination`
///    (not for the root itself, which has no parent to switch).
/// 3. Then the same for each child, in order: a matched child is compared with its old self; an added child
///    with nothing (so its whole subtree is pushed, top down, with its active children set).
///
/// A removed destination takes everything under it along: only the topmost one is popped. A destination that
/// moved to another parent is popped (or changed away) from the old parent and pushed on the new one. Reordering
/// children without adding or removing any is not a change: the order is in the state for routables to read.
///
/// Examples (`>` marks the active child):
/// - `Home > Feed` → `Home > Feed > Post`: `push Post onto Feed`, `changeActiveDestination Feed: none -> Post`.
/// - `Home > Feed > Post` → `Home > Feed`: `pop Post from Feed`.
/// - `Tabs > [A, B]` → `Tabs > [A, C, D]`: `change Tabs: remove [B] add [C, D]`.
/// - `Tabs > [A, >B]` → `Tabs > [>A, B]`: `changeActiveDestination Tabs: B -> A`.
public enum NavigationDiff {
    public static func changes(from old: NavigationState, to new: NavigationState) -> [NavigationChange] {
        var changes: [NavigationChange] = []
        compareChildren(of: nil,
                        old: old.root.map { [$0] } ?? [], oldActive: old.root == nil ? nil : 0,
                        new: new.root.map { [$0] } ?? [], newActive: new.root == nil ? nil : 0,
                        into: &changes)
        return changes
    }

    private static func compareChildren(
        of parent: Destination?,
        old: [NavigationNode], oldActive: Int?,
        new: [NavigationNode], newActive: Int?,
        into changes: inout [NavigationChange]
    ) {
        let oldIDs = Set(old.map(\.destination.instanceIdentifier))
        let newIDs = Set(new.map(\.destination.instanceIdentifier))
        let removed = old.map(\.destination).filter { !newIDs.contains($0.instanceIdentifier) }
        let added = new.map(\.destination).filter { !oldIDs.contains($0.instanceIdentifier) }

        switch (removed.count, added.count) {
        case (0, 0): break
        case (0, 1): changes.append(.push(added[0], parent: parent))
        case (1, 0): changes.append(.pop(removed[0], parent: parent))
        default: changes.append(.change(parent: parent, removed: removed, added: added))
        }

        if let parent, let newActive {
            let to = new[newActive].destination
            let from = oldActive.map { old[$0].destination }
            if from?.instanceIdentifier != to.instanceIdentifier {
                let stillThere = from.flatMap { newIDs.contains($0.instanceIdentifier) ? $0 : nil }
                changes.append(.changeActiveDestination(parent: parent, from: stillThere, to: to))
            }
        }

        for child in new {
            let before = old.first { $0.destination.instanceIdentifier == child.destination.instanceIdentifier }
            compareChildren(of: child.destination,
                            old: before?.children ?? [], oldActive: before?.activeChildIndex,
                            new: child.children, newActive: child.activeChildIndex,
                            into: &changes)
        }
    }
}
