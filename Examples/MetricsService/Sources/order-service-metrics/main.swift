// order-service-metrics: the order service with its dispatches on a dashboard. Every dispatch is recorded by
// KatanaMetrics; GET /metrics renders them (and the HTTP routes' own metrics) in Prometheus's text format.
//
//   order-service-metrics [--port N] [--orders N] [--concurrency N] [--report FILE]
//
// It listens on 127.0.0.1 (port 0: any free one; the line "listening on http://127.0.0.1:PORT" says which), takes
// --orders orders --concurrency at a time, then keeps serving until SIGTERM or SIGINT. --report writes, once the orders
// are done, what the service itself measured of them: per dispatched type, how many ended and the p99 of their service
// time in an HdrHistogram — what `check_prometheus.py` holds Prometheus's answers against.
import Foundation
import Histogram
import Hummingbird
import Katana
import KatanaMetrics
import KatanaTrace
import Metrics
import OrderProcessing
import Prometheus

let tool = "order-service-metrics"

/// A line on standard output, written at once (a check reads them as they come).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
let options = OrderService.options(tool, usage: "[--port N] [--orders N] [--concurrency N] [--report FILE]",
                                   flags: ["--port", "--orders", "--concurrency", "--report"])
let orders = OrderService.number(options, "--orders", default: 2_000, tool: tool)
let concurrency = OrderService.number(options, "--concurrency", default: 32, tool: tool)
let port: Int = {
    guard let text = options["--port"] else { return 8080 }
    guard let port = Int(text), (0...65_535).contains(port) else { OrderService.fail(tool, "--port takes 0 to 65535, not '\(text)'") }
    return port
}()

// 1. The metrics backend, with KatanaMetrics' buckets (100 ns to 10 s) for its two histograms.
let registry = PrometheusCollectorRegistry()
var factory = PrometheusMetricsFactory(registry: registry)
factory.durationHistogramBuckets = [
    DispatchMetrics.Name.serviceTime: DispatchMetrics.defaultBuckets,
    DispatchMetrics.Name.queueWait: DispatchMetrics.defaultBuckets,
]
MetricsSystem.bootstrap(factory)

// 2. Katana's dispatches into it: one line.
let metrics: DispatchMetrics
do { metrics = try DispatchMetrics.bootstrap() } catch { OrderService.fail(tool, "\(error)") }

// With --report, the service also times every dispatch itself, beside the metrics (the check's reference).
let reference = options["--report"] != nil ? ServiceTimes() : nil
if let reference { KatanaTracing.bootstrap(MultiplexTraceBackend([KatanaTracing.backend, reference])) }

let store = ShopStore(stateInitializer: { OrderService.initialState(orders: orders) })

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
