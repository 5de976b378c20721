import Foundation
import KatanaFlightRecorder
import KatanaMetrics
import KatanaTrace
package import KatanaTraceToolkit

/// A live page of what a running store is doing — `/debug/katana` — for the HTTP server the app already runs, or
/// (with the package's `InspectorServer` trait) on a listener of its own: `serve(on:idleTimeout:onListening:)`, in
/// <doc:LivePage>.
///
/// It reads what the app already records and records nothing itself: the flight recorder's window (the slowest and
/// failed dispatches with their parents, the side effects in flight, the recent updaters) and, when given,
/// the totals of KatanaMetrics' `DispatchMetrics` (every dispatch's latency row and outcome since start). Mounted and
/// idle, it costs a dispatch nothing; a page open costs one copy of the window per refresh, shared by every page,
/// and the dispatching threads never wait for it.
///
/// Nothing on it changes a store. The state is shown only when the app hands a redaction closure to ``showState(_:)``.
/// Who can reach it: its own listener binds loopback unless the app names another address; mounted, the app's server
/// decides (bind that one to loopback too, as the examples do).
public final class Inspector: @unchecked Sendable {
    /// What the inspector reads and how it serves.
    public struct Configuration: Sendable {
        /// The path the page is mounted at; the JSON, the live stream and the trace download are below it.
        public var path: String
        /// Read the flight recorder's window (the app must record into `FlightRecorder.shared`).
        public var flightRecorder: Bool
        /// Per-type counts since start; without metrics they come from the window.
        public var metrics: DispatchMetrics?
        /// A link to the app's own metrics endpoint, shown on the page (the inspector does not render metrics).
        public var metricsPath: String?
        /// How often the page updates; one snapshot per interval, however many pages are open.
        public var refresh: Duration
        /// Live streams at once; one more is refused (503) until one ends.
        public var maxStreams: Int
        /// A stream ends after this long (the page's EventSource reconnects): nothing held open for hours.
        public var maxStreamDuration: Duration
        /// Rows in the slowest and failed tables (recent updaters: twice as many).
        public var rows: Int

        /// The defaults: mounted at `/debug/katana`, reading the flight recorder, refreshed every second, at most 16
        /// live streams of at most 10 minutes each, 10 rows per table.
        public init(path: String = "/debug/katana", flightRecorder: Bool = true, metrics: DispatchMetrics? = nil,
                    metricsPath: String? = nil, refresh: Duration = .seconds(1), maxStreams: Int = 16,
                    maxStreamDuration: Duration = .seconds(600), rows: Int = 10) {
            self.path = path
            self.flightRecorder = flightRecorder
            self.metrics = metrics
            self.metricsPath = metricsPath
            self.refresh = refresh
            self.maxStreams = maxStreams
            self.maxStreamDuration = maxStreamDuration
            self.rows = rows
        }
    }

    /// One answer, for the app's server to send.
    public struct Response: Sendable {
        /// What to send.
        public enum Body: Sendable {
            /// The whole body.
            case bytes([UInt8])
            /// Server-sent events: run it from the response's body writer and hand it a `write` that sends one chunk
            /// and throws when the client has gone. It returns when `write` throws, or after
            /// ``Configuration/maxStreamDuration``. It waits for each write (a slow reader is sent fewer, newer
            /// snapshots, never a queue of old ones).
            case stream(@Sendable (_ write: ([UInt8]) async throws -> Void) async -> Void)
        }

        /// The HTTP status.
        public var status: Int
        /// The headers to send (Content-Type among them).
        public var headers: [(name: String, value: String)]
        /// The body.
        public var body: Body
    }

    /// What it reads and how it serves (the path normalised: one leading slash, no trailing one).
    public let configuration: Configuration
    // Guarded by `lock`.
    private let lock = NSLock()
    private var cached: (bytes: [UInt8], at: ContinuousClock.Instant)?
    private var streams = 0
    private var exporting = false
    private var state: (@Sendable () -> any Encodable)?

    /// An inspector; mount ``respond(method:path:)`` in the app's server under ``Configuration/path``.
    public init(_ configuration: Configuration = .init()) {
        var configuration = configuration
        while configuration.path.hasSuffix("/") { configuration.path.removeLast() }
        if !configuration.path.hasPrefix("/") { configuration.path = "/" + configuration.path }
        configuration.rows = max(1, configuration.rows)
        configuration.maxStreams = max(0, configuration.maxStreams)
        self.configuration = configuration
    }

