import Foundation
import Katana
import KatanaDispatchLog
import KatanaTestSupport
import KatanaTrace
import Testing
@testable import KatanaBenchCore

/// A state whose updaters do not commute: replayed in another order, it ends elsewhere.
struct Ledger: State, Codable, Equatable {
    var entries: [Int] = []
    var digest = 0
    init() {}
}

struct Post: StateUpdater, Codable {
    let value: Int
    func updateState(_ state: inout Ledger) {
        state.entries.append(value)
        state.digest = state.digest &* 31 &+ value
    }
}

/// `Post` as a regression would change it: one value booked wrong.
struct PostChanged: StateUpdater, Codable {
    let value: Int
    func updateState(_ state: inout Ledger) {
        state.entries.append(value)
        state.digest = state.digest &* 31 &+ (value == 203 ? 0 : value)
    }
}

/// Not Codable: logged by name only.
struct Forget: StateUpdater {
    func updateState(_ state: inout Ledger) { state.entries.removeAll() }
}

/// A side effect that posts five values, each awaited: replay does not run it, it replays its five posts.
struct PostFive: SideEffect, Codable {
    let base: Int
    func sideEffect(_ context: SideEffectContext<Ledger, EmptySideEffectDependencyContainer>) async throws {
        for offset in 0..<5 { try await context.dispatch(Post(value: base + offset)).value }
    }
}

typealias LedgerStore = Store<Ledger, EmptySideEffectDependencyContainer>

/// `replay` (issue #42, points 2, 3 and 5): a recorded store's log, replayed into a fresh store by a user's bench.
/// Serialized: the replay a program registers is the process's.
@Suite(.serialized) struct ReplayTests {
    static func replayOfLedgers(_ types: DispatchLogTypes? = nil) -> BenchReplay {
        var registered = DispatchLogTypes()
        registered.register(Post.self)
        return BenchReplay(types: types ?? registered) { context, initialState in
            LedgerStore(stateInitializer: { initialState }, configuration: .init(traceBackend: context.traceBackend))
        }
    }

    /// Records a ledger: ten top-level posts, then six side effects posting five each, concurrently.
    static func record(to path: String, checkpointEvery: Int = 10) async throws -> Ledger {
        let recorder = try DispatchLogRecorder(path: path, initialState: Ledger(), checkpointEvery: checkpointEvery)
        let store = LedgerStore(stateInitializer: { Ledger() }, configuration: .init(traceBackend: NoOpTraceBackend(), dispatchRecorder: recorder))
        for value in 0..<10 { store.dispatch(Post(value: value)) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for base in stride(from: 100, through: 600, by: 100) { group.addTask { try await store.dispatch(PostFive(base: base)).value } }
            try await group.waitForAll()
        }
        let final = store.state
        try recorder.finish(finalState: final)
        return final
    }

    static func replay(_ arguments: [String], with replay: BenchReplay = replayOfLedgers()) async throws -> Replay.Outcome {
        BenchScenarios.replay = replay
        defer { BenchScenarios.replay = nil }
        return try await Replay.parse(arguments + ["--trace-backend", "none"]).replay()
    }

    @Test func aRecordedRunReplaysToItsFinalStateFlatOutAndAtItsPace() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.jsonl").path
        let final = try await Self.record(to: path)
        #expect(final.entries.count == 40)

