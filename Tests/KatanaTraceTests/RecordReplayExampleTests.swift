import Foundation
import KatanaTestSupport
import Testing

/// Issue #42, point 4: the order service's own traffic, recorded by `order-service --record`, replayed by the shop's
/// bench (`order-bench replay`) at the recorded pace and flat out; `--verify` passes, and an updater changed in the
/// bench (ORDER_BENCH_CHANGE=record-payment books twice the amount) fails it, naming the item. Among the LTTng
/// recording tests, serialized with them: order-service links LTTng, and its dispatches would land in a session
/// another test records (the ones that count the order service's events).
extension LTTngRecordingTests {
    @Test func theOrderServicesTrafficReplaysInItsBenchAndVerifies() async throws {
        let service = try await ExampleBuilds.shared.executable("order-service", of: "OrderService")
        let bench = try await ExampleBuilds.shared.executable("order-bench", of: "OrderService")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("record-replay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("orders.jsonl").path

        let recorded = try await runProcessSuspending(service, ["--orders", "300", "--concurrency", "8", "--record", log, "--checkpoint-every", "100"])
        try #require(recorded.status == 0, "\(recorded.err)")
        #expect(recorded.out.contains("300 orders in") && recorded.out.contains("recorded: \(log)"), "\(recorded.out)")
        // What the log holds: every updater (by type) and the side effects, ending complete with the final state.
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
        let updaters = lines.filter { $0.contains(#""kind":"updater""#) }
        #expect(updaters.filter { $0.contains(#""type":"OrderProcessing.PlaceOrder""#) }.count == 300)
        #expect(lines.last?.hasPrefix(#"{"end":"complete","final_state":"#) == true)
        let firstPayment = try #require(updaters.first { $0.contains(#""type":"OrderProcessing.RecordPayment""#) })
        let paymentSequence = try #require(firstPayment.firstMatch(of: /"seq":(\d+)/)?.1)
        let paymentLine = try #require(lines.firstIndex(of: firstPayment)) + 1

        for pace in ["recorded", "flat-out"] {
            let json = directory.appendingPathComponent("\(pace).json").path
            let replay = try await runProcessSuspending(bench, ["replay", log, "--pace", pace, "--verify", "--json", json, "--trace-backend", "none"])
            #expect(replay.status == 0, "\(pace): \(replay.err)")
            #expect(replay.err.contains("verify: passed: the replay ends in the recorded final state and matched all"), "\(pace): \(replay.err)")
            #expect(replay.out.contains("replay.RecordPayment") && replay.out.contains("replay.ReserveStock"), "\(replay.out)")
            let result = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any])
            let metrics = try #require(result["metrics"] as? [String: [String: Any]])
            #expect(metrics["replay.end_to_end"]?["count"] as? Int == updaters.count, "every updater replayed and timed")
            #expect((result["parameters"] as? [String: Any])?["pace"] as? String == pace)
        }
        // The gate's input: a replay result compares as any katana-bench result.
        let flatOut = directory.appendingPathComponent("flat-out.json").path
        #expect(try await runProcessSuspending(bench, ["compare", flatOut, flatOut]).status == 0)

        let changed = try await runProcessSuspending(bench, ["replay", log, "--verify", "--trace-backend", "none"],
                                                     environment: ProcessInfo.processInfo.environment.merging(["ORDER_BENCH_CHANGE": "record-payment"]) { $1 })
        #expect(changed.status == 1, "\(changed.err)")
        #expect(changed.err.contains("verify: FAILED: the replayed state differs from the checkpoint after item"), "\(changed.err)")
        #expect(changed.err.contains("item \(paymentSequence), OrderProcessing.RecordPayment (log line \(paymentLine))"), "\(changed.err)")
        #expect(changed.err.contains("differs: revenueCents: recorded"), "\(changed.err)")
    }
}
