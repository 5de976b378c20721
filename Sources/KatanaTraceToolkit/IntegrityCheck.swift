import Foundation

/// What `katana-trace check` found: every dispatch enqueued, begun and ended once each, in that order, with one kind
/// and name; every interval and transition begun and ended; nothing discarded by the tracer.
public struct IntegrityReport: Sendable {
    /// Dispatches seen.
    public var dispatches = 0
    /// Katana events read.
    public var events = 0
    /// Events the tracer discarded (full buffers).
    public var discarded: UInt64 = 0
    /// Every problem found, in the order found (a discarded-events warning first).
    public var problems: [String] = []

    /// As `katana-trace check` prints it: JSON with the first 20 problems and their count.
    public var json: String {
        func quoted(_ text: String) -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .withoutEscapingSlashes
            return String(decoding: (try? encoder.encode(text)) ?? Data("\"?\"".utf8), as: UTF8.self)
        }
        let listed = problems.prefix(20)
        let list = listed.isEmpty ? "[]" : "[\n" + listed.map { "    " + quoted($0) }.joined(separator: ",\n") + "\n  ]"
        return """
            {
              "dispatches": \(dispatches),
              "events": \(events),
              "discarded": \(discarded),
              "problems": \(list),
              "problem_count": \(problems.count)
            }
            """
    }
}

/// The integrity check, streamed: it holds only the dispatches, intervals and transitions in flight.
public final class IntegrityCheck {
    private struct Key: Hashable {
        var vpid: Int64?
        var id: UInt64
    }

    /// One stage of a dispatch: 0 enqueue, 1 begin, 2 end. Kind and name are the reader's string ids.
    private struct Stage {
        var stage: UInt8
        var time: Int64
        var kind: UInt32
        var name: UInt32
        var parentID: UInt64?
    }

    /// A dispatch in flight: its stages so far (at most three are kept inline; a fourth ends it), and when it was
    /// first seen. No array per dispatch: the check reads millions of them (`katana-trace check` at ≥ 1M events/s).
    private struct Open {
        var sequence: Int
        var count = 0
        var stages: (Stage, Stage, Stage)
    }

    private struct Pair {
        /// When it was first seen: what is left open at the end is reported in that order.
        var sequence: Int
        var name: String
        var begin: Int64?
        var end: Int64?
    }

    /// Dispatches in flight: their stages so far, and when each was first seen.
    private var open: [Key: Open] = [:]
    private var sequence = 0
    private var intervals: [Key: Pair] = [:]
    private var transitions: [Key: Pair] = [:]
    private var report = IntegrityReport()
    private init() {}

    /// Reads `trace` with `reader` and checks it.
    public static func run(trace: String, reader: TraceReader = .auto) throws(TraceToolkitError) -> IntegrityReport {
        let check = IntegrityCheck()
        let discarded = try EventStream.read(trace: trace, reader: reader, progress: "check") { check.take($0) }
        return check.finish(discarded: discarded)
    }

    private func take(_ event: TraceEvent) {
        report.events += 1
        let key = Key(vpid: event.vpid, id: event.id)
        switch event.role {
        case .enqueue, .begin, .end:
            let stage: UInt8 = event.role == .enqueue ? 0 : event.role == .begin ? 1 : 2
            add(Stage(stage: stage, time: event.timestamp, kind: event.kindID, name: event.nameID, parentID: event.parentID), key)
        case .updaterInline:
            // An updater applied inline: one event at its end standing for its enqueue and begin at (end − duration).
            let end = event.timestamp
            let begin = UInt64(max(0, end)) < event.durationNanoseconds ? 0 : end - Int64(event.durationNanoseconds)
            add(Stage(stage: 0, time: begin, kind: event.kindID, name: event.nameID, parentID: event.parentID), key)
            add(Stage(stage: 1, time: begin, kind: event.kindID, name: event.nameID, parentID: event.parentID), key)
            add(Stage(stage: 2, time: end, kind: event.kindID, name: event.nameID, parentID: nil), key)
        case .intervalBegin, .intervalEnd:
            pair(&intervals, "interval", key, event.name ?? "?", event.timestamp, begins: event.role == .intervalBegin)
        case .transitionBegin, .transitionEnd:
            pair(&transitions, "transition", key, event.name ?? "?", event.timestamp, begins: event.role == .transitionBegin)
        case .budgetExceeded, .other:
            break
        }
    }

