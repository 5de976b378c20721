import ArgumentParser
import Foundation
import KatanaTrace
import KatanaTraceToolkit

/// The `katana-bench` command. Its entry point (`Sources/katana-bench`) links the LTTng provider; this module does
/// not, so the package's test binary can use the commands without loading liblttng-ust.
public struct KatanaBenchCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "katana-bench",
        abstract: "Stress a Katana Store and report latency histograms.",
        version: "katana-bench \(KatanaBenchCommand.version) (tracing provider: \(LinkedLTTng.backend == nil ? "none linked" : "lttng-ust"))",
        subcommands: [Run.self, Compare.self, Merge.self, Micro.self, Workload.self],
        defaultSubcommand: Run.self
    )

    /// The tool's version, as `katana-bench --version` prints it: the package's (`KatanaRelease`).
    public static let version = KatanaRelease.version

    public init() {}

    /// The entry point: ArgumentParser's, with one exit-code convention for every command — 0 ok, 1 a regression
    /// (`compare`), 2 bad input or usage (ArgumentParser's own usage errors would exit 64).
    public static func mainWithExitCodes(_ arguments: [String]? = nil) async -> Int32 {
        await runWithExitCodes(KatanaBenchCommand.self, arguments)
    }
}

/// Parses and runs `command` with one exit-code convention: 0 ok, 1 a regression (`compare`), 2 bad input or usage
/// (ArgumentParser's own usage errors would exit 64).
func runWithExitCodes<Command: ParsableCommand>(_ command: Command.Type, _ arguments: [String]?) async -> Int32 {
    do {
        var parsed = try Command.parseAsRoot(arguments)
        if var asyncCommand = parsed as? AsyncParsableCommand {
            try await asyncCommand.run()
        } else {
            try parsed.run()
        }
        return 0
    } catch {
        let code = Command.exitCode(for: error)
        let message = Command.fullMessage(for: error)
        if code == .success {
            if !message.isEmpty { print(message) }
            return 0
        }
        if !message.isEmpty { FileHandle.standardError.write(Data((message + "\n").utf8)) }
        return code == .validationFailure ? 2 : code.rawValue
    }
}

/// The LTTng provider linked into this process: present in the `katana-bench` executable and in a user's bench
/// whose target adds `KatanaLTTng`; absent otherwise, in a build without the `LTTng` trait and in the test binary.
enum LinkedLTTng {
    static var backend: NativeTraceBackend? {
        guard let native = NativeTraceBackend.linked, native.providerName == "lttng-ust" else { return nil }
        return native
    }

    static func require() throws -> NativeTraceBackend {
        guard let backend else {
            throw ValidationError("no LTTng provider is linked into this program: its target needs the KatanaLTTng product, built with the LTTng trait (on by default)")
        }
        return backend
    }
}

/// `value` within `range`, or a one-line error naming the option and its allowed range.
func checkRange<T: Comparable & CustomStringConvertible>(_ value: T, _ range: ClosedRange<T>, _ option: String, unit: String = "") throws {
    let suffix = unit.isEmpty ? "" : " \(unit)"
    if let double = value as? Double, !double.isFinite {
        throw ValidationError("\(option) must be a finite number from \(range.lowerBound) to \(range.upperBound)\(suffix) (got \(value))")
    }
    guard range.contains(value) else {
        throw ValidationError("\(option) must be from \(range.lowerBound) to \(range.upperBound)\(suffix) (got \(value))")
    }
}
