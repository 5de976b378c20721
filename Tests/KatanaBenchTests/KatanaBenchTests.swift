import Foundation
import Histogram
import KatanaTestSupport
import Testing
@testable import KatanaBenchCore

/// The katana-bench binary built next to this test binary.
let katanaBench = builtExecutable(named: "katana-bench")

/// Runs katana-bench on a thread of its own while the test suspends (a blocked cooperative thread starves the
/// other tests' tasks on a 2-core machine).
@discardableResult
func bench(_ arguments: [String]) async throws -> (status: Int32, out: String, err: String) {
    try await runProcessSuspending(katanaBench, arguments)
}

func temporaryDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("katana-bench-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A result with the given end-to-end p99 and throughput, for compare tests.
func result(scenario: String = "side-effects", p99: UInt64, throughput: Double, version: String = "1") -> BenchResult {
    var histogram = makeHistogram()
    for value in [UInt64](repeating: 1_000, count: 98) + [p99, p99] { _ = histogram.record(value) }
    var environment = BenchResult.Environment.current()
    environment.katanaBenchVersion = version
    return BenchResult(
        scenario: scenario, parameters: ["workers": "1", "loop": "closed"], environment: environment, durationSeconds: 1,
        throughput: ["top_level_per_second": throughput], parallelism: .init(mean: 1, max: 1),
        harness: .init(sampleCostNanoseconds: 30), metrics: ["side_effect.end_to_end": MetricSummary(histogram)])
}

@Suite struct ArgumentValidationTests {
    @Test(arguments: [
        ["--count", "0"], ["--count", "-5"], ["--duration", "0"], ["--rate", "-1"], ["--producers", "0"],
        ["--concurrency", "0"], ["--warmup", "-1"], ["--listeners", "-1"], ["--payload", "-3"], ["--spin-us", "-1"],
        ["-s", "nope"], ["--json", "/nonexistent-dir/x.json"], ["--plot", "/nonexistent-dir/x.svg"], ["--bogus-flag"],
        ["--flooders", "0"], ["--backlog-limit", "0"], ["--backlog-limit", "-4"], ["--backlog-limit", "lots"],
        ["--backlog-limit", "99999999999999999999999"],
    ])
    func badRunArgumentsFailWithAMessage(_ arguments: [String]) async throws {
        let outcome = try await bench(["run"] + arguments)
        #expect(outcome.status == 2, "bad input or usage exits 2, as the README says: \(arguments) → \(outcome.status)")
        #expect(outcome.err.contains("Error:"), "no error message for \(arguments): \(outcome.err)")
        #expect(outcome.out.isEmpty)
    }

    @Test func theDefaultCommandIsRun() async throws {
        let outcome = try await bench(["--count", "200", "--warmup", "0", "--concurrency", "2", "--trace-backend", "none"])
        #expect(outcome.status == 0, "\(outcome.err)")
        #expect(outcome.out.contains("side_effect.end_to_end"))
        #expect(outcome.out.contains("p99.99"))
        // Progress goes to stderr only on a terminal; a pipe gets none.
        #expect(outcome.err.isEmpty)
    }
}

@Suite struct OutputFormatTests {
    @Test func jsonRoundTripsAndHgrmAndSvgAreWritten() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("r.json").path
        let hgrm = directory.appendingPathComponent("hgrm").path
        let svg = directory.appendingPathComponent("p.svg").path
        let outcome = try await bench(["run", "-s", "mixed", "--count", "300", "--warmup", "0", "--concurrency", "3",
                                 "--json", json, "--hgrm", hgrm, "--plot", svg, "--trace-backend", "none"])
        try #require(outcome.status == 0, "\(outcome.err)")

        let data = try Data(contentsOf: URL(fileURLWithPath: json))
        let decoded = try JSONDecoder().decode(BenchResult.self, from: data)
        #expect(decoded.schema == BenchResult.currentSchema)
        #expect(decoded.scenario == "mixed")
        #expect(decoded.parameters["workers"] == "3")
        #expect(decoded.metrics["side_effect.end_to_end"]?.count == 300)
        #expect(decoded.environment.cpus > 0)
        // Re-encoding what we decoded gives the same value back.
        let again = try JSONDecoder().decode(BenchResult.self, from: JSONEncoder().encode(decoded))
        #expect(again == decoded)

        // .hgrm as HdrHistogram writes it: header, rows of value/percentile/count/1/(1-p), footer.
        let text = try String(contentsOfFile: hgrm + "/side_effect.end_to_end.hgrm", encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines[0].split(separator: " ") == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"])
        #expect(lines[1].isEmpty)
        #expect(text.contains("#[Mean    ="))
        #expect(text.contains("#[Max     ="))
        #expect(text.contains("Total count    =          300]"))
        #expect(text.contains("#[Buckets ="))
        let rows = lines.dropFirst(2).filter { !$0.isEmpty && !$0.hasPrefix("#") }
        #expect(rows.last?.split(separator: " ").count == 3)  // the 100% row has no 1/(1-p)
        #expect(rows.dropLast().allSatisfy { $0.split(separator: " ").count == 4 })

        let chart = try String(contentsOfFile: svg, encoding: .utf8)
        #expect(chart.hasPrefix("<svg"))
        #expect(chart.contains("99.9%"))
        #expect(chart.contains("side effect end-to-end"))
        #expect(chart.components(separatedBy: "<polyline").count - 1 >= 4)
    }

    @Test func percentileTicksReadAsPercentiles() {
        #expect((0...5).map(Plot.percentileLabel) == ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
    }

    @Test func durationsUseReadableUnits() {
        #expect(Report.duration(512) == "512 ns")
        #expect(Report.duration(1_500) == "1.50 µs")
        #expect(Report.duration(2_500_000) == "2.50 ms")
    }
}

@Suite struct CompareTests {
    func write(_ result: BenchResult, _ directory: URL, _ name: String) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try Report.writeJSON(result, to: path)
        return path
    }

    @Test func exitCodesTellWithinRegressionImprovementAndBadInput() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = try write(result(p99: 100_000, throughput: 1_000), directory, "base.json")
        let same = try write(result(p99: 104_000, throughput: 990), directory, "same.json")
        let slower = try write(result(p99: 150_000, throughput: 1_000), directory, "slower.json")
        let lessThroughput = try write(result(p99: 100_000, throughput: 700), directory, "less.json")
        let faster = try write(result(p99: 50_000, throughput: 2_000), directory, "faster.json")
        let other = try write(result(scenario: "updaters", p99: 100_000, throughput: 1_000), directory, "other.json")
        let newer = try write(result(p99: 100_000, throughput: 1_000, version: "2"), directory, "newer.json")
        let garbage = directory.appendingPathComponent("garbage.json").path
        try "not json".write(toFile: garbage, atomically: true, encoding: .utf8)

        #expect(try await bench(["compare", base, same]).status == 0)
        let regression = try await bench(["compare", base, slower])
        #expect(regression.status == 1)
        #expect(regression.out.contains("REGRESSION"))
        #expect(try await bench(["compare", base, lessThroughput]).status == 1)
        let improvement = try await bench(["compare", base, faster])
        #expect(improvement.status == 0)
        #expect(improvement.out.contains("improved"))
        #expect(try await bench(["compare", base, slower, "--threshold", "60%"]).status == 0)
        #expect(try await bench(["compare", base, slower, "--metric", "throughput.top_level_per_second"]).status == 0)

        for bad in [[base, other], [base, newer], [base, garbage], [base, "/nonexistent.json"],
                    [base, same, "--metric", "no.such.metric"], [base, same, "--threshold", "lots"]] {
            let outcome = try await bench(["compare"] + bad)
            #expect(outcome.status != 0 && outcome.status != 1, "\(bad): \(outcome.status)")
            #expect(!outcome.err.isEmpty)
        }
    }
}

