internal import CKatanaFlightRecorder
import Foundation
import KatanaTrace

/// Katana's in-process flight recorder: a ``TraceBackend`` that keeps the recent dispatches of every thread in
/// memory — no LTTng, no session daemon, no privileges — and writes them out on request as a CTF trace in LTTng's
/// `katana:*` layout, which `katana-trace`, babeltrace2 and Trace Compass read.
///
/// Each thread records into memory of its own, with no lock and no system call but the clock; the memory follows the
/// busy threads (taken from one shared total as they record, the oldest records handed on first), so a dump holds the
/// most recent stretch of time the total allows. A dump copies it while threads keep recording (what a thread
/// overwrites during the copy is left out).
public final class FlightRecorder: TransitionTraceBackend, DirectRecordingBackend, Sendable {
    /// The process's recorder (its memory is the process's).
    public static let shared = FlightRecorder()

    private init() {}

    /// The automatic dumps' settings and state (AutomaticDumps.swift).
    let dumps = AutomaticDumps()

    /// Sets the memory the recorder may use for all threads' records together (48 bytes each; every thread that
    /// recorded keeps at least 12 KiB of it). Call it before the first event; later calls change nothing.
    public static func configure(totalBytes: Int = 16 << 20) {
        katana_fr_configure(max(0, totalBytes))
    }

    /// The most events the recorder keeps, all threads together: its window is this many of the most recent.
    public var capacity: Int { Int(katana_fr_capacity()) }

    /// Events recorded so far, and events lost for want of memory (every segment another thread's current one).
    public var counts: (recorded: UInt64, discarded: UInt64) {
        var recorded: UInt64 = 0, discarded: UInt64 = 0
        katana_fr_counts(&recorded, &discarded)
        return (recorded, discarded)
    }