    /// Shows the state on the page, as `redacted` returns it: read the store's state there and leave out (or mask)
    /// what must not leave the process. Off until called.
    public func showState(_ redacted: @escaping @Sendable () -> any Encodable) {
        lock.withLock { state = redacted }
    }

    /// The answer to `GET path` (a path and query as the request line has them). Anything but GET or HEAD is
    /// refused (405): nothing here changes anything.
    public func respond(method: String, path: String) -> Response {
        guard method == "GET" || method == "HEAD" else {
            return Self.text(405, "the inspector only reads: GET\n", extra: [("Allow", "GET, HEAD")])
        }
        let route = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        let base = configuration.path
        switch route {
        case base, base + "/":
            return Response(status: 200, headers: [("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store")],
                            body: .bytes(Array(Page.html(base: base).utf8)))
        case base + "/snapshot.json":
            return Response(status: 200, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                            body: .bytes(snapshotJSON()))
        case base + "/events":
            return events()
        case base + "/trace.pftrace":
            return trace()
        default:
            return Self.text(404, "no such page: \(base) has the page, \(base)/snapshot.json, \(base)/events and \(base)/trace.pftrace\n")
        }
    }

    /// The events of each thread a snapshot reads: its most recent. The recorder's whole window (up to 349,440 events
    /// at its default total, since its memory follows the busy threads) made a snapshot take over a second of CPU on
    /// every refresh (`katana-bench micro --backend flight-recorder --only inspector`); a dump and the page's
    /// trace.pftrace still take the whole window.
    static let eventsPerThread = 4_096

