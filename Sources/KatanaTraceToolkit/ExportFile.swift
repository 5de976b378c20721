import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where an export goes: a temporary file beside the target that replaces it only when the export succeeded, so a
/// failed or interrupted export never leaves a half-written file under the name asked for. The file has no name
/// until then (`O_TMPFILE`), so an export ended by any signal, SIGKILL included, leaves nothing behind (guarded by
/// `Babeltrace2FallbackTests`' `aFallbackReadLeavesNoChildWhenTheToolkitIsKilled`, SIGINT, SIGTERM and SIGKILL
/// mid-export); where the file system cannot do that, a dot-file is
/// used and removed on failure.
final class ExportFile {
    let path: String
    private let folder: String
    /// The named temporary file, when the file system has no unnamed ones.
    private var temporary: String?
    private let file: UnsafeMutablePointer<FILE>
    private var closed = false
    private(set) var written = 0
    /// The most the file may hold, and the error that says so: a file past it is never put in place.
    var limit: (bytes: Int, refusal: (Int) -> TraceToolkitError)?

    /// Checks the target before anything is read: a directory, something that is not a regular file, or a folder
    /// that cannot be written to is refused in one line.
    init(path: String) throws(TraceToolkitError) {
        let url = URL(fileURLWithPath: path).resolvingSymlinksInPath()
        let real = url.path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: real, isDirectory: &isDirectory) {
            if isDirectory.boolValue {
                throw TraceToolkitError("cannot write \(path): it is a directory (give a file name, e.g. \(path)/trace.pftrace)")
            }
            var info = stat()
            if stat(real, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
                throw TraceToolkitError("cannot write \(path): it exists and is not a regular file")
            }
        }
        let folder = url.deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue,
              access(folder, W_OK) == 0 else {
            throw TraceToolkitError("cannot write \(path): \(folder) is not a writable directory")
        }
        // O_TMPFILE (Glibc's macro is not imported): __O_TMPFILE | O_DIRECTORY.
        var descriptor = open(folder, O_WRONLY | Int32(0o20000000) | O_DIRECTORY | O_CLOEXEC, 0o600)
        var temporary: String?
        if descriptor < 0 {
            var template = Array("\(folder)/.katana-export-XXXXXX".utf8CString)
            descriptor = mkstemp(&template)
            temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        guard descriptor >= 0, let file = fdopen(descriptor, "w") else {
            throw TraceToolkitError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        self.path = real
        self.folder = folder
        self.temporary = temporary
        self.file = file
    }

    deinit {
        if !closed {
            fclose(file)
            if let temporary { unlink(temporary) }
        }
    }

    func write(_ bytes: [UInt8]) throws(TraceToolkitError) {
        try checkWritten(bytes.withUnsafeBytes { fwrite($0.baseAddress, 1, $0.count, file) }, of: bytes.count)
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws(TraceToolkitError) {
        try checkWritten(fwrite(bytes.baseAddress, 1, bytes.count, file), of: bytes.count)
    }

    private func checkWritten(_ count: Int, of expected: Int) throws(TraceToolkitError) {
        guard count == expected else { throw TraceToolkitError("cannot write \(path): \(String(cString: strerror(errno)))") }
        written += count
    }

    /// Flushes, and puts the file in place (mode 0644 less the umask, as a file created the usual way).
    func commit() throws(TraceToolkitError) {
        if let limit, written > limit.bytes { throw limit.refusal(written) }
        closed = true
        let mask = umask(0)
        umask(mask)
        fchmod(fileno(file), 0o644 & ~mask)
        func failure() -> TraceToolkitError {
            let reason = String(cString: strerror(errno))
            if let temporary { unlink(temporary) }
            return TraceToolkitError("cannot write \(path): \(reason)")
        }
        guard fflush(file) == 0, fsync(fileno(file)) == 0 || errno == EINVAL else {
            let error = failure()
            fclose(file)
            throw error
        }
        if temporary == nil {
            // The unnamed file gets a name beside the target only now, then takes the target's (rename replaces it
            // in one step).
            let named = "\(folder)/.katana-export-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            guard linkat(AT_FDCWD, "/proc/self/fd/\(fileno(file))", AT_FDCWD, named, AT_SYMLINK_FOLLOW) == 0 else {
                let error = failure()
                fclose(file)
                throw error
            }
            temporary = named
        }
        guard fclose(file) == 0, let temporary, rename(temporary, path) == 0 else { throw failure() }
    }
}
