import ArgumentParser
import Foundation
import Katana
import KatanaDispatchLog
import KatanaTrace

/// What `replay` needs from your program to replay a dispatch log: the item types the log may hold, and how to build a
/// fresh store from the log's initial state. Give it to ``KatanaBenchCLI/main(scenarios:replay:)``.
///
///     var types = DispatchLogTypes()
///     types.register(PlaceOrder.self)
///     let replay = BenchReplay(types: types) { context, initialState in
///         ShopStore(stateInitializer: { initialState }, configuration: .init(traceBackend: context.traceBackend))
///     }
public struct BenchReplay: Sendable {
    let stateType: String
    let types: DispatchLogTypes
    let makeStore: @Sendable (BenchContext, Data?) throws -> ReplayStore
    let verifies: Bool

    /// A replay whose `--verify` compares states: the state is `Codable` and `Equatable`.
    public init<S: State & Codable & Equatable, D: SideEffectDependencyContainer>(
        types: DispatchLogTypes, store: @escaping @Sendable (_ context: BenchContext, _ initialState: S) throws -> Store<S, D>
    ) {
        stateType = String(reflecting: S.self)
        self.types = types
        verifies = true
        makeStore = { context, initial in
            let store = try store(context, try ReplayStore.decode(S.self, initial))
            return ReplayStore(store, matches: { json in try ReplayStore.decode(S.self, json) == store.state },
                               diagnose: { start, items, recordedEnd in
                                   try ReplayStore.diagnose(S.self, from: start, items: items, recordedEnd: recordedEnd)
                               })
        }
    }

    /// A replay of a state that is only `Decodable`: it replays as a workload; `--verify` is refused.
    public init<S: State & Decodable, D: SideEffectDependencyContainer>(
        types: DispatchLogTypes, store: @escaping @Sendable (_ context: BenchContext, _ initialState: S) throws -> Store<S, D>
    ) {
        stateType = String(reflecting: S.self)
        self.types = types
        verifies = false
        makeStore = { context, initial in
            ReplayStore(try store(context, try ReplayStore.decode(S.self, initial)), matches: nil, diagnose: nil)
        }
    }
}

/// A replay's store, its state type erased.
struct ReplayStore: Sendable {
    let dispatch: @Sendable (any Dispatchable) -> DispatchHandle<any Sendable>
    /// Whether the store's state now equals the state a log recorded (JSON).
    let matches: (@Sendable (Data) throws -> Bool)?
    /// Where a stretch of items first makes the replay differ (see `diagnose`).
    let diagnose: (@Sendable (Data, [ReplayItem], Data) throws -> (candidate: String, differences: String))?

    init<S: State, D: SideEffectDependencyContainer>(_ store: Store<S, D>, matches: (@Sendable (Data) throws -> Bool)?,
                                                     diagnose: (@Sendable (Data, [ReplayItem], Data) throws -> (candidate: String, differences: String))?) {
        dispatch = { store.anyDispatch($0) }
        self.matches = matches
        self.diagnose = diagnose
    }

    static func decode<S: Decodable>(_: S.Type, _ json: Data?) throws -> S {
        guard let json else { throw ValidationError("the log holds no initial state (its state was not Encodable when recorded): nothing to replay from") }
        do {
            return try JSONDecoder().decode(S.self, from: json)
        } catch {
            throw ValidationError("the log's state does not decode as \(String(reflecting: S.self)): \(error)")
        }
    }

