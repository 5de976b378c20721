import Foundation
import Katana

/// A place the app can be: a kind of routable (a screen, a wizard step, a CLI page), optional data for it, an
/// optional identifier of the app's choosing (unique in the tree), and an identifier of this one instance.
public struct Destination: Sendable, Hashable, CustomStringConvertible {
    /// What kind of routable shows this destination (its type's name, or any name the app chooses).
    public let routableType: String
    /// Data the routable needs to show it (an id to load, a prefilled form).
    public let contextData: (any Sendable)?
    /// The app's own name for this destination, unique in a navigation tree, to find or remove it by.
    public let userIdentifier: String?
    /// Tells this destination from every other, including others of the same type.
    public let instanceIdentifier: UUID

    /// A destination of routable type `routableType` (a name), with optional context data and a user identifier
    /// (unique in a tree); `instanceIdentifier` tells two destinations of one type apart.
    public init(routableType: String, contextData: (any Sendable)? = nil, userIdentifier: String? = nil,
                instanceIdentifier: UUID = UUID()) {
        self.routableType = routableType
        self.contextData = contextData
        self.userIdentifier = userIdentifier
        self.instanceIdentifier = instanceIdentifier
    }

    /// A destination shown by the routable type `type` (named after it).
    public init(_ type: Any.Type, contextData: (any Sendable)? = nil, userIdentifier: String? = nil,
                instanceIdentifier: UUID = UUID()) {
        self.init(routableType: String(describing: type), contextData: contextData, userIdentifier: userIdentifier,
                  instanceIdentifier: instanceIdentifier)
    }

    public static func == (lhs: Destination, rhs: Destination) -> Bool {
        lhs.instanceIdentifier == rhs.instanceIdentifier && lhs.routableType == rhs.routableType
            && lhs.userIdentifier == rhs.userIdentifier
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(instanceIdentifier) }

    public var description: String {
        userIdentifier.map { "\(routableType)(\($0))" } ?? "\(routableType)#\(instanceIdentifier.uuidString.prefix(8))"
    }
}

/// How an action names a destination: by instance, or by the app's user identifier.
public enum DestinationIdentifier: Sendable, Hashable, CustomStringConvertible {
    /// The destination with this instance identifier.
    case instance(UUID)
    /// The destination with this user identifier.
    case user(String)

    public var description: String {
        switch self {
        case let .instance(id): "instance \(id.uuidString)"
        case let .user(name): "user identifier \"\(name)\""
        }
    }

    func matches(_ destination: Destination) -> Bool {
        switch self {
        case let .instance(id): destination.instanceIdentifier == id
        case let .user(name): destination.userIdentifier == name
        }
    }
}

/// Why a navigation request was refused. The state is left as it was, and the dispatch handle carries the error.
public enum NavigationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No destination in the tree is named so.
    case unknownDestination(DestinationIdentifier)
    /// The user identifier is already in the tree (user identifiers are unique in a tree).
    case duplicateUserIdentifier(String)
    /// The destination instance is already in the tree.
    case duplicateInstanceIdentifier(UUID)
    /// The request would remove the root; set a new root (or `nil`) with `SetRootDestination` instead.
    case cannotRemoveRoot
    /// The request needs a destination but the navigation tree is empty.
    case emptyNavigation
    /// An active-child index that is not among the node's children.
    case invalidActiveChild(index: Int, childCount: Int)
    /// The tree would be deeper than ``NavigationState/maximumDepth`` levels.
    case tooDeep(limit: Int)

    public var description: String {
        switch self {
        case let .unknownDestination(id): "no destination with \(id) in the navigation tree"
        case let .duplicateUserIdentifier(name): "user identifier \"\(name)\" is already in the navigation tree"
        case let .duplicateInstanceIdentifier(id): "destination instance \(id.uuidString) is already in the navigation tree"
        case .cannotRemoveRoot: "cannot remove the root destination: dispatch SetRootDestination to replace or clear it"
        case .emptyNavigation: "the navigation tree is empty: dispatch SetRootDestination or AddNewDestination first"
        case let .invalidActiveChild(index, count): "active child \(index) is not among the \(count) children"
        case let .tooDeep(limit): "the navigation tree would be more than \(limit) levels deep (NavigationState.maximumDepth)"
        }
    }
}

