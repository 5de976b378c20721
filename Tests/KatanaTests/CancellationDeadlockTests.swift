import Dispatch
import Foundation
@testable import Katana
import KatanaTestSupport
import Synchronization
import Testing

/// Cancelling side effects while they finish, from threads that are not the pool's, must never block: a cancelled
/// task runs its cancellation handlers under its own status lock, and a handle's waiter has a cancellation handler
/// that needs the store's completion lock, under which the store resumes waiting tasks; the handler therefore never
/// waits for that lock (`HandleCell.stopWaiting`), and tasks are cancelled outside it (the Side effects and
/// cancellation article, lock order). Each scenario runs under a `Watchdog`: a deadlock
/// here takes the cooperative pool, and with it every `Task`-based timeout.
@Suite struct CancellationDeadlockTests {
    /// Where a parent publishes its child's handle, so that another thread can cancel the child.
    final class ChildSlot: @unchecked Sendable {
        // `handle` is guarded by `lock`.
        private let lock = NSLock()
        private var handle: DispatchHandle<Void>?
        private var childStarted = false
        func set(_ value: DispatchHandle<Void>) { lock.withLock { handle = value } }
        var value: DispatchHandle<Void>? { lock.withLock { handle } }
        /// The child's body is running (asleep, its task cancellable).
        func markStarted() { lock.withLock { childStarted = true } }
        var started: Bool { lock.withLock { childStarted } }
    }

