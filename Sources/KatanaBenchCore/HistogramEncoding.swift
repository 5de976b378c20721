import Foundation
import Histogram

/// HdrHistogram's standard V2 encoding, compressed form, in base64 — what HdrHistogram's own tools (Java, C, Go,
/// Python, Rust `decodeFromCompressedByteBuffer` and the `.hlog` format) read and write, so a result's histograms can
/// be merged and re-percentiled later, by katana-bench or anything else.
///
/// Layout (big-endian): compressed cookie, length, then a zlib stream of the V2 encoding: cookie, payload length,
/// normalizing index offset (0), significant digits, lowest discernible value, highest trackable value,
/// integer-to-double ratio (1.0), then the counts array up to the last non-zero count as ZigZag LEB128 numbers, a run
/// of zero counts written as its negated length. The zlib stream uses *stored* deflate blocks: every inflater reads
/// them, no compression library is needed, and the zero-run encoding already keeps a latency histogram to a few
/// hundred bytes.
enum HistogramEncoding {
    static let cookie: UInt32 = 0x1c84_9313
    static let compressedCookie: UInt32 = 0x1c84_9314

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    static func encode(_ histogram: LatencyHistogram) -> String {
        let counts = countsArray(histogram)
        var payload: [UInt8] = []
        var index = 0
        while index < counts.count {
            if counts[index] == 0 {
                var zeros = 0
                while index < counts.count, counts[index] == 0 { zeros += 1; index += 1 }
                appendZigZag(zeros > 1 ? -Int64(zeros) : 0, to: &payload)
            } else {
                appendZigZag(Int64(clamping: counts[index]), to: &payload)
                index += 1
            }
        }
        var encoded: [UInt8] = []
        append32(cookie, to: &encoded)
        append32(UInt32(payload.count), to: &encoded)
        append32(0, to: &encoded)
        append32(UInt32(histogram.numberOfSignificantValueDigits.rawValue), to: &encoded)
        append64(histogram.lowestDiscernibleValue, to: &encoded)
        append64(histogram.highestTrackableValue, to: &encoded)
        append64((1.0).bitPattern, to: &encoded)
        encoded += payload
        let stream = zlibStored(encoded)
        var compressed: [UInt8] = []
        append32(compressedCookie, to: &compressed)
        append32(UInt32(stream.count), to: &compressed)
        return Data(compressed + stream).base64EncodedString()
    }

    static func decode(_ text: String) throws -> LatencyHistogram {
        guard let data = Data(base64Encoded: text) else { throw Failure("not base64") }
        var outer = Reader(Array(data))
        guard try outer.u32() == compressedCookie else { throw Failure("not a compressed HdrHistogram V2 encoding") }
        let length = Int(try outer.u32())
        let bytes = try inflateStored(try outer.bytes(length))
        var reader = Reader(bytes)
        guard try reader.u32() == cookie else { throw Failure("not an HdrHistogram V2 encoding") }
        let payloadLength = Int(try reader.u32())
        guard try reader.u32() == 0 else { throw Failure("a normalizing index offset is not supported") }
        guard let digits = SignificantDigits(rawValue: Int8(clamping: try reader.u32())) else {
            throw Failure("significant digits out of range")
        }
        let lowest = try reader.u64()
        let highest = try reader.u64()
        _ = try reader.u64()  // integer-to-double ratio: katana-bench's values are integers
        // `highest / 2 >= lowest`, not `highest >= 2 * lowest`: a lowest of 2^63 or more overflowed the product (a trap).
        guard lowest >= 1, highest / 2 >= lowest, highest <= UInt64.max / 2 else { throw Failure("value range out of bounds") }
        var histogram = LatencyHistogram(lowestDiscernibleValue: lowest, highestTrackableValue: highest,
                                         numberOfSignificantValueDigits: digits)
        let layout = Layout(lowest: lowest, digits: digits)
        var payload = Reader(try reader.bytes(payloadLength))
        var index = 0
        while !payload.atEnd {
            let value = try payload.zigZag()
            if value < 0 {
                guard value > -(1 << 40) else { throw Failure("a zero run is too long") }
                index += Int(-value)
            } else {
                if value > 0 {
                    let recorded = layout.value(at: index)
                    guard recorded <= highest, histogram.record(recorded, count: UInt64(value)) else {
                        throw Failure("a count lies beyond the histogram's range")
                    }
                }
                index += 1
            }
        }
        return histogram
    }

    /// The histogram's counts array in HdrHistogram's layout, up to the bucket of its largest value. Read bucket by
    /// bucket through `countForValue` (the histogram's iterators cost several times more per bucket, which a debug or
    /// ThreadSanitizer build of a run writing a dozen histograms felt).
    static func countsArray(_ histogram: LatencyHistogram) -> [UInt64] {
        guard histogram.totalCount > 0 else { return [] }
        let layout = Layout(lowest: histogram.lowestDiscernibleValue, digits: histogram.numberOfSignificantValueDigits)
        let last = layout.index(of: histogram.maxRecorded)
        var counts: [UInt64] = []
        counts.reserveCapacity(last + 1)
        for index in 0...last { counts.append(histogram.countForValue(layout.value(at: index))) }
        return counts
    }

    /// HdrHistogram's index → value mapping (the lowest value of the bucket at `index`).
    struct Layout {
        let unitMagnitude: Int
        let subBucketHalfCountMagnitude: Int
        let subBucketHalfCount: Int

