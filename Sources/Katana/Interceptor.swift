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
/// the thread that runs the item. Calling `next` later (after the handler returned), or from another thread (a hop to
/// a queue while the handler waits), dispatches the item anew, past the interceptors: it is applied after this run,
/// exactly once.
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

/// A run through a store's composed interceptor chain in progress on this thread — an updater's (inline or queued, on
/// the lane holder's thread) or a side effect's (on its task): what the chain's last `next`, composed once and
/// capturing no run, ends. It tells a call made synchronously from inside the chain (the item reaches this run's end)
/// from a deferred one, or one from another thread (dispatched anew: not this thread's frame, or none).
@usableFromInline
struct InterceptionFrame {
    @usableFromInline let store: ObjectIdentifier
    /// What ends the run: held by the store (``ChainEndBox``), so referenced here unretained.
    @usableFromInline let end: Unmanaged<ChainEndBox>
    @usableFromInline let run: UnsafeMutableRawPointer

    @inlinable
    init(store: ObjectIdentifier, end: Unmanaged<ChainEndBox>, run: UnsafeMutableRawPointer) {
        self.store = store
        self.end = end
        self.run = run
    }
}

/// The composed chain's end for one kind of run: applies, or keeps as the replacement, what reached the end; captures
/// nothing (the run is its second argument). A `let` of a class, made once and kept by the store (``LaneChainEnds``,
/// `StoreEngine.sideEffectChainEnd`), so the chain's last `next` calls it without retaining anything: kept in the
/// frame on the stack, the closure was retained and released around that call and released again after the run —
/// three calls into the Swift runtime per dispatch through closure interceptors, each through the PLT in a dynamically
/// linked build (`katana-bench micro --only interceptors`; the callgrind gate's `interceptors_3`).
@usableFromInline
final class ChainEndBox: @unchecked Sendable {
    @usableFromInline let end: @Sendable (any Dispatchable, UnsafeMutableRawPointer) throws -> Void
    /// For an inline run's end, of one updater type, in a store with typed interceptors: the typed interceptors
    /// composed for that type (a ``TypedChain``), which end here. Set once, by the lane's holder that makes the box,
    /// before the box is used; retained by hand and called through an unretained reference, as the box itself is.
    @usableFromInline @exclusivity(unchecked) var typedChain: Unmanaged<AnyObject>?

    @inlinable
    init(_ end: @escaping @Sendable (any Dispatchable, UnsafeMutableRawPointer) throws -> Void) { self.end = end }

    deinit { typedChain?.release() }
}

/// This thread's run through the composed interceptor chain in progress: the one way the chain's end finds its run.
@usableFromInline
enum InterceptionFrames {
    /// Runs `body` (the chain) with `run` as this thread's run in progress for `store`, restoring the one before after
    /// (an updater dispatched from inside a side effect's chain runs its own chain meanwhile).
    @inlinable @inline(__always)
    static func with<R>(
        store: ObjectIdentifier, run: UnsafeMutableRawPointer, end: Unmanaged<ChainEndBox>, _ body: () throws -> R
    ) rethrows -> R {
        var frame = InterceptionFrame(store: store, end: end, run: run)
        return try withUnsafeMutablePointer(to: &frame) { pointer in
            let previous = katana_current_interception_frame()
            katana_set_interception_frame(pointer)
            defer { katana_set_interception_frame(previous) }
            return try body()
        }
    }

    /// Ends this thread's run in progress for `store` with `item`; `false` when there is none (the call was deferred,
    /// or made from another thread).
    @inlinable @inline(__always)
    static func end(_ item: any Dispatchable, store: ObjectIdentifier) throws -> Bool {
        guard let raw = katana_current_interception_frame() else { return false }
        let frame = raw.assumingMemoryBound(to: InterceptionFrame.self)
        guard frame.pointee.store == store else { return false }
        let run = frame.pointee.run
        try frame.pointee.end._withUnsafeGuaranteedRef { try $0.end(item, run) }
        return true
    }
}

/// An item passed along an interceptor chain as `U` when that is its very type (the existential opened, its type
/// compared with `U`'s: no runtime cast). Opened twice, to compare and then to take the value, as `typedContext` does
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
/// the chain's type, so the chain is kept in the form ``composeChain(_:context:store:done:elsewhere:)`` built it in;
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

/// An interceptor as a type: the form to use on every dispatch's path. It does what a ``StoreInterceptor`` closure
/// does — pass the item on with `next`, pass another item instead, drop it (return without calling `next`) or block
/// it (throw) — but `next` is a plain non-escaping function of a concrete type: the store composes the chain once and a
/// dispatch runs it without allocating and without the re-abstraction thunks the compiler puts around a closure in an
/// array of ``StoreInterceptor``. The typed form, ``TypedDispatchInterceptor``, also keeps a state updater's type up
/// to the store, which then applies it specialised.
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
/// store applies it as it applies an updater without interceptors, instead of through its witness (the Performance
/// article's table gives what three pass-through interceptors of each form add).
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
