import ArgumentParser
import Foundation
import Katana
import KatanaTrace

/// A workload `run` can measure: how to set it up, and one top-level item of it. The harness runs `--concurrency`
/// workers, each calling the item closure in a closed loop (the next call as soon as the previous returned) or an
/// open loop (`--rate`), times every call into the scenario's end-to-end histogram, and gives you everything
/// katana-bench gives its own scenarios — warm-up, `--repeat`, the table, `--json`, `--hgrm`, `--plot`,
/// `--trace`, `compare`, `merge`. The built-in scenarios (`updaters`, `side-effects`, `mixed`, `flood`) are
/// defined with this same type.
///
///     BenchScenario("checkout", summary: "place an order and await it") { context in
///         let store = Store<Shop, ShopDependencies>(configuration: .init(traceBackend: context.traceBackend))
///         return BenchWorkload { worker in
///             try await store.dispatch(PlaceOrder(customer: worker)).value
///         }
///     }
public struct BenchScenario: Sendable {
    /// What `-s` selects it by.
    public let name: String
    /// One line for `--help` and the result's header.
    public let summary: String
    /// The histogram every item's latency goes into (default `<name>.end_to_end`).
    public let endToEnd: BenchMetric
    let setup: @Sendable (BenchContext) async throws -> BenchWorkload
    /// Built-in scenarios only: their workers are `--producers` (updaters) rather than `--concurrency`.
    var workersFromProducers = false
    /// Built-in scenarios only: they read katana-bench's own knobs (`--spin-us`, `--listeners`, …) and record them.
    var builtIn = false

    /// - Parameters:
    ///   - name: what `-s` selects; also the prefix of the default end-to-end metric.
    ///   - summary: one line for `--help`.
    ///   - endToEnd: the metric the harness times each item into.
    ///   - setup: called once per repetition, before warm-up: build the store (use `context.traceBackend` so
    ///     `--trace-backend` and `--trace` apply) and return the item to run.
    public init(_ name: String, summary: String = "", endToEnd: BenchMetric? = nil,
                setup: @escaping @Sendable (_ context: BenchContext) async throws -> BenchWorkload) {
        self.name = name
        self.summary = summary
        self.endToEnd = endToEnd ?? BenchMetric("\(name).end_to_end", label: "\(name) end-to-end (sent, or due in open loop → returned)")
        self.setup = setup
    }
}

/// What a scenario's setup returns: the item to run, and optional hooks around the measured phase.
public struct BenchWorkload: Sendable {
    let item: @Sendable (Int) async throws -> Void
    let whenMeasuring: (@Sendable (UInt64?) -> Void)?
    let finish: (@Sendable () async throws -> [String: Double])?

    /// - Parameters:
    ///   - item: one top-level item, on worker `worker` (0 ..< `context.workers`); timed from when it was sent
    ///     (closed loop) or due (open loop) to when it returns. Throwing ends the run with the error.
    ///   - whenMeasuring: called when the warm-up is over and samples count, with the monotonic deadline in ns
    ///     (`nowNanoseconds`-style) when the run is timed, nil when it is counted.
    ///   - finish: called after the last item: wait for fire-and-forget work to land, stop what you started, and
    ///     return counts to report as throughput (`["orders": 1200]` is reported as `orders_per_second`).
    public init(whenMeasuring: (@Sendable (_ deadline: UInt64?) -> Void)? = nil,
                finish: (@Sendable () async throws -> [String: Double])? = nil,
                item: @escaping @Sendable (_ worker: Int) async throws -> Void) {
        self.item = item
        self.whenMeasuring = whenMeasuring
        self.finish = finish
    }
}

/// What a scenario's setup gets: the run's settings, and where to record metrics of its own.
public struct BenchContext: Sendable {
    /// How many workers will call the item concurrently.
    public let workers: Int
    /// `--option key=value` pairs, for the scenario's own knobs (recorded among the result's parameters).
    public let options: [String: String]
    /// The backend `--trace-backend` chose (LTTng when linked, by default): configure your store with it.
    public let traceBackend: any TraceBackend
    let latencies: RunLatencies
    let knobs: Knobs

    /// Records `nanoseconds` into `metric`'s histogram (only while measuring; free during warm-up). Safe from any
    /// thread.
    public func record(_ metric: BenchMetric, nanoseconds: UInt64) { latencies.record(metric, nanoseconds) }

    /// A monotonic clock in nanoseconds, the one the harness times items with.
    public static func now() -> UInt64 { nowNanoseconds() }
}

/// katana-bench's own knobs, for the built-in scenarios: always `Run`'s options (whose defaults are the only ones).
struct Knobs: Sendable {
    var producers: Int, concurrency: Int, flooders: Int
    var backlogLimit: Int?
    var updatersPerSideEffect: Int
    var spinUs: Double, sleepUs: Double, updaterSpinUs: Double
    var listeners: Int, payload: Int
    var stallEvery: Double?
    var stallMs: Double
}

/// The scenarios `run` offers in this process: katana-bench's own, or a program's that calls `KatanaBenchCLI.main`.
enum BenchScenarios {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var registered: [BenchScenario]?  // guarded by `lock`

    static var all: [BenchScenario] { lock.withLock { registered } ?? BuiltInScenarios.all }

    static func use(_ scenarios: [BenchScenario]) { lock.withLock { registered = scenarios } }

    static func named(_ name: String) -> BenchScenario? { all.first { $0.name == name } }

    static var defaultName: String { all.first { $0.name == "side-effects" }?.name ?? all.first?.name ?? "" }

    nonisolated(unsafe) private static var registeredReplay: BenchReplay?  // guarded by `lock`

    /// What `replay` replays logs with: a program's, given to `KatanaBenchCLI.main(scenarios:replay:)`.
    static var replay: BenchReplay? {
        get { lock.withLock { registeredReplay } }
        set { lock.withLock { registeredReplay = newValue } }
    }
}

/// A command line of your own around your scenarios — `run` (the default), `compare` and `merge`, exactly as
/// katana-bench has them — from a `main.swift`:
///
///     import KatanaBench
///     await KatanaBenchCLI.main(scenarios: [checkout, browse])
public enum KatanaBenchCLI {
    /// Parses the process's arguments and runs `run`, `compare`, `merge` or `replay` with `scenarios` selectable by
    /// `-s NAME`; exits with the command's status. With `replay`, `replay LOG` replays a dispatch log recorded by
    /// `KatanaDispatchLog`'s `DispatchLogRecorder` (see the Record and Replay guide).
    public static func main(scenarios: [BenchScenario], replay: BenchReplay? = nil) async -> Never {
        let names = scenarios.map(\.name)
        guard !scenarios.isEmpty, Set(names).count == names.count else {
            FileHandle.standardError.write(Data("KatanaBenchCLI.main: give at least one scenario, each with its own name (got \(names))\n".utf8))
            exit(2)
        }
        BenchScenarios.use(scenarios)
        BenchScenarios.replay = replay
        exit(await UserBenchCommand.mainWithExitCodes())
    }
}

/// The root command of a program built on `KatanaBenchCLI`: named after its executable.
struct UserBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: (CommandLine.arguments.first.map { ($0 as NSString).lastPathComponent }) ?? "bench",
        abstract: "Measure this program's Katana scenarios and report latency histograms (built on katana-bench).",
        version: "built on katana-bench \(KatanaBenchCommand.version)",
        subcommands: [Run.self, Compare.self, Merge.self, Replay.self],
        defaultSubcommand: Run.self
    )

    static func mainWithExitCodes() async -> Int32 { await runWithExitCodes(UserBenchCommand.self, nil) }
}
