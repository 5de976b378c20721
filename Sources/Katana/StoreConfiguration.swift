import Dispatch
import KatanaTrace

/// Where the store runs a piece of its own work (the state initializer, listener delivery).
/// An executor must run the blocks it is given one at a time, in the order given (a serial executor), or
/// listeners would see changes out of order.
public struct StoreExecutor: Sendable {
    @usableFromInline
    enum Kind: Sendable {
        case inline
        case queue(DispatchQueue)
        case custom(@Sendable (@escaping @Sendable () -> Void) -> Void)
    }

    @usableFromInline let kind: Kind

    /// Runs the work right away on the thread that has it: for listeners, the thread that applied the batch
    /// of updates (the dispatching thread when the updater lane was idle, else the store's updater queue).
    /// The fastest choice, and the default: nothing needs a run loop. A slow listener delays later updaters.
    public static let inline = StoreExecutor(kind: .inline)

    /// Hands the work to `queue` (which must be serial, e.g. `.main` in an app that runs `dispatchMain()`).
    public static func queue(_ queue: DispatchQueue) -> StoreExecutor { StoreExecutor(kind: .queue(queue)) }

    /// Hands the work to your own serial executor.
    public static func custom(_ run: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) -> StoreExecutor {
        StoreExecutor(kind: .custom(run))
    }

    @inlinable var isInline: Bool {
        if case .inline = kind { return true }
        return false
    }

    @usableFromInline func run(_ work: @escaping @Sendable () -> Void) {
        switch kind {
        case .inline: work()
        case let .queue(queue): queue.async(execute: work)
        case let .custom(run): run(work)
        }
    }
}

/// How a store runs its own work. The defaults suit Linux CLIs and servers: the state initializer runs inside
/// `Store.init` (so the store is ready when `init` returns) and listeners are called inline (see
/// ``StoreExecutor/inline``). The original Katana used the main queue for both, which nothing drains in a
/// Linux process without `dispatchMain()`; pass `.queue(.main)` to get that behaviour back.
public struct StoreConfiguration: Sendable {
    /// Where the state initializer runs (inline by default: the store is ready when its initialiser returns).
    public var stateInitializerExecutor: StoreExecutor
    /// Where listeners are called (inline by default: by the thread that applied the change).
    public var listenerExecutor: StoreExecutor
    /// Where this store's trace events go; `nil` (the default) means `KatanaTracing.backend` at creation time:
    /// LTTng when the app links the `KatanaLTTng` product, else no-op.
    public var traceBackend: (any TraceBackend)?
    /// Per-type latency budgets: a traced dispatch over its budget emits `budget_exceeded` (see ``LatencyBudgets``).
    public var latencyBudgets: LatencyBudgets
    /// The flood policy: how many updaters may wait in the lane before producer threads that already have updaters
    /// waiting there are made to wait (back-pressure) until it has drained to half. A dispatch inside a task (a side
    /// effect, any async code) never waits: it would block a thread of Swift's cooperative pool. `nil`: no limit (`dispatch` never
    /// waits, and under a flood the backlog, and the wait of every awaited updater behind it, grows without bound).
    /// The lane stays one FIFO either way: order is never traded for priority. See the README's threading contract.
    public var backlogLimit: Int?

    /// The default ``backlogLimit``: at the cost of a queued updater, an awaited updater waits a fraction of a
    /// millisecond behind a flood (`katana-bench run -s flood`).
    public static let defaultBacklogLimit = 1024

    /// Interceptors of the protocol form, run for every item before the closures given to the store's
    /// initialiser (see ``DispatchInterceptor``: the form to use on every dispatch's path).
    public var interceptors: [any DispatchInterceptor]

    /// Receives every updater the store applies and every side effect it starts, in order (a dispatch log's
    /// recorder); `nil`, the default, costs nothing.
    public var dispatchRecorder: (any DispatchRecorder)?

    /// A configuration; every argument has the default the properties describe.
    public init(
        stateInitializerExecutor: StoreExecutor = .inline,
        listenerExecutor: StoreExecutor = .inline,
        traceBackend: (any TraceBackend)? = nil,
        backlogLimit: Int? = StoreConfiguration.defaultBacklogLimit,
        latencyBudgets: LatencyBudgets = [],
        interceptors: [any DispatchInterceptor] = [],
        dispatchRecorder: (any DispatchRecorder)? = nil
    ) {
        self.interceptors = interceptors
        self.dispatchRecorder = dispatchRecorder
        self.latencyBudgets = latencyBudgets
        self.stateInitializerExecutor = stateInitializerExecutor
        self.listenerExecutor = listenerExecutor
        self.traceBackend = traceBackend
        self.backlogLimit = backlogLimit
    }
}
