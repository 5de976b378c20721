import Foundation
import Glibc
import KatanaTestSupport
import Testing

/// The packages in `Examples/`, built the way a user builds an app that depends on Katana: `swift build` in the
/// example's folder, which resolves Katana by relative path. Each is built once per test process, into
/// `.build/examples/NAME` (kept, so a second run of the suite rebuilds only what changed).
actor ExampleBuilds {
    static let shared = ExampleBuilds()
    private var built: [String: Task<URL, any Error>] = [:]

    /// Builds `Examples/example` (debug; every product, once: two builds in one scratch folder would collide) with
    /// `make examples` — its flags, its scratch folder (the two HTTP services share one), and from scratch when an
    /// incremental build of the path dependency fails (it can miss that Katana's interface changed) — and returns its
    /// executable `product`, in the folder `make example-dir` names.
    func executable(_ product: String, of example: String) async throws -> URL {
        let folder = try await build(example)
        return folder.appendingPathComponent(product)
    }

    private func build(_ example: String) async throws -> URL {
        if let task = built[example] { return try await task.value }
        let task = Task<URL, any Error> {
            let build = try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/env"), [
                "make", "--no-print-directory", "-C", Paths.packageRoot.path, "examples", "example-dir",
                "EXAMPLES=\(example)", "EXAMPLE=\(example)",
            ])
            // example-dir's line is the last: the folder.
            guard build.status == 0, let folder = build.out.split(separator: "\n").last, folder.hasPrefix("/") else {
                throw RecordingError("make examples example-dir EXAMPLES=\(example) EXAMPLE=\(example) failed (\(build.status)):\n\(build.out.suffix(3_000))\(build.err.suffix(3_000))")
            }
            return URL(fileURLWithPath: String(folder))
        }
        built[example] = task
        return try await task.value
    }
}

/// The dynamic libraries an ELF file asks for (`readelf -d`'s NEEDED entries).
func neededLibraries(_ binary: URL) throws -> [String] {
    let readelf = try run(["readelf", "-d", binary.path])
    guard readelf.status == 0 else { throw RecordingError("readelf -d \(binary.path) failed: \(readelf.err)") }
    return readelf.out.split(separator: "\n").filter { $0.contains("(NEEDED)") }.compactMap { line in
        guard let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]") else { return nil }
        return String(line[line.index(after: open)..<close])
    }
}

/// A running child whose standard input and output the test talks to line by line.
final class Conversation {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffered = ""

    init(_ executable: URL, _ arguments: [String] = []) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Sends `line` and returns the next line the child prints (nil if it closed its output).
    func say(_ line: String) -> String? {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
        while !buffered.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffered += String(decoding: chunk, as: UTF8.self)
        }
        let newline = buffered.firstIndex(of: "\n")!
        defer { buffered = String(buffered[buffered.index(after: newline)...]) }
        return String(buffered[..<newline])
    }

    /// The files the live process has mapped and the names of its threads, read from /proc.
    var mappedFiles: String { readProcFile("/proc/\(process.processIdentifier)/maps") ?? "" }
    var threadNames: [String] { KatanaTestSupport.threadNames(of: process.processIdentifier) }

    func finish() -> Int32 {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        return process.terminationStatus
    }
}

