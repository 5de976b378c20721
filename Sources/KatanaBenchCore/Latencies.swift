import Foundation
import Glibc
import Histogram
import Synchronization

/// A latency series: its name (the JSON key, the `.hgrm` file, the plot line) and what it measures. The built-in
/// scenarios record the static ones; a scenario of your own declares its own (`BenchScenario(metrics:)`) and records
/// them with `BenchContext.record`. Two metrics with the same name are the same series.
public struct BenchMetric: Hashable, Sendable, CustomStringConvertible {
    /// The metric's name in tables, JSON and histogram files (`checkout.place_call`).
    public let name: String
    /// What the metric measures, for the table's legend.
    public let label: String
    /// Its slot in every thread's histograms, given at first creation.
    let index: Int

    /// A metric named `name`, described by `label`.
    public init(_ name: String, label: String) {
        (self.label, index) = BenchMetric.registry.register(name, label: label)
        self.name = name
    }

    public var description: String { name }
    public static func == (a: BenchMetric, b: BenchMetric) -> Bool { a.name == b.name }
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// Every metric created so far, in creation order (the built-in ones first).
    static var all: [BenchMetric] { registry.all }

    static func named(_ name: String) -> BenchMetric? { registry.all.first { $0.name == name } }

    static let updaterQueueWait = BenchMetric(builtIn: "updater.queue_wait")
    static let updaterService = BenchMetric(builtIn: "updater.service")
    static let updaterEndToEnd = BenchMetric(builtIn: "updater.end_to_end")
    static let sideEffectQueueWait = BenchMetric(builtIn: "side_effect.queue_wait")
    static let sideEffectService = BenchMetric(builtIn: "side_effect.service")
    static let sideEffectEndToEnd = BenchMetric(builtIn: "side_effect.end_to_end")
    static let dispatchCall = BenchMetric(builtIn: "dispatch.call")

    /// A built-in metric (its label is the registry's).
    private init(builtIn name: String) { self.init(name, label: "") }

    private static let registry = Registry()

    private final class Registry: @unchecked Sendable {
        // `entries` is guarded by `lock`.
        private let lock = NSLock()
        // The built-in metrics first, in this order, whichever is used first.
        private var entries: [(name: String, label: String)] = [
            ("updater.queue_wait", "updater queue wait (dispatch → applied)"),
            ("updater.service", "updater service (inside updateState)"),
            ("updater.end_to_end", "updater end-to-end (sent, or due in open loop → handle resolved)"),
            ("side_effect.queue_wait", "side effect queue wait (dispatch → body starts)"),
            ("side_effect.service", "side effect service (body)"),
            ("side_effect.end_to_end", "side effect end-to-end (sent, or due in open loop → handle resolved)"),
            ("dispatch.call", "fire-and-forget dispatch call (producer side: call → return)"),
        ]

        func register(_ name: String, label: String) -> (String, Int) {
            lock.withLock {
                if let index = entries.firstIndex(where: { $0.name == name }) { return (entries[index].label, index) }
                entries.append((name, label))
                return (label, entries.count - 1)
            }
        }

        var all: [BenchMetric] { lock.withLock { entries }.map { BenchMetric($0.name, label: $0.label) } }
    }
}

typealias Metric = BenchMetric

typealias LatencyHistogram = Histogram<UInt64>

func makeHistogram() -> LatencyHistogram {
    // 1 ns .. 60 s at 3 significant digits: fixed size, so memory stays bounded however long the run.
    LatencyHistogram(lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
}

/// One thread's histograms. Only its own thread records into it (HdrHistogram is not thread-safe); they are
/// merged after the run, once every sample's handle has resolved.
final class ThreadLatencies: @unchecked Sendable {
    // Mutated only by the owning thread while recording is on; read by `RunLatencies.merged()` after the run.
    var histograms: [LatencyHistogram] = BenchMetric.all.map { _ in makeHistogram() }
    var parallelismSum: UInt64 = 0
    var parallelismSamples: UInt64 = 0
    var parallelismMax: UInt64 = 0

    @inline(__always)
    func record(_ metric: Metric, _ nanoseconds: UInt64) {
        // A metric created after these histograms (a scenario's own, declared late) gets its histogram on first use.
        while metric.index >= histograms.count { histograms.append(makeHistogram()) }
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

/// The per-thread latencies of one run.
final class RunLatencies: @unchecked Sendable {
    // `all` is guarded by `lock`; each thread's belongs to that thread (see ThreadLatencies).
    private let lock = NSLock()
    private var all: [ThreadLatencies] = []
    private var key = pthread_key_t()
    /// Whether samples are kept (off during warm-up).
    private let recording = AtomicFlag()

    init() {
        pthread_key_create(&key, nil)
    }

    deinit { pthread_key_delete(key) }

    func setRecording(_ on: Bool) { recording.set(on) }
    var isRecording: Bool { recording.value }

    /// This thread's histograms (created on first use).
    @inline(__always)
    var current: ThreadLatencies {
        if let raw = pthread_getspecific(key) {
            return Unmanaged<ThreadLatencies>.fromOpaque(raw).takeUnretainedValue()
        }
        let thread = ThreadLatencies()
        lock.withLock { all.append(thread) }  // `all` keeps it alive for the key's raw pointer
        pthread_setspecific(key, Unmanaged.passUnretained(thread).toOpaque())
        return thread
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
        let threads = lock.withLock { all }
        var result: [Metric: LatencyHistogram] = [:]
        for metric in BenchMetric.all {
            var total = makeHistogram()
            for thread in threads where metric.index < thread.histograms.count { total.add(thread.histograms[metric.index]) }
            result[metric] = total
        }
        let sum = threads.reduce(0) { $0 + $1.parallelismSum }
        let samples = threads.reduce(0) { $0 + $1.parallelismSamples }
        let peak = threads.map(\.parallelismMax).max() ?? 0
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
