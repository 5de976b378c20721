import KatanaFlightRecorder
import KatanaMetrics
import KatanaTrace

/// What the page shows, as its JSON: made from the flight recorder's window and, when given, the metrics' totals.
struct Snapshot: Encodable {
    /// Milliseconds since the epoch when it was taken.
    var takenAt: Int64
    /// Where the per-type counts come from: "metrics" (every dispatch since the metrics were made) or "window" (the
    /// dispatches still in the flight recorder's window).
    var countsFrom: String
    /// The latency rows' lower bounds in nanoseconds: 0, 1 µs, 10 µs … 1 s.
    var bucketFloors: [UInt64]
    var types: [TypeRow]
    var window: WindowFacts
    var inFlight: [InFlight]
    var slowest: [Finished]
    var failed: [Finished]
    var updaters: [Updater]
    var state: StateView
    var links: [String: String]

    enum CodingKeys: String, CodingKey {
        case takenAt = "taken_at", countsFrom = "counts_from", bucketFloors = "bucket_floors", types, window
        case inFlight = "in_flight", slowest, failed, updaters, state, links
    }

    struct TypeRow: Encodable {
        var name: String
        var kind: String
        var count: UInt64
        /// Dispatches per latency row: `buckets[i]` took more than `bucketFloors[i]` and at most the next floor.
        var buckets: [UInt64]
        var outcomes: [String: UInt64]
    }

    struct WindowFacts: Encodable {
        var events: Int
        var threads: Int
        /// From the window's oldest event to the copy, in nanoseconds.
        var spanNanoseconds: UInt64
        var recorded: UInt64
        var discarded: UInt64
        var recorder: Bool

        enum CodingKeys: String, CodingKey {
            case events, threads, spanNanoseconds = "span_nanoseconds", recorded, discarded, recorder
        }
    }

    struct Link: Encodable {
        var id: UInt64
        var name: String?
    }

    struct InFlight: Encodable {
        var id: UInt64
        var name: String
        var kind: String
        /// "running" (a side effect begun, not ended) or "queued" (an updater waiting in its lane).
        var status: String
        var ageNanoseconds: UInt64
        /// The dispatch that dispatched it, then that one's parent, and so on (a parent before the window: its id).
        var parents: [Link]

        enum CodingKeys: String, CodingKey {
            case id, name, kind, status, ageNanoseconds = "age_nanoseconds", parents
        }
    }

    struct Finished: Encodable {
        var id: UInt64
        var name: String
        var kind: String
        var outcome: String
        var serviceNanoseconds: UInt64
        var queueWaitNanoseconds: UInt64?
        /// Nanoseconds before the copy that it ended.
        var endedAgoNanoseconds: UInt64
        var parents: [Link]

        enum CodingKeys: String, CodingKey {
            case id, name, kind, outcome, serviceNanoseconds = "service_nanoseconds"
            case queueWaitNanoseconds = "queue_wait_nanoseconds", endedAgoNanoseconds = "ended_ago_nanoseconds", parents
        }
    }

    struct Updater: Encodable {
        var id: UInt64
        var name: String
        var outcome: String
        var serviceNanoseconds: UInt64
        /// Whether it changed the state: applied (Katana, like Katana 6, takes every applied updater as a change,
        /// and hands it to the listeners); false when it threw.
        var changed: Bool
        /// Listeners handed the change: an inline updater's event carries the count, a batch applied in the lane
        /// records it after its updaters; nil where the window no longer holds it.
        var listeners: UInt32?
        var endedAgoNanoseconds: UInt64

        enum CodingKeys: String, CodingKey {
            case id, name, outcome, serviceNanoseconds = "service_nanoseconds", changed, listeners
            case endedAgoNanoseconds = "ended_ago_nanoseconds"
        }
    }

    struct StateView: Encodable {
        var shown: Bool
        /// The app's redacted state, as its `Encodable` conformance writes it.
        var value: EncodedState?
        var error: String?
    }
}

/// The app's redacted state, encoded in place in the snapshot.
struct EncodedState: Encodable {
    let value: any Encodable
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}

/// The latency rows of golang.org/x/net/trace's page, in nanoseconds.
let latencyFloors: [UInt64] = [0, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000]