/// An app that depends on Katana's library products only: it must build without compiling the LTTng provider
/// (so without liblttng-ust-dev's headers), link no liblttng-ust, and load none and start no tracer thread when
/// it runs.
@Suite struct ExampleAppTests {
    @Test func anAppOnKatanaAloneNeedsNoLTTng() async throws {
        let binary = try await ExampleBuilds.shared.executable("hello-katana", of: "HelloKatana")

        // Nothing of the provider was compiled (SwiftPM plans every target of the graph, but compiles only what the
        // product needs): no object or module of CLTTng or KatanaLTTng in the build folder.
        let scratch = binary.deletingLastPathComponent().deletingLastPathComponent()  // `debug` is in the scratch folder
        let files = FileManager.default.enumerator(atPath: scratch.path)?.compactMap { $0 as? String } ?? []
        let compiled = files.filter { $0.hasSuffix(".o") || $0.hasSuffix(".swiftmodule") }
        let lttng = compiled.filter { $0.contains("CLTTng.build/") || $0.contains("KatanaLTTng") }
        #expect(lttng.isEmpty, "the core-only app compiled the LTTng provider: \(lttng)")
        // Nor the live page or the toolkit it exports with (KatanaInspector is a product of its own).
        let inspector = compiled.filter { $0.contains("KatanaInspector.build/") || $0.contains("KatanaTraceToolkit.build/") }
        #expect(inspector.isEmpty, "the core-only app compiled the inspector: \(inspector)")
        #expect(compiled.contains { $0.contains("/Katana.build/") }, "the listing must see the build's objects: \(compiled.prefix(5))")

        let needed = try neededLibraries(binary)
        #expect(needed.contains { $0.hasPrefix("libswiftCore") }, "readelf must list the binary's NEEDED entries: \(needed)")
        #expect(!needed.contains { $0.contains("lttng") }, "NEEDED: \(needed)")

        // Live: it works, has loaded no liblttng-ust and runs no lttng-ust thread.
        let app = try Conversation(binary)
        #expect(app.say("add buy milk") == "added #1: buy milk")
        #expect(app.mappedFiles.contains("libswiftCore"), "/proc/PID/maps must list the loaded libraries")
        #expect(!app.mappedFiles.contains("lttng"), "a core-only app mapped an LTTng library")
        #expect(!app.threadNames.isEmpty)
        #expect(!app.threadNames.contains { $0.contains("lttng") || $0.hasSuffix("-ust") }, "threads: \(app.threadNames)")
        #expect(app.say("save") == "saved 1 items")
        #expect(app.say("done 1") == "done #1: buy milk")
        #expect(app.say("done 7") == "error: there is no item 7")
        #expect(app.say("quit") == nil)
        #expect(app.finish() == 0)
    }

    /// The same live checks on a process that links KatanaLTTng (katana-bench): they can fail.
    @Test func anLTTngLinkedProcessMapsLiblttngUstAndRunsItsThreads() async throws {
        let bench = Process()
        bench.executableURL = Paths.katanaBench
        // Open loop at 100 dispatches/s: the process idles (~2 % of a core) and outlives any wait here. (A closed
        // loop saturated both cores: under ThreadSanitizer the listener threads were not named within 15 s, and the
        // 20 s run had ended before the check — /proc had no maps left to read.)
        bench.arguments = ["run", "-s", "updaters", "--rate", "100", "--concurrency", "1", "--duration", "300",
                           "--warmup", "0", "--trace-backend", "none"]
        bench.standardOutput = FileHandle.nullDevice
        bench.standardError = FileHandle.nullDevice
        try bench.run()
        defer {
            bench.terminate()
            bench.waitUntilExit()
        }
        let pid = bench.processIdentifier
        func threadNames() -> [String] { KatanaTestSupport.threadNames(of: pid) }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, !threadNames().contains(where: { $0.hasSuffix("-ust") }) { try? await Task.sleep(nanoseconds: 20_000_000) }
        #expect(threadNames().contains { $0.hasSuffix("-ust") }, "no lttng-ust listener thread: \(threadNames())")
        #expect(bench.isRunning, "katana-bench ended before the checks")
        #expect(readProcFile("/proc/\(pid)/maps")?.contains("liblttng-ust") == true)
    }
}

