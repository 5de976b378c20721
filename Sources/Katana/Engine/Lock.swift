import CKatanaTraceProvider
import Glibc
import Synchronization

/// This thread's identity, for "does this thread hold it?" checks (`katana_thread_id`: a register read, where
/// `pthread_self()` was a call into libc).
@inlinable var currentThreadID: UInt { UInt(katana_thread_id()) }

/// A `pthread_mutex_t` lock. Used instead of `Synchronization.Mutex` because ThreadSanitizer on Linux does not
/// see `Mutex`'s lock and reports false races (see STYLE.md); with this lock a TSan report is always real.
@usableFromInline
final class Lock: @unchecked Sendable {
    // The mutex lives at a stable heap address for the life of the object, as pthreads requires, alone in its cache
    // line(s): a store's locks are allocated together, and two threads each taking a different one of them (a
    // producer the lane's, the lane holder the state's) must not invalidate each other's line on every acquisition.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// Bytes of one cache line on the machines we run on (x86-64, and 64 on most arm64 cores too).
    @usableFromInline static let cacheLine = 64

    /// Whether `lock()` spins before sleeping when another thread holds the lock (see `init(adaptive:)`).
    @usableFromInline let spins: Bool

    #if DEBUG
    /// Debug builds only: the thread holding the lock (0: none), so that code which must never run under it can say
    /// so (``assertNotHeldByThisThread(_:)``). Written by the holder only; another thread never reads its own id
    /// there unless it holds the lock.
    @usableFromInline let holder = Atomic<UInt>(0)
    #endif

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

    @inlinable func lock() {
        if spins {
            if pthread_mutex_trylock(mutex) != 0 { lockAfterSpinning() }
        } else {
            pthread_mutex_lock(mutex)
        }
        noteHeld()
    }

    /// An adaptive lock that another thread holds: try again between pauses, up to `spinLimit` times (glibc's
    /// adaptive mutex spins up to 100), then sleep in `pthread_mutex_lock`.
    @usableFromInline @inline(never)
    func lockAfterSpinning() {
        for _ in 0..<Lock.spinLimit {
            katana_cpu_relax()
            if pthread_mutex_trylock(mutex) == 0 { return }
        }
        pthread_mutex_lock(mutex)
    }

    @usableFromInline static let spinLimit = 100
    @inlinable func unlock() {
        noteReleased()
        pthread_mutex_unlock(mutex)
    }

    /// Takes the lock if it is free; `false` if another thread (or this one) holds it.
    @inlinable func tryLock() -> Bool {
        guard pthread_mutex_trylock(mutex) == 0 else { return false }
        noteHeld()
        return true
    }

    @inlinable @inline(__always) func noteHeld() {
        #if DEBUG
        holder.store(currentThreadID, ordering: .relaxed)
        #endif
    }

    @inlinable @inline(__always) func noteReleased() {
        #if DEBUG
        holder.store(0, ordering: .relaxed)
        #endif
    }

    /// Debug builds: stops the program unless this thread holds the lock. For the `…Locked` functions, whose
    /// callers must hold it: the "guarded by" of a comment, checked. Release builds: nothing.
    @inlinable @inline(__always)
    func assertHeldByThisThread(_ what: @autoclosure () -> String) {
        #if DEBUG
        precondition(holder.load(ordering: .relaxed) == currentThreadID, "lock not held: \(what())")
        #endif
    }

    /// Debug builds: stops the program if this thread holds the lock. For code that calls into what may take a lock
    /// of the Swift runtime's that is, elsewhere, held while this one is taken (the engine's lock order: the
    /// Threading contract article). Release builds: nothing.
    @inlinable @inline(__always)
    func assertNotHeldByThisThread(_ what: @autoclosure () -> String) {
        #if DEBUG
        precondition(holder.load(ordering: .relaxed) != currentThreadID, "lock order: \(what())")
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
            lock.noteReleased()
            defer { lock.noteHeld() }
            return pthread_cond_timedwait(cond, lock.mutex, &deadline) != ETIMEDOUT
        }
        @usableFromInline func broadcast() { pthread_cond_broadcast(cond) }
    }

    @inlinable
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
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
