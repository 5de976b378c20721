import Dispatch
import Foundation
@testable import Katana
import KatanaTestSupport
import Synchronization
import Testing

/// The store's locks: `Lock` in its adaptive form (a try-lock, spinning, then sleeping) and its plain one, and the
/// state's own futex lock (`LockedState`: a compare-and-swap, spinning, then sleeping on the word).
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

    /// A holder that keeps the lock far longer than the adaptive lock spins: the waiter goes to sleep (in the mutex,
    /// or on the state lock's word) and gets the lock only once the holder gave it back.
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
}