/// The example app profiled end to end, as its README tells a user to: build, record with `katana-trace record`,
/// analyse. Part of the serialized recording suite (a session records every process's events).
extension LTTngRecordingTests {
    @Test func theOrderServiceExampleIsProfiledEndToEnd() async throws {
        let binary = try await ExampleBuilds.shared.executable("order-service", of: "OrderService")
        // The opt-in is the dependency alone: the example's code never mentions tracing.
        #expect(try neededLibraries(binary).contains { $0.hasPrefix("liblttng-ust") })

        let orders = 120
        let (directory, printed) = try await recordWithKatanaTrace([binary.path, "--orders", "\(orders)", "--concurrency", "8"])
        defer { try? FileManager.default.removeItem(at: directory) }
        // "120 orders in … ms: S shipped, F failed; …": every order ends one way or the other.
        let summary = try #require(printed.split(separator: "\n").first { $0.hasPrefix("\(orders) orders in") }, "\(printed)")
        let match = try #require(summary.firstMatch(of: /: (\d+) shipped, (\d+) failed;/), "\(summary)")
        let shipped = Int(match.1)!, failed = Int(match.2)!
        #expect(shipped + failed == orders, "\(summary)")
        #expect(failed >= orders / 13, "the simulated gateway declines every 13th order: \(summary)")

        let check = try await KatanaTrace.run(["check", "--reader", "babeltrace2", directory.path])
        #expect(check.status == 0, "\(check.out)\(check.err)")
        // (Through Katana's command plugin, as a dependent package runs it: InstallTests, in `make test-install` —
        // the plugin builds its own katana-trace, a minute of this serialized suite.)
        let analysis = try await KatanaTrace.run(["analyze", "--json", directory.path])
        try #require(analysis.status == 0, "\(analysis.err)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(analysis.out.utf8)) as? [String: Any],
                                  "standard output must be the report alone: \(analysis.out.prefix(500))")
        #expect(report["reader"] as? String == "native")
        let types = try #require(report["types"] as? [[String: Any]])
        func type(_ name: String) -> [String: Any]? { types.first { $0["name"] as? String == "OrderProcessing.\(name)" } }

        // Its own dispatchable names, with the right kinds and counts.
        for (name, kind) in [("ProcessOrder", "side_effect"), ("ChargePayment", "side_effect"), ("ShipOrder", "side_effect"),
                             ("PlaceOrder", "state_updater"), ("ReserveStock", "state_updater"), ("MarkShipped", "state_updater")] {
            #expect(type(name)?["kind"] as? String == kind, "\(name) missing or of the wrong kind in \(types.map { $0["name"]! })")
        }
        #expect(type("ProcessOrder")?["count"] as? Int == orders)
        #expect(type("PlaceOrder")?["count"] as? Int == orders)
        #expect(type("MarkShipped")?["count"] as? Int == shipped)
        #expect((type("ProcessOrder")?["outcomes"] as? [String: Int])?["error"] == failed)

        // Queue waits: every updater has its wait from enqueue to being applied — exactly 0 for one applied inline
        // (recorded as one updater_inline event), more for one that waited in the lane.
        let wait = try #require(type("ReserveStock")?["queue_wait_ns"] as? [String: Any])
        let p50 = try #require(wait["p50"] as? Int), max = try #require(wait["max"] as? Int)
        #expect(max >= p50 && p50 >= 0)
        let service = try #require(type("ReserveStock")?["service_ns"] as? [String: Any])
        #expect((service["p50"] as? Int ?? 0) > 0, "an inline updater's service comes from its duration_ns: \(service)")

        // Nesting: which side effect dispatched what.
        let nesting = try #require(report["nesting"] as? [String: Any])
        let roots = try #require(nesting["roots"] as? [String: Int])
        #expect(roots["OrderProcessing.PlaceOrder"] == orders && roots["OrderProcessing.ProcessOrder"] == orders)
        let edges = try #require(nesting["children"] as? [[String: Any]])
        func edge(_ parent: String, _ child: String) -> Int? {
            edges.first { $0["parent"] as? String == "OrderProcessing.\(parent)" && $0["child"] as? String == "OrderProcessing.\(child)" }?["count"] as? Int
        }
        #expect(edge("ProcessOrder", "ReserveStock") == orders)
        #expect(edge("ProcessOrder", "ChargePayment") != nil)
        #expect(edge("ChargePayment", "RecordPayment") != nil)
        #expect(edge("ProcessOrder", "ShipOrder") == shipped)
        #expect(edge("ShipOrder", "MarkShipped") == shipped)
        #expect(edge("ProcessOrder", "FailOrder") == failed)

