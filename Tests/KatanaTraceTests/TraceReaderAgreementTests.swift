import Foundation
import KatanaFlightRecorder
import KatanaTestSupport
import Testing

/// katana-trace against babeltrace2, the reader LTTng's users trust, on damaged copies of real traces: where
/// babeltrace2 reads a copy, katana-trace reads it too (natively, or through its fallback) and dumps the same events,
/// field for field; where babeltrace2 refuses it, katana-trace refuses it with status 2 and one line, and writes no
/// report. Each case is a seed: the same seed makes the same copy, so a case that ever disagreed is kept below and
/// runs every time. `KATANA_AGREEMENT_CASES` sets how many seeded cases run per trace (a longer campaign).
enum ReaderAgreement {
    /// Seeds that once disagreed, with what the reader did then (all on the sample):
    static let seedsThatDisagreed: [UInt64] = [
        39, 49, 66,  // the metadata cut in its last packet's padding: refused as "packet sizes do not add up"
        89, 1145,  // bytes taken out of the last metadata packet: the same
        67, 1025,  // `signed`/`base` misspelt in an integer: refused as an unknown attribute; babeltrace2 warns and reads
        1004, 1140, 1154, 1176, 1180,  // a kind or outcome without a label: refused as "has no label for N"
        10011,  // `signed = filse`: read as unsigned; babeltrace2 refuses it
        10037, 10088,  // a control character in a name: babeltrace2 prints it as \x1f, which its reader here took for "x1f"
        10055,  // a u64 past 2^63 in a payload field: babeltrace2's reader here took it for a negative number
        10677,  // a clock's uuid damaged: skipped; babeltrace2 refuses it
        10746,  // a packet's UUID damaged: refused; babeltrace2 reads the packet
        11112,  // a tab turned into a vertical tab in the metadata: white space here; babeltrace2's lexer refuses it
        12307,  // `encoding` flipped to `e.coding`: refused ("expected '='"); babeltrace2 reads `a.b = v` as `a = v`
    ]

    /// The seeded cases per trace, numbered from 1: cases 1-100 in CI, 1-40 in a user's `make test`. The seeds are the
    /// same on every run and were all read alike by campaigns (the sample's seeds to 13,000, the dump's to 21,000, the
    /// kept recording's to 42,002; every one that disagreed is kept above), so the first 40 and the kept ones guard a
    /// newcomer's clone, whose test command has a budget of 6 minutes on a 2-core machine (each case is two
    /// child-process reads). `KATANA_AGREEMENT_CASES=N` runs cases 1-N; `=M-N` only cases M-N (`make test-ci` runs
    /// 41-100 after `make test` ran 1-40, and the kept seeds only with a stretch that starts at case 1).
    static func cases() throws -> ClosedRange<UInt64> {
        guard let given = ProcessInfo.processInfo.environment["KATANA_AGREEMENT_CASES"] else {
            return 1...(LTTngEnvironment.underCI ? 100 : 40)
        }
        let bounds = given.split(separator: "-", omittingEmptySubsequences: false).map { UInt64($0) }
        switch (bounds.count, bounds.first ?? nil, bounds.last ?? nil) {
        case (1, let last?, _) where last >= 1: return 1...last
        case (2, let first?, let last?) where first >= 1 && first <= last: return first...last
        default: throw RecordingError("KATANA_AGREEMENT_CASES=\(given): expected N or M-N with 1 <= M <= N")
        }
    }

    /// A trace's seeds: `base` plus each case number in `cases` divided by `every` (a trace that runs one case in
    /// `every`), and `kept` with a stretch that starts at case 1.
    static func planned(kept: [UInt64], base: UInt64, every: UInt64 = 1) throws -> [UInt64] {
        let cases = try cases()
        let first = (cases.lowerBound - 1) / every + 1, last = max(1, cases.upperBound / every)
        let numbered = first <= last ? (first...last).map { base + $0 } : []
        return seeds(Array(Set((cases.lowerBound == 1 ? kept : []) + numbered)).sorted())
    }

