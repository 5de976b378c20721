/// What a trace shows on a timeline, format-neutral: slices on threads, asynchronous slices grouped by what they are,
/// instants, counters and flows. ``Timeline`` turns katana events into these calls; ``PerfettoSink`` writes them as
/// Perfetto's protobuf, ``ChromeJSONSink`` as Chrome's trace-event JSON.
///
/// Processes and threads are named once and then passed as dense indexes, and names carry the reader's string ids,
/// so that a sink keys its tables on small integers: an export of millions of dispatches hashes no text per event
/// (the export's cost is measured against `analyze`'s on the same recording, see the trace toolkit guide).
protocol TimelineSink {
    /// Called once, before anything else, with the first event's time.
    mutating func start(at: Int64)
    /// Declares (or renames) process `index`.
    mutating func process(_ index: Int, pid: Int64, name: String)
    /// Declares (or renames) thread `index`, of process `process`.
    mutating func thread(_ index: Int, process: Int, pid: Int64, tid: Int64, name: String)
    /// A slice on a thread's track: slices on one thread nest strictly.
    mutating func threadSliceBegin(_ thread: Int, at: Int64, name: Label, category: Category, args: SliceArgs, flow: Flow?)
    mutating func threadSliceEnd(_ thread: Int, at: Int64, args: SliceArgs)
    mutating func threadInstant(_ thread: Int, at: Int64, name: Label, category: Category, args: SliceArgs, flow: Flow?)
    /// An asynchronous slice (they overlap freely), identified by `id` within its `group` of one category.
    mutating func asyncBegin(_ process: Int, group: AsyncGroup, id: UInt64, at: Int64, name: Label, args: SliceArgs, flow: Flow?)
    mutating func asyncEnd(_ process: Int, group: AsyncGroup, id: UInt64, at: Int64, name: Label, args: SliceArgs)
    /// An instant on the track of a running asynchronous slice.
    mutating func asyncInstant(_ process: Int, group: AsyncGroup, id: UInt64, at: Int64, name: Label, args: SliceArgs, flow: Flow?)
    /// The process's count of side effects in flight.
    mutating func inFlight(_ process: Int, at: Int64, value: Int64)
    /// Ends the output; `summary` goes where the format keeps metadata.
    mutating func finish(summary: ExportSummary) throws(TraceToolkitError)
}

/// A name on the timeline: a string of the trace (its id in the reader's table, 0 for one made here) in one of a
/// few forms. Equal labels have equal keys; the text is made only when a sink first needs it.
struct Label {
    enum Form: Int {
        case plain = 0, dispatchCall = 1, overBudget = 2
    }

    var form: Form
    /// The string's id in the reader's table, or 0 (then sinks key on the text).
    var id: UInt32
    var base: String

    static func plain(_ text: String, id: UInt32) -> Label { Label(form: .plain, id: id, base: text) }

    /// A fixed name of this exporter's own.
    static func fixed(_ text: String) -> Label { Label(form: .plain, id: 0, base: text) }

    var text: String {
        switch form {
        case .plain: base
        case .dispatchCall: "dispatch \(base)"
        case .overBudget: "over budget: \(base)"
        }
    }
}

/// What a timeline event is, for the viewer's filters and colours.
enum Category: Int, CaseIterable {
    case stateUpdater, sideEffect, dispatch, queueWait, interval, navigation, budget

    var name: String {
        switch self {
        case .stateUpdater: "state_updater"
        case .sideEffect: "side_effect"
        case .dispatch: "dispatch"
        case .queueWait: "queue_wait"
        case .interval: "interval"
        case .navigation: "navigation"
        case .budget: "budget"
        }
    }
}

/// A group of asynchronous slices: its category and the name its tracks are shown under.
struct AsyncGroup {
    var category: Category
    var name: Label
}

/// A link between events: one starts it, any number pass it on, one ends it.
struct Flow {
    enum Step {
        case starts, continues, terminates
    }