@Suite struct OpenLoopTests {
    /// A 100 ms stall every half second: in open loop every item due during a stall counts its wait, so the tail
    /// shows it; a closed loop hides it (each producer just sends less).
    @Test func openLoopReportsAnInjectedStallThatClosedLoopHides() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let open = directory.appendingPathComponent("open.json").path
        let closed = directory.appendingPathComponent("closed.json").path
        let common = ["run", "-s", "updaters", "--producers", "2", "--duration", "2", "--warmup", "0",
                      "--stall-every", "0.5", "--stall-ms", "100", "--trace-backend", "none"]
        try #require(try await bench(common + ["--rate", "2000", "--json", open]).status == 0)
        try #require(try await bench(common + ["--json", closed]).status == 0)
        let openResult = try JSONDecoder().decode(BenchResult.self, from: Data(contentsOf: URL(fileURLWithPath: open)))
        let closedResult = try JSONDecoder().decode(BenchResult.self, from: Data(contentsOf: URL(fileURLWithPath: closed)))
        let openP99 = try #require(openResult.metrics["updater.end_to_end"]?.p99)
        let closedP99 = try #require(closedResult.metrics["updater.end_to_end"]?.p99)
        #expect(openP99 > 20_000_000, "open loop p99 \(openP99) ns should show the 100 ms stalls")
        #expect(closedP99 < 20_000_000, "closed loop p99 \(closedP99) ns (coordinated omission hides the stalls)")
        #expect(openResult.parameters["loop"] == "open")
    }
}

/// The flood scenario: flooding threads time every dispatch call while awaiting side effects run; the store gets
/// the backlog limit asked for.
@Suite struct FloodScenarioTests {
    @Test func floodReportsDispatchCallDurationsAndItsParameters() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("flood.json").path
        let outcome = try await bench(["run", "-s", "flood", "--count", "200", "--concurrency", "2", "--flooders", "2",
                                 "--backlog-limit", "64", "--warmup", "0", "--trace-backend", "none", "--json", json])
        try #require(outcome.status == 0, "\(outcome.err)")
        #expect(outcome.out.contains("dispatch.call"))
        #expect(outcome.out.contains("flood: 2 threads"))
        #expect(outcome.out.contains("backlog limit 64"))
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(contentsOf: URL(fileURLWithPath: json)))
        #expect(result.parameters["flooders"] == "2")
        #expect(result.parameters["backlog_limit"] == "64")
        #expect(result.metrics["side_effect.end_to_end"]?.count == 200)
        #expect((result.metrics["dispatch.call"]?.count ?? 0) > 0)
        #expect((result.throughput["flood_dispatches_per_second"] ?? 0) > 0)
    }
}

