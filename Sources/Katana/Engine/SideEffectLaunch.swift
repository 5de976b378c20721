import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Dispatching a side effect: holding it before the store is ready, starting its task, and running its interceptors
// on that task before the body.
extension PartialStore {
    @inlinable
    final func enqueueSideEffect<V: Sendable>(
        _ sideEffect: any AnySideEffect, type: Any.Type, parentID: UInt64, as: V.Type, bypassInterceptors: Bool
    ) -> DispatchHandle<V> {
        let cell = makeCell(for: V.self)
        let (id, name) = traceIdentity(of: type)
        let item = SideEffectItem(sideEffect: sideEffect, cell: cell, id: id, parentID: parentID, name: name,
                                  bypass: bypassInterceptors, discardsValue: V.self == Void.self)
        if id == 0, readyForSideEffects.load(ordering: .acquiring) {
            start(item)
            return DispatchHandle(cell)
        }
        laneLock.lock()
        if lane.isHeld {
            if id != 0 { traceEnqueue(item, lane: .held, depth: lane.held?.count ?? 0) }
            lane.hold(.sideEffect(item))
            laneLock.unlock()
            return DispatchHandle(cell)
        }
        if id != 0 { traceEnqueue(item, lane: .sideEffectPool, depth: lane.pending.count) }
        laneLock.unlock()
        start(item)
        return DispatchHandle(cell)
    }

    @inlinable
    final func traceEnqueue(_ item: SideEffectItem, lane: DispatchLane, depth: Int) {
        tracer.dispatchEnqueue(DispatchEnqueueEvent(
            id: item.id, parentID: item.parentID, kind: .sideEffect, name: item.name!, lane: lane,
            queueDepth: UInt32(clamping: depth)))
    }

    /// Starts a side effect that an interceptor put in place of a state updater.
    @inlinable
    final func launchSideEffect(_ sideEffect: any AnySideEffect, cell: HandleCell, parentID: UInt64) {
        let (id, name) = traceIdentity(of: type(of: sideEffect))
        let item = SideEffectItem(sideEffect: sideEffect, cell: cell, id: id, parentID: parentID, name: name, bypass: true)
        if id != 0 { traceEnqueue(item, lane: .sideEffectPool, depth: 0) }
        start(item)
    }

    /// Runs the interceptors for a side effect, on its task, before its body. Only for a side effect that has
    /// interceptors to run: one without (none configured, or it bypasses them) gets its context from the registry in
    /// `SideEffectRunner.prepare`, without reaching the store.
    @usableFromInline
    final func intercept(_ item: SideEffectItem) -> SideEffectStep {
        assert(intercepting && !item.bypass, "prepare runs a side effect without interceptors itself")
        let context = makeContext(scope: item.cell)
        var thrown: (any Error)?
        var nextCalled = false
        var replacement: (any Dispatchable)?
        if let chain {
            var frame = InterceptionFrame(store: ObjectIdentifier(self), kind: .sideEffect, recordChanges: false)
            thrown = InterceptionFrames.with(&frame) {
                do {
                    try runLinks(item.sideEffect, from: 0) { try chain($0) }
                    return nil
                } catch {
                    return error
                }
            }
            (nextCalled, replacement) = (frame.nextCalled, frame.replacement)
        } else {
            do {
                try runLinks(item.sideEffect, from: 0) { forwarded in
                    guard !nextCalled else {
                        _ = anyDispatch(forwarded, parentID: 0, bypassInterceptors: true)
                        return
                    }
                    nextCalled = true
                    replacement = forwarded
                }
            } catch {
                thrown = error
            }
        }
        if let thrown { return .done(.blocked, .failure(thrown)) }
        guard nextCalled, let toRun = replacement else {
            if item.cell.acceptsVoid { return .done(.blocked, .success(())) }
            return .done(.blocked, .failure(KatanaError.returningSideEffectNotExecuted("\(type(of: item.sideEffect))")))
        }
        if let sideEffect = toRun._katanaSideEffect, toRun._katanaStateUpdater == nil {
            return .body(sideEffect, context)
        }
        if let updater = toRun._katanaStateUpdater, toRun._katanaSideEffect == nil {
            // An interceptor forwarded a state updater instead: it goes down the lane, and this handle resolves
            // when it has been applied.
            let (id, name) = traceIdentity(of: type(of: updater))
            enqueueExisting(LaneItem(updater: updater, cell: item.cell, id: id, parentID: item.parentID, name: name, bypass: true),
                            ignoringHeld: true, alreadyTraced: false)
            return .done(.ok, nil)
        }
        return .done(.error, .failure(KatanaError.notDispatchable("\(type(of: toRun))")))
    }
}
