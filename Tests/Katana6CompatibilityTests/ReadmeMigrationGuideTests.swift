import Foundation
import Testing

/// The "Migrating from Katana 6" article shows code from this target: every line of its Swift snippets must stand in
/// `Katana6StyleTests.swift`, so what the page shows is what compiles and runs here.
@Suite struct ReadmeMigrationGuideTests {
    @Test func everySnippetOfTheGuideIsCompiledHere() throws {
        let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let root = here.deletingLastPathComponent().deletingLastPathComponent()
        let article = try String(contentsOf: root.appendingPathComponent("Sources/Katana/Katana.docc/MigratingFromKatana6.md"),
                                 encoding: .utf8)
        let source = try String(contentsOf: here.appendingPathComponent("Katana6StyleTests.swift"), encoding: .utf8)
        let blocks = article.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
        #expect(blocks.count >= 3, "the guide's snippets are gone")
        let sourceLines = Set(source.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        for block in blocks {
            for line in block.split(separator: "\n") where !line.trimmingCharacters(in: .whitespaces).isEmpty {
                #expect(sourceLines.contains(line.trimmingCharacters(in: .whitespaces)),
                        "article line not in Katana6StyleTests.swift: \(line)")
            }
        }
    }
}
