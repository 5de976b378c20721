// The KatanaBench product: what a benchmark of your own imports. The harness and its CLI live in KatanaBenchCore
// (shared with katana-bench); this module re-exports them and links the LTTng provider, so `--trace` and
// `--trace-backend lttng` work in your CLI as in katana-bench (see README → Your own workloads).
@_exported import KatanaBenchCore
@_exported import KatanaTrace
@_exported import KatanaDispatchLog  // DispatchLogTypes, for a BenchReplay
import KatanaLTTng
