import Foundation
import KatanaTestSupport
import Testing

/// `katana-trace export` and `dump`: Perfetto's protobuf checked with Perfetto's own schema, the JSON in the
/// trace-event rules, nothing lost, and damaged input or a bad target refused without leaving a file behind.
enum TraceExport {
    /// What `traces/check_perfetto.py` reports of an export.
    struct Verdict: Decodable {
        let problems: [String]
        let dispatches: Int
        let dispatches_shown: Int
        let flows: Int
        let slices_left_open: Int
        let packets: Int
        let tracks: Int
    }

    /// A fresh path in the temporary folder.
    static func temporary(_ suffix: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("katana-export-test-\(UUID().uuidString)\(suffix)")
    }

    /// Exports `trace` as Perfetto protobuf, dumps it, and has Perfetto's schema check the export against the dump.
    static func checkedProtobuf(_ trace: String) async throws -> Verdict {
        let export = temporary(".pftrace"), dump = temporary(".jsonl")
        defer {
            try? FileManager.default.removeItem(at: export)
            try? FileManager.default.removeItem(at: dump)
        }
        let exported = try await KatanaTrace.run(["export", trace, "-o", export.path])
        guard exported.status == 0 else { throw RecordingError("export failed: \(exported.err)") }
        let dumped = try await KatanaTrace.run(["dump", trace])
        guard dumped.status == 0 else { throw RecordingError("dump failed: \(dumped.err)") }
        try Data(dumped.out.utf8).write(to: dump)
        let script = Paths.packageRoot.appendingPathComponent("traces/check_perfetto.py").path
        let checked = try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/env"), ["python3", script, export.path, dump.path])
        guard let verdict = try? JSONDecoder().decode(Verdict.self, from: Data(checked.out.utf8)) else {
            throw RecordingError("check_perfetto.py (status \(checked.status)): \(checked.err)")
        }
        return verdict
    }

    /// Files a failed export may have left in `folder`: the target or a temporary beside it.
    static func leftovers(in folder: URL, named name: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path)
            .filter { $0 == name || $0.hasPrefix(".katana-export-") }
    }
}

@Suite(.checkedInChildProcesses) struct TraceExportTests {
    @Test func theSampleExportsToProtobufThatPerfettosSchemaAccepts() async throws {
        let verdict = try await TraceExport.checkedProtobuf(Toolkit.sample)
        #expect(verdict.problems.isEmpty, "\(verdict.problems)")
        #expect(verdict.dispatches == 1081 && verdict.dispatches_shown == 1081)
        // A flow per dispatch: each was queued (dispatch call → begin) or dispatched by a parent side effect.
        #expect(verdict.flows == 1081)
        #expect(verdict.slices_left_open == 0)
    }

    @Test func theJSONExportKeepsEveryDispatchInTheTraceEventRules() async throws {
        let output = TraceExport.temporary(".json")
        defer { try? FileManager.default.removeItem(at: output) }
        let exported = try await KatanaTrace.run(["export", "--format", "json", Toolkit.sample, "-o", output.path])
        try #require(exported.status == 0, "\(exported.err)")
        #expect(exported.out.contains("1081 dispatches"), "\(exported.out)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: output)) as? [String: Any])
        #expect(traceEventProblems(document).isEmpty, "\(traceEventProblems(document).prefix(5))")
        let recorded = try await recordedDispatches(Toolkit.sample)
        #expect(recorded.count == 1081)
        #expect(exportedDispatches(document) == recorded)
        let events = document["traceEvents"] as? [[String: Any]] ?? []
        func count(_ phase: String, _ category: String? = nil) -> Int {
            events.filter { $0["ph"] as? String == phase && (category == nil || $0["cat"] as? String == category) }.count
        }
        // Side effects as async slices (they suspend and move threads), a queue wait per dispatch, the parents'
        // instants, a flow per dispatch, the threads named.
        #expect(count("X", "side_effect") == 0)
        #expect(count("b", "side_effect") == 240)
        #expect(count("b", "queue_wait") == 1081)
        #expect(count("n") == 840)
        #expect(Set(events.compactMap { $0["bind_id"] as? String }).count == 1081)
        #expect(count("C") > 0)
        #expect(events.contains { $0["name"] as? String == "thread_name" })
    }

