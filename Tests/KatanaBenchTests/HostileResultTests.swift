import Foundation
import Histogram
import KatanaTestSupport
import Testing
@testable import KatanaBenchCore

/// Results `merge` and `compare` must refuse with one line (exit 2) rather than fail late, trap or write garbage:
/// figures past what katana-bench writes, and histograms it did not write (issue #36 rows 4 and 5).
@Suite struct HostileResultTests {
    /// A katana-bench result with its encoded histograms, as `run --json` writes it.
    static func realResult() -> BenchResult {
        var histogram = makeHistogram()
        for value in [UInt64](repeating: 1_000, count: 98) + [50_000, 50_000] { _ = histogram.record(value) }
        var result = BenchResult.combining([result(p99: 50_000, throughput: 1_000)], repetitions: [
            .init(durationSeconds: 1, throughput: ["top_level_per_second": 1_000],
                  metrics: ["side_effect.end_to_end": MetricSummary(histogram)],
                  histograms: ["side_effect.end_to_end": HistogramEncoding.encode(histogram)]),
        ], histograms: ["side_effect.end_to_end": histogram])
        result.context = nil
        return result
    }

    /// Writes `results` into a fresh folder; returns their paths and the folder.
    static func write(_ results: [BenchResult]) throws -> (paths: [String], directory: URL) {
        let directory = try temporaryDirectory()
        let paths = try results.enumerated().map { index, result in
            let path = directory.appendingPathComponent("r\(index).json").path
            try Report.writeJSON(result, to: path)
            return path
        }
        return (paths, directory)
    }

    /// One line on stderr, exit 2, nothing written.
    static func expectRefused(_ outcome: (status: Int32, out: String, err: String), mentioning parts: [String],
                              sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(outcome.status == 2, "exit \(outcome.status): \(outcome.err)", sourceLocation: sourceLocation)
        let lines = outcome.err.split(separator: "\n")
        #expect(lines.count == 1, "one line, not \(lines.count): \(outcome.err)", sourceLocation: sourceLocation)
        for part in parts { #expect(outcome.err.contains(part), "\(part) not in: \(outcome.err)", sourceLocation: sourceLocation) }
    }

    // Row 4: durations or throughputs whose sum or median passes the largest Double.
    @Test(arguments: ["durationSeconds", "throughput"])
    func figuresPastWhatKatanaBenchWritesAreRefusedNamingFieldAndFile(_ field: String) async throws {
        var huge = Self.realResult()
        if field == "durationSeconds" {
            huge.durationSeconds = .greatestFiniteMagnitude
            huge.repetitions![0].durationSeconds = .greatestFiniteMagnitude
        } else {
            huge.throughput["top_level_per_second"] = .greatestFiniteMagnitude
            huge.repetitions![0].throughput["top_level_per_second"] = .greatestFiniteMagnitude
        }
        let (paths, directory) = try Self.write([Self.realResult(), huge, huge])
        defer { try? FileManager.default.removeItem(at: directory) }
        let merged = directory.appendingPathComponent("merged.json").path
        Self.expectRefused(try await bench(["merge", paths[1], paths[2], "-o", merged]), mentioning: [paths[1], field])
        #expect(!FileManager.default.fileExists(atPath: merged))
        Self.expectRefused(try await bench(["compare", paths[0], paths[1]]), mentioning: [paths[1], field])
    }

    @Test func aHugeLatencyOrCountIsRefused() throws {
        var result = Self.realResult()
        result.metrics["side_effect.end_to_end"]!.p99 = .max
        #expect(result.firstOutOfRange()?.contains("metrics.side_effect.end_to_end.p99") == true)
        result = Self.realResult()
        result.repetitions![0].metrics["side_effect.end_to_end"]!.count = .max
        #expect(result.firstOutOfRange()?.contains("repetitions[0].metrics.side_effect.end_to_end.count") == true)
        #expect(Self.realResult().firstOutOfRange() == nil)
    }

    /// A valid compressed HdrHistogram V2 encoding with any header (no counts).
    static func encoding(lowest: UInt64, highest: UInt64, digits: UInt32) -> String {
        var bytes: [UInt8] = []
        func put32(_ value: UInt32) { bytes += withUnsafeBytes(of: value.bigEndian, Array.init) }
        func put64(_ value: UInt64) { bytes += withUnsafeBytes(of: value.bigEndian, Array.init) }
        put32(HistogramEncoding.cookie); put32(0); put32(0); put32(digits)
        put64(lowest); put64(highest); put64((1.0).bitPattern)
        let stream = HistogramEncoding.zlibStored(bytes)
        var outer: [UInt8] = []
        outer += withUnsafeBytes(of: HistogramEncoding.compressedCookie.bigEndian, Array.init)
        outer += withUnsafeBytes(of: UInt32(stream.count).bigEndian, Array.init)
        return Data(outer + stream).base64EncodedString()
    }

    // Row 5: valid HdrHistogram V2, not katana-bench's layout: SIGILL inside HdrHistogram's `add`, or an overflow
    // of `2 * lowest` while decoding.
    @Test(arguments: ["another layout", "a value past 60 s", "lowest 2^63"])
    func histogramsNotWrittenByKatanaBenchAreRefusedNotTrapped(_ kind: String) async throws {
        var foreign = Self.realResult()
        let text: String
        switch kind {
        case "another layout":
            var histogram = LatencyHistogram(lowestDiscernibleValue: 1_000, highestTrackableValue: 3_600_000_000_000,
                                             numberOfSignificantValueDigits: .two)
            _ = histogram.record(5_000)
            text = HistogramEncoding.encode(histogram)
        case "a value past 60 s":
            var histogram = LatencyHistogram(lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000_000,
                                             numberOfSignificantValueDigits: .three)
            _ = histogram.record(120_000_000_000)
            text = HistogramEncoding.encode(histogram)
        default:
            text = Self.encoding(lowest: 1 << 63, highest: UInt64.max / 2, digits: 3)
            #expect(throws: HistogramEncoding.Failure.self) { try HistogramEncoding.decode(text) }
        }
        foreign.histograms!["side_effect.end_to_end"] = text
        let (paths, directory) = try Self.write([Self.realResult(), foreign])
        defer { try? FileManager.default.removeItem(at: directory) }
        let merged = directory.appendingPathComponent("merged.json").path
        Self.expectRefused(try await bench(["merge", paths[0], paths[1], "-o", merged]),
                           mentioning: [paths[1], "side_effect.end_to_end"])
        #expect(!FileManager.default.fileExists(atPath: merged))
    }
}

/// Outputs checked as the user who runs the command, before the run (issue #36 row 6).
@Suite struct OutputPermissionTests {
    /// katana-bench, copied where any user can run it (a clone made with `mktemp -d` is private to its owner).
    static func sharedCopyOfKatanaBench() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("katana-bench-shared-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let copy = directory.appendingPathComponent("katana-bench")
        try FileManager.default.copyItem(at: katanaBench, to: copy)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: copy.path)
        return copy
    }

