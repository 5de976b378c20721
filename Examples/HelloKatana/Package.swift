// swift-tools-version: 6.1
// The smallest app on Katana: a to-do list driven from standard input. It depends on the `Katana` product only,
// so it builds without any LTTng package, links no liblttng-ust and starts no tracer thread (a test in the main
// package checks all three). See ../OrderService for an app that opts into LTTng tracing.
import PackageDescription

let package = Package(
    name: "HelloKatana",
    dependencies: [
        .package(name: "Katana", path: "../.."),
    ],
    targets: [
        .executableTarget(
            name: "hello-katana",
            dependencies: [.product(name: "Katana", package: "Katana")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
