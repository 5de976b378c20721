// order-service-metrics: the order service with its dispatches on a dashboard and a live page. Every dispatch is
// recorded by KatanaMetrics and the flight recorder; GET /metrics renders the metrics (and the HTTP routes' own) in
// Prometheus's text format; /debug/katana is KatanaInspector's live page.
//
//   order-service-metrics [--port N] [--orders N] [--concurrency N] [--report FILE] [--slow-order ID]
//                         [--stream-seconds N] [--inspector-port N] [--inspector-socket PATH]
//                         [--inspector-idle-seconds S]
//
// It listens on 127.0.0.1 (port 0: any free one; the line "listening on http://127.0.0.1:PORT" says which), takes
// --orders orders --concurrency at a time, then keeps serving until SIGTERM or SIGINT. --report writes, once the orders
// are done, what the service itself measured of them: per dispatched type, how many ended and the p99 of their service
// time in an HdrHistogram — what `check_prometheus.py` holds Prometheus's answers against. --inspector-port and
// --inspector-socket also serve the live page on a listener of its own (127.0.0.1:N, a Unix socket), as an app that
// runs no HTTP server would; the line "inspector on URL" says where; --inspector-idle-seconds is how long they keep a
// connection that asks for nothing (the inspector's default: a minute).
import Foundation
import HTTPTypes
import Histogram
import Hummingbird
import Katana
import KatanaFlightRecorder
import KatanaInspector
import KatanaMetrics
import KatanaTrace
import Metrics
import OrderProcessing
import Prometheus

let tool = "order-service-metrics"

/// A line on standard output, written at once (a check reads them as they come).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
let options = OrderService.options(tool, usage: "[--port N] [--orders N] [--concurrency N] [--report FILE] [--slow-order ID] [--stream-seconds N] [--inspector-port N] [--inspector-socket PATH] [--inspector-idle-seconds S]",
                                   flags: ["--port", "--orders", "--concurrency", "--report", "--slow-order", "--stream-seconds",
                                           "--inspector-port", "--inspector-socket", "--inspector-idle-seconds"])
let orders = OrderService.number(options, "--orders", default: 2_000, tool: tool)
let concurrency = OrderService.number(options, "--concurrency", default: 32, tool: tool)
func portOption(_ flag: String, default value: Int) -> Int {
    guard let text = options[flag] else { return value }
    guard let port = Int(text), (0...65_535).contains(port) else { OrderService.fail(tool, "\(flag) takes 0 to 65535, not '\(text)'") }
    return port
}
let port = portOption("--port", default: 8080)

// 1. The metrics backend, with KatanaMetrics' buckets (100 ns to 10 s) for its two histograms.
let registry = PrometheusCollectorRegistry()
var factory = PrometheusMetricsFactory(registry: registry)
factory.durationHistogramBuckets = [
    DispatchMetrics.Name.serviceTime: DispatchMetrics.defaultBuckets,
    DispatchMetrics.Name.queueWait: DispatchMetrics.defaultBuckets,
]
MetricsSystem.bootstrap(factory)

// 2. Katana's dispatches into it — one line — beside the flight recorder (the live page's recent dispatches).
KatanaTracing.bootstrap(FlightRecorder.shared)
let metrics: DispatchMetrics
do { metrics = try DispatchMetrics.bootstrap() } catch { OrderService.fail(tool, "\(error)") }

// With --report, the service also times every dispatch itself, beside the metrics (the check's reference).
let reference = options["--report"] != nil ? ServiceTimes() : nil
if let reference { KatanaTracing.bootstrap(MultiplexTraceBackend([KatanaTracing.backend, reference])) }

// An injected fault, for the live page's check: this order's payment takes 300 ms.
let slowOrder = options["--slow-order"].map { _ in OrderService.number(options, "--slow-order", default: 1, tool: tool) }
let payments = PaymentGateway { orderID, amount in
    if orderID == slowOrder { try await Task.sleep(for: .milliseconds(300)) }
    try await PaymentGateway.simulated.charge(orderID, amount)
}
let store = ShopStore(stateInitializer: { OrderService.initialState(orders: orders) },
                      dependenciesInitializer: { _, _ in ShopDependencies(payments: payments, warehouse: .simulated) })

// 3. /metrics, served where the app serves its routes: the scrape exports what the dispatching threads recorded since
// the last export, then renders the registry.
let router = Router()
router.middlewares.add(MetricsMiddleware())
router.get("metrics") { _, _ -> Response in
    metrics.export()
    var text: [UInt8] = []
    registry.emit(into: &text)
    return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(bytes: text)))
}
router.get("health") { _, _ in "ok\n" }

// 4. The live page, on the same server (KatanaInspector's routes, with the package's InspectorServer trait). The state
// is shown, with what a page must not show left out (customers' orders only as counts).
// --stream-seconds: how long one live page's stream lasts before the browser reconnects (the check shortens it).
let streamSeconds = OrderService.number(options, "--stream-seconds", default: 600, tool: tool)
let inspector = Inspector(.init(metrics: metrics, metricsPath: "/metrics", maxStreamDuration: .seconds(streamSeconds)))
inspector.showState {
    let state = store.state
    return ["orders": state.orders.count, "shipped": state.count(.shipped), "failed": state.failed,
            "revenue_cents": state.revenueCents, "stock_skus": state.stock.count]
}
inspector.addRoutes(to: router)

// 5. Or on a listener of its own — loopback unless told otherwise — as an app that runs no HTTP server would.
var listeners: [Inspector.Address] = []
if options["--inspector-port"] != nil { listeners.append(.loopback(port: portOption("--inspector-port", default: 0))) }
if let path = options["--inspector-socket"] { listeners.append(.unixSocket(path)) }
let idle: Duration = {
    guard let text = options["--inspector-idle-seconds"] else { return .seconds(60) }
    guard let seconds = Double(text), seconds.isFinite else { OrderService.fail(tool, "--inspector-idle-seconds takes seconds, not '\(text)'") }
    return .milliseconds(Int64(clamping: Int(max(-1e12, min(1e12, seconds * 1_000)))))
}()
for address in listeners {
    Task {
        do {
            try await inspector.serve(on: address, idleTimeout: idle) { url in say("inspector on \(url)") }
        } catch {
            OrderService.fail(tool, "the inspector's listener on \(address): \(error)")
        }
    }
}

let app = Application(
    router: router,
    configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: tool),
    onServerRunning: { channel in
        say("listening on http://127.0.0.1:\(channel.localAddress?.port ?? port)")
        Task {
            let summary = await OrderService.run(store, orders: orders, concurrency: concurrency)
            say(summary)
            if let reference, let path = options["--report"] {
                do {
                    try reference.report().write(to: URL(fileURLWithPath: path), options: .atomic)
                } catch {
                    OrderService.fail(tool, "cannot write \(path): \(error)")
                }
            }
            say("orders done")
        }
    }
)
do { try await app.runService() } catch { OrderService.fail(tool, "\(error)") }
