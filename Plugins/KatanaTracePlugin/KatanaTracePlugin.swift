import Foundation
import PackagePlugin

/// `swift package katana-trace …` in any package that depends on Katana: runs the `katana-trace` CLI that SwiftPM
/// built from Katana's sources, with the arguments as given (e.g. `swift package katana-trace analyze TRACE_DIR`).
@main
struct KatanaTracePlugin: CommandPlugin {
    func performCommand(context: PluginContext, arguments: [String]) async throws {
        let tool = try context.tool(named: "katana-trace")
        let process = Process()
        process.executableURL = tool.url
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        // The CLI has said what went wrong on its standard error; the plugin only passes its status on.
        if process.terminationReason == .uncaughtSignal || process.terminationStatus != 0 {
            throw KatanaTraceFailed(status: process.terminationStatus)
        }
    }
}

struct KatanaTraceFailed: Error, CustomStringConvertible {
    let status: Int32
    var description: String { "katana-trace exited with status \(status)" }
}
