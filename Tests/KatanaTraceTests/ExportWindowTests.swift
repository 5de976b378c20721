import Foundation
import KatanaTestSupport
import KatanaTraceToolkit
import Testing

/// `katana-trace export` of a part of a recording: a time window (`--begin`/`--end`, as `analyze`'s), or windows
/// around the longest dispatches (`--slowest N`, `--margin`); the same options in `dump`. Each export is checked with
/// Perfetto's own schema against the dump of the same windows: every dispatch begun in them shown exactly once, no
/// flow without both ends, no slice left open — what a window's edge cuts shown to the edge and marked `cut`.
enum ExportWindow {
    /// Exports and dumps `trace` with `options`, has check_perfetto.py compare them; the verdict and export's line.
    static func checked(_ trace: String, _ options: [String]) async throws -> (verdict: TraceExport.Verdict, said: String, json: [String: Any]) {
        let export = TraceExport.temporary(".pftrace"), dump = TraceExport.temporary(".jsonl"), json = TraceExport.temporary(".json")
        defer { for file in [export, dump, json] { try? FileManager.default.removeItem(at: file) } }
        let exported = try await KatanaTrace.run(["export", trace, "-o", export.path] + options)
        guard exported.status == 0 else { throw RecordingError("export \(options) failed: \(exported.err)") }
        let dumped = try await KatanaTrace.run(["dump", trace] + options)
        guard dumped.status == 0 else { throw RecordingError("dump \(options) failed: \(dumped.err)") }
        try Data(dumped.out.utf8).write(to: dump)
        let script = Paths.packageRoot.appendingPathComponent("traces/check_perfetto.py").path
        let checked = try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/env"), ["python3", script, export.path, dump.path])
        guard let verdict = try? JSONDecoder().decode(TraceExport.Verdict.self, from: Data(checked.out.utf8)) else {
            throw RecordingError("check_perfetto.py (status \(checked.status)): \(checked.err)")
        }
        let asJSON = try await KatanaTrace.run(["export", "--format", "json", trace, "-o", json.path] + options)
        guard asJSON.status == 0 else { throw RecordingError("export --format json \(options) failed: \(asJSON.err)") }
        let document = try JSONSerialization.jsonObject(with: Data(contentsOf: json)) as? [String: Any] ?? [:]
        return (verdict, exported.out, document)
    }

    /// The trace-event JSON's slices (complete, or begun) that carry a `cut` argument, by what it says.
    static func cuts(_ document: [String: Any]) -> [String: Int] {
        var found: [String: Int] = [:]
        for event in document["traceEvents"] as? [[String: Any]] ?? [] {
            if let cut = (event["args"] as? [String: Any])?["cut"] as? String { found[cut, default: 0] += 1 }
        }
        return found
    }

    /// The ids of the dispatches the JSON export shows as slices.
    static func shownIDs(_ document: [String: Any]) -> Set<UInt64> {
        var ids: Set<UInt64> = []
        for event in document["traceEvents"] as? [[String: Any]] ?? []
        where ["X", "B", "b"].contains(event["ph"] as? String ?? "") && ["state_updater", "side_effect"].contains(event["cat"] as? String ?? "") {
            if let id = (event["args"] as? [String: Any])?["id"] as? NSNumber { ids.insert(id.uint64Value) }
        }
        return ids
    }
}

@Suite(.checkedInChildProcesses) struct ExportWindowTests {
    /// A window in the middle of each kept recording (the sample; the katana-trace recording with two streams and
    /// LTTng's headers) and at its ends: what the window holds, once each, and what its edges cut, marked.
    @Test(arguments: [["--begin", "0.004", "--end", "0.006"], ["--begin", "0.008"], ["--end", "0.003"], ["--begin", "0.0001", "--end", "0.0002"]])
    func aTimeWindowShowsEachOfItsDispatchesOnceAndMarksWhatItsEdgesCut(window: [String]) async throws {
        for trace in [Toolkit.sample, Paths.packageRoot.appendingPathComponent("traces/sample-record").path] {
            let (verdict, said, document) = try await ExportWindow.checked(trace, window)
            #expect(verdict.problems.isEmpty, "\(window) \(trace): \(verdict.problems.prefix(5))")
            #expect(verdict.slices_left_open == 0 && verdict.dispatches_shown >= verdict.dispatches, "\(window): \(said)")
            let whole = try await KatanaTrace.run(["analyze", "--json", trace])
            let total = try #require(try JSONSerialization.jsonObject(with: Data(whole.out.utf8)) as? [String: Any])["dispatches"] as? Int
            #expect(verdict.dispatches < total ?? 0, "\(window): a window shows less than the whole recording")
            if window == ["--begin", "0.004", "--end", "0.006"], trace == Toolkit.sample {
                // Side effects run for milliseconds in the sample (12 ms long): some began before the window, some
                // end after it.
                let cuts = ExportWindow.cuts(document)
                #expect(cuts["began before the window", default: 0] > 0 && cuts["ended after the window", default: 0] > 0, "\(cuts)")
                #expect(said.contains("more shown in part"), "\(said)")
            }
        }
    }