        // Its intervals: the gateway call inside each ChargePayment, the warehouse call inside each ShipOrder.
        let intervals = try #require(report["intervals"] as? [[String: Any]], "no intervals in the analysis")
        let gateway = try #require(intervals.first { $0["name"] as? String == "payment gateway" })
        #expect(gateway["count"] as? Int == orders)
        #expect((gateway["parents"] as? [String: Int])?["OrderProcessing.ChargePayment"] == orders)
        #expect((gateway["outcomes"] as? [String: Int])?["error"] == failed)
        let warehouse = try #require(intervals.first { $0["name"] as? String == "warehouse" })
        #expect((warehouse["parents"] as? [String: Int])?["OrderProcessing.ShipOrder"] == shipped)

        // And the README's last step: a Perfetto file.
        let exportURL = directory.appendingPathComponent("perfetto.json")
        let export = try await KatanaTrace.run(["export", "--format", "json", directory.path, "-o", exportURL.path])
        #expect(export.status == 0, "\(export.err)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: exportURL)) as? [String: Any])
        #expect(traceEventProblems(document).isEmpty, "\(traceEventProblems(document).prefix(5))")
        #expect(exportedDispatches(document) == (try await recordedDispatches(directory.path)))
        // And as Perfetto's protobuf, katana-trace's default, checked with Perfetto's own schema.
        let verdict = try await TraceExport.checkedProtobuf(directory.path)
        #expect(verdict.problems.isEmpty, "\(verdict.problems.prefix(5))")
        #expect(verdict.dispatches > 0 && verdict.dispatches_shown == verdict.dispatches)
    }
}

