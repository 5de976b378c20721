import ArgumentParser
import Foundation
import Histogram
import Katana
import KatanaDispatchLog
import KatanaFlightRecorder
import KatanaInspector
import KatanaMetrics
import KatanaTrace
import Synchronization

/// The Store's per-dispatch costs, measured the way the core issue's limits state them: one producer, one
/// listener, release build, median of several runs.
struct Micro: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Measure the Store's per-dispatch costs (fire-and-forget, awaited round trip, side effects, two producers, listener delivery, interceptor chain).")

    enum Case: String, CaseIterable, ExpressibleByArgument {
        case fireAndForget = "fire-and-forget"
        case roundTrip = "round-trip"
        case sideEffects = "side-effects"
        case twoProducers = "two-producers"
        case listeners
        /// Fire-and-forget with an updater that writes the state (a counter and a byte of the payload, `--payload`
        /// bytes), one (old, new) listener: an updater too large for the compiler to inline into `dispatch` on its
        /// own, as most apps' are — where `fire-and-forget`'s one-line `Increment` is always inlined.
        case writingUpdater = "writing-updater"
        case interceptors
        case protocolInterceptors = "protocol-interceptors"
        case erasedInterceptors = "erased-interceptors"
        case intervals
        case stateSize = "state-size"
        /// The flight recorder's dumps: the longest a dispatching thread takes while another thread dumps, against
        /// none dumping (flight-recorder backends only).
        case dumps
        /// The metrics' exports: the longest a dispatching thread takes while another thread exports, against none
        /// exporting (`--backend metrics` only).
        case exports
        /// The live page: the longest a dispatching thread takes while another thread builds KatanaInspector's
        /// snapshot over and over (more than any number of open pages ask: they share one per refresh), against none
        /// (flight-recorder backends only).
        case inspector
        /// A dispatch log's recording cost (KatanaDispatchLog), per `Codable` updater; only when asked for.
        case dispatchLog = "dispatch-log"
        /// Updaters that can refuse, per state size: a `ThrowingStateUpdater` (works on a copy) against a
        /// `ValidatingStateUpdater` (in place) and a plain `StateUpdater`; only when asked for.
        case refusableUpdaters = "refusable-updaters"
        /// Updaters that queue: each round a holder thread parks in an updater (holding the lane) while this thread
        /// dispatches `--queued` updaters, which find the lane held and queue; the holder applies them when its own
        /// updater returns. Against the same round with nothing queued; only when asked for.
        case queued
        /// The flight recorder's window: `--threads` threads, each dispatching `--rate` updaters a second into a store
        /// of its own, until the recorder has recorded more than it keeps; then how far back each thread's kept events
        /// reach (flight-recorder backend; only when asked for).
        case window
    }

    @Option(name: .long, parsing: .unconditional, help: "Dispatches per run (side effects: a tenth of this).")
    var iterations: Int = 1_000_000

    @Option(name: .long, parsing: .unconditional, help: "Runs per case; the median is reported.")
    var runs: Int = 5

    @Option(name: .long, parsing: .upToNextOption, help: "Cases to run (default: all): \(Case.allCases.map(\.rawValue).joined(separator: ", ")).")
    var only: [Case] = []

    enum Backend: String, CaseIterable, ExpressibleByArgument {
        /// `KatanaTracing.backend`: LTTng when the provider is linked (the katana-bench executable), else no-op.
        case `default`
        case lttng, none
        /// Katana's in-process flight recorder (`KatanaFlightRecorder`): per-thread memory, no LTTng.
        case flightRecorder = "flight-recorder"
        /// Both at once, through `MultiplexTraceBackend`.
        case lttngAndFlightRecorder = "lttng+flight-recorder"
        /// KatanaMetrics (swift-metrics histograms per type), exported every second to the bootstrapped factory.
        case metrics

        /// The backend this names.
        func make() throws -> any TraceBackend {
            switch self {
            case .default: KatanaTracing.backend
            case .lttng: try LinkedLTTng.require()
            case .none: NoOpTraceBackend()
            case .flightRecorder: FlightRecorder.shared
            case .lttngAndFlightRecorder: MultiplexTraceBackend([try LinkedLTTng.require(), FlightRecorder.shared])
            case .metrics: try Micro.metrics.get()
            }
        }

        /// Whether the flight recorder is (one of) the backend(s).
        var recordsInProcess: Bool { self == .flightRecorder || self == .lttngAndFlightRecorder }
    }

    @Option(name: .long, help: "Trace backend: default (LTTng when compiled in), lttng, none, flight-recorder, lttng+flight-recorder, metrics.")
    var backend: Backend = .default

    /// The metrics `--backend metrics` records into, made once. Never exported: an export runs on a thread of its own
    /// (a scrape's cost is measured by `make test-metrics`), and here it would make callgrind's counts depend on timing.
    static let metrics = Result { () throws(DispatchMetrics.ConfigurationError) in try DispatchMetrics(.init(exportInterval: nil)) }

    // 64 by default: a round's two thread wake-ups (the parked holder's, this thread's) cost tens of microseconds on a
    // VM, and with one updater queued per round they, not the updater, made most of the difference (`make walk` asks
    // for 1 and 0: it counts calls, not time).
    @Option(name: .long, parsing: .unconditional, help: "Updaters queued behind the parked holder per round (--only queued; 0: the round alone).")
    var queued: Int = 64

    @Option(name: .customLong("in-flight"), parsing: .unconditional,
            help: "Side effects dispatched before the first of them is awaited (--only side-effects; 1: each awaited before the next is dispatched).")
    var inFlight: Int = Micro.sideEffectSlice

    @Option(name: .long, parsing: .unconditional, help: "Updaters a second each thread dispatches (--only window).")
    var rate: Int = 100_000

    @Option(name: .long, parsing: .unconditional, help: "Threads dispatching at --rate (--only window).")
    var threads: Int = 1

    @Option(name: .long, parsing: .unconditional, help: "Bytes of payload in the state (0: a counter and an empty payload array, no heap storage, as in the limits).")
    var payload: Int = 0

    @Option(name: .long, help: "Write the figures as JSON to this file.")
    var json: String?

    @Flag(name: .customLong("floors"), inversion: .prefixedNo,
          help: "Measure each figure's floor in the same run and print the ratio (--no-floors: the figures alone, as the callgrind gate counts them).")
    var floors = true

    /// The performance gate's self-test (`make perf-gate-selftest`): the gate must fail on a slower dispatch, so this
    /// makes every store's dispatch slower by one more listener (``Micro/injectedListener(_:)``). A listener, not a
    /// change to Katana: the self-test then measures the very build the gate has just measured, instead of compiling
    /// Katana and everything that uses it again, as a build trait for it did.
    @Flag(name: .customLong("inject-regression"), help: .hidden)
    var injectRegression = false

    func validate() throws {
        try checkRange(iterations, 10...1_000_000_000, "--iterations")
        try checkRange(payload, 0...(1 << 30), "--payload", unit: "bytes")
        try checkRange(runs, 1...1_000, "--runs")
        try checkRange(queued, 0...Micro.queuedLimit, "--queued")
        try checkRange(inFlight, 1...Micro.sideEffectSlice, "--in-flight")
        try checkRange(rate, 1_000...10_000_000, "--rate", unit: "updaters a second")
        try checkRange(threads, 1...64, "--threads")
        if only.contains(.window), backend != .flightRecorder {
            throw ValidationError("--only window measures the flight recorder's window: give --backend flight-recorder")
        }
        // Fail before measuring, not after, when the output cannot be written.
        if let json { try checkWritable(file: json) }
    }

    func run() async throws {
        let backend = try self.backend.make()
        if self.backend != .none {
            Floors.calibrateDurationClock()
            FileHandle.standardError.write(Data("tracing: \(type(of: backend)), LTTng provider linked: \(LinkedLTTng.backend != nil), session listening: \(backend.isEnabled)\n".utf8))
        }
        let cases = only.isEmpty ? Case.allCases : only
        var figures: [String: Double] = [:]
        for item in cases {
            switch item {
            case .fireAndForget:
                var perOps: [Double] = [], floors: [Double] = [], events: [Double] = []
                for _ in 0..<runs {
                    perOps.append(fireAndForget(count: iterations, backend: backend))
                    guard self.floors else { continue }
                    floors.append(Floors.lockAndListener(count: iterations))
                    if let event = Floors.rawEvent(count: iterations, backend: backend) { events.append(event) }
                }
                let perOp = median(perOps)
                // While a session records, the dispatch's limit is the recorded one (the line below), not the untraced
                // dispatch's (`LTTngRecordingTests.microWhileASessionRecordsStatesTheRecordedLimit`).
                let limit = self.backend == .flightRecorder || self.backend == .metrics ? "the backend's own below"
                    : backend.isEnabled ? "≤ 350 ns while a session records" : "≤ 100 ns"
                report(String(format: "fire-and-forget updater dispatch   %9.1f ns/op", perOp), "fire_and_forget", perOp, perRun: perOps, floors: floors,
                       floor: "a locked update and a listener call", limit: limit, into: &figures)
                if !events.isEmpty {
                    // A recorded inline updater emits one event (updater_inline): its floor is one raw event. The
                    // limit is absolute, so it means the same whatever the floor.
                    let event = median(events)
                    figures["raw_lttng_event_floor_ns"] = event
                    figures["recorded_dispatch_ratio"] = perOp / event
                    print(String(format: "  recording: %5.1f× one raw LTTng event (%.1f ns; a recorded inline updater is one event); limit ≤ 350 ns",
                                 perOp / event, event))
                }
                if self.backend == .flightRecorder, self.floors { flightRecorderCost(into: &figures) }
                if self.backend == .metrics, self.floors { try await metricsCost(metrics: try Micro.metrics.get(), into: &figures) }
            case .roundTrip:
                var p50s: [Double] = []
                var p99s: [Double] = []
                for _ in 0..<runs {
                    let histogram = try await roundTrip(count: iterations / 5, backend: backend)
                    p50s.append(Double(histogram.valueAtPercentile(50)))
                    p99s.append(Double(histogram.valueAtPercentile(99)))
                }
                figures["round_trip_p50_ns"] = median(p50s)
                figures["round_trip_p99_ns"] = median(p99s)
                print(String(format: "awaited updater round trip   p50 %9.1f ns  p99 %9.1f ns   (limit ≤ 1000 / ≤ 10000)",
                             median(p50s), median(p99s)))
            case .sideEffects:
                var perOps: [Double] = [], floors: [Double] = []
                for _ in 0..<runs {
                    let (perOp, floor) = try await sideEffects(count: iterations / 10, inFlight: inFlight, backend: backend,
                                                                  withFloor: self.floors)
                    perOps.append(perOp)
                    if let floor { floors.append(floor) }
                }
                let perOp = median(perOps)
                report(String(format: "side effect awaiting one updater   %9.1f ns/op", perOp), "side_effect", perOp, perRun: perOps, floors: floors,
                       floor: "a Task doing a locked update, spawned and awaited", limit: "≤ 1.5×", into: &figures)
            case .twoProducers:
                var ones: [Double] = [], twos: [Double] = [], floors: [Double] = [], speeds: [Double] = []
                for _ in 0..<runs {
                    ones.append(try await producers(1, count: iterations, backend: backend))
                    twos.append(try await producers(2, count: iterations, backend: backend))
                    if self.floors {
                        floors.append(Floors.twoThreadsOnOneLock(count: iterations))
                        speeds.append(Floors.twoThreadSpeed())
                    }
                }
                let one = median(ones), two = median(twos)
                figures["one_producer_ns_per_op"] = one
                report(String(format: "one producer %9.1f ns/op, two producers %9.1f ns/op aggregate", one, two), "two_producers", two,
                       perRun: twos, floors: floors, floor: Floors.threadSanitizerIsActive ? "two threads on one pthread mutex, under TSan" : "two threads on one Mutex",
                       limit: "≤ 3×", into: &figures)
                if !speeds.isEmpty {
                    let speed = median(speeds)
                    figures["two_thread_speed"] = speed
                    print(String(format: "  two busy threads each ran at %.2f× one alone's speed%@", speed,
                                 speed < Micro.sharedCoreSpeed
                                     ? " — the two CPUs were not both this process's: two-thread figures and their ratio from this run measure the machine"
                                     : ""))
                }
            case .listeners:
                let perOp = median((0..<runs).map { _ in
                    fireAndForget(count: iterations, backend: backend, listeners: Micro.listenerCount)
                })
                figures["listeners_ns_per_op"] = perOp
                print(String(format: "dispatch to %d listeners            %9.1f ns/op", Micro.listenerCount, perOp))
            case .writingUpdater:
                let perOp = median((0..<runs).map { _ in
                    payloadWrites(count: iterations, bytes: payload, backend: backend, newStateListener: false)
                })
                figures["writing_updater_ns_per_op"] = perOp
                print(String(format: "fire-and-forget, writing updater   %9.1f ns/op", perOp))
            case .interceptors:
                var withChain: [Double] = [], added: [Double] = [], floors: [Double] = []
                for _ in 0..<runs {
                    guard self.floors else {
                        withChain.append(fireAndForget(count: iterations, backend: backend, interceptors: Micro.interceptorCount))
                        continue
                    }
                    let (through, none) = throughAndWithout(count: iterations, backend: backend, protocolForm: false, erased: false)
                    withChain.append(through)
                    added.append(through - none)
                    floors.append(Floors.closureCalls(count: iterations, depth: Micro.interceptorCount))
                }
                let perOp = median(withChain), extra = median(added), floor = median(floors)
                figures["interceptors_ns_per_op"] = perOp
                guard self.floors else {
                    print(String(format: "dispatch through %d interceptors    %9.1f ns/op", Micro.interceptorCount, perOp))
                    continue
                }
                figures["interceptors_added_ns_per_op"] = extra
                figures["interceptors_floor_ns"] = floor
                print(String(format: "dispatch through %d interceptors    %9.1f ns/op   +%.1f ns over none (its floor, %d closure calls: %.1f ns); limit ≤ +50 ns",
                             Micro.interceptorCount, perOp, extra, Micro.interceptorCount, floor))
            case .protocolInterceptors, .erasedInterceptors:
                // TypedDispatchInterceptors (the cheaper form for updaters), or DispatchInterceptors (erased).
                let erased = item == .erasedInterceptors
                let (key, label) = erased ? ("erased_interceptors", "DispatchInterceptors     ")
                                          : ("protocol_interceptors", "TypedDispatchInterceptors")
                var withChain: [Double] = [], added: [Double] = []
                for _ in 0..<runs {
                    guard self.floors else {
                        withChain.append(fireAndForget(count: iterations, backend: backend, interceptors: Micro.interceptorCount,
                                                       protocolForm: true, erased: erased))
                        continue
                    }
                    let (through, none) = throughAndWithout(count: iterations, backend: backend, protocolForm: true, erased: erased)
                    withChain.append(through)
                    added.append(through - none)
                }
                let perOp = median(withChain)
                figures["\(key)_ns_per_op"] = perOp
                guard self.floors else {
                    print(String(format: "through %d %@ %9.1f ns/op", Micro.interceptorCount, label, perOp))
                    continue
                }
                let extra = median(added)
                figures["\(key)_added_ns_per_op"] = extra
                print(String(format: "through %d %@ %9.1f ns/op   +%.1f ns over none; limit ≤ +50 ns",
                             Micro.interceptorCount, label, perOp, extra))
            case .stateSize:
                // Per state size, an updater that writes into the payload, with one (old, new) listener and with one
                // new-state listener; fewer iterations for the bigger states (a 1 MB copy takes tens of µs).
                print("state size     (old, new) listener   new-state listener   (fire-and-forget updater writing the state)")
                for (label, bytes, divisor) in [("0 B", 0, 1), ("1 KB", 1_024, 1), ("1 MB", 1 << 20, 200)] {
                    let count = max(iterations / divisor, 10)
                    var both: [Double] = [], newOnly: [Double] = []
                    for _ in 0..<runs {
                        both.append(payloadWrites(count: count, bytes: bytes, backend: backend, newStateListener: false))
                        newOnly.append(payloadWrites(count: count, bytes: bytes, backend: backend, newStateListener: true))
                    }
                    let key = label.replacingOccurrences(of: " ", with: "").lowercased()
                    figures["state_\(key)_old_new_listener_ns_per_op"] = median(both)
                    figures["state_\(key)_new_state_listener_ns_per_op"] = median(newOnly)
                    print(String(format: "%-10@ %16.1f ns/op %17.1f ns/op", label, median(both), median(newOnly)))
                }
            case .dispatchLog:
                guard only.contains(.dispatchLog) else { continue }
                try dispatchLogCost(into: &figures)
            case .refusableUpdaters:
                guard only.contains(.refusableUpdaters) else { continue }
                refusableUpdaters(backend: backend, into: &figures)
            case .queued:
                guard only.contains(.queued) else { continue }
                queuedCost(backend: backend, into: &figures)
            case .window:
                guard only.contains(.window) else { continue }
                flightWindow(into: &figures)
            case .dumps:
                guard self.backend.recordsInProcess else {
                    if only.contains(.dumps) { throw ValidationError("--only dumps measures the flight recorder's dumps: give --backend flight-recorder") }
                    continue
                }
                try dumpWait(into: &figures)
            case .inspector:
                guard self.backend.recordsInProcess else {
                    if only.contains(.inspector) { throw ValidationError("--only inspector reads the flight recorder: give --backend flight-recorder") }
                    continue
                }
                try inspectorWait(into: &figures)
            case .exports:
                guard self.backend == .metrics else {
                    if only.contains(.exports) { throw ValidationError("--only exports measures the metrics' exports: give --backend metrics") }
                    continue
                }
                try exportWait(metrics: try Micro.metrics.get(), into: &figures)
            case .intervals:
                var direct: [Double] = []
                var closure: [Double] = []
                var wrapped: [Double] = []
                var added: [Double] = []
                for _ in 0..<runs {
                    let figures = try await intervals(count: iterations, backend: backend)
                    direct.append(figures.direct)
                    closure.append(figures.closure)
                    wrapped.append(figures.interval)
                    added.append(figures.interval - figures.direct)
                }
                figures["interval_direct_ns_per_op"] = median(direct)
                figures["interval_closure_ns_per_op"] = median(closure)
                figures["interval_ns_per_op"] = median(wrapped)
                // The interval's own cost: the median of each run's difference (both loops ran interleaved in it).
                figures["interval_added_ns_per_op"] = median(added)
                print(String(format: "context.interval around a call     %9.1f ns/op   (+%.1f ns over the call alone, %.1f ns; through a closure-taking function %.1f ns)",
                             median(wrapped), median(added), median(direct), median(closure)))
            }
        }
        // The process's peak resident memory: with the flight recorder, bounded by its rings whatever the iterations
        // (FlightRecorderTests.recordingStaysInItsBoundedMemory).
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 { figures["peak_rss_kb"] = Double(usage.ru_maxrss) }
        // What the process itself holds at the end (its heap, the recorder's rings), without shared mappings: while an
        // LTTng session records katana:* — anyone's — liblttng-ust maps its per-user buffers into every registered
        // process (26 MB → 174 MB peak with an 8M × 8 channel here), which a peak RSS cannot tell from a leak.
        if let anon = Micro.anonymousResidentKilobytes() { figures["rss_anon_kb"] = anon }
        if self.backend.recordsInProcess, let peak = figures["peak_rss_kb"] {
            let counts = FlightRecorder.shared.counts
            print(String(format: "flight recorder: %llu events recorded, %llu discarded; peak RSS %.1f MiB", counts.recorded, counts.discarded, peak / 1024))
        }
        if let json {
            let data = try JSONSerialization.data(withJSONObject: figures, options: [.prettyPrinted, .sortedKeys])
            try writeOutput(data, to: json)
        }
    }

    /// Records `value` as `<key>_ns_per_op` and prints `line`; with floors, also the floor (the median of `floors`)
    /// and the ratio, in the JSON and on the line. The ratio is the median of each run's own (its figure over the
    /// floor measured right after it), not the quotient of the two medians: on a machine whose speed changes between
    /// runs, the two medians can come from different runs, and each run's pair saw the same machine.
    private func report(_ line: String, _ key: String, _ value: Double, perRun: [Double], floors: [Double],
                        floor label: String, limit: String, into figures: inout [String: Double]) {
        figures["\(key)_ns_per_op"] = value
        guard self.floors, !floors.isEmpty, floors.count == perRun.count else {
            print(line)
            return
        }
        let floor = median(floors)
        let ratio = pairedRatio(figures: perRun, floors: floors)
        figures["\(key)_floor_ns"] = floor
        figures["\(key)_ratio"] = ratio
        print(line + String(format: "   %5.1f× its floor (%@: %.1f ns); limit %@", ratio, label, floor, limit))
    }

    /// Below this `two_thread_speed`, `micro` says the two threads did not have two CPUs to themselves.
    static let sharedCoreSpeed = 0.8
    /// Listeners in the `listeners` case, interceptors in the `interceptors` case (which has the usual one listener).
    static let listenerCount = 4
    static let interceptorCount = 3

    private func makeStore(backend: any TraceBackend, listeners: Int = 1, interceptors: Int = 0,
                           protocolForm: Bool = false, erased: Bool = false) -> BenchStore {
        let payload = self.payload
        let passThrough: StoreInterceptor = { _ in { next in { item in try next(item) } } }
        let store = BenchStore(interceptors: protocolForm ? [] : Array(repeating: passThrough, count: interceptors),
                               stateInitializer: { BenchState(payloadBytes: payload) },
                               configuration: .init(traceBackend: backend,
                                                    interceptors: !protocolForm ? [] : erased
                                                        ? Array(repeating: ErasedPassThrough(), count: interceptors)
                                                        : Array(repeating: PassThrough(), count: interceptors)))
        for _ in 0..<listeners { store.addListener { _, new in blackHole(new.counter) } }
        if injectRegression { store.addListener { _, new in Micro.injectedListener(new.counter) } }
        return store
    }

    /// `--inject-regression`'s listener: one heap allocation and some arithmetic per change, on the path every dispatch
    /// already takes (its listeners), enough that both of the self-test's callgrind workloads must go over their
    /// thresholds (`make perf-gate-selftest`).
    @inline(never)
    static func injectedListener(_ counter: Int) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for index in 0..<24 { hash = (hash ^ UInt64(index)) &* 0x100_0000_01b3 }
        let block = malloc(32)
        // Stored where the optimiser must keep it, so neither the allocation nor the arithmetic is dropped.
        injectedSink.store(Int(bitPattern: block) ^ Int(truncatingIfNeeded: hash) ^ counter, ordering: .relaxed)
        free(block)
    }

    private static let injectedSink = Atomic<Int>(0)

    /// ns per dispatch, one producer, nobody awaiting.
    private func fireAndForget(count: Int, backend: any TraceBackend, listeners: Int = 1, interceptors: Int = 0,
                               protocolForm: Bool = false, erased: Bool = false) -> Double {
        let store = makeStore(backend: backend, listeners: listeners, interceptors: interceptors, protocolForm: protocolForm,
                              erased: erased)
        let start = nowNanoseconds()
        for _ in 0..<count { store.dispatch(Increment()) }
        let elapsed = nowNanoseconds() - start
        precondition(store.state.counter == count, "lost updates: \(store.state.counter) of \(count)")
        return Double(elapsed) / Double(count)
    }

    /// ns per dispatch through `interceptorCount` interceptors and without any, measured in alternating slices of a
    /// tenth of `count` each (which store goes first alternates by slice): the difference is the chain's cost, and
    /// the two figures it is taken from see the same phase of a shared machine (measured one after the other, the
    /// machine slowing down in between read as a chain costing over half again what it costs).
    private func throughAndWithout(count: Int, backend: any TraceBackend, protocolForm: Bool, erased: Bool) -> (through: Double, none: Double) {
        alternating(count: count, makeStore(backend: backend, interceptors: Micro.interceptorCount, protocolForm: protocolForm, erased: erased),
                    makeStore(backend: backend))
    }

    /// The longest fire-and-forget dispatch (and its p99.99) on this thread while another thread dumps the flight
    /// recorder over and over (issue #41: bounded, measured). A dump copies the threads' memory without a lock (it lists the segments under the one a thread takes once per 256 events).
    private func dumpWait(into figures: inout [String: Double]) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("katana-bench-dumps-\(getpid())")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let stalls = try dispatchStalls(store: makeStore(backend: FlightRecorder.shared)) {
            let folder = root.appendingPathComponent(UUID().uuidString)
            defer { try? FileManager.default.removeItem(at: folder) }
            return try FlightRecorder.shared.dump(to: folder.path)
        }
        stalls.report("dump", as: "dispatch while dumping   ", into: &figures)
        print(String(format: "  %d dumps of ~%llu events, %.2f ms each (median)", stalls.works.count, stalls.itemsPerWork,
                     median(stalls.works.map { Double($0) / 1e6 })))
    }

    /// The longest fire-and-forget dispatch (and its p99.99) on this thread while another thread exports the metrics
    /// over and over — what a scrape that calls `export()` does — (issue #48: bounded, measured). An export reads the
    /// threads' counters; it takes no lock a dispatch takes.
    private func exportWait(metrics: DispatchMetrics, into figures: inout [String: Double]) throws {
        let stalls = try dispatchStalls(store: makeStore(backend: metrics)) {
            metrics.export()
            return 0
        }
        stalls.report("export", as: "dispatch while exporting", into: &figures)
        print(String(format: "  %d exports, %.1f µs each (median)", stalls.works.count, median(stalls.works.map { Double($0) / 1e3 })))
    }

    /// The longest fire-and-forget dispatch (and its p99.99) on this thread while another thread makes the live
    /// page's snapshot over and over, uncached (issue #49: pages open never make dispatching threads wait). A snapshot
    /// copies the flight recorder's memory as a dump does.
    private func inspectorWait(into figures: inout [String: Double]) throws {
        let inspector = Inspector(.init(refresh: .zero))
        let stalls = try dispatchStalls(store: makeStore(backend: FlightRecorder.shared)) {
            guard case .bytes(let json) = inspector.respond(method: "GET", path: "/debug/katana/snapshot.json").body else { return 0 }
            return UInt64(json.count)
        }
        stalls.report("snapshot", as: "dispatch while a page reads", into: &figures)
        print(String(format: "  %d snapshots of ~%llu bytes, %.2f ms each (median)", stalls.works.count, stalls.itemsPerWork,
                     median(stalls.works.map { Double($0) / 1e6 })))
    }

    /// How long fire-and-forget dispatches on this thread take while another thread runs `work` over and over, against
    /// none, and against a thread that copies memory for as long (the control: what a second busy thread alone does to
    /// the dispatching one on a 2-core machine, where the two share the caches and memory bandwidth); a run of each in
    /// turn, `runs` times.
    private func dispatchStalls(store: BenchStore, work: @escaping @Sendable () throws -> UInt64) throws -> Stalls {
        /// `working`: the other thread runs `work`; else, with `busy`, it copies memory; else it does nothing.
        func measure(working: Bool, busy: Bool = false) throws -> (histogram: Histogram<UInt64>, loop: WorkLoop) {
            let loop = WorkLoop(work: work)
            let finished = DispatchSemaphore(value: 0)
            if working || busy { Thread { if working { loop.run() } else { loop.copyMemory() }; finished.signal() }.start() }
            var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
            for _ in 0..<iterations {
                let start = nowNanoseconds()
                store.dispatch(Increment())
                _ = histogram.record(nowNanoseconds() - start)
            }
            loop.stop.store(true, ordering: .relaxed)
            if working || busy { finished.wait() }
            if let error = loop.error { throw ValidationError("the other thread's work failed: \(error)") }
            return (histogram, loop)
        }
        var stalls = Stalls()
        for _ in 0..<runs {
            let quiet = try measure(working: false), working = try measure(working: true), control = try measure(working: false, busy: true)
            stalls.quiet.append(quiet.histogram)
            stalls.working.append(working.histogram)
            stalls.control.append(control.histogram)
            stalls.works += working.loop.durations
            stalls.itemsPerWork = max(stalls.itemsPerWork, working.loop.items / UInt64(max(1, working.loop.durations.count)))
        }
        return stalls
    }

    /// What ``dispatchStalls(store:work:)`` measured.
    struct Stalls {
        var quiet: [Histogram<UInt64>] = [], working: [Histogram<UInt64>] = [], control: [Histogram<UInt64>] = []
        var works: [UInt64] = []
        var itemsPerWork: UInt64 = 0

        /// Records `<key>_wait_max_ns` and the rest into `figures` and prints one line.
        func report(_ key: String, as label: String, into figures: inout [String: Double]) {
            func longest(_ runs: [Histogram<UInt64>]) -> Double { runs.map { Double($0.max) }.max() ?? 0 }
            func tail(_ runs: [Histogram<UInt64>]) -> Double { median(runs.map { Double($0.valueAtPercentile(99.99)) }) }
            figures["\(key)_wait_max_ns"] = longest(working)
            figures["\(key)_wait_p9999_ns"] = tail(working)
            figures["no_\(key)_max_ns"] = longest(quiet)
            figures["no_\(key)_p9999_ns"] = tail(quiet)
            figures["busy_thread_max_ns"] = longest(control)
            figures["busy_thread_p9999_ns"] = tail(control)
            figures["\(key)_ms"] = median(works.map { Double($0) / 1e6 })
            print(String(format: "%@ longest %9.1f µs  p99.99 %7.1f µs   (none: longest %.1f µs, p99.99 %.1f µs; a thread copying memory instead: longest %.1f µs, p99.99 %.1f µs)",
                         label, longest(working) / 1e3, tail(working) / 1e3, longest(quiet) / 1e3, tail(quiet) / 1e3,
                         longest(control) / 1e3, tail(control) / 1e3))
        }
    }

    /// ns per fire-and-forget dispatch on `first` and on `second`, measured in alternating slices of a tenth of
    /// `count` each (which store goes first alternates by slice), so both figures see the same phase of a shared
    /// machine: measured one after the other, the machine slowing down in between read as a difference of its own.
    private func alternating(count: Int, _ first: BenchStore, _ second: BenchStore) -> (Double, Double) {
        let slice = max(count / 10, 1)
        var firstElapsed: UInt64 = 0, secondElapsed: UInt64 = 0
        var done = 0, index = 0
        while done < count {
            let size = min(slice, count - done)
            for store in index % 2 == 0 ? [first, second] : [second, first] {
                let start = nowNanoseconds()
                for _ in 0..<size { store.dispatch(Increment()) }
                let elapsed = nowNanoseconds() - start
                if store === first { firstElapsed += elapsed } else { secondElapsed += elapsed }
            }
            done += size
            index += 1
        }
        precondition(first.state.counter == count && second.state.counter == count, "lost updates")
        return (Double(firstElapsed) / Double(count), Double(secondElapsed) / Double(count))
    }

    /// What the flight recorder adds to a fire-and-forget dispatch, against an unrecorded store in the same run, its
    /// floor (two clock reads and one record into this thread's memory) and, while an LTTng session records, one raw
    /// LTTng-UST event — the two ratios issue #41 limits, which the lines it prints state.
    private func flightRecorderCost(into figures: inout [String: Double]) {
        var added: [Double] = [], unrecorded: [Double] = [], floors: [Double] = [], events: [Double] = []
        let lttng = LinkedLTTng.backend.flatMap { $0.isEnabled ? $0 : nil }
        for _ in 0..<runs {
            let (recorded, none) = alternating(count: iterations, makeStore(backend: FlightRecorder.shared),
                                               makeStore(backend: NoOpTraceBackend()))
            added.append(recorded - none)
            unrecorded.append(none)
            floors.append(FlightRecorder.floorNanoseconds(count: iterations))
            if let lttng, let event = Floors.rawEvent(count: iterations, backend: lttng) { events.append(event) }
        }
        let extra = median(added), floor = median(floors)
        figures["flight_recorder_added_ns"] = extra
        figures["flight_recorder_unrecorded_ns"] = median(unrecorded)
        figures["flight_recorder_floor_ns"] = floor
        figures["flight_recorder_floor_ratio"] = extra / floor
        print(String(format: "  flight recorder: +%.1f ns over an unrecorded dispatch (%.1f ns, same run); %.2f× its floor (two clock reads and a record into this thread's memory: %.1f ns); limit ≤ 1.5×",
                     extra, median(unrecorded), extra / floor, floor))
        if events.isEmpty {
            print("  (no LTTng session records katana:*: run under `katana-trace record` to compare with one raw LTTng event)")
        } else {
            let event = median(events)
            figures["raw_lttng_event_floor_ns"] = event
            figures["flight_recorder_lttng_event_ratio"] = extra / event
            print(String(format: "  flight recorder: +%.1f ns is %.2f× one raw LTTng event (%.1f ns); limit ≤ 0.15×", extra, extra / event, event))
        }
    }



    /// What KatanaMetrics adds to a fire-and-forget dispatch, against an unrecorded store in the same run and its
    /// floor (the duration clock's start and end and one value added into a per-thread histogram bucket), and what it
    /// adds per dispatch on each of two threads against one: the figures issue #48 limits (≤ +50 ns, ≤ 2× the floor,
    /// two producers no slower per dispatch than one), which the lines it prints state.
    ///
    /// The two threads dispatch into a store each, recorded by the one set of metrics: what they share is the metrics
    /// (a lock or a counter both took would show here as the second thread's added cost growing), not a lane. Two
    /// threads on one store are printed too, as what a user sees: there every dispatch's recording sits in the
    /// lane's hold, and how often the lane changes hands — the store's, not the metrics' — moves the figure.
    private func metricsCost(metrics: DispatchMetrics, into figures: inout [String: Double]) async throws {
        var added: [Double] = [], unrecorded: [Double] = [], floors: [Double] = []
        var addedOne: [Double] = [], addedTwo: [Double] = [], two: [Double] = []
        var addedOwnOne: [Double] = [], addedOwnTwo: [Double] = [], ownOne: [Double] = [], ownTwo: [Double] = []
        for _ in 0..<runs {
            let (recorded, none) = alternating(count: iterations, makeStore(backend: metrics), makeStore(backend: NoOpTraceBackend()))
            added.append(recorded - none)
            unrecorded.append(none)
            floors.append(metrics.floorNanoseconds(count: iterations))
            // With two producers the lane's holder applies the other's updaters (queued: enqueue, begin and end), so
            // the store itself costs more per dispatch than with one; what the metrics add is the difference.
            let oneRecorded = try await producers(1, count: iterations, backend: metrics)
            let oneNone = try await producers(1, count: iterations, backend: NoOpTraceBackend())
            let twoRecorded = try await producers(2, count: iterations, backend: metrics)
            let twoNone = try await producers(2, count: iterations, backend: NoOpTraceBackend())
            addedOne.append(oneRecorded - oneNone)
            addedTwo.append(twoRecorded - twoNone)
            two.append(twoRecorded)
            // A store each: each thread's own ns per dispatch, one thread against two, recorded and not.
            let ownOneRecorded = try await producers(1, count: iterations, backend: metrics, storeEach: true)
            let ownOneNone = try await producers(1, count: iterations, backend: NoOpTraceBackend(), storeEach: true)
            let ownTwoRecorded = try await producers(2, count: iterations, backend: metrics, storeEach: true)
            let ownTwoNone = try await producers(2, count: iterations, backend: NoOpTraceBackend(), storeEach: true)
            addedOwnOne.append(ownOneRecorded - ownOneNone)
            addedOwnTwo.append(ownTwoRecorded - ownTwoNone)
            ownOne.append(ownOneNone)
            ownTwo.append(ownTwoNone)
        }
        let extra = median(added), floor = median(floors)
        figures["metrics_added_ns"] = extra
        figures["metrics_unrecorded_ns"] = median(unrecorded)
        figures["metrics_floor_ns"] = floor
        figures["metrics_floor_ratio"] = extra / floor
        figures["metrics_added_one_producer_ns"] = median(addedOne)
        figures["metrics_added_two_producers_ns"] = median(addedTwo)
        figures["metrics_two_producers_ns"] = median(two)
        figures["metrics_added_thread_alone_ns"] = median(addedOwnOne)
        figures["metrics_added_two_threads_ns"] = median(addedOwnTwo)
        figures["metrics_unrecorded_thread_alone_ns"] = median(ownOne)
        figures["metrics_unrecorded_two_threads_ns"] = median(ownTwo)
        print(String(format: "  metrics: +%.1f ns over an unrecorded dispatch (%.1f ns, same run); %.2f× its floor (a duration clock start and end and a per-thread histogram record: %.1f ns); limit ≤ +50 ns and ≤ 2×",
                     extra, median(unrecorded), extra / floor, floor))
        print(String(format: "  metrics: +%.1f ns per dispatch on each of two threads (a store each, one set of metrics), +%.1f ns on one alone; limit two ≤ one (unrecorded: %.1f and %.1f ns)",
                     median(addedOwnTwo), median(addedOwnOne), median(ownTwo), median(ownOne)))
        print(String(format: "  metrics: +%.1f ns per dispatch with two producers on one store (%.1f ns in all), +%.1f ns with one: the store's lane changes hands between them",
                     median(addedTwo), median(two), median(addedOne)))
    }

    /// What a dispatch log adds to a fire-and-forget `Codable` updater of four fields, against an unrecorded store in
    /// the same run (alternating slices, each short of the writer's backlog limit so the log is never cut, the writer
    /// caught up between them off the clock); the writer thread's own time per item (encode and write); bytes per item.
    /// The dispatching thread's figure is the one issue #42 limits (its line states the limit).
    private func dispatchLogCost(into figures: inout [String: Double]) throws {
        let count = min(iterations, 500_000)
        let slice = min(count, 20_000)
        var added: [Double] = [], unrecorded: [Double] = [], writerTimes: [Double] = [], bytes: [Double] = []
        func item(_ index: Int) -> LoggedOrder {
            LoggedOrder(id: index, sku: ["keyboard", "mouse", "monitor", "cable"][index & 3], quantity: 1 + index % 3, priceCents: 1_999)
        }
        for _ in 0..<runs {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("katana-micro-\(UUID().uuidString).jsonl").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            let recorder: DispatchLogRecorder
            do {
                recorder = try DispatchLogRecorder(path: path, initialState: BenchState(), limitBytes: 1 << 40, checkpointEvery: 0)
            } catch {
                throw ValidationError("dispatch-log: \(error)")
            }
            let recorded = BenchStore(stateInitializer: { BenchState() }, configuration: .init(traceBackend: NoOpTraceBackend(), dispatchRecorder: recorder))
            let plain = makeStore(backend: NoOpTraceBackend())
            recorded.addListener { _, new in blackHole(new.counter) }
            var recordedTime: UInt64 = 0, plainTime: UInt64 = 0, done = 0
            while done < count {
                let size = min(slice, count - done)
                var start = nowNanoseconds()
                for index in done..<(done + size) { recorded.dispatch(item(index)) }
                recordedTime += nowNanoseconds() - start
                recorder.writer.waitUntilWritten()
                start = nowNanoseconds()
                for index in done..<(done + size) { plain.dispatch(item(index)) }
                plainTime += nowNanoseconds() - start
                done += size
            }
            let written = recorder.writer.counts
            guard written.dropped == 0, written.items == UInt64(count) else {
                throw ValidationError("dispatch-log: the log dropped \(written.dropped) of \(count) items while measuring")
            }
            added.append(Double(recordedTime) / Double(count) - Double(plainTime) / Double(count))
            unrecorded.append(Double(plainTime) / Double(count))
            bytes.append(Double(written.bytes) / Double(count))
            // The writer's own time per item: a backlog of a slice appended at once, then drained.
            let writer = try DispatchLogWriter(path: path, stateType: "bench", initialState: nil, limitBytes: 1 << 40)
            let started = nowNanoseconds()
            for index in 0..<slice {
                writer.append(kind: .updater, type: "KatanaBenchCore.LoggedOrder", id: UInt64(index + 1), parentID: 0, value: item(index))
            }
            writer.waitUntilWritten()
            writerTimes.append(Double(nowNanoseconds() - started) / Double(slice))
            try writer.finish(finalState: nil)
        }
        let extra = median(added), writer = median(writerTimes)
        figures["dispatch_log_added_ns"] = extra
        figures["dispatch_log_unrecorded_ns"] = median(unrecorded)
        figures["dispatch_log_writer_ns_per_item"] = writer
        figures["dispatch_log_bytes_per_item"] = median(bytes)
        print(String(format: "dispatch log: +%.1f ns per recorded Codable updater (4 fields) over an unrecorded dispatch (%.1f ns, same run); limit ≤ 1000 ns",
                     extra, median(unrecorded)))
        print(String(format: "  its writer thread: %.1f ns per item (encode + write: sustained above %.0f items/s the log is cut, \"writer fell behind\"); %.0f bytes per item",
                     writer, 1e9 / writer, median(bytes)))
    }

    /// ns per fire-and-forget updater that writes one byte of a `bytes`-byte payload, with one listener of either form.
    private func payloadWrites(count: Int, bytes: Int, backend: any TraceBackend, newStateListener: Bool) -> Double {
        let store = BenchStore(stateInitializer: { BenchState(payloadBytes: bytes) }, configuration: .init(traceBackend: backend))
        if newStateListener {
            store.addListener(newState: { new in blackHole(new.counter) })
        } else {
            store.addListener { _, new in blackHole(new.counter) }
        }
        let start = nowNanoseconds()
        for index in 0..<count { store.dispatch(TouchPayload(byte: UInt8(truncatingIfNeeded: index))) }
        let elapsed = nowNanoseconds() - start
        precondition(store.state.counter == count, "lost updates")
        return Double(elapsed) / Double(count)
    }

    /// Fire-and-forget updaters that write one byte of the state's payload, no listener, per state size: a plain
    /// `StateUpdater`, a `ThrowingStateUpdater` (which changes a copy, so the payload is copied whole each time) and a
    /// `ValidatingStateUpdater` (in place), the three in alternating slices of each run.
    private func refusableUpdaters(backend: any TraceBackend, into figures: inout [String: Double]) {
        func column(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(width - text.count, 0)) + text }
        print("state size" + column("StateUpdater", 18) + column("ThrowingStateUpdater", 24) + column("ValidatingStateUpdater", 26)
              + "   (fire-and-forget, writing the state)")
        for (label, bytes, divisor) in [("0 B", 0, 1), ("1 KB", 1_024, 10), ("1 MB", 1 << 20, 1_000)] {
            let count = max(iterations / divisor, 100)
            let slice = max(count / 10, 10)
            var plain: [Double] = [], onACopy: [Double] = [], validated: [Double] = []
            for _ in 0..<runs {
                let stores = (0..<3).map { _ in
                    BenchStore(stateInitializer: { BenchState(payloadBytes: bytes) }, configuration: .init(traceBackend: backend))
                }
                var elapsed: [UInt64] = [0, 0, 0]
                var done = 0
                while done < count {
                    let n = min(slice, count - done)
                    for form in 0..<3 {
                        let store = stores[form]
                        let start = nowNanoseconds()
                        switch form {
                        case 0: for index in done..<(done + n) { store.dispatch(TouchPayload(byte: UInt8(truncatingIfNeeded: index))) }
                        case 1: for index in done..<(done + n) { store.dispatch(TouchPayloadOrRefuse(byte: UInt8(truncatingIfNeeded: index))) }
                        default: for index in done..<(done + n) { store.dispatch(TouchPayloadValidated(byte: UInt8(truncatingIfNeeded: index))) }
                        }
                        elapsed[form] += nowNanoseconds() - start
                    }
                    done += n
                }
                precondition(stores.allSatisfy { $0.state.counter == count }, "lost updates")
                plain.append(Double(elapsed[0]) / Double(count))
                onACopy.append(Double(elapsed[1]) / Double(count))
                validated.append(Double(elapsed[2]) / Double(count))
            }
            let key = label.replacingOccurrences(of: " ", with: "").lowercased()
            figures["refusable_\(key)_state_updater_ns_per_op"] = median(plain)
            figures["refusable_\(key)_throwing_updater_ns_per_op"] = median(onACopy)
            figures["refusable_\(key)_validating_updater_ns_per_op"] = median(validated)
            print(label.padding(toLength: 10, withPad: " ", startingAt: 0)
                  + String(format: "%12.1f ns/op%18.1f ns/op%20.1f ns/op", median(plain), median(onACopy), median(validated)))
        }
    }

    /// Latency of `try await dispatch(...).value`, one at a time, in ns.
    private func roundTrip(count: Int, backend: any TraceBackend) async throws -> Histogram<UInt64> {
        let store = makeStore(backend: backend)
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
        for _ in 0..<count {
            let start = nowNanoseconds()
            try await store.dispatch(Increment()).value
            _ = histogram.record(nowNanoseconds() - start)
        }
        return histogram
    }

    /// Side effects per slice of a run (and the most `--in-flight` takes): slices of the figure and of its floor
    /// alternate, so both see the same phase of a shared machine. Measured whole, one after the other, the two figures
    /// were far enough apart in time for a VM's speed to move between them, and `micro --only side-effects`' ratio
    /// wandered from run to run.
    static let sideEffectSlice = 5_000

    /// ns per side effect (dispatch, run, dispatch and await one updater), dispatched `inFlight` at a time, each slice
    /// awaited before the next; with `withFloor`, also ns per floor task (`Floors.taskSpawnAndAwait`), its slices
    /// interleaved with the side effects' (which of the two runs first alternates by slice).
    /// `inFlight` 1 runs one side effect at a time, which is how `make walk` counts a side effect's walk
    /// (`scripts/dispatch-walk`): dispatched together, side effects overlap, and which of them finds the lane taken by
    /// another's updater, or another in the running list, depends on how the threads interleave.
    private func sideEffects(count: Int, inFlight: Int, backend: any TraceBackend,
                             withFloor: Bool) async throws -> (perOp: Double, floor: Double?) {
        let store = makeStore(backend: backend)
        var handles: [DispatchHandle<Void>] = []
        handles.reserveCapacity(min(count, inFlight))
        var elapsed: UInt64 = 0, floorElapsed: UInt64 = 0
        var done = 0, slice = 0
        while done < count {
            let size = min(inFlight, count - done)
            let floorFirst = withFloor && slice % 2 == 1
            if floorFirst { floorElapsed += await Floors.taskSpawnAndAwait(count: size) }
            let start = nowNanoseconds()
            for _ in 0..<size { handles.append(store.dispatch(IncrementAndAwait())) }
            for handle in handles { try await handle.value }
            elapsed += nowNanoseconds() - start
            handles.removeAll(keepingCapacity: true)
            if withFloor, !floorFirst { floorElapsed += await Floors.taskSpawnAndAwait(count: size) }
            done += size
            slice += 1
        }
        precondition(store.state.counter == count, "lost updates")
        return (Double(elapsed) / Double(count), withFloor ? Double(floorElapsed) / Double(count) : nil)
    }

    /// Inside one side effect: ns per call of a trivial async function — alone, through a closure-taking async
    /// function that only calls it, and inside `context.interval` — interleaved so all three see the same machine.
    private func intervals(count: Int, backend: any TraceBackend) async throws -> (direct: Double, closure: Double, interval: Double) {
        let store = makeStore(backend: backend)
        let probe = IntervalProbe(count: count)
        try await store.dispatch(probe).value
        return probe.result
    }

    /// `RssAnon` of /proc/self/status: resident memory that is neither a file's nor shared.
    static func anonymousResidentKilobytes() -> Double? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            return Double(line.dropFirst("RssAnon:".count).split(whereSeparator: \.isWhitespace).first ?? "")
        }
        return nil
    }

    /// The most updaters `--queued` queues per round: the helping limit, so the holder applies them all in its turn.
    static let queuedLimit = 256

    /// `--only queued`: the round with `--queued` updaters queued, and (with floors) the round alone; the difference per
    /// updater is what queueing one costs its producer and the holder that applies it. Rounds are a hundredth of
    /// `--iterations` (each one hands off between two threads twice). `--queued 0` measures the round alone; `scripts/dispatch-walk`
    /// counts the queued updater's walk as the difference between the two.
    private func queuedCost(backend: any TraceBackend, into figures: inout [String: Double]) {
        let rounds = max(iterations / 100, 10)
        var withQueued: [Double] = [], alone: [Double] = []
        for _ in 0..<runs {
            if queued > 0 { withQueued.append(queuedRounds(rounds, queueing: queued, backend: backend)) }
            if floors || queued == 0 { alone.append(queuedRounds(rounds, queueing: 0, backend: backend)) }
        }
        if !alone.isEmpty { figures["queued_round_alone_ns"] = median(alone) }
        guard queued > 0 else {
            print(String(format: "a round with nothing queued (the holder parked and released) %9.1f ns", median(alone)))
            return
        }
        let round = median(withQueued)
        figures["queued_round_ns"] = round
        guard !alone.isEmpty else {
            print(String(format: "a round with %d updaters queued behind the parked holder %9.1f ns", queued, round))
            return
        }
        let added = median(zip(withQueued, alone).map { ($0 - $1) / Double(queued) })
        figures["queued_updater_ns_per_op"] = added
        print(String(format: "queued updater (%d per round behind a parked holder) %9.1f ns/op over the round alone (%.1f µs; with them %.1f µs)",
                     queued, added, median(alone) / 1_000, round / 1_000))
    }

    /// ns per round: a holder thread dispatches a `Gate`, which parks it inside the lane; this thread dispatches
    /// `queueing` updaters (each finds the lane held, waits its brief while and queues) and opens the gate; the
    /// holder's dispatch applies them before it returns, or as many as its helping limits allow, and the store's
    /// serial queue the rest.
    private func queuedRounds(_ rounds: Int, queueing: Int, backend: any TraceBackend) -> Double {
        let store = makeStore(backend: backend)
        while !store.isReady { sched_yield() }
        let go = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)
        let gate = Gate()
        let holder = Thread {
            for _ in 0..<rounds {
                go.wait()
                store.dispatch(gate)
                done.signal()
            }
        }
        holder.start()
        let start = nowNanoseconds()
        for round in 1...rounds {
            go.signal()
            gate.parked.wait()
            for _ in 0..<queueing { store.dispatch(Increment()) }
            gate.open.signal()
            done.wait()
            // The holder helps for a limited time (`helpingTimeLimitNanoseconds`); what it leaves goes to the store's
            // serial queue. The round ends when its updaters are all applied: read from the state, in the round alone
            // too, so `make walk`'s difference between the two is the queued updater's alone.
            while store.state.counter < round * queueing { sched_yield() }
        }
        let elapsed = nowNanoseconds() - start
        precondition(store.state.counter == rounds * queueing, "lost updates: \(store.state.counter) of \(rounds * queueing)")
        return Double(elapsed) / Double(rounds)
    }

    /// `--only window`: `threads` threads each dispatch `rate` updaters a second (paced: every 200 µs a thread
    /// dispatches what is due) into a store of its own until the recorder has recorded a quarter more than it keeps,
    /// so every kept event is one of the steady state's; then the span of each thread's kept events — its window —
    /// from the events a dump would write. Reports the shortest thread's (`window_s`).
    private func flightWindow(into figures: inout [String: Double]) {
        let recorder = FlightRecorder.shared
        let target = recorder.counts.recorded + UInt64(recorder.capacity) * 5 / 4
        let stop = Atomic<Bool>(false)
        let finished = DispatchSemaphore(value: 0)
        let rate = Double(self.rate)
        for _ in 0..<threads {
            let store = makeStore(backend: recorder)
            Thread {
                let start = nowNanoseconds()
                var done = 0
                while !stop.load(ordering: .relaxed) {
                    let due = Int(Double(nowNanoseconds() - start) * rate / 1e9)
                    while done < due { store.dispatch(Increment()); done += 1 }
                    usleep(200)
                }
                finished.signal()
            }.start()
        }
        let start = nowNanoseconds()
        while recorder.counts.recorded < target { usleep(10_000) }
        stop.store(true, ordering: .relaxed)
        for _ in 0..<threads { finished.wait() }
        let seconds = Double(nowNanoseconds() - start) / 1e9
        var spans: [Int32: (first: UInt64, last: UInt64, count: Int)] = [:]
        for event in recorder.recentEvents().events {
            let span = spans[event.thread] ?? (event.timestamp, event.timestamp, 0)
            spans[event.thread] = (min(span.first, event.timestamp), max(span.last, event.timestamp), span.count + 1)
        }
        // The dispatching threads are the busiest (the process's other threads record a store's readiness at most).
        let busiest = spans.values.sorted { $0.count > $1.count }.prefix(threads)
        let windows = busiest.map { Double($0.last - $0.first) / 1e9 }
        let kept = busiest.map(\.count)
        let window = windows.min() ?? 0
        figures["window_s"] = window
        figures["window_rate"] = rate
        figures["window_threads"] = Double(threads)
        figures["window_capacity_events"] = Double(recorder.capacity)
        figures["window_events_kept"] = Double(kept.min() ?? 0)
        figures["window_events_kept_total"] = Double(kept.reduce(0, +))
        print(String(format: "flight recorder window at %.0f updaters/s on %d thread(s): %.2f s (each thread's: %@; events kept: %@; capacity %d events; ran %.1f s)",
                     rate, threads, window, windows.map { String(format: "%.2f s", $0) }.joined(separator: ", "),
                     kept.map(String.init).joined(separator: ", "), recorder.capacity, seconds))
    }

    /// Aggregate ns per dispatch with `producers` threads (started together) dispatching `count` updaters in total
    /// into one store, until the last one is applied. `storeEach`: each thread dispatches `count` into a store of its
    /// own, and the figure is ns per dispatch on each thread.
    private func producers(_ producers: Int, count: Int, backend: any TraceBackend, storeEach: Bool = false) async throws -> Double {
        let stores = (0..<(storeEach ? producers : 1)).map { _ in makeStore(backend: backend) }
        let perProducer = storeEach ? count : count / producers
        let lastHandles = PerThreadSlots<DispatchHandle<Void>>(count: producers)
        let start = runStartedTogether(threads: producers) { producer in
            let store = stores[storeEach ? producer : 0]
            var last: DispatchHandle<Void>?
            for _ in 0..<perProducer { last = store.dispatch(Increment()) }
            lastHandles.set(producer, last!)
        }
        // Each producer's updaters apply in order, so its last handle resolving means all of them are applied.
        for handle in lastHandles.all { try await handle.value }
        let elapsed = nowNanoseconds() - start
        let applied = stores.reduce(0) { $0 + $1.state.counter }
        precondition(applied == perProducer * producers, "lost updates")
        return Double(elapsed) / Double(storeEach ? perProducer : perProducer * producers)
    }
}