    /// Why a dump failed: one line.
    public struct DumpError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Writes the recent events as a CTF trace into the folder `path` (created if needed; it must not hold a trace
    /// already). Recording goes on meanwhile. Returns the number of events written.
    @discardableResult
    public func dump(to path: String) throws(DumpError) -> UInt64 {
        var written: UInt64 = 0
        var error = [CChar](repeating: 0, count: 512)
        guard katana_fr_dump(path, &written, &error, error.count) == 0 else {
            throw DumpError(description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return written
    }

    /// One event of the recorder's window, as ``recentEvents()`` returns it.
    public struct Event: Sendable {
        /// What happened (the `katana:*` event it is written as in a dump).
        public enum What: UInt8, Sendable {
            case enqueue, begin, end, updaterInline, budgetExceeded, intervalBegin, intervalEnd, transitionBegin,
                 transitionEnd, storeReady, listenersNotified
        }

        /// What happened.
        public var what: What
        /// CLOCK_MONOTONIC nanoseconds (for an inline updater: its end).
        public var timestamp: UInt64
        /// The dispatch's id (the store's for ``What/storeReady`` and ``What/listenersNotified``).
        public var id: UInt64
        /// The dispatch that dispatched this one (0: none). For ``What/budgetExceeded``: the actual duration.
        public var parentID: UInt64
        /// The dispatchable's type name (the interval's or the state type's for those events).
        public var name: String?
        /// An inline updater's duration; a budget; the changes a listeners' batch was handed.
        public var value: UInt64
        /// Queue depth at enqueue, parallelism at begin and inline, listeners for ``What/listenersNotified``.
        public var count: UInt32
        /// A dispatch's kind (nil for the events that are not a dispatch's).
        public var kind: DispatchKind?
        /// Where a dispatch ran or waited (enqueue, begin, end and inline updaters).
        public var route: DispatchRoute?
        /// How it ended (end, inline updaters, interval and transition ends).
        public var outcome: DispatchOutcome?
        /// The recording thread's id.
        public var thread: Int32
        /// For ``What/updaterInline``: how many listeners its change was handed to (up to 65,535; a dump does not
        /// keep it). Nil for the other events (a batch's count is its ``What/listenersNotified`` event's `count`).
        public var listeners: UInt32?
    }

    /// The recorder's current window — what ``dump(to:)`` would write — in memory: each thread's recent events,
    /// oldest first (threads one after another), and the monotonic time of the copy. Recording goes on meanwhile;
    /// dispatching threads do not wait for the copy (it reads their memory without a lock; it holds the recorder's
    /// lock only to list the segments, which a thread takes once per 256 events to move to its next one).
    /// - Parameter newestPerThread: at most this many of each thread's most recent events, at least one (nil: the
    ///   whole window, which at the default total is up to 349,440 events).
    public func recentEvents(newestPerThread: Int? = nil) -> (events: [Event], now: UInt64) {
        final class Visit {
            var events: [Event] = []
            var names: [UnsafePointer<CChar>: String] = [:]
        }
        let visit = Visit()
        var now: UInt64 = 0
        _ = withExtendedLifetime(visit) {
            katana_fr_visit({ raw, context in
                let visit = Unmanaged<Visit>.fromOpaque(context!).takeUnretainedValue()
                let raw = raw.pointee
                guard let what = Event.What(rawValue: raw.event) else { return }
                var name: String?
                if let pointer = raw.name {
                    if let known = visit.names[pointer] { name = known } else {
                        name = String(cString: pointer)
                        visit.names[pointer] = name
                    }
                }
                let dispatch = what == .enqueue || what == .begin || what == .end || what == .budgetExceeded
                visit.events.append(Event(
                    what: what, timestamp: raw.timestamp_ns, id: raw.id, parentID: raw.parent, name: name,
                    value: raw.a, count: raw.b, kind: dispatch ? DispatchKind(rawValue: raw.kind) : (what == .updaterInline ? .stateUpdater : nil),
                    route: what == .enqueue || what == .begin || what == .end ? DispatchRoute(rawValue: raw.queue) : (what == .updaterInline ? .updaterInline : nil),
                    outcome: what == .end || what == .updaterInline || what == .intervalEnd || what == .transitionEnd ? DispatchOutcome(rawValue: raw.outcome) : nil,
                    thread: raw.tid,
                    listeners: what == .updaterInline ? UInt32(raw.kind) | UInt32(raw.queue) << 8 : nil))
            }, Unmanaged.passUnretained(visit).toOpaque(), newestPerThread.map { UInt64(max(1, $0)) } ?? 0, &now)
        }
        return (visit.events, now)
    }

    /// For benchmarks: nanoseconds per record of what a recorded inline updater cannot do without — its two clock
    /// reads and one record stored into this thread's memory (katana-bench micro's floor for this backend).
    package static func floorNanoseconds(count: Int) -> Double {
        Double(katana_fr_floor(UInt64(max(1, count)))) / Double(max(1, count))
    }

    public var isEnabled: Bool { true }
    package var updaterInlineSinceFunction: (@convention(c) (UInt64, UInt64, UnsafePointer<CChar>, UInt32, UInt64, UInt8, UInt32) -> Void)? {
        katana_fr_updater_inline_since
    }
    public var combinesInlineUpdaters: Bool { true }

    public func dispatchEnqueue(_ event: DispatchEnqueueEvent) {
        katana_fr_record(UInt8(KATANA_FR_ENQUEUE), 0, event.id, event.parentID, event.name.cString, 0,
                         event.queueDepth, event.kind.rawValue, event.route.rawValue, 0)
    }

    public func dispatchBegin(_ event: DispatchBeginEvent) {
        katana_fr_record(UInt8(KATANA_FR_BEGIN), 0, event.id, event.parentID, event.name.cString, 0,
                         event.parallelism, event.kind.rawValue, event.route.rawValue, 0)
    }

    public func dispatchEnd(_ event: DispatchEndEvent) {
        katana_fr_record(UInt8(KATANA_FR_END), 0, event.id, 0, event.name.cString, 0, 0, event.kind.rawValue,
                         event.route.rawValue, event.outcome.rawValue)
        if dumps.pendingID.load(ordering: .relaxed) == event.id { dumps.takePending(event.id, recorder: self) }
    }

    public func updaterInline(_ event: UpdaterInlineEvent) {
        katana_fr_updater_inline(event.id, event.parentID, event.name.cString, event.parallelism,
                                 event.durationNanoseconds, event.outcome.rawValue, event.listeners)
    }

    public func budgetExceeded(_ event: BudgetExceededEvent) {
        katana_fr_record(UInt8(KATANA_FR_BUDGET), 0, event.id, event.actualNanoseconds, event.name.cString,
                         event.budgetNanoseconds, 0, event.kind.rawValue, 0, 0)
        dumps.overrun(event, recorder: self)
    }

    public func storeReady(storeID: UInt64, stateType: TraceName) {
        katana_fr_record(UInt8(KATANA_FR_STORE_READY), 0, storeID, 0, stateType.cString, 0, 0, 0, 0, 0)
    }

    public func listenersNotified(storeID: UInt64, changes: UInt32, listeners: UInt32) {
        katana_fr_record(UInt8(KATANA_FR_LISTENERS_NOTIFIED), 0, storeID, 0, nil, UInt64(changes), listeners, 0, 0, 0)
    }

    public func intervalBegin(intervalID: UInt64, parentID: UInt64, name: StaticString) {
        katana_fr_record(UInt8(KATANA_FR_INTERVAL_BEGIN), 0, intervalID, parentID, Self.text(name), 0, 0, 0, 0, 0)
    }

    public func intervalEnd(intervalID: UInt64, name: StaticString, outcome: DispatchOutcome) {
        katana_fr_record(UInt8(KATANA_FR_INTERVAL_END), 0, intervalID, 0, Self.text(name), 0, 0, 0, 0, outcome.rawValue)
    }

    public func transitionBegin(transitionID: UInt64, name: TraceName) {
        katana_fr_record(UInt8(KATANA_FR_TRANSITION_BEGIN), 0, transitionID, 0, name.cString, 0, 0, 0, 0, 0)
    }

    public func transitionEnd(transitionID: UInt64, name: TraceName, outcome: DispatchOutcome) {
        katana_fr_record(UInt8(KATANA_FR_TRANSITION_END), 0, transitionID, 0, name.cString, 0, 0, 0, 0, outcome.rawValue)
    }

    /// A static string's text for the rings: the interned name (a literal's storage lives for good, but only
    /// interned names are NUL-terminated for sure).
    private static func text(_ name: StaticString) -> UnsafePointer<CChar> {
        TraceName(name.description).cString
    }
}
