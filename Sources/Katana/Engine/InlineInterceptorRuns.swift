import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// An updater dispatched inline through the interceptors: its run on the caller's stack (through the composed chain, its
// typed interceptors composed for its type) and the run's end, which applies the updater specialised.
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

    /// Applies an updater inline through the interceptors (inline listeners): through the composed chain — a typed
    /// dispatch through the typed interceptors composed for its type (``TypedChain``) first, when there are such and no
    /// closures; then the rest erased, then Katana's closures — whose last `next` reaches this run through this
    /// thread's frame. The chain's end applies the updater and tells the listeners, as an updater without
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
        var run = ChainRun(store: Unmanaged.passUnretained(self))
        // (Read here, before the run's closures, these keep them inlined into this function: read inside them, or
        // with the typed chain called there, the closures were calls of their own, 20 to 40 instructions more per
        // dispatch — the callgrind gate's `interceptors_3`, `dispatch_interceptors_3`, `erased_interceptors_3`.)
        let throughTyped = typed && runsTyped
        let first = steps.first
        let chain = self.chain
        do {
            try withUnsafeMutablePointer(to: &run) { pointer in
                let runEnd = laneChainEnds.end(for: ObjectIdentifier(U.self)) { makeInlineRunEnd(U.self) }
                try InterceptionFrames.with(store: ObjectIdentifier(self), run: UnsafeMutableRawPointer(pointer), end: runEnd) {
                    if throughTyped {
                        try runTyped(updater, runEnd)
                    } else if let chain, first == nil {
                        try chain(updater)  // closures alone: their chain, called here
                    } else {
                        try runInterceptors(updater)
                    }
                }
            }
        } catch {
            thrown = error
        }
        return finishInlineRun(trace, updater, parentID: parentID, &run.end, thrown: thrown, combined: combined,
                               started: started, success: success)
    }

    /// Runs the typed interceptors composed for `U` (kept with `U`'s run end). Out of line, as `runInterceptors` is.
    @inlinable @inline(never)
    final func runTyped<U: AnyStateUpdater>(_ updater: U, _ runEnd: Unmanaged<ChainEndBox>) throws {
        try runEnd._withUnsafeGuaranteedRef {
            try $0.typedChain.unsafelyUnwrapped._withUnsafeGuaranteedRef {
                try unsafeDowncast($0, to: TypedChain<U>.self).head(updater)
            }
        }
    }

    /// The end of an inline run of a `U`, made the first time one goes through the interceptors: applies what reaches
    /// it (specialised when it is still a `U`); when a typed dispatch runs the typed interceptors (`runsTyped`), it also
    /// keeps them composed for `U`.
    /// (Inlinable, as the closures it makes must be: made in unspecialised code, they ran unspecialised, looking up
    /// generic metadata on every dispatch.)
    @inlinable
    final func makeInlineRunEnd<U: AnyStateUpdater>(_: U.Type) -> ChainEndBox {
        let box = ChainEndBox { item, raw in
            let run = raw.assumingMemoryBound(to: ChainRun.self)
            try run.pointee.store._withUnsafeGuaranteedRef { try $0.inlineEnd(item, as: U.self, &run.pointee.end) }
        }
        if runsTyped { box.typedChain = .passRetained(composeTyped(U.self, end: .passUnretained(box))) }
        return box
    }

    /// The typed interceptors composed for `U`: each one's `next` is the one after it; the last one's applies the
    /// updater at the end of the run in progress (`end` is that run's end, `U`'s), or, when interceptors of the erased
    /// form follow, is the first of their steps. Each one's `forward` is the step after it (past the last step: the
    /// end of the run in progress). The closures reference the store unretained: it keeps them (through `end`), and
    /// runs them only while it is alive.
    @inlinable
    final func composeTyped<U: AnyStateUpdater>(_: U.Type, end: Unmanaged<ChainEndBox>) -> TypedChain<U> {
        let engine = Unmanaged.passUnretained(self)
        // The erased chain from the configuration's interceptor `index` on (no closures follow: see `runsTyped`).
        func erased(from index: Int) -> StoreInterceptorChain {
            if index < steps.count { return steps[index]._withUnsafeGuaranteedRef { $0.call } }
            return { item in
                try engine._withUnsafeGuaranteedRef {
                    try endChain(item, store: ObjectIdentifier($0), elsewhere: $0.dispatchPastInterceptors)
                }
            }
        }
        let typedCount = typedInterceptors.count
        var next: @Sendable (U) throws -> Void = if typedCount < steps.count {
            { [rest = erased(from: typedCount)] item in try rest(item) }
        } else {
            { item in try engine._withUnsafeGuaranteedRef { try $0.typedEnd(item, runEnd: end) } }
        }
        for index in typedInterceptors.indices.reversed() {
            next = makeTypedStep(typedInterceptors[index], next: next, forward: erased(from: index + 1))
        }
        return TypedChain(next)
    }

    /// The end of a typed chain that nothing follows: the updater, still a `U`, is applied specialised when this
    /// thread's run in progress is the `U` run whose end is `runEnd`; otherwise (the `next` called from another thread,
    /// or from inside another run) it ends as any composed chain does.
    @inlinable
    final func typedEnd<U: AnyStateUpdater>(_ updater: U, runEnd: Unmanaged<ChainEndBox>) throws {
        if let raw = katana_current_interception_frame() {
            let frame = raw.assumingMemoryBound(to: InterceptionFrame.self)
            if frame.pointee.end.toOpaque() == runEnd.toOpaque() {
                let run = frame.pointee.run.assumingMemoryBound(to: ChainRun.self)
                return try inlineEnd(typed: updater, &run.pointee.end)
            }
        }
        try endChain(updater, store: ObjectIdentifier(self), elsewhere: dispatchPastInterceptors)
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
}
