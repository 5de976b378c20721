import Foundation
import Katana
import KatanaTrace
import Synchronization

/// Dispatches an action (through the middleware, then to the reducer). Returns the Katana handle of the
/// reduction: await it to know the state includes the action.
public typealias DispatchFunction = @Sendable (any Action) throws -> DispatchHandle<Void>

/// The Katana state behind a ``ReduxStore``: the reducer's state, and how many actions have been reduced.
public struct ReducedState<S: Sendable>: State {
    /// The reducer's state (`nil` only inside Katana, before the store is ready).
    public internal(set) var value: S?
    /// Actions reduced so far; orders the states a subscriber or stream sees.
    public internal(set) var version: UInt64 = 0
    public init() {}
    init(value: S) { self.value = value }
}

/// A Redux store in the style of ReduxKit and ReSwift — `dispatch(action)`, `state`/`getState()`, `subscribe`,
/// middleware — running on a Katana `Store`: actions are applied one at a time in one global order, from any
/// thread, and traced like state updaters (each under its own action type's name).
public final class ReduxStore<S: Sendable>: Sendable {
    /// The Katana store underneath (for listeners with old and new state, side effects, or readiness).
    public let store: Store<ReducedState<S>, EmptySideEffectDependencyContainer>
    let reducer: Reducer<S>
    let frame = ReduceFrame<S>()
    let chain = DispatchChain()

    /// A store reducing with `reducer`, starting from `state`, or from `reducer(nil, DefaultAction())` when none
    /// is given. `configuration` is the Katana store's (trace backend, listener executor).
    public init(reducer: @escaping Reducer<S>, state: S? = nil, configuration: StoreConfiguration = .init()) {
        self.reducer = reducer
        let initial = state ?? frame.reducing(nil) { reducer(nil, DefaultAction()) }
        var katanaConfiguration = configuration
        katanaConfiguration.stateInitializerExecutor = .inline
        store = Store(interceptors: [], stateInitializer: { ReducedState(value: initial) }, configuration: katanaConfiguration)
        let store = self.store
        let frame = self.frame
        chain.install { action in
            if ReduceFrame<S>.isReducing { throw KatanaError.dispatchFromReducer("\(type(of: action))") }
            return store.dispatch(Reduce(action: action, reducer: reducer, frame: frame), tracedAs: type(of: action))
        }
    }

    /// The current state. Inside a reducer of this store (which should not read it) it is the state that reducer
    /// was given, so the call cannot deadlock.
    public var state: S {
        if let input = frame.inputIfReducingOnThisThread { return input }
        return store.state.value!
    }

    /// ReduxKit's spelling of ``state``.
    public func getState() -> S { state }

    /// Dispatches `action` through the middleware (the first one added runs first) to the reducer. Returns at once;
    /// await the handle to know the state includes it. Throws `KatanaError.dispatchFromReducer` when
    /// called from inside a reducer, and whatever a middleware throws.
    @discardableResult
    public func dispatch(_ action: any Action) throws -> DispatchHandle<Void> {
        if ReduceFrame<S>.isReducing { throw KatanaError.dispatchFromReducer("\(type(of: action))") }
        return try chain.current(action)
    }

    /// Calls `subscriber` with the new state after every reduced action, in order, on the thread that reduced it
    /// (the store's listener executor). Subscribing does not call it with the current state. Returns a disposable
    /// that stops delivery.
    @discardableResult
    public func subscribe(_ subscriber: @escaping @Sendable (S) -> Void) -> ReduxDisposable {
        ReduxDisposable(store.addListener { _, new in subscriber(new.value!) })
    }

