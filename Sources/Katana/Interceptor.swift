import CKatanaTraceProvider
import Synchronization
import Glibc

/// Forwards an item to the rest of the interceptor chain (and, at its end, to the store).
public typealias StoreInterceptorNext = @Sendable (any Dispatchable) throws -> Void
/// One interceptor's handler for a dispatched item.
public typealias StoreInterceptorChain = @Sendable (any Dispatchable) throws -> Void
/// Katana's interceptor: initialised once, when the store becomes ready, with a context for reading state and
/// dispatching; then given `next` and asked for a handler.
///
/// Contract (as in Katana): the first interceptor in the store's array runs first. A handler that returns
/// without calling `next` drops the item (its handle resolves, or is rejected with
/// ``KatanaError/returningSideEffectNotExecuted(_:)`` for a returning side effect); one that throws blocks the
/// item and rejects its handle with that error; one that calls `next` with another item dispatches that item
/// instead. For a state updater, `next` applies it before returning, so state read after `next` is the new one;
/// for a side effect, the body starts after the whole chain has returned. Handlers are synchronous and run on
/// the thread that runs the item. Calling `next` later (after the handler returned) dispatches the item anew,
/// past the interceptors.
public typealias StoreInterceptor = @Sendable (AnySideEffectContext) -> @Sendable (@escaping StoreInterceptorNext) -> StoreInterceptorChain

/// A Redux middleware: `(getState, dispatch) -> (next) -> (action) -> Void`.
public typealias StoreMiddleware = @Sendable (
    _ getState: @escaping GetState,
    _ dispatch: @escaping @Sendable (any Dispatchable) -> Void
) -> @Sendable (_ next: @escaping @Sendable (any Dispatchable) -> Void) -> @Sendable (any Dispatchable) -> Void

/// Wraps a Redux-style middleware as a Katana interceptor. The middleware's `dispatch` goes through the whole
/// chain again; its `next` continues the chain. An error from the rest of the chain, which a middleware's
/// non-throwing `next` cannot carry, still rejects the item's handle.
public func middlewareToInterceptor(_ middleware: @escaping StoreMiddleware) -> StoreInterceptor {
    { context in
        let configured = middleware(
            { context.getAnyState() ?? EmptyState() },
            { item in context.anyDispatch(item) }
        )
        return { next in
            { item in
                let failure = FirstError()
                configured { forwarded in
                    do { try next(forwarded) } catch { failure.record(error) }
                }(item)
                if let error = failure.error { throw error }
            }
        }
    }
}

/// What `getState` returns to a middleware whose store is gone.
struct EmptyState: State {}

/// The first error thrown by `next` inside a middleware call.
private final class FirstError: @unchecked Sendable {
    // Guarded by `lock`: a middleware may call `next` from another thread.
    private let lock = Lock()
    private var stored: (any Error)?

    var error: (any Error)? { lock.withLock { stored } }

    func record(_ error: any Error) {
        lock.withLock { if stored == nil { stored = error } }
    }
}

/// A side effect's run through the interceptors, in progress on this thread: lets the closure chain's last `next` tell
/// a call made synchronously from inside the chain (run this item) from a deferred one (dispatch anew). (An updater's
/// run is found through the store's ``ClosureChainEnd``: only the lane holder runs one; side effects run theirs
/// concurrently, each on its own task.)
@usableFromInline
struct InterceptionFrame {
    @usableFromInline let store: ObjectIdentifier
    @usableFromInline var end = ChainEnd()

    @inlinable
    init(store: ObjectIdentifier) {
        self.store = store
    }
}

private let interceptionFrameKey: pthread_key_t = {
    var key = pthread_key_t()
    let rc = pthread_key_create(&key, nil)
    precondition(rc == 0, "pthread_key_create failed: \(rc)")
    return key
}()

import KatanaTrace

@usableFromInline
enum InterceptionFrames {
    /// Runs `body` with `frame` as this thread's current frame (restoring the previous one after).
    @usableFromInline
    static func with<R>(_ frame: inout InterceptionFrame, _ body: (UnsafeMutablePointer<InterceptionFrame>) -> R) -> R {
        let previous = pthread_getspecific(interceptionFrameKey)
        return withUnsafeMutablePointer(to: &frame) { pointer in
            pthread_setspecific(interceptionFrameKey, pointer)
            defer { pthread_setspecific(interceptionFrameKey, previous) }
            return body(pointer)
        }
    }

