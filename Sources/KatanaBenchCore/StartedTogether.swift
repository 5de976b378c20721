import Foundation
import Synchronization

/// Runs `body(index)` on `count` threads of their own, released together: each thread arrives at a barrier and
/// none starts before all have. Returns, when every `body` has returned, the moment they were released.
///
/// `DispatchQueue.concurrentPerform` started the second of two iterations late (a pool thread has to wake), so a
/// short "two threads" run was partly one thread alone: `micro --only two-producers` mixed the contended cost with
/// the uncontended one, in proportions that changed from run to run.
func runStartedTogether(threads count: Int, _ body: @escaping @Sendable (Int) -> Void) -> UInt64 {
    let barrier = StartBarrier(count: count)
    let finished = DispatchGroup()
    for index in 0..<count {
        finished.enter()
        let thread = Thread {
            barrier.arriveAndWait()
            body(index)
            finished.leave()
        }
        thread.start()
    }
    finished.wait()
    return barrier.releasedAt.load(ordering: .acquiring)
}

/// The barrier of `runStartedTogether`: the last thread to arrive reads the clock and releases the others.
final class StartBarrier: Sendable {
    let count: Int
    let arrived = Atomic<Int>(0)
    /// When the last thread arrived (0 until then).
    let releasedAt = Atomic<UInt64>(0)

    init(count: Int) { self.count = count }

    func arriveAndWait() {
        if arrived.add(1, ordering: .acquiringAndReleasing).newValue == count {
            releasedAt.store(nowNanoseconds(), ordering: .releasing)
            return
        }
        while releasedAt.load(ordering: .acquiring) == 0 { sched_yield() }
    }
}

/// One slot per thread of a `runStartedTogether` run, for what each thread leaves behind (a producer's last handle,
/// a thread's rate). Each slot is written by its own thread and read after they all returned; the lock orders both.
final class PerThreadSlots<Value: Sendable>: @unchecked Sendable {
    private var slots: [Value?]
    private let lock = NSLock()

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ value: Value) { lock.withLock { slots[index] = value } }

    /// The values set, in slot order.
    var all: [Value] { lock.withLock { slots.compactMap { $0 } } }
}
