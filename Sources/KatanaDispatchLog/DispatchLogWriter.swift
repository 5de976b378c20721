import Foundation

/// Why a log could not be written or read: one line.
public struct DispatchLogError: Error, CustomStringConvertible, Equatable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Writes a dispatch log (``DispatchLogFormat``) to a file, up to a size limit: the items past it are counted, not
/// written, and the log's last line says where it was cut. Items are encoded and written on a thread of the writer's
/// own, so `append` costs its caller a lock and an array append (and a copy of the value); `finish` waits for them.
/// Should that thread fall `maximumPending` items behind, the log is cut there too (memory stays bounded).
public final class DispatchLogWriter: @unchecked Sendable {
    public let path: String
    public let limitBytes: Int
    private let file: FileHandle
    private let started: UInt64 = DispatchLogWriter.monotonicNow()
    // Guarded by `lock`: items waiting to be written, and what the writer thread has done.
    private let lock = NSCondition()
    private var pending: [Pending] = []
    private var sequence: UInt64 = 0
    private var finishing = false
    private var done = false
    private var cutAt: UInt64?
    private var cutReason = "size limit"
    private var dropped: UInt64 = 0
    private var failure: DispatchLogError?
    private var written = 0  // bytes, writer thread only (and `finish` once it has ended)

    private struct Pending {
        var sequence: UInt64
        var offset: UInt64
        var kind: DispatchLogKind
        var type: String
        var id: UInt64
        var parentID: UInt64
        var value: (any Encodable & Sendable)?
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
        if let initialState, let json = try? Self.encoder.encode(initialState) {
            header += ",\"initial_state\":" + String(decoding: json, as: UTF8.self)
        }
        header += "}\n"
        guard header.utf8.count + Self.endRoom <= limitBytes else {
            throw DispatchLogError("the log's header alone (\(header.utf8.count) bytes) does not fit its \(limitBytes)-byte limit")
        }
        do { try file.write(contentsOf: Data(header.utf8)) } catch { throw DispatchLogError("cannot write \(path): \(error.localizedDescription)") }
        written = header.utf8.count
        let thread = Thread { [self] in drain() }
        thread.start()
    }

    /// Room kept for the last line (a cut's, or a small final state's).
    static let endRoom = 256
    /// Items waiting to be encoded, at most: past it the log is cut ("writer fell behind").
    static let maximumPending = 1 << 16

    /// Nanoseconds since recording started (the `t_ns` of an item dispatched now).
    public var now: UInt64 { Self.monotonicNow() &- started }

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
            cutReason = "writer fell behind"
            dropped += 1
            return
        }
        sequence += 1
        pending.append(Pending(sequence: sequence, offset: offset, kind: kind, type: type, id: id, parentID: parentID, value: value))
        if pending.count == 1 { lock.signal() }
    }

    /// Writes what is pending and the last line (`finalState` when the state is `Encodable`), and closes the file.
    public func finish(finalState: (any Encodable & Sendable)?) throws(DispatchLogError) {
        lock.lock()
        finishing = true
        lock.broadcast()
        while !done { lock.wait() }
        let (cutAt, dropped, failure, cutReason) = (self.cutAt, self.dropped, self.failure, self.cutReason)
        lock.unlock()
        if let failure { throw failure }
        var end: String
        if let cutAt {
            end = "{\"end\":\"cut\",\"reason\":\(Self.quoted(cutReason)),\"limit_bytes\":\(limitBytes),\"at_ns\":\(cutAt),\"items_dropped\":\(dropped)}\n"
        } else {
            end = "{\"end\":\"complete\""
            if let finalState, let json = try? Self.encoder.encode(finalState), written + end.utf8.count + json.count + 20 <= limitBytes {
                end += ",\"final_state\":" + String(decoding: json, as: UTF8.self)
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
        while true {
            lock.lock()
            while pending.isEmpty && !finishing { lock.wait() }
            let batch = pending
            pending.removeAll(keepingCapacity: true)
            let last = finishing && batch.isEmpty
            lock.unlock()
            if last { break }
            // Once cut, nothing more is written: a later, smaller item must not slip in after the hole.
            lock.lock()
            let alreadyCut = cutAt != nil
            lock.unlock()
            var chunk = Data()
            var firstUnwritten = alreadyCut ? 0 : batch.count
            if !alreadyCut {
                for (index, item) in batch.enumerated() {
                    let line = Self.line(item)
                    if written + chunk.count + line.count + Self.endRoom > limitBytes {
                        firstUnwritten = index
                        break
                    }
                    chunk.append(line)
                }
            }
            var writeFailure: DispatchLogError?
            if !chunk.isEmpty {
                do {
                    try file.write(contentsOf: chunk)
                    written += chunk.count
                } catch {
                    writeFailure = DispatchLogError("cannot write \(path): \(error.localizedDescription)")
                }
            }
            if firstUnwritten < batch.count || writeFailure != nil {
                lock.lock()
                if let writeFailure, failure == nil { failure = writeFailure }
                cutAt = cutAt ?? batch[min(firstUnwritten, batch.count - 1)].offset
                dropped += UInt64(batch.count - firstUnwritten)
                lock.unlock()
            }
        }
        lock.lock()
        done = true
        lock.broadcast()
        lock.unlock()
    }

    private static func line(_ item: Pending) -> Data {
        var text = "{\"seq\":\(item.sequence),\"t_ns\":\(item.offset),\"kind\":\"\(item.kind.rawValue)\",\"type\":\(quoted(item.type)),"
            + "\"id\":\(item.id),\"parent\":\(item.parentID)"
        if let value = item.value, let json = try? encoder.encode(value) {
            text += ",\"value\":" + String(decoding: json, as: UTF8.self)
        }
        text += "}\n"
        return Data(text.utf8)
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    static func quoted(_ text: String) -> String {
        String(decoding: (try? JSONEncoder().encode(text)) ?? Data("\"?\"".utf8), as: UTF8.self)
    }

    static func monotonicNow() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