/// The gate's callgrind workloads are `micro` cases: each must run, keep every update and report its figure.
@Suite struct MicroCaseTests {
    @Test func everyGateWorkloadRunsAndReportsItsFigure() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("micro.json").path
        let outcome = try await bench(["micro", "--only", "fire-and-forget", "round-trip", "side-effects", "listeners",
                                 "writing-updater", "interceptors", "protocol-interceptors", "erased-interceptors",
                                 "--iterations", "2000", "--runs", "1", "--backend", "none", "--json", json])
        #expect(outcome.status == 0, "\(outcome.err)")
        let figures = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Double]
        for key in ["fire_and_forget_ns_per_op", "round_trip_p50_ns", "side_effect_ns_per_op", "listeners_ns_per_op",
                    "writing_updater_ns_per_op", "interceptors_ns_per_op", "protocol_interceptors_ns_per_op",
                    "erased_interceptors_ns_per_op"] {
            let value = try #require(figures?[key], "missing \(key) in \(figures ?? [:])")
            #expect(value > 0 && value.isFinite, "\(key) = \(value)")
        }
        #expect(outcome.out.contains("4 listeners") && outcome.out.contains("3 interceptors"))
    }

    /// A ratio over several runs pairs each run's figure with its own floor: a run on a slow machine (both
    /// figures high) must not be divided by another run's floor.
    @Test func aRatioOverRunsIsTheMedianOfEachRunsOwn() {
        // Runs 1 and 3 on a fast machine, run 2 on one 10× slower: every run's own ratio is 2 or 3.
        let figures: [Double] = [10, 100, 12], floors: [Double] = [5, 50, 4]
        #expect(pairedRatio(figures: figures, floors: floors) == 2)
        #expect(median(figures) / median(floors) == 2.4, "what dividing the medians gave")
        #expect(pairedRatio(figures: [30, 90], floors: [10, 45]) == 2.5, "an even count: the mean of the middle two")
    }

    /// Each figure beside its floor, measured in the same run, and their ratio (what the budgets are stated in).
    @Test func figuresComeWithTheirFloorsAndRatios() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("micro.json").path
        let outcome = try await bench(["micro", "--only", "fire-and-forget", "side-effects", "two-producers", "interceptors",
                                 "--iterations", "4000", "--runs", "1", "--backend", "none", "--json", json])
        try #require(outcome.status == 0, "\(outcome.err)")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Double])
        for (figure, floor, ratio) in [("fire_and_forget_ns_per_op", "fire_and_forget_floor_ns", "fire_and_forget_ratio"),
                                       ("side_effect_ns_per_op", "side_effect_floor_ns", "side_effect_ratio"),
                                       ("two_producers_ns_per_op", "two_producers_floor_ns", "two_producers_ratio")] {
            let value = try #require(figures[figure]), base = try #require(figures[floor], "no \(floor)"), quotient = try #require(figures[ratio])
            #expect(base > 0 && base.isFinite)
            #expect(abs(quotient - value / base) < 1e-6 * quotient, "\(ratio) is \(figure) / \(floor)")
        }
        #expect(figures["interceptors_added_ns_per_op"] != nil && (figures["interceptors_floor_ns"] ?? 0) > 0)
        // How fast two busy threads ran beside each other: what the two-producer ratio is worth on this machine.
        let speed = try #require(figures["two_thread_speed"], "no two_thread_speed")
        #expect(speed > 0 && speed.isFinite)
        #expect(outcome.out.contains("two busy threads each ran at"), "\(outcome.out)")
        #expect(figures["raw_lttng_event_floor_ns"] == nil, "no session: no raw-event floor")
        #expect(outcome.out.contains("× its floor"), "\(outcome.out)")
        #expect(outcome.out.contains("limit ≤ 100 ns") && !outcome.out.contains("while a session records"),
                "no session: the untraced dispatch's limit\n\(outcome.out)")
    }

    /// `--backend metrics` prints what the metrics add against an unrecorded store in the same run, beside their floor,
    /// and per dispatch on each of two threads against one alone (a store each), and two producers on one store.
    @Test func theMetricsBackendReportsItsAddedCostAndHowItScales() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("micro.json").path
        let outcome = try await bench(["micro", "--only", "fire-and-forget", "--iterations", "4000", "--runs", "1",
                                       "--backend", "metrics", "--json", json])
        try #require(outcome.status == 0, "\(outcome.err)")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Double])
        for key in ["metrics_added_ns", "metrics_unrecorded_ns", "metrics_floor_ns", "metrics_floor_ratio",
                    "metrics_added_one_producer_ns", "metrics_added_two_producers_ns", "metrics_two_producers_ns",
                    "metrics_added_thread_alone_ns", "metrics_added_two_threads_ns", "metrics_unrecorded_thread_alone_ns",
                    "metrics_unrecorded_two_threads_ns"] {
            let value = try #require(figures[key], "missing \(key) in \(figures)")
            #expect(value.isFinite, "\(key) = \(value)")
        }
        #expect((figures["metrics_floor_ns"] ?? 0) > 0 && (figures["metrics_unrecorded_ns"] ?? 0) > 0)
        #expect(outcome.out.contains("limit ≤ +50 ns and ≤ 2×"), "\(outcome.out)")
        #expect(outcome.out.contains("on each of two threads (a store each, one set of metrics)")
                && outcome.out.contains("limit two ≤ one"), "\(outcome.out)")
        #expect(outcome.out.contains("with two producers on one store"), "\(outcome.out)")
    }

    /// `--only queued`: updaters queued behind a holder parked in the lane cost their round more than the round alone,
    /// and none is lost (micro checks the count); `--queued 0` measures the round alone (what `make walk` subtracts).
    @Test func queuedUpdatersAreMeasuredAgainstTheRoundAlone() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("micro.json").path
        let outcome = try await bench(["micro", "--only", "queued", "--queued", "256", "--iterations", "2000", "--runs", "3",
                                       "--backend", "none", "--json", json])
        try #require(outcome.status == 0, "\(outcome.err)")
        let figures = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Double])
        let round = try #require(figures["queued_round_ns"]), alone = try #require(figures["queued_round_alone_ns"])
        let added = try #require(figures["queued_updater_ns_per_op"])
        // 256 updaters, each waiting its brief while for the held lane (2 µs) before it queues: over half a millisecond
        // more per round, where the round's thread wake-ups vary by a tenth of that.
        #expect(round > alone && added > 0, "\(figures)")
        #expect(outcome.out.contains("queued updater (256 per round behind a parked holder)"), "\(outcome.out)")

        let alonePath = directory.appendingPathComponent("alone.json").path
        let roundAlone = try await bench(["micro", "--only", "queued", "--queued", "0", "--iterations", "1000", "--runs", "1",
                                          "--backend", "none", "--json", alonePath])
        try #require(roundAlone.status == 0, "\(roundAlone.err)")
        let aloneFigures = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: alonePath))) as? [String: Double])
        #expect(aloneFigures["queued_round_alone_ns"] != nil && aloneFigures["queued_updater_ns_per_op"] == nil, "\(aloneFigures)")
    }

    @Test func anUnknownCaseIsRejected() async throws {
        let outcome = try await bench(["micro", "--only", "teleport"])
        #expect(outcome.status != 0)
        #expect(outcome.err.contains("teleport"))
    }
}

