internal import CKatanaTraceProvider
import Foundation
import Glibc
import KatanaTrace
import Synchronization

/// The floors `micro` measures beside each figure, in the same run: the least any store could cost for the same
/// work on this machine, so a limit can be a ratio that means the same on a noisy or a faster machine.
enum Floors {
    /// A pthread mutex around a counter, with nothing else: the floors' lock under ThreadSanitizer, which sees it (it
    /// does not see `Mutex`'s), and the side-effect floor's.
    final class LockedCounter: LockedCounting, @unchecked Sendable {
        // `value` is guarded by `mutex`.
        private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        private var value = 0

        init() {
            mutex.initialize(to: pthread_mutex_t())
            pthread_mutex_init(mutex, nil)
        }

        deinit {
            pthread_mutex_destroy(mutex)
            mutex.deallocate()
        }

        @inline(never)
        func increment() -> Int {
            pthread_mutex_lock(mutex)
            value &+= 1
            let result = value
            pthread_mutex_unlock(mutex)
            return result
        }

        var current: Int {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            return value
        }
    }

    /// Fire-and-forget's floor: on one thread, a locked update and a call of a listener closure, per op. The lock is
    /// a `Mutex`, a futex word taken with a compare-and-swap as the store's state lock is (`LockedState`): the
    /// `pthread_mutex_t` of ``LockedCounter`` costs more per update, and a floor slower than the store's own lock would
    /// flatter the ratio. (Under ThreadSanitizer the pthread counter stands in, as in ``twoThreadsOnOneLock(count:)``.)
    static func lockAndListener(count: Int) -> Double {
        threadSanitizerIsActive ? lockAndListener(on: LockedCounter(), count: count)
                                : lockAndListener(on: MutexCounter(), count: count)
    }

    static func lockAndListener<Counter: LockedCounting>(on counter: Counter, count: Int) -> Double {
        let listener = opaque { (value: Int) in blackHole(value) }
        let start = nowNanoseconds()
        for _ in 0..<count { listener(counter.increment()) }
        let elapsed = nowNanoseconds() - start
        precondition(counter.current == count)
        return Double(elapsed) / Double(count)
    }

    /// A `Synchronization.Mutex` around a counter: the fire-and-forget and two-producer floors' lock.
    final class MutexCounter: LockedCounting {
        private let value = Mutex<Int>(0)

        @inline(never)
        func increment() -> Int { value.withLock { $0 &+= 1; return $0 } }

        var current: Int { value.withLock { $0 } }
    }

    /// Two producers' floor: two threads updating one `Mutex`-guarded counter, started together, aggregate ns per
    /// update.
    ///
    /// A `Mutex`, not the `pthread_mutex_t` of ``LockedCounter``: on Linux a contended `Mutex` spins briefly, then
    /// waits in a priority-inheritance futex, which gives the lock to the waiter when the holder unlocks — so every
    /// run measures two threads taking turns. glibc's mutex, default or
    /// adaptive, lets the thread that unlocks take the lock straight back, so a run was anything from one thread
    /// alone for long stretches to a handoff per update, varying several-fold from one run to the next, and
    /// a ratio to it meant little.
    /// Under ThreadSanitizer, which does not see `Mutex`'s lock and would report its counter as a race,
    /// the pthread counter stands in: figures from a sanitized build mean nothing anyway.
    static func twoThreadsOnOneLock(count: Int) -> Double {
        threadSanitizerIsActive ? twoThreads(on: LockedCounter(), count: count) : twoThreads(on: MutexCounter(), count: count)
    }

    /// Two threads, started together, each taking `counter`'s lock for half of `count` updates; aggregate ns per
    /// update. (Generic, so each counter's `increment` is called directly.)
    static func twoThreads<Counter: LockedCounting>(on counter: Counter, count: Int) -> Double {
        let perThread = count / 2
        let start = runStartedTogether(threads: 2) { _ in
            for _ in 0..<perThread { blackHole(counter.increment()) }
        }
        let elapsed = nowNanoseconds() - start
        precondition(counter.current == perThread * 2)
        return Double(elapsed) / Double(perThread * 2)
    }

    /// How fast two busy threads run beside each other, against one alone: the slower one's rate of independent
    /// work (no shared memory) with both running, over one thread's alone. ~1 when the machine gives the two threads
    /// cores of their own; ~0.5 when they share one (two virtual CPUs on one physical core, or a neighbour's busy
    /// thread beside one of them) — then a two-thread figure measures that, not the store, and its floor can move
    /// either way (a handoff between threads on one core is cheap, their own work slow).
    static func twoThreadSpeed(nanoseconds: UInt64 = 20_000_000) -> Double {
        let alone = independentWorkRates(threads: 1, nanoseconds: nanoseconds)
        let beside = independentWorkRates(threads: 2, nanoseconds: nanoseconds)
        guard let one = alone.first, one > 0, let slower = beside.min() else { return 0 }
        return slower / one
    }

