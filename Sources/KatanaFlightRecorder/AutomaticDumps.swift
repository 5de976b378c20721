internal import CKatanaFlightRecorder
internal import CKatanaTraceProvider
import Foundation
import KatanaTrace
import Logging
import Synchronization

extension FlightRecorder {
    /// Why the recorder wrote a dump by itself.
    public enum DumpReason: Sendable, Equatable, CustomStringConvertible {
        /// A dispatch ran over its type's latency budget (`StoreConfiguration.latencyBudgets`).
        case budgetOverrun(type: String, dispatchID: UInt64, budgetNanoseconds: UInt64, actualNanoseconds: UInt64)
        /// The process received this signal.
        case signal(Int32)

        public var description: String {
            switch self {
            case .budgetOverrun(let type, let id, let budget, let actual):
                "\(type) (dispatch \(id)) took \(Self.milliseconds(actual)) ms, over its \(Self.milliseconds(budget)) ms budget"
            case .signal(let number): "signal \(number)"
            }
        }

        private static func milliseconds(_ nanoseconds: UInt64) -> String {
            String(format: "%.3f", Double(nanoseconds) / 1e6)
        }
    }

    /// A dump the recorder wrote by itself, or failed to: what ``dumpOnBudgetOverrun(into:minimumInterval:report:)``
    /// and ``dumpOnSignal(_:into:report:)`` hand their `report`.
    public struct AutomaticDump: Sendable {
        /// Why it was taken.
        public var reason: DumpReason
        /// The trace's folder, inside the directory given.
        public var path: String
        /// The events written, or why nothing was (a failed dump leaves no folder).
        public var result: Result<UInt64, DumpError>
        /// Budget overruns left without a dump of their own since the previous one (inside `minimumInterval`).
        public var overrunsSkipped: Int
    }

    /// The default `report`: one line through swift-log (`katana.flight-recorder`), notice for a dump, error for a
    /// failure.
    public static let logReport: @Sendable (AutomaticDump) -> Void = { dump in
        let logger = Logger(label: "katana.flight-recorder")
        switch dump.result {
        case .success(let events):
            let skipped = dump.overrunsSkipped > 0 ? "; \(dump.overrunsSkipped) overruns before it had no dump of their own" : ""
            logger.notice("flight recorder: \(events) events written to \(dump.path) (\(dump.reason))\(skipped)")
        case .failure(let error):
            logger.error("flight recorder: no dump for \(dump.reason): \(error)")
        }
    }

    /// Writes a dump into a new folder of `directory` (created if needed) whenever a traced dispatch runs over its
    /// type's latency budget — at most one per `minimumInterval`, the overruns in between counted in the next
    /// dump's ``AutomaticDump/overrunsSkipped``. The dump is taken once the slow dispatch has ended (its end event is
    /// in it), on a thread of the recorder's own: the dispatching thread never waits for it. Calling it again
    /// replaces the previous settings.
    public func dumpOnBudgetOverrun(into directory: String, minimumInterval: Duration = .seconds(60),
                                    report: @escaping @Sendable (AutomaticDump) -> Void = FlightRecorder.logReport) {
        dumps.setOverrunPolicy(.init(directory: directory, minimumInterval: minimumInterval, report: report))
    }

    /// Stops the dumps on budget overruns.
    public func stopDumpingOnBudgetOverrun() { dumps.setOverrunPolicy(nil) }

    /// Writes a dump into a new folder of `directory` (created if needed) whenever the process receives `signal` —
    /// for a process whose code you cannot change again: `kill -USR2 PID`. The signal's default action (ending the
    /// process) is replaced; the handler only wakes a thread of the recorder's, which writes the dump. Calling it again
    /// for the same signal replaces the previous settings.
    /// Throws when the signal cannot be handled (`SIGKILL`, `SIGSTOP`, a number that is no signal).
    public func dumpOnSignal(_ signal: Int32 = SIGUSR2, into directory: String,
                             report: @escaping @Sendable (AutomaticDump) -> Void = FlightRecorder.logReport) throws(DumpError) {
        try dumps.listen(to: signal, directory: directory, report: report, recorder: self)
    }

    /// Returns once every automatic dump granted so far is written (a pending overrun's is taken now): call it before
    /// the process exits, or the last dump may be cut short.
    public func waitForDumps() {
        let pending = dumps.pendingID.load(ordering: .relaxed)
        if pending != 0 { dumps.takePending(pending, recorder: self) }
        dumps.queue.sync {}
    }

    /// Writes a dump now into a new folder of `directory`, as an automatic dump would (for tests and tools).
    func automaticDump(reason: DumpReason, into directory: String, skipped: Int) -> AutomaticDump {
        let path = (directory as NSString).appendingPathComponent(
            "katana-flight-\(getpid())-\(dumps.nextSequence())-\(reason.folderTag)")
        let result: Result<UInt64, DumpError>
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // Written under another name and renamed once whole: whoever watches the directory sees whole dumps only.
            let partial = path + ".partial"
            result = Result { () throws(DumpError) in try dump(to: partial) }.flatMap { events in
                rename(partial, path) == 0 ? .success(events)
                    : .failure(DumpError(description: "cannot rename \(partial) to \(path): \(String(cString: strerror(errno)))"))
            }
        } catch {
            result = .failure(DumpError(description: "cannot create \(directory): \(error.localizedDescription)"))
        }
        return AutomaticDump(reason: reason, path: path, result: result, overrunsSkipped: skipped)
    }
}

