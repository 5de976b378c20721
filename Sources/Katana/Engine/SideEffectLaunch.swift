import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Dispatching a side effect: holding it before the store is ready, starting its task, and running its interceptors
// on that task before the body.
extension StoreEngine {
    /// Every side effect's dispatch (``Store``'s, a context's, an erased one): its cell and trace identity, then its
    /// task started at once — or, before the store is ready, kept until it is.
    @inlinable
    final func enqueueSideEffect<V: Sendable>(
        _ sideEffect: any AnySideEffect, type: Any.Type, parentID: UInt64, as: V.Type, bypassInterceptors: Bool = false
    ) -> DispatchHandle<V> {
        let cell = HandleCell(lock: completionLock, for: V.self)
        let (id, name) = traceIdentity(of: type)
        let item = SideEffectItem(sideEffect: sideEffect, cell: cell, id: id, parentID: parentID, name: name,
                                  bypass: bypassInterceptors, discardsValue: V.self == Void.self)
        if id == 0, readyForSideEffects.load(ordering: .acquiring) {
            start(item)
        } else {
            enqueueTracedOrEarly(item)
        }
        return DispatchHandle(cell)
    }

    /// `enqueueSideEffect`'s other cases, out of line: a traced side effect (its enqueue traced under `laneLock`,
    /// with the lane's depth) or one dispatched before the store is ready (kept until it is). Written inline, they
    /// made the common case too large for the compiler to inline it into its caller with the task's creation, two
    /// calls more per side effect, `Task.init` unspecialised among them (the callgrind gate's `side_effect_round_trip`).
    @usableFromInline @inline(never)
    final func enqueueTracedOrEarly(_ item: SideEffectItem) {
        laneLock.lock()
        if lane.beforeReady {
            if item.id != 0 { traceEnqueue(item, route: .keptUntilReady, depth: lane.earlyItems?.count ?? 0) }
            lane.keepUntilReady(.sideEffect(item))
            laneLock.unlock()
            return
        }
        if item.id != 0 { traceEnqueue(item, route: .sideEffectPool, depth: lane.pending.count) }
        laneLock.unlock()
        start(item)
    }

    /// Starts a side effect that an interceptor put in place of a state updater.
    @inlinable
    final func launchSideEffect(_ sideEffect: any AnySideEffect, cell: HandleCell, parentID: UInt64) {
        let (id, name) = traceIdentity(of: type(of: sideEffect))
        let item = SideEffectItem(sideEffect: sideEffect, cell: cell, id: id, parentID: parentID, name: name, bypass: true)
        if id != 0 { traceEnqueue(item, route: .sideEffectPool, depth: 0) }
        start(item)
    }

    /// Runs the interceptors for a side effect, on its task, before its body. Only for a side effect that has
    /// interceptors to run: one without (none configured, or it bypasses them) is run by `SideEffectRunner.run`
    /// without reaching the store.
    @usableFromInline
    final func intercept(_ item: SideEffectItem) -> SideEffectStep {
        assert(intercepting && !item.bypass, "begin runs a side effect without interceptors itself")
        var (thrown, end) = runSideEffectChain(item.sideEffect)
        let toRun = end.takeReplacement()
        if let thrown { return .done(.blocked, .failure(thrown)) }
        guard let toRun else {
            if item.cell.acceptsVoid { return .done(.blocked, .success(())) }
            return .done(.blocked, .failure(KatanaError.returningSideEffectNotExecuted("\(type(of: item.sideEffect))")))
        }
        switch ItemKind(of: toRun) {
        case let .sideEffect(sideEffect):
            return .body(sideEffect)
        case let .stateUpdater(updater):
            // An interceptor forwarded a state updater instead: it goes down the lane, and this handle resolves
            // when it has been applied.
            let (id, name) = traceIdentity(of: type(of: updater))
            enqueueExisting(LaneItem(updater: updater, cell: item.cell, id: id, parentID: item.parentID, name: name, bypass: true,
                                      slot: LaneQueue.noSlot),
                            ignoringReadiness: true, alreadyTraced: false)
            return .done(.ok, nil)
        case .ambiguous, .neither:
            return .done(.error, .failure(KatanaError.notDispatchable("\(type(of: toRun))")))
        }
    }
}