/// A destination and the destinations under it, with at most one of them active (the one on the active route).
/// A value: changing a copy never changes the original (the child arrays are copy-on-write, so a change copies
/// only the path from the root to what changed).
///
/// A tree of any depth can be built, compared and dropped on any thread: comparison and release walk it with a
/// work list, not recursion (a 100,000-deep chain of nested arrays would otherwise overflow the stack as it is
/// freed). A navigation state accepts trees up to ``NavigationState/maximumDepth`` levels deep.
public struct NavigationNode: Sendable, Equatable {
    /// The destination this node stands for.
    public internal(set) var destination: Destination
    var storage: ChildrenStorage
    /// The index of the active child in ``children``; nil when none is active.
    public internal(set) var activeChildIndex: Int?

    /// A node with `children`; `activeChild` is the index of the active one (checked when the node enters a
    /// navigation state, which refuses an index that is not among `children`).
    public init(_ destination: Destination, children: [NavigationNode] = [], activeChild: Int? = nil) {
        self.destination = destination
        self.storage = children.isEmpty ? ChildrenStorage.empty : ChildrenStorage(children)
        self.activeChildIndex = activeChild
    }

    /// The destinations under this one, in order.
    public internal(set) var children: [NavigationNode] {
        get { storage.nodes }
        _modify {
            if !isKnownUniquelyReferenced(&storage) { storage = ChildrenStorage(storage.nodes) }
            yield &storage.nodes
        }
    }

    /// The active child; nil when there is none, or when `activeChildIndex` is not among the children (a node
    /// built with a wrong index, before a navigation state refused it).
    public var activeChild: NavigationNode? {
        guard let index = activeChildIndex, storage.nodes.indices.contains(index) else { return nil }
        return storage.nodes[index]
    }

    public static func == (lhs: NavigationNode, rhs: NavigationNode) -> Bool {
        var pairs = [(lhs, rhs)]
        while let (left, right) = pairs.popLast() {
            guard left.destination == right.destination, left.activeChildIndex == right.activeChildIndex else { return false }
            if left.storage === right.storage { continue }
            guard left.storage.nodes.count == right.storage.nodes.count else { return false }
            pairs.append(contentsOf: zip(left.storage.nodes, right.storage.nodes))
        }
        return true
    }

    /// Visits this node and everything under it in KatanaRouter's order: the active child's subtree after its
    /// inactive siblings' (in tree order), so the active route comes last, in pre-order and in post-order alike.
    func visit(_ order: NavigationState.TraversalOrder, _ body: (NavigationNode) -> Void) {
        visit(order, parent: nil) { node, _ in body(node) }
    }

    /// `visit`, with each node's parent destination (`parent` for this node).
    func visit(_ order: NavigationState.TraversalOrder, parent: Destination?,
               _ body: (NavigationNode, Destination?) -> Void) {
        if order == .preOrder { body(self, parent) }
        let nodes = storage.nodes
        let active = activeChildIndex.flatMap { nodes.indices.contains($0) ? $0 : nil }
        for (index, child) in nodes.enumerated() where index != active { child.visit(order, parent: destination, body) }
        if let active { nodes[active].visit(order, parent: destination, body) }
        if order == .postOrder { body(self, parent) }
    }

    /// The path of child indices from this node to the first node matching `id` (pre-order), if any.
    func indexPath(to id: DestinationIdentifier) -> [Int]? {
        if id.matches(destination) { return [] }
        for (index, child) in children.enumerated() {
            if let rest = child.indexPath(to: id) { return [index] + rest }
        }
        return nil
    }

    subscript(path path: ArraySlice<Int>) -> NavigationNode {
        get { path.isEmpty ? self : children[path.first!][path: path.dropFirst()] }
        set {
            if path.isEmpty { self = newValue } else { children[path.first!][path: path.dropFirst()] = newValue }
        }
    }
}

/// A node's children, shared between copies of the node until one of them changes (copy-on-write). Freed without
/// recursion: its deinit takes over the children of every node it alone holds, so dropping a deep tree uses a work
/// list on the heap instead of one stack frame per level.
final class ChildrenStorage: @unchecked Sendable {
    // Mutated only through `NavigationNode.children`, after `isKnownUniquelyReferenced` said no other node shares
    // it, or in deinit: the usual copy-on-write discipline, so no two threads ever touch one mutably.
    var nodes: [NavigationNode]

    /// Shared by every leaf: building one allocates nothing; changing one copies first.
    static let empty = ChildrenStorage([])

    init(_ nodes: [NavigationNode]) { self.nodes = nodes }

