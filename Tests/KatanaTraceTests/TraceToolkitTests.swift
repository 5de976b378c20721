import Foundation
import KatanaTrace
import Testing

enum Toolkit {
    static let python = "/usr/bin/python3"
    static var bt2Available: Bool {
        (try? run([python, "-c", "import bt2"]))?.status == 0
    }
    static let xmllintInstalled = FileManager.default.isExecutableFile(atPath: "/usr/bin/xmllint")
    static let sample = Paths.packageRoot.appendingPathComponent("traces/sample").path
    /// Trace Compass's XML analysis schema is Eclipse's (EPL-2.0), so the project does not ship it: the test that
    /// validates `traces/katana.xml` reads it from the folder named by `KATANA_TRACECOMPASS_XSD` (CI sets it).
    static let schemaVariable = "KATANA_TRACECOMPASS_XSD"
    static var schema: String? {
        guard let folder = ProcessInfo.processInfo.environment[schemaVariable], !folder.isEmpty else { return nil }
        return URL(fileURLWithPath: folder).appendingPathComponent("xmlDefinition.xsd").path
    }
    static let schemaSkipMessage = """
        needs Trace Compass's XML analysis schema, which the project does not ship (EPL-2.0). Copy the \
        *.xsd files of Eclipse Trace Compass's tmf/org.eclipse.tracecompass.tmf.analysis.xml.core/src/org/eclipse/\
        tracecompass/tmf/analysis/xml/core/module/ into a folder and run with \(schemaVariable)=that/folder \
        (and xmllint, from libxml2-utils). Under CI=true this test always runs.
        """

    static func tool(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        try run([python, Paths.traceTool] + arguments)
    }
}

/// Checks a Chrome/Perfetto trace-event document against the format's rules; returns the problems found.
func traceEventProblems(_ document: [String: Any]) -> [String] {
    guard let events = document["traceEvents"] as? [[String: Any]] else { return ["no traceEvents array"] }
    var problems: [String] = []
    var open: [String: Int] = [:]
    for (index, event) in events.enumerated() {
        guard let ph = event["ph"] as? String else { problems.append("event \(index) has no ph"); continue }
        func need(_ keys: [String]) {
            for key in keys where event[key] == nil { problems.append("event \(index) (\(ph)) lacks \(key)") }
        }
        switch ph {
        case "X":
            need(["name", "ts", "dur", "pid", "tid"])
            if let dur = event["dur"] as? Double, dur < 0 { problems.append("event \(index): negative dur") }
        case "b", "e":
            need(["name", "cat", "id", "ts", "pid"])
            if let id = event["id"] as? String { open[id, default: 0] += ph == "b" ? 1 : -1 }
        case "C":
            need(["name", "ts", "pid", "args"])
            if let args = event["args"] as? [String: Any], !args.values.allSatisfy({ $0 is NSNumber }) {
                problems.append("event \(index): counter args must be numbers")
            }
        case "M":
            need(["name", "pid", "args"])
            if let name = event["name"] as? String, !["process_name", "thread_name"].contains(name) {
                problems.append("event \(index): unexpected metadata \(name)")
            }
        default:
            problems.append("event \(index): unexpected phase \(ph)")
        }
        if ph != "M", let ts = event["ts"] as? Double, !(ts >= 0 && ts < 1e10) {
            problems.append("event \(index): ts \(ts) is not in µs from the trace's start")
        }
    }
    for (id, balance) in open where balance != 0 { problems.append("async id \(id) is not one b and one e") }
    return problems
}

