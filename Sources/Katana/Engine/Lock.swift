import CKatanaTraceProvider
import Glibc
import Synchronization

/// The engine's lock: a futex word of its own, taken with one compare-and-swap and given back with one exchange; the
/// kernel is called only when another thread holds it — where `pthread_mutex_trylock` and `unlock` are calls into the
/// C library with more work of their own on every acquisition (the callgrind gate's `fire_and_forget`, whose state
/// lock this is too: ``LockedState``). Not `Synchronization.Mutex`: ThreadSanitizer on Linux does not see `Mutex`'s
/// lock and reports false races; Swift's atomics change this word, so TSan sees every acquisition and release
/// (`swift test --sanitize=thread`) and a report is always real.
@usableFromInline
class Lock: @unchecked Sendable {
    /// 0: free; 1: held; 2: held, and a thread may be asleep waiting for it (the holder wakes one as it gives it
    /// back). At an address that never moves (the kernel waits on it), alone in its cache line: a store's locks are
    /// allocated together, and two threads each taking a different one of them (a producer the lane's, the lane
    /// holder the state's) must not invalidate each other's line on every acquisition.
    @usableFromInline let word: UnsafeMutablePointer<Atomic<UInt32>>

    /// Bytes of one cache line on the machines we run on (x86-64, and 64 on most arm64 cores too).
    @usableFromInline static let cacheLine = 64

    /// Whether `lock()` spins before sleeping when another thread holds the lock (see `init(adaptive:)`).
    @usableFromInline let spins: Bool

    /// The thread holding the lock (0: none). Written by the holder only, so a thread reads its own id here only while
    /// it holds the lock, and a stale read is never its own id: ``isHeldByThisThread`` and the debug builds' checks
    /// need no ordering.
    @usableFromInline let holder = Atomic<UInt>(0)

    /// - Parameter adaptive: spin briefly before sleeping when another thread holds the lock, as glibc's
    ///   `PTHREAD_MUTEX_ADAPTIVE_NP` does. For locks held for a few dozen nanoseconds by many threads, where
    ///   sleeping in the kernel and waking up costs far more than the wait itself.
    @usableFromInline init(adaptive: Bool = false) {
        spins = adaptive
        word = Lock.allocateWord()
    }

    deinit { Lock.deallocateWord(word) }

    /// A futex word of 0, alone in its cache line, at an address that never moves (the kernel waits on it): the
    /// lock's and its condition's.
    @usableFromInline static func allocateWord() -> UnsafeMutablePointer<Atomic<UInt32>> {
        let word = UnsafeMutableRawPointer.allocate(byteCount: cacheLine, alignment: cacheLine)
            .bindMemory(to: Atomic<UInt32>.self, capacity: 1)
        word.initialize(to: Atomic(0))
        return word
    }

    @usableFromInline static func deallocateWord(_ word: UnsafeMutablePointer<Atomic<UInt32>>) {
        word.deinitialize(count: 1)
        UnsafeMutableRawPointer(word).deallocate()
    }

    @inlinable final func lock() {
        if !word.pointee.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged { lockContended() }
        holder.store(katana_thread_id(), ordering: .relaxed)
    }