/// Times `count` calls of a trivial async function: direct, through `passThrough`, inside `context.interval`.
final class IntervalProbe: SideEffect, @unchecked Sendable {
    // Written by the side effect's body, read after its handle resolved.
    private(set) var result: (direct: Double, closure: Double, interval: Double) = (0, 0, 0)
    let count: Int

    init(count: Int) { self.count = count }

    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        var totals: (direct: UInt64, closure: UInt64, interval: UInt64) = (0, 0, 0)
        var sum = 0
        let slice = max(count / 10, 1)
        for _ in 0..<10 {
            var start = nowNanoseconds()
            for index in 0..<slice { sum &+= await work(index) }
            totals.direct &+= nowNanoseconds() &- start
            start = nowNanoseconds()
            for index in 0..<slice { sum &+= await passThrough { await work(index) } }
            totals.closure &+= nowNanoseconds() &- start
            start = nowNanoseconds()
            for index in 0..<slice { sum &+= await context.interval("probe") { await work(index) } }
            totals.interval &+= nowNanoseconds() &- start
        }
        blackHole(sum)
        let calls = Double(slice * 10)
        result = (Double(totals.direct) / calls, Double(totals.closure) / calls, Double(totals.interval) / calls)
    }
}

/// Parks the thread applying it, inside the lane: says so on `parked`, then waits for `open` (`micro --only queued`).
struct Gate: StateUpdater {
    let parked = DispatchSemaphore(value: 0)
    let open = DispatchSemaphore(value: 0)
    func updateState(_ state: inout BenchState) {
        parked.signal()
        open.wait()
    }
}

