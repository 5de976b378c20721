import KatanaTrace
import Synchronization

/// The side effects of one store that are running now: their count (the trace's `parallelism`) and their handles,
/// so that releasing the store can cancel them. Side-effect tasks hold this, never the store itself: a running side
/// effect must not keep its store alive.
@usableFromInline
final class SideEffectRegistry: @unchecked Sendable {
    // `first`, `running` (and the cells' `runningNext`/`runningPrevious`) and `closed` are guarded by `lock`;
    // `tracer` is immutable; `host` is written once, in the store's init, before the store is shared.
    /// The store's completion lock, which its handle cells share: a side effect that ends leaves this list and
    /// resolves its handle under one acquisition (the callgrind gate's `side_effect_round_trip`).
    @usableFromInline let lock: Lock
    /// The running side effects' cells, linked through their `runningNext`/`runningPrevious`: entering and leaving
    /// is a few pointer writes, where a dictionary hashed twice and churned its storage (the callgrind gate's
    /// `side_effect_round_trip`). Unretained, as the links are: each cell is held by its task while it is in the list.
    @usableFromInline @exclusivity(unchecked) var first: Unmanaged<HandleCell>?
    @usableFromInline @exclusivity(unchecked) var running = 0
    /// Set when the store is released: nothing more starts.
    @usableFromInline @exclusivity(unchecked) var closed = false
    @usableFromInline let tracer: any TraceBackend
    /// The store's dispatch recorder, told of each side effect it starts.
    @usableFromInline let dispatchRecorder: (any DispatchRecorder)?
    /// `running`, readable without the lock (for traces' `parallelism` and `sideEffectsRunning`).
    @usableFromInline let inFlight = Atomic<Int>(0)

    @usableFromInline let budgets: LatencyBudgets

    /// `tracer.wrapsSideEffectBodies`, read once.
    @usableFromInline let wrapsBodies: Bool

    /// A context of the store's own types with no scope (see `ScopedSideEffectContext`): a side effect's erased
    /// context (Katana 6's `anySideEffect`, a side effect declaring other types) is a copy of it with the side
    /// effect's cell. Here, as `environment` is, so that a side effect gets its context without loading the store's
    /// weak reference (the callgrind gate's `side_effect_round_trip`). A `let`: the copy is made in place (read from a
    /// `var`, the existential was copied out first).
    @usableFromInline let contextPrototype: any ScopedSideEffectContext
    /// The prototype's environment (a `ContextEnvironment<S, D>` of the store's types) and that type: a side effect
    /// declaring the store's types makes its context from them, typed, without the erased one
    /// (`SideEffect._katanaRun(in:scope:)`). The type is kept rather than asked of `environment` each time: `type(of:)`
    /// on a class reference is a call into the Swift runtime, one per side effect.
    @usableFromInline let environment: AnyObject
    @usableFromInline let environmentType: ObjectIdentifier

    /// Whether the store has interceptors (written once, in the store's `becomeReady`, before any side effect starts;
    /// true until then, so a side effect never skips them).
    @usableFromInline @exclusivity(unchecked) var intercepts = true

    /// The store, weakly (set once in the store's init, before the store is shared; a weak load is atomic with
    /// respect to the object's deinit). Here rather than in an object of its own: a side effect's task holds one
    /// shared object fewer (a retain and a release on a line every pool thread touches).
    @usableFromInline @exclusivity(unchecked) weak var host: (any SideEffectHost)?

    init(lock: Lock, tracer: any TraceBackend, dispatchRecorder: (any DispatchRecorder)?, budgets: LatencyBudgets,
         contextPrototype: any ScopedSideEffectContext) {
        self.dispatchRecorder = dispatchRecorder
        self.lock = lock
        self.contextPrototype = contextPrototype
        environment = contextPrototype.environmentObject
        environmentType = ObjectIdentifier(type(of: environment))
        self.tracer = tracer
        self.budgets = budgets
        wrapsBodies = tracer.wrapsSideEffectBodies
    }

    @inlinable var count: Int { inFlight.load(ordering: .relaxed) }

    /// Counts a side effect in; returns the number running with it, or nil once the store is gone.
    @inlinable
    func enter(_ cell: HandleCell) -> Int? {
        let entering = Unmanaged.passUnretained(cell)
        lock.lock()
        if closed {
            lock.unlock()
            return nil
        }
        cell.runningNext = first
        first?._withUnsafeGuaranteedRef { $0.runningPrevious = entering }
        first = entering
        running &+= 1
        let count = running
        inFlight.store(count, ordering: .relaxed)
        lock.unlock()
        return count
    }

