/// Errors the store reports on a dispatch handle instead of crashing. Each case says what to change.
public enum KatanaError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A state updater for another state type was dispatched to this store. `expected` is the state the store
    /// holds, `got` the updater that cannot update it.
    case stateTypeMismatch(expected: String, got: String)
    /// A side effect declares a `StateType`/`Dependencies` pair that is not this store's.
    case contextTypeMismatch(expected: String, got: String)
    /// The dispatched item is neither a ``StateUpdater`` nor a side effect.
    case notDispatchable(String)
    /// The dispatched item is both a ``StateUpdater`` and a side effect; the store cannot tell which to run.
    case ambiguousDispatchable(String)
    /// An interceptor neither forwarded a returning side effect nor threw, so there is no value to return.
    case returningSideEffectNotExecuted(String)
    /// An interceptor replaced a returning side effect with an item whose result is not `expected`.
    case returnValueTypeMismatch(expected: String, got: String)
    /// The store was released before the item could run.
    case storeReleased
    /// A reducer dispatched while the store was applying it (reducer API).
    case dispatchFromReducer(String)
    /// A ``ThrowingStateUpdater`` refused to change the state. Handles never carry this case: they carry the
    /// updater's own error (`failure.error`); it exists only on the way from the updater to the handle.
    case updaterThrew(UpdaterFailure)
    /// The item **was applied** (the state changed and listeners were told), but an interceptor threw after its
    /// `next` returned. Do not dispatch the item again: that would apply it twice.
    case appliedButInterceptorThrew(InterceptorFailure)

    public var description: String {
        switch self {
        case let .stateTypeMismatch(expected, got):
            "state updater \(got) cannot update \(expected): its StateType is another type; dispatch it to a store whose state is its StateType"
        case let .contextTypeMismatch(expected, got):
            "side effect needs a context of \(expected) but the store provides \(got): make its StateType and Dependencies match the store's"
        case let .notDispatchable(name):
            "\(name) is neither a StateUpdater nor a SideEffect/ReturningSideEffect: conform it to exactly one"
        case let .ambiguousDispatchable(name):
            "\(name) is both a StateUpdater and a side effect: split it into two types"
        case let .returningSideEffectNotExecuted(name):
            "an interceptor dropped the returning side effect \(name) without throwing, so it has no return value: throw from the interceptor instead"
        case let .returnValueTypeMismatch(expected, got):
            "an interceptor replaced a returning side effect expecting \(expected) with \(got), which returns something else"
        case .storeReleased:
            "the store was released before the item could run"
        case let .updaterThrew(failure):
            "\(failure.updater) refused to update the state: \(failure.error)"
        case let .appliedButInterceptorThrew(failure):
            "\(failure.item) was applied (the state changed and listeners were told), but an interceptor threw after next: \(failure.error). Do not dispatch it again"
        case let .dispatchFromReducer(name):
            "\(name) was dispatched from inside a reducer: reducers must be pure; dispatch from a middleware or side effect"
        }
    }
}

/// What a ``ThrowingStateUpdater`` threw, and which updater threw it.
public struct UpdaterFailure: Sendable, Equatable {
    /// What the updater threw.
    public let error: any Error
    /// The updater's type, as text.
    public let updater: String

    /// A failure of the updater `updater` with `error`.
    public init(error: any Error, updater: String) {
        self.error = error
        self.updater = updater
    }

    public static func == (lhs: UpdaterFailure, rhs: UpdaterFailure) -> Bool {
        lhs.updater == rhs.updater && String(reflecting: lhs.error) == String(reflecting: rhs.error)
    }
}

/// What an interceptor threw after the item it passed on had been applied.
public struct InterceptorFailure: Sendable, Equatable {
    /// What the interceptor threw.
    public let error: any Error
    /// The applied item's type.
    public let item: String

    /// A failure of an interceptor with `error`, while it handled `item` (the item's type, as text).
    public init(error: any Error, item: String) {
        self.error = error
        self.item = item
    }

    public static func == (lhs: InterceptorFailure, rhs: InterceptorFailure) -> Bool {
        lhs.item == rhs.item && String(reflecting: lhs.error) == String(reflecting: rhs.error)
    }
}

extension KatanaError {
    /// The error a handle reports for this one: a throwing updater's own error, else the error itself.
    @usableFromInline
    static func surfaced(_ error: any Error) -> any Error {
        if case let .updaterThrew(failure) = error as? KatanaError { return failure.error }
        return error
    }
}
