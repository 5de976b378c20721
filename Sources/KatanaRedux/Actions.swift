/// Anything a reducer can receive. Any `Sendable` value can be an action; conform to ``FluxStandardAction`` for
/// the Flux Standard Action shape (`type`, `payload`, `meta`, `error`) that ReduxKit and Redux tools expect.
public protocol Action: Sendable {}

/// A Flux Standard Action: a `type`, an optional `payload`, optional `meta` data, and whether it reports an
/// `error` (then `payload` is the error). Only `payload` is required: `type` defaults to the Swift type's name,
/// `meta` to `nil`, `error` to `false`.
public protocol FluxStandardAction: Action {
    /// The action's type, by which reducers and tools tell actions apart.
    var type: String { get }
    /// What the action carries (the error, when `error` is true).
    var payload: (any Sendable)? { get }
    /// Anything else about the action that is not its payload.
    var meta: (any Sendable)? { get }
    /// Whether the action reports an error (`payload` is then the error).
    var error: Bool { get }
}

extension FluxStandardAction {
    /// The Swift type's name.
    public var type: String { String(describing: Self.self) }
    /// None.
    public var meta: (any Sendable)? { nil }
    /// Not an error.
    public var error: Bool { false }
}

/// A Flux Standard Action with a typed payload and ReduxKit's full initialiser, so action creators can make it
/// from a payload (see `bindActionCreators(_:dispatch:)`).
public protocol StandardAction: FluxStandardAction {
    /// The payload's type.
    associatedtype PayloadType: Sendable
    /// The typed payload (`payload` erases it); `nil` for an action without one.
    var rawPayload: PayloadType? { get }
    /// ReduxKit's full initialiser, which action creators call.
    init(payload: PayloadType?, meta: (any Sendable)?, error: Bool)
}

extension StandardAction {
    /// The typed payload, erased.
    public var payload: (any Sendable)? { rawPayload }
}

/// The common case: a Flux Standard Action that is just a typed payload, without `meta` or `error`.
public protocol SimpleStandardAction: FluxStandardAction {
    /// The payload's type.
    associatedtype PayloadType: Sendable
    /// The typed payload.
    var rawPayload: PayloadType { get }
    /// An action carrying `payload`; action creators call it.
    init(payload: PayloadType)
}

extension SimpleStandardAction {
    /// The typed payload, erased.
    public var payload: (any Sendable)? { rawPayload }
}

/// What `createStore` reduces first when it is given no initial state: `reducer(nil, DefaultAction())`.
public struct DefaultAction: FluxStandardAction, Equatable {
    /// The initial action's type, `@@KatanaRedux/INIT`.
    public static let type = "@@KatanaRedux/INIT"
    /// The initial action's type.
    public var type: String { Self.type }
    /// None.
    public var payload: (any Sendable)? { nil }
    /// The initial action.
    public init() {}
}
