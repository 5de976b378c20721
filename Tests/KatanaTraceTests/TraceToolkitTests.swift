import Foundation
import Glibc
import KatanaTestSupport
import KatanaTrace
import Testing

enum Toolkit {
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

    /// `katana-trace ARGUMENTS` with babeltrace2 stopped after `stall` seconds without output (a fallback read of a
    /// damaged trace can spin), timed.
    /// A copy of the sample whose metadata spells `field` (with its `;`) as `renamed` wherever it is declared.
    static func sampleWithFieldRenamed(_ field: String, to renamed: String) throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("renamed-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: sample, toPath: root.path)
        let metadata = root.appendingPathComponent("ust/uid/0/64-bit/metadata")
        var bytes = [UInt8](try Data(contentsOf: metadata))
        let from = Array(field.utf8), to = Array(renamed.utf8)
        var count = 0
        for index in 0...(bytes.count - from.count) where Array(bytes[index..<index + from.count]) == from {
            bytes.replaceSubrange(index..<index + from.count, with: to)
            count += 1
        }
        guard count > 0 else { throw RecordingError("the sample's metadata declares no \(field)") }
        try Data(bytes).write(to: metadata)
        return root
    }

    static func trace(_ arguments: [String], stall seconds: Int) async throws
        -> (outcome: (status: Int32, out: String, err: String), seconds: Double)
    {
        try await timedRunProcessSuspending(KatanaTrace.executable, arguments, environment: ["KATANA_TRACE_STALL_SECONDS": "\(seconds)"])
    }
}

