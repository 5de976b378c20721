import KatanaTrace
import Synchronization

/// An updater waiting in the lane. `cell` is nil only for the caller's own item on the inline path.
@usableFromInline
struct LaneItem {
    @usableFromInline var updater: any AnyStateUpdater
    @usableFromInline var cell: HandleCell?
    @usableFromInline var id: UInt64
    @usableFromInline var parentID: UInt64
    @usableFromInline var name: TraceName?
    @usableFromInline var bypass: Bool
    /// The producer slot it counts against in the lane (`LaneQueue.noSlot`: none).
    @usableFromInline var slot: UInt8 = LaneQueue.noSlot

    @inlinable
    init(updater: any AnyStateUpdater, cell: HandleCell?, id: UInt64, parentID: UInt64, name: TraceName?, bypass: Bool) {
        self.updater = updater
        self.cell = cell
        self.id = id
        self.parentID = parentID
        self.name = name
        self.bypass = bypass
    }
}

@usableFromInline
struct SideEffectItem: Sendable {
    @usableFromInline var sideEffect: any AnySideEffect
    @usableFromInline var cell: HandleCell
    @usableFromInline var id: UInt64
    @usableFromInline var parentID: UInt64
    @usableFromInline var name: TraceName?
    @usableFromInline var bypass: Bool
    /// The handle's value type is `Void`: it reports only that the side effect finished, so what the body returned
    /// need not be kept.
    @usableFromInline var discardsValue: Bool

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
enum HeldItem {
    case updater(LaneItem)
    case sideEffect(SideEffectItem)
}

@usableFromInline
final class ListenerBox<S: State>: Sendable {
    /// Called with `(old, new)`; a new-state listener is wrapped to ignore `old` (one closure either way: an optional
    /// per form cost unwrapping and reference counting on every call: the callgrind gate's `listeners_4`).
    @usableFromInline let listener: @Sendable (S, S) -> Void
    /// Whether it needs the state before each change (so the store must keep a copy of it).
    @usableFromInline let needsOldState: Bool
    @usableFromInline let active = Atomic<Bool>(true)

    @inlinable
    init(_ listener: @escaping @Sendable (S, S) -> Void) {
        self.listener = listener
        needsOldState = true
    }

    @inlinable
    init(newState listener: @escaping @Sendable (S) -> Void) {
        self.listener = { _, new in listener(new) }
        needsOldState = false
    }

    @usableFromInline
    func deactivate() { active.store(false, ordering: .releasing) }

    @inlinable @inline(__always)
    func call(_ old: S, _ new: S) {
        if active.load(ordering: .acquiring) { listener(old, new) }
    }

    /// For a change delivered without its old state (no listener needs it): only new-state listeners get these.
    @inlinable @inline(__always)
    func call(new: S) {
        if active.load(ordering: .acquiring) { listener(new, new) }
    }
}

extension Array {
    /// Tells every listener in this list of a change. Each box is called without being retained: the list, which
    /// the caller holds for the whole loop, keeps them all alive (`for listener in listeners` retained and released
    /// each one: two atomic operations per listener per change; the callgrind gate's `listeners_4`).
    @inlinable @inline(__always)
    func tell<S: State>(_ old: S, _ new: S) where Element == ListenerBox<S> {
        withUnsafeBufferPointer { boxes in
            for index in boxes.indices {
                Unmanaged.passUnretained(boxes[index])._withUnsafeGuaranteedRef { $0.call(old, new) }
            }
        }
    }

    /// Tells every new-state listener in this list of a change, as ``tell(_:_:)`` does.
    @inlinable @inline(__always)
    func tell<S: State>(new: S) where Element == ListenerBox<S> {
        withUnsafeBufferPointer { boxes in
            for index in boxes.indices {
                Unmanaged.passUnretained(boxes[index])._withUnsafeGuaranteedRef { $0.call(new: new) }
            }
        }
    }
}

/// How an inline run through the protocol-form interceptors is traced: by its lane item, or not at all
/// (``UntracedRun``, whose calls vanish once specialised).
@usableFromInline
protocol InlineRunTrace {
    func start<S: State>(_ store: PartialStore<S>, combined: Bool) -> (started: UInt64, parallelism: UInt32)
    func finish<S: State>(_ store: PartialStore<S>, combined: Bool, started: (started: UInt64, parallelism: UInt32),
                          outcome: DispatchOutcome, failure: (any Error)?)
}

/// An untraced inline run: no lane item, nothing to emit.
@usableFromInline
struct UntracedRun: InlineRunTrace {
    @inlinable init() {}
    @inlinable
    func start<S: State>(_ store: PartialStore<S>, combined: Bool) -> (started: UInt64, parallelism: UInt32) { (0, 0) }
    @inlinable
    func finish<S: State>(_ store: PartialStore<S>, combined: Bool, started: (started: UInt64, parallelism: UInt32),
                          outcome: DispatchOutcome, failure: (any Error)?) {}
}

extension LaneItem: InlineRunTrace {
    @inlinable
    func start<S: State>(_ store: PartialStore<S>, combined: Bool) -> (started: UInt64, parallelism: UInt32) {
        id != 0 ? store.traceStart(self, lane: .updaterInline, combined: combined) : (0, 0)
    }
    @inlinable
    func finish<S: State>(_ store: PartialStore<S>, combined: Bool, started: (started: UInt64, parallelism: UInt32),
                          outcome: DispatchOutcome, failure: (any Error)?) {
        guard id != 0 else { return }
        if let failure { store.traceFailure(id, failure) }
        store.traceFinish(self, lane: .updaterInline, combined: combined, started: started, outcome: outcome)
    }
}

/// A typed interceptor of a store's configuration and the typed one after it (`nil` after the last typed one);
/// `index` is its place in the store's `links`, from which an erased continuation starts, and `isLast` says no
/// interceptor follows. Each is a `TypedLinkOf` its interceptor's type, so calling it is a class method call, not an
/// existential's (whose value the runtime projects out of its box on every call: ~5 % of a dispatch through 3 links).
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

extension TraceBackend {
    /// An item that ends without running: cancelled before it started, or rejected because its store went away
    /// before it was ready. Its begin and its end, one after the other, so that every enqueue in a trace has both:
    /// the trace toolkit pairs all three, and a distributed-tracing span (started at the enqueue) ends here, with the
    /// error when there is one. `failure` is reported for an outcome of `.error` only.
    @usableFromInline
    func dispatchDropped(id: UInt64, parentID: UInt64, kind: DispatchKind, name: TraceName, lane: DispatchLane,
                         outcome: DispatchOutcome, failure: (any Error)? = nil) {
        dispatchBegin(DispatchBeginEvent(id: id, parentID: parentID, kind: kind, name: name, lane: lane, parallelism: 0))
        if outcome == .error, let failure { dispatchFailed(id: id, error: failure) }
        dispatchEnd(DispatchEndEvent(id: id, kind: kind, name: name, lane: lane, outcome: outcome))
    }
}
