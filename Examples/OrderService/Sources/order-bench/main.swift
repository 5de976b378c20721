// order-bench: the shop's own workloads under katana-bench's harness — latency histograms, --repeat, --json,
// compare, merge, --plot, --trace — from this one file. Usage: order-bench --help; e.g.
//   order-bench -s checkout --concurrency 16 --duration 5 --repeat 5 --json before.json
//   order-bench compare before.json after.json --format markdown
//   order-bench replay orders.log --pace recorded --verify        (a log from order-service --record orders.log)
import Foundation
import Katana
import KatanaBench
import OrderProcessing
import Synchronization

/// Order ids, unique across workers and repetitions.
final class OrderIDs: Sendable {
    private let next = Atomic<Int>(0)
    func take() -> Int { next.wrappingAdd(1, ordering: .relaxed).newValue }
}

/// A shop with plenty of stock, whose payment gateway and warehouse take `--option io-us=N` µs each (default 200).
func makeStore(_ context: BenchContext) throws -> ShopStore {
    let ioMicroseconds = Int(context.options["io-us"] ?? "200") ?? -1
    guard (0...1_000_000).contains(ioMicroseconds) else { throw BenchSetupError("--option io-us takes 0 to 1000000 µs") }
    let io = Duration.microseconds(ioMicroseconds)
    let dependencies = ShopDependencies(
        payments: PaymentGateway { _, _ in try await Task.sleep(for: io) },
        warehouse: Warehouse { _ in try await Task.sleep(for: io) })
    let stock = Dictionary(uniqueKeysWithValues: skus.map { ($0, Int.max / 4) })
    return ShopStore(stateInitializer: { ShopState(stock: stock) }, dependenciesInitializer: { _, _ in dependencies },
                     configuration: .init(traceBackend: context.traceBackend))
}

struct BenchSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

let skus = ["keyboard", "mouse", "monitor", "cable"]

func order(_ id: Int) -> Order {
    Order(id: id, sku: skus[id % skus.count], quantity: 1 + id % 3, priceCents: 1_999)
}

/// A metric of the scenario's own, next to the end-to-end one the harness records.
let placeCall = BenchMetric("checkout.place_call", label: "PlaceOrder dispatch call (fire-and-forget: call → return)")

/// The whole checkout: place the order, then reserve, charge and ship it (a side effect with two nested ones).
let checkout = BenchScenario("checkout", summary: "place an order and process it: reserve, charge, ship") { context in
    let store = try makeStore(context)          // a ShopStore on context.traceBackend; --option io-us=N sets its I/O
    let ids = OrderIDs()
    return BenchWorkload { _ in                 // one item, timed from sent (or due, with --rate) to returned
        let id = ids.take()
        let start = BenchContext.now()
        store.dispatch(PlaceOrder(order(id)))
        context.record(placeCall, nanoseconds: BenchContext.now() - start)
        try await store.dispatch(ProcessOrder(orderID: id)).value
    }
}

/// Only the state updaters of a checkout, awaited one after the other: the store's own cost, without the I/O.
let bookkeeping = BenchScenario("bookkeeping", summary: "place, reserve, pay and ship an order as four awaited updaters") { context in
    let store = try makeStore(context)
    let ids = OrderIDs()
    return BenchWorkload { _ in
        let id = ids.take()
        try await store.dispatch(PlaceOrder(order(id))).value
        try await store.dispatch(ReserveStock(orderID: id)).value
        try await store.dispatch(RecordPayment(orderID: id, amountCents: 1_999)).value
        try await store.dispatch(MarkShipped(orderID: id)).value
    }
}

/// Replays order-service's dispatch logs (`order-service --record LOG`, then `order-bench replay LOG`): its updaters
/// decoded by name, into a fresh shop with the log's initial state.
func replayTypes() -> DispatchLogTypes {
    var types = DispatchLogTypes()
    types.register(PlaceOrder.self)
    types.register(ReserveStock.self)
    types.register(RecordPayment.self)
    types.register(MarkShipped.self)
    types.register(FailOrder.self)
    // A demonstration of `--verify` failing: ORDER_BENCH_CHANGE=record-payment replays RecordPayment with a changed
    // body (it books twice the amount), as a regression in the updater would.
    if ProcessInfo.processInfo.environment["ORDER_BENCH_CHANGE"] == "record-payment" {
        types.register(RecordPaymentBookingTwice.self, as: String(reflecting: RecordPayment.self))
    }
    return types
}

let replay = BenchReplay(types: replayTypes()) { context, initialState in
    ShopStore(stateInitializer: { initialState }, configuration: .init(traceBackend: context.traceBackend))
}

await KatanaBenchCLI.main(scenarios: [checkout, bookkeeping], replay: replay)

/// `ORDER_BENCH_CHANGE=record-payment`'s RecordPayment: books twice the amount.
struct RecordPaymentBookingTwice: StateUpdater, Codable {
    let orderID: Int
    let amountCents: Int
    func updateState(_ state: inout ShopState) {
        state.orders[orderID]?.status = .paid
        state.revenueCents += 2 * amountCents
    }
}
