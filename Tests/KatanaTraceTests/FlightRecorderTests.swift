import Foundation
import Katana
import KatanaFlightRecorder
import KatanaTestSupport
import KatanaTrace
import Testing

/// The in-process flight recorder: what a store records into it comes back, whole, through a dump that
/// `katana-trace` (and babeltrace2) read.
@Suite struct FlightRecorderTests {
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
}