        init(lowest: UInt64, digits: SignificantDigits) {
            let largestSingleUnit = 2 * Int(pow(10, Double(digits.rawValue)))
            let subBucketCountMagnitude = Int(ceil(log2(Double(largestSingleUnit))))
            subBucketHalfCountMagnitude = max(subBucketCountMagnitude, 1) - 1
            subBucketHalfCount = 1 << subBucketHalfCountMagnitude
            unitMagnitude = 63 - lowest.leadingZeroBitCount
        }

        /// The index of the bucket holding `value` (HdrHistogram's `countsArrayIndex`).
        func index(of value: UInt64) -> Int {
            let subBucketMask = UInt64(2 * subBucketHalfCount - 1) << UInt64(unitMagnitude)
            let leadingZeroCountBase = 64 - unitMagnitude - subBucketHalfCountMagnitude - 1
            let bucket = leadingZeroCountBase - (value | subBucketMask).leadingZeroBitCount
            let subBucket = Int(value >> UInt64(bucket + unitMagnitude))
            return ((bucket + 1) << subBucketHalfCountMagnitude) + (subBucket - subBucketHalfCount)
        }

        func value(at index: Int) -> UInt64 {
            var bucket = (index >> subBucketHalfCountMagnitude) - 1
            var subBucket = (index & (subBucketHalfCount - 1)) + subBucketHalfCount
            if bucket < 0 {
                subBucket -= subBucketHalfCount
                bucket = 0
            }
            let shift = bucket + unitMagnitude
            // Past the top of a 64-bit value (only a damaged index gets there): out of any histogram's range.
            guard shift < UInt64(subBucket).leadingZeroBitCount else { return .max }
            return UInt64(subBucket) << UInt64(shift)
        }
    }

    // MARK: - Bytes

    private static func append32(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    private static func append64(_ value: UInt64, to bytes: inout [UInt8]) {
        append32(UInt32(value >> 32), to: &bytes)
        append32(UInt32(truncatingIfNeeded: value), to: &bytes)
    }

    private static func appendZigZag(_ value: Int64, to bytes: inout [UInt8]) {
        var zigZag = UInt64(bitPattern: (value << 1) ^ (value >> 63))
        while zigZag >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: zigZag) | 0x80)
            zigZag >>= 7
        }
        bytes.append(UInt8(zigZag))
    }

    struct Reader {
        private let bytes: [UInt8]
        private var position = 0
        init(_ bytes: [UInt8]) { self.bytes = bytes }
        var atEnd: Bool { position >= bytes.count }

        mutating func bytes(_ count: Int) throws -> [UInt8] {
            guard count >= 0, count <= bytes.count - position else { throw Failure("truncated") }
            defer { position += count }
            return Array(bytes[position..<position + count])
        }

        mutating func u32() throws -> UInt32 { try bytes(4).reduce(0) { $0 << 8 | UInt32($1) } }
        mutating func u64() throws -> UInt64 { try bytes(8).reduce(0) { $0 << 8 | UInt64($1) } }

        /// ZigZag LEB128, at most 9 bytes (the ninth carries 8 bits, as HdrHistogram writes it).
        mutating func zigZag() throws -> Int64 {
            var value: UInt64 = 0
            for byteIndex in 0..<9 {
                let byte = try bytes(1)[0]
                if byteIndex == 8 {
                    value |= UInt64(byte) << 56
                    break
                }
                value |= UInt64(byte & 0x7f) << UInt64(7 * byteIndex)
                if byte & 0x80 == 0 { break }
            }
            return Int64(bitPattern: value >> 1) ^ -Int64(bitPattern: value & 1)
        }
    }

    // MARK: - zlib with stored blocks

    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]  // deflate, 32K window, no preset dictionary; header checksum holds
        var offset = 0
        repeat {
            let length = min(65_535, data.count - offset)
            let final: UInt8 = offset + length == data.count ? 1 : 0
            out += [final, UInt8(length & 0xff), UInt8(length >> 8), UInt8(~length & 0xff), UInt8((~length >> 8) & 0xff)]
            out += data[offset..<offset + length]
            offset += length
        } while offset < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65_521
            b = (b + a) % 65_521
        }
        append32(b << 16 | a, to: &out)
        return out
    }

    static func inflateStored(_ stream: [UInt8]) throws -> [UInt8] {
        guard stream.count >= 6, stream[0] & 0x0f == 8, (UInt16(stream[0]) << 8 | UInt16(stream[1])) % 31 == 0 else {
            throw Failure("not a zlib stream")
        }
        var position = 2, out: [UInt8] = []
        while true {
            guard position < stream.count else { throw Failure("truncated zlib stream") }
            let header = stream[position]
            guard header & 0x06 == 0 else {
                throw Failure("deflate-compressed; katana-bench reads the stored blocks it writes (inflate it with zlib first)")
            }
            guard position + 5 <= stream.count else { throw Failure("truncated zlib stream") }
            let length = Int(stream[position + 1]) | Int(stream[position + 2]) << 8
            let check = Int(stream[position + 3]) | Int(stream[position + 4]) << 8
            guard length == ~check & 0xffff, position + 5 + length <= stream.count else { throw Failure("damaged zlib stream") }
            out += stream[(position + 5)..<(position + 5 + length)]
            position += 5 + length
            if header & 1 == 1 { break }
        }
        return out
    }
}
