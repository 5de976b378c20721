import Foundation
import Glibc
import Histogram
import Synchronization

/// The latency series katana-bench records. Raw values name the JSON keys, `.hgrm` files and plot lines.
enum Metric: String, CaseIterable, Codable, Sendable {
    case updaterQueueWait = "updater.queue_wait"
    case updaterService = "updater.service"
    case updaterEndToEnd = "updater.end_to_end"
    case sideEffectQueueWait = "side_effect.queue_wait"
    case sideEffectService = "side_effect.service"
    case sideEffectEndToEnd = "side_effect.end_to_end"
    case dispatchCall = "dispatch.call"

    var label: String {
        switch self {
        case .updaterQueueWait: "updater queue wait (dispatch → applied)"
        case .updaterService: "updater service (inside updateState)"
        case .updaterEndToEnd: "updater end-to-end (sent, or due in open loop → handle resolved)"
        case .sideEffectQueueWait: "side effect queue wait (dispatch → body starts)"
        case .sideEffectService: "side effect service (body)"
        case .sideEffectEndToEnd: "side effect end-to-end (sent, or due in open loop → handle resolved)"
        case .dispatchCall: "fire-and-forget dispatch call (producer side: call → return)"
        }
    }
}

typealias LatencyHistogram = Histogram<UInt64>

func makeHistogram() -> LatencyHistogram {
    // 1 ns .. 60 s at 3 significant digits: fixed size, so memory stays bounded however long the run.
    LatencyHistogram(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
}

/// One thread's histograms. Only its own thread records into it (HdrHistogram is not thread-safe); they are
/// merged after the run, once every sample's handle has resolved.
final class ThreadRecorder: @unchecked Sendable {
    // Mutated only by the owning thread while recording is on; read by `Recorders.merged()` after the run.
    var histograms: [LatencyHistogram] = Metric.allCases.map { _ in makeHistogram() }
    var parallelismSum: UInt64 = 0
    var parallelismSamples: UInt64 = 0
    var parallelismMax: UInt64 = 0

    @inline(__always)
    func record(_ metric: Metric, _ nanoseconds: UInt64) {
        _ = histograms[metric.index].record(max(nanoseconds, 1))
    }

    @inline(__always)
    func sampleParallelism(_ value: Int) {
        let v = UInt64(max(value, 0))
        parallelismSum &+= v
        parallelismSamples &+= 1
        if v > parallelismMax { parallelismMax = v }
    }
}

extension Metric {
    var index: Int { Metric.allCases.firstIndex(of: self)! }
}

/// The per-thread recorders of one run.
final class Recorders: @unchecked Sendable {
    // `all` is guarded by `lock`; each recorder belongs to one thread (see ThreadRecorder).
    private let lock = NSLock()
    private var all: [ThreadRecorder] = []
    private var key = pthread_key_t()
    /// Whether samples are kept (off during warm-up).
    private let recording = AtomicFlag()

    init() {
        pthread_key_create(&key, nil)
    }

    deinit { pthread_key_delete(key) }

    func setRecording(_ on: Bool) { recording.set(on) }
    var isRecording: Bool { recording.value }

    /// This thread's recorder (created on first use).
    @inline(__always)
    var current: ThreadRecorder {
        if let raw = pthread_getspecific(key) {
            return Unmanaged<ThreadRecorder>.fromOpaque(raw).takeUnretainedValue()
        }
        let recorder = ThreadRecorder()
        lock.withLock { all.append(recorder) }  // `all` keeps it alive for the key's raw pointer
        pthread_setspecific(key, Unmanaged.passUnretained(recorder).toOpaque())
        return recorder
    }

    @inline(__always)
    func record(_ metric: Metric, _ nanoseconds: UInt64) {
        guard recording.value else { return }
        current.record(metric, nanoseconds)
    }

    @inline(__always)
    func sampleParallelism(_ value: Int) {
        guard recording.value else { return }
        current.sampleParallelism(value)
    }

    /// All threads' histograms merged, and the parallelism samples. Call after every sample has been taken.
    func merged() -> (histograms: [Metric: LatencyHistogram], parallelismMean: Double, parallelismMax: UInt64) {
        let recorders = lock.withLock { all }
        var result: [Metric: LatencyHistogram] = [:]
        for metric in Metric.allCases {
            var total = makeHistogram()
            for recorder in recorders { total.add(recorder.histograms[metric.index]) }
            result[metric] = total
        }
        let sum = recorders.reduce(0) { $0 + $1.parallelismSum }
        let samples = recorders.reduce(0) { $0 + $1.parallelismSamples }
        let peak = recorders.map(\.parallelismMax).max() ?? 0
        return (result, samples == 0 ? 0 : Double(sum) / Double(samples), peak)
    }
}

/// A Bool shared between threads (an atomic, which ThreadSanitizer understands).
final class AtomicFlag: Sendable {
    private let stored = Atomic<Bool>(false)
    var value: Bool { stored.load(ordering: .acquiring) }
    func set(_ on: Bool) { stored.store(on, ordering: .releasing) }
}

/// An integer shared between threads.
final class AtomicCounter: Sendable {
    private let stored = Atomic<Int>(0)
    @discardableResult func add(_ delta: Int) -> Int { stored.wrappingAdd(delta, ordering: .relaxed).newValue }
    var value: Int { stored.load(ordering: .relaxed) }
}
