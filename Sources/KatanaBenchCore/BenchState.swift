import Katana

/// The state every scenario works on: a counter, a log of recent values and an opaque payload whose size
/// (`--payload`) makes copies realistic.
struct BenchState: State {
    var counter = 0
    /// Empty (no heap storage) unless the run asks for a payload.
    var payload: [UInt8] = []
    init() {}
    init(payloadBytes: Int) { payload = payloadBytes > 0 ? [UInt8](repeating: 0, count: payloadBytes) : [] }
}

struct BenchDependencies: SideEffectDependencyContainer {
    init(dispatch: @escaping AnyDispatch, getState: @escaping GetState) {}
}

typealias BenchStore = Store<BenchState, BenchDependencies>

struct Increment: StateUpdater {
    func updateState(_ state: inout BenchState) { state.counter &+= 1 }
}

/// Increments and touches the payload (one byte), so a non-empty payload is copied when a listener holds the
/// old state — as in an app whose listeners diff old and new.
struct TouchPayload: StateUpdater {
    let byte: UInt8
    func updateState(_ state: inout BenchState) {
        state.counter &+= 1
        if !state.payload.isEmpty { state.payload[Int(byte) % state.payload.count] = byte }
    }
}

/// `TouchPayload` as an updater that can refuse (it never does here), in the form that works on a copy of the state:
/// what `micro --only refusable-updaters` sets against `TouchPayloadValidated`.
struct TouchPayloadOrRefuse: ThrowingStateUpdater {
    let byte: UInt8
    func updateState(_ state: inout BenchState) throws {
        guard state.counter >= 0 else { throw RefusedTouch() }
        state.counter &+= 1
        if !state.payload.isEmpty { state.payload[Int(byte) % state.payload.count] = byte }
    }
}

/// `TouchPayloadOrRefuse` deciding before it changes anything: applied in place.
struct TouchPayloadValidated: ValidatingStateUpdater {
    let byte: UInt8
    func validate(_ state: BenchState) throws {
        guard state.counter >= 0 else { throw RefusedTouch() }
    }
    func updateValidatedState(_ state: inout BenchState) {
        state.counter &+= 1
        if !state.payload.isEmpty { state.payload[Int(byte) % state.payload.count] = byte }
    }
}

struct RefusedTouch: Error {}

/// An order of a few fields, `Codable`: what `micro --only dispatch-log` records into a dispatch log.
struct LoggedOrder: StateUpdater, Codable {
    let id: Int
    let sku: String
    let quantity: Int
    let priceCents: Int
    func updateState(_ state: inout BenchState) { state.counter &+= 1 }
}
