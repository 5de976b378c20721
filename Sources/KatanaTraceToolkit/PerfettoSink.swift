/// Writes a timeline as Perfetto's native trace format: a `Trace` of `TracePacket`s (perfetto/trace/trace_packet.proto)
/// carrying `TrackDescriptor`s and `TrackEvent`s on one sequence, with event names, categories, argument names and
/// string values interned. Field numbers are Perfetto's, named at each use.
///
/// Tracks: a process track per process; a thread track per thread (updaters, dispatch calls, budget overruns);
/// asynchronous slices — side effects, queue waits, intervals, navigation transitions — on child tracks of a track
/// per group (a side effect's type, an interval's name), each child holding one slice at a time and reused once it
/// ends, so a recording of millions of side effects needs only as many tracks as ever ran at once; a counter track of
/// side effects in flight per process.
struct PerfettoSink: TimelineSink {
    private let file: ExportFile
    private var out = ProtobufWriter(capacity: 1 << 21)
    private var scratch = ProtobufWriter(capacity: 256)
    private var nextUUID: UInt64 = 1
    private var processTracks: [UInt64] = []
    private var threadTracks: [UInt64] = []
    private var counterTracks: [UInt64?] = []
    private var groups: [GroupKey: (uuid: UInt64, free: [UInt64])] = [:]
    private var slots: [SlotKey: UInt64] = [:]
    private var first = true
    /// Timestamps are written relative to this (a clock of the sequence's own, tied to CLOCK_MONOTONIC by the first
    /// packet's snapshot): five bytes each instead of nine.
    private var origin: Int64 = 0

    /// Interned names, categories, argument names and string values, and the entries defined since the last packet
    /// (written in its `interned_data`).
    private var names = InternTable()
    private var stringValues = InternTable()
    private var categories = [UInt64](repeating: 0, count: Category.allCases.count)
    private var argumentNames = [UInt64](repeating: 0, count: ArgumentName.allCases.count)
    private var newNames: [(UInt64, String)] = []
    private var newCategories: [(UInt64, String)] = []
    private var newArgumentNames: [(UInt64, String)] = []
    private var newStringValues: [(UInt64, String)] = []

    private struct GroupKey: Hashable {
        var process: Int
        var category: Category
        /// The group name's string id, or its text when it has none.
        var id: UInt32
        var text: String?
    }

    private struct SlotKey: Hashable {
        var process: Int
        var category: Category
        var id: UInt64
    }

    /// The one sequence every packet is on.
    private static let sequenceID: UInt64 = 1

    // TracePacket.sequence_flags
    private static let incrementalStateCleared: UInt64 = 1
    private static let needsIncrementalState: UInt64 = 2

    // TrackEvent.type
    private enum EventType: UInt64 {
        case sliceBegin = 1, sliceEnd = 2, instant = 3, counter = 4
    }

    init(file: ExportFile) { self.file = file }

    /// How far before the first event the sequence's clock starts: room for an inline updater's slice, which begins
    /// before its one event.
    private static let originMargin: Int64 = 1_000_000_000

    // ClockSnapshot.Clock.BuiltinClocks: LTTng-UST's clock is CLOCK_MONOTONIC.
    private static let monotonicClock: UInt64 = 3
    /// A sequence-scoped clock (ids 64–127 are the producer's).
    private static let relativeClock: UInt64 = 64

    /// The first packet: clears the sequence's incremental state, says that the trace's clock is CLOCK_MONOTONIC and
    /// that the sequence's timestamps count from `origin` on it.
    mutating func start(at time: Int64) {
        origin = max(0, time - Self.originMargin)
        let origin = UInt64(origin)
        packet(timestamp: nil) { packet in
            packet.message(6) { snapshot in  // clock_snapshot
                snapshot.message(1) { $0.uint(1, Self.monotonicClock); $0.uint(2, origin) }  // clocks: clock_id, timestamp
                snapshot.message(1) { $0.uint(1, Self.relativeClock); $0.uint(2, 0) }
                snapshot.uint(2, Self.monotonicClock)  // primary_trace_clock
            }
            packet.message(59) { $0.uint(58, Self.relativeClock) }  // trace_packet_defaults: timestamp_clock_id
        }
    }

