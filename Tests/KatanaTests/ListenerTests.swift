import Dispatch
import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Synchronization
import Testing

@Suite struct ListenerTests {
    @Test func listenersGetEveryChangeInOrder() async throws {
        let store = makeStore()
        let seen = Collector<(Int, Int)>()
        store.addListener { old, new in seen.append((old.counter, new.counter)) }
        var last: DispatchHandle<Void>?
        for _ in 0..<1_000 { last = store.dispatch(Increment()) }
        try await last?.value
        let pairs = seen.all
        #expect(pairs.count == 1_000)
        #expect(pairs.map(\.0) == Array(0..<1_000))
        #expect(pairs.map(\.1) == Array(1...1_000))
    }

    @Test func listenersGetEveryChangeFromConcurrentProducersInTheStoresOrder() async throws {
        let store = makeStore()
        let seen = Collector<(Int, Int)>()
        store.addListener { old, new in seen.append((old.counter, new.counter)) }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask { await onThread { for _ in 0..<20_000 { store.dispatch(Increment()) } } }
            }
        }
        #expect(await eventually { seen.count == 40_000 })
        let pairs = seen.all
        #expect(pairs.map(\.0) == Array(0..<40_000))
        #expect(pairs.allSatisfy { $0.1 == $0.0 + 1 })
    }

    @Test func listenersRunOnTheConfiguredExecutor() async throws {
        let queue = DispatchQueue(label: "listener-queue")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let store = makeStore(configuration: .init(listenerExecutor: .queue(queue), traceBackend: NoOpTraceBackend()))
        let onQueue = Collector<Bool>()
        store.addListener { _, _ in onQueue.append(DispatchQueue.getSpecific(key: key) == 7) }
        for _ in 0..<100 { store.dispatch(Increment()) }
        #expect(await eventually { onQueue.count == 100 })
        #expect(onQueue.all.allSatisfy { $0 })
    }

    @Test func unsubscribeStopsTheListener() async throws {
        let store = makeStore()
        let calls = Counter()
        let unsubscribe = store.addListener { _, _ in calls.increment() }
        try await store.dispatch(Increment()).value
        unsubscribe()
        unsubscribe()
        try await store.dispatch(Increment()).value
        #expect(calls.value == 1)
    }

    /// A dispatch calls its listeners without retaining each one: the list it took from the store keeps them
    /// alive. A listener that unsubscribes the others during a change must find them still alive (neither called
    /// nor released) until the dispatch is over, on the direct path and at the end of a closure chain.
    @Test(arguments: [false, true])
    func listenersUnsubscribedDuringAChangeAreNotCalledAndAreReleasedOnlyAfterIt(throughInterceptors: Bool) async throws {
        let passThrough: StoreInterceptor = { _ in { next in { item in try next(item) } } }
        let store = makeStore(interceptors: throughInterceptors ? [passThrough] : [])
        let released = Counter()
        let calledAfterUnsubscribe = Counter()
        let releasedDuringTheChange = Collector<Int>()
        // The unsubscribe closures hold their boxes too: the first listener calls them and lets them go, so the
        // boxes of the others are left to the store's list, which no longer has them, and to the dispatch's copy.
        let unsubscribes = Unsubscribes()
        unsubscribes.add(store.addListener { _, new in
            guard new.counter == 1 else { return }
            do {
                for unsubscribe in unsubscribes.takeAll() { unsubscribe() }
            }
            releasedDuringTheChange.append(released.value)
        })
        for _ in 0..<3 {
            let tracked = Tracked(released)
            unsubscribes.add(store.addListener { _, _ in
                withExtendedLifetime(tracked) { calledAfterUnsubscribe.increment() }
            })
        }
        try await store.dispatch(Increment()).value
        #expect(releasedDuringTheChange.all == [0])
        #expect(calledAfterUnsubscribe.value == 0)
        #expect(released.value == 3)
        try await store.dispatch(Increment()).value
        #expect(calledAfterUnsubscribe.value == 0)
    }

    /// The same, with the listeners unsubscribed from another thread while the dispatching thread is telling them: what
    /// they hold is released once that delivery is over, not while it may still read their boxes, and not under the
    /// store's locks — here its release dispatches and unsubscribes, which would deadlock there.
    @Test func aListenerUnsubscribedFromAnotherThreadDuringADeliveryIsReleasedAfterItOutsideTheLocks() async throws {
        let store = makeStore()
        let gate = Gate()
        store.addListener { _, new in
            if new.counter == 1 {
                gate.started.signal()
                gate.release.wait()
            }
        }
        let released = Counter()
        var unsubscribe: StoreUnsubscribe? = {
            let tracked = ReachingTheStoreOnRelease(store: store, released: released)
            return store.addListener { _, _ in withExtendedLifetime(tracked) {} }
        }()
        let delivered = DispatchSemaphore(value: 0)
        Thread {
            store.dispatch(Increment())
            delivered.signal()
        }.start()
        await onThread { gate.started.wait() }
        unsubscribe?()
        unsubscribe = nil
        #expect(released.value == 0, "released while a delivery could still read its box")
        gate.release.signal()
        let inTime = await onThread { delivered.wait(timeout: .now() + 30) == .success }
        #expect(inTime, "the dispatch deadlocked")
        guard inTime else { return }
        #expect(released.value == 1, "kept after the delivery that could read it")
        #expect(await eventually { store.state.counter == 2 }, "the release's own dispatch was lost")
    }

    /// A listener that, on each change, replaces itself with a new one: the lists replaced while the lane was held
    /// are let go when it is given back, so what the old listeners hold does not pile up over many dispatches.
    @Test func listenersReplacedDuringEveryDeliveryDoNotPileUp() async throws {
        let store = makeStore()
        let released = Counter()
        let current = Unsubscribes()
        @Sendable func subscribeNext() {
            let tracked = Tracked(released)
            current.add(store.addListener { _, _ in
                withExtendedLifetime(tracked) {
                    for unsubscribe in current.takeAll() { unsubscribe() }
                    subscribeNext()
                }
            })
        }
        subscribeNext()
        for _ in 0..<200 { store.dispatch(Increment()) }
        #expect(released.value == 200, "the replaced listeners' captures are still held")
        for unsubscribe in current.takeAll() { unsubscribe() }
        #expect(released.value == 201)
    }

    /// A dispatch that finds the lane idle takes it without `laneLock` and reads the listeners under the state lock;
    /// a listener added meanwhile must hear every change from some change on, with none skipped and none twice.
    @Test(arguments: [false, true])
    func aListenerAddedWhileAnotherThreadDispatchesHearsAnUnbrokenRunOfChanges(newState: Bool) async throws {
        let store = makeStore()
        let pairs = Collector<(Int, Int)>()
        let producer = Task.detached { await onThread { for _ in 0..<50_000 { store.dispatch(Increment()) } } }
        #expect(await eventually { store.state.counter > 1_000 })
        if newState {
            store.addListener(newState: { new in pairs.append((new.counter - 1, new.counter)) })
        } else {
            store.addListener { old, new in pairs.append((old.counter, new.counter)) }
        }
        await producer.value
        try await store.dispatch(Increment()).value
        let heard = pairs.all
        #expect(heard.last?.1 == 50_001)
        #expect(heard.allSatisfy { $0.1 == $0.0 + 1 })
        #expect(zip(heard, heard.dropFirst()).allSatisfy { $0.1 == $1.0 }, "a change skipped or heard twice")
    }

    /// Adding or removing a listener from inside an updater (a misuse: updaters only change the state) must not
    /// deadlock on the state lock, which the applying thread holds.
    @Test func addingAndRemovingAListenerFromInsideAnUpdaterDoesNotDeadlock() async throws {
        let store = makeStore()
        let heard = Counter()
        let finished = DispatchSemaphore(value: 0)
        Thread {
            store.dispatch(Subscribing(store: store, heard: heard))
            finished.signal()
        }.start()
        let inTime = await onThread { finished.wait(timeout: .now() + 30) == .success }
        #expect(inTime, "the dispatch deadlocked")
        guard inTime else { return }
        try await store.dispatch(Increment()).value
        #expect(heard.value == 1, "the listener added inside the first updater hears the second change only")
    }

    @Test func addingAndRemovingListenersFromManyThreadsIsSafe() async throws {
        let store = makeStore()
        let stayer = Counter()
        store.addListener { _, _ in stayer.increment() }
        let transient = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    await onThread {
                        for _ in 0..<500 {
                            let off = store.addListener { _, _ in transient.increment() }
                            store.dispatch(Increment())
                            off()
                        }
                    }
                }
            }
        }
        // Every transient listener is gone: one more change reaches only the one that stayed.
        #expect(await eventually { stayer.value == 2_000 })
        let before = transient.value
        try await store.dispatch(Increment()).value
        #expect(await eventually { stayer.value == 2_001 })
        #expect(transient.value == before)
        #expect(store.state.counter == 2_001)
    }

    @Test func aListenerMayDispatchAndReadTheStore() async throws {
        let store = makeStore()
        let reads = Collector<Int>()
        store.addListener { _, new in
            reads.append(store.state.counter)
            if new.counter < 5 { store.dispatch(Increment()) }
        }
        store.dispatch(Increment())
        #expect(await eventually { store.state.counter == 5 })
        #expect(await eventually { reads.count == 5 })
    }
}

