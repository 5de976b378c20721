#if canImport(Glibc)
import Glibc
#endif

/// Text written into raw memory a few bytes at a time and handed to a file descriptor in large writes — what
/// `katana-trace dump` writes millions of lines with. Raw memory rather than an array for the reason
/// `ProtobufWriter` gives (an array's uniqueness and bounds checks on every append cost a large share of the time);
/// `dump` is held to the reader's rate (≥ 1M events/s, see the trace toolkit guide).
final class TextBuffer {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int = 1 << 17) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    @inline(__always)
    private func reserve(_ more: Int) {
        guard count + more > capacity else { return }
        var grown = capacity * 2
        while grown < count + more { grown *= 2 }
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        moved.update(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = grown
    }

    @inline(__always)
    func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            reserve(buffer.count)
            (base + count).update(from: buffer.baseAddress!, count: buffer.count)
            count += buffer.count
        }
    }

    /// Bytes from raw memory.
    @inline(__always)
    func append(_ bytes: UnsafePointer<UInt8>, count length: Int) {
        reserve(length)
        if length <= 16 {
            // Keys, separators, short names: a loop beats a call to memmove at these sizes.
            for index in 0..<length { base[count + index] = bytes[index] }
        } else {
            (base + count).update(from: bytes, count: length)
        }
        count += length
    }

    /// A number in decimal: the digits are made from the right, two at a time.
    func append(_ value: UInt64) {
        reserve(20)
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var start = 24
        withUnsafeMutableBytes(of: &digits) { scratch in
            var rest = value
            while rest >= 100 {
                let pair = Int(rest % 100) * 2
                rest /= 100
                start -= 2
                scratch[start] = Self.pairs[pair]
                scratch[start + 1] = Self.pairs[pair + 1]
            }
            if rest >= 10 {
                let pair = Int(rest) * 2
                start -= 2
                scratch[start] = Self.pairs[pair]
                scratch[start + 1] = Self.pairs[pair + 1]
            } else {
                start -= 1
                scratch[start] = UInt8(ascii: "0") + UInt8(rest)
            }
            (base + count).update(from: scratch.baseAddress!.assumingMemoryBound(to: UInt8.self) + start, count: 24 - start)
        }
        count += 24 - start
    }

    /// "00" to "99".
    private static let pairs: [UInt8] = (0..<100).flatMap { [UInt8(ascii: "0") + UInt8($0 / 10), UInt8(ascii: "0") + UInt8($0 % 10)] }

    func append(_ value: Int64) {
        if value < 0 { append(UInt8(ascii: "-")) }
        append(value.magnitude)
    }

    /// Writes what is buffered to `descriptor` and empties the buffer; a descriptor that takes no more (a closed
    /// pipe) ends the writing quietly.
    func drain(to descriptor: Int32) {
        var offset = 0
        while offset < count {
            let written = write(descriptor, base + offset, count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
        count = 0
    }
}
