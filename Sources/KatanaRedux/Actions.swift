/// Anything a reducer can receive. Any `Sendable` value can be an action; conform to ``FluxStandardAction`` for
/// the Flux Standard Action shape (`type`, `payload`, `meta`, `error`) that ReduxKit and Redux tools expect.
public protocol Action: Sendable {}

/// A Flux Standard Action: a `type`, an optional `payload`, optional `meta` data, and whether it reports an
/// `error` (then `payload` is the error). Only `payload` is required: `type` defaults to the Swift type's name,
/// `meta` to `nil`, `error` to `false`.
public protocol FluxStandardAction: Action {
    var type: String { get }
    var payload: (any Sendable)? { get }
    var meta: (any Sendable)? { get }
    var error: Bool { get }
}

extension FluxStandardAction {
    public var type: String { String(describing: Self.self) }
    public var meta: (any Sendable)? { nil }
    public var error: Bool { false }
}

/// A Flux Standard Action with a typed payload and ReduxKit's full initialiser, so action creators can make it
/// from a payload (see `bindActionCreators(_:dispatch:)`).
public protocol StandardAction: FluxStandardAction {
    associatedtype PayloadType: Sendable
    /// The typed payload (`payload` erases it); `nil` for an action without one.
    var rawPayload: PayloadType? { get }
    init(payload: PayloadType?, meta: (any Sendable)?, error: Bool)
}

extension StandardAction {
    public var payload: (any Sendable)? { rawPayload }
}

/// The common case: a Flux Standard Action that is just a typed payload, without `meta` or `error`.
public protocol SimpleStandardAction: FluxStandardAction {
    associatedtype PayloadType: Sendable
    var rawPayload: PayloadType { get }
    init(payload: PayloadType)
}

extension SimpleStandardAction {
    public var payload: (any Sendable)? { rawPayload }
}

/// What `createStore` reduces first when it is given no initial state: `reducer(nil, DefaultAction())`.
public struct DefaultAction: FluxStandardAction, Equatable {
    public static let type = "@@KatanaRedux/INIT"
    public var type: String { Self.type }
    public var payload: (any Sendable)? { nil }
    public init() {}
}