extension ListenerTests {
    /// A listener is lent the new state where it lies (no copy). What it was handed must stay what it was while it
    /// runs: an updater it dispatches — which replaces the array the state holds, freeing the old one — is applied
    /// after it returns, never under it. Both listener forms, as the lending differs between them.
    @Test(arguments: [false, true])
    func whatAListenerIsHandedStaysAsItWasWhileItDispatches(newStateOnly: Bool) async throws {
        let store = Store<HistoryState, EmptySideEffectDependencyContainer>(
            interceptors: [], stateInitializer: { HistoryState() })
        let mismatches = Counter(), heard = Counter()
        let listener: @Sendable (HistoryState) -> Void = { new in
            heard.increment()
            let before = new.items
            if new.items.count < 50 { store.dispatch(ReplaceItems(count: new.items.count + 1)) }
            // The dispatch above is queued behind this listener: `new` and its array are still the ones handed over.
            if new.items != before || new.items != Array(0..<new.items.count) { mismatches.increment() }
        }
        if newStateOnly { store.addListener(newState: listener) } else { store.addListener { _, new in listener(new) } }
        store.dispatch(ReplaceItems(count: 1))
        #expect(await eventually { store.state.items.count == 50 })
        #expect(await eventually { heard.value == 50 })
        #expect(mismatches.value == 0)
    }
}

