import Foundation
import Katana
import KatanaTestSupport
import KatanaTrace
import Testing

/// This test binary links Katana's library products and no tracing provider — as an app that has not opted in.
@Suite struct ProviderSeamTests {
    @Test func aProcessThatLinksNoProviderTracesNowhereAndLoadsNoLTTng() throws {
        #expect(NativeTraceBackend.linked == nil)
        #expect(KatanaTracing.defaultBackend is NoOpTraceBackend)
        let maps = try #require(readProcFile("/proc/self/maps"))
        #expect(maps.contains("libswiftCore"), "/proc/self/maps must list the loaded libraries")
        #expect(!maps.contains("lttng"), "the test process mapped an LTTng library")
    }
}
