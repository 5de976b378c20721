import Foundation
import KatanaTestSupport
import KatanaTraceToolkit
import Testing

/// `katana-trace`, the toolkit's SwiftPM-built CLI: its reports against the reference reader, and its answers to
/// damaged traces and bad arguments.
enum KatanaTrace {
    /// The build's own, or the one `KATANA_TRACE_EXECUTABLE` names: `make test` and `make test-tsan` name `make
    /// dist`'s, the file users install, which reads traces about fourteen times faster than a debug build (the
    /// Makefile's test target has the figures). Under ThreadSanitizer an instrumented copy had nothing to check: the
    /// toolkit runs on one thread (it starts no task and no thread), and read traces three times slower, the largest
    /// share of that step. Its code is still instrumented, and debug-built, where this process calls the library.
    static let executable: URL = ProcessInfo.processInfo.environment["KATANA_TRACE_EXECUTABLE"]
        .map { URL(fileURLWithPath: $0) } ?? builtExecutable(named: "katana-trace")

    static func run(_ arguments: [String]) async throws -> (status: Int32, out: String, err: String) {
        try await runProcessSuspending(executable, arguments)
    }

    /// A copy of the sample in a fresh folder, with `damage` done to one of its files (`metadata`, `katana_0`, …).
    static func damagedSample(_ file: String, _ damage: (inout [UInt8]) throws -> Void) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-trace-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: Toolkit.sample, toPath: folder.path)
        let path = folder.appendingPathComponent("ust/uid/0/64-bit").appendingPathComponent(file)
        var bytes = [UInt8](try Data(contentsOf: path))
        try damage(&bytes)
        try Data(bytes).write(to: path)
        return folder
    }

    /// Replaces the first `text` in `bytes` with `replacement` (same length, so packetized metadata stays whole).
    static func replace(_ text: String, with replacement: String, in bytes: inout [UInt8]) {
        let needle = Array(text.utf8), new = Array(replacement.utf8)
        precondition(needle.count == new.count)
        guard let start = (0...(bytes.count - needle.count)).first(where: { Array(bytes[$0..<$0 + needle.count]) == needle })
        else { preconditionFailure("\(text) is not in the file") }
        bytes.replaceSubrange(start..<start + needle.count, with: new)
    }
}

@Suite(.checkedInChildProcesses) struct KatanaTraceCommandTests {
    @Test func analyzeOfTheSampleIsTheCommittedReport() async throws {
        let analysis = try await KatanaTrace.run(["analyze", Toolkit.sample])
        try #require(analysis.status == 0, "\(analysis.err)")
        let golden = try String(contentsOf: Paths.packageRoot.appendingPathComponent("traces/sample-analysis.txt"), encoding: .utf8)
        #expect(analysis.out == golden)
        #expect(analysis.out.contains("katana_bench.UserAction → katana_bench.FetchProfile"))

        let json = try await KatanaTrace.run(["analyze", "--json", Toolkit.sample])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        #expect(report["discarded_events"] as? Int == 0)
        #expect((report["types"] as? [[String: Any]])?.count ?? 0 >= 4)
        #expect((report["parallelism_timeline"] as? [[String: Any]])?.count == 10)
    }

    /// The report as JSON is the same whether the package's reader or babeltrace2 (the reference) decoded the
    /// sample, to the dispatch, for every option that changes what is kept or listed.
    @Test(.enabled(if: Fallback.babeltrace2Installed || LTTngEnvironment.underCI, "needs babeltrace2 (scripts/setup-system.sh)"),
          arguments: [[], ["--top", "2000"], ["--top", "5", "--begin", "0.004", "--end", "0.008"], ["--min-duration", "5us"],
                      ["--min-duration", "50us", "--top", "20"], ["--begin", "0.0052"], ["--end", "0.001"]])
    func analyzeAgreesWithBabeltrace2(options: [String]) async throws {
        let differences = try await readerDisagreements(Toolkit.sample, options)
        #expect(differences.isEmpty, "\(options): \(differences)")
    }

    /// `check` says the same whichever reader decoded the sample.
    @Test(.enabled(if: Fallback.babeltrace2Installed || LTTngEnvironment.underCI, "needs babeltrace2 (scripts/setup-system.sh)"))
    func checkAgreesWithBabeltrace2() async throws {
        let mine = try await KatanaTrace.run(["check", Toolkit.sample])
        #expect(mine.status == 0, "\(mine.err)")
        let reference = try await KatanaTrace.run(["check", "--reader", "babeltrace2", Toolkit.sample])
        #expect(reference.status == 0 && reference.err.isEmpty, "\(reference.err)")
        #expect(mine.out == reference.out)
        #expect(mine.out.contains("\"dispatches\": 1081"))
    }

