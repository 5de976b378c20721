// swift-tools-version: 6.1
// A small order-processing service on Katana, profiled with LTTng: see README.md ("profile your own app").
//
// `OrderProcessing` (the app's logic) depends on `Katana` only. The executable adds `KatanaLTTng`: that one
// dependency is the whole opt-in — no code — after which every store in the process emits `katana:*` tracepoints
// whenever an LTTng session records them.
import PackageDescription

let package = Package(
    name: "OrderService",
    products: [
        // The shop's logic, for other example packages (MetricsService) to run.
        .library(name: "OrderProcessing", targets: ["OrderProcessing"]),
    ],
    dependencies: [
        .package(name: "Katana", path: "../.."),
    ],
    targets: [
        .target(
            name: "OrderProcessing",
            dependencies: [.product(name: "Katana", package: "Katana")]
        ),
        .executableTarget(
            name: "order-service",
            dependencies: [
                "OrderProcessing",
                .product(name: "KatanaLTTng", package: "Katana"),
                .product(name: "KatanaDispatchLog", package: "Katana"),
            ]
        ),
        // The same service on Katana's in-process flight recorder: no LTTng anywhere in it (README.md, step 6).
        .executableTarget(
            name: "order-service-flight-recorder",
            dependencies: [
                "OrderProcessing",
                .product(name: "KatanaFlightRecorder", package: "Katana"),
            ]
        ),
        // The shop's own benchmark: katana-bench's harness and CLI around its scenarios (see Sources/order-bench);
        // with KatanaLTTng, so its `--trace` records to LTTng (KatanaBench alone links no LTTng).
        .executableTarget(
            name: "order-bench",
            dependencies: [
                "OrderProcessing",
                .product(name: "KatanaBench", package: "Katana"),
                .product(name: "KatanaLTTng", package: "Katana"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
