import CKatanaTraceProvider
import Foundation

/// Why a log could not be written or read: one line.
public struct DispatchLogError: Error, CustomStringConvertible, Equatable {
    public var description: String
    /// An error that says `description`.
    public init(_ description: String) { self.description = description }
}

/// Writes a dispatch log (``DispatchLogFormat``) to a file, up to a size limit: the items past it are counted, not
/// written, and the log's last line says where it was cut. Items are encoded and written on a thread of the writer's
/// own, so `append` costs its caller a lock and an array append (and a copy of the value); `finish` waits for them.
/// Should that thread fall `maximumPending` items behind, the log is cut there too (memory stays bounded).
public final class DispatchLogWriter: @unchecked Sendable {
    /// The log's file.
    public let path: String
    /// The size the file never exceeds.
    public let limitBytes: Int
    private let file: FileHandle
    private let started: UInt64 = katana_monotonic_ns()
    // Guarded by `lock`: items waiting to be written, and what the writer thread has done.
    private let lock = NSCondition()
    private var pending: [Pending] = []
    private var sequence: UInt64 = 0
    private var finishing = false
    private var done = false
    private var cutAt: UInt64?
    /// The first item not written once the log is cut: items before it still pending are written (they came before
    /// the hole), none after it.
    private var cutSequence: UInt64 = .max
    private var cutReason = "size limit"
    private var dropped: UInt64 = 0
    private var failure: DispatchLogError?
    private var written = 0  // bytes, writer thread only (and `finish` once it has ended)
    private var writtenSoFar = 0  // `written`, for other threads (guarded by `lock`)
    private var quotedTypes: [String: [UInt8]] = [:]  // writer thread only
    private var checkpointBytes = 0  // writer thread only
    private var checkpointsLeftOut = 0  // writer thread only (and `finish` once it has ended)

    private var finished = false
    /// The writer's thread is encoding or writing a batch taken from `pending`.
    private var writing = false
    /// The writer's thread waits without a timeout (it found nothing to do for a while): the next item must wake it.
    /// Otherwise it looks for items every `pollInterval`, and an append makes no system call — a wake per item was
    /// most of an item's cost on the dispatching thread (`katana-bench micro --only dispatch-log`).
    private var writerAsleep = false
    private static let pollInterval = 0.002
    private static let pollsBeforeSleeping = 50

    private struct Pending {
        var sequence: UInt64
        var offset: UInt64
        var kind: DispatchLogKind
        var type: String
        var id: UInt64
        var parentID: UInt64
        var value: (any Encodable & Sendable)?
        /// A checkpoint rather than an item: the state after item `sequence` (in `value`).
        var isCheckpoint = false
    }

