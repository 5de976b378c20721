#if KATANA_INJECTED_REGRESSION
import Glibc
import Synchronization

/// A deliberate slowdown that exists only in builds with the `InjectedRegression` trait, so that CI can prove its
/// performance gate fails when dispatch gets slower (`scripts/perf-gate callgrind --inject-regression`). Normal
/// builds contain none of this, and their dispatch path has no check for it.
@usableFromInline
enum InjectedRegression {
    /// Keeps the allocation and the arithmetic observable, so the optimiser cannot drop them.
    static let sink = Atomic<Int>(0)

    /// One heap allocation and about a hundred instructions, per dispatched updater.
    @usableFromInline @inline(never)
    static func perDispatch() {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for index in 0..<24 { hash = (hash ^ UInt64(index)) &* 0x100_0000_01b3 }
        let block = malloc(32)
        sink.store(Int(bitPattern: block) ^ Int(truncatingIfNeeded: hash), ordering: .relaxed)
        free(block)
    }
}
#endif
