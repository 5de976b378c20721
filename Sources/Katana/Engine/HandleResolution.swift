import Dispatch
import CKatanaTraceProvider
import KatanaTrace
import Synchronization

// Resolving the handles of what the lane's holder applied, under one acquisition of the completion lock, and reusing
// the cells of fire-and-forget dispatches.
extension StoreEngine {
    /// Resolves what the lane's holder applied, under one acquisition of the completion lock (after the changes were
    /// delivered): the updaters that threw or were stopped (`finished`), and the cells still in `drainBuffer` (a batch
    /// applied without interceptors) as applied. First, the cells of updaters resolved one batch earlier whose handles
    /// are gone (the lane's reference is the only one left: a fire-and-forget dispatch) are reset and kept for new
    /// queued updaters, in `spareCells`: a queued updater then costs no allocation, and under contention a cell's
    /// memory is not freed on one core and allocated on the other. Checked one batch late and with `completionLock`
    /// held, so every read a handle made of its cell (under that lock) is ordered before the reset.
    @inlinable
    final func resolveBatch() {
        guard !finished.isEmpty || !drainBuffer.isEmpty || !recyclable.isEmpty else { return }
        completionLock.lock()
        while var cell = recyclable.popLast() {
            guard spareCells.count < spareCellLimit, isKnownUniquelyReferenced(&cell) else { continue }
            cell.resetLocked()
            spareCells.append(cell)
        }
        for item in finished { resolveUpdaterLocked(item.cell, error: item.error) }
        for index in drainBuffer.indices {
            guard let cell = drainBuffer[index].cell.take() else { continue }
            // As `resolveUpdaterLocked` resolves an applied one, written out: this loop runs for every queued updater.
            cell.resolveLocked()
            if cell.acceptsVoid { recyclable.append(cell) }
        }
        completionLock.unlock()
        if !finished.isEmpty { finished.removeAll(keepingCapacity: true) }
        if !drainBuffer.isEmpty { drainBuffer.removeAll(keepingCapacity: true) }
    }

    @inlinable
    final func finish(_ item: LaneItem, _ result: LaneResult) {
        guard let cell = item.cell else { return }
        switch result {
        case .skipped: break
        case let .done(error): finished.append(FinishedUpdater(cell: cell, error: error))
        case let .replacedBySideEffect(sideEffect): launchSideEffect(sideEffect, cell: cell, parentID: item.parentID)
        }
    }

    /// Resolves a queued updater's cell: with what it threw (surfaced as a ``KatanaError``), or as applied.
    /// `completionLock` held; called by the lane holder.
    @inlinable @inline(__always)
    final func resolveUpdaterLocked(_ cell: HandleCell, error: (any Error)?) {
        if let error {
            cell.resolveLocked(.failure(KatanaError.surfaced(error)))
        } else {
            // Resolved with `()`, and offered for reuse when it accepts `()` (`resolveBatch` checks it one batch later).
            cell.resolveLocked()
            if cell.acceptsVoid { recyclable.append(cell) }
        }
    }
}
