import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Synchronization
import Testing

/// Appends 500 + the new counter, but only for even counters (the failable init returns nil otherwise).
struct EvenCounterSeen: StateObserverDispatchable, StateUpdater {
    let counter: Int
    init?(prevState: any State, currentState: any State) {
        guard let current = currentState as? CounterState, current.counter % 2 == 0 else { return nil }
        counter = current.counter
    }
    func updateState(_ state: inout CounterState) { state.log.append(500 + counter) }
}

struct Tagged<Tag>: StateUpdater {
    func updateState(_ state: inout CounterState) { state.counter += 1 }
}

struct SawIntTag: DispatchObserverDispatchable, StateUpdater {
    init?(dispatchedItem: any Dispatchable, prevState: any State, currentState: any State) {}
    func updateState(_ state: inout CounterState) { state.log.append(-7) }
}

final class NotificationInits: Sendable {
    static let shared = NotificationInits()
    let count = Counter()
}

struct FromNotification: NotificationObserverDispatchable, StateUpdater {
    let value: Int
    init?(notification: Notification) {
        NotificationInits.shared.count.increment()
        guard let value = notification.object as? Int else { return nil }
        self.value = value
    }
    func updateState(_ state: inout CounterState) { state.log.append(value) }
}

/// The observer as a closure in the initialiser's array, or as a `DispatchInterceptor` in the configuration.
enum ObserverForm: String, CaseIterable, CustomTestStringConvertible {
    case closure, dispatchInterceptor
    var testDescription: String { rawValue }

    func store(_ items: [ObserverInterceptor.ObserverType], notificationCenter: NotificationCenter = .default) -> TestStore {
        switch self {
        case .closure:
            return makeStore(interceptors: [ObserverInterceptor.observe(items, notificationCenter: notificationCenter)])
        case .dispatchInterceptor:
            let observer = ObserverInterceptor.Interceptor(items, notificationCenter: notificationCenter)
            return makeStore(configuration: .init(traceBackend: NoOpTraceBackend(), interceptors: [observer]))
        }
    }
}

@Suite(.serialized) struct ObserverInterceptorTests {
    @Test(arguments: ObserverForm.allCases) func onStateChangeIsNotEvaluatedForSideEffectsAndNilInitsDispatchNothing(_ form: ObserverForm) async throws {
        let evaluations = Counter()
        let store = form.store([
            .onStateChange({ old, new in
                evaluations.increment()
                return (old as? CounterState)?.counter != (new as? CounterState)?.counter
            }, [EvenCounterSeen.self]),
        ])
        try await store.dispatch(AppendFromSideEffect(value: 1)).value
        // Only the Append the side effect dispatched was evaluated, not the side effect.
        #expect(await eventually { evaluations.value == 1 })

        try await store.dispatch(Increment()).value  // counter 1: init returns nil
        try await store.dispatch(Increment()).value  // counter 2: dispatches EvenCounterSeen
        #expect(await eventually { store.state.log == [1, 502] })
        try await Task.sleep(nanoseconds: 20_000_000)
        #expect(store.state.log == [1, 502])
    }

    @Test(arguments: ObserverForm.allCases) func typedStateChangeFiltersOnTheConcreteState(_ form: ObserverForm) async throws {
        let store = form.store([
            .onStateChange(ObserverInterceptor.ObserverType.typedStateChange { (old: CounterState, new: CounterState) in
                new.counter == 4 && old.counter == 3
            }, [EvenCounterSeen.self]),
        ])
        for _ in 0..<6 { try await store.dispatch(Increment()).value }
        #expect(await eventually { store.state.log == [504] })
    }

    @Test(arguments: ObserverForm.allCases) func onDispatchMatchesTheExactType(_ form: ObserverForm) async throws {
        let store = form.store([.onDispatch(Tagged<Int>.self, [SawIntTag.self])])
        try await store.dispatch(Tagged<String>()).value
        try await store.dispatch(Tagged<Int>()).value
        try await store.dispatch(Tagged<Double>()).value
        #expect(await eventually { store.state.log == [-7] })
        #expect(store.state.counter == 3)
    }

    @Test(arguments: ObserverForm.allCases) func releasingTheStoreRemovesItsNotificationObservers(_ form: ObserverForm) async throws {
        let center = NotificationCenter()
        let name = Notification.Name("katana.test.ping")
        let released = WeakBox<TestStore>()
        do {
            let store = form.store([.onNotification(name, [FromNotification.self])], notificationCenter: center)
            released.object = store
            let before = NotificationInits.shared.count.value
            center.post(name: name, object: 5)
            center.post(name: name, object: "not an int")
            #expect(await eventually { store.state.log == [5] })
            #expect(NotificationInits.shared.count.value == before + 2)
        }
        #expect(await eventually { released.object == nil })
        let after = NotificationInits.shared.count.value
        center.post(name: name, object: 6)
        #expect(NotificationInits.shared.count.value == after)
    }
}
