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

/// A typed interceptor of a store's configuration and the typed one after it (`nil` after the last typed one);
/// `index` is its place among the store's `steps`, from which an erased continuation starts, and `isLast` says no
/// interceptor follows. Each is a `TypedLinkOf` its interceptor's type, so calling it is a class method call, not an
/// existential's, whose value the runtime projects out of its box on every call (the callgrind gate's
/// `dispatch_interceptors_3`).
@usableFromInline
class TypedLink {
    /// `owner` unretained, to follow the list without reference counting.
    @usableFromInline let next: Unmanaged<TypedLink>?
    @usableFromInline let index: Int
    @usableFromInline let isLast: Bool
    /// Keeps the rest of the list alive.
    let owner: TypedLink?

    init(index: Int, next: TypedLink?, isLast: Bool) {
        self.index = index
        self.owner = next
        self.next = next.map { Unmanaged.passUnretained($0) }
        self.isLast = isLast
    }

    /// Calls this link's interceptor.
    @usableFromInline
    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws {
        preconditionFailure("TypedLink is abstract")
    }
}

/// A link holding its interceptor as the interceptor's own type.
@usableFromInline
final class TypedLinkOf<I: TypedDispatchInterceptor>: TypedLink {
    @usableFromInline let interceptor: I

    init(_ interceptor: I, index: Int, next: TypedLink?, isLast: Bool) {
        self.interceptor = interceptor
        super.init(index: index, next: next, isLast: isLast)
    }

    @usableFromInline
    override func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                                forward: (any Dispatchable) throws -> Void) throws {
        try interceptor.intercept(item, next: next, forward: forward)
    }
}

/// A link for `interceptor`, holding it as its own type (an existential argument is opened).
func makeTypedLink<I: TypedDispatchInterceptor>(_ interceptor: I, index: Int, next: TypedLink?, isLast: Bool) -> TypedLink {
    TypedLinkOf(interceptor, index: index, next: next, isLast: isLast)
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
