// swift-tools-version: 6.1
// The order service with its dispatches on a Prometheus dashboard: KatanaMetrics records every dispatch, swift-prometheus
// renders them, Hummingbird serves them at /metrics beside the HTTP routes' own metrics. See README.md.
//
// The shop's logic (`OrderProcessing`, from ../OrderService) depends on `Katana` only; this executable adds the metrics
// and the server. A package that depends only on Katana builds neither.
import PackageDescription

let package = Package(
    name: "MetricsService",
    platforms: [.macOS(.v15)],
    dependencies: [
        // InspectorServer: KatanaInspector's Hummingbird routes and its listener of its own.
        .package(name: "Katana", path: "../..", traits: [.defaults, "InspectorServer"]),
        .package(name: "OrderService", path: "../OrderService"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        .executableTarget(
            name: "order-service-metrics",
            dependencies: [
                .product(name: "Katana", package: "Katana"),
                .product(name: "KatanaMetrics", package: "Katana"),
                .product(name: "KatanaInspector", package: "Katana"),
                .product(name: "KatanaFlightRecorder", package: "Katana"),
                .product(name: "KatanaTrace", package: "Katana"),
                .product(name: "OrderProcessing", package: "OrderService"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