        for arguments in [[path, "--verify"], [path, "--verify", "--in-flight", "16"], [path, "--verify", "--pace", "recorded"]] {
            let outcome = try await Self.replay(arguments)
            #expect(outcome.verdict == "passed: the replay ends in the recorded final state and matched all 3 checkpoints on the way",
                    "\(arguments): \(outcome.verdict ?? "no verdict")")
            #expect(outcome.notes.contains("40 updaters to replay; 6 side effects not re-run (the updaters they dispatched are replayed in their place)"))
            // Every updater timed, overall and by its type; a katana-bench result, with what was replayed and how.
            #expect(outcome.result.scenario == "replay")
            #expect(outcome.result.metrics["replay.end_to_end"]?.count == 40 && outcome.result.metrics["replay.Post"]?.count == 40)
            #expect(outcome.result.parameters["side_effects_skipped"] == .integer(6) && outcome.result.parameters["updaters"] == .integer(40))
            #expect(outcome.result.parameters["loop"] == (arguments.contains("recorded") ? "open" : "closed"))
        }

        // What compare, merge and the CI gate read: --json, as run's.
        let json = directory.appendingPathComponent("replay.json").path
        BenchScenarios.replay = Self.replayOfLedgers()
        defer { BenchScenarios.replay = nil }
        #expect(await runWithExitCodes(UserBenchCommand.self, ["replay", path, "--repeat", "2", "--direct", "--json", json, "--trace-backend", "none"]) == 0)
        let compared = try await bench(["compare", json, json])
        #expect(compared.status == 0, "\(compared.out)\(compared.err)")
        let result = try Compare.load(json)
        #expect(result.repetitions?.count == 2 && (result.throughput["direct_per_second"] ?? 0) > 0)
    }

    /// Writes a ledger's log by hand: one `Post` per entry, logged at the time given (ns since the start), in order,
    /// and the final state they make.
    static func writePosts(_ posts: [(value: Int, at: UInt64)], to path: String) throws {
        let writer = try DispatchLogWriter(path: path, stateType: String(reflecting: Ledger.self), initialState: Ledger())
        var final = Ledger()
        for (index, post) in posts.enumerated() {
            writer.append(kind: .updater, type: String(reflecting: Post.self), id: UInt64(index + 1), parentID: 0,
                          value: Post(value: post.value), at: post.at)
            Post(value: post.value).updateState(&final)
        }
        try writer.finish(finalState: final)
    }

    /// The recorded pace: items recorded 150 ms apart are sent 150 ms apart (or a third of that at --speed 3).
    @Test func theRecordedPaceIsKept() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("paced.jsonl").path
        try Self.writePosts([(1, 0), (2, 150_000_000), (3, 300_000_000)], to: path)
        let paced = try await Self.replay([path, "--pace", "recorded", "--verify"])
        #expect(paced.result.durationSeconds >= 0.3, "\(paced.result.durationSeconds) s")
        #expect(paced.verdict?.hasPrefix("passed") == true)
        let faster = try await Self.replay([path, "--pace", "recorded", "--speed", "3"])
        #expect(faster.result.durationSeconds >= 0.1, "\(faster.result.durationSeconds) s")
    }

    /// Recorded times that go back (an edited or spliced log): the later item is due at once, not when an unsigned
    /// subtraction that wrapped says (some centuries on: the replay never ended).
    @Test func recordedTimesThatGoBackAreDueAtOnce() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("backwards.jsonl").path
        try Self.writePosts([(1, 200_000_000), (2, 0), (3, 100_000_000)], to: path)
        let watchdog = Watchdog("a replay of a log whose times go back", stallSeconds: 120)
        defer { watchdog.stop() }
        // At --speed 2 the wrapped difference, halved, no longer wraps back into the past when added to the start.
        let outcome = try await Self.replay([path, "--pace", "recorded", "--speed", "2", "--verify"])
        watchdog.progress()
        #expect(outcome.verdict?.hasPrefix("passed") == true, "\(outcome.verdict ?? "")")
        #expect(outcome.result.metrics["replay.end_to_end"]?.count == 3)
    }

    /// A changed updater: --verify fails and names the item whose replay first changes what differs.
    @Test func aChangedUpdaterFailsVerifyNamingTheItem() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("ledger.jsonl").path
        _ = try await Self.record(to: path)
        let log = try DispatchLogReader.read(path)
        let changed = try #require(log.entries.first { $0.value.map { String(decoding: $0, as: UTF8.self) } == #"{"value":203}"# })

        var types = DispatchLogTypes()
        types.register(PostChanged.self, as: String(reflecting: Post.self))
        let outcome = try await Self.replay([path, "--verify"], with: Self.replayOfLedgers(types))
        #expect(outcome.failed)
        // Every tenth updater checkpointed: the stretch between the last matching checkpoint and the first differing
        // one holds the changed item; every Post changes the digest, so the first of them is only a candidate.
        let verdict = outcome.verdict ?? ""
        let stretch = try #require(verdict.firstMatch(of: /first differs after one of items (\d+)…(\d+) \((\d+) updaters/), "\(verdict)")
        #expect(UInt64(stretch.1)! <= changed.sequence && changed.sequence <= UInt64(stretch.2)! && Int(stretch.3)! <= 10, "\(verdict)")
        #expect(verdict.contains("differs: digest: recorded"), "\(verdict)")

        // Checkpointed at every updater, the item is named exactly.
        let dense = directory.appendingPathComponent("dense.jsonl").path
        _ = try await Self.record(to: dense, checkpointEvery: 1)
        let denseLog = try DispatchLogReader.read(dense)
        let denseChanged = try #require(denseLog.entries.first { $0.value.map { String(decoding: $0, as: UTF8.self) } == #"{"value":203}"# })
        let exact = try await Self.replay([dense, "--verify"], with: Self.replayOfLedgers(types))
        #expect(exact.verdict?.contains("so it first differs after item \(denseChanged.sequence), KatanaBenchTests.Post (log line \(denseChanged.line))") == true,
                "\(exact.verdict ?? "")")
        // Without checkpoints the final state is all there is to compare: the stretch is the whole log, the item still named.
        let bare = directory.appendingPathComponent("bare.jsonl").path
        _ = try await Self.record(to: bare, checkpointEvery: 0)
        let onlyFinal = try await Self.replay([bare, "--verify"], with: Self.replayOfLedgers(types))
        #expect(onlyFinal.failed && onlyFinal.verdict?.contains("it matched the initial state, so it first differs after one of items 1…") == true,
                "\(onlyFinal.verdict ?? "")")
    }

    /// Bad logs: an unknown (renamed) type, a value-less item, another store's log, a newer format — one line each,
    /// naming what and where; a log cut short replays what is whole and says what was dropped.
    @Test func badLogsAreOneLineErrorsAndACutLogReplaysWhatIsWhole() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        func log(_ name: String, stateType: String = String(reflecting: Ledger.self),
                 _ items: [(String, (any Encodable & Sendable)?)]) throws -> String {
            let path = directory.appendingPathComponent(name).path
            let writer = try DispatchLogWriter(path: path, stateType: stateType, initialState: Ledger())
            for (index, item) in items.enumerated() {
                writer.append(kind: .updater, type: item.0, id: UInt64(index + 1), parentID: 0, value: item.1)
            }
            try writer.finish(finalState: nil)
            return path
        }
        func failure(_ arguments: [String], with replay: BenchReplay = ReplayTests.replayOfLedgers()) async -> String {
            do {
                _ = try await Self.replay(arguments, with: replay)
                return "no error"
            } catch {
                return "\(error)"
            }
        }
        let renamed = try log("renamed.jsonl", [("KatanaBenchTests.Post", Post(value: 1)), ("Shop.OldPost", Post(value: 2))])
        #expect(await failure([renamed]) == "line 3: Shop.OldPost is not a type this replay knows (renamed since the log was written? register it)")
        // Registered under its old name, it replays.
        var types = DispatchLogTypes()
        types.register(Post.self)
        types.register(Post.self, as: "Shop.OldPost")
        #expect(try await Self.replay([renamed], with: Self.replayOfLedgers(types)).result.metrics["replay.end_to_end"]?.count == 2)

        let nameOnly = try log("name-only.jsonl", [(String(reflecting: Forget.self), nil)])
        #expect(await failure([nameOnly]).contains("line 2: KatanaBenchTests.Forget"))
        let other = try log("other.jsonl", stateType: "Shop.State", [])
        #expect(await failure([other]) == "the log records a store of Shop.State; this replay builds a store of KatanaBenchTests.Ledger")
        let newer = directory.appendingPathComponent("newer.jsonl").path
        try Data("{\"katana_dispatch_log\":9,\"state_type\":\"S\",\"started_unix_ns\":1}\n".utf8).write(to: URL(fileURLWithPath: newer))
        #expect(await failure([newer]).contains("is a version 9 dispatch log; this build reads versions up to 1"))
        #expect(await failure([directory.appendingPathComponent("missing.jsonl").path]).hasPrefix("cannot read"))

        // Cut short in the middle of a line (the app was killed): what is whole is replayed, and verified against the
        // checkpoints it holds; the note says what was dropped.
        let path = directory.appendingPathComponent("ledger.jsonl").path
        _ = try await Self.record(to: path)
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let lines = whole.split(separator: UInt8(ascii: "\n"))
        let keep = lines[0..<30].reduce(0) { $0 + $1.count + 1 } + 7
        let cut = directory.appendingPathComponent("cut.jsonl").path
        try whole.prefix(keep).write(to: URL(fileURLWithPath: cut))
        let partial = try await Self.replay([cut, "--verify"])
        #expect(partial.notes.contains { $0.contains("is damaged at line 31: cut short; 1 line (7 bytes) from there on left out") }, "\(partial.notes)")
        #expect(partial.verdict?.hasPrefix("passed as far as the log goes") == true, "\(partial.verdict ?? "")")
        let replayed = try #require(partial.result.metrics["replay.end_to_end"]?.count)
        #expect(replayed > 0 && replayed < 40)
    }
}