    /// Each of `threads` threads, started together, does arithmetic of its own for `nanoseconds`; its rate in work
    /// units per nanosecond. Eight independent chains (four multiplying, four adding and rotating), so one thread
    /// keeps its core's units busy and two threads on one core (hyperthreads) slow each other: a single dependent
    /// chain leaves most of a core idle between its steps, so two such threads sharing one core would not.
    static func independentWorkRates(threads: Int, nanoseconds: UInt64) -> [Double] {
        let rates = PerThreadSlots<Double>(count: threads)
        _ = runStartedTogether(threads: threads) { index in
            let begin = nowNanoseconds()
            let seed = UInt64(index) &+ 1
            var (a, b, c, d) = (seed, seed &+ 2, seed &+ 4, seed &+ 6)
            var (e, f, g, h) = (seed &+ 1, seed &+ 3, seed &+ 5, seed &+ 7)
            var units = 0, now = begin
            repeat {
                for _ in 0..<250 {
                    a = a &* 6_364_136_223_846_793_005 &+ 1
                    b = b &* 2_862_933_555_777_941_757 &+ 3
                    c = c &* 3_202_034_522_624_059_733 &+ 5
                    d = d &* 3_935_559_000_370_003_845 &+ 7
                    e = (e &+ 0x9E37_79B9_7F4A_7C15).rotated(13)
                    f = (f &+ 0xBF58_476D_1CE4_E5B9).rotated(17)
                    g = (g &+ 0x94D0_49BB_1331_11EB).rotated(29)
                    h = (h &+ 0xD6E8_FEB8_6659_FD93).rotated(31)
                }
                units &+= 1
                now = nowNanoseconds()
            } while now &- begin < nanoseconds
            blackHole(a ^ b ^ c ^ d ^ e ^ f ^ g ^ h)
            rates.set(index, Double(units) / Double(now &- begin))
        }
        return rates.all
    }

    /// Whether this process runs under ThreadSanitizer (its runtime is linked in).
    static let threadSanitizerIsActive = dlsym(nil, "__tsan_init") != nil

    /// A side effect's floor: `count` unstructured tasks, each one locked update, spawned at once and all awaited;
    /// total ns (`micro` interleaves slices of it with slices of side effects).
    static func taskSpawnAndAwait(count: Int) async -> UInt64 {
        let counter = LockedCounter()
        var tasks: [Task<Void, Never>] = []
        tasks.reserveCapacity(count)
        let start = nowNanoseconds()
        for _ in 0..<count { tasks.append(Task { blackHole(counter.increment()) }) }
        for task in tasks { await task.value }
        let elapsed = nowNanoseconds() - start
        precondition(counter.current == count)
        return elapsed
    }

    /// A recorded dispatch's floor: one raw LTTng-UST event through the provider (`listeners_notified`, 16 bytes of
    /// payload), per op — only when a session records it.
    /// Lets the traced dispatch's duration clock calibrate before anything is measured: until it has (some ms after
    /// its first use) a traced dispatch reads CLOCK_MONOTONIC instead of the tick counter, a cost the run would
    /// otherwise mix into its first figures.
    static func calibrateDurationClock() {
        _ = katana_duration_start()
        usleep(30_000)
        _ = katana_duration_start()
    }

    static func rawEvent(count: Int, backend: any TraceBackend) -> Double? {
        guard let native = backend as? NativeTraceBackend, native.isEnabled else { return nil }
        let start = nowNanoseconds()
        for index in 0..<count { native.listenersNotified(storeID: 0, changes: UInt32(truncatingIfNeeded: index), listeners: 0) }
        return Double(nowNanoseconds() - start) / Double(count)
    }

    /// Three pass-through closure calls (what 3 interceptors do at the least), per op.
    static func closureCalls(count: Int, depth: Int) -> Double {
        var chain: (Int) -> Int = { $0 &+ 1 }
        for _ in 0..<depth {
            let next = chain
            chain = opaque { value in next(value) }
        }
        let start = nowNanoseconds()
        var sum = 0
        for index in 0..<count { sum &+= chain(index) }
        let elapsed = nowNanoseconds() - start
        blackHole(sum)
        return Double(elapsed) / Double(count)
    }
}

extension UInt64 {
    /// Rotated left by `bits` (0 < bits < 64).
    @inline(__always) func rotated(_ bits: UInt64) -> UInt64 { (self << bits) | (self >> (64 &- bits)) }
}

/// A counter updated under a lock, for the floors.
protocol LockedCounting: AnyObject, Sendable {
    func increment() -> Int
    var current: Int { get }
}

/// Hides a closure from the optimiser, so a floor measures a real call.
@inline(never)
func opaque<A, B>(_ body: @escaping (A) -> B) -> (A) -> B { body }
