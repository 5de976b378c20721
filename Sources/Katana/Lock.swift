import Glibc

/// A `pthread_mutex_t` lock. Used instead of `Synchronization.Mutex` because ThreadSanitizer on Linux does not
/// see `Mutex`'s lock and reports false races (see STYLE.md); with this lock a TSan report is always real.
final class Lock: @unchecked Sendable {
    // The mutex lives at a stable heap address for the life of the object, as pthreads requires.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inline(__always) func lock() { pthread_mutex_lock(mutex) }
    @inline(__always) func unlock() { pthread_mutex_unlock(mutex) }

    @inline(__always)
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