/// Out-of-range numbers are refused before the run with one line naming the option — never a crash (huge Doubles once
/// trapped converting to nanoseconds), an abort (a 100 GB payload) or a run that cannot end.
@Suite struct HostileNumberTests {
    @Test(arguments: [
        (["--duration", "inf"], "--duration"), (["--duration", "1e300"], "--duration"), (["--duration", "nan"], "--duration"),
        (["--warmup", "inf"], "--warmup"), (["--warmup", "1e20"], "--warmup"), (["--rate", "1e-10"], "--rate"),
        (["--stall-ms", "1e300", "--stall-every", "1"], "--stall-ms"), (["--stall-every", "1e300"], "--stall-every"),
        (["--spin-us", "1e300"], "--spin-us"), (["--sleep-us", "1e300"], "--sleep-us"),
        (["--updater-spin-us", "1e20"], "--updater-spin-us"), (["--payload", "100000000000"], "--payload"),
        (["--producers", "100000000"], "--producers"), (["--count", "5", "--duration", "1"], "--count"),
    ] as [([String], String)])
    func hugeOrConflictingNumbersAreOneLineErrors(_ arguments: [String], option: String) async throws {
        let outcome = try await bench(["run", "--warmup", "0"] + arguments)
        #expect(outcome.status == 2, "\(arguments): status \(outcome.status) \(outcome.err.prefix(300))")
        let lines = outcome.err.split(separator: "\n").filter { $0.hasPrefix("Error:") }
        #expect(lines.count == 1 && lines[0].contains(option), "\(arguments): \(outcome.err.prefix(300))")
    }

    @Test func aCountSmallerThanTheWorkersMeasuresExactlyThatMany() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for count in [1, 10, 15] {
            let json = directory.appendingPathComponent("count-\(count).json").path
            let outcome = try await bench(["run", "-s", "side-effects", "--count", "\(count)", "--concurrency", "8", "--warmup", "0",
                                     "--trace-backend", "none", "--json", json])
            try #require(outcome.status == 0, "\(outcome.err)")
            let result = try JSONDecoder().decode(BenchResult.self, from: Data(contentsOf: URL(fileURLWithPath: json)))
            #expect(result.metrics["side_effect.end_to_end"]?.count == UInt64(count), "--count \(count)")
        }
    }

    /// An open loop whose next item is due after --duration stops at --duration (it once waited for it: a 0.05/s rate
    /// over 1 s ran for 160 s). A liveness bound, not a timing claim: at the lowest rate `run` takes (0.01/s) the next
    /// item is due 100 s in, and the bound, 90 s, leaves room for a loaded ThreadSanitizer run — a 0.05/s run took
    /// 70 s under TSan beside the rest of the suite (3.5 s alone), past the 60 s this bound used to be.
    @Test func anOpenLoopEndsAtItsDuration() async throws {
        let (outcome, seconds) = try await timedRunProcessSuspending(
            katanaBench, ["run", "-s", "updaters", "--rate", "0.01", "--duration", "1", "--warmup", "0", "--trace-backend", "none"])
        #expect(outcome.status == 0, "\(outcome.err)")
        #expect(seconds < 90, "the run did not stop at --duration")
    }
}

/// Output options: `-` is standard output; a symbolic link is followed, never replaced; a device, FIFO or directory is
/// never replaced (run as root, `--plot /dev/full` once turned the device node into an SVG file).
@Suite struct OutputFileTests {
    private let quick = ["run", "-s", "updaters", "--count", "200", "--warmup", "0", "--trace-backend", "none"]

    @Test func aSymbolicLinkIsFollowedForEveryOutput() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let hgrm = directory.appendingPathComponent("hgrm")
        try FileManager.default.createDirectory(at: hgrm, withIntermediateDirectories: true)
        var links: [(link: URL, target: URL)] = []
        for name in ["result.json", "chart.svg", "hgrm/updater.end_to_end.hgrm"] {
            let target = directory.appendingPathComponent("target-\(links.count)")
            try "old".write(to: target, atomically: true, encoding: .utf8)
            let link = directory.appendingPathComponent(name)
            try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
            links.append((link, target))
        }
        let outcome = try await bench(quick + ["--json", links[0].link.path, "--plot", links[1].link.path, "--hgrm", hgrm.path])
        try #require(outcome.status == 0, "\(outcome.err)")
        for (link, target) in links {
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == target.path, "\(link.lastPathComponent) was replaced")
            #expect(try String(contentsOf: target, encoding: .utf8) != "old", "\(target.lastPathComponent) was not written")
        }
    }

    @Test func aDeviceOrFifoIsNeverReplaced() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        for (option, path) in [("--plot", "/dev/null"), ("--json", "/dev/null"), ("--plot", fifo.path)] {
            let outcome = try await bench(quick + [option, path])
            #expect(outcome.status == 2 && outcome.err.contains("not a regular file"), "\(option) \(path): \(outcome.status) \(outcome.err)")
        }
        var info = stat()
        #expect(stat("/dev/null", &info) == 0 && (info.st_mode & S_IFMT) == S_IFCHR, "/dev/null is still a device")
    }

    @Test func aDashIsStandardOutput() async throws {
        let outcome = try await bench(quick + ["--json", "-"])
        try #require(outcome.status == 0, "\(outcome.err)")
        // Standard output is the JSON alone (the table goes to standard error).
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(outcome.out.utf8))
        #expect(outcome.err.contains("updater.end_to_end"))
        #expect(result.metrics["updater.end_to_end"]?.count == 200)
        #expect(!FileManager.default.fileExists(atPath: "-"))
    }
}

@Suite struct CompareMissingMetricTests {
    /// A metric one result has and the other lacks is bad input (exit 2), not a pass on the rest.
    @Test func aMetricMissingFromOneSideIsBadInput() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var full = result(p99: 100_000, throughput: 1_000)
        var partial = full
        partial.metrics = [:]
        full.metrics["side_effect.end_to_end"] = full.metrics["side_effect.end_to_end"]
        let a = directory.appendingPathComponent("a.json").path, b = directory.appendingPathComponent("b.json").path
        try Report.writeJSON(full, to: a)
        try Report.writeJSON(partial, to: b)
        let outcome = try await bench(["compare", a, b])
        #expect(outcome.status == 2, "\(outcome.out) \(outcome.err)")
        #expect(outcome.err.contains("missing from the current result"), "\(outcome.err)")
        let reversed = try await bench(["compare", b, a])
        #expect(reversed.status == 2 && reversed.err.contains("missing from the baseline"), "\(reversed.err)")
    }
}

