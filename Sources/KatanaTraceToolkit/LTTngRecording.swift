import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How to record: where, with which channel, and the command whose run is recorded.
public struct RecordingOptions: Sendable {
    /// The trace's folder (nil: a fresh one under `$TMPDIR`). Must not exist, or be empty.
    public var output: String?
    /// The channel's sub-buffer size, as LTTng takes it (`8M`, `512k`).
    public var subbufferSize: String?
    /// The channel's number of sub-buffers.
    public var subbufferCount: Int?
    /// A snapshot session that keeps only the last sub-buffers and saves them each time a dispatch goes over its
    /// latency budget (an LTTng trigger on `katana:budget_exceeded`).
    public var snapshot = false
    /// The command to run and record.
    public var command: [String] = []
    public init() {}
}

/// `katana-trace record`: a fresh LTTng userspace session recording `katana:*` (with the vpid, vtid and procname
/// contexts, on a channel big enough not to discard at bench rates) around one command; the session is destroyed
/// whatever happens — the command failing, Ctrl-C, SIGTERM.
public enum LTTngRecording {
    /// Records `options.command`; returns the exit status to end with: the command's (128 + N when signal N ended
    /// it), or 2 when recording could not be set up, or 128 + N when this process was interrupted by signal N.
    /// Prints the trace's folder (or the snapshots') on standard output, and what happened on standard error.
    public static func record(_ options: RecordingOptions) -> Int32 {
        // What this thread starts inherits its signal mask, and a parent may have blocked signals (a test runner, some
        // service managers): `lttng-sessiond --daemonize` then waits for its child's SIGUSR1 for ever, and the
        // command could not be interrupted. So nothing this recording starts inherits a blocked signal — whoever
        // calls it (katana-trace, katana-bench --trace, a user's KatanaBench binary: traceStartsASessionDaemonWhenNoneRunsAndRecords
        // hung in katana-bench, whose main, unlike katana-trace's, left the mask as it found it).
        var none = sigset_t(), previous = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        guard !options.command.isEmpty else {
            return refuse("no command given: katana-trace record [-o DIR] -- COMMAND [ARGS…]")
        }
        for tool in ["lttng", "lttng-sessiond"] where which(tool) == nil {
            return refuse("\(tool) is not installed (apt-get install lttng-tools, or run Katana's scripts/setup-system.sh)")
        }
        let flight = options.snapshot
        let size = options.subbufferSize ?? (flight ? "1M" : "8M")
        let count = options.subbufferCount ?? (flight ? 4 : 8)
        guard size.wholeMatch(of: /[0-9]+[kKmMgG]?/) != nil else {
            return refuse("--subbuf-size \(size): expected a size such as 512k, 8M")
        }
        guard (1...1024).contains(count) else { return refuse("--num-subbuf \(count): expected 1 to 1024") }
        let name = "katana-\(getpid())-\(UInt64(Date().timeIntervalSince1970 * 1e9))"
        let output = options.output ?? (ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp") + "/" + name
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: output), !entries.isEmpty {
            return refuse("\(output) exists and is not empty; choose another -o")
        }
        // A session daemon this recording starts is stopped when it ends (however it ends: the guardian stops it
        // after a SIGKILL), unless someone else's session uses it by then. Guarded by LTTngRecordingTests'
        // `katanaTraceRecordStopsTheSessionDaemonItStarted`.
        var startedDaemon: pid_t?
        if sessiondRoots().isEmpty {  // (pgrep would count a daemon that has exited but not been reaped)
            guard run(["lttng-sessiond", "--daemonize"]) == 0, let daemon = sessiondRoots().first else {
                return refuse("could not start lttng-sessiond (are you root, or in the tracing group?)")
            }
            startedDaemon = daemon
        }

        let session = Session(name: name, daemon: startedDaemon)
        let interrupts = Interrupts()
        defer { session.destroy() }
        // Even SIGKILL, which this process cannot catch, must not leave the session recording: a guardian destroys it.
        session.startGuardian()
        var setup = [flight ? ["lttng", "create", name, "--snapshot", "--output=\(output)"]
                            : ["lttng", "create", name, "--output=\(output)"]]
        setup += [
            ["lttng", "enable-channel", "-u", "-s", name, "--subbuf-size=\(size)", "--num-subbuf=\(count)", "katana"],
            ["lttng", "enable-event", "-u", "-s", name, "-c", "katana", "katana:*"],
            ["lttng", "add-context", "-u", "-s", name, "-c", "katana", "-t", "vpid", "-t", "vtid", "-t", "procname"],
        ]
        if flight {
            setup.append(["lttng", "add-trigger", "--name=\(name)-budget", "--condition=event-rule-matches", "--type=user",
                          "--name=katana:budget_exceeded", "--action=snapshot-session", name])
        }
        setup.append(["lttng", "start", name])
        for (index, step) in setup.enumerated() {
            if index == 0 { session.created = true }
            if step[1] == "add-trigger" { session.trigger = "\(name)-budget" }
            guard run(step) == 0 else { return refuse("'\(step.joined(separator: " "))' failed") }
            if let signal = interrupts.received { return interrupted(signal, output) }
        }

        let child = Process()
        // The command ends with this process, however it ends (SIGKILL included): the kernel sends it SIGTERM when
        // its parent thread — this one, the main thread — dies (util-linux's setpriv sets that up, then runs it).
        if let setpriv = which("setpriv") {
            child.executableURL = URL(fileURLWithPath: setpriv)
            child.arguments = ["--pdeathsig", "TERM", "--", "/usr/bin/env"] + options.command
        } else {
            child.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            child.arguments = options.command
        }
        child.environment = Self.commandEnvironment(ProcessInfo.processInfo.environment)
        do {
            try child.run()
        } catch {
            return refuse("cannot run \(options.command[0]): \(error.localizedDescription)")
        }
        interrupts.forward(to: child.processIdentifier)
        child.waitUntilExit()
        let status = child.terminationReason == .uncaughtSignal ? 128 + child.terminationStatus : child.terminationStatus
        if let signal = interrupts.received { return interrupted(signal, output) }

        if flight {
            // A trigger's snapshot is taken by the session daemon after the event: give the last one time to land.
            Thread.sleep(forTimeInterval: 1)
            session.removeTrigger()
            _ = run(["lttng", "stop", name])
            let snapshots = ((try? FileManager.default.contentsOfDirectory(atPath: output)) ?? [])
                .filter { $0.hasPrefix("snapshot-") }.sorted().map { "\(output)/\($0)" }
            if snapshots.isEmpty {
                say("no snapshot: no dispatch went over its latency budget (command exited \(status))")
            } else {
                print(snapshots.joined(separator: "\n"))
                say("\(snapshots.count) snapshot(s) in \(output), one per dispatch over its budget (command exited "
                    + "\(status)); analyse one with: katana-trace analyze SNAPSHOT")
            }
            return status
        }
        guard run(["lttng", "stop", name]) == 0 else { return refuse("'lttng stop \(name)' failed") }
        print(output)
        say("trace in \(output) (command exited \(status)); analyse it with: katana-trace analyze \(output)")
        return status
    }

