import Foundation
import KatanaTestSupport
import Testing

/// A trace the native reader declines — sound CTF with a construct it does not know — is read by babeltrace2 when
/// it is installed; without it, one line says what to install; the babeltrace2 a read starts never outlives
/// katana-trace, whether babeltrace2 stalls or katana-trace is ended by SIGINT, SIGTERM or SIGKILL.
enum Fallback {
    static var babeltrace2Installed: Bool { ["/usr/bin/babeltrace2", "/usr/local/bin/babeltrace2"].contains { FileManager.default.isExecutableFile(atPath: $0) } }

    /// The sample with one more event class, `app:measurement`, whose field is a double: CTF babeltrace2 reads, and
    /// a construct the native reader declines (no event of that class occurs; the katana events are the sample's).
    /// The metadata is rewritten as CTF's plain text (its packets unwrapped).
    static func declinedSample() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-declined-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: Toolkit.sample, toPath: folder.path)
        let metadata = folder.appendingPathComponent("ust/uid/0/64-bit/metadata")
        let packets = [UInt8](try Data(contentsOf: metadata))
        var text: [UInt8] = []
        var at = 0
        func word(_ offset: Int) -> Int {
            (0..<4).reduce(0) { $0 | Int(packets[at + offset + $1]) << (8 * $1) }
        }
        while at + 37 <= packets.count {
            precondition(word(0) == 0x75d1_1d57, "the sample's metadata is packetized")
            let content = word(24) / 8, size = word(28) / 8
            text += packets[(at + 37)..<(at + content)]
            at += size
        }
        text += Array("""

            event {
            \tname = "app:measurement";
            \tid = 50;
            \tstream_id = 0;
            \tfields := struct {
            \t\tfloating_point { exp_dig = 11; mant_dig = 53; align = 8; } _value;
            \t};
            };

            """.utf8)
        try Data(text).write(to: metadata)
        return folder
    }

    /// A stand-in `babeltrace2` in a fresh folder (put first on PATH): it writes its pid to `pid` beside it, prints
    /// `lines`, and then sleeps — a babeltrace2 stuck on a trace.
    static func stalledBabeltrace2(printing lines: [String]) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-fake-bt2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let script = folder.appendingPathComponent("babeltrace2")
        let printed = lines.map { "printf '%s\\n' '\($0)'" }.joined(separator: "\n")
        try Data("#!/bin/sh\necho $$ > \"\(folder.path)/pid\"\n\(printed)\nexec sleep 300\n".utf8).write(to: script)
        chmod(script.path, 0o755)
        return folder
    }

    static let oneEnqueue = #"[1795326400.496521225] vm katana:dispatch_enqueue: { cpu_id = 0 }, { vpid = 19586, vtid = 19591 }, { id = 2, parent_id = 0, kind = ( "side_effect" : container = 1 ), name = "katana_bench.UserAction", queue = ( "side_effect_pool" : container = 2 ), queue_depth = 0 }"#

    /// Whether `pid` has ended (gone, or a zombie its new parent has yet to reap).
    static func ended(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        // The state follows the command's closing parenthesis.
        guard let close = stat.lastIndex(of: ")") else { return true }
        return stat[stat.index(close, offsetBy: 2)] == "Z"
    }
}

