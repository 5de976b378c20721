import Foundation

/// The ```swift blocks of a Markdown page, each as its lines; a block indented as a list item's loses its fence's
/// indentation (so a manifest snippet in a list reads as written). Shared by the doc tests and `InstallTests`, which
/// builds the README's own lines.
public func swiftSnippets(_ page: String) -> [[String]] {
    var blocks: [[String]] = []
    var current: [String]?
    var indent = 0
    for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        if current == nil, trimmed == "```swift" {
            current = []
            indent = line.prefix { $0 == " " }.count
        } else if current != nil, trimmed == "```" {
            blocks.append(current!)
            current = nil
        } else if current != nil {
            current!.append(String(line.dropFirst(min(indent, line.prefix { $0 == " " }.count))))
        }
    }
    return blocks
}
