import KatanaTrace
import Synchronization

/// An updater waiting in the lane. `cell` is nil only for the caller's own item on the inline path.
@usableFromInline
struct LaneItem {
    @usableFromInline let updater: any AnyStateUpdater
    @usableFromInline var cell: HandleCell?  // moved out (`take()`) when the lane holder resolves it
    @usableFromInline let id: UInt64
    @usableFromInline let parentID: UInt64
    @usableFromInline let name: TraceName?
    @usableFromInline let bypass: Bool
    /// The producer slot it counts against in the lane (`LaneQueue.slot(of:)` of the thread that dispatched it;
    /// `LaneQueue.noSlot`: none, for an item re-enqueued).
    @usableFromInline let slot: UInt8

    /// Not inlinable, as `HandleCell.init` is not: inlinable, it called a function per field's initial value (the
    /// queued walk, `make walk`).
    @usableFromInline
    init(updater: any AnyStateUpdater, cell: HandleCell?, id: UInt64, parentID: UInt64, name: TraceName?, bypass: Bool,
         slot: UInt8) {
        self.updater = updater
        self.cell = cell
        self.id = id
        self.parentID = parentID
        self.name = name
        self.bypass = bypass
        self.slot = slot
    }
}

@usableFromInline
struct SideEffectItem: Sendable {
    @usableFromInline let sideEffect: any AnySideEffect
    @usableFromInline let cell: HandleCell
    @usableFromInline let id: UInt64
    @usableFromInline let parentID: UInt64
    @usableFromInline let name: TraceName?
    @usableFromInline let bypass: Bool
    /// The handle's value type is `Void`: it reports only that the side effect finished, so what the body returned
    /// need not be kept.
    @usableFromInline let discardsValue: Bool

    @inlinable
    init(sideEffect: any AnySideEffect, cell: HandleCell, id: UInt64, parentID: UInt64, name: TraceName?, bypass: Bool,
         discardsValue: Bool = false) {
        self.sideEffect = sideEffect
        self.cell = cell
        self.id = id
        self.parentID = parentID
        self.name = name
        self.bypass = bypass
        self.discardsValue = discardsValue
    }
}

/// A queued updater the lane holder applied, waiting for its handle to be resolved (after the listeners were told).
@usableFromInline
struct FinishedUpdater {
    @usableFromInline let cell: HandleCell
    /// What it threw (nil: applied).
    @usableFromInline let error: (any Error)?

    @inlinable init(cell: HandleCell, error: (any Error)?) {
        self.cell = cell
        self.error = error
    }
}

@usableFromInline
enum EarlyItem {
    case updater(LaneItem)
    case sideEffect(SideEffectItem)
}

/// The store's leading typed interceptors composed for one updater type `U`, as the rest of the chain is composed once
/// (``InterceptorStep``): `head` runs the first with, as its `next`, the one after it, in `U`; the last one's `next`
/// applies the updater (specialised) at the end of the run in progress, or goes on erased through the rest of the
/// chain. Made the first time a `U` is dispatched typed, and kept with that type's run end (``ChainEndBox``), so a
/// dispatch runs typed interceptors as it runs the others: through closures already made, ending in this thread's
/// ``InterceptionFrame`` (the callgrind gate's `dispatch_interceptors_3`).
@usableFromInline
final class TypedChain<U: AnyStateUpdater>: Sendable {
    @usableFromInline let head: @Sendable (U) throws -> Void
    @inlinable init(_ head: @escaping @Sendable (U) throws -> Void) { self.head = head }
}

/// The step that runs the typed `interceptor` with `next` and `forward` after it (an existential argument is opened:
/// the step holds the interceptor as its own type and calls its witness directly).
@usableFromInline
func makeTypedStep<I: TypedDispatchInterceptor, U: AnyStateUpdater>(
    _ interceptor: I, next: @escaping @Sendable (U) throws -> Void, forward: @escaping StoreInterceptorChain
) -> @Sendable (U) throws -> Void {
    { item in try interceptor.intercept(item, next: next, forward: forward) }
}

/// One of the configuration's interceptors, bound to a store, composed with the ones after it: `call` runs the
/// interceptor with, as its `next`, the step after it (the last one's: Katana's closures, or else the end of the run
/// in progress on this thread). Composed once, when the store becomes ready, as the closures are (``composeChain``),
/// so a run passes the item from interceptor to interceptor through closures already made — none made per link per
/// run, no index followed — and ends where Katana's closures end, in this thread's ``InterceptionFrame``.
/// Called through a `let` of a class referenced unretained, so nothing is retained around the call (see
/// ``ClosureChain``); of the concrete type `DispatchInterceptor` passes as `next`, so no re-abstraction thunk sits
/// between two interceptors (the callgrind gate's `erased_interceptors_3`).
@usableFromInline
final class InterceptorStep: Sendable {
    @usableFromInline let call: StoreInterceptorChain
    init(_ call: @escaping StoreInterceptorChain) { self.call = call }
}

/// The step that runs `interceptor` with `next` after it. Generic, so an existential argument is opened and the step
/// holds the interceptor as its own type: a call goes straight to its witness, where an existential was opened (its
/// value projected out of its box) on every call.
func makeStep<I: DispatchInterceptor>(_ interceptor: I, next: @escaping StoreInterceptorChain) -> InterceptorStep {
    InterceptorStep { item in try interceptor.intercept(item, next: next) }
}
