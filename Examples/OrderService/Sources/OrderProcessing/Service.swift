import Foundation
import Katana

/// What both order-service executables share: their options and the run itself (N orders, C in flight, a listener
/// counting shipments as a UI or a metrics exporter would).
public enum OrderService {
    public static let skus = ["keyboard", "mouse", "monitor", "cable"]

    /// Ends the process with a one-line error (exit 2).
    public static func fail(_ tool: String, _ message: String) -> Never {
        FileHandle.standardError.write(Data("\(tool): \(message)\n".utf8))
        exit(2)
    }

    /// `--flag value` pairs of the command line, among `flags`; anything else ends the process with a usage line.
    public static func options(_ tool: String, usage: String, flags: Set<String>) -> [String: String] {
        var arguments = CommandLine.arguments.dropFirst()
        var options: [String: String] = [:]
        while let flag = arguments.popFirst() {
            guard flags.contains(flag) else { fail(tool, "unknown option \(flag) (usage: \(tool) \(usage))") }
            guard let value = arguments.popFirst() else { fail(tool, "\(flag) needs a value") }
            options[flag] = value
        }
        return options
    }

    /// The whole number given for `flag` (1 to 1,000,000), or `fallback`.
    public static func number(_ options: [String: String], _ flag: String, default fallback: Int, tool: String) -> Int {
        guard let value = options[flag] else { return fallback }
        guard let number = Int(value), (1...1_000_000).contains(number) else {
            fail(tool, "\(flag) takes a whole number from 1 to 1000000, not '\(value)'")
        }
        return number
    }

    /// A shop with half as many of each item as there are orders.
    public static func initialState(orders: Int) -> ShopState {
        ShopState(stock: Dictionary(uniqueKeysWithValues: skus.map { ($0, orders / 2) }))
    }

    /// Takes `orders` orders, `concurrency` at a time, and returns the summary line the executables print.
    public static func run(_ store: ShopStore, orders: Int, concurrency: Int) async -> String {
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
        return "\(orders) orders in \(elapsed.formatted(.units(allowed: [.milliseconds]))): \(state.count(OrderStatus.shipped)) shipped, "
            + "\(state.failed) failed; revenue $\(state.revenueCents / 100); listener saw \(shipments.total) shipments"
    }
}

/// Shipments counted by the listener.
final class Shipments: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0  // guarded by lock
    func add(_ n: Int) { lock.withLock { count += n } }
    var total: Int { lock.withLock { count } }
}
