import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Running the interceptor chain for queued updaters and side effects (the protocol-form links, then the closure
// chain), and what a second `next` or a forwarded item does.
extension PartialStore {
    /// Runs the protocol-form interceptors on a state updater, the leading typed ones in their typed form: while each
    /// passes the updater on with `next`, it stays of its type `U` and the chain's end applies it specialised; from
    /// the first erased interceptor on, or what an interceptor forwards instead, the rest of the chain runs erased.
    /// One `next` and one `forward` serve every link (each a closure over `run`); each link is called through its
    /// class method (``TypedLinkOf``), and the list is followed without reference counting.
    @inlinable
    static func runTypedLinks<U: AnyStateUpdater>(
        _ updater: U, _ run: UnsafeMutablePointer<TypedRun>
    ) throws {
        func forward(_ item: any Dispatchable) throws {
            let index = run.pointee.current._withUnsafeGuaranteedRef { $0.index }
            try run.pointee.store._withUnsafeGuaranteedRef {
                try $0.runLinks(item, from: index + 1) { try erasedEnd($0, run) }
            }
        }
        func next(_ passed: U) throws {
            let link = run.pointee.current
            let (following, index, isLast) = link._withUnsafeGuaranteedRef { ($0.next, $0.index, $0.isLast) }
            guard let following else {
                if isLast { return try typedEnd(passed, run) }
                return try run.pointee.store._withUnsafeGuaranteedRef {
                    try $0.runLinks(passed, from: index + 1) { try erasedEnd($0, run) }
                }
            }
            run.pointee.current = following
            defer { run.pointee.current = link }
            try following._withUnsafeGuaranteedRef { try $0.intercept(passed, next: next, forward: forward) }
        }
        try run.pointee.current._withUnsafeGuaranteedRef {
            try $0.intercept(updater, next: next, forward: forward)
        }
    }

    /// The end for the updater passed on in its own type: applied specialised (inlined into `next`).
    @inlinable @inline(__always)
    static func typedEnd<U: AnyStateUpdater>(
        _ updater: U, _ run: UnsafeMutablePointer<TypedRun>
    ) throws {
        try run.pointee.store._withUnsafeGuaranteedRef {
            try $0.typedLinkEnd(updater, &run.pointee.end, run.pointee.thread)
        }
    }

    /// The end for an item passed on erased, or forwarded instead (rare: kept out of `next`).
    @inlinable @inline(never)
    static func erasedEnd(
        _ item: any Dispatchable, _ run: UnsafeMutablePointer<TypedRun>
    ) throws {
        try run.pointee.store._withUnsafeGuaranteedRef {
            try $0.linkEnd(item, &run.pointee.end, run.pointee.thread)
        }
    }

    /// Runs the protocol-form interceptors from `index` on; the last one's `next` calls `end`.
    @inlinable
    final func runLinks(_ item: any Dispatchable, from index: Int, end: (any Dispatchable) throws -> Void) throws {
        guard index < links.count else { return try end(item) }
        try links[index]._withUnsafeGuaranteedRef { link in
            try link.interceptor.intercept(item) { forwarded in try runLinks(forwarded, from: index + 1, end: end) }
        }
    }

    @inlinable
    final func runUpdaterChain(_ updater: any AnyStateUpdater, recordChanges: Bool) -> (LaneResult, DispatchOutcome) {
        guard let chain else { return runUpdaterLinks(updater, recordChanges: recordChanges) }
        // Closures: their end (`interceptedNext`) finds this interception in thread-local storage.
        var frame = InterceptionFrame(store: ObjectIdentifier(self), kind: .stateUpdater, recordChanges: recordChanges,
                                      applyUpdater: { store, updater, record throws(KatanaError) in
                                          try unsafeDowncast(store, to: PartialStore<S>.self).apply(updater, recordChanges: record)
                                      })
        let links = !self.links.isEmpty
        let thrown: (any Error)? = InterceptionFrames.with(&frame) {
            do {
                if links { try runLinks(updater, from: 0) { try chain($0) } } else { try chain(updater) }
                return nil
            } catch {
                return error
            }
        }
        return chainResult(updater, thrown: thrown, nextCalled: frame.nextCalled, applied: frame.applied,
                           replacement: frame.replacement)
    }

    /// `runUpdaterChain` with protocol-form interceptors only: the chain's end is a closure on this stack.
    @inlinable
    final func runUpdaterLinks(_ updater: any AnyStateUpdater, recordChanges: Bool) -> (LaneResult, DispatchOutcome) {
        var thrown: (any Error)?
        var nextCalled = false, applied = false
        var replacement: (any Dispatchable)?
        do {
            try runLinks(updater, from: 0) { item in
                guard !nextCalled else {
                    _ = anyDispatch(item, parentID: 0, bypassInterceptors: true)
                    return
                }
                nextCalled = true
                if let updater = item._katanaStateUpdater, item._katanaSideEffect == nil {
                    do { try apply(updater, recordChanges: recordChanges) } catch { throw KatanaError.surfaced(error) }
                    applied = true
                } else {
                    replacement = item
                }
            }
        } catch {
            thrown = error
        }
        return chainResult(updater, thrown: thrown, nextCalled: nextCalled, applied: applied, replacement: replacement)
    }

    /// What an updater's pass through the interceptors comes to, and its outcome for the trace.
    @inlinable
    final func chainResult(
        _ updater: any AnyStateUpdater, thrown: (any Error)?, nextCalled: Bool, applied: Bool, replacement: (any Dispatchable)?
    ) -> (LaneResult, DispatchOutcome) {
        if let thrown {
            if applied {
                let failure = InterceptorFailure(error: thrown, item: "\(type(of: updater))")
                return (.done(KatanaError.appliedButInterceptorThrew(failure)), .appliedWithError)
            }
            return (.done(thrown), nextCalled ? .error : .blocked)
        }
        guard nextCalled else { return (.done(nil), .blocked) }
        guard let replacement else { return (.done(nil), .ok) }
        if let sideEffect = replacement._katanaSideEffect, replacement._katanaStateUpdater == nil {
            return (.replacedBySideEffect(sideEffect), .ok)
        }
        return (.done(KatanaError.notDispatchable("\(type(of: replacement))")), .error)
    }

    /// The end of the interceptor chain.
    @usableFromInline
    final func interceptedNext(_ item: any Dispatchable) throws {
        if let frame = InterceptionFrames.current(for: ObjectIdentifier(self)), !frame.pointee.nextCalled {
            frame.pointee.nextCalled = true
            if frame.pointee.kind == .stateUpdater, let updater = item._katanaStateUpdater, item._katanaSideEffect == nil {
                do {
                    if let applyUpdater = frame.pointee.applyUpdater {
                        try applyUpdater(self, updater, frame.pointee.recordChanges)
                    } else {
                        try apply(updater, recordChanges: frame.pointee.recordChanges)
                    }
                } catch { throw KatanaError.surfaced(error) }
                frame.pointee.applied = true
            } else {
                frame.pointee.replacement = item
            }
            return
        }
        // A second call, or one made after the handler returned: dispatch anew, past the interceptors.
        _ = anyDispatch(item, parentID: 0, bypassInterceptors: true)
    }
}

/// Composes Katana's interceptors into one chain whose last `next` ends an inline run through `end`, or else calls
/// `elsewhere`. Generic over the chain's result on purpose: the interceptors arrive in an array, which holds function
/// values in their most general form (a result returned indirectly), and code that names their concrete type wraps
/// each one taken out of it (and each `next` passed into it) in a re-abstraction thunk — two more calls per link on
/// every dispatch. A function returning `R` has that form already: every link stays as the array holds it, and the
/// last `next`, made here, is made in that form too (made by the caller, it was wrapped once going in).
@usableFromInline
func composeChain<Context, R: Sendable>(
    _ interceptors: [@Sendable (Context) -> @Sendable (@escaping @Sendable (any Dispatchable) throws -> R)
                        -> @Sendable (any Dispatchable) throws -> R],
    context: Context, end: ClosureChainEnd, done: R,
    elsewhere: @escaping @Sendable (any Dispatchable) throws -> Void
) -> ClosureChain<@Sendable (any Dispatchable) throws -> R> {
    let last: @Sendable (any Dispatchable) throws -> R = { item in
        if try end.handle(item) { return done }
        try elsewhere(item)
        return done
    }
    let handlers = interceptors.map { $0(context) }
    var next = last
    for handler in handlers.reversed() { next = handler(next) }
    return ClosureChain(next)
}