    /// `--slowest N`: windows around the N dispatches `analyze --top N` lists, each from its dispatch call to its end
    /// plus the margin, merged where they overlap — every one of them shown, and the check as above.
    @Test(arguments: [(3, "100us"), (50, "10us"), (10, "0")])
    func theSlowestDispatchesAreExportedWithTheirSurroundings(slowest: Int, margin: String) async throws {
        for trace in [Toolkit.sample, Paths.packageRoot.appendingPathComponent("traces/sample-record").path] {
            let options = ["--slowest", "\(slowest)", "--margin", margin]
            let (verdict, said, document) = try await ExportWindow.checked(trace, options)
            #expect(verdict.problems.isEmpty, "\(options) \(trace): \(verdict.problems.prefix(5))")
            #expect(verdict.slices_left_open == 0, "\(said)")
            let analysis = try await KatanaTrace.run(["analyze", "--json", "--top", "\(slowest)", trace])
            let top = try #require(try JSONSerialization.jsonObject(with: Data(analysis.out.utf8)) as? [String: Any])["top"] as? [[String: Any]]
            let slowestIDs = Set((top ?? []).compactMap { ($0["id"] as? NSNumber)?.uint64Value })
            #expect(slowestIDs.count == slowest)
            #expect(slowestIDs.isSubset(of: ExportWindow.shownIDs(document)), "\(slowestIDs.subtracting(ExportWindow.shownIDs(document)))")
            // The same windows in analyze: the dispatches that began in them, the slowest among them.
            let windowed = try await KatanaTrace.run(["analyze", "--json", "--top", "\(slowest)", trace] + options)
            let report = try #require(try JSONSerialization.jsonObject(with: Data(windowed.out.utf8)) as? [String: Any], "\(windowed.err)")
            let kept = (report["window"] as? [String: Any])?["dispatches"] as? Int ?? 0
            let all = (try JSONSerialization.jsonObject(with: Data(analysis.out.utf8)) as? [String: Any])?["dispatches"] as? Int ?? 0
            #expect(kept >= slowest && kept <= all, "\(kept) of \(all)")
            let windowedIDs = Set((report["top"] as? [[String: Any]] ?? []).compactMap { ($0["id"] as? NSNumber)?.uint64Value })
            #expect(windowedIDs == slowestIDs)
        }
    }