    /// Sleeps an hour unless cancelled.
    struct SleepingChild: SideEffect {
        let slot: ChildSlot
        func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
            slot.markStarted()
            try await Task.sleep(nanoseconds: 3_600 * 1_000_000_000)
        }
    }

    /// Dispatches a sleeping child, publishes its handle and awaits it: the parent is suspended in the handle's
    /// wait (with its cancellation handler installed) when the child ends.
    struct AwaitingParent: SideEffect {
        let slot: ChildSlot
        func sideEffect(_ context: SideEffectContext<CounterState, EmptySideEffectDependencyContainer>) async throws {
            let child = context.dispatch(SleepingChild(slot: slot))
            slot.set(child)
            try await child.value
        }
    }

    /// Waits on this (plain) thread until `parent` has published its child; spins, then naps.
    static func child(of slot: ChildSlot) -> DispatchHandle<Void> {
        var spins = 0
        while true {
            if let child = slot.value { return child }
            spins += 1
            if spins > 1_000 { usleep(100) }
        }
    }

    // Issue #36 row 1: cancelling the child (which then finishes and resumes its waiting parent under the completion
    // lock) and then the parent (whose cancellation handler took that lock under the parent's status lock) deadlocked
    // after a few dozen pairs.
    @Test func cancellingChildThenParentFromAThreadNeverBlocks() async throws {
        try await cancelPairs(count: 1_000, threads: 1, order: .childFirst)
    }

    @Test func cancellingParentThenChildFromAThreadNeverBlocks() async throws {
        try await cancelPairs(count: 1_000, threads: 1, order: .parentFirst)
    }

    /// Several threads, each cancelling its own share of pairs in an order of its own, while children finish.
    @Test func cancellingPairsInEveryOrderFromSeveralThreadsNeverBlocks() async throws {
        try await cancelPairs(count: 1_200, threads: 3, order: .mixed)
    }

    /// Busy-waits (a sleep would be far longer than the window the pause aims at).
    static func spin(nanoseconds: UInt64) {
        let end = DispatchTime.now().uptimeNanoseconds + nanoseconds
        while DispatchTime.now().uptimeNanoseconds < end {}
    }

    enum Order: Sendable { case childFirst, parentFirst, mixed }

    func cancelPairs(count: Int, threads: Int, order: Order) async throws {
        let store = makeStore()
        let watchdog = Watchdog("cancelling \(count) parent/child pairs (\(order)) from \(threads) thread(s)")
        defer { watchdog.stop() }
        let slots = (0..<count).map { _ in ChildSlot() }
        let parents = slots.map { store.dispatch(AwaitingParent(slot: $0)) }
        // Every child asleep, so every parent is suspended awaiting it (it awaits right after publishing the handle).
        let asleep = await onThread {
            var waited = 0
            while slots.contains(where: { !$0.started }) && waited < 120_000 { usleep(1_000); waited += 1 }
            usleep(20_000)
            return slots.count(where: { $0.started })
        }
        #expect(asleep == count)
        let cancelled = Counter()
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<threads {
                group.addTask {
                    await onThread {
                        for index in stride(from: worker, to: count, by: threads) {
                            let child = Self.child(of: slots[index])
                            let childFirst = switch order {
                            case .childFirst: true
                            case .parentFirst: false
                            case .mixed: (index / threads + worker).isMultiple(of: 2)
                            }
                            // A pause between the two calls that sweeps 0-40 µs: the child ends (and resumes its
                            // parent) some microseconds after its cancellation, and the parent's cancellation must
                            // meet that moment for the inversion to show.
                            let pause = UInt64(index % 400) * 100
                            if childFirst {
                                child.cancel()
                                Self.spin(nanoseconds: pause)
                                parents[index].cancel()
                            } else {
                                parents[index].cancel()
                                Self.spin(nanoseconds: pause)
                                child.cancel()
                            }
                            cancelled.increment()
                            watchdog.progress(at: index)
                        }
                    }
                }
            }
        }
        #expect(cancelled.value == count)
        // Every parent resolves (cancelled), and nothing is left running; checked from a plain thread, under the
        // watchdog: a frozen pool would stop these reads too.
        let resolved = await onThread {
            var resolved = 0
            for (index, parent) in parents.enumerated() {
                while !parent.isResolved { usleep(200) }
                resolved += 1
                watchdog.progress(at: index)
            }
            return resolved
        }
        #expect(resolved == count)
        for parent in parents.prefix(20) {
            let outcome = await within(seconds: 120) { try await parent.value }
            #expect(outcome.error is CancellationError, "\(outcome)")
        }
        #expect(await eventually(seconds: 120) { store.sideEffectsRunning == 0 })
    }

    /// Holds a store so that its last reference can be dropped on a chosen thread.
    final class StoreBox: @unchecked Sendable {
        // `store` is guarded by `lock`.
        private let lock = NSLock()
        private var store: TestStore?
        init(watched store: TestStore, by watcher: WeakBox<TestStore>) {
            watcher.object = store
            self.store = store
        }
        func dispatch(_ item: AwaitingParent) -> DispatchHandle<Void> { lock.withLock { store! }.dispatch(item) }
        /// Drops the box's reference (the last one, so the store deinitialises here).
        func release() {
            let last = lock.withLock { () -> TestStore? in
                defer { store = nil }
                return store
            }
            _ = last
        }
    }

    // Issue #36 row 2: releasing a store cancels every running side effect from `deinit`; with parents awaiting
    // children that the same release cancels, the release itself never returned about one round in thirty.
    @Test func releasingAStoreWithParentsAwaitingChildrenNeverBlocks() async throws {
        let watchdog = Watchdog("releasing stores with side effects awaiting their children")
        defer { watchdog.stop() }
        let passThrough: StoreInterceptor = { _ in { next in { item in try next(item) } } }
        for round in 0..<50 {
            let watcher = WeakBox<TestStore>()
            let box = StoreBox(watched: makeStore(interceptors: [passThrough]), by: watcher)
            let slots = (0..<200).map { _ in ChildSlot() }
            let parents = slots.map { box.dispatch(AwaitingParent(slot: $0)) }
            // Most children asleep, a few still starting: the release cancels both kinds, and their parents.
            // Each child that starts is progress: what the watchdog times is the release, not a pool that other
            // tests keep busy.
            let published = await onThread {
                var (waited, seen) = (0, 0)
                while seen < 150 && waited < 120_000 {
                    usleep(1_000)
                    waited += 1
                    let now = slots.count(where: { $0.value != nil })
                    if now > seen { (seen, waited) = (now, 0); watchdog.progress() }
                }
                return slots.count(where: { $0.value != nil })
            }
            #expect(published >= 150, "round \(round)")
            // The release, and then every handle's resolution, on a plain thread under the watchdog.
            let resolved = await onThread {
                box.release()
                watchdog.progress(at: round)
                for parent in parents { while !parent.isResolved { usleep(200) } }
                watchdog.progress(at: round)
                return parents.count
            }
            #expect(resolved == parents.count)
            #expect(await eventually(seconds: 120) { watcher.object == nil }, "round \(round): the store stayed alive")
        }
    }
}
