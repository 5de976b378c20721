import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// An updater dispatched inline through the interceptors: the runs on the caller's stack (typed links, the closure
// chain) and the ends of their chains, which apply the updater specialised.
extension StoreEngine {
    /// An inline run's chain end for the updater as dispatched, passed on by every interceptor in the typed form:
    /// applied as an updater without interceptors is (specialised).
    @inlinable @inline(__always)
    final func inlineEnd<U: AnyStateUpdater>(typed updater: U, _ end: inout ChainEnd) throws {
        try endOfUpdaterChain(typed: updater, &end) { updater in
            try applyInlineAtEnd(updater)
        }
    }

    /// An inline run's chain end for an item passed on erased (or forwarded instead): an updater applied through its
    /// witness, anything else kept as the replacement.
    @inlinable
    final func inlineEnd(_ item: any Dispatchable, _ end: inout ChainEnd) throws {
        try endOfUpdaterChain(item, &end) { updater in
            try applyInlineAtEnd(updater)
        }
    }

    /// `inlineEnd` where the dispatched updater's type `U` is known: an item of exactly that type (the dispatched
    /// updater passed on, the common case) is applied specialised, where the erased end asks it for its updater and
    /// its side effect through two witnesses and applies it through a third (the callgrind gate's
    /// `dispatch_interceptors_3`); anything else goes the erased way.
    @inlinable @inline(__always)
    final func inlineEnd<U: AnyStateUpdater>(_ item: any Dispatchable, as _: U.Type, _ end: inout ChainEnd) throws {
        if let updater = sameType(item, as: U.self) {
            try inlineEnd(typed: updater, &end)
        } else {
            try inlineEnd(item, &end)
        }
    }

    /// An inline run's applier: apply and tell the listeners now; a refusal is thrown back up the chain. (`updater`
    /// an existential, the erased end's, is opened: applied through its witness.)
    @inlinable @inline(__always)
    final func applyInlineAtEnd<U: AnyStateUpdater>(_ updater: U) throws {
        if let failure = applyAndNotify(updater) {
            throw KatanaError.surfaced(failure)
        }
    }

    /// Applies an updater inline through the interceptors (inline listeners): a typed dispatch with no closures
    /// through the typed links (`runTypedLinks`), keeping the updater in its type; else through the composed chain —
    /// the configuration's interceptors erased, then Katana's closures — whose last `next` reaches this run through
    /// this thread's frame. The chain's end applies the updater and tells the listeners, as an updater without
    /// interceptors is (so an interceptor that throws after `next` reports an item that was applied and whose change
    /// the listeners were told). `trace` is its lane item when traced, else ``UntracedRun`` (an untraced updater gets
    /// no lane item: it would box the updater in an existential, copy it and destroy both). Called with the lane held;
    /// gives it back. (Never inlined: in `enqueueUpdater`'s body it changed how the common paths there were optimised
    /// — a traced dispatch cost ~110 instructions more.)
    @inlinable @inline(never)
    final func applyInlineThroughInterceptors<U: AnyStateUpdater, V: Sendable, T: InlineRunTrace>(
        _ trace: T, _ updater: U, parentID: UInt64, typed: Bool, combined: Bool, success: V
    ) -> DispatchHandle<V> {
        let started = trace.start(self, combined: combined)
        var thrown: (any Error)?
        // The composed chain unless a typed dispatch goes through the typed links alone. (Asked in this order, and with
        // `first` and `chain` read here, the run's closures are inlined into this function: asked the other way round,
        // they were calls of their own, 20 to 30 instructions more per dispatch — the callgrind gate's
        // `interceptors_3` and `erased_interceptors_3`.)
        if chain != nil || !typed || firstTypedLink == nil {
            var run = ChainRun(store: Unmanaged.passUnretained(self))
            let first = steps.first
            let chain = self.chain
            do {
                try withUnsafeMutablePointer(to: &run) { pointer in
                    let chainEnd = laneChainEnds.end(for: ObjectIdentifier(U.self)) {
                        ChainEndBox { item, raw in
                            let run = raw.assumingMemoryBound(to: ChainRun.self)
                            try run.pointee.store._withUnsafeGuaranteedRef {
                                try $0.inlineEnd(item, as: U.self, &run.pointee.end)
                            }
                        }
                    }
                    try InterceptionFrames.with(store: ObjectIdentifier(self), run: UnsafeMutableRawPointer(pointer),
                                                end: chainEnd) {
                        // Closures alone: their chain, called here.
                        if let chain, first == nil { try chain(updater) } else { try runInterceptors(updater) }
                    }
                }
            } catch {
                thrown = error
            }
            return finishInlineRun(trace, updater, parentID: parentID, &run.end, thrown: thrown, combined: combined,
                                   started: started, success: success)
        }
        var run = TypedRun(store: Unmanaged.passUnretained(self), first: firstTypedLink.unsafelyUnwrapped)  // asked above
        do {
            try withUnsafeMutablePointer(to: &run) { try Self.runTypedLinks(updater, $0) }
        } catch {
            thrown = error
        }
        return finishInlineRun(trace, updater, parentID: parentID, &run.end, thrown: thrown, combined: combined,
                               started: started, success: success)
    }

    /// The end of `applyInlineThroughInterceptors`: traces the outcome, gives the lane back and returns the handle.
    @inlinable @inline(__always)
    final func finishInlineRun<U: AnyStateUpdater, V: Sendable, T: InlineRunTrace>(
        _ trace: T, _ updater: U, parentID: UInt64, _ end: inout ChainEnd, thrown: (any Error)?,
        combined: Bool, started: (started: UInt64, parallelism: UInt32), success: V
    ) -> DispatchHandle<V> {
        if thrown == nil, end.appliedAsDispatched {
            // Passed on and applied: the common case, without building a lane result.
            trace.finish(self, combined: combined, started: started, outcome: .ok, failure: nil)
            releaseLane()
            return DispatchHandle(ranInline: KatanaError?.none, success: success)
        }
        let (result, outcome) = updaterChainResult(updater, &end, thrown: thrown)
        if case let .done(error?) = result {
            trace.finish(self, combined: combined, started: started, outcome: outcome, failure: error)
        } else {
            trace.finish(self, combined: combined, started: started, outcome: outcome, failure: nil)
        }
        let handle = inlineHandle(result, success: success, parentID: parentID)
        releaseLane()
        return handle
    }

    /// An inline run through the leading typed interceptors: what their `next` and `forward` need, in one place on the
    /// caller's stack, so each is a closure over a pointer to it.
    @usableFromInline
    struct TypedRun {
        /// Unretained: the caller holds the store.
        @usableFromInline let store: Unmanaged<StoreEngine<S>>
        /// The link whose interceptor is running: set before each call and restored after it (the calls nest).
        @usableFromInline var current: Unmanaged<TypedLink>
        @usableFromInline var end = ChainEnd()

        @inlinable
        init(store: Unmanaged<StoreEngine<S>>, first: Unmanaged<TypedLink>) {
            self.store = store
            self.current = first
        }
    }
}