    static let setpriv = URL(fileURLWithPath: "/usr/bin/setpriv")
    static var canRunAsNobody: Bool { getuid() == 0 && FileManager.default.isExecutableFile(atPath: setpriv.path) }

    @Test(.enabled(if: canRunAsNobody, "needs root and setpriv(1) to run katana-bench as the user nobody"),
          arguments: [0o644, 0o666])
    func anotherUsersFileInAStickyDirectoryIsRefusedBeforeTheRun(mode: Int) async throws {
        let bench = try Self.sharedCopyOfKatanaBench()
        defer { try? FileManager.default.removeItem(at: bench.deletingLastPathComponent()) }
        let sticky = FileManager.default.temporaryDirectory.appendingPathComponent("katana-sticky-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: sticky, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: sticky) }
        try FileManager.default.setAttributes([.posixPermissions: 0o1777], ofItemAtPath: sticky.path)
        let taken = sticky.appendingPathComponent("taken.json")
        try Data("{}".utf8).write(to: taken)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: taken.path)
        let outcome = try await runProcessSuspending(Self.setpriv, [
            "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", bench.path,
            "run", "--duration", "30", "--warmup", "0", "--trace-backend", "none", "--json", taken.path,
        ])
        #expect(outcome.status == 2, "exit \(outcome.status): \(outcome.err)")
        #expect(outcome.err.contains(taken.path) && outcome.err.contains("cannot write"), "\(outcome.err)")
        // The run prints its table before writing --json: an empty stdout means nothing was measured.
        #expect(outcome.out.isEmpty, "nothing is measured for an output that cannot be written: \(outcome.out)")
        #expect(try String(contentsOf: taken, encoding: .utf8) == "{}")

        // A file of its own in the same directory is fine.
        let own = sticky.appendingPathComponent("own.json").path
        let ok = try await runProcessSuspending(Self.setpriv, [
            "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", bench.path,
            "run", "--count", "200", "--warmup", "0", "--trace-backend", "none", "--json", own,
        ])
        #expect(ok.status == 0, "\(ok.err)")
        #expect(FileManager.default.fileExists(atPath: own))
    }
}
