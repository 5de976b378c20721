import Foundation
import Katana
import KatanaTrace
import Logging

/// What shows destinations: a screen controller on a UI platform; on a server or CLI, whatever drives a flow or
/// wizard (a session object, a prompt loop). The router calls the routable of a destination's parent; the root
/// routable receives the calls about the root. Calls come one at a time, in order; each `async` method returns
/// when its transition is done (throw to report a failure).
public protocol Routable: Sendable {
    /// Show `destination` as a new child of this routable's destination; return the routable that handles it.
    func push(_ destination: Destination) async throws -> any Routable
    /// Remove `destination` (and everything under it).
    func pop(_ destination: Destination) async throws
    /// Remove `removed` and add `added` in one transition; return a routable for each added destination.
    func change(removing removed: [Destination], adding added: [Destination]) async throws -> [Destination: any Routable]
    /// Make `to` the visible child (`from`: the one visible before, if it is still there).
    func changeActiveDestination(from: Destination?, to: Destination) async throws
}

/// Something the router could not do. It reports, and goes on with the next change.
public enum RouterIssue: Sendable, CustomStringConvertible {
    /// The routable did not finish within the router's timeout; the router stopped waiting for it.
    case timedOut(NavigationChange, after: Duration)
    /// The routable threw.
    case failed(NavigationChange, error: any Error)
    /// No routable handles the change's parent (its push failed, timed out, or returned none).
    case noRoutable(NavigationChange)
    /// A `change` returned no routable for one of the destinations it added.
    case missingRoutable(NavigationChange, destination: Destination)

    public var description: String {
        switch self {
        case let .timedOut(change, after): "routable did not complete \(change) within \(after)"
        case let .failed(change, error): "routable failed \(change): \(error)"
        case let .noRoutable(change): "no routable to \(change): its parent's routable is missing"
        case let .missingRoutable(change, destination): "\(change) returned no routable for \(destination)"
        }
    }
}

/// Watches a store's navigation state and drives routables from it: each change of `navigationState` is diffed
/// (``NavigationDiff``) against what the routables last showed, and the resulting calls are made strictly in
/// order, one transition at a time, even when the state changes again mid-transition (that change waits its
/// turn). Every transition and every routable call is traced as `katana:transition_begin/end`.
public final class Router<S: RoutableState>: Sendable {
    /// The store whose navigation state the router follows.
    public let store: PartialStore<S>
    let rootRoutable: any Routable
    let timeout: Duration
    let diffStyle: NavigationDiff.Style
    let onIssue: @Sendable (RouterIssue) -> Void
    /// The store's trace backend, if it records transitions (see `TransitionTraceBackend`).
    let tracer: (any TransitionTraceBackend)?
    let queue = TransitionQueue()

    /// - Parameters:
    ///   - store: the store whose `navigationState` the router follows.
    ///   - rootRoutable: the routable that receives the calls about the tree's root itself (push, pop or change of
    ///     the root destination); the routables it returns handle the rest.
    ///   - timeout: how long a routable may take over one call before it is reported (``RouterIssue/timedOut(_:after:)``)
    ///     and the router moves on.
    ///   - diffStyle: which calls the routables receive (``NavigationDiff/Style``): KatanaRouter 0.4's by default.
    ///   - onIssue: where problems go (default: logged at error level under `katana.router`).
    public init(store: PartialStore<S>, rootRoutable: any Routable, timeout: Duration = .seconds(10),
                diffStyle: NavigationDiff.Style = .katanaRouter, onIssue: (@Sendable (RouterIssue) -> Void)? = nil) {
        self.store = store
        self.rootRoutable = rootRoutable
        self.timeout = timeout
        self.diffStyle = diffStyle
        let logger = Logger(label: "katana.router")
        self.onIssue = onIssue ?? { logger.error("\($0)") }
        tracer = (store.configuration.traceBackend ?? KatanaTracing.backend) as? any TransitionTraceBackend
    }

    /// Starts following the store: the current navigation state is shown first (from an empty one), then every
    /// change. Calling it again, or after `stop()`, does nothing: a router follows its store once.
    public func start() {
        guard let stream = queue.open() else { return }
        let unsubscribe = store.addListener { [queue] old, new in
            if old.navigationState != new.navigationState { queue.enqueue(new.navigationState) }
        }
        queue.enqueueCurrent { store.state.navigationState }
        queue.onClose(unsubscribe)
        let engine = RouterEngine(root: rootRoutable, timeout: timeout, diffStyle: diffStyle, onIssue: onIssue, tracer: tracer)
        let queue = self.queue
        Task {
            var engine = engine
            for await next in stream {
                await engine.show(next)
                queue.finishedOne()
            }
        }
    }