    /// This thread's current frame, if it belongs to `store`.
    @usableFromInline
    static func current(for store: ObjectIdentifier) -> UnsafeMutablePointer<InterceptionFrame>? {
        guard let raw = pthread_getspecific(interceptionFrameKey) else { return nil }
        let frame = raw.assumingMemoryBound(to: InterceptionFrame.self)
        return frame.pointee.store == store ? frame : nil
    }
}

/// An item passed along an interceptor chain as `U` when that is its very type (the existential opened, its type
/// compared with `U`'s: no runtime cast). Opened twice, to compare and then to take the value, as `exactly` does
/// for contexts: an opened function returning `U?` is unspecialised and went through `U`'s enum witnesses.
@inlinable @inline(__always)
func sameType<U: Dispatchable>(_ item: any Dispatchable, as _: U.Type) -> U? {
    func matches<C: Dispatchable>(_: C) -> Bool { C.self == U.self }
    func take<C: Dispatchable>(_ value: C) -> U { unsafeBitCast(value, to: U.self) }
    guard matches(item) else { return nil }
    return take(item)
}

/// A store's composed closure chain, in a box the store retains by hand and calls through an unretained reference:
/// the closure is a `let` here, so a dispatch calls it without retaining and releasing the chain's context around
/// the call (read from the store's `var`, it was: two atomic reference-count operations per dispatch). Generic over
/// the chain's type, so the chain is kept in the form ``composeChain(_:context:end:done:elsewhere:)`` built it in;
/// a call from code that names its type adapts it at the call, which the optimiser folds away (kept as that type,
/// it was a re-abstraction thunk in front of the chain: one more call per dispatch).
@usableFromInline
final class ClosureChain<Link: Sendable>: Sendable {
    @usableFromInline let call: Link
    init(_ call: Link) { self.call = call }
}

extension Unmanaged where Instance == ClosureChain<StoreInterceptorChain> {
    /// Runs the chain on `item` (the store holds the box for as long as it can be called).
    @inlinable @inline(__always)
    func callAsFunction(_ item: any Dispatchable) throws { try _withUnsafeGuaranteedRef { try $0.call(item) } }
}

/// The end of a store's closure chain while an updater runs through it (inline or queued): the store's last `next` (a
/// closure made once, when the store became ready) finds the run in progress here instead of in thread-local storage
/// and without loading the store's weak reference. Only the thread that holds the lane runs an updater's chain, so
/// the run is that thread's: it writes `thread` (its id) before the chain and 0 after, and `end`/`run` in between; any
/// other thread reads a `thread` that is not its own id, and takes the slow path (a side effect's frame, or a
/// deferred `next`).
@usableFromInline
final class ClosureChainEnd: @unchecked Sendable {
    // `end` and `run` are written and read only by the thread whose id is in `thread` (the lane holder), while it is
    // there.
    @usableFromInline let thread = Atomic<UInt>(0)
    /// Applies (or keeps as the replacement) what reached the end; made by the store's specialised code, and
    /// capturing nothing (the run is its second argument).
    @usableFromInline @exclusivity(unchecked) var end: ((any Dispatchable, UnsafeMutableRawPointer) throws -> Void)?
    @usableFromInline @exclusivity(unchecked) var run: UnsafeMutableRawPointer?

    @usableFromInline init() {}

    /// Runs `body` (the chain) with `run` as this thread's run in progress.
    @inlinable
    func with<R>(
        _ run: UnsafeMutableRawPointer, thread: UInt, end: @escaping (any Dispatchable, UnsafeMutableRawPointer) throws -> Void,
        _ body: () throws -> R
    ) rethrows -> R {
        self.end = end
        self.run = run
        self.thread.store(thread, ordering: .relaxed)
        defer {
            self.thread.store(0, ordering: .relaxed)
            self.run = nil
        }
        return try body()
    }

