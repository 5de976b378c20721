import Foundation
import PackagePlugin

/// `swift package katana-trace …` in any package that depends on Katana: runs the `katana-trace` CLI that SwiftPM
/// built from Katana's sources, with the arguments as given (e.g. `swift package katana-trace analyze TRACE_DIR`).
///
/// SwiftPM ends with status 1 whatever status the plugin's tool gave, so the tool's verdict — `check`'s 1 (problems)
/// against 2 (unreadable), or the status of the command `record` ran — would only survive in SwiftPM's wording.
/// `--status-file FILE`, before the command, writes that status to FILE (a number and a newline; 128 + N for signal
/// N). The plugin removes the file before it starts the tool; a script removes it before the call too, so that no
/// file afterwards means the tool never ran (SwiftPM could not build it, or the plugin's arguments were wrong).
@main
struct KatanaTracePlugin: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        var arguments = arguments
        let statusFile = try Self.takeStatusFile(from: &arguments)
        if let statusFile { try? FileManager.default.removeItem(atPath: statusFile) }
        let tool = try context.tool(named: "katana-trace")
        let process = Process()
        process.executableURL = tool.url
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        let signalled = process.terminationReason == .uncaughtSignal
        let status = signalled ? 128 + process.terminationStatus : process.terminationStatus
        if let statusFile {
            do {
                try Data("\(status)\n".utf8).write(to: URL(fileURLWithPath: statusFile))
            } catch {
                throw KatanaTracePluginError("cannot write --status-file \(statusFile): \(error.localizedDescription)")
            }
        }
        // The CLI has said what went wrong on its standard error; the plugin only passes its status on.
        if status != 0 { throw KatanaTracePluginError("katana-trace exited with status \(status)") }
    }

    /// The plugin's own option, `--status-file FILE` or `--status-file=FILE`, taken from before the command.
    static func takeStatusFile(from arguments: inout [String]) throws -> String? {
        guard let first = arguments.first else { return nil }
        if first.hasPrefix("--status-file=") {
            arguments.removeFirst()
            let path = String(first.dropFirst("--status-file=".count))
            guard !path.isEmpty else { throw KatanaTracePluginError("--status-file needs a file") }
            return path
        }
        guard first == "--status-file" else { return nil }
        guard arguments.count >= 2, !arguments[1].hasPrefix("-") else { throw KatanaTracePluginError("--status-file needs a file") }
        let path = arguments[1]
        arguments.removeFirst(2)
        return path
    }
}

struct KatanaTracePluginError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
