import Dispatch
import Foundation
import Katana
import KatanaTestSupport
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

/// A lock-protected list that tests append to from any thread.
final class Collector<T: Sendable>: @unchecked Sendable {
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
    let released: Collector<Bool>
    init(released: Collector<Bool>) { self.released = released }
    deinit { released.append(true) }
}

/// Lets a test watch an object being released.
final class WeakBox<T: AnyObject>: @unchecked Sendable {
    // Written once on the test's task before it is read by `eventually`'s polling on the same task.
    weak var object: T?
}