    private mutating func uuid() -> UInt64 {
        defer { nextUUID += 1 }
        return nextUUID
    }

    // MARK: Packets

    /// Writes one `TracePacket` (`Trace.packet`, field 1): `body` writes its payload.
    private mutating func packet(timestamp: Int64?, _ body: (inout ProtobufWriter) -> Void) {
        // The first packet clears the sequence's incremental state; every event after it relies on that state.
        let flags: UInt64? = first ? Self.incrementalStateCleared : timestamp == nil ? nil : Self.needsIncrementalState
        let isFirst = first
        first = false
        let interned = takeInterned()
        let relative = timestamp.map { UInt64(clamping: max(0, $0 - origin)) }
        out.message(1) { packet in
            if let relative { packet.uint(8, relative) }  // timestamp
            packet.uint(10, Self.sequenceID)  // trusted_packet_sequence_id
            if let flags { packet.uint(13, flags) }  // sequence_flags
            if isFirst { packet.uint(87, 1) }  // first_packet_on_sequence
            if let interned { packet.message(12) { $0.append(contentsOf: interned) } }  // interned_data
            body(&packet)
        }
        if out.count >= 1 << 20 { flush() }
    }

    /// The `InternedData` fields for the entries defined since the last packet, or nil.
    private mutating func takeInterned() -> ProtobufWriter? {
        guard !(newNames.isEmpty && newCategories.isEmpty && newArgumentNames.isEmpty && newStringValues.isEmpty) else {
            return nil
        }
        var interned = ProtobufWriter()
        for (iid, name) in newCategories { interned.message(1) { $0.uint(1, iid); $0.string(2, name) } }  // event_categories
        for (iid, name) in newNames { interned.message(2) { $0.uint(1, iid); $0.string(2, name) } }  // event_names
        for (iid, name) in newArgumentNames { interned.message(3) { $0.uint(1, iid); $0.string(2, name) } }  // debug_annotation_names
        for (iid, text) in newStringValues { interned.message(29) { $0.uint(1, iid); $0.string(2, text) } }  // debug_annotation_string_values
        newNames.removeAll(keepingCapacity: true)
        newCategories.removeAll(keepingCapacity: true)
        newArgumentNames.removeAll(keepingCapacity: true)
        newStringValues.removeAll(keepingCapacity: true)
        return interned
    }

    private var failure: TraceToolkitError?

    private mutating func flush() {
        guard failure == nil else {
            out.removeAll()
            return
        }
        do { try out.withBytes { bytes throws(TraceToolkitError) in try file.write(bytes) } } catch { failure = error }
        out.removeAll()
    }

    // MARK: Interning

    private mutating func nameID(_ label: Label) -> UInt64 {
        let (iid, isNew) = names.iid(label)
        if isNew { newNames.append((iid, label.text)) }
        return iid
    }

    private mutating func categoryID(_ category: Category) -> UInt64 {
        if categories[category.rawValue] != 0 { return categories[category.rawValue] }
        let iid = UInt64(category.rawValue + 1)
        categories[category.rawValue] = iid
        newCategories.append((iid, category.name))
        return iid
    }

    private mutating func argumentNameID(_ name: ArgumentName) -> UInt64 {
        if argumentNames[name.rawValue] != 0 { return argumentNames[name.rawValue] }
        let iid = UInt64(name.rawValue + 1)
        argumentNames[name.rawValue] = iid
        newArgumentNames.append((iid, name.text))
        return iid
    }

    private mutating func stringValueID(_ label: Label) -> UInt64 {
        let (iid, isNew) = stringValues.iid(label)
        if isNew { newStringValues.append((iid, label.text)) }
        return iid
    }

