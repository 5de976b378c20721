// swift-tools-version: 6.1
// The CI regression benchmarks (package-benchmark). A package of its own, depending on the main one, so that
// `swift build` / `swift test` of Katana never compile the benchmark harness. Run from this folder:
//   swift package benchmark                       # run and print
//   swift package benchmark thresholds check      # what CI's gate runs (see ../scripts/perf-gate)
import PackageDescription

let package = Package(
    name: "KatanaBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Katana", path: "../"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    ],
    targets: [
        .executableTarget(
            name: "StoreBenchmarks",
            dependencies: [
                .product(name: "Katana", package: "Katana"),
                .product(name: "KatanaTrace", package: "Katana"),
                .product(name: "KatanaLTTng", package: "Katana"),
                .product(name: "KatanaDistributedTracing", package: "Katana"),
                .product(name: "KatanaFlightRecorder", package: "Katana"),
                .product(name: "KatanaMetrics", package: "Katana"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/StoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