/// Checks a Chrome/Perfetto trace-event document against the format's rules and what Perfetto's importer needs:
/// complete (`X`) slices nest strictly per thread (the importer drops those that do not), every async id has one
/// begin and one end, and every flow (`bind_id`) has one start, one end and only steps between. Returns the problems.
func traceEventProblems(_ document: [String: Any]) -> [String] {
    guard let events = document["traceEvents"] as? [[String: Any]] else { return ["no traceEvents array"] }
    var problems: [String] = []
    var open: [String: Int] = [:]
    var slices: [String: [(start: Double, end: Double, name: String)]] = [:]
    var flows: [String: (starts: Int, ends: Int)] = [:]
    for (index, event) in events.enumerated() {
        guard let ph = event["ph"] as? String else { problems.append("event \(index) has no ph"); continue }
        func need(_ keys: [String]) {
            for key in keys where event[key] == nil { problems.append("event \(index) (\(ph)) lacks \(key)") }
        }
        switch ph {
        case "X":
            need(["name", "ts", "dur", "pid", "tid"])
            if let ts = event["ts"] as? Double, let dur = event["dur"] as? Double {
                if dur < 0 { problems.append("event \(index): negative dur") }
                slices["\(event["pid"] ?? 0)/\(event["tid"] ?? 0)", default: []].append((ts, ts + dur, event["name"] as? String ?? ""))
            }
        case "b", "e":
            need(["name", "cat", "id", "ts", "pid"])
            if let id = event["id"] as? String { open[id, default: 0] += ph == "b" ? 1 : -1 }
        case "n":
            need(["name", "cat", "id", "ts", "pid"])
        case "i":
            need(["name", "ts", "pid", "s"])
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
        if let bind = event["bind_id"] as? String {
            let into = event["flow_in"] as? Bool == true, out = event["flow_out"] as? Bool == true
            if !into && !out { problems.append("event \(index): bind_id without flow_in or flow_out") }
            if out && !into { flows[bind, default: (0, 0)].starts += 1 }
            if into && !out { flows[bind, default: (0, 0)].ends += 1 }
        }
    }
    for (id, balance) in open where balance != 0 { problems.append("async id \(id) is not one b and one e") }
    for (bind, count) in flows where count.starts != 1 || count.ends != 1 {
        problems.append("flow \(bind): \(count.starts) starts and \(count.ends) ends")
    }
    // Strict nesting per thread: sorted by start (longest first at equal starts), each slice lies inside the
    // innermost open one or after it.
    for (thread, list) in slices {
        var stack: [(start: Double, end: Double, name: String)] = []
        for slice in list.sorted(by: { $0.start != $1.start ? $0.start < $1.start : $0.end > $1.end }) {
            while let top = stack.last, top.end <= slice.start, !(top.end == slice.start && slice.end == slice.start && top.start == slice.start) {
                stack.removeLast()
            }
            if let top = stack.last, slice.end > top.end {
                problems.append("thread \(thread): \(slice.name) [\(slice.start), \(slice.end)] overlaps \(top.name) [\(top.start), \(top.end)]")
            }
            stack.append(slice)
        }
    }
    return problems
}

/// The (pid, dispatch id) pairs a Perfetto export shows as updater slices or side-effect async slices.
func exportedDispatches(_ document: [String: Any]) -> Set<String> {
    let events = document["traceEvents"] as? [[String: Any]] ?? []
    var ids = Set<String>()
    for event in events where ["X", "b"].contains(event["ph"] as? String ?? "")
        && ["state_updater", "side_effect"].contains(event["cat"] as? String ?? "") {
        if let id = (event["args"] as? [String: Any])?["id"] as? Int { ids.insert("\(event["pid"] ?? 0)/\(id)") }
    }
    return ids
}

/// The (pid, dispatch id) pairs of a trace, as babeltrace2 (the reference reader) decodes it.
func recordedDispatches(_ trace: String) async throws -> Set<String> {
    let dump = try await KatanaTrace.run(["dump", "--reader", "babeltrace2", trace])
    guard dump.status == 0 else { throw RecordingError("dump failed: \(dump.err)") }
    var ids = Set<String>()
    for line in dump.out.split(separator: "\n") {
        guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              ["dispatch_begin", "updater_inline"].contains(event["event"] as? String), let id = event["id"] as? Int
        else { continue }
        ids.insert("\(event["vpid"] ?? 0)/\(id)")
    }
    return ids
}


/// Where `katana-trace analyze --json` read through the package's reader and through babeltrace2 (the reference)
/// differ on `trace` with `options`: nothing, or the first differences as "path: native vs babeltrace2". Also fails
/// unless each report says it came from the reader asked for.
func readerDisagreements(_ trace: String, _ options: [String] = []) async throws -> [String] {
    func report(_ reader: String) async throws -> [String: Any] {
        let outcome = try await KatanaTrace.run(["analyze", "--json", "--reader", reader] + options + [trace])
        try #require(outcome.status == 0, "analyze --reader \(reader) \(options) \(trace): \(outcome.err)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(outcome.out.utf8)) as? [String: Any])
        try #require(report["reader"] as? String == reader, "asked for the \(reader) reader, got \(report["reader"] ?? "?")")
        return report
    }
    return reportDisagreements(try await report("native"), try await report("babeltrace2"))
}

/// Where two analysis reports differ, ignoring which reader made each: nothing, or the first differences as
/// "path: native vs reference". Integers must be equal; floats (means, timeline shares) equal to 1e-9 relative.
func reportDisagreements(_ native: [String: Any], _ reference: [String: Any]) -> [String] {
    var native = native, reference = reference
    native["reader"] = nil
    reference["reader"] = nil
    var differences: [String] = []
    func compare(_ a: Any, _ b: Any, _ path: String) {
        guard differences.count < 10 else { return }
        switch (a, b) {
        case let (x as [String: Any], y as [String: Any]):
            for key in Set(x.keys).union(y.keys).sorted() {
                guard let p = x[key], let q = y[key] else {
                    differences.append("\(path)/\(key): only in \(x[key] == nil ? "the reference" : "native")")
                    continue
                }
                compare(p, q, "\(path)/\(key)")
            }
        case let (x as [Any], y as [Any]):
            if x.count != y.count { differences.append("\(path): \(x.count) items vs \(y.count)") }
            for (index, (p, q)) in zip(x, y).enumerated() { compare(p, q, "\(path)[\(index)]") }
        case let (x as NSNumber, y as NSNumber):
            func isFloat(_ n: NSNumber) -> Bool { ["d", "f"].contains(String(cString: n.objCType)) }
            let same = isFloat(x) || isFloat(y)
                ? abs(x.doubleValue - y.doubleValue) <= 1e-9 * max(1, abs(y.doubleValue)) : x == y
            if !same { differences.append("\(path): \(x) vs \(y)") }
        case let (x as String, y as String):
            if x != y { differences.append("\(path): \(x) vs \(y)") }
        case (is NSNull, is NSNull):
            break
        default:
            differences.append("\(path): \(a) vs \(b)")
        }
    }
    compare(native, reference, "")
    return differences
}

/// `katana-trace` on damaged input, checked against babeltrace2 where a reference is needed.
@Suite(.enabled(if: Fallback.babeltrace2Installed || LTTngEnvironment.underCI, "needs babeltrace2 (scripts/setup-system.sh)"),
       .checkedInChildProcesses)
struct TraceToolkitTests {
    /// The package's reader on damaged input: whatever is flipped, cut or overwritten in the sample's metadata or
    /// streams, `--reader native` ends promptly with a report (0) or refuses (2) with one line — never a crash or a
    /// hang — and `analyze` (auto) on the same input still ends with a report or one line and status 2.
    @Test func theNativeReaderSurvivesDamagedTraces() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("katana-reader-fuzz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }

        let folder = "ust/uid/0/64-bit"
        var generator = SystemRandomNumberGenerator()
        var declined = 0, read = 0
        // First every short cut of each file (headers cut mid-field), then 300 rounds of random damage.
        let cuts = [1, 2, 3, 4, 5, 8, 24, 36, 37, 38, 40, 64, 100]
        for round in 0..<(3 * cuts.count + 300) {
            let trace = root.appendingPathComponent("t\(round)")
            try FileManager.default.copyItem(atPath: Toolkit.sample, toPath: trace.path)
            let file = trace.appendingPathComponent(folder).appendingPathComponent(["metadata", "katana_0", "katana_1"][round % 3])
            var bytes = [UInt8](try Data(contentsOf: file))
            let damage = round < 3 * cuts.count ? -1 : round / 3 % 5
            switch damage {
            case -1:
                bytes = Array(bytes.prefix(cuts[round / 3]))
            case 0:  // flip bits
                for _ in 0..<(1 + round % 7) { bytes[Int.random(in: 0..<bytes.count, using: &generator)] ^= 1 << UInt8.random(in: 0...7, using: &generator) }
            case 1:  // cut
                bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &generator)))
            case 2:  // overwrite a run with random bytes
                let start = Int.random(in: 0..<bytes.count, using: &generator)
                for index in start..<min(bytes.count, start + Int.random(in: 1...64, using: &generator)) { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
            case 3:  // huge sizes: 0xff over a run (packet and content sizes, lengths)
                let start = Int.random(in: 0..<bytes.count, using: &generator)
                for index in start..<min(bytes.count, start + 8) { bytes[index] = 0xff }
            default:  // zero sizes: 0 over a run
                let start = Int.random(in: 0..<bytes.count, using: &generator)
                for index in start..<min(bytes.count, start + 8) { bytes[index] = 0 }
            }
            try Data(bytes).write(to: file)
            let outcome = try await KatanaTrace.run(["analyze", "--json", "--reader", "native", "--top", "3", trace.path])
            #expect(outcome.status == 0 || outcome.status == 2,
                    "round \(round) (\(file.lastPathComponent), damage \(damage)): status \(outcome.status): \(outcome.err.prefix(800))")
            if outcome.status == 2 {
                declined += 1
                #expect(outcome.err.split(separator: "\n").count == 1 && outcome.err.hasPrefix("katana-trace: ") && outcome.out.isEmpty,
                        "round \(round): \(outcome.err.prefix(800))")
            } else {
                read += 1
                #expect((try? JSONSerialization.jsonObject(with: Data(outcome.out.utf8))) != nil, "round \(round): not JSON")
            }
            if round % 30 == 0 {
                let (analyzed, _) = try await Toolkit.trace(["analyze", trace.path], stall: 3)
                #expect(analyzed.status == 0 || (analyzed.status == 2 && analyzed.err.split(separator: "\n").count <= 2),
                        "round \(round): analyze ended with \(analyzed.status): \(analyzed.err.prefix(500))")
            }
            try? FileManager.default.removeItem(at: trace)
        }
        #expect(declined > 0 && read > 0, "the damage should sometimes be read past and sometimes declined: \(read) read, \(declined) declined")
    }

    /// A damaged metadata text whose error quotes a string token running over several lines (a bit flip that made
    /// a `"`, found by the fuzz test above): the package's reader's message is still one line, and so is what
    /// `analyze` prints when it falls back to babeltrace2 — a reader of stderr (CI, a log) gets one record each.
    @Test func aMetadataErrorQuotingSeveralLinesStaysOneLine() async throws {
        let trace = try KatanaTrace.damagedSample("metadata") { bytes in
            // `trace {` becomes `trace "` and the `;` after `minor = 8` a `"`: a string token over three lines (bytes
            // replaced, not inserted, so the metadata packet's sizes still hold).
            let open = try offset(of: "trace {", in: bytes) + 6
            bytes[open] = UInt8(ascii: "\"")
            bytes[try offset(of: "minor = 8;", in: bytes, from: open) + 9] = UInt8(ascii: "\"")
        }
        defer { try? FileManager.default.removeItem(at: trace) }

        let declined = try await KatanaTrace.run(["analyze", "--reader", "native", trace.path])
        #expect(declined.status == 2, "\(declined.err)")
        #expect(declined.err.hasPrefix("katana-trace: ") && declined.err.split(separator: "\n").count == 1,
                "the package's reader's message runs over lines: \(declined.err)")
        #expect(declined.err.contains("expected '{'"), "\(declined.err)")

        let (analyzed, _) = try await Toolkit.trace(["analyze", trace.path], stall: 10)
        let lines = analyzed.err.split(separator: "\n").filter { !$0.isEmpty }
        #expect(analyzed.status == 0 ? lines.count <= 1 : lines.count <= 2,
                "analyze's stderr runs over lines (status \(analyzed.status)): \(analyzed.err.prefix(800))")
    }

    /// One flipped bit turns `loglevel = 6;` of `katana:dispatch_end` into `loglevel = 6:` (found by the fuzz test
    /// above, which the package's reader once crashed on, taking the class for one without a payload): refused in one
    /// line naming the metadata's line, as babeltrace2 refuses it, never a crash.
    @Test func anEventClassLeftWithoutItsPayloadIsRefused() async throws {
        let trace = try KatanaTrace.damagedSample("metadata") { bytes in
            let event = try offset(of: "name = \"katana:dispatch_end\";", in: bytes)
            let level = "loglevel = 6;"
            bytes[try offset(of: level, in: bytes, from: event) + level.utf8.count - 1] ^= 1  // ';' → ':'
        }
        defer { try? FileManager.default.removeItem(at: trace) }

        let declined = try await KatanaTrace.run(["analyze", "--reader", "native", trace.path])
        #expect(declined.status == 2, "status \(declined.status): \(declined.err.prefix(800))")
        #expect(declined.err.hasPrefix("katana-trace: ") && declined.err.split(separator: "\n").count == 1
                && declined.err.contains("metadata line ") && declined.err.contains("expected ';', found ':'"), "\(declined.err.prefix(800))")
        let reference = try await KatanaTrace.run(["analyze", "--reader", "babeltrace2", trace.path])
        #expect(reference.status == 2, "babeltrace2 refuses it too: \(reference.err.prefix(300))")
    }

    /// Damaged traces end within bounded time with one line and exit status 2, for every command — where
    /// babeltrace2 spins (truncated metadata), aborts (empty or random metadata) or blocks (a FIFO).
    @Test(arguments: ["check", "analyze", "dump", "export"])
    func damagedTracesEndWithOneLineAndStatusTwo(command: String) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let metadata = "ust/uid/0/64-bit/metadata"
        func copy(_ name: String, _ damage: (URL) throws -> Void) throws -> URL {
            let trace = root.appendingPathComponent(name)
            try FileManager.default.copyItem(atPath: Toolkit.sample, toPath: trace.path)
            try damage(trace)
            return trace
        }
        func cut(_ file: URL, to size: UInt64) throws {
            let handle = try FileHandle(forWritingTo: file)
            try handle.truncate(atOffset: size)
            try handle.close()
        }
        var traces: [URL] = []
        for size in [50, 1_000, 4_000] as [UInt64] {
            traces.append(try copy("metadata-cut-\(size)") { try cut($0.appendingPathComponent(metadata), to: size) })
        }
        traces.append(try copy("metadata-empty") { try cut($0.appendingPathComponent(metadata), to: 0) })
        traces.append(try copy("metadata-random") {
            try Data((0..<3_000).map { _ in UInt8.random(in: 0...255) }).write(to: $0.appendingPathComponent(metadata))
        })
        traces.append(try copy("stream-random") {
            try Data((0..<20_000).map { _ in UInt8.random(in: 0...255) }).write(to: $0.appendingPathComponent("ust/uid/0/64-bit/katana_0"))
        })
        let lone = root.appendingPathComponent("lone-empty-metadata")
        try FileManager.default.createDirectory(at: lone, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: lone.appendingPathComponent("metadata").path, contents: Data()))
        traces.append(lone)
        let fifoTrace = root.appendingPathComponent("fifo-metadata")
        try FileManager.default.createDirectory(at: fifoTrace, withIntermediateDirectories: true)
        #expect(mkfifo(fifoTrace.appendingPathComponent("metadata").path, 0o600) == 0)
        traces.append(fifoTrace)
        let fifo = root.appendingPathComponent("a-fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        traces.append(fifo)
        traces.append(root.appendingPathComponent("nothing-here"))

        for trace in traces {
            var arguments = [command, trace.path]
            if command == "export" { arguments += ["-o", root.appendingPathComponent("out.json").path] }
            let (outcome, took) = try await Toolkit.trace(arguments, stall: 3)
            #expect(outcome.status == 2, "\(command) \(trace.lastPathComponent): status \(outcome.status)")
            let lines = outcome.err.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix("katana-trace: "), "\(command) \(trace.lastPathComponent): \(outcome.err.prefix(500))")
            // A liveness bound (the 3 s stall timeout ends a hang), wide enough for a loaded ThreadSanitizer run.
            #expect(took < 120, "\(command) \(trace.lastPathComponent) took \(took) s")
        }
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("out.json").path))
    }

    /// A trace babeltrace2 reads but whose katana events lack a field the analysis needs (here `parent_id`, renamed
    /// by one flipped byte in the metadata) is bad input: one line and exit 2, for every command that needs the field
    /// — it once ended with exit 1, a Python KeyError, and nothing said.
    @Test(arguments: ["check", "analyze", "export"])
    func aTraceMissingAFieldIsOneLineAndStatusTwo(command: String) async throws {
        let root = try Toolkit.sampleWithFieldRenamed("_parent_id;", to: "_parent_xd;")
        defer { try? FileManager.default.removeItem(at: root) }
        var arguments = [command, root.path]
        if command == "export" { arguments += ["-o", root.appendingPathComponent("out.json").path] }
        let (outcome, _) = try await Toolkit.trace(arguments, stall: 10)
        #expect(outcome.status == 2, "\(command): status \(outcome.status): \(outcome.err)")
        let lines = outcome.err.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].hasPrefix("katana-trace: ") && lines[0].contains("parent_id"),
                "\(command): \(outcome.err)")
    }

    /// The same trace is valid CTF, which babeltrace2 reads: `dump` shows its events as they are — the renamed field
    /// among the others, the missing one absent — with either reader, the same lines (it once refused the trace, then
    /// crashed on a flight-recorder dump of the kind: reader agreement seed 20483).
    @Test(.enabled(if: Fallback.babeltrace2Installed || LTTngEnvironment.underCI, "needs babeltrace2 (scripts/setup-system.sh)"))
    func aTraceMissingAFieldIsDumpedAsItIs() async throws {
        let root = try Toolkit.sampleWithFieldRenamed("_name;", to: "_nbme;")
        defer { try? FileManager.default.removeItem(at: root) }
        let native = try await KatanaTrace.run(["dump", "--reader", "native", root.path])
        let reference = try await KatanaTrace.run(["dump", "--reader", "babeltrace2", root.path])
        #expect(native.status == 0 && native.err.isEmpty, "\(native.err)")
        #expect(reference.status == 0, "\(reference.err)")
        let ours = native.out.split(separator: "\n"), theirs = reference.out.split(separator: "\n")
        let original = try await KatanaTrace.run(["dump", Toolkit.sample]).out.split(separator: "\n")
        #expect(ours.count == original.count && ours.count > 1000)
        #expect(ours.sorted() == theirs.sorted())
        let enqueues = ours.filter { $0.contains(#""event": "dispatch_enqueue""#) }
        #expect(!enqueues.isEmpty && enqueues.allSatisfy { $0.contains(#""nbme": ""#) && !$0.contains(#""name": ""#) })
    }

    @Test func badInputIsAClearErrorWithExitStatusTwo() async throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-trace-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        try "hello".write(to: empty.appendingPathComponent("notes.txt"), atomically: true, encoding: .utf8)
        for command in ["check", "analyze", "dump"] {
            let outcome = try await KatanaTrace.run([command, empty.path])
            #expect(outcome.status == 2, "\(command): \(outcome.status)")
            #expect(outcome.err.hasPrefix("katana-trace: ") && outcome.err.split(separator: "\n").count == 1, "\(command): \(outcome.err)")
        }
        #expect(try await KatanaTrace.run(["check", "/nonexistent/trace"]).status == 2)

        // A truncated trace: a copy of the sample whose data stream is cut in the middle of a packet.
        let truncated = FileManager.default.temporaryDirectory.appendingPathComponent("truncated-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: truncated) }
        try FileManager.default.copyItem(atPath: Toolkit.sample, toPath: truncated.path)
        let stream = truncated.appendingPathComponent("ust/uid/0/64-bit/katana_1")
        let handle = try FileHandle(forWritingTo: stream)
        try handle.truncate(atOffset: 5_000)
        try handle.close()
        let outcome = try await KatanaTrace.run(["analyze", truncated.path])
        #expect(outcome.status == 2, "a truncated trace must be rejected: \(outcome.status) \(outcome.out.prefix(200))")
        #expect(outcome.err.hasPrefix("katana-trace: ") && outcome.err.split(separator: "\n").count == 1
                && outcome.err.contains("katana_1"), "one line naming the cut stream: \(outcome.err)")

        // Outputs: a missing folder, a directory, a device; a symbolic link is followed, not replaced.
        #expect(try await KatanaTrace.run(["export", Toolkit.sample, "-o", "/nonexistent/out.json"]).status == 2)
        let directory = try await KatanaTrace.run(["export", Toolkit.sample, "-o", empty.path])
        #expect(directory.status == 2 && directory.err.contains("is a directory"), "\(directory.err)")
        let device = try await KatanaTrace.run(["export", Toolkit.sample, "-o", "/dev/null"])
        #expect(device.status == 2 && device.err.contains("not a regular file"), "\(device.err)")
        let target = empty.appendingPathComponent("target.json")
        try "old".write(to: target, atomically: true, encoding: .utf8)
        let link = empty.appendingPathComponent("link.json")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        #expect(try await KatanaTrace.run(["export", Toolkit.sample, "-o", link.path]).status == 0)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: link.path) == target.path)
        #expect(try Data(contentsOf: target).count > 100_000)

        // Options out of range: usage errors (64), nothing written.
        for bad in [["--top", "0"], ["--top", "x"], ["--begin", "-1"], ["--begin", "nan"], ["--min-duration", "fast"],
                    ["--begin", "2", "--end", "1"], ["--reader", "bt"]] {
            let outcome = try await KatanaTrace.run(["analyze"] + bad + [Toolkit.sample])
            #expect(outcome.status == 64 && outcome.out.isEmpty, "\(bad): \(outcome.status) \(outcome.err)")
        }
    }

    /// The options of `analyze`, checked against the events themselves (as babeltrace2 decodes them).
    @Test func analyzeTopWindowDurationAndDistribution() async throws {
        let dump = try await KatanaTrace.run(["dump", "--reader", "babeltrace2", Toolkit.sample])
        var begins: [Int: (ts: Int, name: String)] = [:]
        var ends: [Int: Int] = [:]
        var first = Int.max
        for line in dump.out.split(separator: "\n") {
            guard let e = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let kind = e["event"] as? String, let ts = e["ts"] as? Int else { continue }
            first = min(first, ts)
            if kind == "dispatch_begin" { begins[e["id"] as! Int] = (ts, e["name"] as! String) }
            if kind == "dispatch_end" { ends[e["id"] as! Int] = ts }
        }
        let services = begins.compactMap { id, b in ends[id].map { (id: id, service: $0 - b.ts, begin: b.ts, name: b.name) } }
        func report(_ extra: [String]) async throws -> [String: Any] {
            let outcome = try await KatanaTrace.run(["analyze", "--json"] + extra + [Toolkit.sample])
            try #require(outcome.status == 0, "\(outcome.err)")
            return try #require(try JSONSerialization.jsonObject(with: Data(outcome.out.utf8)) as? [String: Any])
        }

        // --top: the N longest, longest first, with their parent chains.
        let all = try await report(["--top", "2000"])
        let top = try #require(all["top"] as? [[String: Any]])
        #expect(top.count == 1081)
        #expect(top.map { $0["service_ns"] as! Int } == services.map(\.service).sorted(by: >))
        #expect(top.first?["id"] as? Int == services.max { $0.service < $1.service }?.id)
        let fetch = try #require(top.first { $0["name"] as? String == "katana_bench.FetchProfile" })
        #expect((fetch["parents"] as? [[String: Any]])?.map { $0["name"] as? String } == ["katana_bench.UserAction"])
        let nested = top.first { ($0["parents"] as? [[String: Any]])?.first?["name"] as? String == "katana_bench.FetchProfile" }
        #expect((nested?["parents"] as? [[String: Any]])?.count == 2, "an updater of FetchProfile has a chain of two")

        // --begin/--end: dispatches that began in the window; --min-duration: only those that took that long.
        let windowed = try await report(["--begin", "0.004", "--end", "0.008", "--min-duration", "50us"])
        let expected = services.filter {
            $0.begin >= first + 4_000_000 && $0.begin <= first + 8_000_000 && $0.service >= 50_000
        }
        #expect((windowed["window"] as? [String: Any])?["dispatches"] as? Int == expected.count)
        let windowTypes = try #require(windowed["types"] as? [[String: Any]])
        #expect(windowTypes.reduce(0) { $0 + ($1["count"] as! Int) } == expected.count)
        for type in windowTypes {
            #expect(((type["service_ns"] as? [String: Any])?["max"] as? Int ?? 0) >= 50_000)
        }

        // The distribution adds up to the count; --histogram prints it.
        for type in try #require(all["types"] as? [[String: Any]]) {
            let buckets = try #require(type["service_distribution"] as? [[String: Any]])
            #expect(buckets.reduce(0) { $0 + ($1["count"] as! Int) } == type["count"] as? Int)
        }
        let text = try await KatanaTrace.run(["analyze", "--histogram", "--top", "3", Toolkit.sample])
        #expect(text.out.contains("katana_bench.UserAction — service time distribution (120 dispatches):"))
        #expect(text.out.contains("the 3 longest dispatches (service time):"))
    }

    /// lttng-analyses' recipe from traces/README.md runs on the sample, and its per-type count and standard
    /// deviation agree with `analyze`'s.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/lttng-periodstats") || LTTngEnvironment.underCI,
                   "needs lttng-periodstats (python3-lttnganalyses, scripts/setup-system.sh)"))
    func lttngAnalysesRecipeAgreesWithAnalyze() async throws {
        let outcome = try await runSuspending(["lttng-periodstats", "--period",
                               "svc : $evt.$name==\"katana:dispatch_begin\" : $evt.$name==\"katana:dispatch_end\" && $evt.id==$begin.$evt.id",
                               "--period-captures", "svc : name=$evt.name", "--group-by", "svc.name", Toolkit.sample])
        try #require(outcome.status == 0, "\(outcome.err)")
        let analysis = try await KatanaTrace.run(["analyze", "--json", Toolkit.sample])
        let report = try #require(try JSONSerialization.jsonObject(with: Data(analysis.out.utf8)) as? [String: Any])
        for type in try #require(report["types"] as? [[String: Any]]) where (type["count"] as? Int ?? 0) > 1 {
            let name = type["name"] as! String
            // "### Group: svc.name = NAME ###" … "svc  COUNT  MIN  AVG  MAX  STDEV  RUNTIME" (µs).
            let group = try #require(outcome.out.components(separatedBy: "### Group: svc.name = \(name) ###").dropFirst().first)
            let row = try #require(group.split(separator: "\n").first { $0.hasPrefix("svc ") })
            let fields = row.split(separator: " ")
            #expect(Int(fields[1]) == type["count"] as? Int, "\(name): \(row)")
            let theirs = Double(fields[5])! * 1_000
            let ours = (type["service_ns"] as! [String: Any])["stddev"] as! Double
            #expect(abs(theirs - ours) <= max(2, theirs * 0.001), "\(name): stddev \(ours) ns vs lttng-periodstats \(theirs) ns")
        }
    }

    /// The Trace Compass analysis handles every event the provider defines (but listeners_notified, which its views
    /// do not draw).
    @Test func theTraceCompassAnalysisKnowsEveryEvent() throws {
        let header = try String(contentsOf: Paths.packageRoot.appendingPathComponent("Sources/CLTTng/katana_tp.h"), encoding: .utf8)
        let xml = try String(contentsOf: Paths.packageRoot.appendingPathComponent("traces/katana.xml"), encoding: .utf8)
        let defined = Set(header.matches(of: /LTTNG_UST_TRACEPOINT_EVENT(?:_INSTANCE)?\(katana, (?:\w+, katana, )?(\w+),/).map { String($0.1) })
            .subtracting(["dispatch_enqueue_class", "dispatch_begin_class", "dispatch_end_class", "transition_class"])
        #expect(defined.isSuperset(of: ["dispatch_enqueue", "interval_begin", "interval_end", "transition_end"]), "\(defined)")
        for event in defined.subtracting(["listeners_notified"]) {
            #expect(xml.contains("eventName=\"katana:\(event)\""), "traces/katana.xml has no handler for katana:\(event)")
        }
    }

    @Test(.enabled(if: (Toolkit.xmllintInstalled && Toolkit.schema != nil) || LTTngEnvironment.underCI,
                   Comment(rawValue: Toolkit.schemaSkipMessage)))
    func theTraceCompassAnalysisValidatesAgainstTheSchema() async throws {
        let schema = try #require(Toolkit.schema, "CI=true but \(Toolkit.schemaVariable) is not set: .ci/run points it at the schema folder")
        #expect(FileManager.default.fileExists(atPath: schema), "\(Toolkit.schemaVariable) names no xmlDefinition.xsd: \(schema)")
        let outcome = try await runSuspending(["xmllint", "--noout", "--schema", schema,
                               Paths.packageRoot.appendingPathComponent("traces/katana.xml").path])
        #expect(outcome.status == 0, "\(outcome.err)")
        // And a broken analysis does not: the check is real.
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("broken-\(UUID().uuidString).xml")
        defer { try? FileManager.default.removeItem(at: broken) }
        let text = try String(contentsOf: Paths.packageRoot.appendingPathComponent("traces/katana.xml"), encoding: .utf8)
        try text.replacingOccurrences(of: "<stateProvider id=\"org.katana.dispatch.state\" version=\"3\">",
                                      with: "<stateProvider id=\"org.katana.dispatch.state\">")
            .write(to: broken, atomically: true, encoding: .utf8)
        #expect(try await runSuspending(["xmllint", "--noout", "--schema", schema, broken.path]).status != 0)
    }
}

/// Where `text` first stands in `bytes` at or after `start`.
private func offset(of text: String, in bytes: [UInt8], from start: Int = 0) throws -> Int {
    let pattern = Array(text.utf8)
    guard let found = (start...(bytes.count - pattern.count)).first(where: { Array(bytes[$0..<($0 + pattern.count)]) == pattern }) else {
        throw RecordingError("\(text) is not in the sample's metadata")
    }
    return found
}
