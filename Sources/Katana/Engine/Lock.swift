import CKatanaTraceProvider
import Glibc
import Synchronization

/// A `pthread_mutex_t` lock. Used instead of `Synchronization.Mutex` because ThreadSanitizer on Linux does not
/// see `Mutex`'s lock and reports false races; with this lock a TSan report is always real.
@usableFromInline
class Lock: @unchecked Sendable {
    // The mutex lives at a stable heap address for the life of the object, as pthreads requires, alone in its cache
    // line(s): a store's locks are allocated together, and two threads each taking a different one of them (a
    // producer the lane's, the lane holder the state's) must not invalidate each other's line on every acquisition.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// Bytes of one cache line on the machines we run on (x86-64, and 64 on most arm64 cores too).
    @usableFromInline static let cacheLine = 64

    /// Whether `lock()` spins before sleeping when another thread holds the lock (see `init(adaptive:)`).
    @usableFromInline let spins: Bool

    /// The thread holding the lock (0: none), for the debug builds' checks of who holds what. Written by the holder
    /// only, so a thread reads its own id here only while it holds the lock, and a stale read is never its own id:
    /// the checks need no ordering.
    @usableFromInline let holder = Atomic<UInt>(0)

    /// - Parameter adaptive: spin briefly before sleeping when the lock is taken, as glibc's
    ///   `PTHREAD_MUTEX_ADAPTIVE_NP` does. For locks held for a few dozen nanoseconds by many threads, where
    ///   sleeping in the kernel and waking up costs far more than the wait itself. Done here, around a default
    ///   mutex: glibc's adaptive type costs more per uncontended lock and unlock than the default one, a try-lock
    ///   before the default lock less (the callgrind gate's `fire_and_forget`, and `katana-bench micro`).
    @usableFromInline init(adaptive: Bool = false) {
        spins = adaptive
        let bytes = (MemoryLayout<pthread_mutex_t>.stride + Lock.cacheLine - 1) / Lock.cacheLine * Lock.cacheLine
        mutex = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: Lock.cacheLine)
            .bindMemory(to: pthread_mutex_t.self, capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        let rc = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        UnsafeMutableRawPointer(mutex).deallocate()  // allocated raw, cache-line aligned
    }

    @inlinable final func lock() {
        if spins {
            if pthread_mutex_trylock(mutex) != 0 { lockAfterSpinning() }
        } else {
            pthread_mutex_lock(mutex)
        }
        holder.store(pthread_self(), ordering: .relaxed)
    }

    /// An adaptive lock that another thread holds: try again between pauses, up to `spinLimit` times (glibc's
    /// adaptive mutex spins up to 100), then sleep in `pthread_mutex_lock`.
    @usableFromInline @inline(never)
    final func lockAfterSpinning() {
        for _ in 0..<Lock.spinLimit {
            katana_cpu_relax()
            if pthread_mutex_trylock(mutex) == 0 { return }
        }
        pthread_mutex_lock(mutex)
    }

    @usableFromInline static let spinLimit = 100
    @inlinable final func unlock() {
        holder.store(0, ordering: .relaxed)
        pthread_mutex_unlock(mutex)
    }

    /// Takes the lock if it is free; `false` if another thread (or this one) holds it.
    @inlinable final func tryLock() -> Bool {
        guard pthread_mutex_trylock(mutex) == 0 else { return false }
        holder.store(pthread_self(), ordering: .relaxed)
        return true
    }

    /// Debug builds: stops the program unless this thread holds the lock. For the `…Locked` functions, whose
    /// callers must hold it: the "guarded by" of a comment, checked. Release builds: nothing.
    @inlinable @inline(__always)
    final func assertHeldByThisThread(_ what: @autoclosure () -> String) {
        #if DEBUG
        precondition(holder.load(ordering: .relaxed) == pthread_self(), "lock not held: \(what())")
        #endif
    }

    /// Debug builds: stops the program if this thread holds the lock. For code that calls into what may take a lock
    /// of the Swift runtime's that is, elsewhere, held while this one is taken (the engine's lock order: the
    /// Threading contract article). Release builds: nothing.
    @inlinable @inline(__always)
    final func assertNotHeldByThisThread(_ what: @autoclosure () -> String) {
        #if DEBUG
        precondition(holder.load(ordering: .relaxed) != pthread_self(), "lock order: \(what())")
        #endif
    }

    /// A condition variable bound to this lock: wait with the lock held.
    @usableFromInline
    final class Condition: @unchecked Sendable {
        // pthread_cond_t at a stable heap address; used only with its lock's mutex held.
        @usableFromInline let cond: UnsafeMutablePointer<pthread_cond_t>
        @usableFromInline let lock: Lock

        @usableFromInline init(_ lock: Lock) {
            self.lock = lock
            cond = .allocate(capacity: 1)
            cond.initialize(to: pthread_cond_t())
            var attributes = pthread_condattr_t()
            pthread_condattr_init(&attributes)
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)  // timed waits immune to wall-clock changes
            let rc = pthread_cond_init(cond, &attributes)
            pthread_condattr_destroy(&attributes)
            precondition(rc == 0, "pthread_cond_init failed: \(rc)")
        }

        deinit {
            pthread_cond_destroy(cond)
            cond.deallocate()
        }

        /// Releases the lock, sleeps until `broadcast` or until `nanoseconds` have passed, takes the lock again.
        /// Returns `false` if the time ran out (spurious wake-ups happen: callers loop on their condition).
        @usableFromInline func wait(nanoseconds: UInt64) -> Bool {
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            let total = UInt64(deadline.tv_nsec) &+ nanoseconds % 1_000_000_000
            deadline.tv_sec &+= Int(nanoseconds / 1_000_000_000) &+ Int(total / 1_000_000_000)
            deadline.tv_nsec = Int(total % 1_000_000_000)
            lock.holder.store(0, ordering: .relaxed)
            defer { lock.holder.store(pthread_self(), ordering: .relaxed) }
            return pthread_cond_timedwait(cond, lock.mutex, &deadline) != ETIMEDOUT
        }
        @usableFromInline func broadcast() { pthread_cond_broadcast(cond) }
    }

    @inlinable
    final func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// 64 bytes never read: placed between a class's stored properties (laid out in declaration order), it keeps the
/// fields before it and after it off each other's cache lines.
@usableFromInline
struct CacheLinePad: Sendable {
    @usableFromInline let bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    @usableFromInline init() {}
}
