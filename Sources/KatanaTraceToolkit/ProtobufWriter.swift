#if canImport(Glibc)
import Glibc
#endif

/// Protocol Buffers' wire format, written into a growable byte buffer: what Perfetto's `TracePacket`s need (varints,
/// 64-bit fixed, length-delimited strings and messages), no more. No generated code and no library: the schema is a
/// handful of field numbers, named where they are used (`PerfettoSink`), and the export is checked against Perfetto's
/// own schema by the tests (`TraceExportTests`).
///
/// The buffer is raw memory rather than an array: an export writes billions of bytes a few at a time, and an
/// array's uniqueness check and bounds checks on every byte cost it a measurable share of its time (the export's
/// time is compared with `analyze`'s on the same recording, see the trace toolkit guide). Copies of a writer share
/// its buffer: a copy is only read (`append(contentsOf:)`), never written.
struct ProtobufWriter {
    private final class Storage {
        var base: UnsafeMutablePointer<UInt8>
        var capacity: Int

        init(capacity: Int) {
            self.capacity = max(capacity, 64)
            base = .allocate(capacity: self.capacity)
        }

        deinit { base.deallocate() }
    }

    private let storage: Storage
    private(set) var count = 0

    init(capacity: Int = 256) { storage = Storage(capacity: capacity) }

    private enum WireType: UInt64 {
        case varint = 0, fixed64 = 1, lengthDelimited = 2
    }

    /// Room for `more` bytes after `count`.
    @inline(__always)
    private func reserve(_ more: Int) {
        guard count + more > storage.capacity else { return }
        grow(count + more)
    }

    private func grow(_ needed: Int) {
        var capacity = storage.capacity * 2
        while capacity < needed { capacity *= 2 }
        let base = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        base.update(from: storage.base, count: count)
        storage.base.deallocate()
        storage.base = base
        storage.capacity = capacity
    }

    mutating func removeAll() { count = 0 }

    /// The bytes written so far, valid until the writer is next changed.
    func withBytes<R, Failure: Error>(_ body: (UnsafeRawBufferPointer) throws(Failure) -> R) throws(Failure) -> R {
        try body(UnsafeRawBufferPointer(start: storage.base, count: count))
    }

    /// Fields already encoded by another writer, appended to the message being written.
    mutating func append(contentsOf other: ProtobufWriter) {
        reserve(other.count)
        (storage.base + count).update(from: other.storage.base, count: other.count)
        count += other.count
    }

    @inline(__always)
    private mutating func varint(_ value: UInt64) {
        reserve(10)
        var value = value
        let base = storage.base
        while value >= 0x80 {
            base[count] = UInt8(truncatingIfNeeded: value) | 0x80
            count += 1
            value >>= 7
        }
        base[count] = UInt8(value)
        count += 1
    }

    @inline(__always)
    private mutating func tag(_ field: Int, _ wire: WireType) { varint(UInt64(field) << 3 | wire.rawValue) }

    /// An unsigned integer, bool or enum field.
    mutating func uint(_ field: Int, _ value: UInt64) {
        tag(field, .varint)
        varint(value)
    }

    /// A signed (`int32`/`int64`, not `sint`) field: two's complement, as protobuf encodes negative values.
    mutating func int(_ field: Int, _ value: Int64) { uint(field, UInt64(bitPattern: value)) }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, .fixed64)
        reserve(8)
        withUnsafeBytes(of: value.littleEndian) { (storage.base + count).update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: 8) }
        count += 8
    }

    mutating func string(_ field: Int, _ value: String) {
        tag(field, .lengthDelimited)
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            reserve(utf8.count)
            if let source = utf8.baseAddress { (storage.base + count).update(from: source, count: utf8.count) }
            count += utf8.count
        }
    }

    /// A nested message: `body` writes its fields. Its length goes in front, in one byte reserved ahead (moved
    /// right when the message turns out longer than 127 bytes, which a packet's parts rarely are).
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, .lengthDelimited)
        reserve(1)
        let mark = count
        count += 1
        body(&self)
        let length = count - mark - 1
        if length < 0x80 {
            storage.base[mark] = UInt8(length)
            return
        }
        var prefix: (UInt64, Int) = (0, 0)  // the varint's bytes, little-endian in one word, and their number
        var value = UInt64(length)
        while value >= 0x80 {
            prefix.0 |= (value & 0x7f | 0x80) << (8 * UInt64(prefix.1))
            prefix.1 += 1
            value >>= 7
        }
        prefix.0 |= value << (8 * UInt64(prefix.1))
        prefix.1 += 1
        let extra = prefix.1 - 1
        reserve(extra)
        (storage.base + mark + prefix.1).update(from: storage.base + mark + 1, count: length)
        withUnsafeBytes(of: prefix.0.littleEndian) {
            (storage.base + mark).update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: prefix.1)
        }
        count += extra
    }
}
