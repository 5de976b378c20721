import ArgumentParser
import Foundation
import KatanaTraceToolkit
import Glibc
import Katana
import KatanaFlightRecorder
import KatanaTrace
import Synchronization

/// Stresses a Store with one scenario and reports latency histograms.
struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stress a Store with a scenario and print latency histograms (the default command).",
        discussion: """
        Closed loop (default): each producer/worker sends its next item as soon as the previous one resolved.
        Open loop (--rate N): items are due at fixed intervals; latency counts from when an item was due, so a
        stall shows up in the percentiles instead of hiding (no coordinated omission).
        """)

    /// `--backlog-limit`: the store's default, a number, or none.
    enum BacklogLimit: ExpressibleByArgument, Equatable, CustomStringConvertible {
        case storeDefault, none, items(Int)
        init?(argument: String) {
            switch argument {
            case "default": self = .storeDefault
            case "none": self = .none
            default:
                guard let n = Int(argument), n > 0 else { return nil }
                self = .items(n)
            }
        }
        var limit: Int? {
            switch self {
            case .storeDefault: StoreConfiguration.defaultBacklogLimit
            case .none: nil
            case let .items(n): n
            }
        }
        var description: String { limit.map(String.init) ?? "none" }
        static var defaultValueDescription: String { "default" }
    }

    @Option(name: .shortAndLong, help: ArgumentHelp("The scenario: \(BenchScenarios.all.map { $0.summary.isEmpty ? $0.name : "\($0.name) (\($0.summary))" }.joined(separator: "; ")).",
                                                   valueName: "name"))
    var scenario: String = BenchScenarios.defaultName
    @Option(name: .customLong("option"), help: ArgumentHelp("A scenario's own setting, key=value (repeat for several); recorded among the parameters.", valueName: "key=value"))
    var options: [String] = []
    @Option(parsing: .unconditional, help: "Producer tasks dispatching state updaters (updaters scenario).")
    var producers: Int = 2
    @Option(parsing: .unconditional, help: "flood: threads that fire-and-forget updaters as fast as they can, timing each dispatch call, while --concurrency workers run awaiting side effects.")
    var flooders: Int = 4
    @Option(help: "The store's backlog limit (flood policy): a positive number, none, or default (\(StoreConfiguration.defaultBacklogLimit)).")
    var backlogLimit: BacklogLimit = .storeDefault
    @Option(parsing: .unconditional, help: "Concurrent workers, each keeping one side effect in flight (side-effects, mixed).")
    var concurrency: Int = 8
    @Option(parsing: .unconditional, help: "Top-level dispatches to measure, split exactly across producers/workers (not with --duration).")
    var count: Int?
    @Option(parsing: .unconditional, help: "Seconds to measure (default 5 when --count is not given).")
    var duration: Double?
    @Option(parsing: .unconditional, help: "Seconds of warm-up before measuring (not recorded).")
    var warmup: Double = 1
    @Option(parsing: .unconditional, help: "Open loop: top-level dispatches per second in total (default: closed loop).")
    var rate: Double?
    @Option(parsing: .unconditional, help: "Updaters each side effect dispatches and awaits.")
    var updatersPerSideEffect: Int = 4
    @Option(parsing: .unconditional, help: "Simulated CPU work per side effect, µs (busy spin).")
    var spinUs: Double = 0
    @Option(parsing: .unconditional, help: "Simulated I/O per side effect, µs (Task.sleep).")
    var sleepUs: Double = 0
    @Option(parsing: .unconditional, help: "Simulated work inside each updater, µs (busy spin; slows the whole lane).")
    var updaterSpinUs: Double = 0
    @Option(parsing: .unconditional, help: "Listeners subscribed to the store.")
    var listeners: Int = 1
    @Option(parsing: .unconditional, help: "Bytes of payload in the state (copied when listeners keep old states).")
    var payload: Int = 0
    @Option(parsing: .unconditional, help: "Inject a stall: every N seconds one updater spins for --stall-ms (to see it in open-loop percentiles).")
    var stallEvery: Double?
    @Option(parsing: .unconditional, help: "Length of an injected stall, ms.")
    var stallMs: Double = 50
    @Option(name: .customLong("trace-backend"), help: "Trace backend: default (LTTng when compiled in), lttng, none, flight-recorder, lttng+flight-recorder, metrics.")
    var traceBackend: Micro.Backend = .default
    @Option(name: .customLong("flight-recorder-dump"), help: "With the flight recorder as (one of) the trace backend(s): dump its recent events into this folder when the run ends.")
    var flightRecorderDump: String?
    @Option(name: .customLong("repeat"), parsing: .unconditional, help: "Independent repetitions (each a fresh store, warm-up and measured phase); --json keeps each one's figures so `compare` can test significance (use 5 or more).")
    var repetitions: Int = 1
    @OptionGroup var outputs: ResultOutputs
    @Option(help: "Draw this earlier result (--json) on the --plot chart, dashed, to compare the shapes.")
    var baseline: String?
    @Option(name: .customLong("trace"), help: "Record the run with LTTng into this directory: the run is the command `katana-trace record` records (katana:*, vpid/vtid/procname).")
    var traceDirectory: String?

    /// The selected scenario (validated).
    var selected: BenchScenario { BenchScenarios.named(scenario)! }

    /// `--option` pairs.
    var scenarioOptions: [String: String] {
        Dictionary(options.map { option in
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            return (parts[0], parts.count > 1 ? parts[1] : "")
        }, uniquingKeysWith: { _, last in last })
    }

    var knobs: Knobs {
        Knobs(producers: producers, concurrency: concurrency, flooders: flooders, backlogLimit: backlogLimit.limit,
              updatersPerSideEffect: updatersPerSideEffect, spinUs: spinUs, sleepUs: sleepUs, updaterSpinUs: updaterSpinUs,
              listeners: listeners, payload: payload, stallEvery: stallEvery, stallMs: stallMs)
    }

    func validate() throws {
        guard BenchScenarios.named(scenario) != nil else {
            throw ValidationError("no scenario \(scenario) (choose from \(BenchScenarios.all.map(\.name).joined(separator: ", ")))")
        }
        for option in options where !option.contains("=") || option.hasPrefix("=") {
            throw ValidationError("--option \(option): write key=value")
        }
        // Every number within a range the bench can honour: out of range is one line naming the option, never a
        // crash (a huge Double once trapped converting to UInt64 nanoseconds) or a run that cannot end.
        try checkRange(producers, 1...4_096, "--producers")
        try checkRange(concurrency, 1...4_096, "--concurrency")
        try checkRange(flooders, 1...256, "--flooders")
        if let count { try checkRange(count, 1...1_000_000_000, "--count") }
        if count != nil, duration != nil {
            throw ValidationError("--count and --duration are exclusive: measure a number of items or a time, not both")
        }
        if let duration { try checkRange(duration, 0.001...86_400, "--duration", unit: "s") }
        try checkRange(warmup, 0...3_600, "--warmup", unit: "s")
        if let rate { try checkRange(rate, 0.01...100_000_000, "--rate", unit: "per second") }
        try checkRange(updatersPerSideEffect, 0...100_000, "--updaters-per-side-effect")
        try checkRange(spinUs, 0...10_000_000, "--spin-us", unit: "µs")
        try checkRange(sleepUs, 0...10_000_000, "--sleep-us", unit: "µs")
        try checkRange(updaterSpinUs, 0...10_000_000, "--updater-spin-us", unit: "µs")
        try checkRange(stallMs, 0...60_000, "--stall-ms", unit: "ms")
        if let stallEvery { try checkRange(stallEvery, 0.001...3_600, "--stall-every", unit: "s") }
        try checkRange(listeners, 0...10_000, "--listeners")
        try checkRange(payload, 0...(1 << 30), "--payload", unit: "bytes")
        try checkRange(repetitions, 1...1_000, "--repeat")
        // Fail before the run, not after it, when an output cannot be written.
        try outputs.check()
        if let baseline {
            guard outputs.plot != nil else { throw ValidationError("--baseline draws an earlier run on the --plot chart: give --plot too") }
            _ = try Run.baselineHistograms(baseline)
        }
        if traceDirectory != nil {
            guard traceBackend != .none, traceBackend != .flightRecorder, traceBackend != .metrics else { throw ValidationError("--trace records the LTTng events of the run: it cannot be combined with --trace-backend none, flight-recorder or metrics") }
            _ = try LinkedLTTng.require()
        }
        if let flightRecorderDump {
            guard traceBackend.recordsInProcess else {
                throw ValidationError("--flight-recorder-dump needs --trace-backend flight-recorder or lttng+flight-recorder")
            }
            if FileManager.default.fileExists(atPath: (flightRecorderDump as NSString).appendingPathComponent("metadata")) {
                throw ValidationError("--flight-recorder-dump: \(flightRecorderDump) already holds a trace")
            }
        }
    }

    func run() async throws {
        if let traceDirectory {
            // This same run, without --trace, as the command `katana-trace record` records: one way to record for
            // the toolkit and the bench (the session, its daemon and its cleanup on any exit are the recorder's).
            var options = RecordingOptions()
            options.output = traceDirectory
            options.command = [Self.executable] + Self.arguments(dropping: "--trace")
            throw ExitCode(LTTngRecording.record(options))
        }
        Interruption.shared.install()
        let (result, histograms) = try await repeated()
        if let flightRecorderDump {
            do {
                let events = try FlightRecorder.shared.dump(to: flightRecorderDump)
                FileHandle.standardError.write(Data("flight recorder: \(events) events dumped to \(flightRecorderDump)\n".utf8))
            } catch {
                throw ValidationError("--flight-recorder-dump: \(error)")
            }
        }
        outputs.show(Report.table(result))
        if let rate, let achieved = result.throughput["top_level_per_second"], achieved < rate * 0.95, !Interruption.shared.requested {
            FileHandle.standardError.write(Data(String(
                format: "katana-bench: warning: --rate asked for %.0f/s and the run achieved %.0f/s (%.0f%%): the machine could not keep up, so latencies include the growing backlog\n",
                rate, achieved, achieved / rate * 100).utf8))
        }
        try outputs.write(result, histograms: histograms, title: "katana-bench \(result.scenario)",
                          baseline: { try baseline.map(Run.baselineHistograms) },
                          baselineName: baseline.map { "baseline \(($0 as NSString).lastPathComponent)" } ?? "")
        if Interruption.shared.requested { throw ExitCode(130) }
    }

    /// This process's executable (a user's bench binary, for KatanaBench).
    static var executable: String {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    }

    /// This process's arguments without `option` and its value (`--trace DIR` or `--trace=DIR`).
    static func arguments(dropping option: String) -> [String] {
        var kept: [String] = []
        var arguments = CommandLine.arguments.dropFirst()[...]
        while let argument = arguments.popFirst() {
            if argument == option { _ = arguments.popFirst(); continue }
            if argument.hasPrefix(option + "=") { continue }
            kept.append(argument)
        }
        return kept
    }

    /// `--repeat N` runs, combined: latencies over every sample, throughput the median repetition's, each
    /// repetition's figures kept for `compare`.
    func repeated() async throws -> (BenchResult, [Metric: LatencyHistogram]) {
        let context = BenchResult.Context.current()
        var runs: [BenchResult] = []
        var histograms: [Metric: LatencyHistogram] = [:]
        for index in 0..<repetitions {
            if repetitions > 1, isatty(STDERR_FILENO) == 1 {
                FileHandle.standardError.write(Data("repetition \(index + 1) of \(repetitions)\n".utf8))
            }
            let (result, own) = try await execute()
            runs.append(result)
            for (metric, histogram) in own { histograms[metric, default: makeHistogram()].add(histogram) }
            if Interruption.shared.requested { break }
        }
        // What a sample costs is the machine's, not a repetition's: measured once, after the measured phases (a
        // million clock reads and records; per repetition it was most of a short repetition's time).
        let harness = BenchResult.Harness(sampleCostNanoseconds: Report.measureSampleCost())
        for index in runs.indices { runs[index].harness = harness }
        return (BenchResult.ofRepetitions(runs, histograms: histograms, context: context), histograms)
    }

    typealias Repetition = BenchResult.Repetition

    /// An earlier result's histograms, for `--baseline`.
    static func baselineHistograms(_ path: String) throws -> [Metric: LatencyHistogram] {
        let result: BenchResult
        do {
            result = try Compare.load(path)
        } catch let error as CompareError {
            throw ValidationError("--baseline: \(error)")
        }
        let decoded: [String: LatencyHistogram]?
        do {
            decoded = try result.decodedHistograms()
        } catch {
            throw ValidationError("--baseline: \(path): \(error)")
        }
        guard let decoded else {
            throw ValidationError("--baseline: \(path) carries no histograms (a katana-bench/1 result); re-run it with this katana-bench")
        }
        var histograms: [Metric: LatencyHistogram] = [:]
        for (name, histogram) in decoded {
            if let metric = BenchMetric.named(name) { histograms[metric] = histogram }
        }
        return histograms
    }

    func execute() async throws -> (BenchResult, [Metric: LatencyHistogram]) {
        let latencies = RunLatencies()
        let backend = try traceBackend.make()
        let scenario = selected
        let workers = scenario.workersFromProducers ? producers : concurrency
        let context = BenchContext(workers: workers, options: scenarioOptions, traceBackend: backend, latencies: latencies, knobs: knobs)
        let workload: BenchWorkload
        do {
            workload = try await scenario.setup(context)
        } catch {
            throw ValidationError("scenario \(scenario.name): its setup failed: \(error)")
        }
        let measureSeconds = count == nil ? (duration ?? 5) : nil
        let progress = Progress(enabled: isatty(STDERR_FILENO) == 1)

        // Warm-up: the same loop, nothing recorded.
        if warmup > 0 {
            _ = try await drive(workload, endToEnd: scenario.endToEnd, latencies: latencies, workers: workers,
                                until: .seconds(warmup), progress: nil)
        }
        latencies.setRecording(true)
        let started = nowNanoseconds()
        workload.whenMeasuring?(measureSeconds.map { started &+ UInt64($0 * 1e9) })
        let completed = try await drive(workload, endToEnd: scenario.endToEnd, latencies: latencies, workers: workers,
                                        until: measureSeconds.map { .seconds($0) } ?? .count(count!), progress: progress)
        // Every sample in (fire-and-forget work landed, helpers stopped) before merging.
        let counts = try await workload.finish?() ?? [:]
        let elapsed = Double(nowNanoseconds() - started) / 1e9
        latencies.setRecording(false)
        progress.finish()
        let interrupted = Interruption.shared.requested

        let merged = latencies.merged()
        let recorded = merged.histograms.recordedByName
        var throughput = ["top_level_per_second": Double(completed) / elapsed]
        for (name, count) in counts { throughput["\(name)_per_second"] = count / elapsed }
        let result = BenchResult(
            scenario: scenario.name,
            parameters: parameters(scenario, workers: workers),
            environment: .current(),
            durationSeconds: elapsed,
            throughput: throughput,
            parallelism: .init(mean: merged.parallelismMean, max: merged.parallelismMax),
            harness: .init(sampleCostNanoseconds: 0),  // set by `repeated`, once for all repetitions
            metrics: recorded.mapValues(MetricSummary.init),
            histograms: recorded.mapValues(HistogramEncoding.encode),
            interrupted: interrupted ? true : nil
        )
        return (result, merged.histograms)
    }

    enum Stop { case seconds(Double), count(Int) }

    /// Runs the workers until the stop condition; returns how many top-level items completed.
    private func drive(_ workload: BenchWorkload, endToEnd: BenchMetric, latencies: RunLatencies, workers: Int, until stop: Stop,
                       progress: Progress?) async throws -> Int {
        let begin = nowNanoseconds()
        let end: UInt64? = if case let .seconds(s) = stop { begin + UInt64(s * 1e9) } else { nil }
        // --count N across the workers exactly: the first N % workers take one more (a worker may take none).
        let quota: (Int) -> Int? = { worker in
            guard case let .count(n) = stop else { return nil }
            return n / workers + (worker < n % workers ? 1 : 0)
        }
        // Open loop: each worker's items are due every `interval` ns, from `begin`.
        let interval: UInt64? = rate.map { UInt64(Double(workers) / $0 * 1e9) }
        let done = AtomicCounter()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                let perWorker = quota(worker)
                group.addTask {
                    var sent = 0
                    // Stagger open-loop workers so they are not all due at once.
                    var due = begin + (interval.map { $0 / UInt64(workers) * UInt64(worker) } ?? 0)
                    while !Interruption.shared.requested {
                        if let perWorker, sent >= perWorker { break }
                        var now = nowNanoseconds()
                        if let end, now >= end { break }
                        if interval != nil, due > now {
                            // Open loop: an item due after the end is never sent (at a low rate the next one may be
                            // due long after --duration).
                            if let end, due >= end { break }
                            try await waitUntil(due)
                            now = nowNanoseconds()
                        }
                        let intended = interval == nil ? now : due
                        do {
                            try await workload.item(worker)
                        } catch {
                            throw ValidationError("an item of the scenario failed, so the run stops: \(error)")
                        }
                        latencies.record(endToEnd, nowNanoseconds() &- intended)
                        sent += 1
                        done.add(1)
                        if let interval { due &+= interval }
                        if worker == 0, sent % 256 == 0 { progress?.update(done.value, since: begin, end: end) }
                    }
                }
            }
            try await group.waitForAll()
        }
        return done.value
    }

    private func parameters(_ scenario: BenchScenario, workers: Int) -> [String: BenchResult.Parameter] {
        var p: [String: BenchResult.Parameter] = [
            "scenario": .text(scenario.name), "workers": .integer(workers), "warmup_s": .number(warmup),
            "loop": .text(rate == nil ? "closed" : "open"), "trace_backend": .text(traceBackend.rawValue),
        ]
        if let rate { p["rate_per_s"] = .number(rate) }
        if let count { p["count"] = .integer(count) } else { p["duration_s"] = .number(duration ?? 5) }
        if scenario.builtIn {
            p["updaters_per_side_effect"] = .integer(updatersPerSideEffect)
            p["spin_us"] = .number(spinUs)
            p["sleep_us"] = .number(sleepUs)
            p["updater_spin_us"] = .number(updaterSpinUs)
            p["listeners"] = .integer(listeners)
            p["payload_bytes"] = .integer(payload)
            p["backlog_limit"] = backlogLimit.limit.map { .integer($0) } ?? .text("none")
            if scenario.name == "flood" { p["flooders"] = .integer(flooders) }
            if let stallEvery { p["stall_every_s"] = .number(stallEvery); p["stall_ms"] = .number(stallMs) }
        }
        for (key, value) in scenarioOptions {
            p["option.\(key)"] = Int(value).map { .integer($0) } ?? Double(value).map { .number($0) } ?? .text(value)
        }
        return p
    }
}

