import Foundation
import KatanaTestSupport
import Testing

/// The README's and the DocC articles' Swift snippets are code the tests compile and run: every ```swift block
/// stands whole in a Swift file under `Tests/` or `Examples/` (test sources, or an example package a test builds and
/// runs); a manifest snippet names products the package has. A snippet edited on the page alone, or code changed
/// under it, fails here.
@Suite struct DocumentationSnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every page with snippets: the README and each catalog's articles.
    static func pages() throws -> [URL] {
        let articles = files(under: ["Sources"], extensions: ["md"]).filter { $0.path.contains(".docc/") }
        return ([root.appendingPathComponent("README.md")] + articles).sorted { $0.path < $1.path }
    }

    /// The files under `folders` (not build folders) whose extension is one of `extensions`.
    static func files(under folders: [String], extensions: Set<String>) -> [URL] {
        var files: [URL] = []
        for folder in folders {
            let enumerator = FileManager.default.enumerator(at: root.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            while let url = enumerator?.nextObject() as? URL {
                if url.lastPathComponent.hasPrefix(".build") { enumerator?.skipDescendants(); continue }
                if extensions.contains(url.pathExtension) { files.append(url) }
            }
        }
        return files
    }

    /// The ```swift blocks of a page, each line trimmed (indentation aside).
    static func snippets(_ page: String) -> [[String]] {
        swiftSnippets(page).map { $0.map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    /// A snippet of a package manifest (a target's dependencies), not of code.
    static func isManifest(_ block: [String]) -> Bool {
        block.first.map { [".executableTarget(", ".target(", ".package(", ".product("].contains(where: $0.hasPrefix) } ?? false
    }

    /// The trimmed, non-empty lines of every Swift file under `Tests/` and `Examples/`, file by file.
    static func compiledFiles() throws -> [(name: String, lines: [String])] {
        try files(under: ["Tests", "Examples"], extensions: ["swift"]).map { url in
            let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            return (url.path.replacingOccurrences(of: root.path + "/", with: ""), lines)
        }
    }

    /// Each snippet stands whole in one compiled file — its lines in order, none between them (blank lines and
    /// indentation aside; its `import` lines anywhere in the file, where Swift wants them): the code on the page is
    /// code a test builds and runs, as written, in the context it needs. The README's quick start (which Getting
    /// started repeats) is a whole program: `InstallTests` builds it as written, as the `main.swift` of a package made
    /// of the README's lines, and runs it.
    @Test func everySnippetIsCompiledAsWritten() throws {
        let files = try Self.compiledFiles()
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let quickStart = try #require(Self.snippets(readme).first { $0.first == "import Katana" })
        var checked = 0
        for page in try Self.pages() {
            let name = page.path.replacingOccurrences(of: Self.root.path + "/", with: "")
            for block in Self.snippets(try String(contentsOf: page, encoding: .utf8)) where !Self.isManifest(block) {
                checked += 1
                if block == quickStart { continue }
                let imports = block.filter { $0.hasPrefix("import ") }
                let lines = block.filter { !$0.isEmpty && !$0.hasPrefix("import ") }
                guard let first = lines.first else { continue }
                let found = files.contains { file in
                    imports.allSatisfy(file.lines.contains) && file.lines.indices.contains { start in
                        file.lines[start] == first && start + lines.count <= file.lines.count
                            && Array(file.lines[start..<(start + lines.count)]) == lines
                    }
                }
                #expect(found, "\(name): the snippet that begins \"\(first)\" stands whole in no compiled source")
            }
        }
        #expect(checked > 15, "the pages' snippets are gone")
    }

    /// A manifest snippet names products (and traits) this package has.
    @Test func everyProductAManifestSnippetNamesExists() throws {
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Package.swift"), encoding: .utf8)
        var named = 0
        for page in try Self.pages() {
            for block in Self.snippets(try String(contentsOf: page, encoding: .utf8)) where Self.isManifest(block) {
                for line in block {
                    // A trait a dependency line enables is one the package declares.
                    if let traits = line.range(of: "traits: [") {
                        for name in line[traits.upperBound...].prefix(while: { $0 != "]" }).split(separator: ",")
                            .map({ $0.trimmingCharacters(in: .whitespaces) }) where name.hasPrefix("\"") {
                            named += 1
                            #expect(manifest.contains(".trait(name: \(name)"), "\(page.lastPathComponent): no trait \(name)")
                        }
                    }
                    guard let start = line.range(of: ".product(name: \""), let end = line[start.upperBound...].firstIndex(of: "\"")
                    else { continue }
                    let product = line[start.upperBound..<end]
                    named += 1
                    #expect(manifest.contains(".library(name: \"\(product)\""), "\(page.lastPathComponent): no product \(product)")
                    // One spelling of the package (the identity a `.package(url:)` ending in `Katana.git` gives).
                    #expect(line.contains("package: \"Katana\")"), "\(page.lastPathComponent): spell the package \"Katana\": \(line)")
                }
            }
        }
        #expect(named >= 2)
    }

    /// Every "README → Section" (or "the README's Section section") in the project's sources, scripts and docs names a
    /// heading the README has (a heading that starts with it; "A → B" a heading for each step).
    @Test func everyReferenceToAReadmeSectionNamesOne() throws {
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let headings = readme.split(separator: "\n").filter { $0.hasPrefix("#") }
            .map { $0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased() }
        func isHeading(_ name: String) -> Bool {
            let name = name.trimmingCharacters(in: CharacterSet(charactersIn: " *\"`'“”")).lowercased()
            return !name.isEmpty && headings.contains { $0.hasPrefix(name) }
        }
        let files = ["Makefile", ".ci/run", "scripts/perf-gate", "scripts/perf-table", "Package.swift"].map { Self.root.appendingPathComponent($0) }
            + Self.files(under: ["Sources", "Tests", "Examples", "Benchmarks", "scripts", "traces", "Plugins"],
                         extensions: ["swift", "md", "c", "h", "py", "sh", "yml"])
        // A reference may wrap onto the next line of a comment.
        let wrap = #/\n\s*(?:///|//|##|#)?\s*/#
        let arrow = #/README(?:\.md)? →((?:\s*[^→\n.,;:()]+?\s*→)*\s*[^→\n.,;:()]+)/#
        let section = #/the README's ([A-Z][^.,;:()]*?) section/#
        var checked = 0
        for file in files where FileManager.default.fileExists(atPath: file.path) {
            let text = try String(contentsOf: file, encoding: .utf8).replacing(wrap, with: " ")
            let name = file.path.replacingOccurrences(of: Self.root.path + "/", with: "")
            if name == "Tests/Katana6CompatibilityTests/DocumentationSnippetTests.swift" { continue }
            for match in text.matches(of: arrow) {
                let steps = match.output.1.split(separator: "→").map(String.init)
                checked += 1
                #expect(steps.allSatisfy(isHeading), "\(name): \"\(match.output.0)\" names no README heading")
            }
            for match in text.matches(of: section) {
                checked += 1
                #expect(isHeading(String(match.output.1)), "\(name): \"\(match.output.0)\" names no README heading")
            }
        }
        #expect(checked >= 2, "the references are gone: \(checked)")
    }

    /// The Performance article's table is what the committed results give (`scripts/perf-table render`).
    @Test func thePerformanceTableIsMadeFromTheCommittedResults() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Self.root.appendingPathComponent("scripts/perf-table").path, "--check"]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(message)")
    }
}
