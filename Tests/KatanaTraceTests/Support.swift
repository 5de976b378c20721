import Foundation
import KatanaTestSupport
import Katana
import KatanaTrace

struct TraceState: State, Equatable {
    var counter = 0
    init() {}
}

typealias TraceStore = Store<TraceState, EmptySideEffectDependencyContainer>

struct Bump: StateUpdater {
    func updateState(_ state: inout TraceState) { state.counter += 1 }
}

struct WrongState: State {}
struct ForWrongState: StateUpdater {
    func updateState(_ state: inout WrongState) {}
}

struct BumpTwice: SideEffect {
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws {
        try await context.dispatch(Bump()).value
        try await context.dispatch(Bump()).value
    }
}

struct Explode: SideEffect {
    func sideEffect(_ context: SideEffectContext<TraceState, EmptySideEffectDependencyContainer>) async throws {
        throw CancellationError()
    }
}

/// Runs a command to completion and returns its exit status and output.
/// Runs a command found on PATH (through `/usr/bin/env`).
@discardableResult
func run(_ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, out: String, err: String) {
    try runProcess(URL(fileURLWithPath: "/usr/bin/env"), arguments, environment: environment)
}

/// `run` for tests: the caller's task suspends while the command runs, instead of holding one of the cooperative
/// pool's threads (two on a 2-core machine) that every other test's tasks need meanwhile.
@discardableResult
func runSuspending(_ arguments: [String], environment: [String: String]? = nil) async throws -> (status: Int32, out: String, err: String) {
    try await runProcessSuspending(URL(fileURLWithPath: "/usr/bin/env"), arguments, environment: environment)
}

enum Paths {
    /// The package root, found from this file's path.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The katana-bench executable built next to this test binary.
    static var katanaBench: URL { builtExecutable(named: "katana-bench") }
    /// The KatanaRouter example, built next to this test binary.
    static var routerExample: URL { builtExecutable(named: "katana-router-example") }

}
