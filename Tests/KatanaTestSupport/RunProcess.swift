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
/// At most `ChildProcessSlots.shared.limit` such children run at once; the others wait their turn, suspended.
public func runProcessSuspending(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                                 whileRunning: (@Sendable (pid_t) -> Void)? = nil)
    async throws -> (status: Int32, out: String, err: String) {
    try await timedRunProcessSuspending(executable, arguments, environment: environment, whileRunning: whileRunning).outcome
}

/// `runProcessSuspending`, and how long the child ran: the seconds from its start to its exit, not counting the wait
/// for a slot (what a test bounding a child's run time must measure — a clock started before the call also counts
/// other tests' children ahead of it).
public func timedRunProcessSuspending(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil,
                                      whileRunning: (@Sendable (pid_t) -> Void)? = nil)
    async throws -> (outcome: (status: Int32, out: String, err: String), seconds: Double) {
    await ChildProcessSlots.shared.acquire()
    defer { ChildProcessSlots.shared.release() }
    let started = DispatchTime.now().uptimeNanoseconds
    let outcome = try await offThePool { try runProcess(executable, arguments, environment: environment, whileRunning: whileRunning) }
    return (outcome, Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
}

/// How many child processes the suite's tests run at once. Swift Testing runs every test in parallel: unbounded,
/// ~20 children (katana-bench runs, the trace toolkit, compilers) shared two CPUs with the test process itself, and a
/// test that needs a second of CPU in-process waited 10-15 s for it (110-140 s under ThreadSanitizer, where the
/// children are slower too) — long enough for liveness checks to run out. Children still use every CPU; tests with
/// no child run beside them. Each test holds at most one slot at a time, and no child waits for another test's, so
/// the slots cannot deadlock.
public final class ChildProcessSlots: @unchecked Sendable {
    // `free` and `waiters` are guarded by `lock` (a lock ThreadSanitizer sees).
    private let lock = NSLock()
    private var free: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []
    public let limit: Int

    public static let shared = ChildProcessSlots(limit: ProcessInfo.processInfo.activeProcessorCount + 1)

    public init(limit: Int) {
        self.limit = max(limit, 1)
        free = self.limit
    }

    /// Takes a slot, waiting (suspended, first come first served) while all are taken.
    public func acquire() async {
        await withCheckedContinuation { continuation in
            lock.lock()
            if free > 0 {
                free -= 1
                lock.unlock()
                continuation.resume()
            } else {
                waiters.append(continuation)
                lock.unlock()
            }
        }
    }

    /// Gives a slot back: to the longest waiter, if any.
    public func release() {
        lock.lock()
        if waiters.isEmpty {
            free += 1
            lock.unlock()
        } else {
            let next = waiters.removeFirst()
            lock.unlock()
            next.resume()
        }
    }
}

/// Runs slow synchronous work (a child process, seconds of CPU under ThreadSanitizer) on a thread of its own while
/// the caller's task suspends: on a 2-core machine the cooperative pool has two threads, and a test blocking them
/// starves every other test's tasks (timers included).
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onThread { Result { try body() } }.get()
}

/// Runs blocking work (a semaphore wait, a thread that must not be a pool thread) on a thread of its own while the
/// caller's task suspends; returns what it returns.
public func onThread<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
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

/// The names of a live process's threads (`/proc/PID/task/*/comm`); empty once it has gone.
public func threadNames(of pid: pid_t) -> [String] {
    let tasks = "/proc/\(pid)/task"
    return ((try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? []).compactMap {
        readProcFile("\(tasks)/\($0)/comm")?.trimmingCharacters(in: .whitespacesAndNewlines)
    }
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
