// swift-tools-version: 6.1
// A small HTTP service whose requests dispatch into a Katana store, traced end to end: the server span of each
// request (continuing the caller's W3C `traceparent`), the store's side effect and updater spans under it
// (`KatanaDistributedTracing`), exported with swift-otel's OTLP/HTTP exporter. `check_otlp.py` runs it against an
// OTLP receiver on loopback and checks the span tree (the main package's tests run it).
import PackageDescription

let package = Package(
    name: "TracedHTTPService",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Katana", path: "../.."),
        // OTLP over HTTP only: the gRPC exporter's packages are not built.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "traced-http-service",
            dependencies: [
                .product(name: "Katana", package: "Katana"),
                .product(name: "KatanaDistributedTracing", package: "Katana"),
                .product(name: "OTel", package: "swift-otel"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
