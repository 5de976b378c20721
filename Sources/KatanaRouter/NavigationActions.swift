import Katana

/// A request to change the navigation tree. Dispatch it to a store whose state is a ``RoutableState``:
/// `store.dispatch(AddNewDestination(Destination(Feed.self)))`. An invalid request leaves the state unchanged and
/// rejects the dispatch handle with a ``NavigationError``.
public protocol NavigationAction: Sendable {
    func apply(to navigation: inout NavigationState) throws(NavigationError)
}

/// Puts a destination under the active leaf and makes it active (the root, on an empty tree).
public struct AddNewDestination: NavigationAction {
    public let destination: Destination
    public init(_ destination: Destination) { self.destination = destination }
    public func apply(to navigation: inout NavigationState) throws(NavigationError) {
        try navigation.addToActiveRoute(destination)
    }
}

/// Removes the active leaf: "back".
public struct RemoveCurrentDestination: NavigationAction {
    public init() {}
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.removeActiveLeaf() }
}

/// Removes a destination (and everything under it) by identifier.
public struct RemoveDestination: NavigationAction {
    public let identifier: DestinationIdentifier
    public init(_ identifier: DestinationIdentifier) { self.identifier = identifier }
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.remove(identifier) }
}

/// Adds children (tabs, say) under a destination; `activeChild` indexes `children`.
public struct AddChildrenToDestination: NavigationAction {
    public let parent: DestinationIdentifier
    public let children: [NavigationNode]
    public let activeChild: Int?

    public init(_ children: [NavigationNode], to parent: DestinationIdentifier, activeChild: Int? = nil) {
        self.parent = parent
        self.children = children
        self.activeChild = activeChild
    }

    public init(_ children: [Destination], to parent: DestinationIdentifier, activeChild: Int? = nil) {
        self.init(children.map { NavigationNode($0) }, to: parent, activeChild: activeChild)
    }

    public func apply(to navigation: inout NavigationState) throws(NavigationError) {
        try navigation.addChildren(children, to: parent, activeChild: activeChild)
    }
}

/// Replaces the whole tree (a destination, a prepared tree, or nothing).
public struct SetRootDestination: NavigationAction {
    public let root: NavigationNode?
    public init(_ root: NavigationNode?) { self.root = root }
    public init(_ destination: Destination) { root = NavigationNode(destination) }
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.setRoot(root) }
}

/// Makes a destination active, with every destination above it (switching tabs, say).
public struct ChangeActiveDestination: NavigationAction {
    public let identifier: DestinationIdentifier
    public init(_ identifier: DestinationIdentifier) { self.identifier = identifier }
    public func apply(to navigation: inout NavigationState) throws(NavigationError) { try navigation.setActive(identifier) }
}

/// The state updater a navigation action travels in. `store.dispatch(action)` wraps it for you.
public struct Navigate<S: RoutableState>: ThrowingStateUpdater {
    public let action: any NavigationAction
    public init(_ action: any NavigationAction) { self.action = action }

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