    var id: UInt64
    var step: Step
}

/// The names of the arguments a slice may carry.
enum ArgumentName: Int, CaseIterable {
    case id, parentID, parent, queue, dispatchable, childID, parallelism, queueWait, outcome, budget, actual, cut

    var text: String {
        switch self {
        case .id: "id"
        case .parentID: "parent_id"
        case .parent: "parent"
        case .queue: "queue"
        case .dispatchable: "dispatchable"
        case .childID: "child_id"
        case .parallelism: "parallelism"
        case .queueWait: "queue_wait_ns"
        case .outcome: "outcome"
        case .budget: "budget_ns"
        case .actual: "actual_ns"
        case .cut: "cut"
        }
    }
}

enum ArgumentValue {
    case uint(UInt64), int(Int64), text(Label)
}

/// The arguments a slice may carry, as fields (not a dictionary: no allocation per event).
struct SliceArgs {
    var id: UInt64?
    var parentID: UInt64?
    var parent: Label?
    var queue: Label?
    var dispatchable: Label?
    var childID: UInt64?
    var parallelism: Int64?
    var queueWaitNanoseconds: Int64?
    var outcome: Label?
    var budgetNanoseconds: UInt64?
    var actualNanoseconds: UInt64?
    /// Why the slice is not whole: the exported window's edge cut it.
    var cut: Label?

    static let none = SliceArgs()

