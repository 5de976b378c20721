import Dispatch
import Foundation
import Katana
import KatanaFlightRecorder
import KatanaInspector
import KatanaMetrics
import KatanaTestSupport
import KatanaTrace
import Testing

struct Counter: State, Encodable {
    var orders = 0
    var customer = "Ada Lovelace"
    var cardNumber = "4111 1111 1111 1111"
}
typealias CounterStore = Store<Counter, EmptySideEffectDependencyContainer>

/// Takes about 20 ms: in the ≥10 ms row.
struct ReserveSlowly: StateUpdater {
    func updateState(_ state: inout Counter) {
        Thread.sleep(forTimeInterval: 0.02)
        state.orders += 1
    }
}

struct DeclineCard: ThrowingStateUpdater {
    struct Declined: Error {}
    func updateState(_ state: inout Counter) throws { throw Declined() }
}

/// Queued behind `HoldsTheLane` by the download test: a type of its own, so the page test's `ReserveSlowly` rows hold
/// only its own (parented) dispatches, the two tests sharing the process's flight recorder.
struct ReserveBehind: StateUpdater {
    func updateState(_ state: inout Counter) { state.orders += 1 }
}

/// Holds the updater lane (inside `updateState`) until released.
struct HoldsTheLane: StateUpdater {
    let started: DispatchSemaphore, release: DispatchSemaphore
    func updateState(_ state: inout Counter) {
        started.signal()
        release.wait()
    }
}

/// Types of their own for the listener-count test (the process's flight recorder is shared with the other tests):
/// one applied on the dispatching thread, one refused there, one through an interceptor.
struct TallyInline: StateUpdater {
    func updateState(_ state: inout Counter) { state.orders += 1 }
}
struct RefuseInline: ThrowingStateUpdater {
    struct Refused: Error {}
    func updateState(_ state: inout Counter) throws { throw Refused() }
}
struct TallyIntercepted: StateUpdater {
    func updateState(_ state: inout Counter) { state.orders += 1 }
}
struct TallyQueued: StateUpdater {
    func updateState(_ state: inout Counter) { state.orders += 1 }
}
struct TallyForAnExecutor: StateUpdater {
    func updateState(_ state: inout Counter) { state.orders += 1 }
}

/// Reserves slowly, then has its card declined: a slow child and a failed child, both with this as parent.
struct Checkout: SideEffect {
    func sideEffect(_ context: SideEffectContext<Counter, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(ReserveSlowly()).value
        _ = try? await context.dispatch(DeclineCard()).value
    }
}

/// Runs until the test lets it go, from inside a parent: in flight with a parent chain.
struct AwaitCourier: SideEffect {
    let release: AsyncStream<Void>
    func sideEffect(_ context: SideEffectContext<Counter, EmptySideEffectDependencyContainer>) async throws {
        for await _ in release { return }
    }
}

struct ShipOrder: SideEffect {
    let release: AsyncStream<Void>
    func sideEffect(_ context: SideEffectContext<Counter, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(AwaitCourier(release: release)).value
    }
}

private func json(_ response: Inspector.Response) throws -> [String: Any] {
    guard case .bytes(let bytes) = response.body else { throw Failure("the snapshot is not a body") }
    return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
}

private struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

private func name(_ type: Any.Type) -> String { String(reflecting: type) }

/// Whether a dispatch's first parent is `type`'s dispatch: its id always (the child's own event carries it), its name
/// while that parent's events are still in the window (other suites' dispatches on the same threads can push a
/// parent's older events out of its thread's ring: then the page shows the id alone, and so must this).
private func parent(of dispatch: [String: Any], is type: Any.Type) -> Bool {
    guard let first = (dispatch["parents"] as? [[String: Any]])?.first, first["id"] is Int else { return false }
    return first["name"] == nil || first["name"] as? String == name(type)
}

private func header(_ response: Inspector.Response, _ name: String) -> String? {
    response.headers.first { $0.name.lowercased() == name.lowercased() }?.value
}

