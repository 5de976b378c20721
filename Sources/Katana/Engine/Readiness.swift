import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Becoming ready: the initial state, the interceptors bound to the store, and the items held until then, in order.
extension PartialStore {
    /// Sets the initial state, initialises the interceptors (which may dispatch, e.g. `.onStart` items) and runs
    /// every held item in dispatch order. Items dispatched while this runs are held too, so order is kept.
    final func becomeReady(initialState: S, interceptors: [StoreInterceptor]) {
        stateLock.withLock { _state = initialState }
        intercepting = !configuration.interceptors.isEmpty || !interceptors.isEmpty
        sideEffects.intercepts = intercepting
        // One context for the interceptors of both forms.
        let context = intercepting ? makeContext(scope: nil) : nil
        if let context, !configuration.interceptors.isEmpty {
            let bound = configuration.interceptors.map { $0.bind(to: context) }
            let buffer = UnsafeMutableBufferPointer<Unmanaged<LinkBox>>.allocate(capacity: bound.count)
            _ = buffer.initialize(from: bound.map { Unmanaged.passRetained(LinkBox($0)) })
            links = buffer
            let typed = Array(bound.prefix { $0 is any TypedDispatchInterceptor })
            var list: TypedLink?
            for (index, link) in typed.enumerated().reversed() {
                let interceptor = link as! any TypedDispatchInterceptor
                list = makeTypedLink(interceptor, index: index, next: list, isLast: index == bound.count - 1)
            }
            firstTypedLink = list.map { Unmanaged.passRetained($0) }
        }
        if let context, !interceptors.isEmpty {
            // The chain's last `next`: an updater's inline run on this thread (no weak load, no thread-local lookup)
            // ends there; a side effect's or a queued item's interception (thread-local frame), or a deferred call,
            // goes through the store.
            let elsewhere: @Sendable (any Dispatchable) throws -> Void = { [weak self] item in
                guard let self else { throw KatanaError.storeReleased }
                try self.interceptedNext(item)
            }
            chain = Unmanaged.passRetained(composeChain(interceptors, context: context, end: closureEnd, done: (),
                                                        elsewhere: elsewhere))
        }
        if tracer.isEnabled { tracer.storeReady(storeID: storeID, stateType: TraceName.of(S.self)) }
        while true {
            laneLock.lock()
            let taken = lane.takeHeld()
            if taken == nil { readyForSideEffects.store(true, ordering: .releasing) }
            laneLock.unlock()
            guard let items = taken else { return }
            for item in items {
                switch item {
                case let .updater(updater): enqueueExisting(updater, ignoringHeld: true, alreadyTraced: true)
                case let .sideEffect(sideEffect): start(sideEffect)
                }
            }
        }
    }
}