    /// Another thread holds the lock: an adaptive lock tries again between pauses, up to `spinLimit` times (glibc's
    /// adaptive mutex spins up to 100); then it sleeps on the word until the holder gives it back.
    @usableFromInline @inline(never)
    final func lockContended() {
        if spins {
            for _ in 0..<Lock.spinLimit {
                katana_cpu_relax()
                if word.pointee.load(ordering: .relaxed) == 0,
                   word.pointee.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
                    return
                }
            }
        }
        // Marked 2 from here on, so whoever gives it back wakes a sleeper (perhaps none is left: a wake too many).
        while word.pointee.exchange(2, ordering: .acquiring) != 0 {
            katana_futex_wait(UnsafeMutableRawPointer(word), 2)
        }
    }

    @usableFromInline static let spinLimit = 100

    @inlinable final func unlock() {
        holder.store(0, ordering: .relaxed)
        if word.pointee.exchange(0, ordering: .releasing) == 2 { katana_futex_wake_one(UnsafeMutableRawPointer(word)) }
    }

    /// Takes the lock if it is free; `false` if another thread (or this one) holds it.
    @inlinable final func tryLock() -> Bool {
        guard word.pointee.compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged else { return false }
        holder.store(katana_thread_id(), ordering: .relaxed)
        return true
    }

    /// Whether this thread holds the lock.
    @inlinable final var isHeldByThisThread: Bool { holder.load(ordering: .relaxed) == katana_thread_id() }

    /// Debug builds: stops the program unless this thread holds the lock. For the `…Locked` functions, whose
    /// callers must hold it: the "guarded by" of a comment, checked. Release builds: nothing.
    @inlinable @inline(__always)
    final func assertHeldByThisThread(_ what: @autoclosure () -> String) {
        #if DEBUG
        precondition(holder.load(ordering: .relaxed) == katana_thread_id(), "lock not held: \(what())")
        #endif
    }

    /// Debug builds: stops the program if this thread holds the lock. For code that calls into what may take a lock
    /// of the Swift runtime's that is, elsewhere, held while this one is taken (the engine's lock order: the
    /// Threading contract article). Release builds: nothing.
    @inlinable @inline(__always)
    final func assertNotHeldByThisThread(_ what: @autoclosure () -> String) {
        #if DEBUG
        precondition(holder.load(ordering: .relaxed) != katana_thread_id(), "lock order: \(what())")
        #endif
    }

    /// A condition bound to this lock: wait with the lock held. A futex word of its own that every `broadcast`
    /// changes: a waiter reads it before giving the lock up, and the kernel puts it to sleep only if no broadcast
    /// changed it since — so a broadcast between the two (made with the lock held) is never missed
    /// (`LockTests.aBroadcastWakesAWaiterThatGaveTheLockUp`, `aWaitWithNoBroadcastEndsWhenItsTimeRunsOut`).
    @usableFromInline
    final class Condition: @unchecked Sendable {
        /// Counts broadcasts (wrapping). Alone in its cache line, at an address that never moves.
        @usableFromInline let sequence: UnsafeMutablePointer<Atomic<UInt32>>
        @usableFromInline let lock: Lock

        @usableFromInline init(_ lock: Lock) {
            self.lock = lock
            sequence = Lock.allocateWord()
        }

        deinit { Lock.deallocateWord(sequence) }

        /// Releases the lock, sleeps until `broadcast` or until `nanoseconds` have passed (on the monotonic clock,
        /// immune to wall-clock changes), takes the lock again. Returns `false` if the time ran out (spurious
        /// wake-ups happen: callers loop on their condition).
        @usableFromInline func wait(nanoseconds: UInt64) -> Bool {
            lock.assertHeldByThisThread("a condition waited on without its lock")
            let seen = sequence.pointee.load(ordering: .relaxed)
            lock.unlock()
            let timedOut = katana_futex_wait_for(UnsafeMutableRawPointer(sequence), seen, nanoseconds) != 0
            lock.lock()
            return !timedOut
        }

        /// Wakes every waiter. Called with the lock held.
        @usableFromInline func broadcast() {
            sequence.pointee.wrappingAdd(1, ordering: .releasing)
            katana_futex_wake_all(UnsafeMutableRawPointer(sequence))
        }
    }

    @inlinable
    final func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A store's state with the lock that guards it, in one object (swift-nio's `NIOLockedValueBox` is the model):
/// `value` is read and written only with the lock held — by the lane's holder around each change it applies, by
/// readers of `PartialStore.state` — and the lock knows which thread holds it, so a read from inside an updater the
/// store is applying on that thread gets the state as it is instead of deadlocking. Adaptive: it is contended only
/// between the lane's holder and readers of the state (the lane already makes the writers take turns), each holding
/// it for an updater's few dozen nanoseconds.
@usableFromInline
final class LockedState<S: State>: Lock, @unchecked Sendable {
    /// The state. Guarded by this lock.
    @usableFromInline @exclusivity(unchecked) var value = S()

    @usableFromInline init() { super.init(adaptive: true) }
}

/// 64 bytes never read: placed between a class's stored properties (laid out in declaration order), it keeps the
/// fields before it and after it off each other's cache lines.
@usableFromInline
struct CacheLinePad: Sendable {
    @usableFromInline let bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    @usableFromInline init() {}
}