    /// Counts a side effect out (once, after `enter` returned a count for it) and resolves its cell as `how` says,
    /// under one acquisition of the lock the cells share (the callgrind gate's `side_effect_round_trip`).
    @inlinable
    func leave(_ cell: HandleCell, resolving how: SideEffectResolution, with outcome: HandleCell.Outcome) {
        assert(cell.lock === lock, "a cell of another store")
        lock.lock()
        let (next, previous) = (cell.runningNext, cell.runningPrevious)
        if let previous { previous._withUnsafeGuaranteedRef { $0.runningNext = next } } else { first = next }
        next?._withUnsafeGuaranteedRef { $0.runningPrevious = previous }
        cell.runningNext = nil
        cell.runningPrevious = nil
        running &-= 1
        inFlight.store(running, ordering: .relaxed)
        switch how {
        case .completion: cell.resolveLocked()
        case .outcome: cell.resolveLocked(outcome)
        case .none: break
        }
        lock.unlock()
    }

    /// The store went away: cancel every running side effect and refuse new ones.
    func close() {
        lock.lock()
        closed = true
        var cells: [HandleCell] = []
        var cell = first
        while let current = cell {
            cells.append(current.takeUnretainedValue())  // alive: its task has not left the list yet
            cell = current._withUnsafeGuaranteedRef { $0.runningNext }
        }
        lock.unlock()
        for cell in cells { cell.cancel() }
    }
}

/// What a side effect's task needs from its store: not generic, so the task's code (in `SideEffectRunner`) runs
/// without looking up the store's generic type metadata on every side effect.
@usableFromInline
protocol SideEffectHost: AnyObject, Sendable {
    /// Runs the interceptors for a side effect, on its task, before its body.
    func intercept(_ item: SideEffectItem) -> SideEffectStep
}

/// How a side effect's end resolves its handle (`SideEffectRunner.finish`, `SideEffectRegistry.leave`).
@usableFromInline
enum SideEffectResolution: UInt8, Sendable {
    /// As an applied updater's, `()`: the handle's value type is `Void`, so only completion is reported.
    case completion
    /// With the outcome given: the body's value, or what it threw.
    case outcome
    /// Not at all: an updater an interceptor put in the side effect's place resolves it when applied.
    case none
}

/// What a side effect's task does after its begin (and the interceptors, when it has any to run).
@usableFromInline
enum SideEffectStep: Sendable {
    /// Nothing: it must not run (cancelled before it started, or its store is gone), and its handle already says so.
    case refused
    /// Run this side effect (the one dispatched, or what the interceptors put in its place) in a context of its own.
    case body(any AnySideEffect)
    /// Nothing to run: end with this outcome and resolve the handle with this (nil: an updater the interceptor put
    /// in its place resolves it when applied).
    case done(DispatchOutcome, HandleCell.Outcome?)
}

extension StoreEngine {
    /// Starts a side effect on Swift's global concurrent executor. The task holds the registry and a weak reference to
    /// the store: releasing the store cancels the task and rejects what it dispatches with `storeReleased`.
    ///
    /// The task's operation is typed as throwing although it never throws (the body's outcome goes to the handle): the
    /// runtime creates tasks from a throwing operation, and `Task<Void, Never>` wraps a non-throwing one in a thunk
    /// whose context is one more allocation per side effect — made on the dispatching thread and freed on the pool's.
    @inlinable
    final func start(_ item: SideEffectItem) {
        let registry = sideEffects
        item.cell.traceID = item.id
        let task = item.id != 0 && registry.wrapsBodies
            ? Task { () async throws -> Void in await SideEffectRunner.runWrapped(item, registry: registry) }
            : Task { () async throws -> Void in await SideEffectRunner.run(item, registry: registry) }
        item.cell.attach(task)
    }
}

/// A side effect's task, from claim to resolution.
@usableFromInline
enum SideEffectRunner {
    /// The task's body. Only what must live across the body's `await` is kept here: the synchronous steps before
    /// and after it are out of line, so their temporaries (trace events, budgets, the running set) are on the
    /// thread's stack rather than in this async frame. The frame was 800 bytes with them inlined; together with
    /// the body's frames that overflowed the task allocator's first slab, one malloc more per side effect.
    /// `nonisolated(nonsending)`: it runs where the task's closure calls it (the global executor), instead of hopping
    /// there once more on entry.
    @usableFromInline
    nonisolated(nonsending) static func run(_ item: SideEffectItem, registry: SideEffectRegistry) async {
        var started: UInt64 = 0
        switch begin(item, registry: registry, started: &started) {
        case .refused:
            return
        case let .done(outcome, resolution?):
            finish(item, registry: registry, started: started, outcome: outcome, resolving: .outcome, with: resolution)
        case let .done(outcome, nil):
            finish(item, registry: registry, started: started, outcome: outcome, resolving: .none, with: .success(()))
        case let .body(sideEffect):
            do {
                let value = try await sideEffect._katanaRun(in: registry, scope: item.cell)
                finish(item, registry: registry, started: started, outcome: .ok,
                       resolving: item.discardsValue ? .completion : .outcome, with: .success(value))
            } catch {
                finish(item, registry: registry, started: started, outcome: .error, resolving: .outcome,
                       with: .failure(error))
            }
        }
    }

