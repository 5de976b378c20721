import ArgumentParser

@main
struct KatanaBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "katana-bench",
        abstract: "Stress a Katana Store and report latency histograms.",
        subcommands: [Run.self, Compare.self, Micro.self, Workload.self],
        defaultSubcommand: Run.self
    )
}
