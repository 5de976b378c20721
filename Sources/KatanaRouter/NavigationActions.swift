import Katana

/// A request to change the navigation tree. Dispatch it to a store whose state is a ``RoutableState``:
/// `store.dispatch(AddNewDestination(Destination(Feed.self)))`. An invalid request leaves the state unchanged and
/// rejects the dispatch handle with a ``NavigationError``.
public protocol NavigationAction: Sendable {
    /// Changes `navigation`, or throws (leaving it unchanged) when the request cannot be carried out.
    func apply(to navigation: inout NavigationState) throws(NavigationError)
}

/// Puts a destination under the active leaf and makes it active (the root, on an empty tree).
public struct AddNewDestination: NavigationAction {
    /// The destination to add.
    public let destination: Destination
    /// Adds `destination` under the active leaf.
    public init(_ destination: Destination) { self.destination = destination }
    /// Adds the destination under the active leaf and makes it active.
    public func apply(to navigation: inout NavigationState) throws(NavigationError) {
        try navigation.addToActiveRoute(destination)
    }
}

/// Removes the active leaf: "back".
public struct RemoveCurrentDestination: NavigationAction {
    /// Goes back one destination.
    public init() {}
    /// Removes the active leaf (not the root: that throws).
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.removeActiveLeaf() }
}

/// Removes a destination (and everything under it) by identifier.
public struct RemoveDestination: NavigationAction {
    /// Which destination to remove.
    public let identifier: DestinationIdentifier
    /// Removes the destination `identifier` names.
    public init(_ identifier: DestinationIdentifier) { self.identifier = identifier }
    /// Removes the destination and its subtree (throws if it is unknown or the root).
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.remove(identifier) }
}

/// Adds children (tabs, say) under a destination; `activeChild` indexes `children`.
public struct AddChildrenToDestination: NavigationAction {
    /// Under which destination the children go.
    public let parent: DestinationIdentifier
    /// The children to add, with their own subtrees.
    public let children: [NavigationNode]
    /// Which of `children` becomes active, if any.
    public let activeChild: Int?

    /// Adds `children` (with their subtrees) under `parent`; `activeChild` indexes `children`.
    public init(_ children: [NavigationNode], to parent: DestinationIdentifier, activeChild: Int? = nil) {
        self.parent = parent
        self.children = children
        self.activeChild = activeChild
    }

    /// Adds `children` (leaves) under `parent`; `activeChild` indexes `children`.
    public init(_ children: [Destination], to parent: DestinationIdentifier, activeChild: Int? = nil) {
        self.init(children.map { NavigationNode($0) }, to: parent, activeChild: activeChild)
    }

    /// Adds the children (throws on an unknown parent, a duplicate identifier or an index out of range).
    public func apply(to navigation: inout NavigationState) throws(NavigationError) {
        try navigation.addChildren(children, to: parent, activeChild: activeChild)
    }
}

/// Replaces the whole tree (a destination, a prepared tree, or nothing).
public struct SetRootDestination: NavigationAction {
    /// The new tree; nil empties it.
    public let root: NavigationNode?
    /// Replaces the tree with `root` (nil: no tree).
    public init(_ root: NavigationNode?) { self.root = root }
    /// Replaces the tree with `destination` alone.
    public init(_ destination: Destination) { root = NavigationNode(destination) }
    /// Replaces the tree (throws on duplicate identifiers, a bad active index or a tree too deep).
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.setRoot(root) }
}

/// Makes a destination active, with every destination above it (switching tabs, say).
public struct ChangeActiveDestination: NavigationAction {
    /// Which destination becomes active.
    public let identifier: DestinationIdentifier
    /// Makes the destination `identifier` names active.
    public init(_ identifier: DestinationIdentifier) { self.identifier = identifier }
    /// Makes the destination and everything above it active (throws if it is unknown).
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.setActive(identifier) }
}

/// The state updater a navigation action travels in. `store.dispatch(action)` wraps it for you.
public struct Navigate<S: RoutableState>: ThrowingStateUpdater {
    /// The navigation action to apply.
    public let action: any NavigationAction
    /// Wraps `action`.
    public init(_ action: any NavigationAction) { self.action = action }

    /// Applies the action to the state's `navigationState`.
    public func updateState(_ state: inout S) throws {
        try action.apply(to: &state.navigationState)
    }
}

extension PartialStore where S: RoutableState {
    /// Dispatches a navigation action. Traces show it under its own name (`AddNewDestination`, …); the handle is
    /// rejected with a ``NavigationError`` when the request does not fit the current tree.
    @discardableResult
    public func dispatch(_ action: some NavigationAction) -> DispatchHandle<Void> {
        dispatch(Navigate<S>(action), tracedAs: type(of: action))
    }
}

extension SideEffectContext where S: RoutableState {
    /// Dispatches a navigation action from a side effect.
    @discardableResult
    public func dispatch(_ action: some NavigationAction) -> DispatchHandle<Void> {
        dispatch(Navigate<S>(action))
    }
}
