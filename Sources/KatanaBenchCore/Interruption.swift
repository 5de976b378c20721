import Foundation
import Glibc

/// Ctrl-C during `katana-bench run`: the first stops measuring — the workers finish the item in hand, the partial
/// results are printed and written as usual (marked interrupted) and the command exits 130; a second Ctrl-C exits
/// at once. Either way a `--trace` session is destroyed, never left behind.
final class Interruption: @unchecked Sendable {
    static let shared = Interruption()

    private let flag = AtomicFlag()
    // `cleanup` and `source` are guarded by `lock`.
    private let lock = NSLock()
    private var cleanup: (@Sendable () -> Void)?
    private var source: (any DispatchSourceSignal)?

    /// Whether Ctrl-C was pressed: measuring loops stop when it is.
    var requested: Bool { flag.value }

    /// Takes over SIGINT for the rest of the process.
    func install() {
        lock.withLock {
            guard source == nil else { return }
            signal(SIGINT, SIG_IGN)  // delivered to the dispatch source instead
            let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
            source.setEventHandler { [self] in interrupted() }
            source.resume()
            self.source = source
        }
    }

    /// What a second Ctrl-C must still do before exiting (destroy the tracing session).
    func onImmediateExit(_ action: (@Sendable () -> Void)?) { lock.withLock { cleanup = action } }

    private func interrupted() {
        if flag.value {
            lock.withLock { cleanup }?()
            FileHandle.standardError.write(Data("katana-bench: interrupted again: exiting without results\n".utf8))
            _exit(130)
        }
        flag.set(true)
        FileHandle.standardError.write(Data("katana-bench: interrupted: finishing the items in hand and reporting what was measured (Ctrl-C again to exit at once)\n".utf8))
    }
}
