/// Writes a timeline as Chrome's trace-event JSON (`{"traceEvents": [...]}`), which Perfetto, chrome://tracing and
/// other tools read. Timestamps are microseconds from the first event. For small traces and tools that want JSON:
/// it is several times the size of ``PerfettoSink``'s output, and Perfetto treats it as a legacy format.
/// A thread's slices are complete (`X`) events, written when they end: Perfetto's JSON importer drops `X` slices
/// that do not nest, which this makes visible to the tests' checks.
struct ChromeJSONSink: TimelineSink {
    private let file: ExportFile
    private struct OpenSlice {
        var name: Label
        var category: Category
        var begin: Int64
        var args: SliceArgs
        var flow: Flow?
    }

    /// Each thread's open slices, innermost last.
    private var open: [[OpenSlice]] = []
    private var processPIDs: [Int64] = []
    private var threadIDs: [(pid: Int64, tid: Int64)] = []
    private var out: [UInt8] = []
    private var origin: Int64?
    private var firstEvent = true
    private var failure: TraceToolkitError?

    init(file: ExportFile) {
        self.file = file
        out.reserveCapacity(1 << 21)
        out.append(contentsOf: Array(#"{"traceEvents":["#.utf8))
    }

    // MARK: Writing

    private mutating func flushIfFull() {
        guard out.count >= 1 << 20 else { return }
        flush()
    }

    private mutating func flush() {
        if failure == nil {
            do { try file.write(out) } catch { failure = error }
        }
        out.removeAll(keepingCapacity: true)
    }

    private mutating func raw(_ text: String) {
        var text = text
        text.withUTF8 { out.append(contentsOf: $0) }
    }

    /// A JSON string literal.
    private mutating func quoted(_ text: String) { out.appendJSONString(text) }

    /// Microseconds from the first event, to the nanosecond.
    private mutating func microseconds(_ time: Int64) -> String {
        let origin = self.origin ?? time
        self.origin = origin
        let nanoseconds = time - origin
        let sign = nanoseconds < 0 ? "-" : ""
        let magnitude = nanoseconds.magnitude
        let fraction = String(magnitude % 1000)
        return "\(sign)\(magnitude / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }

    /// Opens an event object with its common fields; the caller adds the rest and calls `close`.
    private mutating func open(phase: String, name: String?, category: Category?, at time: Int64?, pid: Int64, tid: Int64?) {
        if !firstEvent { out.append(UInt8(ascii: ",")) }
        firstEvent = false
        raw("{")
        if let name {
            raw(#""name":"#)
            quoted(name)
            raw(",")
        }
        if let category { raw(#""cat":"\#(category.name)","#) }
        raw(#""ph":"\#(phase)""#)
        if let time { raw(#","ts":\#(microseconds(time))"#) }
        raw(#","pid":\#(pid)"#)
        if let tid { raw(#","tid":\#(tid)"#) }
    }

    private mutating func args(_ args: SliceArgs, _ more: SliceArgs = .none) {
        var first = true
        func each(_ name: ArgumentName, _ value: ArgumentValue) {
            raw(first ? #","args":{"# : ",")
            first = false
            quoted(name.text)
            raw(":")
            switch value {
            case let .uint(number): raw(String(number))
            case let .int(number): raw(String(number))
            case let .text(label): quoted(label.text)
            }
        }
        args.forEach(each)
        more.forEach(each)
        if !first { raw("}") }
    }

    private mutating func flow(_ flow: Flow?) {
        guard let flow else { return }
        raw(#","bind_id":"f\#(flow.id)""#)
        switch flow.step {
        case .starts: raw(#","flow_out":true"#)
        case .continues: raw(#","flow_in":true,"flow_out":true"#)
        case .terminates: raw(#","flow_in":true"#)
        }
    }

    private mutating func close() {
        raw("}")
        flushIfFull()
    }

    /// An asynchronous slice's id: unique per category and process.
    private static func asyncID(_ group: AsyncGroup, pid: Int64, id: UInt64) -> String {
        let prefix = switch group.category {
        case .sideEffect: ""
        case .queueWait: "w"
        case .interval: "i"
        case .navigation: "t"
        default: group.category.name
        }
        return "\(prefix)\(pid):\(id)"
    }

    // MARK: TimelineSink

    mutating func start(at time: Int64) { origin = time }

    mutating func process(_ index: Int, pid: Int64, name: String) {
        if index == processPIDs.count { processPIDs.append(pid) }
        open(phase: "M", name: "process_name", category: nil, at: nil, pid: pid, tid: nil)
        raw(#","args":{"name":"#)
        quoted(name)
        raw("}")
        close()
    }

    mutating func thread(_ index: Int, process: Int, pid: Int64, tid: Int64, name: String) {
        if index == threadIDs.count {
            threadIDs.append((pid, tid))
            open.append([])
        }
        open(phase: "M", name: "thread_name", category: nil, at: nil, pid: pid, tid: tid)
        raw(#","args":{"name":"#)
        quoted(name)
        raw("}")
        close()
    }

    mutating func threadSliceBegin(_ thread: Int, at time: Int64, name: Label, category: Category, args: SliceArgs,
                                   flow: Flow?) {
        open[thread].append(OpenSlice(name: name, category: category, begin: time, args: args, flow: flow))
    }

    mutating func threadSliceEnd(_ thread: Int, at time: Int64, args: SliceArgs) {
        guard let slice = open[thread].popLast() else { return }
        write(slice, thread: thread, end: time, endArgs: args)
    }

    private mutating func write(_ slice: OpenSlice, thread: Int, end: Int64?, endArgs: SliceArgs) {
        open(phase: "X", name: slice.name.text, category: slice.category, at: slice.begin, pid: threadIDs[thread].pid,
             tid: threadIDs[thread].tid)
        let nanoseconds = max(0, (end ?? slice.begin) - slice.begin)
        let fraction = String(nanoseconds % 1000)
        raw(#","dur":\#(nanoseconds / 1000).\#(String(repeating: "0", count: 3 - fraction.count))\#(fraction)"#)
        flow(slice.flow)
        args(slice.args, endArgs)
        close()
    }

    mutating func threadInstant(_ thread: Int, at time: Int64, name: Label, category: Category, args: SliceArgs,
                                flow: Flow?) {
        let (pid, tid) = threadIDs[thread]
        if flow != nil {
            // A flow binds to a slice: a zero-length one stands for the instant.
            open(phase: "X", name: name.text, category: category, at: time, pid: pid, tid: tid)
            raw(#","dur":0"#)
            self.flow(flow)
        } else {
            open(phase: "i", name: name.text, category: category, at: time, pid: pid, tid: tid)
            raw(#","s":"t""#)
        }
        self.args(args)
        close()
    }

    mutating func asyncBegin(_ process: Int, group: AsyncGroup, id: UInt64, at time: Int64, name: Label,
                             args: SliceArgs, flow: Flow?) {
        let pid = processPIDs[process]
        open(phase: "b", name: name.text, category: group.category, at: time, pid: pid, tid: nil)
        raw(#","id":"\#(Self.asyncID(group, pid: pid, id: id))""#)
        self.flow(flow)
        self.args(args)
        close()
    }

    mutating func asyncEnd(_ process: Int, group: AsyncGroup, id: UInt64, at time: Int64, name: Label, args: SliceArgs) {
        let pid = processPIDs[process]
        open(phase: "e", name: name.text, category: group.category, at: time, pid: pid, tid: nil)
        raw(#","id":"\#(Self.asyncID(group, pid: pid, id: id))""#)
        self.args(args)
        close()
    }

    mutating func asyncInstant(_ process: Int, group: AsyncGroup, id: UInt64, at time: Int64, name: Label,
                               args: SliceArgs, flow: Flow?) {
        let pid = processPIDs[process]
        open(phase: "n", name: name.text, category: group.category, at: time, pid: pid, tid: nil)
        raw(#","id":"\#(Self.asyncID(group, pid: pid, id: id))""#)
        self.flow(flow)
        self.args(args)
        close()
    }

    mutating func inFlight(_ process: Int, at time: Int64, value: Int64) {
        open(phase: "C", name: "side effects in flight", category: nil, at: time, pid: processPIDs[process], tid: nil)
        raw(#","args":{"in_flight":\#(value)}"#)
        close()
    }

    mutating func finish(summary: ExportSummary) throws(TraceToolkitError) {
        // Slices the trace's end cut: shown with no length where they began (their flows end there).
        for (thread, slices) in open.enumerated() {
            for slice in slices.reversed() { write(slice, thread: thread, end: nil, endArgs: .none) }
        }
        open = []
        raw(#"],"displayTimeUnit":"ns","otherData":{"source":"katana-trace export","dispatches":\#(summary.dispatches),"#
            + #""incomplete_dispatches":\#(summary.incompleteDispatches)}}"#)
        out.append(UInt8(ascii: "\n"))
        flush()
        if let failure { throw failure }
        try file.commit()
    }
}