    /// `KATANA_AGREEMENT_SEEDS=1,2,3`: only these seeds (to look at a case again); `KATANA_AGREEMENT_KEEP=1`: the
    /// damaged copies are left in $TMPDIR, and their folder printed.
    static func seeds(_ planned: [UInt64]) -> [UInt64] {
        ProcessInfo.processInfo.environment["KATANA_AGREEMENT_SEEDS"].map { $0.split(separator: ",").compactMap { UInt64($0) } } ?? planned
    }
    static let keep = ProcessInfo.processInfo.environment["KATANA_AGREEMENT_KEEP"] != nil

    /// SplitMix64: the same seed, the same damage, on any machine.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// The files a case may damage: the metadata and the data streams (not LTTng's index files, which readers
    /// need not read).
    static func files(of trace: URL) -> [URL] {
        let enumerator = FileManager.default.enumerator(at: trace, includingPropertiesForKeys: nil)
        var found: [URL] = []
        while let url = enumerator?.nextObject() as? URL {
            guard !url.path.contains("/index/"), (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true
            else { continue }
            found.append(url)
        }
        return found.sorted { $0.path < $1.path }
    }

    /// A copy of `trace` with one file damaged as `seed` says; returns the copy and what was done.
    static func damagedCopy(of trace: URL, seed: UInt64, into root: URL) throws -> (URL, String) {
        var random = Generator(state: seed)
        let copy = root.appendingPathComponent("case-\(seed)")
        try FileManager.default.copyItem(at: trace, to: copy)
        let originals = files(of: trace)
        let chosen = originals[Int.random(in: 0..<originals.count, using: &random)]
        let file = copy.appendingPathComponent(String(chosen.path.dropFirst(trace.path.count + 1)))
        var bytes = [UInt8](try Data(contentsOf: file))
        guard !bytes.isEmpty else { return (copy, "\(file.lastPathComponent) empty") }
        let at = Int.random(in: 0..<bytes.count, using: &random)
        let done: String
        switch Int.random(in: 0..<5, using: &random) {
        case 0:
            let flips = Int.random(in: 1...4, using: &random)
            for _ in 0..<flips { bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= 1 << UInt8.random(in: 0...7, using: &random) }
            done = "\(flips) bits flipped"
        case 1:
            let values: [UInt64] = [0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0xffff, 0x7fff_ffff, 0xffff_ffff, .max]
            let value = values[Int.random(in: 0..<values.count, using: &random)]
            let width = [1, 2, 4, 8][Int.random(in: 0..<4, using: &random)]
            for index in 0..<width where at + index < bytes.count { bytes[at + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
            done = "\(width) bytes at \(at) set to \(value)"
        case 2:
            bytes.removeSubrange(at...)
            done = "cut to \(at) bytes"
        case 3:
            let from = Int.random(in: 0..<bytes.count, using: &random), count = Int.random(in: 1...64, using: &random)
            let chunk = Array(bytes[from..<min(bytes.count, from + count)])
            for (index, byte) in chunk.enumerated() where at + index < bytes.count { bytes[at + index] = byte }
            done = "\(chunk.count) bytes from \(from) copied over \(at)"
        default:
            let count = Int.random(in: 1...16, using: &random)
            bytes.removeSubrange(at..<min(bytes.count, at + count))
            done = "\(count) bytes taken out at \(at)"
        }
        try Data(bytes).write(to: file)
        return (copy, "\(file.lastPathComponent): \(done)")
    }

    /// What a tool did with a copy.
    struct Outcome {
        var status: Int32
        var out: String
        var err: String
        /// babeltrace2 logged an error (or fatal) line: it found damage, even when it ended with status 0 having
        /// dropped what it could not decode (seed 20208: an event cut by its packet's end, the rest read). katana-trace
        /// refuses such a trace rather than lose the event without a word.
        var loggedAnError: Bool {
            err.split(separator: "\n").contains { line in
                let words = line.split(separator: " ", omittingEmptySubsequences: true)
                return words.count > 4 && (words[4] == "E" || words[4] == "F")
            }
        }
        /// It ran past its bound (`timeout` stopped it: with SIGTERM, or SIGKILL when that was not enough —
        /// babeltrace2 spinning on a cut metadata packet does not end on SIGTERM).
        var timedOut: Bool { status == 124 || status == 137 }
    }

    static func run(_ arguments: [String], bound seconds: Int) async throws -> Outcome {
        let outcome = try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/timeout"), ["--kill-after=1", "\(seconds)"] + arguments,
                                                     environment: ["LIBBABELTRACE2_INIT_LOG_LEVEL": "NONE", "KATANA_TRACE_STALL_SECONDS": "5"])
        return Outcome(status: outcome.status, out: outcome.out, err: outcome.err)
    }

    /// Where katana-trace and babeltrace2 part on `seed`'s copy of `trace`: nothing, or what differs.
    static func disagreement(on trace: URL, seed: UInt64, root: URL) async throws -> String? {
        let (copy, damage) = try damagedCopy(of: trace, seed: seed, into: root)
        defer { if !keep { try? FileManager.default.removeItem(at: copy) } }
        let tool = KatanaTrace.executable.path
        let reference = try await run(["babeltrace2", copy.path], bound: 6)
        // babeltrace2 waits for ever on some cut files: no verdict from it; katana-trace must still end, and refuse.
        let dump = try await run([tool, "dump", copy.path], bound: 60)
        if dump.timedOut { return "seed \(seed) (\(damage)): katana-trace dump ran past 60 s" }
        if reference.timedOut {
            return dump.status == 2 ? nil : "seed \(seed) (\(damage)): babeltrace2 never ended; katana-trace dump ended with \(dump.status)"
        }
        if reference.status == 0 && !reference.loggedAnError {
            let expected = reference.out.split(separator: "\n").filter { $0.contains(" katana:") }.count
            guard dump.status == 0 else {
                return "seed \(seed) (\(damage)): babeltrace2 read \(expected) events; katana-trace refused: \(dump.err.prefix(300))"
            }
            let read = dump.out.split(separator: "\n").filter { !$0.contains("\"_summary\"") }
            if read.count != expected {
                return "seed \(seed) (\(damage)): babeltrace2 read \(expected) events; katana-trace \(read.count)"
            }
            // Field for field, against babeltrace2's own decoding (events tied on a timestamp may come in either order).
            let decoded = try await run([tool, "dump", "--reader", "babeltrace2", copy.path], bound: 60)
            let theirs = decoded.out.split(separator: "\n").filter { !$0.contains("\"_summary\"") }
            if decoded.status == 0, read.sorted() != theirs.sorted(), differOnlyByEmptiedText(read, theirs) {
                // babeltrace2 2.0's defect, not ours (campaign seed 30009, seed 40028): a text array or sequence whose
                // first byte is NUL is "" in CTF, which katana-trace reads; babeltrace2 shows it as "" for some events
                // and for others as the value its recycled string field held before (one byte set to 0 at 23 places
                // of a recording's procnames: "" at 8 of them, the previous event's procname at 15).
                return nil
            }
            if decoded.status != 0 || read.sorted() != theirs.sorted() {
                let first = zip(read.sorted(), theirs.sorted()).first { $0 != $1 }
                return "seed \(seed) (\(damage)): the events differ from babeltrace2's: \(first.map { "\($0.0.prefix(200)) vs \($0.1.prefix(200))" } ?? decoded.err)"
            }
            return nil
        }
        // Refused by the reference (or read with an error it logged): refused here too, in one line, and no report.
        let analysis = try await run([tool, "analyze", copy.path], bound: 60)
        let lines = analysis.err.split(separator: "\n")
        if analysis.status != 2 || !analysis.out.isEmpty || lines.count != 1 || !lines[0].hasPrefix("katana-trace: ") {
            return "seed \(seed) (\(damage)): babeltrace2 refused it (\(reference.status)); katana-trace analyze ended with \(analysis.status), \(analysis.out.isEmpty ? "no report" : "a report"), stderr: \(analysis.err.prefix(300))"
        }
        if dump.status != 2 { return "seed \(seed) (\(damage)): babeltrace2 refused it; katana-trace dump ended with \(dump.status)" }
        return nil
    }

    /// Whether two dumps hold the same events (paired by event, timestamp and thread) and where a field differs,
    /// ours is the empty string.
    static func differOnlyByEmptiedText(_ ours: [Substring], _ theirs: [Substring]) -> Bool {
        func objects(_ lines: [Substring]) -> [[String: AnyHashable]] {
            lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: AnyHashable] }
        }
        func key(_ object: [String: AnyHashable]) -> String {
            ["event", "ts", "vtid"].map { object[$0].map { "\($0)" } ?? "-" }.joined(separator: " ")
        }
        let mine = objects(ours), other = objects(theirs)
        guard mine.count == ours.count, other.count == theirs.count, mine.count == other.count else { return false }
        var byKey: [String: [[String: AnyHashable]]] = [:]
        for object in other { byKey[key(object), default: []].append(object) }
        var emptied = 0
        for object in mine {
            guard var candidates = byKey[key(object)], !candidates.isEmpty else { return false }
            let match = candidates.firstIndex { candidate in
                Set(candidate.keys) == Set(object.keys)
                    && object.allSatisfy { field in candidate[field.key] == field.value || field.value == AnyHashable("") }
            }
            guard let match else { return false }
            if candidates[match] != object { emptied += 1 }
            candidates.remove(at: match)
            byKey[key(object)] = candidates
        }
        return emptied > 0
    }

