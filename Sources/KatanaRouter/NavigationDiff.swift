import Foundation

/// One thing a routable must do to go from one navigation state to the next. `parent` is the destination whose
/// routable receives the call (`nil`: the router's root routable, for the root itself).
public enum NavigationChange: Sendable, Equatable, CustomStringConvertible {
    /// Show `destination` under `parent` (it is new there).
    case push(Destination, parent: Destination?)
    /// Take `destination` away from `parent`. In the default style its children were popped before it, each from
    /// its own parent; in the compact style this pop takes everything under it along.
    case pop(Destination, parent: Destination?)
    /// Several destinations removed from and/or added to `parent` at once (tabs replaced, a root swapped).
    /// `added`: in the default style, *every* child of `parent` after the change, in order — the ones it kept
    /// included, as KatanaRouter 0.4's `destinationsToPush` (a routable rebuilds its container from it, and returns
    /// a routable for each); empty when the change only removes. In the compact style, only the new ones.
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
/// The default style (``Style/katanaRouter``) is KatanaRouter 0.4's `NavigationTreeDiff`, so a routable written for
/// it receives the same calls:
/// 1. **Pops**: every destination of the old tree that is not in the new one, in post-order with the active route
///    last (``NavigationState/destinations(_:)``): a removed subtree is popped node by node, deepest first, each
///    from its own parent, so every routable hears that its children left before it leaves.
/// 2. **Pushes**: every destination of the new tree that is not in the old one, in pre-order, active route last.
/// 3. **Grouping, per parent** (in the order the pushes first name each parent): a parent that gains exactly one
///    destination and loses none gets a `push`; any other parent that gains destinations gets one `change` that
///    removes the ones it lost and adds *all* its children after the change, in order (0.4 passes the whole list so
///    that a container can be rebuilt in order). The pops of parents that gain nothing come first, one `pop` per
///    parent that loses one destination and one `change` (nothing added) per parent that loses several.
/// 4. **Active children**: then, in post-order with the active route last, a `changeActiveDestination` for every
///    destination whose active child is another one than before (or that is new and has one).
///
/// So the calls come as: the pops, the pushes and changes, the active-child changes. Destinations are matched by
/// instance identifier. Beyond 0.4, a destination that moved to another parent counts as leaving its old place and
/// arriving at its new one, with everything under it (0.4 did not tell the routables), and reordering children
/// without adding or removing any is not a change (the order is in the state for routables to read).
///
/// Examples (`>` marks the active child):
/// - `Home > Feed` → `Home > Feed > Post`: `push Post onto Feed`, `changeActiveDestination Feed: none -> Post`.
/// - `Home > Feed > Post > Comments` → `Home > Feed`: `pop Comments from Post`, `pop Post from Feed`.
/// - `Tabs > [A, B]` → `Tabs > [A, C, D]`: `change Tabs: remove [B] add [A, C, D]`.
/// - `Tabs > [A, >B]` → `Tabs > [>A, B]`: `changeActiveDestination Tabs: B -> A`.
///
/// ``Style/compact`` is this port's earlier form: one `pop` per removed subtree (its top node), changes that list
/// only the destinations added, each parent's calls before its children's.
public enum NavigationDiff {
    /// How a diff reports removed subtrees and `change`s.
    public enum Style: Sendable, Equatable {
        /// KatanaRouter 0.4's calls (the default): a pop for every destination that leaves, deepest first; a
        /// `change` adds every child of its parent, in order.
        case katanaRouter
        /// One `pop` (or `change`) per removed subtree, for its top node only; a `change` lists only what it adds;
        /// calls grouped parent by parent, top down.
        case compact
    }

    /// The calls that lead the routables from `old` to `new`, in the order they are made (see ``Style``).
    public static func changes(from old: NavigationState, to new: NavigationState,
                               style: Style = .katanaRouter) -> [NavigationChange] {
        switch style {
        case .katanaRouter: return katanaRouterChanges(from: old, to: new)
        case .compact:
            var changes: [NavigationChange] = []
            compareChildren(of: nil,
                            old: old.root.map { [$0] } ?? [], oldActive: old.root == nil ? nil : 0,
                            new: new.root.map { [$0] } ?? [], newActive: new.root == nil ? nil : 0,
                            into: &changes)
            return changes
        }
    }