    /// The arguments present, in a fixed order.
    func forEach(_ body: (ArgumentName, ArgumentValue) -> Void) {
        if let id { body(.id, .uint(id)) }
        if let parentID { body(.parentID, .uint(parentID)) }
        if let parent { body(.parent, .text(parent)) }
        if let queue { body(.queue, .text(queue)) }
        if let dispatchable { body(.dispatchable, .text(dispatchable)) }
        if let childID { body(.childID, .uint(childID)) }
        if let parallelism { body(.parallelism, .int(parallelism)) }
        if let queueWaitNanoseconds { body(.queueWait, .int(queueWaitNanoseconds)) }
        if let outcome { body(.outcome, .text(outcome)) }
        if let budgetNanoseconds { body(.budget, .uint(budgetNanoseconds)) }
        if let actualNanoseconds { body(.actual, .uint(actualNanoseconds)) }
        if let cut { body(.cut, .text(cut)) }
    }
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
    /// Packets of the recording that end before the first window (less a second), skipped unread.
    public var skippedPackets: UInt64 = 0
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
        var name: Label
        var isSideEffect: Bool
        /// The flow from the dispatch call (and its parent) to the begin.
        var flow: UInt64
        var enqueuedAt: Int64?
        var enqueuedOn = 0
        var began = false
        var beganOn = 0
        /// Shown from a window's opening, not from where it began (or was dispatched).
        var cut = false
        /// Shown (with windows): its later events are shown too, across the gaps between windows, so that each
        /// dispatch is one slice — ended at the last window's edge at the latest.
        var shown = false
        /// The side effect that dispatched it (0: none).
        var parentID: UInt64 = 0
    }

    private struct ThreadKey: Hashable {
        var pid: Int64
        var tid: Int64
    }

    /// A thread's own name and what it ran (counts by the queue's string id), to name it by its roles at the end.
    private struct ThreadInfo {
        var pid: Int64
        var tid: Int64
        var process: Int
        var procname: String?
        var roles: [Int] = []
        /// Inline updaters applied: their event has no queue field to count by.
        var inlineRuns = 0
    }

    private struct ProcessInfo {
        var pid: Int64
        var named = false
        var inFlight: Int64 = 0
    }

    private var pending: [Key: Pending] = [:]
    private var intervals: [Key: Label] = [:]
    private var transitions: [Key: Label] = [:]
    /// The open intervals and transitions shown (with windows; as `Pending.shown`).
    private var shownIntervals: Set<Key> = []
    private var shownTransitions: Set<Key> = []
    private var processIndex: [Int64: Int] = [:]
    private var processes: [ProcessInfo] = []
    private var threadIndex: [ThreadKey: Int] = [:]
    private var threads: [ThreadInfo] = []
    /// The queues' names by string id, for the threads' role names.
    private var queueNames: [UInt32: String] = [:]
    /// The last event's thread: consecutive events of one thread look nothing up.
    private var last: (key: ThreadKey, thread: Int)?
    private var nextFlow: UInt64 = 1
    /// The latest timestamp taken: where the trace ends.
    private var latest: Int64 = 0
    private(set) var summary = ExportSummary()
    /// The parts of the trace shown (ascending, disjoint; nanoseconds after the first event until it comes, absolute
    /// after), or nil: all of it. What lies between them is followed (what is in flight, on which thread) but not
    /// shown; what a window's edge cuts is shown to the edge, marked `cut`.
    private var windows: [ClosedRange<Int64>]?
    private var windowIndex = 0
    private var inWindow = false
    /// The trace's first event's time when the reader knows it (a read that skipped the start): the windows are
    /// relative to it. Else the first event taken is the first.
    var origin: Int64?
    /// Whether events are shown now: no windows, or inside one.
    private var emitting: Bool { windows == nil || inWindow }
    /// The dispatched types shown (`--type`), with the side effects they run under; nil: all. Intervals and
    /// transitions are not dispatches: not shown when set.
    private let types: Set<String>?
    /// Whether only a part is shown (windows, or types): what is shown is marked `Pending.shown`.
    private var filtering: Bool { windows != nil || types != nil }

    private func matches(_ name: String?) -> Bool {
        guard let types else { return true }
        return name.map(types.contains) ?? false
    }

    private static var queueWaitGroup: AsyncGroup { AsyncGroup(category: .queueWait, name: .fixed("queue wait")) }
    private static var navigationGroup: AsyncGroup { AsyncGroup(category: .navigation, name: .fixed("navigation")) }

    init(sink: Sink, windows: [ClosedRange<Int64>]? = nil, types: Set<String>? = nil) {
        self.sink = sink
        self.windows = windows
        self.types = types
    }

    private static var shownFromChild: Label { .fixed("began before the dispatch of its type shown") }

    /// Shows the side effects `parentID` names (and theirs) that are not shown yet, from `time`, marked cut: a
    /// dispatch shown for its type appears under its parents.
    private mutating func showAncestors(of parentID: UInt64?, pid: Int64, at time: Int64) {
        var id = parentID ?? 0
        while id != 0, let entry = pending[Key(pid: pid, id: id)], !entry.shown, entry.began, entry.isSideEffect {
            var args = SliceArgs()
            args.id = id
            args.cut = Self.shownFromChild
            sink.asyncBegin(threads[entry.beganOn].process, group: AsyncGroup(category: .sideEffect, name: entry.name),
                            id: id, at: time, name: entry.name, args: args, flow: nil)
            pending[Key(pid: pid, id: id)]?.shown = true
            pending[Key(pid: pid, id: id)]?.cut = true
            id = entry.parentID
        }
    }

    private static var beganBefore: Label { .fixed("began before the window") }
    private static var endedAfter: Label { .fixed("ended after the window") }

    /// Closes the windows that end before `starts` (the event's beginning) and opens the one `ends` reaches.
    private mutating func advanceWindows(starts: Int64, ends: Int64) {
        guard let windows else { return }
        while windowIndex < windows.count, starts > windows[windowIndex].upperBound {
            if inWindow { closeWindow(at: windows[windowIndex].upperBound, last: windowIndex == windows.count - 1) }
            windowIndex += 1
        }
        if !inWindow, windowIndex < windows.count, ends >= windows[windowIndex].lowerBound {
            openWindow(at: windows[windowIndex].lowerBound)
        }
    }

    /// The share of the windows' time taken so far (nil: no windows, or one without an end).
    var shownShare: Double? {
        guard let windows, summary.events > 0, let last = windows.last, last.upperBound < .max else { return nil }
        var total = 0.0, done = 0.0
        for window in windows {
            total += Double(window.upperBound) - Double(window.lowerBound)
            done += max(0, Double(min(latest, window.upperBound)) - Double(window.lowerBound))
        }
        return total > 0 ? done / total : nil
    }

    /// Shows what is in flight as the window opens: from the window's edge, marked cut.
    private mutating func openWindow(at time: Int64) {
        inWindow = true
        for (key, entry) in pending.sorted(by: { ($0.key.pid, $0.key.id) < ($1.key.pid, $1.key.id) })
        where !entry.shown && matches(entry.name.base) {
            var args = SliceArgs()
            args.id = key.id
            args.cut = Self.beganBefore
            if entry.began {
                let process = threads[entry.beganOn].process
                if entry.isSideEffect {
                    sink.asyncBegin(process, group: AsyncGroup(category: .sideEffect, name: entry.name), id: key.id,
                                    at: time, name: entry.name, args: args, flow: nil)
                    sink.inFlight(process, at: time, value: processes[process].inFlight)
                } else {
                    sink.threadSliceBegin(entry.beganOn, at: time, name: entry.name, category: .stateUpdater, args: args,
                                          flow: nil)
                }
            } else if entry.enqueuedAt != nil {
                // Dispatched before the window: its wait from the edge, and the flow to its begin from an instant there.
                let thread = entry.enqueuedOn
                var wait = SliceArgs()
                wait.dispatchable = entry.name
                wait.cut = Self.beganBefore
                sink.asyncBegin(threads[thread].process, group: Self.queueWaitGroup, id: key.id, at: time,
                                name: Self.queueWaitGroup.name, args: wait, flow: nil)
                var call = entry.name
                call.form = .dispatchCall
                // A flow of its own: one an earlier window's end terminated cannot start again.
                let flow = takeFlow()
                pending[key]?.flow = flow
                sink.threadInstant(thread, at: time, name: call, category: .dispatch, args: args,
                                   flow: Flow(id: flow, step: .starts))
            } else {
                continue
            }
            pending[key]?.cut = true
            pending[key]?.shown = true
            if types != nil { showAncestors(of: entry.parentID, pid: key.pid, at: time) }
        }
        for (key, name) in intervals.sorted(by: { ($0.key.pid, $0.key.id) < ($1.key.pid, $1.key.id) })
        where types == nil && !shownIntervals.contains(key) {
            var args = SliceArgs()
            args.id = key.id
            args.cut = Self.beganBefore
            sink.asyncBegin(process(key.pid), group: AsyncGroup(category: .interval, name: name), id: key.id, at: time,
                            name: name, args: args, flow: nil)
            shownIntervals.insert(key)
        }
        for (key, name) in transitions.sorted(by: { ($0.key.pid, $0.key.id) < ($1.key.pid, $1.key.id) })
        where types == nil && !shownTransitions.contains(key) {
            var args = SliceArgs()
            args.id = key.id
            args.cut = Self.beganBefore
            sink.asyncBegin(process(key.pid), group: Self.navigationGroup, id: key.id, at: time, name: name, args: args,
                            flow: nil)
            shownTransitions.insert(key)
        }
    }

    /// As a window closes: after the last one, ends what is shown in flight at its edge, marked cut; between two,
    /// leaves it open (its events in the gap are shown: one slice per dispatch).
    private mutating func closeWindow(at time: Int64, last: Bool) {
        inWindow = false
        guard last else { return }
        var args = SliceArgs()
        args.cut = Self.endedAfter
        for (key, entry) in pending.sorted(by: { ($0.key.pid, $0.key.id) < ($1.key.pid, $1.key.id) }) where entry.shown {
            pending[key]?.shown = false
            if entry.began {
                let process = threads[entry.beganOn].process
                if entry.isSideEffect {
                    sink.asyncEnd(process, group: AsyncGroup(category: .sideEffect, name: entry.name), id: key.id,
                                  at: time, name: entry.name, args: args)
                } else {
                    sink.threadSliceEnd(entry.beganOn, at: time, args: args)
                }
            } else if entry.enqueuedAt != nil {
                let thread = entry.enqueuedOn
                sink.asyncEnd(threads[thread].process, group: Self.queueWaitGroup, id: key.id, at: time,
                              name: Self.queueWaitGroup.name, args: .none)
                var instant = SliceArgs()
                instant.id = key.id
                instant.cut = Self.endedAfter
                sink.threadInstant(thread, at: time, name: .fixed("still queued at the window's end: \(entry.name.text)"),
                                   category: .dispatch, args: instant, flow: Flow(id: entry.flow, step: .terminates))
            } else {
                continue
            }
            summary.incompleteDispatches += 1
        }
        for (key, name) in intervals.sorted(by: { ($0.key.pid, $0.key.id) < ($1.key.pid, $1.key.id) })
        where shownIntervals.contains(key) {
            sink.asyncEnd(process(key.pid), group: AsyncGroup(category: .interval, name: name), id: key.id, at: time,
                          name: name, args: args)
        }
        for (key, name) in transitions.sorted(by: { ($0.key.pid, $0.key.id) < ($1.key.pid, $1.key.id) })
        where shownTransitions.contains(key) {
            sink.asyncEnd(process(key.pid), group: Self.navigationGroup, id: key.id, at: time, name: name, args: args)
        }
        shownIntervals.removeAll()
        shownTransitions.removeAll()
    }

    /// The event's thread (and its process), declared to the sink when first seen.
    private mutating func thread(of event: TraceEvent) -> Int {
        let key = ThreadKey(pid: event.vpid ?? 0, tid: event.vtid ?? 0)
        if let last, last.key == key { return last.thread }
        let thread: Int
        if let known = threadIndex[key] {
            thread = known
        } else {
            let process = self.process(key.pid)
            thread = threads.count
            threadIndex[key] = thread
            threads.append(ThreadInfo(pid: key.pid, tid: key.tid, process: process, procname: event.procname))
            sink.thread(thread, process: process, pid: key.pid, tid: key.tid,
                        name: event.procname.map { "\($0) \(key.tid)" } ?? "thread \(key.tid)")
            // LTTng's procname is the thread's name: the process is named by its main thread's.
            if key.tid == key.pid, let procname = event.procname, !processes[process].named {
                processes[process].named = true
                sink.process(process, pid: key.pid, name: "\(procname) (pid \(key.pid))")
            }
        }
        last = (key, thread)
        return thread
    }

    private mutating func process(_ pid: Int64) -> Int {
        if let known = processIndex[pid] { return known }
        let index = processes.count
        processIndex[pid] = index
        processes.append(ProcessInfo(pid: pid))
        sink.process(index, pid: pid, name: "katana pid \(pid)")
        return index
    }

    private mutating func ran(_ event: TraceEvent, queue: UInt32, on thread: Int) {
        guard queue != 0 else { return }
        let index = Int(queue)
        if index >= threads[thread].roles.count {
            threads[thread].roles += Array(repeating: 0, count: index + 1 - threads[thread].roles.count)
        }
        if threads[thread].roles[index] == 0, queueNames[queue] == nil { queueNames[queue] = event.queue }
        threads[thread].roles[index] += 1
    }

    /// The flow from a running parent side effect, if `parentID` names one: an instant on its track passes the flow on.
    private mutating func fromParent(_ parentID: UInt64?, process: Int, pid: Int64, at time: Int64, child: Label,
                                     childID: UInt64, flow: UInt64) -> Bool {
        guard emitting, let parentID, parentID != 0, let parent = pending[Key(pid: pid, id: parentID)], parent.isSideEffect,
              parent.began, parent.shown || !filtering else { return false }
        var args = SliceArgs()
        args.dispatchable = child
        args.childID = childID
        var call = child
        call.form = .dispatchCall
        sink.asyncInstant(process, group: AsyncGroup(category: .sideEffect, name: parent.name), id: parentID, at: time,
                          name: call, args: args, flow: Flow(id: flow, step: .starts))
        return true
    }

    private mutating func takeFlow() -> UInt64 {
        defer { nextFlow += 1 }
        return nextFlow
    }

    mutating func take(_ event: TraceEvent) {
        // An inline updater's event stands at its end: its slice began before it.
        let starts = event.begins
        if summary.events == 0 {
            // The windows are relative to the trace's first event (`analyze`'s origin): absolute from here on.
            let base = origin ?? starts
            func after(_ offset: Int64) -> Int64 {
                let (sum, overflow) = base.addingReportingOverflow(offset)
                return overflow ? (offset > 0 ? .max : .min) : sum
            }
            windows = windows.map { relative in relative.map { after($0.lowerBound)...after($0.upperBound) } }
            sink.start(at: windows?.first.map { max($0.lowerBound, starts) } ?? starts)
        }
        summary.events += 1
        latest = max(latest, event.timestamp)
        advanceWindows(starts: starts, ends: event.timestamp)
        let thread = self.thread(of: event)
        let process = threads[thread].process, pid = threads[thread].pid
        let key = Key(pid: pid, id: event.id)
        let name = Label.plain(event.name ?? "?", id: event.nameID)
        let queue = event.queue.map { Label.plain($0, id: event.queueID) }
        let outcome = event.outcome.map { Label.plain($0, id: event.outcomeID) }
        switch event.role {
        case .enqueue:
            let flow = takeFlow()
            let shows = emitting && matches(event.name)
            if shows, types != nil { showAncestors(of: event.parentID, pid: pid, at: event.timestamp) }
            let continued = shows && fromParent(event.parentID, process: process, pid: pid, at: event.timestamp, child: name,
                                                childID: event.id, flow: flow)
            if shows {
                var args = SliceArgs()
                args.id = event.id
                args.queue = queue
                var call = name
                call.form = .dispatchCall
                sink.threadInstant(thread, at: event.timestamp, name: call, category: .dispatch, args: args,
                                   flow: Flow(id: flow, step: continued ? .continues : .starts))
                var wait = SliceArgs()
                wait.dispatchable = name
                sink.asyncBegin(process, group: Self.queueWaitGroup, id: event.id, at: event.timestamp,
                                name: Self.queueWaitGroup.name, args: wait, flow: nil)
            }
            pending[key] = Pending(name: name, isSideEffect: event.isSideEffect, flow: flow, enqueuedAt: event.timestamp,
                                   enqueuedOn: thread, shown: shows && filtering, parentID: event.parentID ?? 0)
        case .begin:
            var entry = pending[key] ?? Pending(name: name, isSideEffect: event.isSideEffect, flow: 0)
            let shows = (emitting && matches(event.name)) || entry.shown
            if shows, !entry.shown, types != nil { showAncestors(of: event.parentID, pid: pid, at: event.timestamp) }
            if let parent = event.parentID { entry.parentID = parent }
            var args = SliceArgs()
            args.id = event.id
            if let parent = event.parentID, parent != 0 { args.parentID = parent }
            args.queue = queue
            args.parallelism = event.parallelism
            if let enqueued = entry.enqueuedAt {
                args.queueWaitNanoseconds = event.timestamp - enqueued
                if shows {
                    sink.asyncEnd(process, group: Self.queueWaitGroup, id: event.id, at: event.timestamp,
                                  name: Self.queueWaitGroup.name, args: .none)
                }
            }
            let flow = entry.enqueuedAt == nil ? nil : Flow(id: entry.flow, step: .terminates)
            if entry.isSideEffect { processes[process].inFlight += 1 }
            if shows, entry.isSideEffect {
                sink.inFlight(process, at: event.timestamp, value: processes[process].inFlight)
                sink.asyncBegin(process, group: AsyncGroup(category: .sideEffect, name: name), id: event.id,
                                at: event.timestamp, name: name, args: args, flow: flow)
            } else if shows {
                sink.threadSliceBegin(thread, at: event.timestamp, name: name, category: .stateUpdater, args: args,
                                      flow: flow)
            }
            ran(event, queue: event.queueID, on: thread)
            entry.began = true
            entry.beganOn = thread
            entry.shown = shows && filtering
            pending[key] = entry
        case .end:
            guard let entry = pending.removeValue(forKey: key), entry.began else {
                // Begun before the trace (or what was read of it).
                if emitting && matches(event.name) { summary.incompleteDispatches += 1 }
                return
            }
            if entry.isSideEffect { processes[process].inFlight -= 1 }
            guard entry.shown || !filtering else { return }
            if entry.cut { summary.incompleteDispatches += 1 } else { summary.dispatches += 1 }
            var args = SliceArgs()
            args.outcome = outcome
            if entry.isSideEffect {
                sink.asyncEnd(process, group: AsyncGroup(category: .sideEffect, name: entry.name), id: event.id,
                              at: event.timestamp, name: entry.name, args: args)
                sink.inFlight(process, at: event.timestamp, value: processes[process].inFlight)
            } else {
                sink.threadSliceEnd(entry.beganOn, at: event.timestamp, args: args)
            }
        case .updaterInline:
            // One event at the end of an updater applied inline: its dispatch call, begin and end in one place.
            threads[thread].inlineRuns += 1
            guard emitting, matches(event.name) else { return }
            var begin = starts, end = event.timestamp
            var cutBegin = false, cutEnd = false
            if let window = windows?[windowIndex] {
                if begin < window.lowerBound { (begin, cutBegin) = (window.lowerBound, true) }
                if end > window.upperBound { (end, cutEnd) = (window.upperBound, true) }
            }
            if cutBegin || cutEnd { summary.incompleteDispatches += 1 } else { summary.dispatches += 1 }
            var flow: Flow?
            if types != nil { showAncestors(of: event.parentID, pid: pid, at: begin) }
            if let parent = event.parentID, parent != 0 {
                let id = takeFlow()
                if fromParent(parent, process: process, pid: pid, at: begin, child: name, childID: event.id, flow: id) {
                    flow = Flow(id: id, step: .terminates)
                }
            }
            var args = SliceArgs()
            args.id = event.id
            if let parent = event.parentID, parent != 0 { args.parentID = parent }
            args.queue = Self.inlineQueue
            args.parallelism = event.parallelism
            if cutBegin { args.cut = Self.beganBefore }
            sink.threadSliceBegin(thread, at: begin, name: name, category: .stateUpdater, args: args, flow: flow)
            var ending = SliceArgs()
            ending.outcome = outcome
            if cutEnd { ending.cut = Self.endedAfter }
            sink.threadSliceEnd(thread, at: end, args: ending)
        case .budgetExceeded:
            guard emitting, matches(event.name) else { return }
            var args = SliceArgs()
            args.id = event.id
            args.budgetNanoseconds = event.budgetNanoseconds
            args.actualNanoseconds = event.actualNanoseconds
            var label = name
            label.form = .overBudget
            sink.threadInstant(thread, at: event.timestamp, name: label, category: .budget, args: args, flow: nil)
        case .intervalBegin:
            var args = SliceArgs()
            args.id = event.id
            if let parent = event.parentID, parent != 0 {
                args.parentID = parent
                args.parent = pending[Key(pid: pid, id: parent)]?.name
            }
            intervals[key] = name
            guard emitting, types == nil else { return }
            if windows != nil { shownIntervals.insert(key) }
            sink.asyncBegin(process, group: AsyncGroup(category: .interval, name: name), id: event.id,
                            at: event.timestamp, name: name, args: args, flow: nil)
        case .intervalEnd:
            guard let begun = intervals.removeValue(forKey: key),
                  (emitting && types == nil) || shownIntervals.remove(key) != nil else { return }
            shownIntervals.remove(key)
            var args = SliceArgs()
            args.outcome = outcome
            sink.asyncEnd(process, group: AsyncGroup(category: .interval, name: begun), id: event.id,
                          at: event.timestamp, name: begun, args: args)
        case .transitionBegin:
            var args = SliceArgs()
            args.id = event.id
            transitions[key] = name
            guard emitting, types == nil else { return }
            if windows != nil { shownTransitions.insert(key) }
            sink.asyncBegin(process, group: Self.navigationGroup, id: event.id, at: event.timestamp, name: name,
                            args: args, flow: nil)
        case .transitionEnd:
            guard let begun = transitions.removeValue(forKey: key),
                  (emitting && types == nil) || shownTransitions.remove(key) != nil else { return }
            shownTransitions.remove(key)
            var args = SliceArgs()
            args.outcome = outcome
            sink.asyncEnd(process, group: Self.navigationGroup, id: event.id, at: event.timestamp, name: begun,
                          args: args)
        case .other:
            break
        }
    }

    /// The queue of an updater applied inline (its one event does not carry it).
    private static var inlineQueue: Label { .fixed("updater_inline") }

    /// Names each thread by what it ran (its most frequent role first) and ends the output.
    mutating func finish(discarded: UInt64) throws(TraceToolkitError) -> ExportSummary {
        // A window with nothing in it: an empty timeline, still a file the viewer opens.
        if summary.events == 0 { sink.start(at: origin ?? 0) }
        // The trace ended between two windows: what is shown of it ends there.
        if windows != nil, !inWindow, pending.values.contains(where: \.shown) || !shownIntervals.isEmpty || !shownTransitions.isEmpty {
            closeWindow(at: latest, last: true)
        }
        // A dispatch still queued when the trace ends (a snapshot or a live window cut it): its wait ends at the
        // trace's end, where an instant on the thread that dispatched it says so and ends the flow its dispatch
        // call began (a flow left open is one Perfetto cannot draw: check_perfetto.py counts it as a problem).
        for (key, entry) in pending.sorted(by: { ($0.key.pid, $0.key.id) < ($1.key.pid, $1.key.id) })
        where emitting && (entry.shown || !filtering) && !entry.began && entry.enqueuedAt != nil {
            let thread = entry.enqueuedOn
            sink.asyncEnd(threads[thread].process, group: Self.queueWaitGroup, id: key.id, at: latest,
                          name: Self.queueWaitGroup.name, args: .none)
            var args = SliceArgs()
            args.id = key.id
            sink.threadInstant(thread, at: latest, name: .fixed("still queued when the trace ends: \(entry.name.text)"),
                               category: .dispatch, args: args, flow: Flow(id: entry.flow, step: .terminates))
        }
        for (index, info) in threads.enumerated() {
            var roles: [(String, Int)] = info.roles.enumerated().compactMap { id, count in
                count > 0 ? (queueNames[UInt32(id)] ?? "queue \(id)", count) : nil
            }
            if info.inlineRuns > 0 {
                if let at = roles.firstIndex(where: { $0.0 == "updater_inline" }) { roles[at].1 += info.inlineRuns }
                else { roles.append(("updater_inline", info.inlineRuns)) }
            }
            guard !roles.isEmpty else { continue }
            let names = roles.sorted { ($1.1, $0.0) < ($0.1, $1.0) }.map { threadRoleNames[$0.0] ?? $0.0 }
            let own = info.procname.map { " (\($0))" } ?? ""
            sink.thread(index, process: info.process, pid: info.pid, tid: info.tid,
                        name: names.joined(separator: " + ") + " \(info.tid)" + own)
        }
        // (With windows, what the last window's end cut was counted as it closed.)
        if emitting { summary.incompleteDispatches += pending.values.filter { $0.shown || !filtering }.count }
        summary.discarded = discarded
        try sink.finish(summary: summary)
        return summary
    }
}