    // MARK: Tracks

    mutating func process(_ index: Int, pid: Int64, name: String) {
        if index == processTracks.count {
            processTracks.append(uuid())
            counterTracks.append(nil)
        }
        let track = processTracks[index]
        packet(timestamp: nil) { packet in
            packet.message(60) { descriptor in  // track_descriptor
                descriptor.uint(1, track)  // uuid
                descriptor.message(3) { process in  // process
                    process.int(1, pid)  // pid
                    process.string(6, name)  // process_name
                }
            }
        }
    }

    mutating func thread(_ index: Int, process: Int, pid: Int64, tid: Int64, name: String) {
        if index == threadTracks.count { threadTracks.append(uuid()) }
        let track = threadTracks[index]
        packet(timestamp: nil) { packet in
            packet.message(60) { descriptor in  // track_descriptor
                descriptor.uint(1, track)  // uuid
                descriptor.message(4) { thread in  // thread
                    thread.int(1, pid)  // pid
                    thread.int(2, tid)  // tid
                    thread.string(5, name)  // thread_name
                }
            }
        }
    }

    /// A track named `name` under `parent` (no process or thread of its own).
    private mutating func namedTrack(_ name: String, parent: UInt64, counter: Bool = false) -> UInt64 {
        let track = uuid()
        packet(timestamp: nil) { packet in
            packet.message(60) { descriptor in
                descriptor.uint(1, track)
                descriptor.string(2, name)  // name
                descriptor.uint(5, parent)  // parent_uuid
                if counter { descriptor.message(8) { _ in } }  // counter: a CounterDescriptor, defaults
            }
        }
        return track
    }

    /// A free child track of `group` for the slice `id` (a new one when all are busy).
    private mutating func takeSlot(_ process: Int, group: AsyncGroup, id: UInt64) -> UInt64 {
        let key = GroupKey(process: process, category: group.category, id: group.name.id,
                           text: group.name.id == 0 ? group.name.text : nil)
        if groups[key] == nil { groups[key] = (namedTrack(group.name.text, parent: processTracks[process]), []) }
        let track: UInt64
        if let free = groups[key]!.free.popLast() {
            track = free
        } else {
            track = namedTrack(group.name.text, parent: groups[key]!.uuid)
        }
        slots[SlotKey(process: process, category: group.category, id: id)] = track
        return track
    }

    private mutating func releaseSlot(_ process: Int, group: AsyncGroup, id: UInt64) -> UInt64? {
        guard let track = slots.removeValue(forKey: SlotKey(process: process, category: group.category, id: id)) else {
            return nil
        }
        let key = GroupKey(process: process, category: group.category, id: group.name.id,
                           text: group.name.id == 0 ? group.name.text : nil)
        groups[key]?.free.append(track)
        return track
    }

    // MARK: Events

    /// One `TrackEvent` (`TracePacket.track_event`, field 11).
    private mutating func event(_ type: EventType, track: UInt64, at time: Int64, name: Label?, category: Category?,
                                args: SliceArgs, flow: Flow?, counter: Int64? = nil) {
        let nameIID = name.map { nameID($0) }
        let categoryIID = category.map { categoryID($0) }
        // Annotation names and values are interned before the packet is written: its interned_data defines them.
        scratch.removeAll()
        args.forEach { argument, value in
            let nameIID = argumentNameID(argument)
            switch value {
            case let .uint(number):
                scratch.message(4) { $0.uint(1, nameIID); $0.uint(3, number) }  // debug_annotations: name_iid, uint_value
            case let .int(number):
                scratch.message(4) { $0.uint(1, nameIID); $0.int(4, number) }  // int_value
            case let .text(label):
                let valueIID = stringValueID(label)
                scratch.message(4) { $0.uint(1, nameIID); $0.uint(17, valueIID) }  // string_value_iid
            }
        }
        let annotations = scratch  // shares the buffer: read below, before scratch is written again
        packet(timestamp: time) { packet in
            packet.message(11) { event in  // track_event
                if let categoryIID { event.uint(3, categoryIID) }  // category_iids
                event.append(contentsOf: annotations)
                event.uint(9, type.rawValue)  // type
                if let nameIID { event.uint(10, nameIID) }  // name_iid
                event.uint(11, track)  // track_uuid
                if let counter { event.int(30, counter) }  // counter_value
                if let flow { event.fixed64(flow.step == .terminates ? 48 : 47, flow.id) }  // terminating_flow_ids / flow_ids
            }
        }
    }

