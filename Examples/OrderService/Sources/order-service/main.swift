// order-service: takes N orders with C of them in flight at a time, prints a summary. Nothing here mentions
// tracing: the target depends on KatanaLTTng, so every dispatch below is an LTTng tracepoint when a session
// records `katana:*` (see README.md). Usage: order-service [--orders N] [--concurrency C]
import Foundation
import Katana
import OrderProcessing

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("order-service: \(message)\n".utf8))
    exit(2)
}

var orders = 200
var concurrency = 8
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    guard let value = arguments.popFirst() else { fail("\(flag) needs a value") }
    guard let number = Int(value), (1...1_000_000).contains(number) else { fail("\(flag) takes a whole number from 1 to 1000000, not '\(value)'") }
    switch flag {
    case "--orders": orders = number
    case "--concurrency": concurrency = number
    default: fail("unknown option \(flag) (usage: order-service [--orders N] [--concurrency C])")
    }
}

let skus = ["keyboard", "mouse", "monitor", "cable"]
let initialState = ShopState(stock: Dictionary(uniqueKeysWithValues: skus.map { ($0, orders / 2) }))
let store = ShopStore(stateInitializer: { initialState })

// A listener, as a UI or a metrics exporter would have: counts shipments as they happen.
final class Shipments: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0  // guarded by lock
    func add(_ n: Int) { lock.withLock { count += n } }
    var total: Int { lock.withLock { count } }
}
let shipments = Shipments()
store.addListener { old, new in
    let shipped = new.count(OrderStatus.shipped) - old.count(OrderStatus.shipped)
    if shipped > 0 { shipments.add(shipped) }
}

let started = ContinuousClock.now
await withTaskGroup(of: Void.self) { group in
    var next = 0
    func submit(_ group: inout TaskGroup<Void>) {
        let id = next + 1
        next += 1
        let order = Order(id: id, sku: skus[id % skus.count], quantity: 1 + id % 3, priceCents: 1_999 + 100 * (id % 5))
        group.addTask {
            store.dispatch(PlaceOrder(order))
            _ = try? await store.dispatch(ProcessOrder(orderID: id)).value
        }
    }
    while next < min(concurrency, orders) { submit(&group) }
    while await group.next() != nil {
        if next < orders { submit(&group) }
    }
}
let elapsed = ContinuousClock.now - started

let state = store.state
print("\(orders) orders in \(elapsed.formatted(.units(allowed: [.milliseconds]))): \(state.count(OrderStatus.shipped)) shipped, \(state.failed) failed; revenue $\(state.revenueCents / 100); listener saw \(shipments.total) shipments")