/// `micro` and `workload` check their numbers and outputs before running, as `run` does.
@Suite struct OtherCommandsCheckTheirInputFirst {
    @Test(arguments: [
        (["micro", "--iterations", "1e20"], "--iterations"), (["micro", "--runs", "0"], "--runs"),
        (["micro", "--payload", "100000000000"], "--payload"), (["micro", "--json", "/nonexistent-dir/x.json"], "/nonexistent-dir"),
        (["micro", "--only", "queued", "--queued", "257"], "--queued"), (["micro", "--queued", "-1"], "--queued"),
        (["micro", "--only", "side-effects", "--in-flight", "0"], "--in-flight"), (["micro", "--in-flight", "5001"], "--in-flight"),
        (["micro", "--only", "window", "--backend", "flight-recorder", "--rate", "0"], "--rate"),
        (["micro", "--only", "window", "--backend", "flight-recorder", "--threads", "100000"], "--threads"),
        (["micro", "--only", "window", "--backend", "none"], "--backend flight-recorder"),
        (["workload", "--rounds", "0"], "--rounds"), (["workload", "--children", "100000"], "--children"),
        (["workload", "--wait-for-session", "inf"], "--wait-for-session"), (["workload", "--child-budget-ms", "-1"], "--child-budget-ms"),
    ] as [([String], String)])
    func badNumbersAndOutputsFailAtOnce(_ arguments: [String], mention: String) async throws {
        let outcome = try await bench(arguments)
        #expect(outcome.status == 2, "\(arguments): \(outcome.status)")
        #expect(outcome.err.contains(mention), "\(arguments): \(outcome.err.prefix(300))")
        #expect(outcome.out.isEmpty, "\(arguments) measured before refusing: \(outcome.out.prefix(200))")
    }
}

@Suite struct MannWhitneyTests {
    @Test func fullySeparatedSamplesGetTheSmallestPossiblePInTheirDirectionOnly() {
        let low: [Double] = [1, 2, 3, 4, 5], high: [Double] = [6, 7, 8, 9, 10]
        // One split of the 252 puts all five highest ranks on one side.
        #expect(abs(MannWhitney.pGreater(high, than: low) - 1.0 / 252) < 1e-12)
        #expect(MannWhitney.pGreater(low, than: high) == 1)
        #expect(abs(MannWhitney.smallestP(5, 5) - 1.0 / 252) < 1e-12)
        #expect(MannWhitney.smallestP(3, 3) >= 0.05, "3 vs 3 can never reach 0.05: compare must fall back to thresholds")
    }

    @Test func identicalOrInterleavedSamplesAreNotSignificant() {
        #expect(MannWhitney.pGreater([5, 5, 5, 5, 5], than: [5, 5, 5, 5, 5]) == 1)
        let p = MannWhitney.pGreater([1, 4, 5, 8, 9], than: [2, 3, 6, 7, 10])
        #expect(p > 0.3 && p < 0.7, "\(p)")
    }

    @Test func tiesShareMidranks() {
        #expect(MannWhitney.midranks([10, 20, 20, 30]) == [1, 2.5, 2.5, 4])
    }

    @Test func theNormalApproximationAgreesWithTheExactTestWhereBothApply() {
        // 12 vs 12: 2.7M splits, so the approximation; the same shift on 8 vs 8 (12,870 splits) is exact.
        let a = (0..<12).map { Double($0) }, b = (0..<12).map { Double($0) + 4.5 }
        let approximate = MannWhitney.pGreater(b, than: a)
        #expect(approximate < 0.05 && approximate > 0.0001, "\(approximate)")
        let exact = MannWhitney.pGreater(Array(b.prefix(8)), than: Array(a.prefix(8)))
        let exactSmaller = MannWhitney.pGreater(Array(a.prefix(8)), than: Array(b.prefix(8)))
        #expect(exact < 0.05 && exactSmaller > 0.95, "\(exact) \(exactSmaller)")
    }
}

/// A result of several repetitions, one p99 and throughput per repetition.
func repeatedResult(p99s: [UInt64], throughputs: [Double]? = nil, parameters: [String: BenchResult.Parameter] = ["workers": "1", "loop": "closed"]) -> BenchResult {
    let runs = p99s.enumerated().map { index, p99 in
        var one = result(p99: p99, throughput: throughputs?[index] ?? 1_000)
        one.parameters = parameters
        return one
    }
    var combined = runs[0]
    combined.repetitions = runs.map { .init(durationSeconds: $0.durationSeconds, throughput: $0.throughput, metrics: $0.metrics) }
    return combined
}

@Suite struct NoiseAwareCompareTests {
    func compare(_ base: BenchResult, _ current: BenchResult, _ extra: [String] = []) async throws -> (status: Int32, out: String, err: String) {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = directory.appendingPathComponent("a.json").path, b = directory.appendingPathComponent("b.json").path
        try Report.writeJSON(base, to: a)
        try Report.writeJSON(current, to: b)
        return try await bench(["compare", a, b] + extra)
    }

    @Test func aConsistentSlowdownBeyondTheThresholdIsARegression() async throws {
        let outcome = try await compare(repeatedResult(p99s: [100_000, 104_000, 97_000, 101_000, 99_000]),
                                  repeatedResult(p99s: [131_000, 127_000, 135_000, 129_000, 133_000]))
        #expect(outcome.status == 1, "\(outcome.out)\(outcome.err)")
        let row = outcome.out.split(separator: "\n").first { $0.hasPrefix("side_effect.end_to_end.p99") } ?? ""
        #expect(row.contains("REGRESSION") && row.contains("0.004"), "\(row)")
    }

