import Foundation

/// `katana-bench run --trace DIR`: records the run in a fresh LTTng session, as `traces/record` does.
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
        try Self.ensureSessiond()
        try step(["create", name, "--output=\(directory)"])
        created = true
        try step(["enable-channel", "-u", "-s", name, "--subbuf-size=8M", "--num-subbuf=8", "katana"])
        try step(["enable-event", "-u", "-s", name, "-c", "katana", "katana:*"])
        try step(["add-context", "-u", "-s", name, "-c", "katana", "-t", "vpid", "-t", "vtid", "-t", "procname"])
        try step(["start", name])
    }

    func stop() throws { try step(["stop", name]) }

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

    /// Starts a session daemon if none answers (in the foreground as a detached child that outlives us: the
    /// `--daemonize` parent waits for a signal it never gets when spawned through Foundation's Process).
    static func ensureSessiond() throws {
        if (try? lttng(["list"])) == 0 { return }
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/lttng-sessiond")
        daemon.standardInput = FileHandle.nullDevice
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if (try? lttng(["list"])) == 0 { return }
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