    /// Runs `seeds` on `trace`, two at a time; returns every disagreement.
    static func disagreements(on trace: URL, seeds: [UInt64]) async throws -> [String] {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("katana-agreement-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { if !keep { try? FileManager.default.removeItem(at: root) } else { print("damaged copies kept in \(root.path)") } }
        return try await withThrowingTaskGroup(of: String?.self) { group in
            var found: [String] = []
            var next = 0
            for _ in 0..<min(2, seeds.count) {
                let seed = seeds[next]
                next += 1
                group.addTask { try await disagreement(on: trace, seed: seed, root: root) }
            }
            while let result = try await group.next() {
                if let result { found.append(result) }
                if next < seeds.count {
                    let seed = seeds[next]
                    next += 1
                    group.addTask { try await disagreement(on: trace, seed: seed, root: root) }
                }
            }
            return found.sorted()
        }
    }
}

@Suite(.enabled(if: Fallback.babeltrace2Installed || LTTngEnvironment.underCI, "needs babeltrace2 (scripts/setup-system.sh)"),
       .checkedInChildProcesses)
struct TraceReaderAgreementTests {
    @Test func katanaTraceReadsWhatBabeltrace2ReadsOfTheDamagedSample() async throws {
        let seeds = try ReaderAgreement.planned(kept: ReaderAgreement.seedsThatDisagreed, base: 10_000)
        let found = try await ReaderAgreement.disagreements(on: URL(fileURLWithPath: Toolkit.sample), seeds: seeds)
        #expect(found.isEmpty, "\(found.count) of \(seeds.count) cases disagree:\n\(found.prefix(10).joined(separator: "\n"))")
    }