    @Test func aMedianShiftThatTheNoiseExplainsIsNotSignificant() async throws {
        // Medians 100 µs vs 200 µs, but the repetitions interleave: the test does not call it.
        let outcome = try await compare(repeatedResult(p99s: [100_000, 200_000, 100_000, 210_000, 90_000]),
                                  repeatedResult(p99s: [200_000, 100_000, 220_000, 95_000, 205_000]))
        #expect(outcome.status == 0, "\(outcome.out)")
        #expect(outcome.out.contains("not significant"))
    }

    @Test func singleRunsFallBackToThresholdsAndSaySo() async throws {
        let outcome = try await compare(result(p99: 100_000, throughput: 1_000), result(p99: 150_000, throughput: 1_000))
        #expect(outcome.status == 1)
        #expect(outcome.out.contains("1 vs 1 repetitions") && outcome.out.contains("thresholds alone decide"), "\(outcome.out)")
    }

    @Test func perMetricThresholdsOverrideTheDefault() async throws {
        let base = repeatedResult(p99s: [100_000, 101_000, 99_000, 100_500, 99_500])
        let slower = repeatedResult(p99s: [120_000, 121_000, 119_000, 120_500, 119_500])
        #expect(try await compare(base, slower).status == 1)
        #expect(try await compare(base, slower, ["--threshold", "side_effect.end_to_end.p99=30%"]).status == 0)
        #expect(try await compare(base, slower, ["--threshold", "50", "--threshold", "side_effect.end_to_end.p99=5%"]).status == 1)
        let unknown = try await compare(base, slower, ["--threshold", "no.such.metric=5%"])
        #expect(unknown.status == 2 && unknown.err.contains("no.such.metric"), "\(unknown.err)")
    }

    @Test func differentParametersAreRefusedUnlessAllowed() async throws {
        let base = repeatedResult(p99s: [100_000, 101_000, 99_000, 100_500, 99_500])
        var other = repeatedResult(p99s: [100_000, 101_000, 99_000, 100_500, 99_500], parameters: ["workers": "8", "loop": "closed"])
        let refused = try await compare(base, other)
        #expect(refused.status == 2 && refused.err.contains("workers 1 vs 8"), "\(refused.err)")
        let allowed = try await compare(base, other, ["--allow-different-parameters"])
        #expect(allowed.status == 0 && allowed.out.contains("Parameters differ (allowed): workers 1 vs 8"), "\(allowed.out)")
        other.parameters = base.parameters
        other.environment.buildConfiguration = base.environment.buildConfiguration == "debug" ? "release" : "debug"
        #expect(try await compare(base, other).status == 2, "a debug build is not compared with a release build silently")
    }

    @Test func markdownIsATableForAPullRequest() async throws {
        let outcome = try await compare(repeatedResult(p99s: [100_000, 104_000, 97_000, 101_000, 99_000]),
                                  repeatedResult(p99s: [131_000, 127_000, 135_000, 129_000, 133_000]), ["--format", "markdown"])
        #expect(outcome.status == 1)
        let lines = outcome.out.split(separator: "\n").map(String.init)
        #expect(lines.first == "### katana-bench compare: **1 regression**", "\(lines.first ?? "")")
        #expect(lines.contains("| metric | baseline | current | change | threshold | p | verdict |"))
        #expect(lines.contains { $0.hasPrefix("| `side_effect.end_to_end.p99` |") && $0.hasSuffix("| **REGRESSION** |") }, "\(outcome.out)")
    }

    @Test func aVersionOneResultIsOneRepetition() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        var old = result(p99: 100_000, throughput: 1_000)
        old.schema = "katana-bench/1"
        // katana-bench/1 wrote every parameter as a string; a typed 0 and a "0.0" are the same value.
        #expect(BenchResult.Parameter.text("0.0") == .integer(0) && BenchResult.Parameter.text("8") == .integer(8))
        #expect(BenchResult.Parameter.text("closed") != .text("open") && BenchResult.Parameter.number(2.5) != .integer(2))
        let a = directory.appendingPathComponent("old.json").path
        try Report.writeJSON(old, to: a)
        #expect(!(try String(contentsOfFile: a, encoding: .utf8)).contains("repetitions"))
        let outcome = try await bench(["compare", a, a])
        #expect(outcome.status == 0 && outcome.out.contains("1 vs 1 repetitions"), "\(outcome.out)\(outcome.err)")
    }

    @Test func hostileInputsAreOneLineAndExitTwo() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("good.json").path
        try Report.writeJSON(result(p99: 100_000, throughput: 1_000), to: good)
        var text = try String(contentsOfFile: good, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"count\" : 100", with: "\"count\" : -100")
        let negative = directory.appendingPathComponent("negative.json").path
        try text.write(toFile: negative, atomically: true, encoding: .utf8)
        let fifo = directory.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        for (input, message) in [(negative, "metrics.side_effect.end_to_end.count is negative"), (directory.path, "is a directory"),
                                 (fifo, "not a regular file"), (directory.appendingPathComponent("none").path, "no such file")] {
            let outcome = try await bench(["compare", good, input])
            #expect(outcome.status == 2, "\(input): \(outcome.status)")
            #expect(outcome.err.contains(message) && outcome.err.split(separator: "\n").count == 1, "\(outcome.err)")
        }
    }
}

@Suite struct RepeatTests {
    @Test func eachRepetitionIsKeptAndTheLatenciesCoverThemAll() async throws {
        let outcome = try await bench(["run", "-s", "updaters", "--producers", "2", "--count", "300", "--warmup", "0",
                                 "--repeat", "3", "--trace-backend", "none", "--json", "-"])
        try #require(outcome.status == 0, "\(outcome.err)")
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(outcome.out.utf8))
        let repetitions = try #require(result.repetitions)
        #expect(repetitions.count == 3)
        #expect(repetitions.allSatisfy { $0.metrics["updater.end_to_end"]?.count == 300 })
        #expect(result.metrics["updater.end_to_end"]?.count == 900)
        #expect(outcome.err.contains("3 repetitions"))
        #expect(try await bench(["run", "--repeat", "0"]).status == 2)
    }
}