@Suite(.checkedInChildProcesses) struct Babeltrace2FallbackTests {
    /// Every command reads the declined trace through babeltrace2 and gives what the native reader gives for the
    /// sample: the same analysis (to the dispatch, every option), check, dump (events tied on a timestamp may come
    /// in another order) and an export Perfetto's schema accepts, each with one note saying why babeltrace2 read it.
    @Test(.enabled(if: Fallback.babeltrace2Installed || LTTngEnvironment.underCI, "needs babeltrace2 (scripts/setup-system.sh)"))
    func aTraceTheNativeReaderDeclinesIsReadByBabeltrace2() async throws {
        let trace = try Fallback.declinedSample()
        defer { try? FileManager.default.removeItem(at: trace) }
        func noted(_ err: String) -> Bool {
            let lines = err.split(separator: "\n")
            return lines.count == 1 && lines[0].hasPrefix("katana-trace: note: read with babeltrace2")
                && lines[0].contains("floating-point fields are not read here")
        }
        for options in [[], ["--top", "2000"], ["--top", "5", "--begin", "0.004", "--end", "0.008"], ["--min-duration", "5us"]] {
            let fallback = try await KatanaTrace.run(["analyze", "--json"] + options + [trace.path])
            try #require(fallback.status == 0, "\(options): \(fallback.err)")
            #expect(noted(fallback.err), "\(fallback.err)")
            let native = try await KatanaTrace.run(["analyze", "--json"] + options + [Toolkit.sample])
            let a = try #require(try JSONSerialization.jsonObject(with: Data(fallback.out.utf8)) as? [String: Any])
            let b = try #require(try JSONSerialization.jsonObject(with: Data(native.out.utf8)) as? [String: Any])
            #expect(a["reader"] as? String == "babeltrace2" && b["reader"] as? String == "native")
            let differences = reportDisagreements(a, b)
            #expect(differences.isEmpty, "\(options): \(differences)")
        }
        let text = try await KatanaTrace.run(["analyze", trace.path])
        let golden = try String(contentsOf: Paths.packageRoot.appendingPathComponent("traces/sample-analysis.txt"), encoding: .utf8)
        #expect(text.status == 0 && text.out == golden, "\(text.err)")

        let check = try await KatanaTrace.run(["check", trace.path])
        let nativeCheck = try await KatanaTrace.run(["check", Toolkit.sample])
        #expect(check.status == 0 && check.out == nativeCheck.out && noted(check.err), "\(check.err)")

        let dump = try await KatanaTrace.run(["dump", trace.path])
        let nativeDump = try await KatanaTrace.run(["dump", Toolkit.sample])
        #expect(dump.status == 0 && noted(dump.err), "\(dump.err)")
        #expect(dump.out.split(separator: "\n").sorted() == nativeDump.out.split(separator: "\n").sorted())

        let verdict = try await TraceExport.checkedProtobuf(trace.path)
        #expect(verdict.problems.isEmpty, "\(verdict.problems)")
        #expect(verdict.dispatches == 1081 && verdict.dispatches_shown == 1081 && verdict.flows == 1081)
    }

    /// Without babeltrace2 the declined trace is one line naming the construct and what to install — status 2,
    /// nothing on standard output, for every command.
    @Test func withoutBabeltrace2ADeclinedTraceSaysWhatToInstall() async throws {
        let trace = try Fallback.declinedSample()
        defer { try? FileManager.default.removeItem(at: trace) }
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("katana-empty-path-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        let output = TraceExport.temporary(".pftrace")
        for command in [["analyze"], ["check"], ["dump"], ["export", "-o", output.path]] {
            let outcome = try await runProcessSuspending(KatanaTrace.executable, command + [trace.path], environment: ["PATH": empty.path])
            #expect(outcome.status == 2, "\(command): \(outcome.err)")
            #expect(outcome.out.isEmpty, "\(command): \(outcome.out.prefix(200))")
            let lines = outcome.err.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains("floating-point fields are not read here")
                    && lines[0].contains("apt-get install babeltrace2"), "\(command): \(outcome.err)")
        }
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }

