import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

/// Unsubscribes a listener added with `addListener`. Calling it more than once is harmless.
public typealias StoreUnsubscribe = @Sendable () -> Void

/// A store seen with both its state and its dependency types erased (Katana's name): for code that works with
/// stores of any state, such as interceptors and libraries. Code that knows the state type but must not reach the
/// dependencies (views, routers, reducers) takes a ``PartialStore`` instead, which keeps the state typed.
public protocol AnyStore: AnyObject, Sendable {
    /// The current state, erased.
    var anyState: any State { get }
    /// Whether the state initializer has run and interceptors are set up.
    var isReady: Bool { get }
    /// Dispatches any item (see `Store.dispatch`).
    @discardableResult func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable>
}

/// A store seen with its dependency type erased (Katana's `PartialStore`): its state, listeners and dispatch, for code
/// that must not see the store's dependencies (views, routers, reducers). A `Store<S, D>` is one; the work is its
/// engine's (`StoreEngine`).
///
/// ## Threading contract
/// - `dispatch` returns at once from any thread, and applies at most the helping limit of other threads' work;
///   the one wait is the flood policy's (`StoreConfiguration.backlogLimit`): a producer thread that already has
///   updaters queued in a full lane waits for room, never while the lane is stalled, and never inside a task.
/// - State updaters are applied one at a time, in a single global order that respects each producer's dispatch
///   order, even when an earlier one is slow. When the updater lane is idle, the dispatching thread applies its
///   own updater before `dispatch` returns (so awaiting its handle does not suspend); when the lane is busy the
///   updater is queued and applied in a batch by whichever thread holds the lane, or by the store's serial
///   updater queue.
/// - Listeners receive `(old, new)` for every applied updater, in order, on the configured listener executor,
///   before the updater's handle resolves.
/// - Side effects run concurrently with each other and with the lane, each in its own task on Swift's global
///   concurrent executor.
/// - Tracing: every dispatch emits `dispatch_enqueue`, `dispatch_begin` and `dispatch_end` to the store's
///   trace backend (LTTng by default), sharing one id; items dispatched from a side effect carry its id as
///   `parent_id`.
public class PartialStore<S: State>: AnyStore, SideEffectHost, @unchecked Sendable {
    // Why @unchecked Sendable is sound: one `let`, of a Sendable type (the engine's own reasoning is beside its fields);
    // unchecked only because a class open to `Store` cannot be checked.

    /// What the store does, and everything it holds but its dependencies.
    @usableFromInline final let engine: StoreEngine<S>

    /// The identity stores report in traces (`store_ready`, `listeners_notified`).
    public final var storeID: UInt64 { engine.storeID }
    /// The executors this store runs its own work on.
    public final var configuration: StoreConfiguration { engine.configuration }

    init(configuration: StoreConfiguration, tracer: any TraceBackend, contextPrototype: any ScopedSideEffectContext) {
        engine = StoreEngine(configuration: configuration, tracer: tracer, contextPrototype: contextPrototype)
        engine.sideEffects.host = self
    }

    /// Runs a side effect's interceptors (its task holds the store weakly, as `SideEffectHost`: see `StoreEngine`).
    @usableFromInline final func intercept(_ item: SideEffectItem) -> SideEffectStep { engine.intercept(item) }

    // MARK: Reading

    /// The current state: reflects every updater whose handle has resolved. `S()` until the store is ready.
    ///
    /// Read from inside a state updater or reducer that this store is applying on the same thread (a misuse:
    /// updaters get the state as their argument), it returns the state as it is at that moment — the state the
    /// updater started from, plus whatever a `StateUpdater` already changed in place before the read — instead of
    /// deadlocking on the state lock.
    @inlinable
    public final var state: S { engine.state }

    public final var anyState: any State { state }

    /// Whether the state initializer has run and the interceptors are initialised. Items dispatched before
    /// that are kept and run, in order, once it is.
    public final var isReady: Bool { engine.isReady }

