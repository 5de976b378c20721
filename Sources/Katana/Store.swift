import KatanaTrace
/// The store: holds the state of type `S`, applies dispatched state updaters to it one at a time, and runs
/// side effects concurrently with dependencies of type `D`. See ``PartialStore`` for the threading contract.
///
/// ```swift
/// let store = Store<CounterState, AppDependencies>()
/// store.dispatch(IncrementCounter())                 // returns at once
/// try await store.dispatch(IncrementCounter()).value // waits until applied
/// let user = try await store.dispatch(FetchUser(id: 1)).value
/// ```
public final class Store<S: State, D: SideEffectDependencyContainer>: PartialStore<S>, @unchecked Sendable {
    /// Katana 6's spelling of ``StoreConfiguration``.
    public typealias Configuration = StoreConfiguration

    /// The dependencies handed to every side effect as `context.dependencies`.
    @inlinable public var dependencies: D { environment.dependencies }

    /// How this store's contexts reach it weakly.
    @usableFromInline let environment: ContextEnvironment<S, D>


    /// A store with the state's `init()` value, no interceptors and default configuration.
    public convenience init() {
        self.init(interceptors: [], stateInitializer: { S() }, configuration: .init())
    }

    /// A store with the state's `init()` value and the given interceptors.
    public convenience init(interceptors: [StoreInterceptor]) {
        self.init(interceptors: interceptors, stateInitializer: { S() }, configuration: .init())
    }

    /// A store whose initial state comes from `stateInitializer`, run on the configuration's
    /// `stateInitializerExecutor` (inline by default: the store is ready when `init` returns).
    public convenience init(
        interceptors: [StoreInterceptor] = [],
        stateInitializer: @escaping @Sendable () -> S,
        configuration: Configuration = .init()
    ) {
        self.init(interceptors: interceptors, stateInitializer: stateInitializer,
                  dependenciesInitializer: { D(dispatch: $0, getState: $1) }, configuration: configuration)
    }

    /// The designated initialiser: also takes how to build the dependencies (tests pass fakes here).
    public init(
        interceptors: [StoreInterceptor] = [],
        stateInitializer: @escaping @Sendable () -> S,
        dependenciesInitializer: (@escaping AnyDispatch, @escaping GetState) -> D,
        configuration: Configuration = .init()
    ) {
        let tracer = configuration.traceBackend ?? KatanaTracing.backend
        // The environment holds the dependencies; their closures reach the store through an object of their own (through
        // the environment, strongly, the two would keep each other alive; weakly, the environment would get a side table,
        // and every retain of it — two per side effect — would take the runtime's slow path: the callgrind gate's
        // `side_effect_round_trip`).
        let environment = ContextEnvironment<S, D>(tracer: tracer)
        let target = WeakStore<S, D>()
        self.environment = environment
        environment.dependencies = dependenciesInitializer(
            { item in target.store?.anyDispatch(item) ?? .rejected(KatanaError.storeReleased) },
            { target.store?.state ?? S() }
        )
        super.init(configuration: configuration, tracer: tracer,
                   contextPrototype: SideEffectContext(environment: environment, scope: nil))
        target.store = self
        environment.store = self
        configuration.stateInitializerExecutor.run { [weak self] in
            guard let self else { return }
            self.engine.becomeReady(initialState: stateInitializer(), interceptors: interceptors, store: self)
        }
    }

    /// Dispatches a side effect. Returns at once; the handle resolves when its body returns, with what it threw.
    @inlinable @discardableResult
    public func dispatch<E: SideEffect>(_ sideEffect: E) -> DispatchHandle<Void> {
        engine.enqueueSideEffect(sideEffect, type: E.self, parentID: 0, as: Void.self)
    }

    /// Dispatches a returning side effect; the handle carries its value.
    @inlinable @discardableResult
    public func dispatch<E: ReturningSideEffect>(_ sideEffect: E) -> DispatchHandle<E.ReturnValue> {
        engine.enqueueSideEffect(sideEffect, type: E.self, parentID: 0, as: E.ReturnValue.self)
    }
}

/// The store, weakly: what the dependency container's `dispatch` and `getState` closures reach it through.
final class WeakStore<S: State, D: SideEffectDependencyContainer>: @unchecked Sendable {
    // Written once in Store.init, before the store is visible to any other thread; read-only afterwards.
    weak var store: Store<S, D>?
}

/// What every side-effect context of a store shares: the store, weakly (a context does not keep it alive), and its
/// dependencies and trace backend, strongly. Contexts hold this (a strong, bitwise-movable reference) rather than a
/// weak reference of their own: a value with a weak reference cannot sit in an existential's inline buffer, so
/// `any AnySideEffectContext` would need a heap box.
@usableFromInline
final class ContextEnvironment<S: State, D: SideEffectDependencyContainer>: @unchecked Sendable {
    // Written once in Store.init, before the store is visible to any other thread; read-only afterwards.
    @usableFromInline @exclusivity(unchecked) weak var store: Store<S, D>?
    /// The store's dependencies, what every context of it hands out (set once in Store.init, like `store`; an
    /// implicitly unwrapped optional only because the container's initialiser needs this environment first).
    @usableFromInline @exclusivity(unchecked) var dependencies: D!
    /// The store's trace backend, held strongly: `context.interval` asks it without loading the store's weak reference. A
    /// `let`, so reading it needs no exclusivity check.
    @usableFromInline let tracer: any TraceBackend
    /// Whether `tracer` records intervals, as a plain C function when it is a native provider's or the no-op
    /// backend, so an interval asks in one call (through the existential and the provider's every-event check it
    /// cost more than an interval may: `katana-bench micro`'s interval row). Other backends are asked `isEnabled`.
    @usableFromInline let intervalsEnabledCheck: (@convention(c) () -> Int32)?

    init(tracer: any TraceBackend) {
        self.tracer = tracer
        intervalsEnabledCheck = switch tracer {
        case let native as NativeTraceBackend: native.intervalsEnabledCheck
        case is NoOpTraceBackend: { 0 }
        default: nil
        }
    }

    /// Begins a user interval when the backend listens: its id, or 0 when nobody listens.
    @inlinable func intervalBegin(_ name: StaticString, parentID: UInt64) -> UInt64 {
        let listened = if let check = intervalsEnabledCheck { check() != 0 } else { tracer.isEnabled }
        return listened ? intervalBeginListened(name, parentID: parentID) : 0
    }

    @usableFromInline func intervalBeginListened(_ name: StaticString, parentID: UInt64) -> UInt64 {
        let id = KatanaTracing.nextID()
        tracer.intervalBegin(intervalID: id, parentID: parentID, name: name)
        return id
    }

    @usableFromInline func intervalEnd(_ id: UInt64, _ name: StaticString, error: (any Error)?) {
        tracer.intervalEnd(intervalID: id, name: name, outcome: DispatchOutcome(intervalError: error))
    }
}
