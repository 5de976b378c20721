import Foundation
import KatanaTestSupport
import Testing

/// Installing from a URL, as a new user does: a package of their own whose manifest is the README's Install lines and
/// whose program is the README's quick start plus a `KatanaBench` scenario, resolved by SwiftPM over git from a URL
/// (a `file://` clone of this checkout's files standing in for the public one) and built from nothing. A fresh
/// package build takes minutes, so `make test-install` runs this (CI does), not `make test`.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["KATANA_TEST_INSTALL"] != nil,
                "a dependent package builds from scratch in minutes: make test-install runs this (CI does)"),
       .serialized)
struct InstallTests {
    /// The README's manifest lines, its quick start, and the URL the Install section names.
    struct ReadmeLines {
        let dependency: String
        let target: String
        let quickStart: String
        let url: String

        init() throws {
            let readme = try String(contentsOf: Paths.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
            let blocks = Self.swiftBlocks(readme)
            guard let dependency = blocks.first(where: { $0.hasPrefix(".package(url:") }),
                  let target = blocks.first(where: { $0.hasPrefix(".executableTarget(") && $0.contains("\"KatanaBench\"") }),
                  let quickStart = blocks.first(where: { $0.hasPrefix("import Katana\n") }),
                  let open = dependency.range(of: "url: \""),
                  let close = dependency[open.upperBound...].firstIndex(of: "\"")
            else { throw RecordingError("README.md: no Install section's `.package(url:` and KatanaBench target, or no quick start") }
            self.dependency = dependency
            self.target = target
            self.quickStart = quickStart
            url = String(dependency[open.upperBound..<close])
        }

        static func swiftBlocks(_ page: String) -> [String] {
            var blocks: [String] = []
            var current: [String]?
            for line in page.split(separator: "\n", omittingEmptySubsequences: false) {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if current == nil, trimmed == "```swift" { current = [] } else if current != nil, trimmed == "```" {
                    blocks.append(current!.joined(separator: "\n"))
                    current = nil
                } else if current != nil { current!.append(String(line)) }
            }
            return blocks
        }
    }