    /// Stops following the store once the transitions already queued are done.
    public func stop() { queue.close() }

    /// A router released without `stop()` stops: its store listener is removed, and the transitions already queued
    /// still run.
    deinit { queue.close() }

    /// Returns when every navigation change seen so far has been shown (for tests, CLIs and scripted flows).
    public func waitUntilIdle() async { await queue.waitUntilIdle() }
}

/// The router's queue of navigation states to show, and who waits for it to drain.
final class TransitionQueue: @unchecked Sendable {
    // Everything below is guarded by `lock`.
    private let lock = NSLock()
    private var continuation: AsyncStream<NavigationState>.Continuation?
    private var started = false
    private var pending = 0
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []
    private var unsubscribe: StoreUnsubscribe?

    func open() -> AsyncStream<NavigationState>? {
        lock.withLock {
            guard !started else { return nil }
            started = true
            let (stream, continuation) = AsyncStream<NavigationState>.makeStream()
            self.continuation = continuation
            return stream
        }
    }

    /// Enqueues under the same lock as the listener, so the current state cannot overtake a newer one.
    func enqueueCurrent(_ read: () -> NavigationState) { lock.withLock { push(read()) } }

    func enqueue(_ state: NavigationState) { lock.withLock { push(state) } }

    private func push(_ state: NavigationState) {
        guard let continuation else { return }
        pending += 1
        continuation.yield(state)
    }

    func onClose(_ unsubscribe: @escaping StoreUnsubscribe) { lock.withLock { self.unsubscribe = unsubscribe } }

    func close() {
        let unsubscribe = lock.withLock {
            continuation?.finish()
            continuation = nil
            return self.unsubscribe
        }
        unsubscribe?()
    }

    func finishedOne() {
        let waiters: [CheckedContinuation<Void, Never>] = lock.withLock {
            pending -= 1
            guard pending == 0 else { return [] }
            defer { idleWaiters = [] }
            return idleWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func waitUntilIdle() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let idle = lock.withLock {
                if pending == 0 { return true }
                idleWaiters.append(waiter)
                return false
            }
            if idle { waiter.resume() }
        }
    }
}

/// Runs transitions; lives inside the router's one task, so it needs no locks.
struct RouterEngine {
    let root: any Routable
    let timeout: Duration
    let diffStyle: NavigationDiff.Style
    let onIssue: @Sendable (RouterIssue) -> Void
    let tracer: (any TransitionTraceBackend)?
    /// What the routables show now.
    var shown = NavigationState()
    /// The routable of each shown destination that has one.
    var routables: [UUID: any Routable] = [:]

    init(root: any Routable, timeout: Duration, diffStyle: NavigationDiff.Style = .katanaRouter,
         onIssue: @escaping @Sendable (RouterIssue) -> Void, tracer: (any TransitionTraceBackend)?) {
        self.root = root
        self.timeout = timeout
        self.diffStyle = diffStyle
        self.onIssue = onIssue
        self.tracer = tracer
    }

    mutating func show(_ next: NavigationState) async {
        guard next != shown else { return }
        let changes = NavigationDiff.changes(from: shown, to: next, style: diffStyle)
        let transitionID = KatanaTracing.nextID()
        let transitionName = TraceName("navigation")
        if let tracer, tracer.isEnabled { tracer.transitionBegin(transitionID: transitionID, name: transitionName) }
        var registeredNow = Set<UUID>()
        var left: [Destination] = []
        var allOK = true
        for change in changes {
            allOK = await perform(change, registeredNow: &registeredNow, left: &left) && allOK
        }
        // Routables of destinations that left are dropped once the whole transition is done, not at their pop: in
        // KatanaRouter 0.4's order a parent can hear that several children left (one `change`) before one of those
        // children hears that its own child left.
        for destination in left { forget(destination, registeredNow) }
        shown = next
        if let tracer, tracer.isEnabled {
            tracer.transitionEnd(transitionID: transitionID, name: transitionName, outcome: allOK ? .ok : .error)
        }
    }

