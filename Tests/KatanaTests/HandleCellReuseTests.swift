import Testing
@testable import Katana

/// A queued updater's handle cell is reused for a later queued updater once nobody can see it any more (its handle
/// was dropped). These tests hold the lane so dispatches queue, and check that reuse never reaches a cell a handle
/// still refers to, and that a reused cell behaves as a new one.
@Suite struct HandleCellReuseTests {
    /// The cell behind a pending handle (nil: resolved at dispatch).
    static func cell<V>(_ handle: DispatchHandle<V>) -> ObjectIdentifier? {
        if case let .pending(cell) = handle.storage { ObjectIdentifier(cell) } else { nil }
    }

    /// Queues `values` behind a held lane, keeping the handles `keep` selects; returns them and the identities of
    /// every cell. All of them are applied when this returns.
    static func round(_ store: TestStore, _ values: Range<Int>, keep: (Int) -> Bool)
        async throws -> (kept: [DispatchHandle<Void>], keptCells: Set<ObjectIdentifier>, droppedCells: Set<ObjectIdentifier>)
    {
        let hold = await LaneHold.start(store, appending: -1)
        var kept: [DispatchHandle<Void>] = [], keptCells = Set<ObjectIdentifier>(), droppedCells = Set<ObjectIdentifier>()
        for value in values {
            let handle = store.dispatch(Append(value: value))
            let cell = try #require(Self.cell(handle), "an updater queued behind a held lane has a pending handle")
            if keep(value) {
                kept.append(handle)
                keptCells.insert(cell)
            } else {
                droppedCells.insert(cell)
            }
        }
        let last = store.dispatch(Append(value: -2))  // the lane is FIFO: when this one is applied, all are
        await hold.release()
        try await last.value
        return (kept, keptCells, droppedCells)
    }

    @Test func aCellWhoseHandleIsKeptIsNeverReusedAndCancellingItLaterTouchesNothing() async throws {
        let store = makeStore()
        let first = try await Self.round(store, 0..<300, keep: { $0 % 3 == 0 })
        let spares = store.engine.laneLock.withLock { store.engine.lane.spareCells.count + store.engine.spareCells.count }
        #expect(spares > 0, "dropped handles' cells are kept for reuse")

        let hold = await LaneHold.start(store, appending: -1)
        var second: [DispatchHandle<Void>] = []
        var secondCells = Set<ObjectIdentifier>()
        for value in 1_000..<1_300 {
            let handle = store.dispatch(Append(value: value))
            second.append(handle)
            if let cell = Self.cell(handle) { secondCells.insert(cell) }
        }
        let reusedWhileKept = secondCells.intersection(first.keptCells).count
        let reused = secondCells.intersection(first.droppedCells).count
        #expect(reusedWhileKept == 0, "cells reused while a handle still referred to them")
        #expect(reused > 0, "no cell was reused")
        // Cancelling an applied item is a no-op; were its cell reused, this would cancel a queued item of round two.
        for handle in first.kept { handle.cancel() }
        await hold.release()
        let outcome = await within(seconds: 120) { [second, kept = first.kept] in
            for handle in second { try await handle.value }
            for handle in kept { try await handle.value }
        }
        let resolved = outcome.finished && outcome.error == nil
        #expect(resolved, "every handle resolves: \(outcome)")
        #expect(first.kept.allSatisfy { $0.isResolved })
        let log = store.state.log.filter { $0 >= 0 }
        #expect(log == Array(0..<300) + Array(1_000..<1_300))
    }

    /// A reused cell hands its next waiters the `()` its previous item left in it (`HandleCell.resolveLocked()`), so
    /// a cell resolved with an error must never be reused: here every refused updater's handle is dropped, and no
    /// later updater's handle may see their error. (Told by the outcomes, not by the cells' identities: a cell freed
    /// is often allocated again at the same address.)
    @Test func aRefusedUpdatersCellIsNeverReusedSoNoLaterHandleSeesItsError() async throws {
        let store = makeStore()
        let hold = await LaneHold.start(store, appending: -1)
        for _ in 0..<300 {
            let handle = store.dispatch(Withdraw(amount: 1))  // the counter is 0: every one is refused
            #expect(Self.cell(handle) != nil, "queued behind a held lane: a pending handle")
        }
        let last = store.dispatch(Append(value: -2))
        await hold.release()
        try await last.value
        #expect(store.state.counter == 0)

        let second = try await Self.round(store, 1_000..<1_300, keep: { _ in true })
        let outcome = await within(seconds: 120) { [kept = second.kept] in
            for handle in kept { try await handle.value }
        }
        #expect(outcome.finished && outcome.error == nil, "every later handle resolves with success: \(outcome)")
    }

    @Test func aReusedCellWaitsResolvesAndCancelsAsANewOneDoes() async throws {
        let store = makeStore()
        let first = try await Self.round(store, 0..<300, keep: { _ in false })

        let hold = await LaneHold.start(store, appending: -1)
        var handles: [DispatchHandle<Void>] = []
        for value in 1_000..<1_100 { handles.append(store.dispatch(Append(value: value))) }
        let reused = handles.indices.filter { Self.cell(handles[$0]).map(first.droppedCells.contains) ?? false }
        #expect(!reused.isEmpty, "no cell was reused")
        #expect(handles.allSatisfy { !$0.isResolved }, "a reused cell reported its previous item's completion")
        let cancelled = Set(reused.prefix(10))
        for index in cancelled { handles[index].cancel() }
        let waiter = Task { [handles] in try await handles[reused.last!].value }  // waits on a reused cell
        await hold.release()
        for (index, handle) in handles.enumerated() {
            let result = await handle.result
            if cancelled.contains(index) {
                #expect(throws: CancellationError.self) { try result.get() }
            } else {
                #expect(throws: Never.self) { try result.get() }
            }
        }
        if cancelled.contains(reused.last!) {
            await #expect(throws: CancellationError.self) { try await waiter.value }
        } else {
            try await waiter.value
        }
        let expected = (1_000..<1_100).enumerated().filter { !cancelled.contains($0.offset) }.map(\.element)
        #expect(store.state.log.filter { $0 >= 1_000 } == expected)
    }
}