    private func add(_ stage: Stage, _ key: Key) {
        var finished: Open?
        do {
            // One lookup: the entry is changed in place.
            var entry = open[key, default: Open(sequence: 0, stages: (stage, stage, stage))]
            if entry.count == 0 {
                report.dispatches += 1
                sequence += 1
                entry.sequence = sequence
            }
            switch entry.count {
            case 0: entry.stages.0 = stage
            case 1: entry.stages.1 = stage
            default: entry.stages.2 = stage
            }
            entry.count += 1
            if entry.count == 3 {
                open[key] = nil
                finished = entry
            } else {
                open[key] = entry
            }
        }
        if let finished { finish(key.id, finished) }
    }

    private static let stageNames = ["dispatch_enqueue", "dispatch_begin", "dispatch_end"]

    private func finish(_ id: UInt64, _ entry: Open) {
        let (a, b, c) = entry.stages
        // The usual dispatch — enqueue, begin, end, once each and in time order — is checked without an array.
        if entry.count == 3 && a.stage == 0 && b.stage == 1 && c.stage == 2 && a.time <= b.time && b.time <= c.time {
            return agree(id, a, b, c)
        }
        // In time order; at one instant, in stage order; then as read.
        let seen = [a, b, c].prefix(entry.count).enumerated()
            .sorted { ($0.element.time, $0.element.stage, $0.offset) < ($1.element.time, $1.element.stage, $1.offset) }
            .map(\.element)
        guard seen.map(\.stage) == [0, 1, 2] else {
            let names = seen.map { "'\(Self.stageNames[Int($0.stage)])'" }.joined(separator: ", ")
            report.problems.append("id \(id): events [\(names)], expected enqueue, begin, end once each in that order")
            return
        }
        agree(id, seen[0], seen[1], seen[2])
    }

    /// Enqueue, begin and end name the same kind and type; enqueue and begin the same parent.
    private func agree(_ id: UInt64, _ enqueue: Stage, _ begin: Stage, _ end: Stage) {
        if !(enqueue.kind == begin.kind && begin.kind == end.kind && enqueue.name == begin.name && begin.name == end.name) {
            report.problems.append("id \(id): kind or name differs between its events")
        }
        if enqueue.parentID != begin.parentID {
            report.problems.append("id \(id): parent_id differs between enqueue and begin")
        }
    }

    private func pair(_ table: inout [Key: Pair], _ label: String, _ key: Key, _ name: String, _ time: Int64, begins: Bool) {
        sequence += 1
        var entry = table[key] ?? Pair(sequence: sequence, name: name)
        if begins { entry.begin = time } else { entry.end = time }
        guard let begin = entry.begin, let end = entry.end else {
            table[key] = entry
            return
        }
        table[key] = nil
        if end < begin { report.problems.append("\(label) \(key.id) (\(entry.name)): ends before it begins") }
    }

    private func finish(discarded: UInt64) -> IntegrityReport {
        for (key, entry) in open.sorted(by: { $0.value.sequence < $1.value.sequence }) { finish(key.id, entry) }
        open = [:]
        for (label, table) in [("transition", transitions), ("interval", intervals)] {
            for (key, entry) in table.sorted(by: { $0.value.sequence < $1.value.sequence }) {
                report.problems.append("\(label) \(key.id) (\(entry.name)): has \(entry.begin != nil ? "begin" : "end") only")
            }
        }
        report.discarded = discarded
        if discarded > 0 {
            report.problems.insert("\(discarded) events were DISCARDED by the tracer, so some dispatches look incomplete: "
                                   + "use a bigger channel (lttng enable-channel -u --subbuf-size=8M --num-subbuf=8)", at: 0)
        }
        return report
    }
}
