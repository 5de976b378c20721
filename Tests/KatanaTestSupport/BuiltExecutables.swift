import Foundation

/// An executable of this package built next to the running test binary (which may sit inside a `.xctest`
/// bundle directory, up to three levels below the build folder).
public func builtExecutable(named name: String) -> URL {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
    for _ in 0..<3 {
        let candidate = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    return directory.appendingPathComponent(name)
}
