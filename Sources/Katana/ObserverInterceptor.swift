import Foundation

/// Dispatched when a notification is posted. Return `nil` to dispatch nothing.
public protocol NotificationObserverDispatchable: Dispatchable {
    /// Made when a notification the observer watches is posted; return nil to dispatch nothing.
    init?(notification: Notification)
}

/// Dispatched when a state updater changed the state in a way the observer's closure accepts.
public protocol StateObserverDispatchable: Dispatchable {
    /// Made when the state changed as the observer watches; return nil to dispatch nothing.
    init?(prevState: any State, currentState: any State)
}

/// Dispatched after an item of an observed type was dispatched.
public protocol DispatchObserverDispatchable: Dispatchable {
    /// Made after an item of a watched type was dispatched; return nil to dispatch nothing.
    init?(dispatchedItem: any Dispatchable, prevState: any State, currentState: any State)
}

/// Dispatched once, when the store becomes ready.
public protocol OnStartObserverDispatchable: Dispatchable {
    /// Made once, when the store becomes ready; return nil to dispatch nothing.
    init?()
}

/// Katana's declarative observers: dispatch items when the state changes, when an item of a type is
/// dispatched, when a notification is posted, or when the store starts.
public enum ObserverInterceptor {
    /// Decides, from the state before and after a change, whether the observer fires.
    public typealias StateChangeObserver = @Sendable (_ prev: any State, _ current: any State) -> Bool
    /// A ``StateChangeObserver`` over the store's own state type.
    public typealias TypedStateChangeObserver<S: State> = @Sendable (_ prev: S, _ current: S) -> Bool

    /// What an observer watches, and what it dispatches when that happens.
    public enum ObserverType: Sendable {
        /// After each state updater (never for side effects), if `observer(prev, current)` is true, dispatch
        /// every type's `init?(prevState:currentState:)` that is not nil.
        case onStateChange(_ observer: StateChangeObserver, _ dispatchables: [any StateObserverDispatchable.Type])
        /// When `name` is posted on the interceptor's notification center.
        case onNotification(_ name: Notification.Name, _ dispatchables: [any NotificationObserverDispatchable.Type])
        /// After an item of exactly `type` went through the chain. For a state updater `currentState` is the
        /// state after it was applied; for a side effect the observer fires as the body starts, so both states
        /// are the state at that moment.
        case onDispatch(_ type: any Dispatchable.Type, _ dispatchables: [any DispatchObserverDispatchable.Type])
        /// When the store becomes ready.
        case onStart(_ dispatchables: [any OnStartObserverDispatchable.Type])

        /// Adapts a closure over the concrete state type; it answers false for any other type.
        public static func typedStateChange<S: State>(_ closure: @escaping TypedStateChangeObserver<S>) -> StateChangeObserver {
            { prev, current in
                guard let prev = prev as? S, let current = current as? S else { return false }
                return closure(prev, current)
            }
        }
    }

    /// The interceptor. Notification observers are registered when the store becomes ready and removed when
    /// the store is released. (The closure form of ``Interceptor``, for a store's `interceptors:` array.)
    public static func observe(_ items: [ObserverType], notificationCenter: NotificationCenter = .default) -> StoreInterceptor {
        Interceptor(items, notificationCenter: notificationCenter).storeInterceptor
    }

    /// The observer as a ``DispatchInterceptor``, for ``StoreConfiguration/interceptors`` (the cheaper form on every
    /// dispatch's path). Each store it is given to gets its own observers, registered when that store becomes
    /// ready and removed when it is released.
    public struct Interceptor: TypedDispatchInterceptor {
        private let items: [ObserverType]
        private let notificationCenter: NotificationCenter
        private let logic: ObserverLogic?

        /// Observes as `observers` say; notifications are taken from `notificationCenter`.
        public init(_ items: [ObserverType], notificationCenter: NotificationCenter = .default) {
            self.items = items
            self.notificationCenter = notificationCenter
            logic = nil
        }