    /// The snapshot's JSON: made at most once per refresh interval, whoever asks.
    func snapshotJSON() -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        let now = ContinuousClock.now
        if let cached, now - cached.at < configuration.refresh { return cached.bytes }
        var snapshot: Snapshot
        if configuration.flightRecorder {
            let (events, copied) = FlightRecorder.shared.recentEvents(newestPerThread: Self.eventsPerThread)
            snapshot = Snapshot.make(events: events, now: copied, counts: FlightRecorder.shared.counts, recorder: true,
                                     metrics: configuration.metrics, rows: configuration.rows, takenAt: Self.epochMilliseconds())
        } else {
            snapshot = Snapshot.make(events: [], now: 0, counts: (0, 0), recorder: false, metrics: configuration.metrics,
                                     rows: configuration.rows, takenAt: Self.epochMilliseconds())
        }
        if let state {
            snapshot.state = Snapshot.StateView(shown: true, value: EncodedState(value: state()))
        }
        if configuration.flightRecorder { snapshot.links["trace"] = configuration.path + "/trace.pftrace" }
        if let metricsPath = configuration.metricsPath { snapshot.links["metrics"] = metricsPath }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var bytes: [UInt8]
        do {
            bytes = Array(try encoder.encode(snapshot))
        } catch {
            // The app's state would not encode (a non-finite number, say): the rest is shown, and why not the state.
            snapshot.state = Snapshot.StateView(shown: true, error: "the state could not be encoded: \(error)")
            bytes = (try? encoder.encode(snapshot)).map(Array.init) ?? Array("{}".utf8)
        }
        cached = (bytes, now)
        return bytes
    }

    /// Server-sent events: the snapshot every refresh interval, while the client reads. At most `maxStreams` at
    /// once: the place is taken here and given back when the stream ends or is dropped unrun.
    private func events() -> Response {
        guard let place = Place(self) else {
            return Self.text(503, "too many live pages (\(configuration.maxStreams)); try again later\n", extra: [("Retry-After", "5")])
        }
        let refresh = configuration.refresh, longest = configuration.maxStreamDuration
        return Response(status: 200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store")],
                        body: .stream({ [weak self] write in
            defer { place.release() }
            let deadline = ContinuousClock.now + longest
            // The first frame also tells the browser to reconnect a second after the stream ends.
            var prefix = Array("retry: 1000\ndata: ".utf8)
            while !Task.isCancelled, ContinuousClock.now < deadline, let inspector = self {
                do {
                    try await write(prefix + inspector.snapshotJSON() + Array("\n\n".utf8))
                    try await Task.sleep(for: refresh)
                } catch {
                    return  // the client went (or the server is stopping)
                }
                prefix = Array("data: ".utf8)
            }
        }))
    }

    /// One live stream's place, given back when the stream ends, or when its body is released unrun.
    private final class Place: @unchecked Sendable {
        private let inspector: Inspector
        private var held = true  // guarded by the inspector's lock
        init?(_ inspector: Inspector) {
            let admitted = inspector.lock.withLock {
                guard inspector.streams < inspector.configuration.maxStreams else { return false }
                inspector.streams += 1
                return true
            }
            guard admitted else { return nil }
            self.inspector = inspector
        }

        func release() {
            inspector.lock.withLock {
                if held { inspector.streams -= 1 }
                held = false
            }
        }

        deinit { release() }
    }

    /// Live streams open now.
    public var openStreams: Int { lock.withLock { streams } }

    /// The flight recorder's window as a Perfetto trace (`katana-trace export`'s format), one at a time.
    private func trace() -> Response {
        guard configuration.flightRecorder else { return Self.text(404, "the flight recorder is not read by this inspector\n") }
        let admitted = lock.withLock {
            guard !exporting else { return false }
            exporting = true
            return true
        }
        guard admitted else { return Self.text(503, "a trace is being exported; try again in a moment\n", extra: [("Retry-After", "1")]) }
        defer { lock.withLock { exporting = false } }
        do {
            let bytes = try Self.perfetto(FlightRecorder.shared.recentEvents().events)
            let name = "katana-\(Self.epochMilliseconds() / 1000).pftrace"
            return Response(status: 200, headers: [("Content-Type", "application/octet-stream"),
                                                   ("Content-Disposition", "attachment; filename=\"\(name)\""),
                                                   ("Cache-Control", "no-store")],
                            body: .bytes(Array(bytes)))
        } catch {
            return Self.text(500, "the window could not be exported: \(error)\n")
        }
    }

    /// `events` as a Perfetto file's bytes, through the toolkit's export (which writes a file: a temporary one).
    package static func perfetto(_ events: [FlightRecorder.Event]) throws -> [UInt8] {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("katana-inspector-\(getpid())-\(UUID().uuidString).pftrace")
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try Export.perfetto(events: traceEvents(events), to: file.path)
        return Array(try Data(contentsOf: file))
    }

    /// The recorder's events as the toolkit's, in timestamp order.
    package static func traceEvents(_ events: [FlightRecorder.Event]) -> [TraceEvent] {
        let pid = Int64(getpid())
        let process = ProcessInfo.processInfo.processName
        return events.sorted { $0.timestamp < $1.timestamp }.map { event in
            let (role, name): (TraceEvent.Role, String) = switch event.what {
            case .enqueue: (.enqueue, "dispatch_enqueue")
            case .begin: (.begin, "dispatch_begin")
            case .end: (.end, "dispatch_end")
            case .updaterInline: (.updaterInline, "updater_inline")
            case .budgetExceeded: (.budgetExceeded, "budget_exceeded")
            case .intervalBegin: (.intervalBegin, "interval_begin")
            case .intervalEnd: (.intervalEnd, "interval_end")
            case .transitionBegin: (.transitionBegin, "transition_begin")
            case .transitionEnd: (.transitionEnd, "transition_end")
            case .storeReady: (.other, "store_ready")
            case .listenersNotified: (.other, "listeners_notified")
            }
            let budget = event.what == .budgetExceeded
            return TraceEvent(
                role: role, event: name, timestamp: Int64(clamping: event.timestamp), id: event.id,
                parentID: budget || event.parentID == 0 ? nil : event.parentID, name: event.name,
                kind: event.kind?.description, queue: event.route?.description, outcome: event.outcome?.description,
                parallelism: event.what == .begin || event.what == .updaterInline ? Int64(event.count) : nil,
                durationNanoseconds: event.what == .updaterInline ? event.value : 0,
                budgetNanoseconds: budget ? event.value : 0, actualNanoseconds: budget ? event.parentID : 0,
                vpid: pid, vtid: Int64(event.thread), procname: process)
        }
    }

    private static func text(_ status: Int, _ message: String, extra: [(name: String, value: String)] = []) -> Response {
        Response(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + extra, body: .bytes(Array(message.utf8)))
    }

    private static func epochMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}