/// Waits until the monotonic time `deadline`: sleeps for long waits, yields for the last stretch, so open-loop
/// sends are on time without blocking a cooperative thread.
func waitUntil(_ deadline: UInt64) async throws {
    while true {
        let now = nowNanoseconds()
        if now >= deadline { return }
        let left = deadline - now
        if left > 200_000 { try await Task.sleep(nanoseconds: left - 100_000) } else { await Task.yield() }
    }
}

/// The `flood` scenario's producers: threads of their own (as a server's I/O threads would be) that dispatch
/// fire-and-forget updaters as fast as they can and time each `dispatch` call — the producer-side latency that the
/// lane's helping limit and the flood policy bound. Measured items are counted from the moment recording is on.
final class Flooders: @unchecked Sendable {
    // `threads` is touched only by start/stop, on the run's task.
    private let count: Int
    private let store: BenchStore
    private let run: RunContext
    private let stopping = AtomicFlag()
    private let deadline = Atomic<UInt64>(.max)
    private let measured = AtomicCounter()
    private let finished = DispatchSemaphore(value: 0)
    private let begun = DispatchSemaphore(value: 0)

    init(count: Int, store: BenchStore, run: RunContext) {
        self.count = count
        self.store = store
        self.run = run
    }

    /// Starts the threads and returns once each has made its first dispatch, so the flood is under way before
    /// anything is measured (on a loaded machine a thread can otherwise start after a short run has ended).
    func start() {
        for index in 0..<count {
            let thread = Thread { [self] in
                var local = 0
                var first = true
                while !stopping.value {
                    defer {
                        if first {
                            first = false
                            begun.signal()
                        }
                    }
                    let start = nowNanoseconds()
                    if start >= deadline.load(ordering: .relaxed) { break }
                    store.dispatch(TimedUpdate(dispatchedAt: start, run: run))
                    let took = nowNanoseconds() &- start
                    if run.latencies.isRecording {
                        run.latencies.record(.dispatchCall, took)
                        local &+= 1
                    }
                }
                if first { begun.signal() }
                measured.add(local)
                finished.signal()
            }
            thread.name = "katana-bench flooder \(index)"
            thread.start()
        }
        for _ in 0..<count { begun.wait() }
    }