    /// Past the size Perfetto's UI opens (`--max-size`, 512 MiB by default), the export ends as soon as its size is
    /// projected past it: one line that suggests a window, status 2, and no file. `--force` writes it anyway.
    @Test func anExportPastItsSizeLimitIsRefusedAndLeavesNoFile() async throws {
        let folder = TraceExport.temporary("")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("out.pftrace").path
        let refused = try await KatanaTrace.run(["export", Toolkit.sample, "-o", output, "--max-size", "60K"])
        #expect(refused.status == 2 && refused.out.isEmpty, "\(refused.status) \(refused.out)")
        let lines = refused.err.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("the export would be about") && lines[0].contains("--begin/--end")
                && lines[0].contains("--force"), "\(refused.err)")
        #expect(try TraceExport.leftovers(in: folder, named: "out.pftrace").isEmpty)
        // A window within it is written; so is the whole with --force.
        let window = try await KatanaTrace.run(["export", Toolkit.sample, "-o", output, "--max-size", "60K", "--begin", "0.004", "--end", "0.005"])
        #expect(window.status == 0 && FileManager.default.fileExists(atPath: output), "\(window.err)")
        let forced = try await KatanaTrace.run(["export", Toolkit.sample, "-o", output, "--max-size", "60K", "--force"])
        #expect(forced.status == 0 && forced.out.contains("1081 dispatches"), "\(forced.err)")
    }

    /// `--type`: only the dispatches of the types asked for — in an export under the side effects they run in, shown
    /// from their first child of the type; in a dump and an analysis, nothing else.
    @Test func onlyTheTypesAskedForAreShownUnderTheirParents() async throws {
        let type = "katana_bench.FetchProfile", parent = "katana_bench.UserAction"
        let (verdict, said, document) = try await ExportWindow.checked(Toolkit.sample, ["--type", type])
        #expect(verdict.problems.isEmpty && verdict.slices_left_open == 0, "\(said): \(verdict.problems.prefix(5))")
        let slices = (document["traceEvents"] as? [[String: Any]] ?? []).filter {
            ["X", "b"].contains($0["ph"] as? String ?? "") && ["side_effect", "state_updater"].contains($0["cat"] as? String ?? "")
        }
        let names = Set(slices.compactMap { $0["name"] as? String })
        #expect(names == [type, parent], "\(names)")
        // Every FetchProfile whole; each UserAction it ran under shown from its child, marked.
        #expect(slices.filter { $0["name"] as? String == type }.count == 120)
        let parents = slices.filter { $0["name"] as? String == parent }
        #expect(parents.count == 120 && parents.allSatisfy {
            ($0["args"] as? [String: Any])?["cut"] as? String == "began before the dispatch of its type shown"
        })
        let dumped = try await KatanaTrace.run(["dump", "--type", type, Toolkit.sample])
        let lines = dumped.out.split(separator: "\n").dropLast()
        #expect(lines.count == 360 && lines.allSatisfy { $0.contains("\"name\": \"\(type)\"") }, "\(lines.count)")
        let analysis = try await KatanaTrace.run(["analyze", "--json", "--type", type, Toolkit.sample])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(analysis.out.utf8)) as? [String: Any])
        let types = (report["types"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(types == [type], "\(types)")
    }

    @Test func windowOptionsAreCheckedBeforeAnythingIsRead() async throws {
        for (options, said) in [(["--margin", "1ms"], "--margin applies to --slowest"), (["--slowest", "0"], "--slowest must be between"),
                                (["--begin", "0.5", "--end", "0.1"], "is before --begin"), (["--slowest", "2", "--margin", "soon"], "--margin: soon is not a duration"),
                                (["--begin=-1"], "--begin must be a number of seconds"), (["--max-size", "lots"], "--max-size: lots is not a size")] {
            for command in options.contains("--max-size") ? ["export"] : ["export", "dump"] {
                var arguments = [command, Toolkit.sample] + options
                if command == "export" { arguments += ["-o", TraceExport.temporary(".pftrace").path] }
                let outcome = try await KatanaTrace.run(arguments)
                #expect(outcome.status != 0 && outcome.err.contains(said), "\(arguments): \(outcome.err)")
            }
        }
    }
}

/// Windows on a recording of many packets (LTTng's real headers, each packet's time range in its context).
extension LTTngRecordingTests {
    /// A window near the end: the packets that end before it are skipped unread (the export says how many), and what
    /// is exported is checked against the dump of the same window as above. Its subject is the export (the
    /// ExportWindowTests above skip under `make test-tsan` for the same reason).
    @Test(.checkedInChildProcesses) func aWindowNearARecordingsEndSkipsThePacketsBeforeIt() async throws {
        // Three seconds at 2,000 top-level dispatches a second, in 64 KiB packets: tens of packets, and the window's
        // last tenth begins well over the reader's one-second look back.
        let (directory, _) = try await recordWithKatanaTrace(
            [Paths.katanaBench.path, "-s", "mixed", "--rate", "2000", "--duration", "3", "--warmup", "0"],
            recording: ["--subbuf-size", "64K"])
        defer { try? FileManager.default.removeItem(at: directory) }
        let dumped = try await KatanaTrace.run(["dump", directory.path])
        try #require(dumped.status == 0, "\(dumped.err)")
        let times = dumped.out.split(separator: "\n").compactMap { line -> Int64? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return (object["ts"] as? NSNumber)?.int64Value
        }
        let first = try #require(times.min()), last = try #require(times.max())
        let begin = String(format: "%.6f", Double(last - first) * 0.9 / 1e9)
        let export = TraceExport.temporary(".pftrace")
        defer { try? FileManager.default.removeItem(at: export) }
        let windowed = try await KatanaTrace.run(["export", directory.path, "-o", export.path, "--begin", begin])
        try #require(windowed.status == 0, "\(windowed.err)")
        let skipped = windowed.out.split(separator: ";").last.flatMap { Int($0.split(separator: " ").first ?? "") } ?? 0
        #expect(windowed.out.contains("packets before the window skipped unread") && skipped > 0, "\(windowed.out)")
        let (verdict, said, _) = try await ExportWindow.checked(directory.path, ["--begin", begin])
        #expect(verdict.problems.isEmpty, "\(said): \(verdict.problems.prefix(5))")
        #expect(verdict.dispatches > 0, "\(said)")
        // The window runs to the trace's end: what the trace's end cuts is left open there, as in the whole export —
        // but for what began before the packets read (the session records every process: another test's process
        // may still be running one), which is not shown at all.
        let whole = try await TraceExport.checkedProtobuf(directory.path)
        #expect(whole.problems.isEmpty && verdict.slices_left_open <= whole.slices_left_open,
                "\(verdict.slices_left_open) open at the window's end, \(whole.slices_left_open) at the whole export's")
    }
}
