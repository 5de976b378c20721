import Dispatch
import Foundation

/// Runs `executable` with `arguments` (and `environment` on top of this process's), waits for it, and returns its
/// exit status and output. Standard error is read on another thread while standard output is read here, so a
/// child that fills one pipe while the other is being read cannot stall.
@discardableResult
public func runProcess(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                       whileRunning: (@Sendable (pid_t) -> Void)? = nil) throws
    -> (status: Int32, out: String, err: String) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    if let whileRunning {
        let pid = process.processIdentifier
        Thread { whileRunning(pid) }.start()
    }
    let errors = CollectedData()
    let errorsRead = DispatchSemaphore(value: 0)
    Thread {
        errors.set(err.fileHandleForReading.readDataToEndOfFile())
        errorsRead.signal()
    }.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    errorsRead.wait()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errors.get(), as: UTF8.self))
}

/// Bytes handed from the reading thread to the caller, under a lock ThreadSanitizer sees.
private final class CollectedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()  // guarded by lock
    func set(_ value: Data) { lock.withLock { data = value } }
    func get() -> Data { lock.withLock { data } }
}

/// `runProcess` for long-running children (a `swift build`): it runs on a thread of its own and the caller's task
/// suspends, instead of blocking a thread of the cooperative pool that other tests' side effects need meanwhile.
public func runProcessSuspending(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                                 whileRunning: (@Sendable (pid_t) -> Void)? = nil)
    async throws -> (status: Int32, out: String, err: String) {
    try await offThePool { try runProcess(executable, arguments, environment: environment, whileRunning: whileRunning) }
}

/// Runs slow synchronous work (a child process, seconds of CPU under ThreadSanitizer) on a thread of its own while
/// the caller's task suspends: on a 2-core machine the cooperative pool has two threads, and a test blocking them
/// starves every other test's tasks (timers included).
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// The whole of a /proc file. procfs reports a size of 0, and `String(contentsOfFile:)` can stop after the first
/// read; this reads until end of file.
public func readProcFile(_ path: String) -> String? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    guard let data = try? handle.readToEnd() else { return nil }
    return String(decoding: data, as: UTF8.self)
}

/// Sends `pid` SIGINT once it has taken SIGINT over (ignored or caught: a process that hands the signal to a
/// dispatch source ignores it, and libdispatch on Linux then catches it) and `delay` seconds have passed since: a
/// test interrupts a command mid-run, never before it can handle the signal. Gives up after `timeout` seconds.
public func interruptWhenHandled(_ pid: pid_t, after delay: Double, timeout: Double = 120) {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        let status = readProcFile("/proc/\(pid)/status") ?? ""
        let lines = status.split(separator: "\n")
        guard !lines.isEmpty else { return }  // the process is gone
        let mask = lines.filter { $0.hasPrefix("SigIgn:") || $0.hasPrefix("SigCgt:") }.reduce(UInt64(0)) { mask, line in
            mask | (UInt64(line.drop { $0 != ":" }.dropFirst().trimmingCharacters(in: .whitespaces), radix: 16) ?? 0)
        }
        if mask & (1 << (UInt64(SIGINT) - 1)) != 0 {
            Thread.sleep(forTimeInterval: delay)
            kill(pid, SIGINT)
            return
        }
        Thread.sleep(forTimeInterval: 0.02)
    }
}
