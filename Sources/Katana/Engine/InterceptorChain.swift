import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// The interceptor chain's one model. However a chain is run — an updater inline (typed or erased), a queued updater, a
// side effect on its task — the run keeps a `ChainEnd`, and its end goes
// through the same functions: `reachEnd` (the rule for a second `next`), `endOfUpdaterChain` (apply the updater or
// keep what was forwarded instead) and `updaterChainResult` / `runSideEffectChain`'s result (what the run came to). The ways
// differ only in how the updater is applied (specialised or through its witness; its change told to the listeners now
// or recorded for the batch). The chain — the configuration's interceptors (`InterceptorStep`; the leading typed ones
// also composed per updater type, `TypedChain`), then Katana's closures — is composed, not walked, and every run finds
// its state in one place: this thread's `InterceptionFrame`.

/// What a dispatched item is: the one place both of its witnesses are asked.
@usableFromInline
enum ItemKind {
    case stateUpdater(any AnyStateUpdater)
    case sideEffect(any AnySideEffect)
    /// Both kinds at once: refused (``KatanaError/ambiguousDispatchable(_:)``).
    case ambiguous
    /// Neither kind: refused (``KatanaError/notDispatchable(_:)``).
    case neither

    @inlinable
    init(of item: any Dispatchable) {
        if let updater = item._katanaStateUpdater {
            self = item._katanaSideEffect == nil ? .stateUpdater(updater) : .ambiguous
        } else if let sideEffect = item._katanaSideEffect {
            self = .sideEffect(sideEffect)
        } else {
            self = .neither
        }
    }
}

/// What the end of one run of an interceptor chain saw: whether `next` reached it, whether it applied the updater, and
/// what an interceptor forwarded instead. Trivial, so nothing has to destroy it: the replacement, rare, is kept retained
/// in a box and taken once, by the run's result (`updaterChainResult`, or the launch of what `runSideEffectChain` returns).
@usableFromInline
struct ChainEnd {
    @usableFromInline var nextCalled = false
    /// Whether `next` applied the state updater (so an error thrown afterwards must say it was applied).
    @usableFromInline var applied = false
    @usableFromInline var replacementBox: Unmanaged<ReplacementBox>?
    @inlinable init() {}

    /// Whether the run ended the plain way: the item passed on and applied, nothing forwarded instead.
    @inlinable var appliedAsDispatched: Bool { applied && replacementBox == nil }

    /// Keeps `item` as what reached the end instead of an updater to apply (once per run: `reachEnd` lets one through).
    @usableFromInline
    mutating func setReplacement(_ item: any Dispatchable) {
        replacementBox?.release()
        replacementBox = Unmanaged.passRetained(ReplacementBox(item))
    }

    /// The replacement, if any, giving up the box (called once, by the run's result).
    @inlinable
    mutating func takeReplacement() -> (any Dispatchable)? {
        guard let box = replacementBox else { return nil }
        replacementBox = nil
        return box.takeRetainedValue().item
    }
}

/// What an interceptor forwarded instead of the item it was given, kept by a ``ChainEnd`` until its run is over.
@usableFromInline
final class ReplacementBox {
    @usableFromInline let item: any Dispatchable
    init(_ item: any Dispatchable) { self.item = item }
}

extension StoreEngine {
    // MARK: The rules

    /// The rule for every `next` that reaches the end of a chain: the first one goes on to the end (true); any later
    /// one — an interceptor calling `next` twice, or keeping it and calling it after its run — dispatches the item
    /// anew, past the interceptors (false). Guarded by `InterceptorTests`' second-`next` tests, for every kind of run.
    @inlinable @inline(__always)
    final func reachEnd<Item: Dispatchable>(_ end: inout ChainEnd, with item: Item) -> Bool {
        if _fastPath(!end.nextCalled) {
            end.nextCalled = true
            return true
        }
        dispatchPastInterceptors(item)
        return false
    }

    /// A `next` after the first, or after its run ended: the item is dispatched as new, without the interceptors.
    @usableFromInline @inline(never)
    final func dispatchPastInterceptors(_ item: any Dispatchable) {
        _ = anyDispatch(item, parentID: 0, bypassInterceptors: true)
    }