    /// Makes one routable call; returns whether it succeeded.
    private mutating func perform(_ change: NavigationChange, registeredNow: inout Set<UUID>,
                                  left: inout [Destination]) async -> Bool {
        let parent: Destination?
        switch change {
        case let .push(_, p), let .pop(_, p), let .change(p, _, _): parent = p
        case let .changeActiveDestination(p, _, _): parent = p
        }
        let handler: (any Routable)? = if let parent { routables[parent.instanceIdentifier] } else { root }
        guard let routable = handler else {
            onIssue(.noRoutable(change))
            return false
        }
        let callID = KatanaTracing.nextID()
        let name = TraceName(Self.traceName(change))
        if let tracer, tracer.isEnabled { tracer.transitionBegin(transitionID: callID, name: name) }
        let outcome: CallOutcome<Sendable?> = await call(timeout) { () async throws -> Sendable? in
            switch change {
            case let .push(destination, _): return try await routable.push(destination) as Sendable
            case let .pop(destination, _):
                try await routable.pop(destination)
                return nil
            case let .change(_, removed, added): return try await routable.change(removing: removed, adding: added)
            case let .changeActiveDestination(_, from, to):
                try await routable.changeActiveDestination(from: from, to: to)
                return nil
            }
        }
        var ok = true
        switch outcome {
        case let .finished(.success(value)):
            switch change {
            case let .push(destination, _):
                if let child = value as? any Routable { register(destination, child, &registeredNow) }
            case let .pop(destination, _):
                left.append(destination)
            case let .change(_, removed, added):
                left += removed
                let made = value as? [Destination: any Routable] ?? [:]
                for destination in added {
                    if let child = made[destination] {
                        register(destination, child, &registeredNow)
                    } else {
                        onIssue(.missingRoutable(change, destination: destination))
                        ok = false
                    }
                }
            case .changeActiveDestination: break
            }
        case let .finished(.failure(error)):
            onIssue(.failed(change, error: error))
            ok = false
        case .timedOut:
            onIssue(.timedOut(change, after: timeout))
            ok = false
        }
        if !ok, case let .pop(destination, _) = change { left.append(destination) }
        if let tracer, tracer.isEnabled { tracer.transitionEnd(transitionID: callID, name: name, outcome: ok ? .ok : .error) }
        return ok
    }

    private mutating func register(_ destination: Destination, _ routable: any Routable, _ registeredNow: inout Set<UUID>) {
        routables[destination.instanceIdentifier] = routable
        registeredNow.insert(destination.instanceIdentifier)
    }

    /// Drops the routables of `destination` and of what was under it, except those this transition just made
    /// (a destination that moved elsewhere).
    private mutating func forget(_ destination: Destination, _ registeredNow: Set<UUID>) {
        let subtree = shown.node(.instance(destination.instanceIdentifier))
        var ids = [destination.instanceIdentifier]
        subtree?.visit(.preOrder) { ids.append($0.destination.instanceIdentifier) }
        for id in ids where !registeredNow.contains(id) { routables[id] = nil }
    }

    static func traceName(_ change: NavigationChange) -> String {
        switch change {
        case let .push(destination, _): "push \(destination.routableType)"
        case let .pop(destination, _): "pop \(destination.routableType)"
        case let .change(parent, _, _): "change \(parent?.routableType ?? "root")"
        case let .changeActiveDestination(_, _, to): "changeActiveDestination \(to.routableType)"
        }
    }
}

enum CallOutcome<T: Sendable>: Sendable {
    case finished(Result<T, any Error>)
    case timedOut
}

/// Runs `operation` in a task of its own and waits for it or for `timeout`, whichever comes first. A call that
/// never returns is left running (it cannot be forced to stop); it is cancelled, and its result ignored.
func call<T: Sendable>(_ timeout: Duration, _ operation: @escaping @Sendable () async throws -> T) async -> CallOutcome<T> {
    let once = Once<CallOutcome<T>>()
    return await withCheckedContinuation { continuation in
        once.set(continuation)
        let work = Task {
            let result: Result<T, any Error>
            do { result = .success(try await operation()) } catch { result = .failure(error) }
            once.resume(.finished(result))
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled, once.resume(.timedOut) { work.cancel() }
        }
        once.onResume { timer.cancel() }
    }
}

/// Resumes a continuation once, whoever gets there first.
final class Once<T: Sendable>: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, Never>?
    private var done = false
    private var cleanup: (@Sendable () -> Void)?

    func set(_ continuation: CheckedContinuation<T, Never>) { lock.withLock { self.continuation = continuation } }

    func onResume(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = lock.withLock {
            if done { return true }
            self.cleanup = cleanup
            return false
        }
        if runNow { cleanup() }
    }

    @discardableResult
    func resume(_ value: T) -> Bool {
        let (continuation, cleanup): (CheckedContinuation<T, Never>?, (@Sendable () -> Void)?) = lock.withLock {
            guard !done else { return (nil, nil) }
            done = true
            defer { self.continuation = nil; self.cleanup = nil }
            return (self.continuation, self.cleanup)
        }
        guard let continuation else { return false }
        continuation.resume(returning: value)
        cleanup?()
        return true
    }
}
