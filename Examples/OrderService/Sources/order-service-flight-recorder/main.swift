// order-service-flight-recorder: the order service with Katana's in-process flight recorder instead of LTTng — no
// LTTng package, no session daemon, no privileges. Every dispatch is recorded into memory; a payment that runs over
// its latency budget, or SIGUSR2, writes the recent window to a folder of --dumps, which `katana-trace analyze`
// reads. Usage: order-service-flight-recorder [--orders N] [--concurrency C] [--dumps DIR] [--slow-order ID]
import Foundation
import Katana
import KatanaFlightRecorder
import OrderProcessing

let tool = "order-service-flight-recorder"
let options = OrderService.options(tool, usage: "[--orders N] [--concurrency C] [--dumps DIR] [--slow-order ID]",
                                   flags: ["--orders", "--concurrency", "--dumps", "--slow-order"])
let orders = OrderService.number(options, "--orders", default: 200, tool: tool)
let concurrency = OrderService.number(options, "--concurrency", default: 8, tool: tool)
let dumps = options["--dumps"] ?? "flight-dumps"
// An injected fault: this order's payment takes a second, four times ChargePayment's budget.
let slowOrder = options["--slow-order"].map { _ in OrderService.number(options, "--slow-order", default: 1, tool: tool) }

let recorder = FlightRecorder.shared
let written = DumpCount()
recorder.dumpOnBudgetOverrun(into: dumps, minimumInterval: .seconds(60)) { dump in
    FlightRecorder.logReport(dump)
    if case .success = dump.result { written.add() }
}
do {
    try recorder.dumpOnSignal(SIGUSR2, into: dumps)
} catch {
    OrderService.fail(tool, "\(error)")
}

let payments = PaymentGateway { orderID, amount in
    if orderID == slowOrder { try await Task.sleep(for: .seconds(1)) }
    try await PaymentGateway.simulated.charge(orderID, amount)
}
let initialState = OrderService.initialState(orders: orders)
let store = ShopStore(stateInitializer: { initialState },
                      dependenciesInitializer: { _, _ in ShopDependencies(payments: payments, warehouse: .simulated) },
                      configuration: .init(traceBackend: recorder,
                                           latencyBudgets: [.budget(ChargePayment.self, .milliseconds(250))]))
print(await OrderService.run(store, orders: orders, concurrency: concurrency))
recorder.waitForDumps()
print("flight recorder: \(written.count) dumps in \(dumps)")

/// Dumps written, counted by the report.
final class DumpCount: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add() { lock.withLock { value += 1 } }
    var count: Int { lock.withLock { value } }
}
