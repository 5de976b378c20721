import Dispatch
import Foundation
@testable import Katana
import KatanaTestSupport
import Synchronization
import Testing

/// The store's one lock (`Lock`: a compare-and-swap on a futex word, then sleeping on it), in its adaptive form (spinning
/// first), its plain one, and as the state's (`LockedState`, adaptive, with the value it guards); and its condition,
/// the flood policy's wait for room.
@Suite struct LockTests {
    enum Kind: CaseIterable, Sendable { case adaptive, plain, state }

    /// One lock of a kind, as the calls the tests make.
    struct Tested: @unchecked Sendable {
        let lock: () -> Void
        let unlock: () -> Void
        let tryLock: () -> Bool

        init(_ kind: Kind) {
            switch kind {
            case .adaptive, .plain:
                let lock = Lock(adaptive: kind == .adaptive)
                (self.lock, unlock, tryLock) = (lock.lock, lock.unlock, lock.tryLock)
            case .state:
                let lock = LockedState<CounterState>()
                (self.lock, unlock, tryLock) = (lock.lock, lock.unlock, lock.tryLock)
            }
        }
    }

    /// A counter only ever changed under its lock.
    final class Counted: @unchecked Sendable {
        let lock: Tested
        var value = 0  // guarded by `lock`
        /// Threads inside the lock right now, and how often one found another there.
        let inside = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        init(_ kind: Kind) { lock = Tested(kind) }
    }

    @Test(arguments: Kind.allCases)
    func threadsTakingTheLockAtOnceNeverOverlap(kind: Kind) async {
        let counted = Counted(kind)
        let threads = 4, perThread = 50_000
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<threads {
                group.addTask {
                    await onThread {
                        for _ in 0..<perThread {
                            counted.lock.lock()
                            if counted.inside.add(1, ordering: .relaxed).newValue != 1 {
                                counted.overlaps.add(1, ordering: .relaxed)
                            }
                            counted.value &+= 1
                            counted.inside.subtract(1, ordering: .relaxed)
                            counted.lock.unlock()
                        }
                    }
                }
            }
        }
        #expect(counted.overlaps.load(ordering: .relaxed) == 0)
        counted.lock.lock()
        #expect(counted.value == threads * perThread)
        counted.lock.unlock()
    }

    /// A holder that keeps the lock far longer than the adaptive lock spins: the waiter goes to sleep on the lock's
    /// word and gets the lock only once the holder gave it back.
    @Test(arguments: Kind.allCases)
    func aWaiterGetsTheLockOnlyWhenItsHolderGivesItBack(kind: Kind) async {
        final class Flags: Sendable {
            let releasing = Atomic<Bool>(false)
            /// -1 until the waiter got the lock; then whether the holder had started giving it back.
            let sawRelease = Atomic<Int>(-1)
        }
        let lock = Tested(kind)
        let flags = Flags()
        let waiterIn = DispatchSemaphore(value: 0)
        lock.lock()
        Thread {
            waiterIn.signal()
            lock.lock()
            flags.sawRelease.store(flags.releasing.load(ordering: .acquiring) ? 1 : 0, ordering: .releasing)
            lock.unlock()
        }.start()
        await onThread {
            waiterIn.wait()
            usleep(50_000)  // ~1,000 times the adaptive lock's spin
        }
        #expect(flags.sawRelease.load(ordering: .acquiring) == -1, "the waiter got in while the lock was held")
        flags.releasing.store(true, ordering: .releasing)
        lock.unlock()
        await onThread { while flags.sawRelease.load(ordering: .acquiring) == -1 { usleep(1_000) } }
        #expect(flags.sawRelease.load(ordering: .acquiring) == 1)
    }

    /// The state lock knows its holder: what a read of the state from inside an updater the store is applying asks
    /// (instead of deadlocking), and what no other thread may take meanwhile.
    @Test func theStateLockKnowsWhichThreadHoldsIt() async {
        let state = LockedState<CounterState>()
        #expect(!state.isHeldByThisThread)
        state.lock()
        #expect(state.isHeldByThisThread)
        let elsewhere = await onThread { (held: state.isHeldByThisThread, took: state.tryLock()) }
        #expect(!elsewhere.held)
        #expect(!elsewhere.took)
        state.unlock()
        #expect(!state.isHeldByThisThread)
        #expect(await onThread {
            guard state.tryLock() else { return false }
            state.unlock()
            return true
        })
    }

    /// A waiter on the condition gives the lock up while it sleeps, and a broadcast made with the lock held wakes it:
    /// it returns `true` (woken, not timed out), holding the lock again.
    @Test func aBroadcastWakesAWaiterThatGaveTheLockUp() async {
        let lock = Lock(adaptive: true)
        let room = Lock.Condition(lock)
        final class Seen: Sendable {
            let woken = Atomic<Int>(-1)  // -1 until the wait returned; then whether it said woken
            let heldAfter = Atomic<Bool>(false)
        }
        let seen = Seen()
        let waiting = DispatchSemaphore(value: 0)
        Thread {
            lock.lock()
            waiting.signal()
            let woken = room.wait(nanoseconds: 30_000_000_000)
            seen.heldAfter.store(lock.isHeldByThisThread, ordering: .relaxed)
            lock.unlock()
            seen.woken.store(woken ? 1 : 0, ordering: .releasing)
        }.start()
        await onThread {
            waiting.wait()
            // The waiter is in `wait` once it gave the lock up: taking it here proves the lock is free meanwhile.
            lock.lock()
            room.broadcast()
            lock.unlock()
            while seen.woken.load(ordering: .acquiring) == -1 { usleep(1_000) }
        }
        let (woken, heldAfter) = (seen.woken.load(ordering: .acquiring), seen.heldAfter.load(ordering: .relaxed))
        #expect(woken == 1, "the broadcast did not wake the waiter")
        #expect(heldAfter, "the waiter returned without the lock")
    }

    /// With no broadcast, the wait ends when its time runs out — not before, not never — and says so (`false`: the
    /// flood policy then counts the lane as stalled), holding the lock again.
    @Test func aWaitWithNoBroadcastEndsWhenItsTimeRunsOut() async {
        let lock = Lock()
        let room = Lock.Condition(lock)
        let result = await onThread { () -> (woken: Bool, held: Bool, waited: UInt64) in
            lock.lock()
            let start = DispatchTime.now().uptimeNanoseconds
            let woken = room.wait(nanoseconds: 50_000_000)
            let waited = DispatchTime.now().uptimeNanoseconds - start
            let held = lock.isHeldByThisThread
            lock.unlock()
            return (woken, held, waited)
        }
        #expect(!result.woken)
        #expect(result.held)
        #expect(result.waited >= 50_000_000, "the wait ended after \(result.waited) ns, before its time ran out")
    }
}