    /// The stretch between the last checkpoint that matched (`start`) and the first that did not (`recordedEnd`):
    /// where the replay ends up differing from the recording (`differences`), and which item of the stretch, applied
    /// one by one from `start`, is the first to change those parts of the state (`candidate`) — the item whose code
    /// changed when only it touches them; a hint, not proof, when others do too (the log holds no state between
    /// checkpoints to tell).
    static func diagnose<S: State & Codable>(_: S.Type, from start: Data, items: [ReplayItem],
                                             recordedEnd: Data) throws -> (candidate: String, differences: String) {
        var state = try JSONDecoder().decode(S.self, from: start)
        var states: [Any] = [try jsonObject(state)]
        for item in items {
            if let updater = item.item as? any AnyStateUpdater, let next = try? updater.updatedState(currentState: state) as? S {
                state = next
            }
            states.append(try jsonObject(state))
        }
        let recorded = try JSONSerialization.jsonObject(with: recordedEnd, options: [.fragmentsAllowed])
        var paths: [[String]] = []
        differences(states.last!, recorded, path: [], into: &paths)
        let shown = paths.prefix(5).map { path in
            let name = path.isEmpty ? "(the whole state)" : path.joined(separator: ".")
            return "\(name): recorded \(text(at: path, in: recorded)), replayed \(text(at: path, in: states.last!))"
        }
        let listed = shown.joined(separator: "; ") + (paths.count > 5 ? "; and \(paths.count - 5) more" : "")
        let touching = items.indices.filter { index in
            paths.contains { path in text(at: path, in: states[index]) != text(at: path, in: states[index + 1]) }
        }
        guard let first = touching.first else {
            return ("no replayed item of the stretch changes what differs (the recorded run changed it: an updater that no longer does?)", listed)
        }
        let item = items[first]
        let others = touching.count - 1
        return ("the first of them to change what differs: item \(item.sequence), \(item.type) (log line \(item.line))"
                    + (others == 0 ? " — the only one that does" : "; \(others) more of them do too"), listed)
    }

    static func jsonObject<S: Encodable>(_ state: S) throws -> Any {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return try JSONSerialization.jsonObject(with: try encoder.encode(state), options: [.fragmentsAllowed])
    }

    /// Paths (keys, array indices) where two JSON values differ, deepest first reached.
    static func differences(_ a: Any, _ b: Any, path: [String], into paths: inout [[String]]) {
        if let a = a as? [String: Any], let b = b as? [String: Any] {
            for key in Set(a.keys).union(b.keys).sorted() {
                switch (a[key], b[key]) {
                case let (x?, y?): differences(x, y, path: path + [key], into: &paths)
                default: paths.append(path + [key])
                }
            }
        } else if let a = a as? [Any], let b = b as? [Any], a.count == b.count {
            for index in a.indices { differences(a[index], b[index], path: path + ["\(index)"], into: &paths) }
        } else if text(a) != text(b) {
            paths.append(path)
        }
    }

    static func text(_ value: Any?) -> String {
        guard let value else { return "(absent)" }
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]) else { return "?" }
        return String(decoding: data, as: UTF8.self)
    }

    static func text(at path: [String], in value: Any) -> String {
        var current: Any? = value
        for key in path {
            if let object = current as? [String: Any] { current = object[key] }
            else if let array = current as? [Any], let index = Int(key), array.indices.contains(index) { current = array[index] }
            else { current = nil }
        }
        return text(current)
    }
}

/// One updater of a log, decoded for replay.
struct ReplayItem: @unchecked Sendable {  // `item` is a Dispatchable (Sendable) held as `any Dispatchable`
    let item: any Dispatchable
    let sequence: UInt64
    let offset: UInt64
    let type: String
    let line: Int
    /// Its type's histogram: an index into the plan's `metrics`.
    let metricIndex: Int
}

/// A log made ready to replay: its updaters decoded, what it skips, where its checkpoints fall.
struct ReplayPlan: Sendable {
    let log: DispatchLog
    let items: [ReplayItem]
    /// One per updater type, in the order the log first has them.
    let metrics: [BenchMetric]
    let sideEffects: Int
    /// For an item's index, the checkpoint (index into `log.checkpoints`) that follows it, if one does before the next
    /// updater.
    let checkpointAfter: [Int: Int]

