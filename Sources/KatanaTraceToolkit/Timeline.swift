/// What a trace shows on a timeline, format-neutral: slices on threads, asynchronous slices grouped by what they are,
/// instants, counters and flows. ``Timeline`` turns katana events into these calls; ``PerfettoSink`` writes them as
/// Perfetto's protobuf, ``ChromeJSONSink`` as Chrome's trace-event JSON.
protocol TimelineSink {
    /// Called once, before anything else, with the first event's time.
    mutating func start(at: Int64)
    mutating func process(pid: Int64, name: String)
    mutating func thread(pid: Int64, tid: Int64, name: String)
    /// A slice on a thread's track: slices on one thread nest strictly.
    mutating func threadSliceBegin(pid: Int64, tid: Int64, at: Int64, name: String, category: Category, args: SliceArgs, flow: Flow?)
    mutating func threadSliceEnd(pid: Int64, tid: Int64, at: Int64, args: SliceArgs)
    mutating func threadInstant(pid: Int64, tid: Int64, at: Int64, name: String, category: Category, args: SliceArgs, flow: Flow?)
    /// An asynchronous slice (they overlap freely), identified by `id` within its `group` of one category.
    mutating func asyncBegin(pid: Int64, group: AsyncGroup, id: UInt64, at: Int64, name: String, args: SliceArgs, flow: Flow?)
    mutating func asyncEnd(pid: Int64, group: AsyncGroup, id: UInt64, at: Int64, name: String, args: SliceArgs)
    /// An instant on the track of a running asynchronous slice.
    mutating func asyncInstant(pid: Int64, group: AsyncGroup, id: UInt64, at: Int64, name: String, args: SliceArgs, flow: Flow?)
    mutating func counter(pid: Int64, name: String, at: Int64, value: Int64)
    /// Ends the output; `summary` goes where the format keeps metadata.
    mutating func finish(summary: ExportSummary) throws(TraceToolkitError)
}

/// What a timeline event is, for the viewer's filters and colours.
enum Category: String {
    case stateUpdater = "state_updater", sideEffect = "side_effect", dispatch, queueWait = "queue_wait", interval,
         navigation, budget
}

/// A group of asynchronous slices: its category and the name its tracks are shown under.
struct AsyncGroup: Hashable {
    var category: Category
    var name: String
}

/// A link between events: one starts it, any number pass it on, one ends it.
struct Flow {
    enum Step {
        case starts, continues, terminates
    }

    var id: UInt64
    var step: Step
}

/// The arguments a slice may carry, as fields (not a dictionary: no allocation per event).
struct SliceArgs {
    var id: UInt64?
    var parentID: UInt64?
    var queue: String?
    var outcome: String?
    var parallelism: Int64?
    var queueWaitNanoseconds: Int64?
    var dispatchable: String?
    var childID: UInt64?
    var budgetNanoseconds: UInt64?
    var actualNanoseconds: UInt64?
    var parent: String?

    static let none = SliceArgs()

    /// The arguments present, in a fixed order, with their names.
    func forEach(_ body: (String, ArgValue) -> Void) {
        if let id { body("id", .uint(id)) }
        if let parentID { body("parent_id", .uint(parentID)) }
        if let parent { body("parent", .string(parent)) }
        if let queue { body("queue", .string(queue)) }
        if let dispatchable { body("dispatchable", .string(dispatchable)) }
        if let childID { body("child_id", .uint(childID)) }
        if let parallelism { body("parallelism", .int(parallelism)) }
        if let queueWaitNanoseconds { body("queue_wait_ns", .int(queueWaitNanoseconds)) }
        if let outcome { body("outcome", .string(outcome)) }
        if let budgetNanoseconds { body("budget_ns", .uint(budgetNanoseconds)) }
        if let actualNanoseconds { body("actual_ns", .uint(actualNanoseconds)) }
    }
}

enum ArgValue {
    case uint(UInt64), int(Int64), string(String)
}

/// What an export wrote.
public struct ExportSummary: Sendable {
    /// Dispatches that began and ended in the trace.
    public var dispatches = 0
    /// Dispatches cut by the trace's start or end (begun or ended outside it).
    public var incompleteDispatches = 0
    /// Katana events read.
    public var events = 0
    /// Events the tracer discarded.
    public var discarded: UInt64 = 0
    /// Bytes written.
    public var bytes = 0
}

/// A thread is named by what it ran: the queues of the dispatches it applied or ran.
private let threadRoleNames = ["updater_inline": "dispatching thread", "updater_queue": "updater lane",
                               "side_effect_pool": "side-effect pool"]

/// Turns katana events, in timestamp order, into timeline calls, streaming: it keeps only what is in flight (the
/// dispatches begun or queued, the open intervals and transitions) and one entry per thread.
struct Timeline<Sink: TimelineSink> {
    private(set) var sink: Sink

    private struct Key: Hashable {
        var pid: Int64
        var id: UInt64
    }

