import Foundation
import Katana
import KatanaDispatchLog
import KatanaTrace
import Testing

struct LogState: State, Codable, Equatable {
    var total = 0
    init() {}
}

struct AddAmount: StateUpdater, Codable {
    let amount: Int
    let note: String
    func updateState(_ state: inout LogState) { state.total += amount }
}

struct ResetTotal: StateUpdater {
    func updateState(_ state: inout LogState) { state.total = 0 }
}

/// The dispatch log's format: what a writer writes a reader reads back whole; a size limit cuts the log and says so;
/// a log cut short or damaged gives what is whole before the damage and says how much was left out; a newer format
/// and an unknown type are one-line errors naming them (issue #42, points 1 and 5; replay: KatanaBenchTests' ReplayTests).
@Suite struct DispatchLogTests {
    static func temporaryLog() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("katana-log-\(UUID().uuidString).jsonl").path
    }

    @Test func whatIsWrittenIsReadBackInOrderWithItsValues() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try DispatchLogWriter(path: path, stateType: String(reflecting: LogState.self), initialState: LogState())
        for index in 1...500 {
            writer.append(kind: .updater, type: String(reflecting: AddAmount.self), id: UInt64(index), parentID: UInt64(index / 10),
                          value: AddAmount(amount: index, note: "order \"\(index)\"\n"))
        }
        writer.append(kind: .updater, type: String(reflecting: ResetTotal.self), id: 501, parentID: 0, value: nil)
        var final = LogState()
        final.total = 42
        try writer.finish(finalState: final)

        let log = try DispatchLogReader.read(path)
        #expect(log.damage == nil)
        #expect(log.header.stateType == "KatanaTests.LogState")
        #expect(try JSONDecoder().decode(LogState.self, from: try #require(log.header.initialState)) == LogState())
        guard case .complete(let finalState) = log.end else { Issue.record("\(log.end)"); return }
        #expect(try JSONDecoder().decode(LogState.self, from: try #require(finalState)).total == 42)
        #expect(log.entries.map(\.sequence) == Array(1...501))
        #expect(log.entries.map(\.offsetNanoseconds) == log.entries.map(\.offsetNanoseconds).sorted())
        #expect(log.entries[9].parentID == 1 && log.entries[500].value == nil)

        var types = DispatchLogTypes()
        types.register(AddAmount.self)
        let item = try #require(try types.item(log.entries[6]) as? AddAmount)
        #expect(item.amount == 7 && item.note == "order \"7\"\n")
        // A type the replay does not know: one line naming it and where.
        #expect(throws: DispatchLogError("line 502: KatanaTests.ResetTotal is not a type this replay knows (renamed since the log was written? register it)")) {
            try types.item(log.entries[500])
        }
    }

    @Test func theSizeLimitCutsTheLogAndSaysSo() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try DispatchLogWriter(path: path, stateType: "S", initialState: nil, limitBytes: 16_384)
        for index in 1...2_000 {
            writer.append(kind: .updater, type: String(reflecting: AddAmount.self), id: UInt64(index), parentID: 0,
                          value: AddAmount(amount: index, note: "n"))
        }
        try writer.finish(finalState: nil)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size <= 16_384)
        let log = try DispatchLogReader.read(path)
        #expect(log.damage == nil)
        guard case .cut(let reason, _, let dropped) = log.end else { Issue.record("\(log.end)"); return }
        #expect(reason == "size limit")
        #expect(log.entries.count > 100 && UInt64(log.entries.count) + dropped == 2_000, "\(log.entries.count) + \(dropped)")
    }

    @Test func aLogCutShortOrDamagedGivesWhatIsWholeAndSaysWhatWasLeftOut() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try DispatchLogWriter(path: path, stateType: "S", initialState: nil)
        for index in 1...100 {
            writer.append(kind: .sideEffect, type: "App.Fetch", id: UInt64(index), parentID: 0, value: nil)
        }
        try writer.finish(finalState: nil)
        let whole = try Data(contentsOf: URL(fileURLWithPath: path))

        // Cut in the middle of item 61's line (the process died while writing).
        var lines = whole.split(separator: UInt8(ascii: "\n"))
        let cutAt = lines[0...60].reduce(0) { $0 + $1.count + 1 } + 10
        let short = try DispatchLogReader.read(whole.prefix(cutAt), name: "short.jsonl")
        #expect(short.entries.count == 60)
        #expect(short.end == .unfinished)
        #expect(short.damage == DispatchLog.Damage(line: 62, reason: "cut short", droppedLines: 1, droppedBytes: 10), "\(String(describing: short.damage))")

        // A damaged line in the middle: what is before it, nothing after (replaying past a hole would mislead).
        lines[30] = Data("{\"seq\": 30, garbage".utf8)[...]
        let damagedData = Data(lines.joined(separator: [UInt8(ascii: "\n")])) + Data("\n".utf8)
        let damaged = try DispatchLogReader.read(damagedData, name: "damaged.jsonl")
        #expect(damaged.entries.count == 29)
        #expect(damaged.damage?.line == 31 && damaged.damage?.reason == "not a JSON object")
        #expect(damaged.damage?.droppedLines == 102 - 30, "\(String(describing: damaged.damage))")

        // A missing item (a line deleted): the gap is found.
        var gapped = whole.split(separator: UInt8(ascii: "\n"))
        gapped.remove(at: 50)
        let gap = try DispatchLogReader.read(Data(gapped.joined(separator: [UInt8(ascii: "\n")])) + Data("\n".utf8), name: "gap.jsonl")
        #expect(gap.entries.count == 49)
        #expect(gap.damage?.reason == "item 51 where item 50 was due (items are missing)")
    }

    @Test func aNewerFormatOrNoLogAtAllIsRefusedInOneLine() throws {
        #expect(throws: DispatchLogError("future.jsonl is a version 2 dispatch log; this build reads versions up to 1: update Katana")) {
            try DispatchLogReader.read(Data("{\"katana_dispatch_log\":2,\"state_type\":\"S\",\"started_unix_ns\":1}\n".utf8), name: "future.jsonl")
        }
        #expect(throws: DispatchLogError("notes.txt is not a Katana dispatch log (its first line is no katana_dispatch_log header)")) {
            try DispatchLogReader.read(Data("hello\n".utf8), name: "notes.txt")
        }
        #expect(throws: DispatchLogError.self) { try DispatchLogReader.read("/nonexistent/log.jsonl") }
        #expect(throws: DispatchLogError("a dispatch log's size limit must be at least 4096 bytes, not 100")) {
            try DispatchLogWriter(path: Self.temporaryLog(), stateType: "S", initialState: nil, limitBytes: 100)
        }
    }

    /// A store with a recorder: every updater in the order it was applied, every side effect as it started, parents
    /// linking children to the side effect that dispatched them, values for Encodable types — and the updaters'
    /// values, applied in the logged order to the logged initial state, give the logged final state.
    @Test func aStoresDispatchesAreRecordedInTheOrderTheyApplied() async throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try DispatchLogRecorder(path: path, initialState: LogState())
        let store = Store<LogState, EmptySideEffectDependencyContainer>(
            stateInitializer: { LogState() }, configuration: .init(traceBackend: NoOpTraceBackend(), dispatchRecorder: recorder))
        for index in 1...20 { store.dispatch(AddAmount(amount: index, note: "top")) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 1...8 { group.addTask { try await store.dispatch(AddTwice(amount: index)).value } }
            try await group.waitForAll()
        }
        try await store.dispatch(AddAmount(amount: 1_000, note: "last")).value
        let final = store.state
        try recorder.finish(finalState: final)

        let log = try DispatchLogReader.read(path)
        #expect(log.damage == nil)
        let updaters = log.entries.filter { $0.kind == .updater }, sideEffects = log.entries.filter { $0.kind == .sideEffect }
        #expect(updaters.count == 20 + 16 + 1 && sideEffects.count == 8)
        #expect(sideEffects.allSatisfy { $0.type == "KatanaTests.AddTwice" && $0.parentID == 0 && $0.value != nil })
        let sideEffectIDs = Set(sideEffects.map(\.id))
        let children = updaters.filter { $0.parentID != 0 }
        #expect(children.count == 16 && children.allSatisfy { sideEffectIDs.contains($0.parentID) })
        // Each child comes after the side effect that dispatched it.
        for child in children {
            let parent = try #require(sideEffects.first { $0.id == child.parentID })
            #expect(parent.sequence < child.sequence)
        }

        var types = DispatchLogTypes()
        types.register(AddAmount.self)
        var state = try JSONDecoder().decode(LogState.self, from: try #require(log.header.initialState))
        for entry in updaters {
            let updater = try #require(try types.item(entry) as? AddAmount)
            updater.updateState(&state)
        }
        guard case .complete(let finalState) = log.end else { Issue.record("\(log.end)"); return }
        #expect(state == (try JSONDecoder().decode(LogState.self, from: try #require(finalState))))
        #expect(state == final)
    }

    /// A writer whose thread cannot keep up cuts the log rather than grow without bound — and writes every item queued
    /// before the cut (no hole): here its thread is held on the first item while 65,546 more arrive.
    @Test func aWriterThatFallsBehindCutsTheLogWithoutAHole() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try DispatchLogWriter(path: path, stateType: "S", initialState: nil, limitBytes: 1 << 30)
        let (entered, gate) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
        writer.append(kind: .updater, type: "App.First", id: 1, parentID: 0, value: HeldEncoding(entered: entered, gate: gate))
        entered.wait()  // the writer's thread is on the first item
        let appended = 1 + DispatchLogWriter.maximumPending + 10
        for index in 2...appended {
            writer.append(kind: .updater, type: "App.Next", id: UInt64(index), parentID: 0, value: nil)
        }
        gate.signal()
        try writer.finish(finalState: nil)
        let log = try DispatchLogReader.read(path)
        #expect(log.damage == nil)
        guard case .cut(let reason, _, let dropped) = log.end else { Issue.record("\(log.end)"); return }
        #expect(reason == "writer fell behind")
        #expect(log.entries.count >= DispatchLogWriter.maximumPending, "every item queued before the cut is written: \(log.entries.count)")
        #expect(log.entries.count + Int(dropped) == appended, "\(log.entries.count) written + \(dropped) dropped")
        #expect(log.entries.first?.type == "App.First")
    }

    /// Checkpoints: every `checkpointEvery` updaters the state as it was then — the logged updaters up to a checkpoint,
    /// applied to the initial state, give the checkpoint's state.
    @Test func checkpointsHoldTheStateAfterTheItemsBeforeThem() async throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try DispatchLogRecorder(path: path, initialState: LogState(), checkpointEvery: 7)
        let store = Store<LogState, EmptySideEffectDependencyContainer>(
            stateInitializer: { LogState() }, configuration: .init(traceBackend: NoOpTraceBackend(), dispatchRecorder: recorder))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<5 {
                group.addTask { for index in 0..<10 { try await store.dispatch(AddAmount(amount: task * 100 + index, note: "")).value } }
            }
            try await group.waitForAll()
        }
        try recorder.finish(finalState: store.state)
        let log = try DispatchLogReader.read(path)
        #expect(log.damage == nil)
        #expect(log.checkpoints.map(\.afterSequence) == [7, 14, 21, 28, 35, 42, 49], "before the 8th, 15th, … of 50 updaters")
        var types = DispatchLogTypes()
        types.register(AddAmount.self)
        for checkpoint in log.checkpoints {
            var state = LogState()
            for entry in log.entries where entry.sequence <= checkpoint.afterSequence {
                try #require(try types.item(entry) as? AddAmount).updateState(&state)
            }
            #expect(try JSONDecoder().decode(LogState.self, from: checkpoint.state) == state, "checkpoint after \(checkpoint.afterSequence)")
        }
        #expect(throws: DispatchLogError("checkpointEvery must be 0 (none) or more, not -1")) {
            try DispatchLogRecorder(path: Self.temporaryLog(), initialState: LogState(), checkpointEvery: -1)
        }
    }

    /// The interceptor forms a store can have: erased (protocol), typed (protocol), closures (Katana 6's form).
    enum InterceptorForm: String, CaseIterable, Sendable { case erased, typed, closures }

    /// The log holds what the store applied, past its interceptors: an updater an interceptor drops is not in it, one
    /// it changes is there as changed — so the logged updaters, applied to the initial state without the interceptors,
    /// give the final state (what `--verify` relies on), whichever interceptor form did it and whether the updater was
    /// applied inline or queued.
    @Test(arguments: InterceptorForm.allCases)
    func theLogHoldsWhatTheInterceptorsLetThrough(form: InterceptorForm) async throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let recorder = try DispatchLogRecorder(path: path, initialState: LogState(), checkpointEvery: 5)
        // Odd amounts are dropped; 4 becomes 400.
        let (interceptors, closures): ([any DispatchInterceptor], [StoreInterceptor]) = switch form {
        case .erased: ([DropOddAndScaleFour()], [])
        case .typed: ([TypedDropOddAndScaleFour()], [])
        case .closures: ([], [{ _ in { next in { item in
            if let add = item as? AddAmount {
                if add.amount % 2 != 0 { return }
                if add.amount == 4 { return try next(AddAmount(amount: 400, note: "scaled")) }
            }
            try next(item)
        } } }])
        }
        let store = Store<LogState, EmptySideEffectDependencyContainer>(
            interceptors: closures, stateInitializer: { LogState() },
            configuration: .init(traceBackend: NoOpTraceBackend(), interceptors: interceptors, dispatchRecorder: recorder))
        for index in 1...10 { store.dispatch(AddAmount(amount: index, note: "inline")) }
        // From several tasks at once: some are applied inline, some queued behind the lane's holder.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<4 {
                group.addTask {
                    for index in 1...25 { _ = try? await store.dispatch(AddAmount(amount: task * 100 + index, note: "")).value }
                }
            }
            try await group.waitForAll()
        }
        _ = try? await store.dispatch(AddAmount(amount: 4, note: "last")).value
        let final = store.state
        try recorder.finish(finalState: final)

        let log = try DispatchLogReader.read(path)
        var types = DispatchLogTypes()
        types.register(AddAmount.self)
        let logged = try log.entries.map { try #require(try types.item($0) as? AddAmount) }
        #expect(logged.allSatisfy { $0.amount % 2 == 0 && $0.amount != 4 }, "\(logged.map(\.amount))")
        #expect(logged.filter { $0.amount == 400 }.count == 3, "the three 4s, as the interceptor changed them")
        // The even amounts: 5 of the first ten, 12 of each task's 25, and the last 4.
        let passedOn: Int = 5 + 4 * 12 + 1
        #expect(logged.count == passedOn, "\(logged.count)")
        var state = LogState()
        for updater in logged { updater.updateState(&state) }
        #expect(state == final)
        for checkpoint in log.checkpoints {
            var state = LogState()
            for (entry, updater) in zip(log.entries, logged) where entry.sequence <= checkpoint.afterSequence {
                updater.updateState(&state)
            }
            #expect(try JSONDecoder().decode(LogState.self, from: checkpoint.state) == state, "checkpoint after \(checkpoint.afterSequence)")
        }
    }

    /// A recorder never finished — its store released, the app gone on without calling `finish` — still ends its log.
    @Test func aRecorderNeverFinishedStillEndsItsLog() async throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let recorder = try DispatchLogRecorder(path: path, initialState: LogState())
            let store = Store<LogState, EmptySideEffectDependencyContainer>(
                stateInitializer: { LogState() }, configuration: .init(traceBackend: NoOpTraceBackend(), dispatchRecorder: recorder))
            for index in 1...5 { try await store.dispatch(AddAmount(amount: index, note: "")).value }
        }
        let log = try DispatchLogReader.read(path)
        #expect(log.entries.count == 5)
        #expect(log.end == .complete(finalState: nil))
    }

    /// Checkpoints of a large state take half the log at most, then are left out while the items go on; a final state
    /// too big for what is left is left out, and the end line says both.
    @Test func checkpointsTakeHalfTheLogAtMostAndTheItemsGoOn() throws {
        let path = Self.temporaryLog()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let limit = 64 << 10
        let writer = try DispatchLogWriter(path: path, stateType: "S", initialState: nil, limitBytes: limit)
        let bigState = [String](repeating: String(repeating: "x", count: 100), count: 100)  // about 10 KB of JSON
        for index in 1...100 {
            if index % 10 == 0 { writer.appendCheckpoint(state: bigState) }
            writer.append(kind: .updater, type: "App.Small", id: UInt64(index), parentID: 0, value: AddAmount(amount: index, note: ""))
        }
        try writer.finish(finalState: [String](repeating: bigState[0], count: 1_000))
        let log = try DispatchLogReader.read(path)
        #expect(log.damage == nil)
        #expect(log.entries.count == 100, "every item written")
        #expect(log.checkpoints.count == 3, "\(log.checkpoints.count): three of about 10 KB fit in half of 64 KiB")
        #expect(log.end == .complete(finalState: nil))
        let end = try #require(String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").last)
        #expect(end == #"{"end":"complete","checkpoints_left_out":7,"final_state_left_out":"size limit"}"#, "\(end)")
    }
}

