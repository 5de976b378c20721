import Foundation

/// `katana-bench run --trace DIR`: records the run in a fresh LTTng session, as `katana-trace record` does.
final class LTTngRecording {
    let name = "katana-bench-\(getpid())-\(UInt64.random(in: 0..<UInt64.max))"
    let directory: String
    private var created = false

    init(directory: String) throws {
        self.directory = directory
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/lttng") else {
            throw RecordingFailure("lttng is not installed (run scripts/setup-system.sh)")
        }
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: directory), !contents.isEmpty {
            throw RecordingFailure("--trace \(directory) exists and is not empty")
        }
        if let started = try Self.ensureSessiond() {
            FileHandle.standardError.write(Data("katana-bench: no session daemon was running: started lttng-sessiond (pid \(started)), which keeps running after this run\n".utf8))
        }
        try Self.waitForRegistration(timeout: 10)
        try step(["create", name, "--output=\(directory)"])
        created = true
        try step(["enable-channel", "-u", "-s", name, "--subbuf-size=8M", "--num-subbuf=8", "katana"])
        try step(["enable-event", "-u", "-s", name, "-c", "katana", "katana:*"])
        try step(["add-context", "-u", "-s", name, "-c", "katana", "-t", "vpid", "-t", "vtid", "-t", "procname"])
        try step(["start", name])
    }

    /// Stops recording and checks something was recorded: an empty trace is a failure, never a silent success.
    func stop() throws {
        try step(["stop", name])
        let streams = FileManager.default.enumerator(atPath: directory)?.compactMap { $0 as? String }.filter { path in
            let file = (path as NSString).lastPathComponent
            guard file != "metadata", !path.contains("/index/"), !file.hasSuffix(".idx") else { return false }
            let size = (try? FileManager.default.attributesOfItem(atPath: (directory as NSString).appendingPathComponent(path))[.size] as? Int) ?? 0
            return size > 0
        } ?? []
        guard !streams.isEmpty else {
            throw RecordingFailure("the trace in \(directory) is empty: no katana event reached the session (is this process's tracing provider registered with lttng-sessiond?)")
        }
    }

    /// Waits until this process appears among the session daemon's tracing applications: liblttng-ust registers in
    /// the background, and a session started before it has would record nothing.
    static func waitForRegistration(timeout: Double) throws {
        let mine = "PID: \(getpid()) "
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let listing = try? output(["list", "-u"]), listing.contains(mine) { return }
            usleep(50_000)
        }
        throw RecordingFailure("this process did not register with lttng-sessiond within \(Int(timeout)) s (LTTNG_UST_ALLOW_BLOCKING or a sessiond of another user?); nothing could be recorded")
    }

    func destroy() {
        guard created else { return }
        created = false
        Self.destroy(session: name)
    }

    /// Destroys a session by name (also from a signal handler's queue, on a second Ctrl-C).
    static func destroy(session: String) { _ = try? lttng(["destroy", session]) }

    deinit { destroy() }

    private func step(_ arguments: [String]) throws {
        let status = try Self.lttng(arguments)
        guard status == 0 else { throw RecordingFailure("lttng \(arguments.joined(separator: " ")) failed (status \(status))") }
    }

    @discardableResult
    static func lttng(_ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/lttng")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    static func output(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/lttng")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// Starts a session daemon if none answers (in the foreground as a detached child that outlives us: the
    /// `--daemonize` parent waits for a signal it never gets when spawned through Foundation's Process). Returns
    /// the daemon's pid when it started one.
    static func ensureSessiond() throws -> pid_t? {
        if (try? lttng(["list"])) == 0 { return nil }
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/lttng-sessiond")
        daemon.standardInput = FileHandle.nullDevice
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? lttng(["list"])) == 0 { return daemon.processIdentifier }
            guard daemon.isRunning else { break }
            usleep(50_000)
        }
        throw RecordingFailure("could not start lttng-sessiond")
    }
}

struct RecordingFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
