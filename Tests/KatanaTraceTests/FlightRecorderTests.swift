import Foundation
import Katana
import KatanaFlightRecorder
import KatanaTestSupport
import KatanaTrace
import Testing

/// The in-process flight recorder: what a store records into it comes back, whole, through a dump that
/// `katana-trace` (and babeltrace2) read. Serialized, with rings that hold every test's events: `check` then finds
/// every dispatch of a dump whole (none in flight, none cut by a ring's wrap).
@Suite(.serialized) struct FlightRecorderTests {
    init() {
        FlightRecorder.configure(totalBytes: 64 << 20, bytesPerThread: 4 << 20)
    }

    @Test func aDumpIsATraceTheToolkitReadsWithEveryDispatchWhole() async throws {
        let store = TraceStore(interceptors: [], stateInitializer: { TraceState() },
                               configuration: .init(traceBackend: FlightRecorder.shared))
        for _ in 0..<200 { try await store.dispatch(BumpTwice()).value }
        for _ in 0..<300 { store.dispatch(Bump()) }
        try await store.dispatch(Bump()).value
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-flight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let written = try FlightRecorder.shared.dump(to: folder.path)
        #expect(written >= 200 * 3 + 200 * 2 + 301)

        let checked = try await KatanaTrace.run(["check", folder.path])
        #expect(checked.status == 0, "\(checked.out)\(checked.err)")
        let analyzed = try await KatanaTrace.run(["analyze", "--json", folder.path])
        try #require(analyzed.status == 0, "\(analyzed.err)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(analyzed.out.utf8)) as? [String: Any])
        #expect(report["reader"] as? String == "native")
        let types = (report["types"] as? [[String: Any]]) ?? []
        let sideEffects = types.first { $0["name"] as? String == "KatanaTraceTests.BumpTwice" }
        #expect((sideEffects?["count"] as? Int ?? 0) >= 200, "\(types.map { ($0["name"] ?? "?", $0["count"] ?? 0) })")
        let nesting = (report["nesting"] as? [String: Any])?["children"] as? [[String: Any]] ?? []
        #expect(nesting.contains { $0["parent"] as? String == "KatanaTraceTests.BumpTwice" && $0["child"] as? String == "KatanaTraceTests.Bump" })

        if FileManager.default.isExecutableFile(atPath: "/usr/bin/babeltrace2") {
            let listed = try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/babeltrace2"), [folder.path])
            #expect(listed.status == 0 && listed.out.contains("katana:dispatch_begin"), "\(listed.err.prefix(500))")
        }
        let again = Result { () throws(FlightRecorder.DumpError) in try FlightRecorder.shared.dump(to: folder.path) }
        #expect(throws: FlightRecorder.DumpError.self) { try again.get() }
    }

    /// A dump to a place that cannot take it is an error the app sees, in one line; recording goes on, and the next
    /// dump to a good place works.
    @Test func anUnwritablePlaceIsAnErrorAndRecordingGoesOn() async throws {
        let store = TraceStore(interceptors: [], stateInitializer: { TraceState() },
                               configuration: .init(traceBackend: FlightRecorder.shared))
        try await store.dispatch(Bump()).value
        for place in ["/proc/katana-flight", "/nonexistent/deeper/folder"] {
            #expect(throws: FlightRecorder.DumpError.self) { try FlightRecorder.shared.dump(to: place) }
        }
        do {
            try FlightRecorder.shared.dump(to: "/proc/katana-flight")
        } catch {
            #expect(error.description.contains("/proc/katana-flight") && !error.description.contains("\n"), "\(error)")
        }
        let before = FlightRecorder.shared.counts.recorded
        try await store.dispatch(Bump()).value
        #expect(FlightRecorder.shared.counts.recorded > before)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-flight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(try FlightRecorder.shared.dump(to: folder.path) > 0)
    }

    /// A thread that ended still has its recent events in a dump, under its own thread id.
    @Test func aThreadThatEndedIsStillDumped() async throws {
        let store = TraceStore(interceptors: [], stateInitializer: { TraceState() },
                               configuration: .init(traceBackend: FlightRecorder.shared))
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            // An updater dispatched from a plain thread with nothing queued is applied there, inline.
            for _ in 0..<50 { store.dispatch(Bump()) }
            done.signal()
        }
        thread.start()
        await onThread { done.wait() }
        try await Task.sleep(for: .milliseconds(50))  // let the thread finish exiting
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-flight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        try FlightRecorder.shared.dump(to: folder.path)
        let dumped = try await KatanaTrace.run(["dump", folder.path])
        try #require(dumped.status == 0, "\(dumped.err)")
        // Which threads recorded Bump inline: at least one holds all 50 of this test's (other tests add their own).
        var perThread: [Int: Int] = [:]
        for line in dumped.out.split(separator: "\n") where line.contains("\"updater_inline\"") && line.contains("KatanaTraceTests.Bump\"") {
            guard let event = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let vtid = event["vtid"] as? Int else { continue }
            perThread[vtid, default: 0] += 1
        }
        #expect(perThread.values.contains { $0 >= 50 }, "\(perThread)")
    }

    /// Dumps taken at once, from several threads, while stores keep dispatching: each is a readable trace.
    @Test func concurrentDumpsWhileRecordingAreEachReadable() async throws {
        let store = TraceStore(interceptors: [], stateInitializer: { TraceState() },
                               configuration: .init(traceBackend: FlightRecorder.shared))
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("katana-flight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let folders = (0..<4).map { root.appendingPathComponent("dump\($0)").path }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        async let load: Void = {
            for _ in 0..<2_000 { try await store.dispatch(BumpTwice()).value }
        }()
        let written = await withTaskGroup(of: UInt64.self) { group in
            for folder in folders { group.addTask { (try? FlightRecorder.shared.dump(to: folder)) ?? 0 } }
            return await group.reduce(into: [UInt64]()) { $0.append($1) }
        }
        try await load
        #expect(written.allSatisfy { $0 > 0 }, "\(written)")
        for folder in folders {
            let analyzed = try await KatanaTrace.run(["analyze", "--json", folder])
            #expect(analyzed.status == 0, "\(folder): \(analyzed.err)")
        }
    }
}
