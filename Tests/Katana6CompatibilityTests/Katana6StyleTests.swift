// Code written the way a Katana 6 user writes it (Katana 6.0.3's README and its own test suite), with Hydra's
// `Hydra.await(x)` / `.then` replaced by `try await x.value`, and nothing else changed: erased returning side effects
// that cast their context, the `AppReturningSideEffect` helper protocol, interceptors that dispatch through their
// context, `middlewareToInterceptor`, Katana 6's configuration spelling and `PromisableStoreDispatch`.
import Dispatch
import Foundation
import Katana
import Logging
import Testing

struct CounterState: State {
    var counter: Int = 0
    var purchases: [String] = []
    var log: [String] = []
}

struct IncrementCounter: StateUpdater {
    func updateState(_ state: inout CounterState) { state.counter += 1 }
}

struct RecordPurchase: StateUpdater {
    let productID: String
    func updateState(_ state: inout CounterState) { state.purchases.append(productID) }
}

struct Note: StateUpdater {
    let text: String
    func updateState(_ state: inout CounterState) { state.log.append(text) }
}

final class APIManager: @unchecked Sendable {
    func validate(_ receipt: String) -> Bool { receipt.hasPrefix("valid") }
}

enum PurchaseError: Error, Equatable { case invalidReceipt }
struct PurchaseResult: Sendable, Equatable { let productID: String }

final class AppDependencies: SideEffectDependencyContainer, @unchecked Sendable {
    let apiManager = APIManager()
    let dispatch: PromisableStoreDispatch
    init(dispatch: @escaping PromisableStoreDispatch, getState: @escaping GetState) { self.dispatch = dispatch }
}

// Katana's README: "both the state and dependencies types are erased, to allow for more freedom when using it in
// libraries".
struct PurchaseProduct: ReturningSideEffect {
    let productID: String
    let receipt: String

    func sideEffect(_ context: AnySideEffectContext) throws -> Result<PurchaseResult, PurchaseError> {
        guard let context = context as? SideEffectContext<CounterState, AppDependencies> else {
            fatalError("Invalid context type")
        }
        guard context.dependencies.apiManager.validate(receipt) else { return .failure(.invalidReceipt) }
        context.dispatch(RecordPurchase(productID: productID))
        return .success(PurchaseResult(productID: productID))
    }
}

/// The erased form, awaiting what it dispatches (Hydra.await → try await … .value).
struct ValidateThenCount: ReturningSideEffect {
    func sideEffect(_ context: AnySideEffectContext) async throws -> Int {
        guard let context = context as? SideEffectContext<CounterState, AppDependencies> else {
            fatalError("Invalid context type")
        }
        try await context.dispatch(IncrementCounter()).value
        return context.getState().counter
    }
}

/// A library's side effect that does not know the app's types: it dispatches through the erased context.
struct LibraryCountsTwice: ReturningSideEffect {
    func sideEffect(_ context: AnySideEffectContext) async throws -> Bool {
        try await context.dispatch(IncrementCounter()).value
        try await context.dispatch(IncrementCounter()).value
        return context.getAnyState() is CounterState
    }
}

/// An interceptor that dispatches through its context, as Katana's interceptors do.
func noteEveryIncrement() -> StoreInterceptor {
    return { context in
        return { next in
            return { dispatchable in
                try next(dispatchable)
                if dispatchable is IncrementCounter { context.dispatch(Note(text: "incremented")) }
            }
        }
    }
}

// Katana's README helper protocol.
protocol AppReturningSideEffect: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, AppDependencies>) -> Void
}

extension AppReturningSideEffect {
    func sideEffect(_ context: AnySideEffectContext) throws -> Void {
        guard let context = context as? SideEffectContext<CounterState, AppDependencies> else {
            fatalError("Invalid context type")
        }
        return self.sideEffect(context)
    }
}

struct NoteFromHelper: AppReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, AppDependencies>) -> Void {
        context.dispatch(Note(text: "helper ran"))
    }
}

/// The typed returning side effect this port offered before keeps working.
struct TypedDoubleCounter: ReturningSideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, AppDependencies>) async throws -> Int {
        context.getState().counter * 2
    }
}

struct GenerateRandomNumber: SideEffect {
    func sideEffect(_ context: SideEffectContext<CounterState, AppDependencies>) throws {
        context.dispatch(IncrementCounter())
    }
}

/// Dispatched by the ObserverInterceptor after every purchase, and when the store starts.
struct PurchaseObserved: DispatchObserverDispatchable, OnStartObserverDispatchable {
    init?(dispatchedItem: Dispatchable, prevState: State, currentState: State) {}
    init?() {}
    func updateState(_ state: inout CounterState) { state.log.append("observed") }
}
extension PurchaseObserved: StateUpdater {}

/// An app's interceptors, as Katana 6 sets them up.
func appInterceptors() -> [StoreInterceptor] {
    return [
        DispatchableLogger.interceptor(blackList: [Note.self]),
        ObserverInterceptor.observe([
            .onStart([PurchaseObserved.self]),
            .onDispatch(PurchaseProduct.self, [PurchaseObserved.self]),
        ]),
        middlewareToInterceptor { getState, dispatch in
            return { next in
                return { action in
                    next(action)
                }
            }
        },
    ]
}

