import CKatanaTraceProvider
import Dispatch
import Foundation
@testable import Katana
import KatanaTestSupport
import Testing

/// `katana_thread_id()` (the thread pointer): what every "does this thread hold it?" check compares.
@Suite struct ThreadIdentityTests {
    @Test func eachLiveThreadHasItsOwnStableIdentity() async {
        let threads = 4
        let ids = Collector<(first: UInt, again: UInt)>()
        let allStarted = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        for _ in 0..<threads {
            Thread {
                let first = katana_thread_id()
                allStarted.signal()
                release.wait()  // every thread alive at once: ids of live threads must differ
                ids.append((first, katana_thread_id()))
                finished.signal()
            }.start()
        }
        await onThread {
            for _ in 0..<threads { allStarted.wait() }
            for _ in 0..<threads { release.signal() }
            for _ in 0..<threads { finished.wait() }
        }
        let seen = ids.all
        #expect(seen.count == threads)
        #expect(seen.allSatisfy { $0.first == $0.again && $0.first != 0 })
        #expect(Set(seen.map(\.first)).count == threads)
    }
}
