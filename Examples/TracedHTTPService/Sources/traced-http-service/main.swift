// A small HTTP service traced end to end. `GET /orders/ID` places an order through a Katana store: a side effect
// reserves stock, pays (a user interval) and confirms, each step an updater. With a tracer bootstrapped, every
// request is a server span continuing the caller's `traceparent`, and the store's dispatches are its children.
//
//   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
//       traced-http-service [--port N]        # prints "listening on PORT", serves until SIGTERM / SIGINT
//
// Spans leave in batches every 100 ms; on SIGTERM or SIGINT the service stops accepting, and swift-otel exports
// what is left before the process exits.
import Foundation
import Katana
import KatanaDistributedTracing
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import OTel
import ServiceLifecycle
import Tracing

// MARK: The app's state and its items

struct Shop: State {
    var stock = 1_000
    var confirmed: [Int] = []
}

struct Reserve: ThrowingStateUpdater {
    struct OutOfStock: Error, CustomStringConvertible { var description: String { "out of stock" } }
    func updateState(_ state: inout Shop) throws {
        guard state.stock > 0 else { throw OutOfStock() }
        state.stock -= 1
    }
}

struct Confirm: StateUpdater {
    let order: Int
    func updateState(_ state: inout Shop) { state.confirmed.append(order) }
}

/// Reserves, pays (a user interval standing for a payment provider's call), confirms.
struct PlaceOrder: ReturningSideEffect {
    let order: Int
    func sideEffect(_ context: SideEffectContext<Shop, EmptySideEffectDependencyContainer>) async throws -> String {
        try await context.dispatch(Reserve()).value
        try await context.interval("payment") { try await Task.sleep(for: .milliseconds(2)) }
        try await context.dispatch(Confirm(order: order)).value
        return "order \(order) confirmed\n"
    }
}

typealias ShopStore = Store<Shop, EmptySideEffectDependencyContainer>

// MARK: HTTP

/// Reads W3C trace context (and any other propagated field) from request headers.
struct HeadersExtractor: Extractor {
    func extract(key: String, from headers: HTTPHeaders) -> String? { headers.first(name: key) }
}

/// Serves until cancelled (graceful shutdown cancels it).
struct HTTPService: Service {
    let store: ShopStore
    let port: Int

    func run() async throws {
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: channel)
                }
            }
        FileHandle.standardOutput.write(Data("listening on \(server.channel.localAddress?.port ?? -1)\n".utf8))
        do {
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { group in
                    try await server.executeThenClose { connections in
                        for try await connection in connections {
                            group.addTask { try? await serve(connection) }
                        }
                    }
                }
            }
        } catch is CancellationError {
            // SIGTERM / SIGINT: stop serving; returning lets the group shut the exporter down gracefully (it
            // exports what is left).
        }
    }

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async throws {
        try await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            for try await part in inbound {
                switch part {
                case let .head(requestHead):
                    head = requestHead
                case .body:
                    break
                case .end:
                    guard let request = head else { continue }
                    let (status, text) = await respond(to: request)
                    var headers = HTTPHeaders()
                    headers.add(name: "content-type", value: "text/plain; charset=utf-8")
                    headers.add(name: "content-length", value: "\(text.utf8.count)")
                    try await outbound.write(.head(HTTPResponseHead(version: request.version, status: status, headers: headers)))
                    try await outbound.write(.body(.byteBuffer(ByteBuffer(string: text))))
                    try await outbound.write(.end(nil))
                    head = nil
                }
            }
        }
    }

    /// One request, in its server span: the caller's trace context continues here.
    private func respond(to request: HTTPRequestHead) async -> (HTTPResponseStatus, String) {
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &context, using: HeadersExtractor())
        let parts = request.uri.split(separator: "/")
        let route = parts.count == 2 && parts[0] == "orders" ? "/orders/{id}" : request.uri
        return await withSpan("\(request.method.rawValue) \(route)", context: context, ofKind: .server) { span in
            span.attributes["http.request.method"] = request.method.rawValue
            span.attributes["http.route"] = route
            guard request.method == .GET, parts.count == 2, parts[0] == "orders", let order = Int(parts[1]) else {
                span.attributes["http.response.status_code"] = 404
                return (.notFound, "no such route: \(request.uri)\n")
            }
            do {
                let text = try await store.dispatch(PlaceOrder(order: order)).value
                span.attributes["http.response.status_code"] = 200
                return (.ok, text)
            } catch {
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error))
                span.attributes["http.response.status_code"] = 409
                return (.conflict, "\(error)\n")
            }
        }
    }
}

// MARK: Start-up

var port = 0
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    guard argument == "--port", let value = arguments.popFirst().flatMap({ Int($0) }), (0...65_535).contains(value) else {
        FileHandle.standardError.write(Data("usage: traced-http-service [--port 0-65535]\n".utf8))
        exit(64)
    }
    port = value
}

var configuration = OTel.Configuration.default
configuration.serviceName = "katana-traced-http-service"
configuration.metrics.enabled = false
configuration.logs.enabled = false
configuration.traces.batchSpanProcessor.scheduleDelay = .milliseconds(100)
let observability: any Service
do {
    observability = try OTel.bootstrap(configuration: configuration)
} catch {
    FileHandle.standardError.write(Data("traced-http-service: could not set up OpenTelemetry: \(error)\n".utf8))
    exit(1)
}

let store = ShopStore(stateInitializer: { Shop() }, configuration: .init(traceBackend: DistributedTraceBackend()))
let services = ServiceGroup(
    configuration: .init(
        services: [
            .init(service: observability),
            .init(service: HTTPService(store: store, port: port), successTerminationBehavior: .gracefullyShutdownGroup),
        ],
        gracefulShutdownSignals: [.sigterm, .sigint],
        logger: Logger(label: "traced-http-service")
    )
)
do {
    try await services.run()
} catch {
    FileHandle.standardError.write(Data("traced-http-service: \(error)\n".utf8))
    exit(1)
}