    init(log: DispatchLog, replay: BenchReplay) throws {
        self.log = log
        guard log.header.stateType == replay.stateType else {
            throw ValidationError("the log records a store of \(log.header.stateType); this replay builds a store of \(replay.stateType)")
        }
        var items: [ReplayItem] = []
        var metricIndex: [String: Int] = [:]
        var metrics: [BenchMetric] = []
        var sideEffects = 0
        for entry in log.entries {
            guard entry.kind == .updater else {
                sideEffects += 1
                continue
            }
            let item: any Dispatchable
            do {
                item = try replay.types.item(entry)
            } catch {
                throw ValidationError(error.description)
            }
            let short = entry.type.split(separator: ".").last.map(String.init) ?? entry.type
            let index = metricIndex[entry.type] ?? {
                metrics.append(BenchMetric("replay.\(short)", label: "\(short) (sent, or due at the recorded pace → applied)"))
                return metrics.count - 1
            }()
            metricIndex[entry.type] = index
            items.append(ReplayItem(item: item, sequence: entry.sequence, offset: entry.offsetNanoseconds, type: entry.type,
                                    line: entry.line, metricIndex: index))
        }
        self.items = items
        self.metrics = metrics
        self.sideEffects = sideEffects
        var after: [Int: Int] = [:]
        var next = 0
        for (index, checkpoint) in log.checkpoints.enumerated() {
            // The last updater at or before the checkpoint's sequence.
            while next < items.count, items[next].sequence <= checkpoint.afterSequence { next += 1 }
            if next > 0 { after[next - 1] = index }
        }
        checkpointAfter = after
    }
}