@Suite struct InterruptionTests {
    /// Ctrl-C mid-run: what was measured is printed and written (marked interrupted), and the exit status is 130 —
    /// not a silent death with nothing to show for the run.
    @Test func ctrlCReportsWhatWasMeasuredAndExits130() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("partial.json").path
        let (outcome, seconds) = try await timedRunProcessSuspending(
            katanaBench, ["run", "-s", "updaters", "--duration", "600", "--warmup", "0", "--repeat", "3", "--trace-backend", "none",
                          "--json", json],
            whileRunning: { interruptWhenHandled($0, after: 1) })
        #expect(seconds < 300, "the run did not stop at Ctrl-C")
        #expect(outcome.status == 130, "\(outcome.status): \(outcome.err)")
        #expect(outcome.out.contains("INTERRUPTED (Ctrl-C)") && outcome.out.contains("updater.end_to_end"), "\(outcome.out)")
        #expect(outcome.err.contains("interrupted: finishing the items in hand"))
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(contentsOf: URL(fileURLWithPath: json)))
        #expect(result.interrupted == true)
        #expect(result.repetitions?.count == 1, "the remaining repetitions are skipped")
        #expect((result.metrics["updater.end_to_end"]?.count ?? 0) > 0)
        #expect(result.durationSeconds < 600)
    }

    /// Interrupted in a later repetition, the combined result is marked interrupted too (it took the first
    /// repetition's mark, which was not).
    @Test func ctrlCInALaterRepetitionMarksTheWholeResult() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let json = directory.appendingPathComponent("partial.json").path
        let outcome = try await runProcessSuspending(katanaBench, ["run", "-s", "updaters", "--count", "200", "--warmup", "0",
                                                                   "--repeat", "1000", "--trace-backend", "none", "--json", json],
                                                     whileRunning: { interruptWhenHandled($0, after: 3) })
        #expect(outcome.status == 130, "\(outcome.status): \(outcome.err)")
        let result = try JSONDecoder().decode(BenchResult.self, from: Data(contentsOf: URL(fileURLWithPath: json)))
        // Usually several repetitions are done by then (on a loaded machine, or under ThreadSanitizer, maybe only the
        // first): the mark must be there either way.
        let repetitions = try #require(result.repetitions?.count)
        #expect(repetitions < 1_000, "\(repetitions) repetitions: the run did not stop")
        #expect(result.interrupted == true, "the combined result of an interrupted run says so (\(repetitions) repetitions)")
        #expect(outcome.out.contains("INTERRUPTED"))
    }

    @Test func anOpenLoopBelowItsRateSaysSo() async throws {
        // Every updater spins 1 ms, so one lane cannot apply more than ~1,000/s: 100,000/s is out of reach.
        let outcome = try await bench(["run", "-s", "updaters", "--rate", "100000", "--duration", "0.5", "--warmup", "0",
                                 "--updater-spin-us", "1000", "--trace-backend", "none"])
        #expect(outcome.status == 0, "\(outcome.err)")
        #expect(outcome.err.contains("warning: --rate asked for 100000/s and the run achieved"), "\(outcome.err)")
        // The control: a rate any machine keeps, over long enough that the run's start and end are a small part of it
        // (at 200/s over 0.5 s a loaded CI machine came out at 94 %).
        let met = try await bench(["run", "-s", "updaters", "--rate", "20", "--duration", "3", "--warmup", "0", "--trace-backend", "none"])
        #expect(met.status == 0 && !met.err.contains("warning"), "\(met.err)")
    }
}

@Suite struct HistogramEncodingTests {
    func sample() -> LatencyHistogram {
        var histogram = makeHistogram()
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50_000 { _ = histogram.record(UInt64.random(in: 50...2_000_000, using: &generator)) }
        _ = histogram.record(59_000_000_000, count: 3)
        return histogram
    }

    @Test func encodingRoundTripsEveryCount() async throws {
        try await offThePool { try Self().roundTrip() }
    }

    func roundTrip() throws {
        let histogram = sample()
        let decoded = try HistogramEncoding.decode(HistogramEncoding.encode(histogram))
        #expect(decoded.totalCount == histogram.totalCount)
        #expect(decoded.max == histogram.max && decoded.min == histogram.min)
        // Within each bucket's precision (the encoding keeps counts per bucket, as HdrHistogram's does: the exact
        // maximum recorded becomes its bucket's).
        for percentile in [0.0, 10, 50, 90, 99, 99.9, 99.99, 100] {
            #expect(histogram.valuesAreEquivalent(decoded.valueAtPercentile(percentile), histogram.valueAtPercentile(percentile)), "p\(percentile)")
        }
        #expect(Array(decoded.recordedValues()).map(\.count) == Array(histogram.recordedValues()).map(\.count))
        // The counts read bucket by bucket are the histogram's own, in its own order (its iterator is the reference).
        var iterated = histogram.allValues().map(\.count)
        while iterated.last == 0 { iterated.removeLast() }
        #expect(HistogramEncoding.countsArray(histogram) == iterated)
        #expect(try HistogramEncoding.decode(HistogramEncoding.encode(makeHistogram())).totalCount == 0)
    }

