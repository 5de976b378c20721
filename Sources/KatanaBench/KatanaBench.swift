// The KatanaBench product: what a benchmark of your own imports. The harness and its CLI live in KatanaBenchCore
// (shared with katana-bench); this module re-exports them. It links no LTTng: `--trace` and `--trace-backend lttng`
// work in your CLI once its target adds the `KatanaLTTng` product too (KatanaBenchCLI.md → Your own workloads).
@_exported import KatanaBenchCore
@_exported import KatanaTrace
@_exported import KatanaDispatchLog  // DispatchLogTypes, for a BenchReplay