    /// Creates (or truncates) `path` and writes the header. `limitBytes` bounds the whole file.
    public init(path: String, stateType: String, initialState: (any Encodable & Sendable)?, limitBytes: Int = 64 << 20) throws(DispatchLogError) {
        guard limitBytes >= 4_096 else { throw DispatchLogError("a dispatch log's size limit must be at least 4096 bytes, not \(limitBytes)") }
        guard FileManager.default.createFile(atPath: path, contents: nil), let file = FileHandle(forWritingAtPath: path) else {
            throw DispatchLogError("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.limitBytes = limitBytes
        self.file = file
        var header = "{\"katana_dispatch_log\":\(DispatchLogFormat.version),\"state_type\":\(Self.quoted(stateType)),"
            + "\"started_unix_ns\":\(UInt64(max(0, Date().timeIntervalSince1970 * 1e9)))"
        if let initialState, let json = try? encoder.encode(initialState) {
            header += ",\"initial_state\":" + String(decoding: json, as: UTF8.self)
        }
        header += "}\n"
        guard header.utf8.count + Self.endRoom <= limitBytes else {
            throw DispatchLogError("the log's header alone (\(header.utf8.count) bytes) does not fit its \(limitBytes)-byte limit")
        }
        do { try file.write(contentsOf: Data(header.utf8)) } catch { throw DispatchLogError("cannot write \(path): \(error.localizedDescription)") }
        written = header.utf8.count
        let thread = Thread { [self] in
            // Named in `top`, `perf` and traces (Thread.name does not reach the kernel here; 15 bytes at most).
            katana_name_this_thread("katana-disp-log")
            drain()
        }
        thread.start()
    }

    /// Room kept for the last line (a cut's, or a small final state's).
    static let endRoom = 256
    /// Items waiting for the writer's thread, at most: one more cuts the log ("writer fell behind").
    public static let maximumPending = 1 << 16

    /// Nanoseconds since recording started (the `t_ns` of an item dispatched now).
    public var now: UInt64 { katana_monotonic_ns() &- started }

    /// Logs one dispatched item. Never blocks on I/O; after the size limit, the item is only counted.
    public func append(kind: DispatchLogKind, type: String, id: UInt64, parentID: UInt64, value: (any Encodable & Sendable)?,
                       at offset: UInt64? = nil) {
        let offset = offset ?? now
        lock.lock()
        defer { lock.unlock() }
        guard !finishing else { return }
        if cutAt != nil {
            dropped += 1
            return
        }
        if pending.count >= Self.maximumPending {
            // The writer's thread cannot keep up: the log is cut here rather than memory grown without bound.
            cutAt = offset
            cutSequence = sequence + 1
            cutReason = "writer fell behind"
            dropped += 1
            return
        }
        sequence += 1
        pending.append(Pending(sequence: sequence, offset: offset, kind: kind, type: type, id: id, parentID: parentID, value: value))
        wakeWriterIfAsleep()
    }

    /// Logs the state as it is after every item appended so far: a checkpoint, which a replay's `--verify` compares
    /// against to name where a replay first differs. Encoded on the writer's thread like an item; one that does not
    /// fit under the size limit is left out (the log goes on).
    public func appendCheckpoint(state: any Encodable & Sendable) {
        lock.lock()
        defer { lock.unlock() }
        guard !finishing, cutAt == nil, pending.count < Self.maximumPending else { return }
        pending.append(Pending(sequence: sequence, offset: 0, kind: .updater, type: "", id: 0, parentID: 0, value: state, isCheckpoint: true))
        wakeWriterIfAsleep()
    }

    /// Called with `lock` held, after adding to `pending`. Broadcast, not signal: `finish` and `waitUntilWritten` wait
    /// on the same condition, and a signal could wake one of them instead of the writer.
    private func wakeWriterIfAsleep() {
        if writerAsleep {
            writerAsleep = false
            lock.broadcast()
        }
    }

    /// Waits until every item appended so far is written to the file (or counted as dropped).
    public func waitUntilWritten() {
        lock.lock()
        while (!pending.isEmpty || writing) && !done { lock.wait() }
        lock.unlock()
    }

    /// Items and bytes written so far, and items dropped (past the size limit, or when the writer fell behind).
    public var counts: (items: UInt64, bytes: Int, dropped: UInt64) {
        lock.withLock { (sequence - UInt64(pending.count), writtenSoFar, dropped) }
    }

    /// Whether ``finish(finalState:)`` has run.
    public var isFinished: Bool { lock.withLock { finished } }

    /// Writes what is pending and the last line (`finalState` when the state is `Encodable`), and closes the file;
    /// the writer's thread ends. A second call does nothing.
    public func finish(finalState: (any Encodable & Sendable)?) throws(DispatchLogError) {
        lock.lock()
        if finished {
            lock.unlock()
            return
        }
        finished = true
        finishing = true
        lock.broadcast()
        while !done { lock.wait() }
        let (cutAt, dropped, failure, cutReason) = (self.cutAt, self.dropped, self.failure, self.cutReason)
        lock.unlock()
        if let failure { throw failure }
        var end: String
        let leftOut = checkpointsLeftOut > 0 ? ",\"checkpoints_left_out\":\(checkpointsLeftOut)" : ""
        if let cutAt {
            end = "{\"end\":\"cut\",\"reason\":\(Self.quoted(cutReason)),\"limit_bytes\":\(limitBytes),\"at_ns\":\(cutAt),\"items_dropped\":\(dropped)\(leftOut)}\n"
        } else {
            end = "{\"end\":\"complete\"" + leftOut
            if let finalState, let json = try? encoder.encode(finalState) {
                if written + end.utf8.count + json.count + 40 <= limitBytes {
                    end += ",\"final_state\":" + String(decoding: json, as: UTF8.self)
                } else {
                    end += ",\"final_state_left_out\":\"size limit\""
                }
            }
            end += "}\n"
        }
        do {
            try file.write(contentsOf: Data(end.utf8))
            try file.close()
        } catch {
            throw DispatchLogError("cannot write \(path): \(error.localizedDescription)")
        }
    }

    /// The writer thread: encodes and writes pending items in batches until `finish`.
    private func drain() {
        var batch: [Pending] = []
        while true {
            lock.lock()
            var polls = 0
            while pending.isEmpty && !finishing {
                if polls < Self.pollsBeforeSleeping {
                    _ = lock.wait(until: Date(timeIntervalSinceNow: Self.pollInterval))
                    polls += 1
                } else {
                    writerAsleep = true
                    lock.wait()
                }
            }
            writerAsleep = false
            // The two arrays trade places: appends go on into the emptied one's capacity (a copy taken and the
            // original emptied would make every batch regrow its array from nothing).
            batch.removeAll(keepingCapacity: true)
            swap(&batch, &pending)
            let last = finishing && batch.isEmpty
            writing = !last
            lock.unlock()
            if last { break }
            defer {
                lock.lock()
                writing = false
                lock.broadcast()
                lock.unlock()
            }
            // Once cut, nothing after the hole is written: a later, smaller item must not slip in after it.
            lock.lock()
            let firstCut = cutSequence
            lock.unlock()
            var chunk: [UInt8] = []
            var firstUnwritten = batch.count
            for (index, item) in batch.enumerated() {
                if item.sequence >= firstCut {  // (a checkpoint's sequence is the last item before it)
                    firstUnwritten = index
                    break
                }
                let before = chunk.count
                appendLine(item, to: &chunk)
                if item.isCheckpoint, checkpointBytes + chunk.count - before > limitBytes / 2 {
                    // Checkpoints are evidence, not traffic: they get half the log at most (a large state checkpointed
                    // often would otherwise crowd out the items), then are left out while the items go on.
                    chunk.removeLast(chunk.count - before)
                    checkpointsLeftOut += 1
                    continue
                }
                if written + chunk.count + Self.endRoom > limitBytes {
                    chunk.removeLast(chunk.count - before)
                    if item.isCheckpoint {
                        checkpointsLeftOut += 1
                        continue
                    }
                    firstUnwritten = index
                    break
                }
                if item.isCheckpoint { checkpointBytes += chunk.count - before }
            }
            var writeFailure: DispatchLogError?
            if !chunk.isEmpty {
                do {
                    try file.write(contentsOf: chunk)
                    written += chunk.count
                    lock.withLock { writtenSoFar = written }
                } catch {
                    writeFailure = DispatchLogError("cannot write \(path): \(error.localizedDescription)")
                }
            }
            if firstUnwritten < batch.count || writeFailure != nil {
                let unwritten = batch[min(firstUnwritten, batch.count)...].filter { !$0.isCheckpoint }
                lock.lock()
                if let writeFailure, failure == nil { failure = writeFailure }
                if cutAt == nil, let first = unwritten.first {
                    cutAt = first.offset
                    cutSequence = first.sequence
                }
                dropped += UInt64(unwritten.count)
                lock.unlock()
            }
        }
        lock.lock()
        done = true
        lock.broadcast()
        lock.unlock()
    }

    /// Appends an item's (or a checkpoint's) line. Bytes straight into the chunk, each type's quoted name made once:
    /// building each line as a string was most of the writer's time per item (`katana-bench micro --only dispatch-log`).
    private func appendLine(_ item: Pending, to chunk: inout [UInt8]) {
        if item.isCheckpoint {
            guard let value = item.value, let json = try? encoder.encode(value) else { return }
            chunk.append(contentsOf: #"{"checkpoint_after":"#.utf8)
            chunk.append(contentsOf: String(item.sequence).utf8)
            chunk.append(contentsOf: #","state":"#.utf8)
            chunk.append(contentsOf: json)
            chunk.append(contentsOf: "}\n".utf8)
            return
        }
        chunk.append(contentsOf: #"{"seq":"#.utf8)
        chunk.append(contentsOf: String(item.sequence).utf8)
        chunk.append(contentsOf: #","t_ns":"#.utf8)
        chunk.append(contentsOf: String(item.offset).utf8)
        chunk.append(contentsOf: item.kind == .updater ? #","kind":"updater","type":"#.utf8 : #","kind":"side_effect","type":"#.utf8)
        if let quoted = quotedTypes[item.type] {
            chunk.append(contentsOf: quoted)
        } else {
            let quoted = Array(Self.quoted(item.type).utf8)
            quotedTypes[item.type] = quoted
            chunk.append(contentsOf: quoted)
        }
        chunk.append(contentsOf: #","id":"#.utf8)
        chunk.append(contentsOf: String(item.id).utf8)
        chunk.append(contentsOf: #","parent":"#.utf8)
        chunk.append(contentsOf: String(item.parentID).utf8)
        if let value = item.value, let json = try? encoder.encode(value) {
            chunk.append(contentsOf: #","value":"#.utf8)
            chunk.append(contentsOf: json)
        }
        chunk.append(contentsOf: "}\n".utf8)
    }

    // One encoder per log, used by one thread at a time (`init`, then the writer's thread, then `finish` once it has
    // ended): building one per item was a large share of an item's encoding (`katana-bench micro --only dispatch-log`).
    private let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `text` as a JSON string. By hand: an encoder per call was most of what the writer's thread spent on an
    /// item's type name (`katana-bench micro --only dispatch-log`).
    static func quoted(_ text: String) -> String {
        var result = "\""
        result.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