    /// A git repository of this checkout's files as they are now (tracked and new, not ignored), on branch `main`, in
    /// a folder named as the published one (the URL's last part is the package's identity, `Katana`).
    static func publish(into folder: URL, as name: String) throws -> URL {
        let repository = folder.appendingPathComponent(name)
        let root = Paths.packageRoot
        let listed = try run(["git", "-C", root.path, "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        guard listed.status == 0 else { throw RecordingError("git ls-files: \(listed.err)") }
        for file in listed.out.split(separator: "\0") {
            let source = root.appendingPathComponent(String(file))
            guard FileManager.default.fileExists(atPath: source.path) else { continue }  // deleted, not yet committed
            let destination = repository.appendingPathComponent(String(file))
            try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: source, to: destination)
        }
        for command in [["init", "-q", "-b", "main"], ["add", "-A"],
                        ["-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "published"]] {
            let outcome = try run(["git", "-C", repository.path] + command)
            guard outcome.status == 0 else { throw RecordingError("git \(command.first!): \(outcome.err)") }
        }
        return repository
    }

    /// The user's package: the README's dependency line (its URL pointing at `repository`), its `my-bench` target, and
    /// a program that is the quick start followed by a scenario of the same store.
    static func writeUsersPackage(_ lines: ReadmeLines, repository: URL, into folder: URL) throws {
        let dependency = lines.dependency.replacingOccurrences(of: lines.url, with: repository.absoluteString)
        let manifest = """
            // swift-tools-version: 6.1
            import PackageDescription

            let package = Package(
                name: "MyApp",
                dependencies: [
                    \(dependency)
                ],
                targets: [
                    \(lines.target)
                ],
                swiftLanguageModes: [.v6]
            )

            """
        let program = lines.quickStart + """


            // The user's own benchmark of the same store.
            import KatanaBench

            let increments = BenchScenario("increments", summary: "an awaited IncrementCounter") { context in
                let store = Store<AppState, AppDependencies>(stateInitializer: { AppState() },
                                                             configuration: .init(traceBackend: context.traceBackend))
                return BenchWorkload { _ in try await store.dispatch(IncrementCounter()).value }
            }
            await KatanaBenchCLI.main(scenarios: [increments])

            """
        let sources = folder.appendingPathComponent("Sources/my-bench")
        try FileManager.default.createDirectory(at: sources, withIntermediateDirectories: true)
        try manifest.write(to: folder.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try program.write(to: sources.appendingPathComponent("main.swift"), atomically: true, encoding: .utf8)
    }

    /// `command` in a mount namespace of its own where LTTng-UST's headers are an empty folder and each of its
    /// libraries an empty file (as on a machine without LTTng's packages, and a link against one fails loudly:
    /// "file is empty"). The script first proves the mask holds, so the test cannot pass with LTTng still visible.
    static func withLTTngHidden(_ command: [String], in folder: URL) async throws -> (status: Int32, out: String, err: String) {
        let script = #"""
            set -e
            mount --make-rprivate /
            found=0
            for headers in /usr/include/lttng /usr/include/*/lttng; do
                [ -d "$headers" ] && mount -t tmpfs none "$headers" && found=1
            done
            for library in /usr/lib/*/liblttng-ust*.so* /usr/lib/liblttng-ust*.so*; do
                [ -f "$library" ] && mount --bind /dev/null "$library" && found=1
            done
            [ $found = 1 ] || { echo "LTTng-UST is not installed: nothing to hide" >&2; exit 99; }
            for header in /usr/include/lttng/tracepoint.h /usr/include/*/lttng/tracepoint.h; do
                [ ! -s "$header" ] || { echo "still visible: $header" >&2; exit 98; }
            done
            cd "$1"; shift
            exec "$@"
            """#
        return try await runSuspending(["unshare", "--mount", "sh", "-c", script, "sh", folder.path] + command)
    }

    @Test func aBenchOnKatanaBenchAloneBuildsWithLTTngHidden() async throws {
        let lines = try ReadmeLines()
        #expect(lines.url.hasPrefix("https://"), "the README's dependency line names no public URL: \(lines.url)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("katana-install-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let name = URL(string: lines.url)!.deletingPathExtension().lastPathComponent
        let repository = try Self.publish(into: folder.appendingPathComponent("published"), as: name)
        let package = folder.appendingPathComponent("my-app")
        try Self.writeUsersPackage(lines, repository: repository, into: package)

        let build = try await Self.withLTTngHidden(["swift", "build", "--product", "my-bench"], in: package)
        try #require(build.status == 0, "the README's package did not build with LTTng hidden:\n\(build.out.suffix(4_000))\n\(build.err.suffix(2_000))")
        let binary = package.appendingPathComponent(".build/debug/my-bench")
        let needed = try neededLibraries(binary)
        #expect(needed.contains { $0.hasPrefix("libswiftCore") }, "readelf must list NEEDED entries: \(needed)")
        #expect(!needed.contains { $0.contains("lttng") }, "NEEDED: \(needed)")

        // The quick start's output, then the scenario's histogram: it runs where LTTng's libraries are empty files.
        let bench = try await Self.withLTTngHidden([binary.path, "-s", "increments", "--count", "2000", "--warmup", "0"], in: package)
        try #require(bench.status == 0, "\(bench.err)")
        #expect(bench.out.contains("0 → 1"), "the quick start did not run first: \(bench.out.prefix(400))")
        #expect(bench.out.contains("increments.end_to_end"), "no histogram of the scenario: \(bench.out)")
        // Asking it for LTTng says what to add, in one line, exit 2.
        let traced = try await Self.withLTTngHidden([binary.path, "-s", "increments", "--count", "10", "--trace", folder.appendingPathComponent("t").path], in: package)
        #expect(traced.status == 2, "\(traced.out)\(traced.err)")
        #expect(traced.err.contains("KatanaLTTng product"), "\(traced.err)")
    }
}