        private init(bound logic: ObserverLogic, items: [ObserverType], notificationCenter: NotificationCenter) {
            self.items = items
            self.notificationCenter = notificationCenter
            self.logic = logic
        }

        public func bind(to context: any AnySideEffectContext) -> any DispatchInterceptor {
            let logic = ObserverLogic(items: items, context: context, notificationCenter: notificationCenter)
            logic.start()
            return Interceptor(bound: logic, items: items, notificationCenter: notificationCenter)
        }

        /// Passes the item on, then dispatches what the observers of its type and of the state change ask for.
        public func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                                  forward: (any Dispatchable) throws -> Void) throws {
            // Unbound (never given to a store): nothing to observe.
            guard let logic, logic.needsStates else { return try next(item) }
            let previous = logic.context.getAnyState()
            try next(item)
            guard let previous, let current = logic.context.getAnyState() else { return }
            logic.observe(item, previous: previous, current: current)
        }
    }
}

/// One store's observer set-up. Owned by the store's interceptor chain, so it lives exactly as long as the
/// store; its deinit removes the notification observers.
private final class ObserverLogic: @unchecked Sendable {
    // Immutable after `start()`, which runs once, before the chain is used; `tokens` is only touched there and
    // in deinit.
    private let items: [ObserverInterceptor.ObserverType]
    let context: AnySideEffectContext
    private let notificationCenter: NotificationCenter
    private let onDispatch: [ObjectIdentifier: [any DispatchObserverDispatchable.Type]]
    private let stateObservers: [(ObserverInterceptor.StateChangeObserver, [any StateObserverDispatchable.Type])]
    private var tokens: [any NSObjectProtocol] = []

    var needsStates: Bool { !onDispatch.isEmpty || !stateObservers.isEmpty }

    init(items: [ObserverInterceptor.ObserverType], context: AnySideEffectContext, notificationCenter: NotificationCenter) {
        self.items = items
        self.context = context
        self.notificationCenter = notificationCenter
        var onDispatch: [ObjectIdentifier: [any DispatchObserverDispatchable.Type]] = [:]
        var stateObservers: [(ObserverInterceptor.StateChangeObserver, [any StateObserverDispatchable.Type])] = []
        for item in items {
            switch item {
            case let .onDispatch(type, dispatchables): onDispatch[ObjectIdentifier(type), default: []] += dispatchables
            case let .onStateChange(observer, dispatchables): stateObservers.append((observer, dispatchables))
            case .onNotification, .onStart: break
            }
        }
        self.onDispatch = onDispatch
        self.stateObservers = stateObservers
    }

    deinit {
        for token in tokens { notificationCenter.removeObserver(token) }
    }

    func start() {
        for item in items {
            switch item {
            case let .onNotification(name, dispatchables):
                let context = self.context
                tokens.append(notificationCenter.addObserver(forName: name, object: nil, queue: nil) { notification in
                    for type in dispatchables {
                        if let dispatchable = type.init(notification: notification) { context.anyDispatch(dispatchable) }
                    }
                })
            case let .onStart(dispatchables):
                for type in dispatchables {
                    if let dispatchable = type.init() { context.anyDispatch(dispatchable) }
                }
            case .onDispatch, .onStateChange: break
            }
        }
    }

    func observe(_ item: any Dispatchable, previous: any State, current: any State) {
        if item._katanaSideEffect == nil {
            for (changed, dispatchables) in stateObservers where changed(previous, current) {
                for type in dispatchables {
                    if let dispatchable = type.init(prevState: previous, currentState: current) { context.anyDispatch(dispatchable) }
                }
            }
        }
        if let dispatchables = onDispatch[ObjectIdentifier(type(of: item))] {
            for type in dispatchables {
                if let dispatchable = type.init(dispatchedItem: item, prevState: previous, currentState: current) {
                    context.anyDispatch(dispatchable)
                }
            }
        }
    }
}