    /// The end of an updater's chain: the first `next` applies what it passes when that is a state updater (with
    /// `apply`: inline, telling the listeners, or for a batch, recording the change), and keeps anything else as the
    /// replacement. The dispatch recorder, if any, is told of the updater applied here.
    @inlinable @inline(__always)
    final func endOfUpdaterChain(
        _ item: any Dispatchable, _ end: inout ChainEnd, apply: (any AnyStateUpdater) throws -> Void
    ) throws {
        guard reachEnd(&end, with: item) else { return }
        guard case let .stateUpdater(updater) = ItemKind(of: item) else {
            end.setReplacement(item)
            return
        }
        if recordsDispatches { recordAtChainEnd(updater) }
        try apply(updater)
        end.applied = true
    }

    /// The end of an updater's chain for an item known to be the dispatched updater, of its type `U`: applied
    /// specialised, without asking the item what it is.
    @inlinable @inline(__always)
    final func endOfUpdaterChain<U: AnyStateUpdater>(
        typed updater: U, _ end: inout ChainEnd, apply: (U) throws -> Void
    ) throws {
        guard reachEnd(&end, with: updater) else { return }
        if recordsDispatches { recordAtChainEnd(updater) }
        try apply(updater)
        end.applied = true
    }

    /// The end of a side effect's chain: the first `next` keeps what it passes, which the launch that ran the chain
    /// (`runSideEffectChain`) then runs.
    @inlinable
    final func endOfSideEffectChain(_ item: any Dispatchable, _ end: inout ChainEnd) {
        guard reachEnd(&end, with: item) else { return }
        end.setReplacement(item)
    }

    /// What an updater's run through the interceptors came to, and its outcome for the trace. Takes the replacement.
    @inlinable
    final func updaterChainResult(
        _ updater: any AnyStateUpdater, _ end: inout ChainEnd, thrown: (any Error)?
    ) -> (LaneResult, DispatchOutcome) {
        let replacement = end.takeReplacement()
        if let thrown {
            if end.applied {
                let failure = InterceptorFailure(error: thrown, item: "\(type(of: updater))")
                return (.done(KatanaError.appliedButInterceptorThrew(failure)), .appliedWithError)
            }
            return (.done(thrown), end.nextCalled ? .error : .blocked)
        }
        guard end.nextCalled else { return (.done(nil), .blocked) }
        guard let replacement else { return (.done(nil), .ok) }
        if case let .sideEffect(sideEffect) = ItemKind(of: replacement) {
            return (.replacedBySideEffect(sideEffect), .ok)
        }
        return (.done(KatanaError.notDispatchable("\(type(of: replacement))")), .error)
    }

    // MARK: Running the interceptors

    /// Runs every interceptor on `item`: the configuration's, then Katana's closures; the last `next` ends the run in
    /// progress on this thread, whose ``InterceptionFrame`` the caller has set (`InterceptionFrames.with`). Out of line:
    /// inlined into an updater's inline run, it kept that run's frame closure from being inlined in turn — a call and
    /// its frame more for closures alone (the callgrind gate's `interceptors_3`), which call their chain directly there.
    @inlinable @inline(never)
    final func runInterceptors(_ item: any Dispatchable) throws {
        if let first = steps.first {
            try first._withUnsafeGuaranteedRef { try $0.call(item) }
        } else {
            try chain.unsafelyUnwrapped(item)  // a store that intercepts has one or the other
        }
    }

    // MARK: A queued updater's run, and a side effect's