    /// Read by an independent decoder — Python's zlib and struct, following HdrHistogram's V2 layout — so other
    /// HdrHistogram tools read what katana-bench writes.
    @Test func anIndependentDecoderReadsTheEncoding() async throws {
        let histogram = sample()
        let script = """
            import base64, struct, sys, zlib
            raw = base64.b64decode(sys.argv[1])
            cookie, length = struct.unpack(">ii", raw[:8])
            assert cookie == 0x1c849314, hex(cookie)
            body = zlib.decompress(raw[8:8 + length])
            cookie, payload, offset, digits, lowest, highest, ratio = struct.unpack(">iiiiqqd", body[:40])
            assert cookie == 0x1c849313 and offset == 0 and ratio == 1.0, (hex(cookie), offset, ratio)
            data, position, total, index, last = body[40:40 + payload], 0, 0, 0, -1
            while position < len(data):
                shift = value = 0
                while True:
                    byte = data[position]; position += 1
                    value |= (byte & 0x7f) << shift; shift += 7
                    if byte < 0x80: break
                value = (value >> 1) ^ -(value & 1)
                if value < 0: index -= value
                else:
                    if value: total += value; last = index
                    index += 1
            print(digits, lowest, highest, total, last)
            """
        let outcome = try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script, HistogramEncoding.encode(histogram)])
        try #require(outcome.status == 0, "\(outcome.err)")
        let fields = outcome.out.split(separator: " ").map { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1 }
        #expect(fields[0] == 3 && fields[1] == 1 && fields[2] == 60_000_000_000, "\(outcome.out)")
        #expect(fields[3] == Int(histogram.totalCount))
        // The last non-zero count's index is the one the 59 s value falls in.
        let layout = HistogramEncoding.Layout(lowest: 1, digits: .three)
        #expect(histogram.valuesAreEquivalent(layout.value(at: fields[4]), 59_000_000_000))
    }

    @Test func damagedEncodingsAreErrorsNotCrashes() async throws {
        try await offThePool { Self().damaged() }
    }

    func damaged() {
        let good = HistogramEncoding.encode(sample())
        var bytes = Array(Data(base64Encoded: good)!)
        var failures = 0
        for text in ["", "not base64!", "AAAA", String(good.prefix(good.count / 2))] {
            do { _ = try HistogramEncoding.decode(text) } catch { failures += 1 }
        }
        #expect(failures == 4)
        // Every single-byte corruption of the header and of the payload: an error or a histogram, never a trap.
        for position in stride(from: 0, to: bytes.count, by: max(bytes.count / 200, 1)) {
            let original = bytes[position]
            bytes[position] = original ^ 0xff
            _ = try? HistogramEncoding.decode(Data(bytes).base64EncodedString())
            bytes[position] = original
        }
    }
}

@Suite struct MergeAndContextTests {
    @Test func resultsCarryTheirContextAndMergeIntoOne() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let a = directory.appendingPathComponent("a.json").path, b = directory.appendingPathComponent("b.json").path
        let merged = directory.appendingPathComponent("merged.json").path
        let common = ["run", "-s", "updaters", "--producers", "2", "--count", "400", "--warmup", "0", "--trace-backend", "none"]
        try #require(try await bench(common + ["--repeat", "2", "--json", a]).status == 0)
        try #require(try await bench(common + ["--json", b]).status == 0)
        let first = try Compare.load(a)
        let context = try #require(first.context)
        #expect(context.commandLine.contains("--repeat") && context.loadAverage.count == 3 && !context.date.isEmpty)
        #expect(first.parameters["workers"] == .integer(2), "parameters are typed")
        #expect(try String(contentsOfFile: a, encoding: .utf8).contains("\"workers\" : 2"))

        let outcome = try await bench(["merge", a, b, "-o", merged])
        try #require(outcome.status == 0, "\(outcome.err)")
        let result = try Compare.load(merged)
        #expect(result.repetitions?.count == 3)
        #expect(result.metrics["updater.end_to_end"]?.count == 1_200)
        let histogram = try HistogramEncoding.decode(try #require(result.histograms?["updater.end_to_end"]))
        #expect(histogram.totalCount == 1_200)
        #expect(outcome.out.contains("3 repetitions"))

        // Different parameters, a katana-bench/1 result, a single input: refused.
        let other = directory.appendingPathComponent("other.json").path
        try #require(try await bench(["run", "-s", "updaters", "--producers", "3", "--count", "300", "--warmup", "0", "--trace-backend", "none", "--json", other]).status == 0)
        let refused = try await bench(["merge", a, other, "-o", merged])
        #expect(refused.status == 2 && refused.err.contains("workers 2 vs 3"), "\(refused.err)")
        var old = result
        old.histograms = nil
        old.repetitions = nil
        old.schema = "katana-bench/1"
        let oldPath = directory.appendingPathComponent("old.json").path
        try Report.writeJSON(old, to: oldPath)
        let noHistograms = try await bench(["merge", a, oldPath, "-o", merged])
        #expect(noHistograms.status == 2 && noHistograms.err.contains("no encoded histograms"), "\(noHistograms.err)")
        #expect(try await bench(["merge", a, "-o", merged]).status == 2)
    }

    @Test func traceWithoutLTTngEventsIsRefusedUpFront() async throws {
        let outcome = try await bench(["run", "--trace", "/tmp/never-\(UUID().uuidString)", "--trace-backend", "none"])
        #expect(outcome.status == 2 && outcome.err.contains("cannot be combined with --trace-backend none"), "\(outcome.err)")
    }
}

@Suite struct NegativeNumberTests {
    /// A negative number reaches the option's range check (it was taken for an option: "Missing value").
    @Test(arguments: [(["run", "--producers", "-1"], "--producers must be from 1 to 4096 (got -1)"),
                      (["run", "--duration", "-2"], "--duration must be from 0.001 to 86400.0 s (got -2.0)"),
                      (["micro", "--runs", "-3"], "--runs must be from 1"),
                      (["workload", "--rounds", "-4"], "--rounds must be from")])
    func negativeNumbersAreOutOfRangeNotMissing(_ arguments: [String], _ message: String) async throws {
        let outcome = try await bench(arguments)
        #expect(outcome.status == 2, "\(arguments): \(outcome.status)")
        #expect(outcome.err.contains(message) && !outcome.err.contains("Missing value"), "\(outcome.err)")
    }

    @Test func aNegativeThresholdIsNamed() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("a.json").path
        try Report.writeJSON(result(p99: 100_000, throughput: 1_000), to: path)
        let outcome = try await bench(["compare", path, path, "--threshold", "-5"])
        #expect(outcome.status == 2 && outcome.err.contains("percentage from 0 to 10000") && outcome.err.contains("got -5"), "\(outcome.err)")
    }
}
