import Foundation

/// The name of a traced type: its `String(reflecting:)` form, plus a NUL-terminated copy that C tracepoints
/// can take without converting. Names are interned: one `TraceName` per type for the life of the process.
public struct TraceName: Sendable, Hashable, CustomStringConvertible {
    private let storage: Storage

    public var string: String { storage.string }
    public var description: String { storage.string }
    /// A NUL-terminated UTF-8 copy that lives as long as the process.
    public var cString: UnsafePointer<CChar> { UnsafePointer(storage.cString) }

    /// A name that is not tied to a type (store and router events, tests).
    public init(_ string: String) { storage = Storage(string) }

    public static func == (lhs: TraceName, rhs: TraceName) -> Bool { lhs.storage.string == rhs.storage.string }
    public func hash(into hasher: inout Hasher) { hasher.combine(storage.string) }

    /// The interned name of `type`. The first call for a type formats and stores it; later calls on the same
    /// thread are one lock-free lookup in a per-thread cache. Call it only when a backend is listening.
    public static func of(_ type: Any.Type) -> TraceName {
        let key = ObjectIdentifier(type)
        let local = ThreadCache.current
        if let name = local.names[key] { return name }
        let name = cache.name(of: type)
        local.names[key] = name
        return name
    }

    private static let cache = Cache()

    /// One thread's copy of the names it has used; only that thread touches it.
    private final class ThreadCache {
        var names: [ObjectIdentifier: TraceName] = [:]

        private static let key: pthread_key_t = {
            var key = pthread_key_t()
            pthread_key_create(&key) { raw in if let raw { Unmanaged<ThreadCache>.fromOpaque(raw).release() } }
            return key
        }()

        static var current: ThreadCache {
            if let raw = pthread_getspecific(key) { return Unmanaged<ThreadCache>.fromOpaque(raw).takeUnretainedValue() }
            let cache = ThreadCache()
            pthread_setspecific(key, Unmanaged.passRetained(cache).toOpaque())
            return cache
        }
    }

    private final class Storage: @unchecked Sendable {
        // Immutable after init; the C buffer is never freed because interned names live for the whole process.
        let string: String
        let cString: UnsafeMutablePointer<CChar>

        init(_ string: String) {
            self.string = string
            cString = strdup(string)
        }
    }

    private final class Cache: @unchecked Sendable {
        // Guarded by `lock`.
        private let lock = NSLock()
        private var names: [ObjectIdentifier: TraceName] = [:]

        func name(of type: Any.Type) -> TraceName {
            let key = ObjectIdentifier(type)
            lock.lock()
            if let cached = names[key] {
                lock.unlock()
                return cached
            }
            lock.unlock()
            let made = TraceName(String(reflecting: type))
            lock.lock()
            defer { lock.unlock() }
            if let raced = names[key] { return raced }
            names[key] = made
            return made
        }
    }
}