@Suite struct KatanaInspectorTests {
    /// Per type: its count in the latency rows and by outcome; the slowest and the failed with their parent and
    /// times; a side effect in flight with its age and parent chain; the recent updaters with their listeners.
    @Test func thePageShowsTypesSlowestFailedAndInFlightWithTheirParents() async throws {
        let metrics = try DispatchMetrics(.init(exportInterval: nil))
        let store = CounterStore(stateInitializer: { Counter() }, configuration: .init(traceBackend: metrics.alongside(FlightRecorder.shared)))
        for _ in 0..<3 { try await store.dispatch(Checkout()).value }
        let (release, letGo) = AsyncStream.makeStream(of: Void.self)
        let shipping = store.dispatch(ShipOrder(release: release))
        // Every row of the window: the flight recorder is the process's, and the suites beside this one fill it too.
        let inspector = Inspector(.init(metrics: metrics, refresh: .zero, rows: 100_000))
        #expect(await eventually {
            let snapshot = try? json(inspector.respond(method: "GET", path: "/debug/katana/snapshot.json"))
            return (snapshot?["in_flight"] as? [[String: Any]])?.contains { $0["name"] as? String == name(AwaitCourier.self) } == true
        })
        let snapshot = try json(inspector.respond(method: "GET", path: "/debug/katana/snapshot.json"))
        letGo.yield()
        try await shipping.value

        #expect(snapshot["counts_from"] as? String == "metrics")
        let types = try #require(snapshot["types"] as? [[String: Any]])
        let reserve = try #require(types.first { $0["name"] as? String == name(ReserveSlowly.self) })
        #expect(reserve["count"] as? Int == 3)
        let rows = try #require(reserve["buckets"] as? [Int])
        #expect(rows.count == 8 && rows[5] == 3, "three 20 ms updaters in the ≥10 ms row: \(rows)")
        #expect((reserve["outcomes"] as? [String: Int])?["ok"] == 3)
        let decline = try #require(types.first { $0["name"] as? String == name(DeclineCard.self) })
        #expect((decline["outcomes"] as? [String: Int])?["error"] == 3)

        let slowest = try #require(snapshot["slowest"] as? [[String: Any]])
        let slow = try #require(slowest.first { $0["name"] as? String == name(ReserveSlowly.self) }, "\(slowest)")
        #expect((slow["service_nanoseconds"] as? Int ?? 0) >= 20_000_000)
        #expect(slow["queue_wait_nanoseconds"] is Int)
        #expect(parent(of: slow, is: Checkout.self))

        let failed = try #require(snapshot["failed"] as? [[String: Any]])
        let declined = try #require(failed.first { $0["name"] as? String == name(DeclineCard.self) }, "\(failed)")
        #expect(declined["outcome"] as? String == "error")
        #expect(parent(of: declined, is: Checkout.self))

        let inFlight = try #require(snapshot["in_flight"] as? [[String: Any]])
        let courier = try #require(inFlight.first { $0["name"] as? String == name(AwaitCourier.self) })
        #expect(courier["status"] as? String == "running")
        #expect((courier["age_nanoseconds"] as? Int ?? -1) >= 0)
        #expect((courier["parents"] as? [[String: Any]])?.count == 1 && parent(of: courier, is: ShipOrder.self))

        let updaters = try #require(snapshot["updaters"] as? [[String: Any]])
        let applied = try #require(updaters.first { $0["name"] as? String == name(ReserveSlowly.self) })
        #expect(applied["changed"] as? Bool == true)
        #expect(updaters.first { $0["name"] as? String == name(DeclineCard.self) }?["changed"] as? Bool == false)
        #expect((snapshot["links"] as? [String: String])?["trace"] == "/debug/katana/trace.pftrace")
    }

    /// An updater applied on the dispatching thread hands its change to the listeners before its one trace event:
    /// the page shows how many, from that event — recorded directly into the flight recorder, through a multiplex
    /// beside the metrics, and after an interceptor; none for an updater that threw (no change).
    @Test func theRecentUpdatersShowHowManyListenersTheirChangeReached() async throws {
        let metrics = try DispatchMetrics(.init(exportInterval: nil))
        let direct = CounterStore(stateInitializer: { Counter() }, configuration: .init(traceBackend: FlightRecorder.shared))
        let beside = CounterStore(stateInitializer: { Counter() }, configuration: .init(traceBackend: metrics.alongside(FlightRecorder.shared)))
        let intercepted = CounterStore(interceptors: [{ _ in { next in { try next($0) } } }], stateInitializer: { Counter() },
                                       configuration: .init(traceBackend: FlightRecorder.shared))
        // Listeners on an executor of their own: told after the updater's event, in a batch of one.
        let executor = CounterStore(stateInitializer: { Counter() },
                                    configuration: .init(listenerExecutor: .custom { $0() }, traceBackend: FlightRecorder.shared))
        for (store, count) in [(direct, 2), (beside, 3), (intercepted, 1), (executor, 4)] {
            for _ in 0..<count { store.addListener { _, _ in } }
        }
        // On threads of their own: the flight recorder's ring is per thread, and a pool thread's would also hold
        // whatever other suites run on it before the window is read.
        let last = await onThread { () -> DispatchHandle<Void> in
            direct.dispatch(TallyInline())
            direct.dispatch(RefuseInline())
            beside.dispatch(TallyInline())
            intercepted.dispatch(TallyIntercepted())
            executor.dispatch(TallyForAnExecutor())
            // Three queued behind an updater that holds the lane: its holder applies them in chunks of 1 and 2
            // (`helpDrain`), and each chunk's listeners' event covers every change in it.
            let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            Thread { direct.dispatch(HoldsTheLane(started: started, release: release)) }.start()
            started.wait()
            direct.dispatch(TallyQueued())
            direct.dispatch(TallyQueued())
            let last = direct.dispatch(TallyQueued())
            release.signal()
            return last
        }
        try await last.value

        let inspector = Inspector(.init(refresh: .zero, rows: 100_000))
        let snapshot = try json(inspector.respond(method: "GET", path: "/debug/katana/snapshot.json"))
        let updaters = try #require(snapshot["updaters"] as? [[String: Any]])
        let tallies = updaters.filter { $0["name"] as? String == name(TallyInline.self) }.compactMap { $0["listeners"] as? Int }
        #expect(tallies.sorted() == [2, 3], "\(updaters.filter { $0["name"] as? String == name(TallyInline.self) })")
        let refused = try #require(updaters.first { $0["name"] as? String == name(RefuseInline.self) })
        #expect(refused["listeners"] as? Int == 0 && refused["changed"] as? Bool == false, "\(refused)")
        let through = try #require(updaters.first { $0["name"] as? String == name(TallyIntercepted.self) })
        #expect(through["listeners"] as? Int == 1, "\(through)")
        let onExecutor = try #require(updaters.first { $0["name"] as? String == name(TallyForAnExecutor.self) })
        #expect(onExecutor["listeners"] as? Int == 4, "\(onExecutor)")
        let queued = updaters.filter { $0["name"] as? String == name(TallyQueued.self) }
        #expect(queued.count == 3 && queued.allSatisfy { $0["listeners"] as? Int == 2 }, "\(queued)")
    }

    /// The state is not shown until the app enables it, and then only as its redaction closure gives it.
    @Test func theStateIsShownOnlyWhenEnabledAndRedacted() throws {
        let store = CounterStore(stateInitializer: { Counter() })
        let inspector = Inspector(.init(refresh: .zero))
        let hidden = try json(inspector.respond(method: "GET", path: "/debug/katana/snapshot.json"))
        #expect((hidden["state"] as? [String: Any])?["shown"] as? Bool == false)
        #expect((hidden["state"] as? [String: Any])?["value"] == nil)
        inspector.showState {
            var state = store.state
            state.cardNumber = "redacted"
            return state
        }
        let shown = try json(inspector.respond(method: "GET", path: "/debug/katana/snapshot.json"))
        let value = try #require((shown["state"] as? [String: Any])?["value"] as? [String: Any])
        #expect(value["customer"] as? String == "Ada Lovelace")
        #expect(value["cardNumber"] as? String == "redacted")
        guard case .bytes(let page) = inspector.respond(method: "GET", path: "/debug/katana").body else { throw Failure("no page") }
        #expect(!String(decoding: page, as: UTF8.self).contains("4111"))
    }

    /// Nothing on it changes anything: only GET and HEAD; an unknown path is a 404 naming the real ones.
    @Test func itOnlyReads() {
        let inspector = Inspector()
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            let response = inspector.respond(method: method, path: "/debug/katana")
            #expect(response.status == 405)
            #expect(header(response, "Allow") == "GET, HEAD")
        }
        #expect(inspector.respond(method: "GET", path: "/debug/katana/../../etc/passwd").status == 404)
        #expect(inspector.respond(method: "GET", path: "/debug/katana?x=1").status == 200)
        #expect(header(inspector.respond(method: "GET", path: "/debug/katana/"), "Content-Type")?.hasPrefix("text/html") == true)
    }

    /// Live streams are bounded: one past the limit is refused until one ends; each carries snapshots as SSE frames.
    @Test func liveStreamsAreBoundedAndCarrySnapshots() async throws {
        let inspector = Inspector(.init(refresh: .milliseconds(10), maxStreams: 2))
        let first = inspector.respond(method: "GET", path: "/debug/katana/events")
        let second = inspector.respond(method: "GET", path: "/debug/katana/events")
        #expect(first.status == 200 && second.status == 200)
        #expect(header(first, "Content-Type") == "text/event-stream")
        let third = inspector.respond(method: "GET", path: "/debug/katana/events")
        #expect(third.status == 503)
        #expect(header(third, "Retry-After") != nil)
        guard case .stream(let run) = first.body else { throw Failure("not a stream") }
        // A client that takes three frames and then goes: the write fails, as a server's does then.
        struct Gone: Error {}
        let seen = Locked<[String]>([])
        await run { frame in
            let count = seen.withLock { $0.append(String(decoding: frame, as: UTF8.self)); return $0.count }
            if count == 3 { throw Gone() }
        }
        let frames3 = seen.withLock { $0 }
        #expect(frames3.count == 3)
        #expect(frames3[0].hasPrefix("retry: 1000\ndata: {"))
        #expect(frames3[1].hasPrefix("data: {") && frames3[1].hasSuffix("}\n\n"))
        // The first stream's reader left: its place is free again.
        #expect(await eventually { inspector.openStreams == 1 })
        #expect(inspector.respond(method: "GET", path: "/debug/katana/events").status == 200)
        // A stream dropped without being run (a server that failed before the body) gives its place back too.
        _ = inspector.respond(method: "GET", path: "/debug/katana/events")
        #expect(await eventually { inspector.openStreams == 1 })
    }

    /// A stream ends by itself after its longest duration (the browser reconnects).
    @Test func aStreamEndsAfterItsLongestDuration() async throws {
        let inspector = Inspector(.init(refresh: .milliseconds(5), maxStreamDuration: .milliseconds(50)))
        guard case .stream(let run) = inspector.respond(method: "GET", path: "/debug/katana/events").body else { throw Failure("not a stream") }
        let count = Locked(0)
        await run { _ in count.withLock { $0 += 1 } }
        // It returned by itself, the client still reading: it ended at its longest duration, having sent at least one.
        #expect(count.withLock { $0 } >= 1)
        #expect(await eventually { inspector.openStreams == 0 })
    }

    /// The window as a Perfetto file, checked with Perfetto's own schema against the same window's dispatches; and
    /// the download route serves it as an attachment.
    @Test func theWindowDownloadsAsAPerfettoTrace() async throws {
        let store = CounterStore(stateInitializer: { Counter() }, configuration: .init(traceBackend: FlightRecorder.shared))
        for _ in 0..<2 { try await store.dispatch(Checkout()).value }
        // One updater still queued when the window is taken (behind one that holds the lane): its dispatch call's
        // flow must still end in the file (it ended nowhere before: check_perfetto.py failed on a CI rehearsal).
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        Thread { store.dispatch(HoldsTheLane(started: started, release: release)) }.start()
        started.wait()
        let queued = store.dispatch(ReserveBehind())
        let events = FlightRecorder.shared.recentEvents().events
        release.signal()
        try await queued.value
        let bytes = try Inspector.perfetto(events)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("katana-inspector-test-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(at: file.appendingPathExtension("pftrace"))
            try? FileManager.default.removeItem(at: file.appendingPathExtension("jsonl"))
        }
        try Data(bytes).write(to: file.appendingPathExtension("pftrace"))
        // The dispatches that begin in the window, as `katana-trace dump` lists them.
        let pid = Int(getpid())
        let lines = events.compactMap { event -> String? in
            guard event.what == .begin || event.what == .updaterInline, let type = event.name else { return nil }
            let record: [String: Any] = ["event": event.what == .begin ? "dispatch_begin" : "updater_inline", "vpid": pid,
                                         "id": event.id, "name": type]
            return String(decoding: try! JSONSerialization.data(withJSONObject: record), as: UTF8.self)
        }
        #expect(lines.contains { $0.contains(name(ReserveSlowly.self)) })
        try Data(lines.joined(separator: "\n").utf8).write(to: file.appendingPathExtension("jsonl"))
        let script = packageRoot.appendingPathComponent("traces/check_perfetto.py").path
        let checked = try runProcess(URL(fileURLWithPath: "/usr/bin/env"),
                                     ["python3", script, file.appendingPathExtension("pftrace").path, file.appendingPathExtension("jsonl").path])
        #expect(checked.status == 0, "\(checked.out)\(checked.err)")

        let download = Inspector().respond(method: "GET", path: "/debug/katana/trace.pftrace")
        #expect(download.status == 200)
        #expect(header(download, "Content-Disposition")?.hasPrefix("attachment; filename=\"katana-") == true)
        guard case .bytes(let served) = download.body else { throw Failure("no body") }
        #expect(served.count > 100)
    }
}

private let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A value shared between a test and the task it watches (NSLock: ThreadSanitizer sees it).
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
