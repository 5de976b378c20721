import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where an export goes: a temporary file beside the target that replaces it only when the export succeeded, so a
/// failed or interrupted export never leaves a half-written file under the name asked for.
final class ExportFile {
    let path: String
    private let temporary: String
    private let file: UnsafeMutablePointer<FILE>
    private var closed = false
    private(set) var written = 0

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
        var template = Array("\(folder)/.katana-export-XXXXXX".utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0, let file = fdopen(descriptor, "w") else {
            throw TraceToolkitError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        self.path = real
        self.temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        self.file = file
    }

    deinit {
        if !closed {
            fclose(file)
            unlink(temporary)
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
        closed = true
        let mask = umask(0)
        umask(mask)
        fchmod(fileno(file), 0o644 & ~mask)
        guard fflush(file) == 0, fsync(fileno(file)) == 0 || errno == EINVAL, fclose(file) == 0 else {
            unlink(temporary)
            throw TraceToolkitError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
        guard rename(temporary, path) == 0 else {
            unlink(temporary)
            throw TraceToolkitError("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