    /// The same on a flight-recorder dump (its own plain-text metadata, one stream per recording thread):
    /// `traces/sample-flight-recorder`, katana-bench's `mixed` scenario dumped at its end, kept so that a seed makes
    /// the same copy every time.
    @Test func katanaTraceReadsWhatBabeltrace2ReadsOfADamagedFlightRecorderDump() async throws {
        let dump = Paths.packageRoot.appendingPathComponent("traces/sample-flight-recorder")
        // Seeds that once disagreed on it: 20208 (an event cut by its packet's end: babeltrace2 logs an error, drops the
        // event and ends with status 0; refused here), 20483 (`_name` cut to `_na` in an event class: babeltrace2 reads
        // it; dump refused it, then crashed on it — a read of the string table while interning moved it; now it dumps
        // the events with the field as `na`, and analysis refuses them, naming `name`), 20003 (a bit flipped in an event's full 64-bit timestamp, taking it back in
        // time: read as it was; babeltrace2 refuses a stream whose timestamps go back).
        // 20127 and 20471 (a packet's stream id damaged: read as the one stream class's; babeltrace2 refuses a
        // stream the metadata does not declare), 20451 (a packet's UUID damaged).
        let seeds = try ReaderAgreement.planned(kept: [20_003, 20_127, 20_208, 20_451, 20_471, 20_483], base: 20_000, every: 3)
        let found = try await ReaderAgreement.disagreements(on: dump, seeds: seeds)
        #expect(found.isEmpty, "\(found.count) of \(seeds.count) cases disagree:\n\(found.prefix(10).joined(separator: "\n"))")
    }

