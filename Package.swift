// swift-tools-version: 6.1
import PackageDescription

// The `LTTng` trait (on by default) compiles the LTTng-UST tracepoint provider into `CLTTng` and makes it the
// default tracing backend. Build with `--disable-default-traits` on a machine without liblttng-ust: tracing then
// falls back to the no-op backend, and the in-memory backend still works.
let lttng: Set<String> = ["LTTng"]

let package = Package(
    name: "Katana",
    products: [
        .library(name: "Katana", targets: ["Katana"]),
        .library(name: "KatanaTrace", targets: ["KatanaTrace"]),
        .library(name: "KatanaRedux", targets: ["KatanaRedux"]),
        .library(name: "KatanaRouter", targets: ["KatanaRouter"]),
        .executable(name: "katana-router-example", targets: ["katana-router-example"]),
        .executable(name: "katana-bench", targets: ["katana-bench"]),
    ],
    traits: [
        .trait(name: "LTTng", description: "Emit LTTng-UST tracepoints (needs liblttng-ust-dev)."),
        .trait(name: "InjectedRegression",
               description: "Only for the CI gate's self-test: one extra allocation and extra work in every dispatch."),
        .default(enabledTraits: ["LTTng"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
    ],
    targets: [
        .target(
            name: "CLTTng",
            cSettings: [.define("KATANA_LTTNG", .when(traits: lttng)), .headerSearchPath(".")],
            linkerSettings: [
                .linkedLibrary("lttng-ust", .when(traits: lttng)),
                .linkedLibrary("dl", .when(traits: lttng)),
            ]
        ),
        .target(
            name: "KatanaTrace",
            dependencies: ["CLTTng"],
            swiftSettings: [.define("KATANA_LTTNG", .when(traits: lttng))]
        ),
        .target(
            name: "Katana",
            dependencies: [
                "KatanaTrace",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: [.define("KATANA_INJECTED_REGRESSION", .when(traits: ["InjectedRegression"]))]
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
        .executableTarget(
            name: "katana-router-example",
            dependencies: ["Katana", "KatanaRouter"]
        ),
        .executableTarget(
            name: "katana-bench",
            dependencies: [
                "Katana",
                "KatanaTrace",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "KatanaTestSupport", path: "Tests/KatanaTestSupport"),
        .testTarget(
            name: "KatanaTests",
            dependencies: [
                "Katana", "KatanaTrace",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "KatanaBenchTests",
            dependencies: [
                "katana-bench", "KatanaTestSupport",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .testTarget(
            name: "Katana6CompatibilityTests",
            dependencies: ["Katana", .product(name: "Logging", package: "swift-log")]
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
            name: "KatanaTraceTests",
            dependencies: ["Katana", "KatanaTrace", "KatanaTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