    private struct Pending {
        var name: String
        var isSideEffect: Bool
        /// The flow from the dispatch call (and its parent) to the begin.
        var flow: UInt64
        var enqueuedAt: Int64?
        var beganAt: Int64?
        var beganOn: Int64 = 0
    }

    private struct ThreadKey: Hashable {
        var pid: Int64
        var tid: Int64
    }

    /// A thread's own name and what it ran, to name it by its roles at the end.
    private struct ThreadInfo {
        var procname: String?
        var roles: [String: Int] = [:]
    }

    private var pending: [Key: Pending] = [:]
    private var intervals: [Key: String] = [:]
    private var transitions: [Key: String] = [:]
    private var processes: [Int64: String?] = [:]
    private var threads: [ThreadKey: ThreadInfo] = [:]
    private var inFlight: [Int64: Int64] = [:]
    private var nextFlow: UInt64 = 1
    private(set) var summary = ExportSummary()

    init(sink: Sink) { self.sink = sink }

    private mutating func see(_ event: TraceEvent) -> (pid: Int64, tid: Int64) {
        let pid = event.vpid ?? 0, tid = event.vtid ?? 0
        if processes[pid] == nil {
            processes[pid] = .some(nil)
            sink.process(pid: pid, name: "katana pid \(pid)")
        }
        // LTTng's procname is the thread's name: the process is named by its main thread's.
        if tid == pid, let procname = event.procname, processes[pid]! == nil {
            processes[pid] = procname
            sink.process(pid: pid, name: "\(procname) (pid \(pid))")
        }
        let key = ThreadKey(pid: pid, tid: tid)
        if threads[key] == nil {
            threads[key] = ThreadInfo(procname: event.procname)
            sink.thread(pid: pid, tid: tid, name: event.procname.map { "\($0) \(tid)" } ?? "thread \(tid)")
        }
        return (pid, tid)
    }

    private mutating func ran(_ queue: String?, on thread: ThreadKey) {
        guard let queue else { return }
        threads[thread, default: ThreadInfo()].roles[queue, default: 0] += 1
    }

    /// The flow from a running parent side effect, if `parentID` names one: an instant on its track passes the flow on.
    private mutating func fromParent(_ parentID: UInt64?, pid: Int64, at time: Int64, child: String, childID: UInt64,
                                     flow: UInt64) -> Bool {
        guard let parentID, parentID != 0, let parent = pending[Key(pid: pid, id: parentID)], parent.isSideEffect,
              parent.beganAt != nil else { return false }
        var args = SliceArgs()
        args.dispatchable = child
        args.childID = childID
        sink.asyncInstant(pid: pid, group: AsyncGroup(category: .sideEffect, name: parent.name), id: parentID, at: time,
                          name: "dispatch \(child)", args: args, flow: Flow(id: flow, step: .starts))
        return true
    }

    private mutating func takeFlow() -> UInt64 {
        defer { nextFlow += 1 }
        return nextFlow
    }