    // MARK: KatanaRouter 0.4

    /// A destination and its parent in one tree.
    private struct Placed {
        let node: NavigationNode
        let parent: Destination?
        var id: UUID { node.destination.instanceIdentifier }
    }

    private static func katanaRouterChanges(from old: NavigationState, to new: NavigationState) -> [NavigationChange] {
        var oldNodes: [UUID: Placed] = [:]
        var oldPostOrder: [Placed] = []
        old.root?.visit(.postOrder, parent: nil) { node, parent in
            let placed = Placed(node: node, parent: parent)
            oldNodes[placed.id] = placed
            oldPostOrder.append(placed)
        }
        // A destination stays when it is in both trees under the same parent, which stays too (pre-order visits
        // parents first); anything else in the old tree leaves, anything else in the new one arrives.
        var stays: Set<UUID> = []
        var pushes: [Placed] = []
        new.root?.visit(.preOrder, parent: nil) { node, parent in
            let placed = Placed(node: node, parent: parent)
            if let before = oldNodes[placed.id], before.parent?.instanceIdentifier == parent?.instanceIdentifier,
               parent.map({ stays.contains($0.instanceIdentifier) }) ?? true {
                stays.insert(placed.id)
            } else {
                pushes.append(placed)
            }
        }
        let pops = oldPostOrder.filter { !stays.contains($0.id) }

        var singlePops = pops
        var arrivals: [NavigationChange] = []
        for parent in uniqueParents(pushes) {
            let parentID = parent?.instanceIdentifier
            let pushed = pushes.filter { $0.parent?.instanceIdentifier == parentID }
            // Pops group with a parent's pushes only when that parent stays: a parent that arrives (or moved) has
            // no routable yet that could be told about its old children.
            let parentStays = parentID.map { stays.contains($0) } ?? true  // the router's root always stays
            let popped = parentStays ? pops.filter { $0.parent?.instanceIdentifier == parentID } : []
            if pushed.count == 1, popped.isEmpty {
                arrivals.append(.push(pushed[0].node.destination, parent: parent))
                continue
            }
            let children = parentID.flatMap { new.node(.instance($0))?.children.map(\.destination) }
                ?? new.root.map { [$0.destination] } ?? []
            arrivals.append(.change(parent: parent, removed: popped.map(\.node.destination), added: children))
            singlePops.removeAll { $0.parent?.instanceIdentifier == parentID }
        }

        var departures: [NavigationChange] = []
        for parent in uniqueParents(singlePops) {
            let popped = singlePops.filter { $0.parent?.instanceIdentifier == parent?.instanceIdentifier }
            departures.append(popped.count == 1
                ? .pop(popped[0].node.destination, parent: parent)
                : .change(parent: parent, removed: popped.map(\.node.destination), added: []))
        }

        var activeChanges: [NavigationChange] = []
        new.root?.visit(.postOrder) { node in
            guard let active = node.activeChild else { return }
            let id = node.destination.instanceIdentifier
            let before = stays.contains(id) ? oldNodes[id]?.node.activeChild : nil
            guard before?.destination.instanceIdentifier != active.destination.instanceIdentifier else { return }
            let stillThere = before.flatMap { previous in
                node.children.contains { $0.destination.instanceIdentifier == previous.destination.instanceIdentifier }
                    ? previous.destination : nil
            }
            activeChanges.append(.changeActiveDestination(parent: node.destination, from: stillThere,
                                                          to: active.destination))
        }
        return departures + arrivals + activeChanges
    }

    /// The parents of `placed`, each once, in the order they first appear (nil: the router's root routable).
    private static func uniqueParents(_ placed: [Placed]) -> [Destination?] {
        var seen: Set<UUID?> = []
        var parents: [Destination?] = []
        for item in placed where seen.insert(item.parent?.instanceIdentifier).inserted { parents.append(item.parent) }
        return parents
    }

    // MARK: Compact

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