@inline(never)
func work(_ value: Int) async -> Int { value &* 3 }

/// Any closure-taking async wrapper (the baseline for `context.interval`'s own cost).
@inline(never)
func passThrough<T>(_ body: () async throws -> T) async rethrows -> T { try await body() }

struct IncrementAndAwait: SideEffect {
    func sideEffect(_ context: SideEffectContext<BenchState, BenchDependencies>) async throws {
        try await context.dispatch(Increment()).value
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    // Each half first: the same value as the sum halved (halving is exact), without overflowing for huge values.
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : sorted[sorted.count / 2 - 1] / 2 + sorted[sorted.count / 2] / 2
}

/// A figure's ratio to its floor over several runs: the median of each run's figure over that run's floor (runs
/// paired in order), so a run's figure is only ever compared with the floor measured beside it.
func pairedRatio(figures: [Double], floors: [Double]) -> Double {
    precondition(figures.count == floors.count, "one floor per run")
    return median(zip(figures, floors).map { $0 / $1 })
}

/// Keeps the optimiser from discarding a value.
@inline(never)
func blackHole<T>(_ value: T) {}

/// A pass-through interceptor of the protocol form.
struct ErasedPassThrough: DispatchInterceptor {
    func intercept(_ item: any Dispatchable, next: (any Dispatchable) throws -> Void) throws { try next(item) }
}

struct PassThrough: TypedDispatchInterceptor {
    func intercept<Item: Dispatchable>(_ item: Item, next: (Item) throws -> Void,
                                       forward: (any Dispatchable) throws -> Void) throws { try next(item) }
}

/// Runs one piece of work (a dump, an export) over and over on its own thread until told to stop, timing each.
private final class WorkLoop: @unchecked Sendable {
    let work: @Sendable () throws -> UInt64
    let stop = Atomic<Bool>(false)
    // Written by the working thread, read once it has finished (ordered by the semaphore).
    var durations: [UInt64] = []
    var items: UInt64 = 0
    var error: (any Error)?

    init(work: @escaping @Sendable () throws -> UInt64) { self.work = work }

    /// Runs `work` until told to stop, timing each.
    func run() {
        while !stop.load(ordering: .relaxed) {
            let start = nowNanoseconds()
            do {
                items += try work()
            } catch {
                self.error = error
                return
            }
            durations.append(nowNanoseconds() - start)
        }
    }

    /// Copies 4 MiB back and forth until told to stop.
    func copyMemory() {
        var from = [UInt8](repeating: 1, count: 4 << 20), to = [UInt8](repeating: 0, count: 4 << 20)
        while !stop.load(ordering: .relaxed) {
            to.withUnsafeMutableBytes { target in from.withUnsafeBytes { target.copyMemory(from: $0) } }
            swap(&from, &to)
        }
        blackHole(to[0])
    }
}