    /// Claims the item, counts it in and traces its begin (`started`: the budget's start time, 0 for none); then
    /// says what to run: the side effect, or — when the store has interceptors to run — what they leave.
    /// `.refused`: it must not run (cancelled before it started, or its store is gone — the handle then says so).
    ///
    /// The store is retained only inside this call (and not even loaded when there are no interceptors to run: a
    /// store released since the side effect was dispatched cancelled it, which its handle then says).
    @usableFromInline @inline(never)
    static func begin(_ item: SideEffectItem, registry: SideEffectRegistry, started: inout UInt64) -> SideEffectStep {
        let cell = item.cell
        guard cell.claim() else {
            // Cancelled before it started: the handle already says so.
            if item.id != 0 { registry.tracer.traceDropped(item, route: .sideEffectPool, outcome: .cancelled) }
            return .refused
        }
        guard let parallelism = registry.enter(cell) else {
            if item.id != 0 {
                registry.tracer.traceDropped(item, route: .sideEffectPool, outcome: .error, failure: KatanaError.storeReleased)
            }
            cell.resolve(.failure(KatanaError.storeReleased))
            return .refused
        }
        if item.id != 0 {
            registry.dispatchRecorder?.starting(item.sideEffect, id: item.id, parentID: item.parentID)
            registry.tracer.traceBegin(item, route: .sideEffectPool, parallelism: parallelism)
            started = registry.budgets.start(for: type(of: item.sideEffect))
        }
        if !registry.intercepts || item.bypass { return .body(item.sideEffect) }
        guard let host = registry.host else { return .done(.error, .failure(KatanaError.storeReleased)) }
        return host.intercept(item)
    }

    /// Traces the item's end (and the failure, when it has one to report), counts it out and resolves its handle as
    /// `how` says — with `CancellationError` instead when it was cancelled meanwhile, whatever the body did — in that
    /// order, so whoever awaited it never sees this side effect still counted as running, and its end is in the
    /// trace before anyone sees the handle resolved. (`how` and `resolution` rather than an optional outcome: an
    /// optional of a multi-payload enum of existentials goes through the runtime's generic enum functions; and a
    /// `Void` handle's cell is resolved as an applied updater's, its value not copied into the cell and out to its
    /// waiter through `Result`'s and the existential's witnesses: the callgrind gate's `side_effect_round_trip`.)
    @usableFromInline @inline(never)
    static func finish(_ item: SideEffectItem, registry: SideEffectRegistry, started: UInt64, outcome: DispatchOutcome,
                       resolving how: SideEffectResolution, with resolution: HandleCell.Outcome) {
        let cell = item.cell
        let cancelled = cell.isCancelled
        if item.id != 0 {
            let tracer = registry.tracer
            if started != 0 {
                registry.budgets.check(type(of: item.sideEffect), started: started, id: item.id, kind: .sideEffect,
                                       name: item.name!, tracer: tracer)
            }
            if !cancelled, outcome == .error, how == .outcome, case let .failure(error) = resolution {
                tracer.dispatchFailed(id: item.id, error: error)
            }
            tracer.traceEnd(item, route: .sideEffectPool, outcome: cancelled ? .cancelled : outcome)
        }
        if cancelled, how != .none {
            registry.leave(cell, resolving: .outcome, with: .failure(CancellationError()))
        } else {
            registry.leave(cell, resolving: how, with: resolution)
        }
    }

    /// `run` inside the backend's `runSideEffectBody` (distributed tracing makes the side effect's span current
    /// there, so its interceptors, body and dispatches are the span's). A separate task body, so an untraced side
    /// effect's task frames stay as they were (a wrapping call inside `run` cost every side effect one malloc).
    /// A backend that never calls the body cannot lose the side effect: it then runs unwrapped.
    @usableFromInline @inline(never)
    static func runWrapped(_ item: SideEffectItem, registry: SideEffectRegistry) async {
        var ran = false
        _ = try? await registry.tracer.runSideEffectBody(id: item.id) {
            ran = true
            await run(item, registry: registry)
            return ()
        }
        if !ran { await run(item, registry: registry) }
    }
}