    deinit {
        guard !nodes.isEmpty else { return }
        var worklist: [NavigationNode] = []
        swap(&worklist, &nodes)
        while var node = worklist.popLast() {
            if isKnownUniquelyReferenced(&node.storage), !node.storage.nodes.isEmpty {
                worklist.append(contentsOf: node.storage.nodes)
                node.storage.nodes = []
            }
        }
    }
}

/// The navigation part of an app's state: a tree of destinations whose active route (root → active child → …)
/// is where the app is now. Change it only by dispatching navigation actions; a ``Router`` turns each change into
/// calls on the app's ``Routable``s.
public struct NavigationState: Sendable, Equatable {
    /// The tree's root; nil for an empty navigation state.
    public private(set) var root: NavigationNode?

    /// An empty navigation state: no tree.
    public init() {}

    /// A navigation state with `root` as its tree (throws when identifiers repeat or an active child is invalid).
    public init(root: NavigationNode?) throws(NavigationError) {
        if let root { try Self.validate(root) }
        self.root = root
    }

    /// The deepest tree a navigation state accepts, in levels (the root is level 1). Deeper requests are refused
    /// with ``NavigationError/tooDeep(limit:)``: the diff and the queries walk the tree recursively, and an app's
    /// navigation is a few dozen levels deep, not thousands.
    public static let maximumDepth = 1_000

    /// The order ``destinations(_:)`` lists the tree in (the active route last, either way).
    public enum TraversalOrder: Sendable {
        /// Each destination before the destinations under it.
        case preOrder
        /// Each destination after the destinations under it.
        case postOrder
    }

    // MARK: Queries

    /// The destinations from the root down the active children: where the app is.
    public var activeRoute: [Destination] {
        var route: [Destination] = []
        var node = root
        while let current = node {
            route.append(current.destination)
            node = current.activeChild
        }
        return route
    }

    /// The end of the active route: the destination the user sees.
    public var activeLeaf: Destination? { activeRoute.last }

    /// Every destination, parents before children (`.preOrder`) or children before parents (`.postOrder`), in
    /// KatanaRouter's order: under each destination, the inactive children's subtrees first (in tree order) and the
    /// active child's last, so the active route is visited last (its leaf last in pre-order, its root last in
    /// post-order).
    public func destinations(_ order: TraversalOrder = .preOrder) -> [Destination] {
        var all: [Destination] = []
        root?.visit(order) { all.append($0.destination) }
        return all
    }

    /// How many destinations the tree holds.
    public var count: Int { destinations().count }

    /// The node of the destination `id` names, with its subtree.
    public func node(_ id: DestinationIdentifier) -> NavigationNode? {
        guard let root, let path = root.indexPath(to: id) else { return nil }
        return root[path: path[...]]
    }

    /// The destination `id` names, if it is in the tree.
    public func destination(_ id: DestinationIdentifier) -> Destination? { node(id)?.destination }

    /// The destinations from the root to `id`'s destination, both included.
    public func path(to id: DestinationIdentifier) -> [Destination]? {
        guard let root, let path = root.indexPath(to: id) else { return nil }
        var node = root
        var result = [root.destination]
        for index in path {
            node = node.children[index]
            result.append(node.destination)
        }
        return result
    }

    /// The destination directly above `id`'s (nil for the root or an unknown destination).
    public func parent(of id: DestinationIdentifier) -> Destination? {
        guard let path = path(to: id), path.count >= 2 else { return nil }
        return path[path.count - 2]
    }

    /// Whether `id`'s destination is on the active route.
    public func isActive(_ id: DestinationIdentifier) -> Bool { activeRoute.contains { id.matches($0) } }

    // MARK: Changes (each validates first and changes nothing when it throws)

    /// Puts `destination` under the active leaf and makes it active (the root, when the tree is empty).
    public mutating func addToActiveRoute(_ destination: Destination) throws(NavigationError) {
        try checkNew([NavigationNode(destination)], underDepth: activeRoute.count)
        guard var node = root else {
            root = NavigationNode(destination)
            return
        }
        var path: [Int] = []
        while let active = node.activeChildIndex {
            path.append(active)
            node = node.children[active]
        }
        node.children.append(NavigationNode(destination))
        node.activeChildIndex = node.children.count - 1
        root![path: path[...]] = node
    }

    /// Removes the active leaf (with nothing under it); its parent's last remaining child, if any, becomes active.
    public mutating func removeActiveLeaf() throws(NavigationError) {
        guard let leaf = activeLeaf else { throw .emptyNavigation }
        try remove(.instance(leaf.instanceIdentifier))
    }

