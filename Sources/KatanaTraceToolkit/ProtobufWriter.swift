/// Protocol Buffers' wire format, written into a byte array: what Perfetto's `TracePacket`s need (varints, 64-bit
/// fixed, length-delimited strings and messages), no more. No generated code and no library: the schema is a handful
/// of field numbers, named where they are used (`PerfettoSink`), and the export is checked against Perfetto's own
/// schema by the tests (`PerfettoExportTests`).
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    private enum WireType: UInt64 {
        case varint = 0, fixed64 = 1, lengthDelimited = 2
    }

    mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// Fields already encoded, appended to the message being written.
    mutating func append(contentsOf encoded: [UInt8]) { bytes.append(contentsOf: encoded) }

    @inline(__always)
    private mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
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
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func string(_ field: Int, _ value: String) {
        tag(field, .lengthDelimited)
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// A nested message: `body` writes its fields. Its length goes in front, in one byte reserved ahead (shifted
    /// right when the message turns out longer than 127 bytes, which a packet's parts rarely are).
    mutating func message(_ field: Int, _ body: (inout ProtobufWriter) -> Void) {
        tag(field, .lengthDelimited)
        let mark = bytes.count
        bytes.append(0)
        body(&self)
        let length = bytes.count - mark - 1
        if length < 0x80 {
            bytes[mark] = UInt8(length)
            return
        }
        var prefix: [UInt8] = []
        var value = UInt64(length)
        while value >= 0x80 {
            prefix.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        prefix.append(UInt8(value))
        bytes.replaceSubrange(mark..<mark + 1, with: prefix)
    }
}