/// The row of a duration: above a floor and at most the next (the metrics' bounds are inclusive upper bounds).
func latencyRow(of nanoseconds: UInt64) -> Int {
    var index = 0
    while index + 1 < latencyFloors.count, nanoseconds > latencyFloors[index + 1] { index += 1 }
    return index
}

/// One dispatch as the window shows it.
private struct Seen {
    var name: String?
    var kind: DispatchKind?
    var parent: UInt64 = 0
    var enqueued: UInt64?
    var began: UInt64?
    var ended: UInt64?
    var service: UInt64?
    var outcome: DispatchOutcome?
    var listeners: UInt32?
}

extension Snapshot {
    /// The snapshot of `events` (the recorder's window, copied at `now`) and, when given, the metrics' totals.
    static func make(events: [FlightRecorder.Event], now: UInt64, counts: (recorded: UInt64, discarded: UInt64),
                     recorder: Bool, metrics: DispatchMetrics?, rows: Int, takenAt: Int64) -> Snapshot {
        var seen: [UInt64: Seen] = [:]
        var order: [UInt64] = []  // dispatches by their first event, oldest first
        // Per thread, the updaters applied since its last listeners' batch: the batch's changes are theirs.
        var unannounced: [Int32: [UInt64]] = [:]
        var threads = Set<Int32>()
        var oldest = now
        for event in events.sorted(by: { $0.timestamp < $1.timestamp }) {
            threads.insert(event.thread)
            oldest = min(oldest, event.timestamp)
            switch event.what {
            case .enqueue, .begin, .end, .updaterInline:
                if seen[event.id] == nil { order.append(event.id) }
                var dispatch = seen[event.id] ?? Seen()
                dispatch.name = dispatch.name ?? event.name
                dispatch.kind = dispatch.kind ?? event.kind
                if event.parentID != 0 { dispatch.parent = event.parentID }
                switch event.what {
                case .enqueue: dispatch.enqueued = event.timestamp
                case .begin: dispatch.began = event.timestamp
                case .end:
                    dispatch.ended = event.timestamp
                    dispatch.outcome = event.outcome
                    if let began = dispatch.began { dispatch.service = event.timestamp &- began }
                    if dispatch.kind == .stateUpdater {
                        // One that threw changed nothing, so no listener was told of it.
                        if event.outcome == .ok { unannounced[event.thread, default: []].append(event.id) } else { dispatch.listeners = 0 }
                    }
                default:
                    dispatch.ended = event.timestamp
                    dispatch.service = event.value
                    dispatch.outcome = event.outcome
                    dispatch.listeners = event.listeners  // told before its one event, which says how many
                    // None told on this thread: its listeners may run on the store's listener executor, told of it
                    // in a batch after it.
                    if event.outcome == .ok, event.listeners == 0 { unannounced[event.thread, default: []].append(event.id) }
                }
                seen[event.id] = dispatch
            case .listenersNotified:
                // A batch of `value` changes follows the updaters that made them, on their thread.
                let applied = unannounced.removeValue(forKey: event.thread) ?? []
                for id in applied.suffix(Int(clamping: event.value)) { seen[id]?.listeners = event.count }
            default:
                break
            }
        }

        func parents(of id: UInt64) -> [Link] {
            var chain: [Link] = []
            var next = seen[id]?.parent ?? 0
            while next != 0, chain.count < 16, !chain.contains(where: { $0.id == next }) {
                chain.append(Link(id: next, name: seen[next]?.name))
                next = seen[next]?.parent ?? 0
            }
            return chain
        }

        var inFlight: [InFlight] = []
        var finished: [(id: UInt64, dispatch: Seen)] = []
        var windowTypes: [String: TypeRow] = [:]
        for id in order {
            guard let dispatch = seen[id], let name = dispatch.name else { continue }
            let kind = (dispatch.kind ?? .stateUpdater).description
            if dispatch.ended == nil {
                if dispatch.kind == .sideEffect, let began = dispatch.began {
                    inFlight.append(InFlight(id: id, name: name, kind: kind, status: "running",
                                             ageNanoseconds: now &- began, parents: parents(of: id)))
                } else if dispatch.kind == .stateUpdater, dispatch.began == nil, let enqueued = dispatch.enqueued {
                    inFlight.append(InFlight(id: id, name: name, kind: kind, status: "queued",
                                             ageNanoseconds: now &- enqueued, parents: parents(of: id)))
                }
                continue
            }
            guard let service = dispatch.service else { continue }
            finished.append((id, dispatch))
            var type = windowTypes["\(kind) \(name)"] ?? TypeRow(name: name, kind: kind, count: 0,
                                                                 buckets: Array(repeating: 0, count: latencyFloors.count), outcomes: [:])
            type.count += 1
            type.buckets[latencyRow(of: service)] += 1
            type.outcomes[(dispatch.outcome ?? .ok).description, default: 0] += 1
            windowTypes["\(kind) \(name)"] = type
        }
        inFlight.sort { $0.ageNanoseconds > $1.ageNanoseconds }

        func row(_ item: (id: UInt64, dispatch: Seen)) -> Finished {
            let dispatch = item.dispatch
            var wait: UInt64?
            if let enqueued = dispatch.enqueued, let began = dispatch.began { wait = began &- enqueued }
            if dispatch.began == nil { wait = 0 }  // applied inline: it never waited
            return Finished(id: item.id, name: dispatch.name ?? "?", kind: (dispatch.kind ?? .stateUpdater).description,
                            outcome: (dispatch.outcome ?? .ok).description, serviceNanoseconds: dispatch.service ?? 0,
                            queueWaitNanoseconds: wait, endedAgoNanoseconds: now &- (dispatch.ended ?? now),
                            parents: parents(of: item.id))
        }
        let slowest = finished.sorted { ($0.dispatch.service ?? 0) > ($1.dispatch.service ?? 0) }.prefix(rows).map(row)
        let failed = finished.reversed().filter { $0.dispatch.outcome == .error || $0.dispatch.outcome == .appliedWithError }
            .prefix(rows).map(row)
        let updaters = finished.reversed().filter { $0.dispatch.kind == .stateUpdater }.prefix(rows * 2).map { item in
            let outcome = item.dispatch.outcome ?? .ok
            return Updater(id: item.id, name: item.dispatch.name ?? "?", outcome: outcome.description,
                           serviceNanoseconds: item.dispatch.service ?? 0,
                           changed: outcome == .ok, listeners: item.dispatch.listeners,
                           endedAgoNanoseconds: now &- (item.dispatch.ended ?? now))
        }

        var types: [TypeRow]
        if let metrics {
            types = Self.typeRows(metrics.totals())
        } else {
            types = Array(windowTypes.values)
        }
        types.sort { $0.count != $1.count ? $0.count > $1.count : $0.name < $1.name }

        return Snapshot(
            takenAt: takenAt, countsFrom: metrics == nil ? "window" : "metrics", bucketFloors: latencyFloors,
            types: types,
            window: WindowFacts(events: events.count, threads: threads.count, spanNanoseconds: now &- oldest,
                                recorded: counts.recorded, discarded: counts.discarded, recorder: recorder),
            inFlight: Array(inFlight.prefix(rows * 5)), slowest: Array(slowest), failed: Array(failed),
            updaters: Array(updaters), state: StateView(shown: false), links: [:])
    }

    /// The metrics' series as the page's rows: each metrics bucket `(bounds[i − 1], bounds[i]]` goes to the row whose
    /// range holds it (the default bounds, 100 ns to 10 s in steps of 1, 2.5 and 5, fall on the rows' floors).
    static func typeRows(_ totals: (series: [DispatchMetrics.Totals], boundsNanoseconds: [UInt64])) -> [TypeRow] {
        totals.series.compactMap { series in
            let count = series.outcomes.values.reduce(0, +)
            guard count > 0 else { return nil }
            var buckets = Array(repeating: UInt64(0), count: latencyFloors.count)
            for (index, samples) in series.serviceCounts.enumerated() where samples > 0 {
                // The bucket's upper bound (the last bucket: above every bound) decides its row.
                let upper = index < totals.boundsNanoseconds.count ? totals.boundsNanoseconds[index] : UInt64.max
                buckets[latencyRow(of: upper)] += samples
            }
            var outcomes: [String: UInt64] = [:]
            for (outcome, value) in series.outcomes { outcomes[outcome.description] = value }
            return TypeRow(name: series.type ?? "other", kind: series.kind.description, count: count, buckets: buckets,
                           outcomes: outcomes)
        }
    }
}
