import CKatanaTraceProvider
import Foundation

/// The process-wide tracing set-up: which backend new stores emit to, and the id sequence.
///
/// With zero configuration the backend is the native provider linked into the process — LTTng-UST when the app
/// links the `KatanaLTTng` product, so a running `lttng` session that enables `katana:*` sees every dispatch —
/// and `NoOpTraceBackend` when it links none.
/// A store reads the backend once, when it is created: bootstrap before creating stores.
public enum KatanaTracing {
    private static let state = BackendBox()

    /// The backend new stores will use.
    public static var backend: any TraceBackend { state.get() }

    /// Replaces the backend for stores created from now on. Unlike swift-log's bootstrap this may be called
    /// more than once (tests swap in an in-memory backend per test).
    public static func bootstrap(_ backend: any TraceBackend) { state.set(backend) }

    /// The default backend of this process: the linked native provider (`NativeTraceBackend.linked`, LTTng when
    /// the app links `KatanaLTTng`), else no-op.
    public static var defaultBackend: any TraceBackend {
        if let native = NativeTraceBackend.linked { return native }
        return NoOpTraceBackend()
    }

    /// A process-unique, non-zero id for one dispatch (or transition): from a block of ids this thread took, so
    /// threads dispatching at once share no counter (ids are unique, not in time order across threads).
    /// (Inlinable: called, it was a frame more per traced dispatch, the callgrind gate's `fire_and_forget_*` rows.)
    @inlinable
    public static func nextID() -> UInt64 { katana_next_id() }

    private final class BackendBox: @unchecked Sendable {
        // Guarded by `lock` (NSLock, which ThreadSanitizer understands).
        private let lock = NSLock()
        private var backend: any TraceBackend = KatanaTracing.defaultBackend

        func get() -> any TraceBackend {
            lock.lock()
            defer { lock.unlock() }
            return backend
        }

        func set(_ new: any TraceBackend) {
            lock.lock()
            backend = new
            lock.unlock()
        }
    }
}