    /// The same on a recording `katana-trace record` made (`traces/sample-record`: LTTng's packet headers and
    /// packetized metadata, two streams, the `procname` context the sample lacks), kept so that a seed makes the same
    /// copy every time.
    @Test func katanaTraceReadsWhatBabeltrace2ReadsOfADamagedRecordingKept() async throws {
        let recording = Paths.packageRoot.appendingPathComponent("traces/sample-record")
        // Seeds that once disagreed on it: 40028 (a type's name sequence begun with NUL: babeltrace2's stale text,
        // see `disagreement`), 40055 (`interval_end` misspelt in the metadata: the event's name and outcome were left
        // out of its dump; babeltrace2 shows them); from a campaign of 1,502 cases: 40415 (the clock renamed, so an
        // integer's `map` names no declared clock: read; babeltrace2 refuses it), 40881 (an event's `fields :=` misspelt:
        // refused as an unknown declaration; babeltrace2 warns and reads on).
        let seeds = try ReaderAgreement.planned(kept: [40_028, 40_055, 40_415, 40_881], base: 40_000)
        let found = try await ReaderAgreement.disagreements(on: recording, seeds: seeds)
        #expect(found.isEmpty, "\(found.count) of \(seeds.count) cases disagree:\n\(found.prefix(10).joined(separator: "\n"))")
    }
}

/// The same on a fresh LTTng recording (several streams, packetized metadata, LTTng's own headers, the procname
/// context): a new recording each run, so a seed does not make the same copy twice — a campaign's test
/// (`KATANA_AGREEMENT_RECORDING=1`), not the suite's, which must give the same verdict every run (the suite damages
/// `traces/sample-record`, one such recording kept). Part of the serialized recording suite.
extension LTTngRecordingTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["KATANA_AGREEMENT_RECORDING"] != nil,
                   "a campaign's test: KATANA_AGREEMENT_RECORDING=1 runs it"))
    func katanaTraceReadsWhatBabeltrace2ReadsOfADamagedRecording() async throws {
        let (directory, _) = try await recordWithKatanaTrace([Paths.katanaBench.path, "-s", "mixed", "--count", "100", "--warmup", "0"])
        defer { try? FileManager.default.removeItem(at: directory) }
        let seeds = try ReaderAgreement.planned(kept: [], base: 30_000, every: 4)
        let found = try await ReaderAgreement.disagreements(on: directory, seeds: seeds)
        #expect(found.isEmpty, "\(found.count) of \(seeds.count) cases disagree:\n\(found.prefix(10).joined(separator: "\n"))")
    }
}