    /// `dump` writes what babeltrace2 decodes: every field babeltrace2 gives (payload fields such as `queue_depth`,
    /// `store_id` and `state_type` included) with babeltrace2's value, and no other, line for line.
    @Test(.enabled(if: Fallback.babeltrace2Installed || LTTngEnvironment.underCI, "needs babeltrace2 (scripts/setup-system.sh)"))
    func dumpAgreesWithTheReferenceReader() async throws {
        let mine = try await KatanaTrace.run(["dump", Toolkit.sample])
        try #require(mine.status == 0, "\(mine.err)")
        let reference = try await KatanaTrace.run(["dump", "--reader", "babeltrace2", Toolkit.sample])
        try #require(reference.status == 0, "\(reference.err)")
        // Events of two streams at the same nanosecond may come in either order: lines are compared in (ts, id,
        // event) order.
        func lines(_ text: String) throws -> [[String: AnyHashable]] {
            try text.split(separator: "\n").map { line in
                try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: AnyHashable])
            }.sorted { a, b in
                let x = (a["ts"] as? Int ?? 0, a["id"] as? Int ?? 0, a["event"] as? String ?? "")
                let y = (b["ts"] as? Int ?? 0, b["id"] as? Int ?? 0, b["event"] as? String ?? "")
                return x < y
            }
        }
        let ours = try lines(mine.out), theirs = try lines(reference.out)
        #expect(ours.count == theirs.count && ours.count == 4069)
        var differences: [String] = []
        for (index, (line, expected)) in zip(ours, theirs).enumerated() {
            for key in Set(line.keys).union(expected.keys).sorted() where line[key] != expected[key] {
                differences.append("line \(index + 1): \(key) = \(line[key].map { "\($0)" } ?? "nothing"), babeltrace2 says \(expected[key].map { "\($0)" } ?? "nothing")")
            }
        }
        #expect(differences.count == 0, "\(differences.prefix(5))")
    }

    /// Damage found in the middle of the read: status 2, one line, and no file — neither the one asked for nor the
    /// temporary it was being written to.
    @Test(arguments: ["perfetto", "json"])
    func aDamagedTraceLeavesNoExport(format: String) async throws {
        let trace = try KatanaTrace.damagedSample("katana_0") { $0[13014] ^= 0xff }
        defer { try? FileManager.default.removeItem(at: trace) }
        let folder = TraceExport.temporary("")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("out.trace")
        let outcome = try await KatanaTrace.run(["export", "--format", format, trace.path, "-o", output.path])
        #expect(outcome.status == 2, "\(outcome.err)")
        #expect(outcome.err.split(separator: "\n").count == 1 && outcome.err.contains("timed after the packet's end"),
                "\(outcome.err)")
        #expect(try TraceExport.leftovers(in: folder, named: "out.trace").isEmpty)

        let dumped = try await KatanaTrace.run(["dump", trace.path])
        #expect(dumped.status == 2 && dumped.err.split(separator: "\n").count == 1, "\(dumped.err)")
    }

    @Test func aTargetThatCannotBeWrittenIsRefusedBeforeReading() async throws {
        let folder = TraceExport.temporary("")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let directory = try await KatanaTrace.run(["export", Toolkit.sample, "-o", folder.path])
        #expect(directory.status == 2 && directory.err.contains("it is a directory"), "\(directory.err)")
        let missing = try await KatanaTrace.run(["export", Toolkit.sample, "-o", "/nonexistent/folder/x.pftrace"])
        #expect(missing.status == 2 && missing.err.contains("is not a writable directory"), "\(missing.err)")
        #expect(directory.err.split(separator: "\n").count == 1 && missing.err.split(separator: "\n").count == 1)
        let format = try await KatanaTrace.run(["export", "--format", "svg", Toolkit.sample, "-o", "x"])
        #expect(format.status == 64, "\(format.err)")
    }

    /// An existing file is replaced only by a whole export.
    @Test func anExistingFileIsReplacedWhole() async throws {
        let output = TraceExport.temporary(".pftrace")
        defer { try? FileManager.default.removeItem(at: output) }
        try Data("old".utf8).write(to: output)
        let exported = try await KatanaTrace.run(["export", Toolkit.sample, "-o", output.path])
        try #require(exported.status == 0, "\(exported.err)")
        let size = try FileManager.default.attributesOfItem(atPath: output.path)[.size] as? Int ?? 0
        #expect(size > 100_000)
        #expect(exported.out.contains("\(size) bytes"), "\(exported.out)")
    }
}
