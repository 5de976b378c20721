import CLTTng
import KatanaTrace

/// Katana's LTTng-UST tracepoints (provider `katana`). Adding the `KatanaLTTng` product to a target is the whole
/// opt-in: its provider registers itself before `main`, and every store created afterwards traces to LTTng by
/// default — near-free until a session enables `katana:*`. Use `backend` to compose LTTng with other backends:
///
///     KatanaTracing.bootstrap(MultiplexTraceBackend([LTTngTracing.backend, myBackend]))
///
/// Record with `lttng create S && lttng enable-event -u 'katana:*' && lttng start`, run, `lttng stop`,
/// `babeltrace2 ~/lttng-traces/S*` (or `katana-trace record`). If the session daemon is missing or dies, the tracepoints
/// stay disabled and the application carries on unaffected.
public enum LTTngTracing {
    /// Whether this build has the tracepoint provider compiled in (the package's `LTTng` trait, on by default).
    public static var isCompiledIn: Bool { katana_lttng_provider() != nil }

    /// The LTTng backend; a no-op backend when the provider is not compiled in.
    public static var backend: any TraceBackend {
        guard let provider = katana_lttng_provider() else { return NoOpTraceBackend() }
        return NativeTraceBackend(provider: provider)
    }
}