@Suite(.enabled(if: Toolkit.bt2Available || LTTngEnvironment.underCI, "needs python3-bt2 (scripts/setup-system.sh)"))
struct TraceToolkitTests {
    @Test func theSampleAnalysisMatchesItsCommittedOutput() throws {
        let analysis = try Toolkit.tool(["analyze", Toolkit.sample])
        try #require(analysis.status == 0, "\(analysis.err)")
        let golden = try String(contentsOf: Paths.packageRoot.appendingPathComponent("traces/sample-analysis.txt"), encoding: .utf8)
        #expect(analysis.out == golden)
        #expect(analysis.out.contains("katana_bench.UserAction"))
        #expect(analysis.out.contains("katana_bench.UserAction → katana_bench.FetchProfile"))

        let json = try Toolkit.tool(["analyze", "--json", Toolkit.sample])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any])
        #expect(report["discarded_events"] as? Int == 0)
        #expect((report["types"] as? [[String: Any]])?.count ?? 0 >= 4)
        #expect((report["parallelism_timeline"] as? [[String: Any]])?.count == 10)
    }

    @Test func theSampleExportMatchesTheGoldenFileAndTheFormatsRules() throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("katana-export-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: output) }
        let exported = try Toolkit.tool(["export", Toolkit.sample, "-o", output.path])
        try #require(exported.status == 0, "\(exported.err)")
        let produced = try Data(contentsOf: output)
        let golden = try Data(contentsOf: Paths.packageRoot.appendingPathComponent("traces/sample-perfetto.json"))
        #expect(produced == golden, "the export of traces/sample no longer matches traces/sample-perfetto.json")
        let document = try #require(try JSONSerialization.jsonObject(with: produced) as? [String: Any])
        #expect(traceEventProblems(document).isEmpty, "\(traceEventProblems(document).prefix(5))")
        let events = document["traceEvents"] as? [[String: Any]] ?? []
        let slices = events.filter { $0["ph"] as? String == "X" }
        #expect(slices.count == 1081)
        #expect(events.contains { $0["ph"] as? String == "C" })
        #expect(events.contains { $0["name"] as? String == "thread_name" })
    }

    @Test func badInputIsAClearErrorWithExitStatusTwo() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        try "hello".write(to: empty.appendingPathComponent("notes.txt"), atomically: true, encoding: .utf8)
        for command in ["check", "analyze", "dump"] {
            let outcome = try Toolkit.tool([command, empty.path])
            #expect(outcome.status == 2, "\(command): \(outcome.status)")
            #expect(outcome.err.contains("katana_trace:"))
        }
        #expect(try Toolkit.tool(["check", "/nonexistent/trace"]).status == 2)

        // A truncated trace: a copy of the sample whose data stream is cut in the middle of a packet.
        let truncated = FileManager.default.temporaryDirectory.appendingPathComponent("truncated-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: truncated) }
        try FileManager.default.copyItem(atPath: Toolkit.sample, toPath: truncated.path)
        let stream = truncated.appendingPathComponent("ust/uid/0/64-bit/katana_1")
        let handle = try FileHandle(forWritingTo: stream)
        try handle.truncate(atOffset: 5_000)
        try handle.close()
        let outcome = try Toolkit.tool(["analyze", truncated.path])
        #expect(outcome.status == 2, "a truncated trace must be rejected: \(outcome.status) \(outcome.out.prefix(200))")
        #expect(outcome.err.contains("not a readable CTF trace"))

        let unwritable = try Toolkit.tool(["export", Toolkit.sample, "-o", "/nonexistent/out.json"])
        #expect(unwritable.status == 2)
    }

    @Test(.enabled(if: (Toolkit.xmllintInstalled && Toolkit.schema != nil) || LTTngEnvironment.underCI,
                   Comment(rawValue: Toolkit.schemaSkipMessage)))
    func theTraceCompassAnalysisValidatesAgainstTheSchema() throws {
        let schema = try #require(Toolkit.schema, "CI=true but \(Toolkit.schemaVariable) is not set: .ci/run points it at the schema folder")
        #expect(FileManager.default.fileExists(atPath: schema), "\(Toolkit.schemaVariable) names no xmlDefinition.xsd: \(schema)")
        let outcome = try run(["xmllint", "--noout", "--schema", schema,
                               Paths.packageRoot.appendingPathComponent("traces/katana.xml").path])
        #expect(outcome.status == 0, "\(outcome.err)")
        // And a broken analysis does not: the check is real.
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("broken-\(UUID().uuidString).xml")
        defer { try? FileManager.default.removeItem(at: broken) }
        let text = try String(contentsOf: Paths.packageRoot.appendingPathComponent("traces/katana.xml"), encoding: .utf8)
        try text.replacingOccurrences(of: "<stateProvider id=\"org.katana.dispatch.state\" version=\"2\">",
                                      with: "<stateProvider id=\"org.katana.dispatch.state\">")
            .write(to: broken, atomically: true, encoding: .utf8)
        #expect(try run(["xmllint", "--noout", "--schema", schema, broken.path]).status != 0)
    }
}