    static func interrupted(_ signal: Int32, _ output: String) -> Int32 {
        say("interrupted; session destroyed, partial trace in \(output)")
        return 128 + signal
    }

    static func refuse(_ message: String) -> Int32 {
        say(message)
        return 2
    }

    static func say(_ message: String) {
        FileHandle.standardError.write(Data("katana-trace record: \(message)\n".utf8))
    }

    /// Runs a setup command quietly; its exit status (127 when it cannot start).
    @discardableResult
    static func run(_ arguments: [String]) -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do { try process.run() } catch { return 127 }
        process.waitUntilExit()
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    /// The session daemons running: each `lttng-sessiond` whose parent is not one (its run-as helper is).
    static func sessiondRoots() -> [pid_t] {
        func parent(_ pid: String) -> String? {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // "pid (comm) state ppid …": comm may hold spaces, so read after the last ')'.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 1 && fields[0] != "Z" ? String(fields[1]) : nil
        }
        let daemons = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).filter { entry in
            pid_t(entry) != nil
                && (try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8))?.hasPrefix("lttng-sessiond") == true
                && parent(entry) != nil
        }
        return daemons.filter { !daemons.contains(parent($0) ?? "") }.compactMap { pid_t($0) }
    }

    /// Stops the session daemon `pid` this recording started, when no session is left on it; waits (a bounded
    /// time) until it is gone, so that a recording that returned has nothing left running.
    static func stopDaemon(_ pid: pid_t) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["lttng", "--no-sessiond", "list"]
        let listed = Pipe()
        process.standardOutput = listed
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return }
        let sessions = String(decoding: listed.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard sessions.contains("Currently no available recording session") else {
            say("left lttng-sessiond (pid \(pid)) running: other sessions use it")
            return
        }
        guard kill(pid, SIGTERM) == 0 else { return }
        for _ in 0..<200 where sessiondRoots().contains(pid) { usleep(50_000) }
        if sessiondRoots().contains(pid) { kill(pid, SIGKILL) }
    }

    /// How long the recorded command's liblttng-ust waits, at start, for the session daemon to register it before
    /// `main` runs. LTTng's default, 3 s, ran out on a loaded CI machine: the command then ran unrecorded and the
    /// trace held no stream (theOrderServiceExampleIsProfiledEndToEnd failed so, with both readers refusing the
    /// trace); reproduced with the value 0. The session exists before the command starts, so registration is
    /// expected: wait long, but never forever. A value the user set is kept.
    static let registrationTimeoutMilliseconds = 60_000

    static func commandEnvironment(_ environment: [String: String]) -> [String: String] {
        var environment = environment
        if environment["LTTNG_UST_REGISTER_TIMEOUT"] == nil {
            environment["LTTNG_UST_REGISTER_TIMEOUT"] = String(registrationTimeoutMilliseconds)
        }
        return environment
    }

    static func which(_ tool: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(tool)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The LTTng session and trigger this recording made: removed on every way out.
    final class Session {
        let name: String
        /// The session daemon this recording started, if it did: stopped once the session is gone.
        let daemon: pid_t?
        var created = false
        var trigger: String?
        init(name: String, daemon: pid_t?) {
            self.name = name
            self.daemon = daemon
        }

        func removeTrigger() {
            // --no-sessiond: a clean-up never starts a session daemon (with none running there is nothing to remove,
            // and one started here would outlive the recording).
            if let trigger { LTTngRecording.run(["lttng", "--no-sessiond", "remove-trigger", trigger]) }
            trigger = nil
        }

        func destroy() {
            removeTrigger()
            if created { LTTngRecording.run(["lttng", "--no-sessiond", "destroy", name]) }
            created = false
            releaseGuardian()
            if let daemon { LTTngRecording.stopDaemon(daemon) }
        }

        /// The guardian: a shell that waits on a pipe only this process writes to. "done" on it means the session
        /// is gone already; the pipe closing without it — this process ended, even by SIGKILL — makes it destroy the
        /// session and its trigger, and stop the session daemon this recording started when no session is left on
        /// it. It ignores the terminal's signals: Ctrl-C reaches this process, which cleans up.
        private var guardian: Process?
        private var guardianPipe: Int32 = -1

        func startGuardian() {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else { return }
            // Only this process may hold the write end: the recorded command must not keep the guardian waiting.
            _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", """
                trap '' INT HUP TERM
                read -r state
                if [ "$state" != done ]; then
                    lttng --no-sessiond remove-trigger "$1-budget" >/dev/null 2>&1
                    lttng --no-sessiond destroy "$1" >/dev/null 2>&1
                    if [ -n "$2" ] && lttng --no-sessiond list 2>/dev/null | grep -q "Currently no available recording session"; then
                        kill "$2" 2>/dev/null
                    fi
                fi
                """, "katana-trace-guardian", name, daemon.map(String.init) ?? ""]
            process.standardInput = FileHandle(fileDescriptor: ends[0], closeOnDealloc: true)
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do {
                try process.run()
                guardian = process
                guardianPipe = ends[1]
            } catch {
                close(ends[1])
            }
        }

        private func releaseGuardian() {
            guard guardianPipe >= 0 else { return }
            _ = "done\n".withCString { write(guardianPipe, $0, 5) }
            close(guardianPipe)
            guardianPipe = -1
            guardian?.waitUntilExit()
            guardian = nil
        }
    }

    /// SIGINT and SIGTERM while recording: noted (the recording then ends and cleans up instead of dying with the
    /// session left behind) and passed on to the recorded command.
    final class Interrupts: @unchecked Sendable {
        // `signal` and `child` are written by the signal sources' queue and by the recording thread: under `lock`.
        private let lock = NSLock()
        private var signal: Int32?
        private var child: pid_t?
        private var sources: [DispatchSourceSignal] = []

        /// Call on the thread that starts the recorded command. The signals are unblocked here first: a parent may
        /// have started this process with them blocked (a test runner, some service managers), and a blocked signal
        /// would reach neither the sources nor — the mask is inherited — the recorded command.
        init() {
            var unblocked = sigset_t()
            sigemptyset(&unblocked)
            sigaddset(&unblocked, SIGINT)
            sigaddset(&unblocked, SIGTERM)
            pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
            for number in [SIGINT, SIGTERM] {
                Glibc.signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { [weak self] in self?.received(number) }
                source.resume()
                sources.append(source)
            }
        }

        var received: Int32? { lock.withLock { signal } }

        private func received(_ number: Int32) {
            let child = lock.withLock { () -> pid_t? in
                if signal == nil { signal = number }
                return self.child
            }
            if let child { kill(child, number) }
        }

        func forward(to child: pid_t) {
            let pending = lock.withLock { () -> Int32? in
                self.child = child
                return signal
            }
            if let pending { kill(child, pending) }
        }
    }
}