    /// Makes the threads stop flooding at `time` (monotonic nanoseconds).
    func stop(at time: UInt64) { deadline.store(time, ordering: .relaxed) }

    /// Stops the threads, waits for them, and returns how many dispatches they made while recording was on.
    func stop() -> Int {
        stopping.set(true)
        for _ in 0..<count { finished.wait() }
        return measured.value
    }
}

/// Every `every` seconds, dispatches one updater that spins for the stall length: the whole lane stalls, as it
/// would behind a slow updater in an app.
final class StallInjector: @unchecked Sendable {
    // `task` is only touched by start/stop on the run's task.
    private let every: Double
    private let nanoseconds: UInt64
    private let store: BenchStore
    private var task: Task<Void, Never>?

    init(every: Double, milliseconds: Double, store: BenchStore) {
        self.every = every
        nanoseconds = UInt64(milliseconds * 1e6)
        self.store = store
    }

    func start() {
        let (store, every, nanoseconds) = (self.store, self.every, self.nanoseconds)
        task = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(every * 1e9))
                if Task.isCancelled { break }
                store.dispatch(Stall(nanoseconds: nanoseconds))
            }
        }
    }

    func stop() { task?.cancel() }
}

struct Stall: StateUpdater {
    let nanoseconds: UInt64
    func updateState(_ state: inout BenchState) { spin(nanoseconds: nanoseconds) }
}

