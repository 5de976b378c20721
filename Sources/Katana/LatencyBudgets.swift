import Glibc
import CKatanaTraceProvider
import KatanaTrace

/// Per-type latency budgets for the flight recorder: while a trace backend listens, a dispatch of a budgeted type
/// whose service (begin → end: an updater's apply, a side effect's body) takes longer than its budget emits a
/// `budget_exceeded` event (id, type, budget, actual) just before its `dispatch_end`. Pair it with
/// `katana-trace record --snapshot`, which keeps the last megabytes of the trace in memory and saves them each time
/// that event fires — Java Flight Recorder's thresholds, for Katana dispatches.
///
///     StoreConfiguration(latencyBudgets: [
///         .budget(FetchProfile.self, .milliseconds(50)),
///         .budget(ApplyPage.self, .microseconds(200)),
///     ])
///
/// A budget is its dispatched type's: an updater dispatched `tracedAs:` another type (as KatanaRedux and KatanaRouter
/// dispatch their actions) is timed against its own type's budget, and reported under the name it is traced as.
///
/// Costs nothing unless a backend listens; then two clock reads per dispatch of a budgeted type.
public struct LatencyBudgets: Sendable, ExpressibleByArrayLiteral {
    /// One type's budget.
    public struct Budget: Sendable {
        let type: ObjectIdentifier
        let typeName: String
        let nanoseconds: UInt64

        /// A budget of `limit` for every dispatch of `type` (service time: begin to end).
        public static func budget(_ type: any Dispatchable.Type, _ limit: Duration) -> Budget {
            Budget(type: ObjectIdentifier(type), typeName: String(reflecting: type), nanoseconds: limit.clampedNanoseconds)
        }
    }

    @usableFromInline let nanoseconds: [ObjectIdentifier: UInt64]

    /// Budgets for the given types (a type given twice keeps its last budget).
    public init(_ budgets: [Budget]) {
        nanoseconds = Dictionary(budgets.map { ($0.type, $0.nanoseconds) }, uniquingKeysWith: { _, last in last })
    }

    public init(arrayLiteral budgets: Budget...) { self.init(budgets) }

    /// Whether no type has a budget (then nothing is timed).
    public var isEmpty: Bool { nanoseconds.isEmpty }

    /// The budget of `type`, if it has one.
    public func budget(for type: any Dispatchable.Type) -> Duration? {
        nanoseconds[ObjectIdentifier(type)].map { .nanoseconds(Int64(clamping: $0)) }
    }

    @inlinable
    func limit(for type: Any.Type) -> UInt64? { nanoseconds.isEmpty ? nil : nanoseconds[ObjectIdentifier(type)] }

    /// Monotonic nanoseconds, never 0 (0 means "not timed").
    @inlinable
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec) | 1
    }

    /// If `type` has a budget: the start time to hand to `check`; 0 otherwise.
    @inlinable
    func start(for type: Any.Type) -> UInt64 { limit(for: type) == nil ? 0 : Self.now() }

    /// Emits `budget_exceeded` when the dispatch timed from `started` took longer than its type's budget.
    @inlinable
    func check(_ type: Any.Type, started: UInt64, id: UInt64, kind: DispatchKind, name: TraceName, tracer: any TraceBackend) {
        guard started != 0, let limit = limit(for: type) else { return }
        let actual = Self.now() &- started
        if actual > limit {
            tracer.budgetExceeded(BudgetExceededEvent(id: id, kind: kind, name: name, budgetNanoseconds: limit, actualNanoseconds: actual))
        }
    }
}