struct AddTwice: SideEffect, Codable {
    let amount: Int
    func sideEffect(_ context: SideEffectContext<LogState, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(AddAmount(amount: amount, note: "first")).value
        try await context.dispatch(AddAmount(amount: amount * 10, note: "second")).value
    }
}

/// A value whose encoding says it began (`entered`) and waits for `gate`: holds a log's writer thread on it.
struct HeldEncoding: Encodable, Sendable {
    let entered: DispatchSemaphore
    let gate: DispatchSemaphore
    func encode(to encoder: any Encoder) throws {
        entered.signal()
        gate.wait()
        var container = encoder.singleValueContainer()
        try container.encode("held")
    }
}

/// Drops `AddAmount`s of odd amounts (never calls `next`) and passes 4 on as 400.
struct DropOddAndScaleFour: DispatchInterceptor {
    func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws {
        if let add = item as? AddAmount {
            if add.amount % 2 != 0 { return }
            if add.amount == 4 { return try next(AddAmount(amount: 400, note: "scaled")) }
        }
        try next(item)
    }
}

/// `DropOddAndScaleFour` in the typed form: the changed copy passed on with `next`, of the item's own type.
struct TypedDropOddAndScaleFour: TypedDispatchInterceptor {
    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws {
        if let add = item as? AddAmount {
            if add.amount % 2 != 0 { return }
            if add.amount == 4, let scaled = AddAmount(amount: 400, note: "scaled") as? Item { return try next(scaled) }
        }
        try next(item)
    }
}