extension FlightRecorder.DumpReason {
    var folderTag: String {
        switch self {
        case .budgetOverrun: "budget"
        case .signal(let number): "signal\(number)"
        }
    }
}

/// The recorder's automatic dumps: the policies, the pending overrun, the signal sources. Rare paths, under a lock;
/// the one check on a hot path (`dispatchEnd`) is an atomic load of `pendingID`.
final class AutomaticDumps: @unchecked Sendable {
    struct OverrunPolicy {
        var directory: String
        var minimumInterval: Duration
        var report: @Sendable (FlightRecorder.AutomaticDump) -> Void
    }

    /// The dispatch whose end triggers a dump (0: none): an overrun's id, set when its dump was granted.
    let pendingID = Atomic<UInt64>(0)
    private let lock = NSLock()
    private var policy: OverrunPolicy?  // lock
    private var pending: (reason: FlightRecorder.DumpReason, policy: OverrunPolicy, skipped: Int)?  // lock
    private var lastOverrunDump: ContinuousClock.Instant?  // lock
    private var skipped = 0  // lock
    private var sequence = 0  // lock
    private var signals: [Int32: (directory: String, report: @Sendable (FlightRecorder.AutomaticDump) -> Void)] = [:]  // lock
    private var watching = false  // lock
    /// Dumps are written here, one at a time, never on a dispatching thread.
    let queue = DispatchQueue(label: "katana.flight-recorder.dumps", qos: .utility)

    func nextSequence() -> Int { lock.withLock { sequence += 1; return sequence } }

    func setOverrunPolicy(_ policy: OverrunPolicy?) {
        lock.withLock {
            self.policy = policy
            if policy == nil { pending = nil; pendingID.store(0, ordering: .relaxed) }
        }
    }

    /// A budget overrun: grants it a dump unless one was taken within the interval (or one is pending).
    func overrun(_ event: BudgetExceededEvent, recorder: FlightRecorder) {
        let granted: UInt64? = lock.withLock {
            guard let policy else { return nil }
            let now = ContinuousClock.now
            if pending != nil || lastOverrunDump.map({ now - $0 < policy.minimumInterval }) == true {
                skipped += 1
                return nil
            }
            lastOverrunDump = now
            pending = (.budgetOverrun(type: event.name.description, dispatchID: event.id,
                                      budgetNanoseconds: event.budgetNanoseconds, actualNanoseconds: event.actualNanoseconds),
                       policy, skipped)
            skipped = 0
            pendingID.store(event.id, ordering: .relaxed)
            return event.id
        }
        // The store emits the dispatch's end right after its overrun; should it never come, the dump is taken anyway.
        if let id = granted {
            queue.asyncAfter(deadline: .now() + 1) { [self] in takePending(id, recorder: recorder) }
        }
    }

    /// The pending overrun's dispatch ended (or the wait for it did): its dump, on the dumps' queue.
    func takePending(_ id: UInt64, recorder: FlightRecorder) {
        let taken = lock.withLock { () -> (FlightRecorder.DumpReason, OverrunPolicy, Int)? in
            guard let pending, pendingID.load(ordering: .relaxed) == id else { return nil }
            self.pending = nil
            pendingID.store(0, ordering: .relaxed)
            return pending
        }
        guard let (reason, policy, skipped) = taken else { return }
        queue.async {
            policy.report(recorder.automaticDump(reason: reason, into: policy.directory, skipped: skipped))
        }
    }

    /// Makes `signal` ask for a dump (its handler is installed before this returns); the first call starts the
    /// thread that waits for them.
    func listen(to signal: Int32, directory: String, report: @escaping @Sendable (FlightRecorder.AutomaticDump) -> Void,
                recorder: FlightRecorder) throws(FlightRecorder.DumpError) {
        lock.lock()
        defer { lock.unlock() }
        do {
            var error = [CChar](repeating: 0, count: 256)
            let fd = katana_fr_watch_signal(signal, &error, error.count)
            guard fd >= 0 else {
                throw FlightRecorder.DumpError(description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
            signals[signal] = (directory, report)
            guard !watching else { return }
            watching = true
            let thread = Thread { [self] in
                katana_name_this_thread("katana-fr-dumps")
                while case let number = katana_fr_next_signal(fd), number >= 0 {
                    guard let (directory, report) = lock.withLock({ signals[Int32(number)] }) else { continue }
                    queue.async { report(recorder.automaticDump(reason: .signal(Int32(number)), into: directory, skipped: 0)) }
                }
            }
            thread.start()
        }
    }
}
