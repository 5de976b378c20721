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
    private var processTracks: [Int64: UInt64] = [:]
    private var threadTracks: [ThreadKey: UInt64] = [:]
    private var counterTracks: [Int64: UInt64] = [:]
    private var groups: [GroupKey: (uuid: UInt64, free: [UInt64])] = [:]
    private var slots: [SlotKey: UInt64] = [:]
    private var names: [String: UInt64] = [:]
    private var categories: [Category: UInt64] = [:]
    private var argumentNames: [String: UInt64] = [:]
    private var stringValues: [String: UInt64] = [:]
    private var first = true
    /// Timestamps are written relative to this (a clock of the sequence's own, tied to CLOCK_MONOTONIC by the first
    /// packet's snapshot): five bytes each instead of nine.
    private var origin: Int64 = 0

    /// Interned entries a packet defines, written in its `interned_data`.
    private var newNames: [(UInt64, String)] = []
    private var newCategories: [(UInt64, String)] = []
    private var newArgumentNames: [(UInt64, String)] = []
    private var newStringValues: [(UInt64, String)] = []

    private struct ThreadKey: Hashable {
        var pid: Int64
        var tid: Int64
    }

    private struct GroupKey: Hashable {
        var pid: Int64
        var group: AsyncGroup
    }

    private struct SlotKey: Hashable {
        var pid: Int64
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
        if out.bytes.count >= 1 << 20 { flush() }
    }

    /// The `InternedData` fields for the entries defined since the last packet, or nil.
    private mutating func takeInterned() -> [UInt8]? {
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
        return interned.bytes
    }

    private var failure: TraceToolkitError?

    private mutating func flush() {
        guard failure == nil else {
            out.removeAll()
            return
        }
        do { try file.write(out.bytes) } catch { failure = error }
        out.removeAll()
    }

    // MARK: Interning

    private mutating func nameID(_ name: String) -> UInt64 {
        if let known = names[name] { return known }
        let iid = UInt64(names.count + 1)
        names[name] = iid
        newNames.append((iid, name))
        return iid
    }

    private mutating func categoryID(_ category: Category) -> UInt64 {
        if let known = categories[category] { return known }
        let iid = UInt64(categories.count + 1)
        categories[category] = iid
        newCategories.append((iid, category.rawValue))
        return iid
    }

    private mutating func argumentNameID(_ name: String) -> UInt64 {
        if let known = argumentNames[name] { return known }
        let iid = UInt64(argumentNames.count + 1)
        argumentNames[name] = iid
        newArgumentNames.append((iid, name))
        return iid
    }

    private mutating func stringValueID(_ text: String) -> UInt64 {
        if let known = stringValues[text] { return known }
        let iid = UInt64(stringValues.count + 1)
        stringValues[text] = iid
        newStringValues.append((iid, text))
        return iid
    }

    // MARK: Tracks

    private mutating func processTrack(_ pid: Int64) -> UInt64 {
        if let known = processTracks[pid] { return known }
        process(pid: pid, name: "katana pid \(pid)")
        return processTracks[pid]!
    }

    mutating func process(pid: Int64, name: String) {
        let track = processTracks[pid] ?? uuid()
        processTracks[pid] = track
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

    private mutating func threadTrack(_ pid: Int64, _ tid: Int64) -> UInt64 {
        if let known = threadTracks[ThreadKey(pid: pid, tid: tid)] { return known }
        thread(pid: pid, tid: tid, name: "thread \(tid)")
        return threadTracks[ThreadKey(pid: pid, tid: tid)]!
    }

    mutating func thread(pid: Int64, tid: Int64, name: String) {
        _ = processTrack(pid)
        let key = ThreadKey(pid: pid, tid: tid)
        let track = threadTracks[key] ?? uuid()
        threadTracks[key] = track
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

    /// A free child track of `group` for the slice `id` (a new one when all are busy).
    private mutating func takeSlot(pid: Int64, group: AsyncGroup, id: UInt64) -> UInt64 {
        let key = GroupKey(pid: pid, group: group)
        if groups[key] == nil {
            let parent = processTrack(pid)
            let track = uuid()
            groups[key] = (track, [])
            packet(timestamp: nil) { packet in
                packet.message(60) { descriptor in
                    descriptor.uint(1, track)
                    descriptor.string(2, group.name)  // name
                    descriptor.uint(5, parent)  // parent_uuid
                }
            }
        }
        let track: UInt64
        if let free = groups[key]!.free.popLast() {
            track = free
        } else {
            track = uuid()
            let parent = groups[key]!.uuid
            packet(timestamp: nil) { packet in
                packet.message(60) { descriptor in
                    descriptor.uint(1, track)
                    descriptor.string(2, group.name)
                    descriptor.uint(5, parent)
                }
            }
        }
        slots[SlotKey(pid: pid, category: group.category, id: id)] = track
        return track
    }

    private mutating func counterTrack(_ pid: Int64, _ name: String) -> UInt64 {
        if let known = counterTracks[pid] { return known }
        let parent = processTrack(pid)
        let track = uuid()
        counterTracks[pid] = track
        packet(timestamp: nil) { packet in
            packet.message(60) { descriptor in
                descriptor.uint(1, track)
                descriptor.string(2, name)
                descriptor.uint(5, parent)
                descriptor.message(8) { _ in }  // counter: a CounterDescriptor, defaults
            }
        }
        return track
    }

    // MARK: Events

    /// One `TrackEvent` (`TracePacket.track_event`, field 11).
    private mutating func event(_ type: EventType, track: UInt64, at time: Int64, name: String?, category: Category?,
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
            case let .string(text):
                let valueIID = stringValueID(text)
                scratch.message(4) { $0.uint(1, nameIID); $0.uint(17, valueIID) }  // string_value_iid
            }
        }
        let annotations = scratch.bytes
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

    mutating func threadSliceBegin(pid: Int64, tid: Int64, at time: Int64, name: String, category: Category,
                                   args: SliceArgs, flow: Flow?) {
        event(.sliceBegin, track: threadTrack(pid, tid), at: time, name: name, category: category, args: args, flow: flow)
    }

    mutating func threadSliceEnd(pid: Int64, tid: Int64, at time: Int64, args: SliceArgs) {
        event(.sliceEnd, track: threadTrack(pid, tid), at: time, name: nil, category: nil, args: args, flow: nil)
    }

    mutating func threadInstant(pid: Int64, tid: Int64, at time: Int64, name: String, category: Category,
                                args: SliceArgs, flow: Flow?) {
        event(.instant, track: threadTrack(pid, tid), at: time, name: name, category: category, args: args, flow: flow)
    }

    mutating func asyncBegin(pid: Int64, group: AsyncGroup, id: UInt64, at time: Int64, name: String, args: SliceArgs,
                             flow: Flow?) {
        let track = takeSlot(pid: pid, group: group, id: id)
        event(.sliceBegin, track: track, at: time, name: name, category: group.category, args: args, flow: flow)
    }

    mutating func asyncEnd(pid: Int64, group: AsyncGroup, id: UInt64, at time: Int64, name: String, args: SliceArgs) {
        guard let track = slots.removeValue(forKey: SlotKey(pid: pid, category: group.category, id: id)) else { return }
        event(.sliceEnd, track: track, at: time, name: nil, category: nil, args: args, flow: nil)
        groups[GroupKey(pid: pid, group: group)]?.free.append(track)
    }

    mutating func asyncInstant(pid: Int64, group: AsyncGroup, id: UInt64, at time: Int64, name: String,
                               args: SliceArgs, flow: Flow?) {
        guard let track = slots[SlotKey(pid: pid, category: group.category, id: id)] else { return }
        event(.instant, track: track, at: time, name: name, category: group.category, args: args, flow: flow)
    }

    mutating func counter(pid: Int64, name: String, at time: Int64, value: Int64) {
        event(.counter, track: counterTrack(pid, name), at: time, name: nil, category: nil, args: .none, flow: nil,
              counter: value)
    }

    mutating func finish(summary: ExportSummary) throws(TraceToolkitError) {
        flush()
        if let failure { throw failure }
        try file.commit()
    }
}
