import Foundation
import KatanaTestSupport
import Testing

extension DocumentationSnippetTests {
    /// Every katana-trace and katana-bench command line the pages show — in a code block, or in the code of a sentence —
    /// names options its subcommand has, as the built tool describes itself (`--experimental-dump-help`, hidden options
    /// too). An option renamed in the code and not on the page fails here rather than in a reader's terminal: the Trace
    /// toolkit guide kept `katana-trace record --flight-recorder` for days after it became `--snapshot`.
    @Test func everyCommandLineOnThePagesNamesOptionsTheToolHas() throws {
        let tools = try Dictionary(uniqueKeysWithValues: ["katana-trace", "katana-bench"].map { ($0, try ToolOptions($0)) })
        let pages = [Self.root.appendingPathComponent("README.md")]
            + Self.files(under: ["Sources", "Examples", "traces", "Benchmarks"], extensions: ["md"])
        var checked = 0
        for page in pages {
            let name = page.path.replacingOccurrences(of: Self.root.path + "/", with: "")
            for line in Self.commandLines(try String(contentsOf: page, encoding: .utf8)) {
                for invocation in Self.invocations(in: line, of: tools) {
                    checked += 1
                    for option in invocation.options where !invocation.accepted.contains(option) {
                        Issue.record("\(name): `\(line)`: \(invocation.command) has no \(option)")
                    }
                }
            }
        }
        #expect(checked >= 20, "the pages' command lines are no longer found: \(checked)")
    }

    /// What a command-line tool of the package accepts: each subcommand's options as typed (`--output`, `-o`), from
    /// ArgumentParser's description of the tool; and the subcommand it runs when given none (its `--help` says which).
    struct ToolOptions {
        let name: String
        /// Each subcommand's options and the tool's own; the tool's own alone under "".
        let options: [String: Set<String>]
        let defaultSubcommand: String?

        init(_ name: String) throws {
            self.name = name
            let executable = builtExecutable(named: name)
            let dump = try runProcess(executable, ["--experimental-dump-help"])
            let json = try JSONSerialization.jsonObject(with: Data(dump.out.utf8)) as? [String: Any]
            let root = try #require(json?["command"] as? [String: Any], "\(name) --experimental-dump-help: \(dump.err)")
            func spellings(_ command: [String: Any]) -> Set<String> {
                let arguments = command["arguments"] as? [[String: Any]] ?? []
                return Set(arguments.flatMap { argument in
                    (argument["names"] as? [[String: Any]] ?? []).compactMap { name -> String? in
                        guard let kind = name["kind"] as? String, let text = name["name"] as? String else { return nil }
                        return kind == "long" ? "--\(text)" : "-\(text)"  // short, or long with a single dash
                    }
                })
            }
            let own = spellings(root)
            var options = ["": own]
            for subcommand in root["subcommands"] as? [[String: Any]] ?? [] {
                if let command = subcommand["commandName"] as? String { options[command] = spellings(subcommand).union(own) }
            }
            self.options = options
            let help = try runProcess(executable, ["--help"]).out
            defaultSubcommand = help.firstMatch(of: #/\n\s+([a-z-]+) \(default\)/#).map { String($0.output.1) }
        }
    }

    /// The code on a page that a reader may type: the lines of its fenced blocks but Swift's (a line ending in `\`
    /// joined to the next), and the code spans of the rest.
    static func commandLines(_ page: String) -> [String] {
        var lines: [String] = [], fence: String?, continued = ""
        for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("```") {
                fence = fence == nil ? String(trimmed.dropFirst(3)) : nil
                continued = ""
            } else if let fence {
                guard fence != "swift" else { continue }
                if trimmed.hasSuffix("\\") {
                    continued += trimmed.dropLast() + " "
                } else {
                    lines.append(continued + trimmed)
                    continued = ""
                }
            } else {
                lines += line.matches(of: #/`([^`]+)`/#).map { String($0.output.1) }
            }
        }
        return lines
    }

    /// Each run of one of `tools` in a command line (`katana-bench …`, `.build/release/katana-bench …`,
    /// `swift run katana-trace …`, the plugin's `swift package katana-trace …`; a command `record` runs after `--`
    /// too): the subcommand it names, or the default one, and the options it gives.
    static func invocations(in line: String, of tools: [String: ToolOptions])
        -> [(command: String, accepted: Set<String>, options: [String])] {
        let tokens = line.split(whereSeparator: \.isWhitespace).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "[]")) }
        // What ends a tool's arguments: a command it runs, a pipe, the next command, a redirection, a comment.
        func ends(_ token: String) -> Bool {
            ["--", "|", "||", "&&", ";", "&"].contains(token) || token.hasPrefix("#") || token.hasPrefix(">") || token.hasPrefix("2>")
        }
        var found: [(command: String, accepted: Set<String>, options: [String])] = []
        var index = 0
        while index < tokens.count {
            let word = tokens[index]
            index += 1
            guard let tool = tools[String(word.split(separator: "/").last ?? "")] else { continue }
            // The command plugin's own option comes before the tool's arguments.
            if index >= 3, tokens[index - 3] == "swift", tokens[index - 2] == "package", index < tokens.count {
                if tokens[index] == "--status-file" { index += 2 } else if tokens[index].hasPrefix("--status-file=") { index += 1 }
            }
            var subcommand = tool.defaultSubcommand ?? ""
            if index < tokens.count, !tokens[index].isEmpty, tool.options[tokens[index]] != nil {
                subcommand = tokens[index]
                index += 1
            }
            var options: [String] = []
            while index < tokens.count, !ends(tokens[index]) {
                let argument = tokens[index]
                index += 1
                // An option (`--name`, `--name=value`, `-x`), not a value that starts with a dash (`-5`) or a lone `-`.
                guard argument.hasPrefix("-"), argument.dropFirst().first?.isLetter == true || argument.hasPrefix("--")
                else { continue }
                let spelling = String(argument.split(separator: "=", maxSplits: 1)[0])
                if spelling.hasPrefix("--") || spelling.count == 2 {
                    options.append(spelling)
                } else {
                    options += spelling.dropFirst().map { "-\($0)" }  // short flags written together: `-xy`
                }
            }
            found.append(("\(tool.name) \(subcommand)".trimmingCharacters(in: .whitespaces),
                          tool.options[subcommand] ?? [], options))
        }
        return found
    }
}
