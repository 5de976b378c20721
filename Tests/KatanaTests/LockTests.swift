import Dispatch
import Foundation
@testable import Katana
import KatanaTestSupport
import Synchronization
import Testing

/// The store's `Lock`, in its adaptive form (a try-lock, spinning, then sleeping) and its plain one.
@Suite struct LockTests {
    /// A counter only ever changed under its lock.
    final class Counted: @unchecked Sendable {
        let lock: Lock
        var value = 0  // guarded by `lock`
        /// Threads inside the lock right now, and how often one found another there.
        let inside = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        init(adaptive: Bool) { lock = Lock(adaptive: adaptive) }
    }

    @Test(arguments: [true, false])
    func threadsTakingTheLockAtOnceNeverOverlap(adaptive: Bool) async {
        let counted = Counted(adaptive: adaptive)
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
        #expect(counted.lock.withLock { counted.value } == threads * perThread)
    }

    /// A holder that keeps the lock far longer than the adaptive lock spins: the waiter goes to sleep in the
    /// mutex and gets the lock only once the holder gave it back.
    @Test(arguments: [true, false])
    func aWaiterGetsTheLockOnlyWhenItsHolderGivesItBack(adaptive: Bool) async {
        final class Flags: Sendable {
            let releasing = Atomic<Bool>(false)
            /// -1 until the waiter got the lock; then whether the holder had started giving it back.
            let sawRelease = Atomic<Int>(-1)
        }
        let lock = Lock(adaptive: adaptive)
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
}
