import Dispatch
import Foundation
import Katana
import KatanaRouter
import KatanaTrace
import Testing

/// A log the routables write to from any task, with how many calls ran at once.
final class CallLog: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var lines: [String] = []
    private var running = 0
    private var maxRunning = 0
    private var issues: [String] = []

    func begin(_ line: String) {
        lock.withLock {
            lines.append(line)
            running += 1
            maxRunning = max(maxRunning, running)
        }
    }

    func end() { lock.withLock { running -= 1 } }
    func issue(_ issue: RouterIssue) { lock.withLock { issues.append("\(issue)") } }

    var all: [String] { lock.withLock { lines } }
    var mostAtOnce: Int { lock.withLock { maxRunning } }
    var reported: [String] { lock.withLock { issues } }
}

/// Records its calls as "<owner> <call> <destination>"; `slow` names destinations whose push waits for `gate`
/// (or forever, with `never`), `failing` ones whose push throws.
struct RecordingRoutable: Routable {
    struct Refused: Error {}

    let owner: String
    let log: CallLog
    var slow: Set<String> = []
    var gate: AsyncGate?
    var never: Set<String> = []
    var failing: Set<String> = []

    func child(_ destination: Destination) -> RecordingRoutable {
        var child = self
        child = RecordingRoutable(owner: destination.userIdentifier ?? "?", log: log, slow: slow, gate: gate,
                                  never: never, failing: failing)
        return child
    }

    func push(_ destination: Destination) async throws -> any Routable {
        let name = destination.userIdentifier ?? "?"
        log.begin("\(owner) push \(name)")
        defer { log.end() }
        if slow.contains(name) { await gate?.wait() }
        if never.contains(name) { try? await Task.sleep(for: .seconds(3600)) }
        if failing.contains(name) { throw Refused() }
        return child(destination)
    }

    func pop(_ destination: Destination) async throws {
        log.begin("\(owner) pop \(destination.userIdentifier ?? "?")")
        log.end()
    }

    func change(removing removed: [Destination], adding added: [Destination]) async throws -> [Destination: any Routable] {
        log.begin("\(owner) change -\(removed.compactMap(\.userIdentifier)) +\(added.compactMap(\.userIdentifier))")
        defer { log.end() }
        return Dictionary(uniqueKeysWithValues: added.map { ($0, child($0) as any Routable) })
    }

    func changeActiveDestination(from: Destination?, to: Destination) async throws {
        log.begin("\(owner) active \(to.userIdentifier ?? "?")")
        log.end()
    }
}

/// Opens once; waiters before that suspend.
final class AsyncGate: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let open = lock.withLock {
                if isOpen { return true }
                waiters.append(continuation)
                return false
            }
            if open { continuation.resume() }
        }
    }

    var hasWaiter: Bool { lock.withLock { !waiters.isEmpty } }

    func open() {
        let waiting = lock.withLock {
            isOpen = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiting { waiter.resume() }
    }
}