    /// Damage a strict reader can tell at once: each ends with status 2, nothing on standard output and one line on
    /// standard error saying where — never a report.
    @Test(arguments: [
        ("metadata", "cut to 100 bytes", "content runs past the end of the file"),
        ("katana_0", "byte 1498 flipped (an event header's timestamp)", "timed after the packet's end"),
        ("katana_0", "byte 13014 flipped (an event header's timestamp)", "timed after the packet's end"),
        ("metadata", "a ';' missing", "expected ';'"),
        ("metadata", "an invalid integer encoding", "unknown integer encoding 'nonx'"),
        ("metadata", "a misspelt clock attribute", "unknown clock attribute 'frex'"),
    ])
    func damagedTracesAreRefusedInOneLine(file: String, damage: String, says: String) async throws {
        let trace = try KatanaTrace.damagedSample(file) { bytes in
            switch damage {
            case "cut to 100 bytes": bytes = Array(bytes.prefix(100))
            case let flip where flip.hasPrefix("byte 1498"): bytes[1498] ^= 0xff
            case let flip where flip.hasPrefix("byte 13014"): bytes[13014] ^= 0xff
            case "a ';' missing": KatanaTrace.replace("freq = 1000000000;", with: "freq = 1000000000 ", in: &bytes)
            case "an invalid integer encoding": KatanaTrace.replace("encoding = none", with: "encoding = nonx", in: &bytes)
            default: KatanaTrace.replace("freq = ", with: "frex = ", in: &bytes)
            }
        }
        defer { try? FileManager.default.removeItem(at: trace) }
        for command in ["analyze", "check"] {
            let outcome = try await KatanaTrace.run([command, trace.path])
            #expect(outcome.status == 2, "\(command), \(damage): \(outcome.err)")
            #expect(outcome.out.isEmpty, "\(command), \(damage): a report was written for a damaged trace")
            let lines = outcome.err.split(separator: "\n")
            #expect(lines.count == 1, "\(command), \(damage): \(outcome.err)")
            #expect(lines.first?.hasPrefix("katana-trace: ") == true && outcome.err.contains(says),
                    "\(command), \(damage): \(outcome.err)")
        }
    }

    @Test(arguments: [
        (["analyze", "--top", "0", "T"], "--top must be between 1 and 100000"),
        (["analyze", "--begin", "0.5", "--end", "0.1", "T"], "--end (0.1) is before --begin (0.5)"),
        (["analyze", "--min-duration", "soon", "T"], "soon is not a duration"),
        (["analyze", "--begin=-1", "T"], "--begin must be a number of seconds"),
    ])
    func badArgumentsAreUsageErrors(arguments: [String], says: String) async throws {
        let outcome = try await KatanaTrace.run(arguments.map { $0 == "T" ? Toolkit.sample : $0 })
        #expect(outcome.status == 64, "\(arguments): \(outcome.err)")
        #expect(outcome.err.contains(says), "\(arguments): \(outcome.err)")
        #expect(outcome.out.isEmpty)
    }

    /// A damaged trace's analysis can come out with a timeline slice whose mean is negative (more ends than begins
    /// in it): the fuzz test's `analyze` (text) once crashed on it ("Negative count not allowed"), drawing its bar.
    @Test func aDamagedTracesTimelineNeverCrashesTheTextReport() async throws {
        let analysis = try await KatanaTrace.run(["analyze", "--json", Toolkit.sample])
        var document = try #require(try JSONSerialization.jsonObject(with: Data(analysis.out.utf8)) as? [String: Any])
        var slices = try #require(document["parallelism_timeline"] as? [[String: Any]])
        slices[0]["mean_in_flight"] = -1.5
        slices[1]["mean_in_flight"] = 1e300
        document["parallelism_timeline"] = slices
        let report = try AnalysisReport.decode(try JSONSerialization.data(withJSONObject: document))
        let text = report.text(histogram: true)
        #expect(text.contains("side effects in flight over time:") && text.contains("mean  -1.50"), "\(text.prefix(2000))")
    }

    @Test func aMissingTraceIsOneLine() async throws {
        let outcome = try await KatanaTrace.run(["analyze", "/nonexistent/trace"])
        #expect(outcome.status == 2)
        #expect(outcome.err == "katana-trace: /nonexistent/trace: not a directory\n")
    }

    /// Set-up errors a user can make, answered before any session exists: status 2 and one line.
    @Test func recordRefusesANonEmptyOutputAndAMissingCommand() async throws {
        let noCommand = try await KatanaTrace.run(["record", "--"])
        #expect(noCommand.status == 2 && noCommand.err.contains("no command given"), "\(noCommand.err)")
        let busy = try await KatanaTrace.run(["record", "-o", Toolkit.sample, "--", "true"])
        #expect(busy.status == 2 && busy.err.contains("exists and is not empty"), "\(busy.err)")
        let size = try await KatanaTrace.run(["record", "--subbuf-size", "lots", "--", "true"])
        #expect(size.status == 2 && size.err.contains("expected a size"), "\(size.err)")
    }
}