    /// A babeltrace2 that prints nothing (as it can on a truncated trace, for good) is stopped after the stall
    /// timeout: status 2, one line, and the child gone.
    @Test func aStalledBabeltrace2IsStoppedAndSaysSo() async throws {
        let trace = try Fallback.declinedSample()
        defer { try? FileManager.default.removeItem(at: trace) }
        let fake = try Fallback.stalledBabeltrace2(printing: [])
        defer { try? FileManager.default.removeItem(at: fake) }
        let path = fake.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let outcome = try await runProcessSuspending(KatanaTrace.executable, ["analyze", trace.path],
                                                     environment: ["PATH": path, "KATANA_TRACE_STALL_SECONDS": "1"])
        #expect(outcome.status == 2, "\(outcome.err)")
        // One line: the error, saying why babeltrace2 was reading (no note: it read nothing).
        let lines = outcome.err.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("babeltrace2 printed nothing for 1 s and was stopped")
                && lines[0].contains("floating-point fields are not read here"), "\(outcome.err)")
        let pid = try #require(pid_t(try String(contentsOf: fake.appendingPathComponent("pid"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(Fallback.ended(pid), "the stalled babeltrace2 is still running")
        if !Fallback.ended(pid) { kill(pid, SIGKILL) }
    }

    /// katana-trace ended by SIGINT (Ctrl-C), SIGTERM (`timeout`, a cancelled CI job) or SIGKILL in the middle of an
    /// export read by babeltrace2: the babeltrace2 it started ends too, and no file is left — neither the target nor
    /// a temporary. (The test process starts children with SIGINT and SIGTERM blocked: katana-trace unblocks them.)
    @Test(arguments: [SIGINT, SIGTERM, SIGKILL])
    func aFallbackReadLeavesNoChildWhenTheToolkitIsKilled(signal: Int32) async throws {
        let trace = try Fallback.declinedSample()
        defer { try? FileManager.default.removeItem(at: trace) }
        let fake = try Fallback.stalledBabeltrace2(printing: [Fallback.oneEnqueue])
        defer { try? FileManager.default.removeItem(at: fake) }
        let folder = TraceExport.temporary("")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let toolkit = Process()
        toolkit.executableURL = KatanaTrace.executable
        toolkit.arguments = ["export", trace.path, "-o", folder.appendingPathComponent("out.pftrace").path]
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = fake.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        // Not a test of the stall timeout (aStalledBabeltrace2IsStoppedAndSaysSo is): under the TSan suite's load a CI run's
        // stand-in printed nothing within the default 30 s, and katana-trace rightly gave up on it.
        environment["KATANA_TRACE_STALL_SECONDS"] = "600"
        toolkit.environment = environment
        toolkit.standardOutput = FileHandle.nullDevice
        // Its standard error in a file, to say why if it ends before the stand-in starts.
        let errors = folder.appendingPathComponent("stderr.txt")
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        toolkit.standardError = try FileHandle(forWritingTo: errors)
        try toolkit.run()
        let pidFile = fake.appendingPathComponent("pid")
        var child: pid_t?
        // Waits for the stand-in to start and print (a bound against a hang, not a timing claim). Generous: under
        // the TSan suite's load on a two-core machine, a quarter of it timed out with nothing wrong.
        for _ in 0..<3_000 where child == nil && toolkit.isRunning {
            try await Task.sleep(for: .milliseconds(100))
            if let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)),
               (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8))?.hasPrefix("sleep") == true {
                child = pid
            }
        }
        guard let child else {
            let ended = !toolkit.isRunning
            kill(toolkit.processIdentifier, SIGKILL)
            let said = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
            Issue.record("the stand-in babeltrace2 never started; katana-trace \(ended ? "had ended" : "still ran"): \(said.prefix(600))")
            return
        }
        kill(toolkit.processIdentifier, signal)
        for _ in 0..<300 where toolkit.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        if toolkit.isRunning {
            Issue.record("katana-trace did not end within 30 s of signal \(signal)")
            kill(toolkit.processIdentifier, SIGKILL)
        }
        await onThread { toolkit.waitUntilExit() }
        #expect(toolkit.terminationReason == .uncaughtSignal && toolkit.terminationStatus == signal)
        var gone = false
        for _ in 0..<300 where !gone {
            gone = Fallback.ended(child)
            if !gone { try await Task.sleep(for: .milliseconds(100)) }
        }
        if !gone { kill(child, SIGKILL) }
        #expect(gone, "babeltrace2 outlived katana-trace ended by signal \(signal)")
        #expect(try TraceExport.leftovers(in: folder, named: "out.pftrace").isEmpty)
        let said = (try? String(contentsOf: errors, encoding: .utf8)) ?? ""
        #expect(said.split(separator: "\n").allSatisfy { $0.hasPrefix("katana-trace: note: read with babeltrace2") }, "\(said.prefix(600))")
    }

    /// Long reads show progress on a terminal — events, their rate, the share of the trace read — and write nothing
    /// of it to a pipe or a log. The trace: the sample's larger stream copied into 140 more streams (535,368 katana
    /// events, past the half million at which the line first shows).
    @Test func progressShowsOnATerminalAndOnlyThere() async throws {
        let trace = FileManager.default.temporaryDirectory.appendingPathComponent("katana-progress-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: Toolkit.sample, toPath: trace.path)
        defer { try? FileManager.default.removeItem(at: trace) }
        let streams = trace.appendingPathComponent("ust/uid/0/64-bit")
        for copy in 1...140 {
            try FileManager.default.copyItem(at: streams.appendingPathComponent("katana_1"),
                                             to: streams.appendingPathComponent("katana_1_\(copy)"))
        }
        let output = TraceExport.temporary(".pftrace")
        defer { try? FileManager.default.removeItem(at: output) }
        for command in ["analyze \(trace.path) > /dev/null", "export \(trace.path) -o \(output.path) > /dev/null"] {
            // `script` runs the command on a pseudo-terminal and copies what it writes there to its own output.
            let onTerminal = try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/env"),
                ["script", "-qec", "\(KatanaTrace.executable.path) \(command)", "/dev/null"])
            #expect(onTerminal.status == 0, "\(command): \(onTerminal.err)")
            let label = command.split(separator: " ")[0]
            #expect(onTerminal.out.contains("\r\(label): 524288 events, ") && onTerminal.out.contains(" events/s, ")
                    && onTerminal.out.contains(" % of the trace read"), "\(command): \(onTerminal.out.prefix(300))")
            let piped = try await runProcessSuspending(URL(fileURLWithPath: "/bin/sh"), ["-c", "\(KatanaTrace.executable.path) \(command)"])
            #expect(piped.status == 0 && piped.err.isEmpty, "\(command): \(piped.err.prefix(300))")
        }
    }
}