/// Progress on stderr, only when it is a terminal.
final class Progress: @unchecked Sendable {
    // `lastPrint` is only touched by worker 0's task.
    private let enabled: Bool
    private var lastPrint: UInt64 = 0

    init(enabled: Bool) { self.enabled = enabled }

    func update(_ done: Int, since begin: UInt64, end: UInt64?) {
        guard enabled else { return }
        let now = nowNanoseconds()
        guard now - lastPrint > 500_000_000 else { return }
        lastPrint = now
        var line = "\r\u{1B}[K  \(done) done, \(String(format: "%.1f", Double(now - begin) / 1e9)) s"
        if let end { line += " of \(String(format: "%.1f", Double(end - begin) / 1e9)) s" }
        FileHandle.standardError.write(Data(line.utf8))
    }

    func finish() {
        if enabled { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}

/// Writes an output option's file as a user expects: `-` is standard output; a symbolic link is followed (its target
/// is written and the link stays); an existing target is replaced only when it is a regular file — never a device,
/// FIFO or directory; the bytes go to a temporary file beside the target, renamed over it when complete.
func writeOutput(_ data: Data, to path: String) throws {
    if path == "-" {
        FileHandle.standardOutput.write(data)
        return
    }
    if let type = existingType(of: path), type != .typeRegular {
        throw ValidationError("cannot write \(path): it exists and is not a regular file")
    }
    try data.write(to: URL(fileURLWithPath: path).resolvingSymlinksInPath(), options: .atomic)
}

/// The type of what `path` names, symbolic links followed; nil when nothing is there.
func existingType(of path: String) -> FileAttributeType? {
    let target = URL(fileURLWithPath: path).resolvingSymlinksInPath()
    return try? FileManager.default.attributesOfItem(atPath: target.path)[.type] as? FileAttributeType
}

func checkWritable(file path: String) throws {
    if path == "-" { return }
    let url = URL(fileURLWithPath: path).resolvingSymlinksInPath()
    if let type = existingType(of: path), type != .typeRegular, type != .typeDirectory {
        throw ValidationError("cannot write \(path): it exists and is not a regular file")
    }
    let directory = url.deletingLastPathComponent().path
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
        throw ValidationError("cannot write \(path): directory \(directory) does not exist")
    }
    // As the user who runs the command (access(2) checks the real ids), before anything is measured: an output that
    // cannot be written must not cost the user the run.
    guard access(directory, W_OK | X_OK) == 0 else {
        throw ValidationError("cannot write \(path): directory \(directory) is not writable")
    }
    if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
        throw ValidationError("cannot write \(path): it is a directory")
    }
    var file = stat()
    guard stat(url.path, &file) == 0 else { return }  // not there yet: the directory's permission is what counts
    guard access(url.path, W_OK) == 0 else {
        throw ValidationError("cannot write \(path): it exists and is not writable")
    }
    // Outputs are replaced whole (written beside, then renamed over the old file): in a sticky directory (/tmp) only
    // the file's owner, the directory's owner or root may do that.
    var folder = stat()
    let user = getuid()
    if stat(directory, &folder) == 0, folder.st_mode & S_ISVTX != 0, user != 0, file.st_uid != user, folder.st_uid != user {
        throw ValidationError("cannot write \(path): it belongs to another user and \(directory) is sticky (only its owner may replace it)")
    }
}

func checkWritable(directory path: String) throws {
    var isDirectory: ObjCBool = false
    if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
        guard isDirectory.boolValue else { throw ValidationError("--hgrm \(path) exists and is not a directory") }
        guard access(path, W_OK | X_OK) == 0 else { throw ValidationError("--hgrm \(path) is not writable") }
    } else {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        } catch {
            throw ValidationError("cannot create --hgrm directory \(path): \(error.localizedDescription)")
        }
    }
}