typealias AppStore = Store<CounterState, AppDependencies>

@Suite struct Katana6StyleTests {
    @Test func theErasedReturningSideEffectCastsItsContextAndReturns() async throws {
        let store = AppStore()
        let result = try await store.dispatch(PurchaseProduct(productID: "pro", receipt: "valid-1")).value
        #expect(result == .success(PurchaseResult(productID: "pro")))
        let refused = try await store.dispatch(PurchaseProduct(productID: "pro", receipt: "forged")).value
        #expect(refused == .failure(.invalidReceipt))
        #expect(store.state.purchases == ["pro"])
        #expect(try await store.dispatch(ValidateThenCount()).value == 1)
        #expect(try await store.dispatch(LibraryCountsTwice()).value)
        #expect(store.state.counter == 3)
    }

    @Test func theHelperProtocolAndTheTypedFormBothRun() async throws {
        let store = AppStore()
        try await store.dispatch(NoteFromHelper()).value
        #expect(store.state.log == ["helper ran"])
        try await store.dispatch(IncrementCounter()).value
        #expect(try await store.dispatch(TypedDoubleCounter()).value == 2)
    }

    @Test func theCastFailsForAnotherStoresTypes() async throws {
        struct OtherState: State {}
        struct Probe: ReturningSideEffect {
            func sideEffect(_ context: AnySideEffectContext) throws -> [Bool] {
                [context is SideEffectContext<CounterState, AppDependencies>,
                 context is SideEffectContext<OtherState, AppDependencies>,
                 context is SideEffectContext<CounterState, EmptySideEffectDependencyContainer>]
            }
        }
        let store = AppStore()
        #expect(try await store.dispatch(Probe()).value == [true, false, false])
        // A typed side effect of other types is refused with the types named, not cast to nil behind its back.
        let other = Store<OtherState, EmptySideEffectDependencyContainer>()
        let result = await other.dispatch(TypedDoubleCounter()).result
        #expect(throws: KatanaError.self) { try result.get() }
    }

    @Test func interceptorsDispatchThroughTheirContextAndSeeTheStoresTypes() async throws {
        let sawTypedContext = Locked(false)
        let checksContext: StoreInterceptor = { context in
            sawTypedContext.set(context is SideEffectContext<CounterState, AppDependencies>)
            return { next in { try next($0) } }
        }
        let store = AppStore(interceptors: [checksContext, noteEveryIncrement()])
        try await store.dispatch(IncrementCounter()).value
        try await store.dispatch(GenerateRandomNumber()).value
        #expect(sawTypedContext.value)
        #expect(store.state.counter == 2)
        // The interceptor's own dispatch goes through the chain too; wait for both notes.
        for _ in 0..<1_000 where store.state.log.count < 2 { try await Task.sleep(nanoseconds: 1_000_000) }
        #expect(store.state.log == ["incremented", "incremented"])
    }

    @Test func katana6ConfigurationAndListenerSpellings() async throws {
        let listeners = DispatchQueue(label: "listeners")
        let store = AppStore(
            interceptors: [DispatchableLogger.interceptor(blackList: [Note.self])],
            stateInitializer: { CounterState(counter: 10) },
            configuration: .init(stateInitializerAsyncProvider: DispatchQueue(label: "init"), listenersAsyncProvider: listeners))
        let seen = Locked<[Int]>([])
        let unsubscribe = store.addAnyListener { _, new in seen.update { $0.append((new as! CounterState).counter) } }
        try await store.dispatch(IncrementCounter()).value
        listeners.sync {}
        #expect(seen.value == [11])
        unsubscribe()
        #expect(store.isReady)
        #expect(IncrementCounter().debugDescription == "Katana6CompatibilityTests.IncrementCounter")
    }

    @Test func anAppsInterceptorsLogObserveAndPassThrough() async throws {
        let store = AppStore(interceptors: appInterceptors())
        _ = try await store.dispatch(PurchaseProduct(productID: "pro", receipt: "valid-2")).value
        for _ in 0..<1_000 where store.state.log.count < 2 { try await Task.sleep(nanoseconds: 1_000_000) }
        #expect(store.state.log == ["observed", "observed"], "once on start, once after the purchase")
        #expect(store.state.purchases == ["pro"])
    }

    @Test func middlewareToInterceptorAndTheDependenciesDispatch() async throws {
        let store = AppStore(interceptors: [middlewareToInterceptor { _, _ in { next in { action in next(action) } } }])
        _ = try await store.dependencies.dispatch(IncrementCounter()).value
        #expect(store.state.counter == 1)
    }
}

/// A value shared with @Sendable closures in these tests.
final class Locked<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T { lock.withLock { stored } }
    func set(_ value: T) { lock.withLock { stored = value } }
    func update(_ body: (inout T) -> Void) { lock.withLock { body(&stored) } }
}