    /// Runs a queued updater (or one applied inline for listeners on their executor) through the interceptors; its
    /// change is recorded for the batch's listeners. The composed chain's last `next` reaches this run through this
    /// thread's frame (`InterceptionFrames`), as an inline run's does.
    @inlinable
    final func runUpdaterChain(_ updater: any AnyStateUpdater, recordChanges: Bool) -> (LaneResult, DispatchOutcome) {
        var run = QueuedRun(store: Unmanaged.passUnretained(self), recordChanges: recordChanges)
        var thrown: (any Error)?
        do {
            try withUnsafeMutablePointer(to: &run) { pointer in
                let chainEnd = laneChainEnds.end(for: ObjectIdentifier(QueuedRun.self)) {
                    ChainEndBox { item, raw in
                        let run = raw.assumingMemoryBound(to: QueuedRun.self)
                        try run.pointee.store._withUnsafeGuaranteedRef {
                            try $0.queuedEnd(item, &run.pointee.end, recordChanges: run.pointee.recordChanges)
                        }
                    }
                }
                try InterceptionFrames.with(store: ObjectIdentifier(self), run: UnsafeMutableRawPointer(pointer), end: chainEnd) {
                    try runInterceptors(updater)
                }
            }
        } catch {
            thrown = error
        }
        return updaterChainResult(updater, &run.end, thrown: thrown)
    }

    /// A queued updater's chain end: applied, its change recorded for the batch (see `applyLocked`).
    @inlinable
    final func queuedEnd(_ item: any Dispatchable, _ end: inout ChainEnd, recordChanges: Bool) throws {
        try endOfUpdaterChain(item, &end) { updater in
            do { try apply(updater, recordChanges: recordChanges) } catch { throw KatanaError.surfaced(error) }
        }
    }

    /// Runs a side effect's interceptors on its task; returns what the run came to and the item to run next.
    @inlinable
    final func runSideEffectChain(_ sideEffect: any AnySideEffect) -> (thrown: (any Error)?, end: ChainEnd) {
        var run = ChainRun(store: Unmanaged.passUnretained(self))
        let thrown: (any Error)? = withUnsafeMutablePointer(to: &run) { pointer in
            do {
                // Made by the first side effect through the interceptors (side effects run on any thread: published once).
                let chainEnd = sideEffectChainEnd.load() ?? sideEffectChainEnd.storeIfNil(ChainEndBox { item, raw in
                    let run = raw.assumingMemoryBound(to: ChainRun.self)
                    run.pointee.store._withUnsafeGuaranteedRef { $0.endOfSideEffectChain(item, &run.pointee.end) }
                })
                try InterceptionFrames.with(store: ObjectIdentifier(self), run: UnsafeMutableRawPointer(pointer),
                                            end: .passUnretained(chainEnd)) {
                    try runInterceptors(sideEffect)
                }
                return nil
            } catch {
                return error
            }
        }
        return (thrown, run.end)
    }

    /// A run through the composed chain on its caller's stack — an updater's inline run, or a side effect's on its
    /// task: what the chain's last `next` needs, reached through this thread's ``InterceptionFrame`` (so the closure
    /// made once in `becomeReady` applies an updater specialised, and reads the listeners itself, under the state lock).
    @usableFromInline
    struct ChainRun {
        /// Unretained: the caller holds the engine.
        @usableFromInline let store: Unmanaged<StoreEngine<S>>
        @usableFromInline var end = ChainEnd()

        @inlinable
        init(store: Unmanaged<StoreEngine<S>>) {
            self.store = store
        }
    }

    /// A queued updater's run through the composed chain, on the lane holder's stack (reached through this thread's frame).
    @usableFromInline
    struct QueuedRun {
        /// Unretained: the caller holds the store.
        @usableFromInline let store: Unmanaged<StoreEngine<S>>
        @usableFromInline var end = ChainEnd()
        @usableFromInline let recordChanges: Bool

        @inlinable
        init(store: Unmanaged<StoreEngine<S>>, recordChanges: Bool) {
            self.store = store
            self.recordChanges = recordChanges
        }
    }
}