    /// Listeners registered right now (those added with `addListener` and not yet unsubscribed).
    public final var listenerCount: Int { engine.listenerCount }

    /// Side effects of this store running right now.
    public final var sideEffectsRunning: Int { engine.sideEffects.count }

    // MARK: Listeners

    /// Calls `listener` with `(oldState, newState)` for every applied state updater from now on, in order, on
    /// the configured listener executor. Safe to call from any thread; the returned closure unsubscribes, after
    /// which the listener is not called again.
    @discardableResult
    public final func addListener(_ listener: @escaping @Sendable (_ oldState: S, _ newState: S) -> Void) -> StoreUnsubscribe {
        subscribe(ListenerBox(listener))
    }

    /// Calls `listener` with the new state after every applied state updater from now on, in order, on the
    /// configured listener executor — without the old state, so the store keeps no copy of it: a large state
    /// changed in place costs what a small one does (an `(old, new)` listener makes every change copy the state).
    /// Changes applied together in one batch (while other threads were dispatching) may arrive as one call with
    /// the state after the last of them, as Redux's `subscribe` behaves. Unsubscribe with the returned closure.
    @discardableResult
    public final func addListener(newState listener: @escaping @Sendable (_ newState: S) -> Void) -> StoreUnsubscribe {
        subscribe(ListenerBox(newState: listener))
    }

    /// Adds `box` to the listeners; the closure returned takes it out, and stops it at once (a delivery in flight does
    /// not call it after). It holds the store weakly, not the engine (see `StoreEngine`).
    final func subscribe(_ box: ListenerBox<S>) -> StoreUnsubscribe {
        engine.changeListeners { $0.append(box) }
        return { [weak self] in
            box.deactivate()
            self?.engine.changeListeners { $0.removeAll { $0 === box } }
        }
    }

    // MARK: Dispatching

    /// Dispatches a state updater. Returns at once; the handle resolves once the state is updated.
    @inlinable @discardableResult
    public final func dispatch<U: StateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        engine.enqueueUpdater(updater, type: U.self, parentID: 0, success: (), bypassInterceptors: false, typed: true)
    }

    /// Dispatches a state updater that may refuse: when it throws, the state is unchanged and the handle carries
    /// its error.
    @inlinable @discardableResult
    public final func dispatch<U: ThrowingStateUpdater>(_ updater: U) -> DispatchHandle<Void> where U.StateType == S {
        engine.enqueueUpdater(updater, type: U.self, parentID: 0, success: (), bypassInterceptors: false, typed: true)
    }

    /// Dispatches a state updater that traces show under another type's name. For adapters whose one updater type
    /// carries many kinds of request (the reducer API's actions, say): traces then name what the app dispatched.
    @inlinable @discardableResult
    public final func dispatch<U: StateUpdater>(_ updater: U, tracedAs type: Any.Type) -> DispatchHandle<Void> where U.StateType == S {
        engine.enqueueUpdater(updater, type: type, parentID: 0, success: (), bypassInterceptors: false, typed: true)
    }

    /// Dispatches a state updater that may refuse, under another type's name in traces (see above).
    @inlinable @discardableResult
    public final func dispatch<U: ThrowingStateUpdater>(_ updater: U, tracedAs type: Any.Type) -> DispatchHandle<Void> where U.StateType == S {
        engine.enqueueUpdater(updater, type: type, parentID: 0, success: (), bypassInterceptors: false, typed: true)
    }

    /// Dispatches any item: a state updater, a side effect or a returning side effect. The handle carries the
    /// side effect's return value (`()` for the others). Items of the wrong state type, or that are both or
    /// neither kind, reject the handle with a ``KatanaError``.
    @discardableResult
    public final func anyDispatch(_ item: any Dispatchable) -> DispatchHandle<any Sendable> {
        engine.anyDispatch(item, parentID: 0)
    }
}