/// `replay`: a dispatch log's updaters into a fresh store, in the recorded order, at the recorded pace or flat out.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Replay a dispatch log (KatanaDispatchLog) into a fresh store and report latency histograms; --verify checks it ends where the recording did.",
        discussion: """
        Every updater of the log is dispatched in the order the recorded store applied it; side effects are not re-run
        (the updaters they dispatched are in the log, and are replayed in their place). The result is a katana-bench
        result: `compare`, `merge` and the CI gate read its --json.
        """)

    enum Pace: String, ExpressibleByArgument, CaseIterable {
        case recorded
        case flatOut = "flat-out"
    }

    @Argument(help: "The dispatch log (a DispatchLogRecorder's file).")
    var log: String
    @Option(help: "recorded: each updater is due at its recorded time (open loop; latency counts from when it was due); flat-out: the next is sent as soon as --in-flight allows (closed loop).")
    var pace: Pace = .flatOut
    @Option(parsing: .unconditional, help: "With --pace recorded: play this many times faster than recorded.")
    var speed: Double = 1
    @Option(parsing: .unconditional, help: "With --pace flat-out: updaters dispatched and not yet applied, at most (1: each waits for the one before).")
    var inFlight: Int = 1
    @Flag(help: "Check that the replay ends in the recorded final state, and passes through every recorded checkpoint; name the first item after which it differs. Exit 1 when it does not.")
    var verify = false
    @Flag(help: "Also dispatch the same updaters back to back (fire-and-forget) into another fresh store and report that rate (direct_per_second).")
    var direct = false
    @Option(name: .customLong("trace-backend"), help: "Trace backend: default (LTTng when compiled in), lttng, none, flight-recorder, lttng+flight-recorder.")
    var traceBackend: Micro.Backend = .default
    @Option(name: .customLong("repeat"), parsing: .unconditional, help: "Independent repetitions, each a fresh store replaying the whole log.")
    var repetitions: Int = 1
    @OptionGroup var outputs: ResultOutputs

    func validate() throws {
        guard let replay = BenchScenarios.replay else {
            throw ValidationError("this program replays no dispatch logs: give KatanaBenchCLI.main a BenchReplay (replay:)")
        }
        try checkRange(speed, 0.001...1_000_000, "--speed")
        try checkRange(inFlight, 1...1_000_000, "--in-flight")
        try checkRange(repetitions, 1...1_000, "--repeat")
        if verify, !replay.verifies {
            throw ValidationError("--verify compares states: this replay's state type \(replay.stateType) is not Codable and Equatable")
        }
        try outputs.check()
    }

    /// What a replay found: its result and histograms, what it said about the log, and `--verify`'s verdict.
    struct Outcome {
        var result: BenchResult
        var histograms: [Metric: LatencyHistogram]
        var notes: [String]
        var verdict: String?
        var failed: Bool { verdict?.hasPrefix("FAILED") == true }
    }

    func run() async throws {
        Interruption.shared.install()
        var outcome = try await replay { note in FileHandle.standardError.write(Data("replay: \(note)\n".utf8)) }
        // What a sample costs is the machine's: measured once, after the replays (a million clock reads and records).
        outcome.result.harness = BenchResult.Harness(sampleCostNanoseconds: Report.measureSampleCost())
        var table = Report.table(outcome.result)
        if let direct = outcome.result.throughput["direct_per_second"] {
            table += String(format: "\nthe same updaters dispatched back to back (--direct): %.0f/s", direct)
        }
        outputs.show(table)
        try outputs.write(outcome.result, histograms: outcome.histograms, title: "replay \((log as NSString).lastPathComponent)")
        if let verdict = outcome.verdict {
            FileHandle.standardError.write(Data("replay: verify: \(verdict)\n".utf8))
            if outcome.failed { throw ExitCode(1) }
        }
        if Interruption.shared.requested { throw ExitCode(130) }
    }

    /// Reads the log and replays it `--repeat` times; `note` hears what is said about the log as it is found.
    func replay(note: (String) -> Void = { _ in }) async throws -> Outcome {
        guard let replay = BenchScenarios.replay else {
            throw ValidationError("this program replays no dispatch logs: give KatanaBenchCLI.main a BenchReplay (replay:)")
        }
        let log: DispatchLog
        do {
            log = try DispatchLogReader.read(self.log)
        } catch {
            throw ValidationError(error.description)
        }
        let plan = try ReplayPlan(log: log, replay: replay)
        var notes: [String] = []
        func say(_ line: String) {
            notes.append(line)
            note(line)
        }
        if let damage = log.damage { say("\(self.log) is damaged at \(damage); replaying the \(log.entries.count) items before it") }
        switch log.end {
        case let .cut(reason, _, dropped): say("the log was cut (\(reason)): \(dropped) items after it were not recorded")
        case .unfinished where log.damage == nil: say("the log has no end line (its app stopped while recording): replaying what it holds")
        default: break
        }
        guard !plan.items.isEmpty else { throw ValidationError("\(self.log) holds no updaters to replay") }
        say("\(plan.items.count) updaters to replay; \(plan.sideEffects) side effects not re-run (the updaters they dispatched are replayed in their place)")
        if pace == .recorded, let first = plan.items.first?.offset, let last = plan.items.last?.offset, last > first {
            say(String(format: "at the recorded pace this takes %.3f s (the log's updaters span %.3f s; --speed %g)",
                       Double(last - first) / 1e9 / speed, Double(last - first) / 1e9, speed))
        }

        let context = BenchResult.Context.current()
        var runs: [BenchResult] = []
        var histograms: [Metric: LatencyHistogram] = [:]
        var verdict: String?
        for _ in 0..<repetitions {
            let (result, own, outcome) = try await execute(plan, replay: replay)
            runs.append(result)
            for (metric, histogram) in own { histograms[metric, default: makeHistogram()].add(histogram) }
            verdict = verdict ?? outcome
            if Interruption.shared.requested || outcome?.hasPrefix("FAILED") == true { break }
        }
        return Outcome(result: BenchResult.ofRepetitions(runs, histograms: histograms, context: context),
                       histograms: histograms, notes: notes, verdict: verdict)
    }

    /// One repetition: a fresh store, the whole log. Returns the result, its histograms and, with --verify, the verdict.
    func execute(_ plan: ReplayPlan, replay: BenchReplay) async throws -> (BenchResult, [Metric: LatencyHistogram], String?) {
        let latencies = RunLatencies()
        let context = BenchContext(workers: 1, options: [:], traceBackend: try traceBackend.make(), latencies: latencies,
                                   knobs: Knobs(producers: 1, concurrency: 1, flooders: 0, backlogLimit: nil, updatersPerSideEffect: 0,
                                                spinUs: 0, sleepUs: 0, updaterSpinUs: 0, listeners: 0, payload: 0, stallEvery: nil, stallMs: 0))
        let store: ReplayStore
        do {
            store = try replay.makeStore(context, plan.log.header.initialState)
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("the replay's store could not be built: \(error)")
        }
        let endToEnd = BenchMetric("replay.end_to_end", label: "every updater (sent, or due at the recorded pace → applied)")
        // The replay's own histograms, made before the clock starts (the harness's per-thread latencies make theirs on
        // a thread's first sample: inside the timed loop, and again on each thread the task resumes on — most of a
        // short replay's time). Two, each written by one task: the sender's, for updaters applied as they were
        // dispatched (resolved when `dispatch` returns: the usual case), and the collector's, which awaits the others
        // in order and records each as it resolves — a latency ends when the updater was applied, not when the sender
        // got round to looking.
        let sent = ReplayTimings(types: plan.metrics.count), collected = ReplayTimings(types: plan.metrics.count)
        let (queue, queued) = AsyncStream.makeStream(of: Outstanding.self)
        let (freedEvents, freed) = AsyncStream.makeStream(of: Void.self)
        let collector = Task {
            for await entry in queue {
                let failed: Bool = if case .failure = await entry.handle.result { true } else { false }
                collected.record(type: entry.type, nanoseconds: nowNanoseconds() &- entry.since, failed: failed)
                freed.yield(())
            }
            freed.finish()
        }
        var freedIterator = freedEvents.makeAsyncIterator()
        var outstanding = 0  // handed to the collector and not yet settled
        latencies.setRecording(true)
        let started = nowNanoseconds()
        var verdict: String?
        let first = plan.items[0].offset
        var lastMatched = (sequence: UInt64(0), state: plan.log.header.initialState, index: 0)
        var completed = 0
        var lastDue: UInt64 = 0
        for (index, item) in plan.items.enumerated() {
            if Interruption.shared.requested { break }
            let due: UInt64
            if pace == .recorded {
                // A log's times only go forward; one that goes back (an edited log) is due at once, not in 584 years.
                due = max(started &+ UInt64(Double(item.offset >= first ? item.offset - first : 0) / speed), lastDue)
                lastDue = due
                try await waitUntil(due)
            } else {
                while outstanding >= inFlight {
                    _ = await freedIterator.next()
                    outstanding -= 1
                }
                due = nowNanoseconds()
            }
            let handle = store.dispatch(item.item)
            if handle.isResolved {
                let failed: Bool = if case .failure = await handle.result { true } else { false }
                sent.record(type: item.metricIndex, nanoseconds: nowNanoseconds() &- due, failed: failed)
            } else {
                outstanding += 1
                queued.yield(Outstanding(handle: handle, since: due, type: item.metricIndex))
            }
            completed += 1
            if verify, let checkpoint = plan.checkpointAfter[index] {
                while outstanding > 0 {
                    _ = await freedIterator.next()
                    outstanding -= 1
                }
                let recorded = plan.log.checkpoints[checkpoint]
                if try store.matches!(recorded.state) {
                    lastMatched = (recorded.afterSequence, recorded.state, index + 1)
                } else {
                    verdict = try failure(plan, store: store, from: lastMatched, through: index, recorded: recorded.state,
                                          what: "the checkpoint after item \(recorded.afterSequence) (log line \(recorded.line))")
                    break
                }
            }
        }
        queued.finish()
        await collector.value
        let elapsed = Double(nowNanoseconds() - started) / 1e9
        let timings = sent.adding(collected)
        latencies.setRecording(false)
        if verify, verdict == nil, !Interruption.shared.requested {
            let checked = plan.log.checkpoints.count
            if case let .complete(finalState?) = plan.log.end {
                if try store.matches!(finalState) {
                    verdict = "passed: the replay ends in the recorded final state"
                        + (checked > 0 ? " and matched all \(checked) checkpoints on the way" : "")
                } else {
                    verdict = try failure(plan, store: store, from: lastMatched, through: plan.items.count - 1, recorded: finalState,
                                          what: "the recorded final state")
                }
            } else if checked > 0 {
                verdict = "passed as far as the log goes: it has no final state (cut, unfinished, or too big for its size limit); the replay matched all \(checked) checkpoints, the last after item \(lastMatched.sequence)"
            } else {
                verdict = "FAILED: nothing to verify against — the log has no final state and no checkpoints"
            }
        }
        // Every top-level item of a replay is an updater: both of the table's rates are the replay's.
        var throughput = ["top_level_per_second": Double(completed) / elapsed, "updaters_applied_per_second": Double(completed) / elapsed]
        if direct, !Interruption.shared.requested {
            throughput["direct_per_second"] = try await directRate(plan, replay: replay, context: context)
        }
        var histograms = latencies.merged().histograms
        histograms[endToEnd] = timings.endToEnd
        for (index, metric) in plan.metrics.enumerated() { histograms[metric] = timings.byType[index] }
        let recorded = histograms.recordedByName
        var parameters: [String: BenchResult.Parameter] = [
            "scenario": "replay", "log": .text((log as NSString).lastPathComponent), "updaters": .integer(plan.items.count),
            "side_effects_skipped": .integer(plan.sideEffects), "workers": .integer(1), "loop": .text(pace == .recorded ? "open" : "closed"),
            "pace": .text(pace.rawValue), "trace_backend": .text(traceBackend.rawValue), "rejected": .integer(timings.rejected),
        ]
        if pace == .recorded { parameters["speed"] = .number(speed) } else { parameters["in_flight"] = .integer(inFlight) }
        let result = BenchResult(
            scenario: "replay", parameters: parameters, environment: .current(), durationSeconds: elapsed, throughput: throughput,
            parallelism: .init(mean: 0, max: 0), harness: .init(sampleCostNanoseconds: 0),
            metrics: recorded.mapValues(MetricSummary.init), histograms: recorded.mapValues(HistogramEncoding.encode),
            interrupted: Interruption.shared.requested ? true : nil)
        return (result, histograms, verdict)
    }

    /// The verdict when the replayed state differs from a recorded one.
    private func failure(_ plan: ReplayPlan, store: ReplayStore, from matched: (sequence: UInt64, state: Data?, index: Int),
                         through index: Int, recorded: Data, what: String) throws -> String {
        let stretch = Array(plan.items[matched.index...index])
        var text = "FAILED: the replayed state differs from \(what); it matched "
            + (matched.sequence == 0 ? "the initial state" : "the checkpoint after item \(matched.sequence)")
        if stretch.count == 1 {
            // One updater between a matching checkpoint and a differing one: it is the item, exactly.
            text += ", so it first differs after item \(stretch[0].sequence), \(stretch[0].type) (log line \(stretch[0].line))"
        } else {
            text += ", so it first differs after one of items \(stretch.first!.sequence)…\(stretch.last!.sequence)"
                + " (\(stretch.count) updaters; log checkpoints more often to narrow it)"
        }
        if let start = matched.state, let diagnose = store.diagnose {
            let found = try diagnose(start, stretch, recorded)
            if stretch.count > 1 { text += "\n  " + found.candidate }
            text += "\n  differs: " + found.differences
        }
        return text
    }

    /// The same updaters dispatched back to back into a fresh store (fire-and-forget, the last one awaited): the rate the
    /// store takes this traffic at, to set the replay's against.
    private func directRate(_ plan: ReplayPlan, replay: BenchReplay, context: BenchContext) async throws -> Double {
        let store = try replay.makeStore(context, plan.log.header.initialState)
        let started = nowNanoseconds()
        var last: DispatchHandle<any Sendable>?
        for item in plan.items { last = store.dispatch(item.item) }
        _ = await last?.result
        return Double(plan.items.count) / (Double(nowNanoseconds() - started) / 1e9)
    }
}