    /// Whether `item` reached the end of a run in progress on this thread (and was handled there). `false`: the
    /// call is deferred (made after the interceptor returned, or from another thread).
    @inlinable
    func handle(_ item: any Dispatchable) throws -> Bool {
        guard thread.load(ordering: .relaxed) == katana_thread_id(), let run, let end else { return false }
        try end(item, run)
        return true
    }
}

/// An interceptor as a type: the form to use on every dispatch's path. It does what a ``StoreInterceptor`` closure
/// does — pass the item on with `next`, pass another item instead, drop it (return without calling `next`) or block
/// it (throw) — but `next` is a plain non-escaping function, so the store runs the chain without allocating,
/// without re-abstraction thunks and without looking up the interception in thread-local storage. The typed form,
/// ``TypedDispatchInterceptor``, is cheaper still for state updaters.
///
/// Give them to the store in ``StoreConfiguration/interceptors``: they run first, in order, then the closures
/// passed to the store's initialiser. To put one among closures, use ``storeInterceptor``.
///
/// ```swift
/// struct Audit: DispatchInterceptor {
///     func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws {
///         if item is DeleteAccount { log.notice("account deleted") }
///         try next(item)
///     }
/// }
/// let store = Store<AppState, AppDependencies>(configuration: .init(interceptors: [Audit()]))
/// ```
///
/// The contract is the closures' (see ``StoreInterceptor``), except that `next` cannot be kept for later: to
/// dispatch something afterwards, keep the context given to ``bind(to:)`` and dispatch through it.
public protocol DispatchInterceptor: Sendable {
    /// Called for every dispatched item (state updaters on the thread that applies them, side effects on their
    /// task before the body). For a state updater, `next` applies it before returning, so state read after `next`
    /// is the new one. Calling `next` a second time dispatches the item anew, past the interceptors.
    func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws

    /// Called once per store when the store becomes ready, with a context for reading its state and dispatching;
    /// returns the interceptor that store runs. The default returns `self`. An interceptor that keeps per-store
    /// state (observers registered with the store, the store's context) returns a new value holding it; the store
    /// keeps that value exactly as long as it lives.
    func bind(to context: any AnySideEffectContext) -> any DispatchInterceptor
}

/// A ``DispatchInterceptor`` that receives each item with its own type: `next` passes it (or a changed copy) on,
/// `forward` passes another item on instead (the rest of the chain then sees that one). A state updater that the
/// leading typed interceptors of a store's configuration pass on reaches the store with its type known, so the
/// store applies it as it applies an updater without interceptors, instead of through its witness: 3 pass-through
/// interceptors of this form add about half what the erased form adds (see the Performance article).
///
/// ```swift
/// struct Audit: TypedDispatchInterceptor {
///     func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
///                                        forward: (any Dispatchable) throws -> Void) throws {
///         if item is DeleteAccount { log.notice("account deleted") }
///         try next(item)
///     }
/// }
/// ```
///
/// Where the store has an item only as `any Dispatchable` (a side effect, `anyDispatch`, the batch path, a typed
/// interceptor placed among closures) it calls the erased `intercept(_:next:)`, which this protocol implements by
/// opening the item and calling the typed one. Calling `next` or `forward` a second time dispatches anew, past the
/// interceptors.
public protocol TypedDispatchInterceptor: DispatchInterceptor {
    /// Sees `item` with its own type. Call `next` to let it (or a changed copy) go on, `forward` to dispatch another
    /// item instead, neither to drop it; throw to block it (its handle rejects with the error).
    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws
}

extension TypedDispatchInterceptor {
    /// The erased form: the item opened to its type, passed on erased.
    public func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws {
        try interceptOpened(item, next: next)
    }

    private func interceptOpened<Item: Dispatchable>(_ item: Item, next: (any Dispatchable) throws -> Void) throws {
        try intercept(item, next: { try next($0) }, forward: next)
    }
}

extension DispatchInterceptor {
    public func bind(to context: any AnySideEffectContext) -> any DispatchInterceptor { self }

    /// This interceptor as a ``StoreInterceptor`` closure, to place it anywhere in a store's closure array (it then
    /// costs what a closure costs).
    public var storeInterceptor: StoreInterceptor {
        { context in
            let bound = self.bind(to: context)
            return { next in { item in try bound.intercept(item) { try next($0) } } }
        }
    }
}