extension LTTngRecordingTests {
    /// An executable that links KatanaLTTng, connected to a session daemon, exits with its own status — also in a
    /// ThreadSanitizer build, where liblttng-ust's exit would otherwise make TSan end it with status 66.
    @Test func lttngLinkedExecutablesKeepTheirExitStatusWhileConnected() async throws {
        try LTTngEnvironment.ensureSessiond()
        // Each recorded by `katana-trace record`, which exits with the command's status.
        func recorded(_ command: [String]) async throws -> (status: Int32, out: String, err: String) {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("katana-record-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: directory) }
            return try await runProcessSuspending(KatanaTrace.executable, ["record", "-o", directory.path, "--"] + command)
        }
        let ok = try await recorded([Paths.katanaBench.path, "run", "-s", "updaters", "--count", "500", "--warmup", "0"])
        #expect(ok.status == 0, "\(ok.err)")
        #expect(ok.out.contains("throughput:"), "the output must survive the early exit: \(ok.out)")
        let usage = try await recorded([Paths.katanaBench.path, "run", "--count", "abc"])
        #expect(usage.status == 2 && usage.err.contains("abc"), "\(usage.err)")
        let router = try await recorded([Paths.routerExample.path])
        #expect(router.status == 0, "\(router.err)")
        for result in [ok, usage, router] { #expect(!result.err.contains("ThreadSanitizer"), "\(result.err)") }
    }
}

/// The KatanaBench product in a user's package: the shop's own scenarios, with katana-bench's whole command line.
@Suite struct BenchmarkExampleTests {
    @Test func theShopsOwnScenariosGetKatanaBenchsCommandLine() async throws {
        let binary = try await ExampleBuilds.shared.executable("order-bench", of: "OrderService")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("order-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func bench(_ arguments: [String]) async throws -> (status: Int32, out: String, err: String) {
            try await runProcessSuspending(binary, arguments)
        }

        let help = try await bench(["--help"])
        #expect(help.status == 0 && help.out.contains("OVERVIEW") && help.out.contains("compare") && help.out.contains("merge"), "\(help.out)")
        // Help wraps its lines: compare words.
        let runHelp = try await bench(["run", "--help"]).out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(runHelp.contains("checkout (place an order and process it") && runHelp.contains("bookkeeping (place"), "\(runHelp)")

        let a = directory.appendingPathComponent("a.json").path, chart = directory.appendingPathComponent("a.svg").path
        let first = try await bench(["-s", "checkout", "--count", "300", "--concurrency", "4", "--warmup", "0", "--repeat", "2",
                               "--option", "io-us=50", "--trace-backend", "none", "--json", a, "--plot", chart])
        try #require(first.status == 0, "\(first.err)")
        #expect(first.out.contains("checkout.end_to_end") && first.out.contains("checkout.place_call"), "\(first.out)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: a))) as? [String: Any])
        #expect(result["scenario"] as? String == "checkout")
        #expect((result["repetitions"] as? [Any])?.count == 2)
        let metrics = try #require(result["metrics"] as? [String: [String: Any]])
        #expect(metrics["checkout.end_to_end"]?["count"] as? Int == 600, "every item timed: \(metrics.keys)")
        #expect(metrics["checkout.place_call"]?["count"] as? Int == 600, "the scenario's own metric")
        #expect((result["parameters"] as? [String: Any])?["option.io-us"] as? Int == 50)
        #expect(try String(contentsOfFile: chart, encoding: .utf8).contains("checkout end-to-end"))

        // compare and merge, as katana-bench's: the same run is no regression; two merged are one result.
        #expect(try await bench(["compare", a, a]).status == 0)
        let merged = directory.appendingPathComponent("merged.json").path
        #expect(try await bench(["merge", a, a, "-o", merged]).status == 0)
        let mergedResult = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: merged))) as? [String: Any])
        #expect(((mergedResult["metrics"] as? [String: [String: Any]])?["checkout.end_to_end"]?["count"] as? Int) == 1_200)

        // The other scenario, and bad input: an unknown scenario, a setup that refuses its option.
        #expect(try await bench(["-s", "bookkeeping", "--count", "200", "--warmup", "0", "--trace-backend", "none"]).status == 0)
        let unknown = try await bench(["-s", "nope"])
        #expect(unknown.status == 2 && unknown.err.contains("choose from checkout, bookkeeping"), "\(unknown.err)")
        let refused = try await bench(["-s", "checkout", "--count", "10", "--option", "io-us=-5", "--trace-backend", "none"])
        #expect(refused.status == 2 && refused.err.contains("io-us takes 0 to 1000000"), "\(refused.err)")
    }
}

extension LTTngRecordingTests {
    /// `--trace` in a user's benchmark CLI: the KatanaBench product links the LTTng provider.
    @Test func aUsersBenchmarkRecordsItsOwnTrace() async throws {
        try LTTngEnvironment.ensureSessiond()
        let binary = try await ExampleBuilds.shared.executable("order-bench", of: "OrderService")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("order-bench-trace-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let outcome = try await offThePool {
            try run([binary.path, "-s", "checkout", "--count", "100", "--warmup", "0", "--option", "io-us=10", "--trace", directory.path])
        }
        try #require(outcome.status == 0, "\(outcome.err)")
        let analysis = try await offThePool { try run([KatanaTrace.executable.path, "analyze", "--json", directory.path]) }
        try #require(analysis.status == 0, "\(analysis.err)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(analysis.out.utf8)) as? [String: Any])
        let types = try #require(report["types"] as? [[String: Any]])
        #expect(types.first { $0["name"] as? String == "OrderProcessing.ProcessOrder" }?["count"] as? Int == 100, "\(types.map { $0["name"]! })")
    }
}
