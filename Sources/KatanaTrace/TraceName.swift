import CKatanaTraceProvider
import Foundation

/// The name of a traced type: its `String(reflecting:)` form, plus a NUL-terminated copy that C tracepoints
/// can take without converting.
///
/// Names are interned for the life of the process — one storage per distinct string, never freed — so a
/// `TraceName` is a plain pointer: copying one, storing it in a queued item or passing it to a tracepoint costs no
/// reference counting, and two names are equal exactly when they are the same storage. Intern only bounded sets of
/// strings (type names, route names), not per-request data.
public struct TraceName: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline let storage: Unmanaged<Storage>

    /// The name as a Swift string.
    public var string: String { storage._withUnsafeGuaranteedRef { $0.string } }
    public var description: String { string }
    /// A NUL-terminated UTF-8 copy that lives as long as the process.
    /// (Inlinable, as `utf8Count` and `of(_:)`'s table probe: a recorded dispatch reads them in the store's code,
    /// where a call to each was a frame more per dispatch — the callgrind gate's `fire_and_forget_flight_recorder`.)
    @inlinable
    public var cString: UnsafePointer<CChar> { storage._withUnsafeGuaranteedRef { UnsafePointer($0.cString) } }
    /// The length of `cString` in bytes, without its NUL.
    @inlinable
    public var utf8Count: UInt32 { storage._withUnsafeGuaranteedRef { $0.utf8Count } }

    /// A name that is not tied to a type (store and router events, tests): the interned name of `string`.
    public init(_ string: String) { self = Self.cache.name(of: string) }

    @usableFromInline init(storage: Unmanaged<Storage>) { self.storage = storage }

    public static func == (lhs: TraceName, rhs: TraceName) -> Bool { lhs.storage.toOpaque() == rhs.storage.toOpaque() }
    public func hash(into hasher: inout Hasher) { hasher.combine(storage.toOpaque()) }

    /// The interned name of `type`. The first call for a type formats and stores it; later calls on the same
    /// thread are one probe of a small per-thread table (no hashing, no lock). Call it only when a backend is listening.
    @inlinable
    public static func of(_ type: Any.Type) -> TraceName {
        let key = UInt(bitPattern: ObjectIdentifier(type))
        if let cached = katana_name_cache_get(key) { return TraceName(storage: Unmanaged.fromOpaque(cached)) }
        return interning(type, key: key)
    }

    /// `of(_:)` for a type this thread's table does not hold: interned (formatted the first time in the process),
    /// then put in the table.
    @usableFromInline
    static func interning(_ type: Any.Type, key: UInt) -> TraceName {
        let name = cache.name(of: type)
        katana_name_cache_put(key, name.storage.toOpaque())  // interned: lives for the process, held unretained
        return name
    }

    private static let cache = Cache()

    @usableFromInline
    final class Storage: @unchecked Sendable {
        // Immutable after init; never freed (interned: the cache holds one reference for the whole process).
        @usableFromInline let string: String
        @usableFromInline let cString: UnsafeMutablePointer<CChar>
        @usableFromInline let utf8Count: UInt32

        init(_ string: String) {
            self.string = string
            cString = strdup(string)
            utf8Count = UInt32(clamping: strlen(cString))
        }
    }

    private final class Cache: @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var byType: [ObjectIdentifier: TraceName] = [:]
        private var byString: [String: TraceName] = [:]

        func name(of type: Any.Type) -> TraceName {
            let key = ObjectIdentifier(type)
            lock.lock()
            if let cached = byType[key] {
                lock.unlock()
                return cached
            }
            lock.unlock()
            let made = name(of: String(reflecting: type))
            lock.lock()
            defer { lock.unlock() }
            if let raced = byType[key] { return raced }
            byType[key] = made
            return made
        }

        func name(of string: String) -> TraceName {
            lock.lock()
            defer { lock.unlock() }
            if let cached = byString[string] { return cached }
            let made = TraceName(storage: Unmanaged.passRetained(Storage(string)))  // the one reference, kept forever
            byString[string] = made
            return made
        }
    }
}
