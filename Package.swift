// swift-tools-version: 6.1
import PackageDescription

// Katana's library products (Katana, KatanaTrace, KatanaRedux, KatanaRouter) need no LTTng: they link no
// liblttng-ust and start no tracer thread. Tracing to LTTng is one opt-in: add the `KatanaLTTng` product to the
// app's target; its provider (`CLTTng`) registers itself before `main` and every store traces to it by default.
// The `LTTng` trait (on by default) is what compiles that provider; `--disable-default-traits` builds KatanaLTTng
// and katana-bench on a machine without liblttng-ust-dev, with no provider (tracing falls back to no-op).
let lttng: Set<String> = ["LTTng"]

let package = Package(
    name: "Katana",
    products: [
        .library(name: "Katana", targets: ["Katana"]),
        .library(name: "KatanaTrace", targets: ["KatanaTrace"]),
        .library(name: "KatanaLTTng", targets: ["KatanaLTTng"]),
        .library(name: "KatanaFlightRecorder", targets: ["KatanaFlightRecorder"]),
        .library(name: "KatanaDispatchLog", targets: ["KatanaDispatchLog"]),
        .library(name: "KatanaRedux", targets: ["KatanaRedux"]),
        .library(name: "KatanaRouter", targets: ["KatanaRouter"]),
        .library(name: "KatanaDistributedTracing", targets: ["KatanaDistributedTracing"]),
        .library(name: "KatanaMetrics", targets: ["KatanaMetrics"]),
        .library(name: "KatanaInspector", targets: ["KatanaInspector"]),
        .library(name: "KatanaBench", targets: ["KatanaBench"]),
        .executable(name: "katana-router-example", targets: ["katana-router-example"]),
        .executable(name: "katana-bench", targets: ["katana-bench"]),
        .executable(name: "katana-trace", targets: ["katana-trace"]),
        .plugin(name: "KatanaTracePlugin", targets: ["KatanaTracePlugin"]),
    ],
    traits: [
        .trait(name: "LTTng", description: "Emit LTTng-UST tracepoints (needs liblttng-ust-dev)."),
        .trait(name: "InspectorServer",
               description: "KatanaInspector on Hummingbird: its routes on an app's router, or a listener of its own."),
        .default(enabledTraits: ["LTTng"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        // Only KatanaMetricsTests use it: the real Prometheus exposition the metrics are checked against.
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // Only with the InspectorServer trait (SwiftPM neither fetches nor builds it otherwise).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        .target(name: "CKatanaTraceProvider"),
        .target(
            name: "CLTTng",
            dependencies: ["CKatanaTraceProvider"],
            cSettings: [.define("KATANA_LTTNG", .when(traits: lttng)), .headerSearchPath(".")],
            linkerSettings: [
                .linkedLibrary("lttng-ust", .when(traits: lttng)),
                .linkedLibrary("dl", .when(traits: lttng)),
            ]
        ),
        .target(
            name: "KatanaTrace",
            dependencies: ["CKatanaTraceProvider"]
        ),
        .target(
            name: "KatanaLTTng",
            dependencies: ["KatanaTrace", "CLTTng"]
        ),
        .target(name: "CKatanaFlightRecorder", dependencies: ["CKatanaTraceProvider"]),
        .target(
            name: "KatanaFlightRecorder",
            dependencies: ["KatanaTrace", "CKatanaFlightRecorder", "CKatanaTraceProvider", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "KatanaDispatchLog",
            dependencies: ["Katana", "KatanaTrace", "CKatanaTraceProvider"]
        ),
        .target(
            name: "Katana",
            dependencies: [
                "KatanaTrace", "CKatanaTraceProvider",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "KatanaRedux",
            dependencies: ["Katana", "KatanaTrace"]
        ),
        .target(
            name: "KatanaRouter",
            dependencies: [
                "Katana", "KatanaTrace",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Dispatches as spans of swift-distributed-tracing (its own product: the core depends on no tracing API).
        .target(
            name: "KatanaDistributedTracing",
            dependencies: ["KatanaTrace", .product(name: "Tracing", package: "swift-distributed-tracing")]
        ),
        // Dispatches as swift-metrics histograms, counters and gauges (its own product: the core depends on no
        // metrics API). The per-thread counters are C: plain stores by their one writer, read by the exporter.
        .target(name: "CKatanaMetrics", dependencies: ["CKatanaTraceProvider"]),
        .target(
            name: "KatanaMetrics",
            dependencies: ["Katana", "KatanaTrace", "CKatanaMetrics", .product(name: "CoreMetrics", package: "swift-metrics")]
        ),
        // The live page: reads the flight recorder and the metrics, exports the window with the toolkit's timeline.
        // It answers requests for the server the app runs; with the InspectorServer trait it also brings Hummingbird
        // routes and a listener of its own (an app on Katana alone builds none of it, nor one without the trait).
        .target(
            name: "KatanaInspector",
            dependencies: [
                "KatanaFlightRecorder", "KatanaMetrics", "KatanaTrace", "KatanaTraceToolkit",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["InspectorServer"])),
            ]
        ),
        .executableTarget(
            name: "katana-router-example",
            dependencies: ["Katana", "KatanaRouter", "KatanaLTTng"]
        ),
        // The bench's commands, without the LTTng provider: the test binary links this, not the executable, so
        // `swift test` loads no liblttng-ust (see README → Tracing in three steps).
        .target(
            name: "KatanaBenchCore",
            dependencies: [
                "Katana",
                "KatanaTrace",
                "KatanaFlightRecorder",
                "KatanaDispatchLog",
                "KatanaMetrics",
                "KatanaInspector",
                "KatanaTraceToolkit",
                "CKatanaTraceProvider",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "katana-bench",
            dependencies: ["KatanaBenchCore", "KatanaLTTng"]
        ),
        // Your own benchmark CLI: katana-bench's harness (BenchScenario, KatanaBenchCLI). No LTTng, as Katana: a
        // bench that should `--trace` to LTTng adds `KatanaLTTng` to its target too (a package gating its store in
        // a CI without LTTng's libraries links nothing of it; `aBenchOnKatanaBenchAloneBuildsWithLTTngHidden`).
        .target(
            name: "KatanaBench",
            dependencies: ["KatanaBenchCore", "KatanaDispatchLog"]
        ),
        // The trace toolkit: the package's own CTF reader (C, no library beyond libc) and the `katana-trace` CLI.
        .target(name: "CKatanaCTF"),
        .target(name: "KatanaTraceToolkit", dependencies: ["CKatanaCTF"]),
        .executableTarget(
            name: "katana-trace",
            dependencies: ["KatanaTraceToolkit", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // `swift package katana-trace …` in a package that depends on Katana.
        .plugin(
            name: "KatanaTracePlugin",
            capability: .command(
                intent: .custom(verb: "katana-trace", description: "Analyze LTTng recordings of Katana stores."),
                permissions: []),
            dependencies: ["katana-trace"]
        ),
        .target(name: "KatanaTestSupport", path: "Tests/KatanaTestSupport"),
        .testTarget(
            name: "KatanaTests",
            dependencies: [
                "Katana", "KatanaTrace", "KatanaTestSupport", "KatanaDispatchLog",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "KatanaBenchTests",
            dependencies: [
                "KatanaBenchCore", "KatanaTestSupport", "Katana", "KatanaDispatchLog",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .testTarget(
            name: "Katana6CompatibilityTests",
            dependencies: ["Katana", "KatanaTestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "KatanaReduxTests",
            dependencies: ["KatanaRedux", "Katana", "KatanaTrace"]
        ),
        .testTarget(
            name: "KatanaRouterTests",
            dependencies: ["KatanaRouter", "Katana", "KatanaTrace", "KatanaTestSupport"]
        ),
        .testTarget(
            name: "KatanaDistributedTracingTests",
            dependencies: [
                "KatanaDistributedTracing", "Katana", "KatanaTrace", "KatanaTestSupport",
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "KatanaInspectorTests",
            dependencies: ["KatanaInspector", "KatanaMetrics", "KatanaFlightRecorder", "Katana", "KatanaTrace", "KatanaTestSupport"]
        ),
        .testTarget(
            name: "KatanaMetricsTests",
            dependencies: [
                "KatanaMetrics", "Katana", "KatanaTrace", "KatanaTestSupport", "KatanaFlightRecorder",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .testTarget(
            name: "KatanaTraceTests",
            dependencies: ["Katana", "KatanaTrace", "KatanaTestSupport", "CKatanaTraceProvider", "KatanaFlightRecorder",
                           "KatanaTraceToolkit"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