    /// Removes `id`'s destination and everything under it. If it was its parent's active child, the parent's last
    /// remaining child (if any) becomes active.
    public mutating func remove(_ id: DestinationIdentifier) throws(NavigationError) {
        guard let root else { throw .emptyNavigation }
        guard let path = root.indexPath(to: id) else { throw .unknownDestination(id) }
        guard let index = path.last else { throw .cannotRemoveRoot }
        let parentPath = path.dropLast()
        var parent = root[path: parentPath]
        parent.children.remove(at: index)
        if let active = parent.activeChildIndex {
            if active == index {
                parent.activeChildIndex = parent.children.isEmpty ? nil : parent.children.count - 1
            } else if active > index {
                parent.activeChildIndex = active - 1
            }
        }
        self.root![path: parentPath] = parent
    }

    /// Adds `children` (each may carry a subtree) under `id`'s destination, after its existing children. With
    /// `activeChild` (an index into `children`), that one becomes the parent's active child.
    public mutating func addChildren(_ children: [NavigationNode], to id: DestinationIdentifier,
                                     activeChild: Int? = nil) throws(NavigationError) {
        guard let root else { throw .emptyNavigation }
        guard let path = root.indexPath(to: id) else { throw .unknownDestination(id) }
        if let activeChild, !children.indices.contains(activeChild) {
            throw .invalidActiveChild(index: activeChild, childCount: children.count)
        }
        try checkNew(children, underDepth: path.count + 1)
        var parent = root[path: path[...]]
        let offset = parent.children.count
        parent.children += children
        if let activeChild { parent.activeChildIndex = offset + activeChild }
        self.root![path: path[...]] = parent
    }

    /// Replaces the whole tree (`nil` clears it).
    public mutating func setRoot(_ node: NavigationNode?) throws(NavigationError) {
        if let node { try Self.validate(node) }
        root = node
    }

    /// Makes `id`'s destination active, and every destination above it, so it is on the active route.
    public mutating func setActive(_ id: DestinationIdentifier) throws(NavigationError) {
        guard let root else { throw .emptyNavigation }
        guard let path = root.indexPath(to: id) else { throw .unknownDestination(id) }
        for depth in 0..<path.count {
            self.root![path: path.prefix(depth)].activeChildIndex = path[depth]
        }
    }

    // MARK: Validation

    /// Checks subtrees about to go under a node `depth` levels deep (0: they become the root).
    private func checkNew(_ nodes: [NavigationNode], underDepth depth: Int) throws(NavigationError) {
        var instances = Set<UUID>()
        var users = Set<String>()
        root?.visit(.preOrder) {
            instances.insert($0.destination.instanceIdentifier)
            if let user = $0.destination.userIdentifier { users.insert(user) }
        }
        for node in nodes { try Self.collect(node, atDepth: depth + 1, &instances, &users) }
    }

    private static func validate(_ root: NavigationNode) throws(NavigationError) {
        var instances = Set<UUID>()
        var users = Set<String>()
        try collect(root, atDepth: 1, &instances, &users)
    }

    /// Checks a subtree whose top is at level `depth`: identifiers unique, active children valid, depth within
    /// the limit. A work list, not recursion, so a tree of any depth is refused, not a stack overflow.
    private static func collect(_ top: NavigationNode, atDepth depth: Int, _ instances: inout Set<UUID>,
                                _ users: inout Set<String>) throws(NavigationError) {
        var worklist = [(top, depth)]
        while let (node, depth) = worklist.popLast() {
            guard depth <= maximumDepth else { throw .tooDeep(limit: maximumDepth) }
            guard instances.insert(node.destination.instanceIdentifier).inserted else {
                throw .duplicateInstanceIdentifier(node.destination.instanceIdentifier)
            }
            if let user = node.destination.userIdentifier, !users.insert(user).inserted {
                throw .duplicateUserIdentifier(user)
            }
            if let active = node.activeChildIndex, !node.children.indices.contains(active) {
                throw .invalidActiveChild(index: active, childCount: node.children.count)
            }
            for child in node.children.reversed() { worklist.append((child, depth + 1)) }
        }
    }
}

/// A state with a navigation tree: what a ``Router`` watches and navigation actions change.
public protocol RoutableState: State {
    /// The navigation tree the router shows.
    var navigationState: NavigationState { get set }
}