    mutating func threadSliceBegin(_ thread: Int, at time: Int64, name: Label, category: Category, args: SliceArgs,
                                   flow: Flow?) {
        event(.sliceBegin, track: threadTracks[thread], at: time, name: name, category: category, args: args, flow: flow)
    }

    mutating func threadSliceEnd(_ thread: Int, at time: Int64, args: SliceArgs) {
        event(.sliceEnd, track: threadTracks[thread], at: time, name: nil, category: nil, args: args, flow: nil)
    }

    mutating func threadInstant(_ thread: Int, at time: Int64, name: Label, category: Category, args: SliceArgs,
                                flow: Flow?) {
        event(.instant, track: threadTracks[thread], at: time, name: name, category: category, args: args, flow: flow)
    }

    mutating func asyncBegin(_ process: Int, group: AsyncGroup, id: UInt64, at time: Int64, name: Label,
                             args: SliceArgs, flow: Flow?) {
        let track = takeSlot(process, group: group, id: id)
        event(.sliceBegin, track: track, at: time, name: name, category: group.category, args: args, flow: flow)
    }

    mutating func asyncEnd(_ process: Int, group: AsyncGroup, id: UInt64, at time: Int64, name: Label, args: SliceArgs) {
        guard let track = releaseSlot(process, group: group, id: id) else { return }
        event(.sliceEnd, track: track, at: time, name: nil, category: nil, args: args, flow: nil)
    }

    mutating func asyncInstant(_ process: Int, group: AsyncGroup, id: UInt64, at time: Int64, name: Label,
                               args: SliceArgs, flow: Flow?) {
        guard let track = slots[SlotKey(process: process, category: group.category, id: id)] else { return }
        event(.instant, track: track, at: time, name: name, category: group.category, args: args, flow: flow)
    }

    mutating func inFlight(_ process: Int, at time: Int64, value: Int64) {
        let track: UInt64
        if let known = counterTracks[process] {
            track = known
        } else {
            track = namedTrack("side effects in flight", parent: processTracks[process], counter: true)
            counterTracks[process] = track
        }
        event(.counter, track: track, at: time, name: nil, category: nil, args: .none, flow: nil, counter: value)
    }

    mutating func finish(summary: ExportSummary) throws(TraceToolkitError) {
        flush()
        if let failure { throw failure }
        try file.commit()
    }
}

/// Interned ids for labels: by the reader's string id (an array lookup) in each form, or by the text for labels made
/// here. Ids start at 1, in the order first asked for.
struct InternTable {
    private var byID: [[UInt64]] = Array(repeating: [], count: 3)
    private var byText: [String: UInt64] = [:]
    private var count: UInt64 = 0

    /// The label's interned id, and whether it is new (then its definition must be written).
    mutating func iid(_ label: Label) -> (UInt64, Bool) {
        if label.id == 0 {
            let text = label.text
            if let known = byText[text] { return (known, false) }
            count += 1
            byText[text] = count
            return (count, true)
        }
        let form = label.form.rawValue, index = Int(label.id)
        if index < byID[form].count, byID[form][index] != 0 { return (byID[form][index], false) }
        if index >= byID[form].count { byID[form] += Array(repeating: 0, count: max(index + 1 - byID[form].count, 64)) }
        count += 1
        byID[form][index] = count
        return (count, true)
    }
}