    mutating func take(_ event: TraceEvent) {
        if summary.events == 0 {
            // An inline updater's event stands at its end: its slice began before it.
            let duration = event.role == .updaterInline ? Int64(clamping: event.durationNanoseconds) : 0
            sink.start(at: event.timestamp >= duration ? event.timestamp - duration : 0)
        }
        summary.events += 1
        let (pid, tid) = see(event)
        let key = Key(pid: pid, id: event.id)
        let name = event.name ?? "?"
        switch event.role {
        case .enqueue:
            let flow = takeFlow()
            let continued = fromParent(event.parentID, pid: pid, at: event.timestamp, child: name, childID: event.id, flow: flow)
            var args = SliceArgs()
            args.id = event.id
            args.queue = event.queue
            sink.threadInstant(pid: pid, tid: tid, at: event.timestamp, name: "dispatch \(name)", category: .dispatch,
                               args: args, flow: Flow(id: flow, step: continued ? .continues : .starts))
            var wait = SliceArgs()
            wait.dispatchable = name
            sink.asyncBegin(pid: pid, group: AsyncGroup(category: .queueWait, name: "queue wait"), id: event.id,
                            at: event.timestamp, name: "queue wait", args: wait, flow: nil)
            pending[key] = Pending(name: name, isSideEffect: event.isSideEffect, flow: flow, enqueuedAt: event.timestamp)
        case .begin:
            var entry = pending[key] ?? Pending(name: name, isSideEffect: event.isSideEffect, flow: 0)
            var args = SliceArgs()
            args.id = event.id
            if let parent = event.parentID, parent != 0 { args.parentID = parent }
            args.queue = event.queue
            args.parallelism = event.parallelism
            if let enqueued = entry.enqueuedAt {
                args.queueWaitNanoseconds = event.timestamp - enqueued
                sink.asyncEnd(pid: pid, group: AsyncGroup(category: .queueWait, name: "queue wait"), id: event.id,
                              at: event.timestamp, name: "queue wait", args: .none)
            }
            let flow = entry.enqueuedAt == nil ? nil : Flow(id: entry.flow, step: .terminates)
            if entry.isSideEffect {
                inFlight[pid, default: 0] += 1
                sink.counter(pid: pid, name: "side effects in flight", at: event.timestamp, value: inFlight[pid]!)
                sink.asyncBegin(pid: pid, group: AsyncGroup(category: .sideEffect, name: name), id: event.id,
                                at: event.timestamp, name: name, args: args, flow: flow)
            } else {
                sink.threadSliceBegin(pid: pid, tid: tid, at: event.timestamp, name: name, category: .stateUpdater,
                                      args: args, flow: flow)
            }
            ran(event.queue, on: ThreadKey(pid: pid, tid: tid))
            entry.beganAt = event.timestamp
            entry.beganOn = tid
            pending[key] = entry
        case .end:
            guard let entry = pending.removeValue(forKey: key) else {
                summary.incompleteDispatches += 1  // begun before the trace
                return
            }
            guard entry.beganAt != nil else {
                summary.incompleteDispatches += 1
                return
            }
            summary.dispatches += 1
            var args = SliceArgs()
            args.outcome = event.outcome
            if entry.isSideEffect {
                inFlight[pid, default: 1] -= 1
                sink.asyncEnd(pid: pid, group: AsyncGroup(category: .sideEffect, name: entry.name), id: event.id,
                              at: event.timestamp, name: entry.name, args: args)
                sink.counter(pid: pid, name: "side effects in flight", at: event.timestamp, value: inFlight[pid]!)
            } else {
                sink.threadSliceEnd(pid: pid, tid: entry.beganOn, at: event.timestamp, args: args)
            }
        case .updaterInline:
            // One event at the end of an updater applied inline: its dispatch call, begin and end in one place.
            summary.dispatches += 1
            let end = event.timestamp
            let duration = Int64(clamping: event.durationNanoseconds)
            let begin = end >= duration ? end - duration : 0
            var flow: Flow?
            let id = takeFlow()
            if fromParent(event.parentID, pid: pid, at: begin, child: name, childID: event.id, flow: id) {
                flow = Flow(id: id, step: .terminates)
            }
            var args = SliceArgs()
            args.id = event.id
            if let parent = event.parentID, parent != 0 { args.parentID = parent }
            args.queue = "updater_inline"
            args.parallelism = event.parallelism
            sink.threadSliceBegin(pid: pid, tid: tid, at: begin, name: name, category: .stateUpdater, args: args, flow: flow)
            var ending = SliceArgs()
            ending.outcome = event.outcome
            sink.threadSliceEnd(pid: pid, tid: tid, at: end, args: ending)
            ran("updater_inline", on: ThreadKey(pid: pid, tid: tid))
        case .budgetExceeded:
            var args = SliceArgs()
            args.id = event.id
            args.budgetNanoseconds = event.budgetNanoseconds
            args.actualNanoseconds = event.actualNanoseconds
            sink.threadInstant(pid: pid, tid: tid, at: event.timestamp, name: "over budget: \(name)", category: .budget,
                               args: args, flow: nil)
        case .intervalBegin:
            var args = SliceArgs()
            args.id = event.id
            if let parent = event.parentID, parent != 0 {
                args.parentID = parent
                args.parent = pending[Key(pid: pid, id: parent)]?.name
            }
            intervals[key] = name
            sink.asyncBegin(pid: pid, group: AsyncGroup(category: .interval, name: name), id: event.id,
                            at: event.timestamp, name: name, args: args, flow: nil)
        case .intervalEnd:
            guard let begun = intervals.removeValue(forKey: key) else { return }
            var args = SliceArgs()
            args.outcome = event.outcome
            sink.asyncEnd(pid: pid, group: AsyncGroup(category: .interval, name: begun), id: event.id,
                          at: event.timestamp, name: begun, args: args)
        case .transitionBegin:
            var args = SliceArgs()
            args.id = event.id
            transitions[key] = name
            sink.asyncBegin(pid: pid, group: AsyncGroup(category: .navigation, name: "navigation"), id: event.id,
                            at: event.timestamp, name: name, args: args, flow: nil)
        case .transitionEnd:
            guard let begun = transitions.removeValue(forKey: key) else { return }
            var args = SliceArgs()
            args.outcome = event.outcome
            sink.asyncEnd(pid: pid, group: AsyncGroup(category: .navigation, name: "navigation"), id: event.id,
                          at: event.timestamp, name: begun, args: args)
        case .other:
            break
        }
    }

    /// Names each thread by what it ran (its most frequent role first) and ends the output.
    mutating func finish(discarded: UInt64) throws(TraceToolkitError) -> ExportSummary {
        for (key, info) in threads.sorted(by: { ($0.key.pid, $0.key.tid) < ($1.key.pid, $1.key.tid) }) where !info.roles.isEmpty {
            let roles = info.roles.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { threadRoleNames[$0.key] ?? $0.key }
            let own = info.procname.map { " (\($0))" } ?? ""
            sink.thread(pid: key.pid, tid: key.tid, name: roles.joined(separator: " + ") + " \(key.tid)" + own)
        }
        summary.incompleteDispatches += pending.count
        summary.discarded = discarded
        try sink.finish(summary: summary)
        return summary
    }
}