    /// The states as an `AsyncSequence`: the current state first, then every state after a reduced action, in
    /// order, none twice. Ends the subscription when the consumer stops iterating (or the task is cancelled).
    public func states(bufferingPolicy: AsyncStream<S>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<S> {
        let (stream, continuation) = AsyncStream<S>.makeStream(bufferingPolicy: bufferingPolicy)
        let gate = StreamGate()
        // Subscribe first, then read the current state: nothing falls in between, and the version check drops
        // what both paths see.
        let unsubscribe = store.addListener { _, new in gate.yield(new, to: continuation) }
        gate.yield(store.state, to: continuation)
        continuation.onTermination = { _ in unsubscribe() }
        return stream
    }

    /// Wraps the current dispatch in `middleware` (used by ``applyMiddleware(_:)``).
    func install(_ middleware: [Middleware<S>]) {
        // Neither closure keeps the store alive (the chain that holds them belongs to it).
        let store = self.store
        let frame = self.frame
        let getState: @Sendable () -> S = { frame.inputIfReducingOnThisThread ?? store.state.value! }
        let dispatch: DispatchFunction = { [weak self] action in
            guard let self else { throw KatanaError.storeReleased }
            return try self.dispatch(action)
        }
        var next = chain.current
        for layer in middleware.reversed() { next = layer(getState, dispatch)(next) }
        chain.install(next)
    }
}

/// Stops a subscription. ReduxKit's `ReduxDisposable`.
public final class ReduxDisposable: Sendable {
    private let unsubscribe: StoreUnsubscribe
    private let isDisposed = Atomic<Bool>(false)

    init(_ unsubscribe: @escaping StoreUnsubscribe) { self.unsubscribe = unsubscribe }

    /// Whether ``dispose()`` was called.
    public var disposed: Bool { isDisposed.load(ordering: .acquiring) }

    /// Stops delivery: once it returns the subscriber is not called again. Calling it twice is harmless.
    public func dispose() {
        if isDisposed.exchange(true, ordering: .acquiringAndReleasing) { return }
        unsubscribe()
    }
}

/// The updater every action travels in.
struct Reduce<S: Sendable>: StateUpdater {
    let action: any Action
    let reducer: Reducer<S>
    let frame: ReduceFrame<S>

    func updateState(_ state: inout ReducedState<S>) {
        let input = state.value
        state.value = frame.reducing(input) { reducer(input, action) }
        state.version &+= 1
    }
}

/// Marks the thread that runs a reducer (to refuse dispatch and answer `state` from the reducer's input).
final class ReduceFrame<S: Sendable>: @unchecked Sendable {
    // `input` is written and read only by the thread running this store's reducer, while `reducingKey` points
    // at this frame on that thread; the store's lane lock orders successive reductions on different threads.
    private var input: S?

    static var isReducing: Bool { pthread_getspecific(reducingKey) != nil }

    var inputIfReducingOnThisThread: S? {
        pthread_getspecific(reducingKey) == Unmanaged.passUnretained(self).toOpaque() ? input : nil
    }

    func reducing<R>(_ input: S?, _ body: () -> R) -> R {
        let previous = pthread_getspecific(reducingKey)
        self.input = input
        pthread_setspecific(reducingKey, Unmanaged.passUnretained(self).toOpaque())
        defer {
            pthread_setspecific(reducingKey, previous)
            self.input = nil
        }
        return body()
    }
}

private let reducingKey: pthread_key_t = {
    var key = pthread_key_t()
    let rc = pthread_key_create(&key, nil)
    precondition(rc == 0, "pthread_key_create failed: \(rc)")
    return key
}()

/// The store's dispatch function, replaced once per `applyMiddleware` before the store is handed out.
final class DispatchChain: @unchecked Sendable {
    private let lock = NSLock()
    private var function: DispatchFunction = { _ in fatalError("dispatch before the store was initialised") }

    var current: DispatchFunction { lock.withLock { function } }
    func install(_ function: @escaping DispatchFunction) { lock.withLock { self.function = function } }
}

/// Yields each state to a stream once, in version order.
final class StreamGate: @unchecked Sendable {
    private let lock = NSLock()
    private var last: UInt64?  // guarded by lock

    func yield<S>(_ state: ReducedState<S>, to continuation: AsyncStream<S>.Continuation) {
        lock.withLock {
            if let last, state.version <= last { return }
            last = state.version
            continuation.yield(state.value!)
        }
    }
}