/// An updater handed to the replay's collector: its handle, when its latency counts from, its type's histogram.
struct Outstanding: Sendable {
    let handle: DispatchHandle<any Sendable>
    let since: UInt64
    let type: Int
}

/// A replay's histograms: one task records into them, one item at a time.
final class ReplayTimings: @unchecked Sendable {
    var endToEnd = makeHistogram()
    var byType: [LatencyHistogram]
    /// Updaters whose handle failed (a throwing updater that threw, as it may have when recorded).
    var rejected = 0

    init(types: Int) { byType = (0..<types).map { _ in makeHistogram() } }

    func record(type: Int, nanoseconds: UInt64, failed: Bool) {
        _ = endToEnd.record(max(nanoseconds, 1))
        _ = byType[type].record(max(nanoseconds, 1))
        if failed { rejected += 1 }
    }

    /// Both sets of samples (call once neither is written any more).
    func adding(_ other: ReplayTimings) -> ReplayTimings {
        let sum = ReplayTimings(types: byType.count)
        sum.endToEnd.add(endToEnd)
        sum.endToEnd.add(other.endToEnd)
        for index in byType.indices {
            sum.byType[index].add(byType[index])
            sum.byType[index].add(other.byType[index])
        }
        sum.rejected = rejected + other.rejected
        return sum
    }
}