/// Composes Katana's interceptors into one chain whose last `next` ends this thread's run in progress for `store` (its
/// `InterceptionFrame`), or else calls `elsewhere`. Generic over the chain's result on purpose: the interceptors arrive in an array, which holds function
/// values in their most general form (a result returned indirectly), and code that names their concrete type wraps
/// each one taken out of it (and each `next` passed into it) in a re-abstraction thunk — two more calls per link on
/// every dispatch. A function returning `R` has that form already: every link stays as the array holds it, and the
/// last `next`, made here, is made in that form too (made by the caller, it was wrapped once going in).
@usableFromInline
func composeChain<Context, R: Sendable>(
    _ interceptors: [@Sendable (Context) -> @Sendable (@escaping @Sendable (any Dispatchable) throws -> R)
                        -> @Sendable (any Dispatchable) throws -> R],
    context: Context, store: ObjectIdentifier, done: R,
    elsewhere: @escaping @Sendable (any Dispatchable) throws -> Void
) -> ClosureChain<@Sendable (any Dispatchable) throws -> R> {
    let last: @Sendable (any Dispatchable) throws -> R = { item in
        try endChain(item, store: store, elsewhere: elsewhere)
        return done
    }
    let handlers = interceptors.map { $0(context) }
    var next = last
    for handler in handlers.reversed() { next = handler(next) }
    return ClosureChain(next)
}

/// The end of a chain composed once (Katana's closures, or the configuration's interceptors when there are none):
/// the run in progress on this thread for `store` ends with `item`; with none (a `next` kept and called later, or
/// called from another thread), `elsewhere` dispatches it anew.
@inlinable @inline(__always)
func endChain(_ item: any Dispatchable, store: ObjectIdentifier, elsewhere: (any Dispatchable) throws -> Void) throws {
    if try InterceptionFrames.end(item, store: store) { return }
    try elsewhere(item)
}

/// The composed chain's ends of the runs the lane's holder makes: an inline updater's, one per updater type (each
/// applies it specialised, and keeps the typed interceptors composed for that type), and a queued updater's (see
/// ``ChainEndBox``). Made on first use and kept until the store goes. Read and changed only by the thread holding the
/// lane (an updater's run through the interceptors happens only then), so it needs no lock. A type finds its end in
/// one of `slotCount` slots, picked by its metadata's address; a type whose slot another holds finds it in `made`.
@usableFromInline
struct LaneChainEnds {
    @usableFromInline struct Slot {
        @usableFromInline var key: ObjectIdentifier?
        @usableFromInline var end: Unmanaged<ChainEndBox>?
    }

    @usableFromInline static let slotCount = 16
    /// Allocated on first use (a store without closure interceptors never needs it).
    @usableFromInline var slots: UnsafeMutablePointer<Slot>?
    /// Every end made, kept alive here.
    @usableFromInline var made: [ObjectIdentifier: ChainEndBox] = [:]

    @usableFromInline init() {}

    /// The slot `key` is looked for in.
    @inlinable @inline(__always)
    static func slot(of key: ObjectIdentifier) -> Int {
        Int(truncatingIfNeeded: UInt(bitPattern: key) &>> 4 & UInt(slotCount &- 1))
    }

    /// The end for `key`, made by `make` the first time.
    @inlinable @inline(__always)
    mutating func end(for key: ObjectIdentifier, make: () -> ChainEndBox) -> Unmanaged<ChainEndBox> {
        if let slots {
            let slot = slots + Self.slot(of: key)
            if slot.pointee.key == key, let end = slot.pointee.end { return end }
        }
        return endNotInSlot(for: key, make: make)
    }

    @usableFromInline
    mutating func endNotInSlot(for key: ObjectIdentifier, make: () -> ChainEndBox) -> Unmanaged<ChainEndBox> {
        let slots = self.slots ?? {
            let slots = UnsafeMutablePointer<Slot>.allocate(capacity: Self.slotCount)
            slots.initialize(repeating: Slot(), count: Self.slotCount)
            self.slots = slots
            return slots
        }()
        let end: ChainEndBox
        if let kept = made[key] {
            end = kept
        } else {
            end = make()
            made[key] = end
        }
        slots[Self.slot(of: key)] = Slot(key: key, end: .passUnretained(end))
        return .passUnretained(end)
    }

    /// Called once, by the store's deinit.
    @usableFromInline
    mutating func deallocate() {
        slots?.deinitialize(count: Self.slotCount)
        slots?.deallocate()
        slots = nil
        made = [:]
    }
}
