import Foundation
import Katana
import KatanaTrace
import Testing

/// This test binary links Katana's library products and no tracing provider — as an app that has not opted in.
@Suite struct ProviderSeamTests {
    @Test func aProcessThatLinksNoProviderTracesNowhereAndLoadsNoLTTng() throws {
        #expect(NativeTraceBackend.linked == nil)
        #expect(KatanaTracing.defaultBackend is NoOpTraceBackend)
        let maps = try String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
        #expect(maps.contains("libswiftCore"), "/proc/self/maps must list the loaded libraries")
        #expect(!maps.contains("lttng"), "the test process mapped an LTTng library")
    }
}
