import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Becoming ready: the initial state, the interceptors bound to the store, and the items kept until then, in order.
extension StoreEngine {
    /// Sets the initial state, initialises the interceptors (which may dispatch, e.g. `.onStart` items) and runs
    /// every kept item in dispatch order. Items dispatched while this runs are kept too, so order is kept.
    final func becomeReady(initialState: S, interceptors: [StoreInterceptor], store: PartialStore<S>) {
        lockedState.withLock { lockedState.value = initialState }
        intercepting = !configuration.interceptors.isEmpty || !interceptors.isEmpty
        sideEffects.intercepts = intercepting
        inlinePlan = if tracesEverything || !listenersAreInline { .general }
                     else if intercepting { .intercepted }
                     else if tracesNothing { .plain } else { .plainUntraced }
        holderPlan = if !listenersAreInline { .batch } else if intercepting { .intercepted } else { .direct }
        // One context for the interceptors of both forms: the store's prototype, a `SideEffectContext` of its own types
        // with no side effect's scope, so Katana 6's `context as? SideEffectContext<S, D>` works on what they receive.
        let context: (any AnySideEffectContext)? = intercepting ? sideEffects.contextPrototype : nil
        // The chain's last `next`: the run in progress on this thread (its frame, which holds the store unretained:
        // no weak load) ends; a deferred call, or one from another thread, is dispatched anew through the store.
        let elsewhere: @Sendable (any Dispatchable) throws -> Void = { [weak store] item in
            guard let store else { throw KatanaError.storeReleased }
            store.engine.dispatchPastInterceptors(item)
        }
        let id = ObjectIdentifier(self)
        if let context, !interceptors.isEmpty {
            chain = Unmanaged.passRetained(composeChain(interceptors, context: context, store: id, done: (),
                                                        elsewhere: elsewhere))
        }
        if let context, !configuration.interceptors.isEmpty {
            let bound = configuration.interceptors.map { $0.bind(to: context) }
            // Composed from the last: each step's `next` is the one after it; the last one's, the closures.
            var next: StoreInterceptorChain = if let chain { { item in try chain(item) } }
                                              else { { item in try endChain(item, store: id, elsewhere: elsewhere) } }
            var composed: [InterceptorStep] = []
            for interceptor in bound.reversed() {
                let step = makeStep(interceptor, next: next)
                composed.append(step)
                next = step.call
            }
            let buffer = UnsafeMutableBufferPointer<Unmanaged<InterceptorStep>>.allocate(capacity: bound.count)
            _ = buffer.initialize(from: composed.reversed().map { Unmanaged.passRetained($0) })
            steps = buffer
            typedInterceptors = bound.prefix { $0 is any TypedDispatchInterceptor }.map { $0 as! any TypedDispatchInterceptor }
            runsTyped = !typedInterceptors.isEmpty && chain == nil
        }
        if tracer.isEnabled { tracer.storeReady(storeID: storeID, stateType: TraceName.of(S.self)) }
        initialized.store(true, ordering: .releasing)
        while true {
            laneLock.lock()
            let taken = lane.takeEarlyItems()
            if taken == nil { readyForSideEffects.store(true, ordering: .releasing) }
            laneLock.unlock()
            guard let items = taken else { return }
            for item in items {
                switch item {
                case let .updater(updater): enqueueExisting(updater, ignoringReadiness: true, alreadyTraced: true)
                case let .sideEffect(sideEffect): start(sideEffect)
                }
            }
        }
    }

    /// The store is going away: every item kept until readiness is rejected with `storeReleased` — or, when it was
    /// cancelled meanwhile, ends so in the trace — and its end is traced too (its enqueue was, as `held`).
    final func rejectEarlyItems() {
        for item in lane.earlyItems ?? [] {
            let cell: HandleCell? = switch item {
            case let .updater(updater): updater.cell
            case let .sideEffect(sideEffect): sideEffect.cell
            }
            let outcome: DispatchOutcome = cell?.isCancelled ?? false ? .cancelled : .error
            switch item {
            case let .updater(updater) where updater.id != 0:
                tracer.traceDropped(updater, route: .keptUntilReady, outcome: outcome, failure: KatanaError.storeReleased)
            case let .sideEffect(sideEffect) where sideEffect.id != 0:
                tracer.traceDropped(sideEffect, route: .keptUntilReady, outcome: outcome, failure: KatanaError.storeReleased)
            default:
                break
            }
            cell?.resolve(.failure(KatanaError.storeReleased))
        }
    }
}