private struct HistoryState: State {
    var items: [Int] = []
}

/// Replaces the state's array with a new one (so the old one is released, not changed in place).
private struct ReplaceItems: StateUpdater {
    let count: Int
    func updateState(_ state: inout HistoryState) { state.items = Array(0..<count) }
}

/// Counts its own release.
private final class Tracked: Sendable {
    let released: Counter
    init(_ released: Counter) { self.released = released }
    deinit { released.increment() }
}

/// Counts its own release, and reaches the store when released — dispatches, and unsubscribes a listener of its own,
/// as an app's view model does: a release under the store's locks deadlocks.
private final class ReachingTheStoreOnRelease: Sendable {
    let store: TestStore
    let released: Counter
    init(store: TestStore, released: Counter) {
        self.store = store
        self.released = released
    }
    deinit {
        released.increment()
        store.dispatch(Increment())
        store.addListener { _, _ in }()
    }
}

/// Unsubscribe closures, taken all at once.
private final class Unsubscribes: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var closures: [@Sendable () -> Void] = []

    func add(_ closure: @escaping @Sendable () -> Void) {
        lock.lock()
        closures.append(closure)
        lock.unlock()
    }

    func takeAll() -> [@Sendable () -> Void] {
        lock.lock()
        defer { lock.unlock() }
        defer { closures = [] }
        return closures
    }
}

/// Adds a listener, and removes a throwaway one, from inside its own update (a misuse the store must survive).
private struct Subscribing: StateUpdater {
    let store: TestStore
    let heard: Counter
    func updateState(_ state: inout CounterState) {
        let heard = heard
        store.addListener { _, _ in heard.increment() }
        store.addListener { _, _ in }()
        state.counter += 1
    }
}
