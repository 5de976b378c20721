import Dispatch
import Foundation
import Katana
import KatanaTrace
import Synchronization

struct CounterState: State, Equatable {
    var counter = 0
    var log: [Int] = []
    init() {}
}

typealias TestStore = Store<CounterState, EmptySideEffectDependencyContainer>

/// A store whose trace events go to a fresh in-memory backend (so parallel tests never share one).
func makeStore(
    interceptors: [StoreInterceptor] = [],
    configuration: StoreConfiguration = .init(traceBackend: NoOpTraceBackend())
) -> TestStore {
    TestStore(interceptors: interceptors, stateInitializer: { CounterState() }, configuration: configuration)
}

struct Increment: StateUpdater {
    func updateState(_ state: inout CounterState) { state.counter += 1 }
}

struct Append: StateUpdater {
    let value: Int
    func updateState(_ state: inout CounterState) { state.log.append(value) }
}

struct OtherState: State {}

struct OtherUpdater: StateUpdater {
    func updateState(_ state: inout OtherState) {}
}

/// Blocks inside `updateState` until released, so a test can hold the updater lane.
struct BlockingAppend: StateUpdater {
    let value: Int
    let gate: Gate
    func updateState(_ state: inout CounterState) {
        gate.started.signal()
        gate.release.wait()
        state.log.append(value)
    }
}

final class Gate: Sendable {
    let started = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
}

/// Holds a store's updater lane: `BlockingAppend(value:)` runs on a thread of its own until `release()`, so
/// what is dispatched meanwhile queues behind it.
struct LaneHold {
    let gate = Gate()
    let done = DispatchSemaphore(value: 0)

    static func start(_ store: TestStore, appending value: Int) async -> LaneHold {
        let hold = LaneHold()
        Thread {
            store.dispatch(BlockingAppend(value: value, gate: hold.gate))
            hold.done.signal()
        }.start()
        await onThread { hold.gate.started.wait() }
        return hold
    }

    /// Lets the blocked updater finish, and waits until its dispatch has returned.
    func release() async {
        gate.release.signal()
        await onThread { done.wait() }
    }
}

/// Runs blocking work on a thread of its own, never on the cooperative pool.
func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.start()
    }
}

/// A lock-protected list that tests append to from any thread.
final class Recorder<T: Sendable>: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var items: [T] = []

    func append(_ item: T) {
        lock.lock()
        items.append(item)
        lock.unlock()
    }

    var all: [T] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }

    var count: Int { all.count }
}

/// Waits until `condition` holds (checked every millisecond) or `seconds` pass. A liveness bound, not a timing
/// claim: it returns as soon as the condition holds, so the bound is wide — under ThreadSanitizer the Swift runtime's
/// metadata lock has stalled the whole process for tens of seconds (10 s was once not enough for 800 side effects).
///
/// The bound counts the time this check got to run, not time the cooperative pool was frozen: a wake-up that comes
/// late counts as at most 50 ms. A CI run of the TSan suite froze the pool for ~140 s at start-up (every test,
/// however small, took 142 s or more), and two checks started before it ran out of a wall-clock bound with the
/// work they waited for still queued behind the freeze. Nothing is lost: while the pool is frozen this loop cannot
/// run either, so it could never have reported a hang sooner.
func eventually(seconds: Double = 120, _ condition: @Sendable () -> Bool) async -> Bool {
    var waited = 0.0
    while waited < seconds {
        if condition() { return true }
        let before = Date()
        try? await Task.sleep(nanoseconds: 1_000_000)
        waited += min(Date().timeIntervalSince(before), 0.05)
    }
    return condition()
}

struct TestError: Error, Equatable {
    let code: Int
}

/// A counter tests can share with closures and tasks.
final class Counter: Sendable {
    private let storage = Atomic<Int>(0)
    func increment() { storage.add(1, ordering: .relaxed) }
    var value: Int { storage.load(ordering: .relaxed) }
}

/// Records `true` in `released` when it is released: a test gives one to an item to see the item let go.
final class ReleaseToken: @unchecked Sendable {
    // `released` is immutable (a thread-safe recorder).
    let released: Recorder<Bool>
    init(released: Recorder<Bool>) { self.released = released }
    deinit { released.append(true) }
}

/// Lets a test watch an object being released.
final class WeakBox<T: AnyObject>: @unchecked Sendable {
    // Written once on the test's task before it is read by `eventually`'s polling on the same task.
    weak var object: T?
}