@Suite struct RouterTests {
    @Test func theRouterShowsTheCurrentStateThenEveryChangeInOrder() async throws {
        let log = CallLog()
        let store = AppStore()
        try await store.dispatch(SetRootDestination(place("app"))).value
        let router = Router(store: store, rootRoutable: RecordingRoutable(owner: "window", log: log), onIssue: log.issue)
        router.start()
        router.start()  // harmless
        await router.waitUntilIdle()
        #expect(log.all == ["window push app"])

        try await store.dispatch(AddChildrenToDestination([place("feed"), place("inbox")], to: .user("app"), activeChild: 0)).value
        try await store.dispatch(AddNewDestination(place("post"))).value
        store.dispatch(ClosureStateUpdater { $0.other += 1 })  // not navigation: no transition
        try await store.dispatch(RemoveCurrentDestination()).value
        try await store.dispatch(ChangeActiveDestination(.user("inbox"))).value
        await router.waitUntilIdle()
        #expect(log.all == [
            "window push app",
            "app change -[] +[\"feed\", \"inbox\"]", "app active feed",
            "feed push post", "feed active post",
            "feed pop post",
            "app active inbox",
        ])
        #expect(log.reported.isEmpty)
        router.stop()
        try await store.dispatch(AddNewDestination(place("after-stop"))).value
        await router.waitUntilIdle()
        #expect(!log.all.contains { $0.contains("after-stop") })
    }

    @Test func oneTransitionAtATimeEvenWhenTheStateChangesMidTransition() async throws {
        let log = CallLog()
        let gate = AsyncGate()
        let store = AppStore()
        // The held push is this test's, not a hang: a timeout far past the default, so a machine starved under TSan
        // (a CI rehearsal once took over ten seconds to get from the push to `gate.open()`) does not time it out.
        // `aRoutableThatNeverCompletesIsReportedAndTheRouterGoesOn` is the timeout's test.
        let router = Router(store: store, rootRoutable: RecordingRoutable(owner: "window", log: log, slow: ["step1"], gate: gate),
                            timeout: .seconds(300), onIssue: log.issue)
        router.start()
        try await store.dispatch(SetRootDestination(place("wizard"))).value
        try await store.dispatch(AddNewDestination(place("step1"))).value
        // The push of step1 is stuck; the state moves on twice meanwhile.
        while !gate.hasWaiter { await Task.yield() }
        try await store.dispatch(AddNewDestination(place("step2"))).value
        try await store.dispatch(RemoveCurrentDestination()).value
        try await store.dispatch(AddNewDestination(place("step2b"))).value
        #expect(log.all == ["window push wizard", "wizard push step1"], "nothing may start while step1's push runs")
        gate.open()
        await router.waitUntilIdle()
        #expect(log.all == [
            "window push wizard",
            "wizard push step1", "wizard active step1",
            "step1 push step2", "step1 active step2",
            "step1 pop step2",
            "step1 push step2b", "step1 active step2b",
        ])
        #expect(log.mostAtOnce == 1)
        #expect(log.reported.isEmpty)
    }

    @Test func aRoutableThatNeverCompletesIsReportedAndTheRouterGoesOn() async throws {
        let log = CallLog()
        let store = AppStore()
        let router = Router(store: store, rootRoutable: RecordingRoutable(owner: "window", log: log, never: ["stuck"]),
                            timeout: .milliseconds(200), onIssue: log.issue)
        router.start()
        try await store.dispatch(SetRootDestination(place("app"))).value
        try await store.dispatch(AddNewDestination(place("stuck"))).value       // its push never returns
        try await store.dispatch(AddNewDestination(place("under-stuck"))).value // so nothing handles this one
        try await store.dispatch(RemoveCurrentDestination()).value
        try await store.dispatch(RemoveCurrentDestination()).value
        try await store.dispatch(AddNewDestination(place("fine"))).value
        await router.waitUntilIdle()
        let reported = log.reported
        #expect(reported.count == 4, "\(reported)")
        #expect(reported.first?.contains("did not complete push Stuck(stuck) onto App(app) within 0.2 seconds") == true, "\(reported)")
        #expect(reported.dropFirst().allSatisfy { $0.hasPrefix("no routable to") }, "\(reported)")
        #expect(log.all.suffix(3) == ["app pop stuck", "app push fine", "app active fine"])
    }

    @Test func aFailingRoutableIsReportedAndItsSubtreeHasNoRoutable() async throws {
        let log = CallLog()
        let store = AppStore()
        let router = Router(store: store, rootRoutable: RecordingRoutable(owner: "window", log: log, failing: ["broken"]),
                            onIssue: log.issue)
        router.start()
        try await store.dispatch(SetRootDestination(place("app"))).value
        try await store.dispatch(AddNewDestination(place("broken"))).value
        try await store.dispatch(AddNewDestination(place("child"))).value
        try await store.dispatch(RemoveCurrentDestination()).value
        try await store.dispatch(RemoveCurrentDestination()).value
        try await store.dispatch(AddNewDestination(place("healthy"))).value
        await router.waitUntilIdle()
        #expect(log.reported.count == 4, "\(log.reported)")
        #expect(log.reported.first?.contains("routable failed push Broken(broken)") == true)
        #expect(log.reported.dropFirst().map { $0.prefix(26) } == ["no routable to push Child(", "no routable to changeActiv", "no routable to pop Child(c"])
        #expect(log.all.suffix(3) == ["app pop broken", "app push healthy", "app active healthy"])
    }

    @Test func movedSubtreesGetTheirNewParentsRoutables() async throws {
        let log = CallLog()
        let p = Places()
        let store = AppStore()
        let router = Router(store: store, rootRoutable: RecordingRoutable(owner: "window", log: log), onIssue: log.issue)
        router.start()
        try await store.dispatch(SetRootDestination(p.node("root", [
            p.node("left", [p.node("x", [p.node("x1")], active: 0)], active: 0),
            p.node("right", [p.node("y", [p.node("y1")], active: 0)], active: 0),
        ], active: 0))).value
        try await store.dispatch(SetRootDestination(p.node("root", [
            p.node("left", [p.node("y", [p.node("y1")], active: 0)], active: 0),
            p.node("right", [p.node("x", [p.node("x1")], active: 0)], active: 0),
        ], active: 0))).value
        await router.waitUntilIdle()
        // Both moved nodes still have routables: pushing under them reaches them.
        try await store.dispatch(AddNewDestination(p["y2"])).value  // under left > y > y1
        try await store.dispatch(ChangeActiveDestination(.user("x1"))).value
        try await store.dispatch(AddNewDestination(p["x2"])).value
        await router.waitUntilIdle()
        #expect(log.reported.isEmpty, "\(log.reported)")
        #expect(log.all.suffix(5) == ["y1 push y2", "y1 active y2", "root active right", "x1 push x2", "x1 active x2"])
    }

    @Test func transitionsAreTraced() async throws {
        let backend = InMemoryTraceBackend()
        let log = CallLog()
        let store = AppStore(interceptors: [], stateInitializer: { AppState() }, configuration: .init(traceBackend: backend))
        let router = Router(store: store, rootRoutable: RecordingRoutable(owner: "window", log: log, failing: ["bad"]),
                            onIssue: log.issue)
        router.start()
        try await store.dispatch(SetRootDestination(place("app"))).value
        try await store.dispatch(AddNewDestination(place("bad"))).value
        await router.waitUntilIdle()
        var open: [UInt64: String] = [:]
        var closed: [String] = []
        for event in backend.events {
            switch event {
            case let .transitionBegin(id, name): open[id] = name.string
            case let .transitionEnd(id, name, outcome):
                #expect(open.removeValue(forKey: id) == name.string, "end without a matching begin")
                closed.append("\(name.string):\(outcome)")
            default: break
            }
        }
        #expect(open.isEmpty)
        #expect(closed == ["push App:ok", "navigation:ok", "push Bad:error", "changeActiveDestination Bad:ok", "navigation:error"])
    }
}
