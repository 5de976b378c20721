import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// babeltrace2, the reference CTF reader, for the traces the package's reader declines (a sound construct it does
/// not know: floating-point fields, several clocks, …). It runs as a child process whose text output
/// (`--clock-seconds --no-delta`) is parsed into the same ``TraceEvent``s, in the same order, as the native reader
/// gives. The child never outlives the toolkit: it is started under `setpriv --pdeathsig KILL`, so it dies with
/// whichever thread of ours started it, however we end (guarded by `KatanaTraceCommandTests`'
/// `aFallbackReadLeavesNoChildWhenTheToolkitIsKilled`), and it is stopped when it prints nothing for the stall
/// timeout (`KATANA_TRACE_STALL_SECONDS`, default 30: babeltrace2 can spin forever on a truncated trace).
enum Babeltrace2Reader {
    /// Where to send the user when babeltrace2 is missing.
    static let installHint = "install babeltrace2 (apt-get install babeltrace2) and run this again"

    /// Hands every katana event of `trace` to `body` in timestamp order, read by babeltrace2. Returns the events the
    /// tracer discarded. `declined`: why the native reader declined it, for the messages (nil: babeltrace2 was asked
    /// for, and no note is printed). Standard error gets one line either way: the note once babeltrace2 has read the
    /// trace, or the error, which then says why the package's reader passed the trace on.
    static func read(trace: String, declined: String?, progress label: String?, payload: Bool = false,
                     stop: (() -> Bool)? = nil, _ body: (TraceEvent) -> Void)
        throws(TraceToolkitError) -> UInt64
    {
        guard let babeltrace = LTTngRecording.which("babeltrace2") else {
            guard let declined else { throw TraceToolkitError("--reader babeltrace2: \(installHint)") }
            throw TraceToolkitError("\(declined); babeltrace2 reads such traces: \(installHint)")
        }
        let discarded: UInt64
        do throws(TraceToolkitError) {
            discarded = try read(trace: trace, babeltrace: babeltrace, progress: label, payload: payload, stop: stop, body)
        } catch {
            guard let declined else { throw error }
            throw TraceToolkitError("\(error.description) (read by babeltrace2: \(declined))")
        }
        if let declined {
            FileHandle.standardError.write(Data("katana-trace: note: read with babeltrace2 (slower): \(declined)\n".utf8))
        }
        return discarded
    }

    private static func read(trace: String, babeltrace: String, progress label: String?, payload: Bool,
                             stop: (() -> Bool)?, _ body: (TraceEvent) -> Void)
        throws(TraceToolkitError) -> UInt64
    {
        // babeltrace2's convert command takes no `--`: a path that looks like an option gets a `./`.
        var arguments = [babeltrace, "--clock-seconds", "--no-delta", trace.hasPrefix("-") ? "./" + trace : trace]
        if let setpriv = LTTngRecording.which("setpriv") { arguments = [setpriv, "--pdeathsig", "KILL", "--"] + arguments }
        let child = try Child(arguments)
        defer { child.stop() }
        var parser = LineParser(trace: trace, payload: payload)
        let progress = label.flatMap { ProgressLine("\($0) (babeltrace2)", showsShare: false) }
        defer { progress?.end() }
        var errors: [String] = []
        var discarded: UInt64 = 0
        var failure: TraceToolkitError?
        var stopped = false
        do throws(TraceToolkitError) {
            try child.lines { stream, line in
                if stream == .output {
                    do throws(TraceToolkitError) {
                        if let event = try parser.parse(line) {
                            body(event)
                            if let progress, parser.events % UInt64(1 << 17) == 0 { progress.show(events: parser.events) }
                            if let stop, stop() {
                                stopped = true
                                return false
                            }
                        }
                    } catch {
                        failure = error
                        return false
                    }
                } else if let count = discardedCount(line) {
                    // A count past 2^40 is a per-stream counter that wrapped: events were still lost; count one.
                    discarded += count > 0 && count < 1 << 40 ? count : 1
                } else if errors.count < 200, !line.allSatisfy({ $0 == UInt8(ascii: " ") }) {
                    errors.append(String(decoding: line, as: UTF8.self))
                }
                return true
            }
        } catch {
            throw TraceToolkitError("\(trace): \(error.description)")
        }
        let status = child.wait()
        if let failure { throw failure }
        if stopped { return discarded }
        if status.signal != 0 {
            throw TraceToolkitError("\(trace): not a readable CTF trace (babeltrace2 ended with signal \(status.signal): damaged metadata or data streams)")
        }
        if status.code != 0 {
            let cause = Self.cause(errors) ?? "babeltrace2 exited with status \(status.code)"
            throw TraceToolkitError("\(trace): not a readable CTF trace (babeltrace2: \(cause.prefix(300)))")
        }
        if parser.events == 0 { throw TraceToolkitError("\(trace): no katana events") }
        return discarded
    }

    /// `WARNING: Tracer discarded N event(s) …` → N.
    private static func discardedCount(_ line: ArraySlice<UInt8>) -> UInt64? {
        let prefix = Array("WARNING: Tracer discarded ".utf8)
        guard line.starts(with: prefix) else { return nil }
        let digits = line.dropFirst(prefix.count).prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return UInt64(String(decoding: digits, as: UTF8.self))
    }

    /// The most telling line of babeltrace2's error report: the first error a plugin logged, else the line after the
    /// innermost `CAUSED BY`, without its source locations.
    static func cause(_ lines: [String]) -> String? {
        for line in lines {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            if words.count > 6, words[4] == "E", words[5].hasPrefix("PLUGIN/") {
                var message = words.dropFirst(7).joined(separator: " ")
                if message.hasPrefix("["), let close = message.firstIndex(of: "]") {
                    message = String(message[message.index(after: close)...]).trimmingCharacters(in: .whitespaces)
                }
                return String(message.components(separatedBy: ": ").first ?? message)
            }
        }
        if let last = lines.lastIndex(where: { $0.hasPrefix("CAUSED BY") }), last + 1 < lines.count {
            let line = lines[last + 1].trimmingCharacters(in: .whitespaces)
            return String(line.components(separatedBy: ": ").first ?? line)
        }
        return nil
    }

    /// A line of babeltrace2's text output as a ``TraceEvent``:
    /// `[S.NNNNNNNNN] HOST katana:EVENT: { cpu_id = 0 }, { vpid = 1, vtid = 2 }, { id = 5, kind = ( "side_effect" :
    /// container = 1 ), name = "T", … }`.
    struct LineParser {
        let trace: String
        /// Whether events carry their other payload fields.
        let payload: Bool
        private(set) var events: UInt64 = 0
        /// Dense ids for the strings, as the native reader gives (consumers key on them).
        private var ids: [String: UInt32] = [:]

        init(trace: String, payload: Bool) {
            self.trace = trace
            self.payload = payload
        }

        /// The fields a katana event may carry.
        private enum Field: Int, CaseIterable {
            case id, parentID, kind, name, queue, parallelism, outcome, intervalID, transitionID, budget, actual,
                 vpid, vtid, duration, procname

            var key: String {
                switch self {
                case .id: "id"
                case .parentID: "parent_id"
                case .kind: "kind"
                case .name: "name"
                case .queue: "queue"
                case .parallelism: "parallelism"
                case .outcome: "outcome"
                case .intervalID: "interval_id"
                case .transitionID: "transition_id"
                case .budget: "budget_ns"
                case .actual: "actual_ns"
                case .vpid: "vpid"
                case .vtid: "vtid"
                case .duration: "duration_ns"
                case .procname: "procname"
                }
            }

            /// Keyed by slices (equal and hashed by their bytes), so a line's key is looked up without a copy.
            static let byKey: [ArraySlice<UInt8>: Field] = Dictionary(uniqueKeysWithValues: allCases.map { (Array($0.key.utf8)[...], $0) })
        }

        private enum Value {
            /// A number as printed: `negative` when it had a minus sign (babeltrace2 prints an unsigned field's
            /// value past 2^63 as such, not as a negative number).
            case number(Int64, unsigned: UInt64, negative: Bool)
            case text(String)
        }

        private static let roles: [String: (TraceEvent.Role, [Field])] = [
            "dispatch_enqueue": (.enqueue, [.id, .parentID, .kind, .name, .queue]),
            "dispatch_begin": (.begin, [.id, .parentID, .kind, .name, .queue, .parallelism]),
            "dispatch_end": (.end, [.id, .kind, .name, .outcome]),
            "budget_exceeded": (.budgetExceeded, [.id, .kind, .name, .budget, .actual]),
            "interval_begin": (.intervalBegin, [.intervalID, .parentID, .name]),
            "interval_end": (.intervalEnd, [.intervalID, .name, .outcome]),
            "transition_begin": (.transitionBegin, [.transitionID, .name]),
            "transition_end": (.transitionEnd, [.transitionID, .name, .outcome]),
            "updater_inline": (.updaterInline, [.id, .parentID, .name, .parallelism, .duration, .outcome]),
        ]

        private mutating func id(_ text: String?) -> UInt32 {
            guard let text else { return 0 }
            if let known = ids[text] { return known }
            let made = UInt32(ids.count + 1)
            ids[text] = made
            return made
        }

        /// The event on `line`, nil for a line that is not a katana event's.
        mutating func parse(_ line: ArraySlice<UInt8>) throws(TraceToolkitError) -> TraceEvent? {
            var scanner = Scanner(line)
            guard scanner.take(UInt8(ascii: "[")), let seconds = scanner.digits(), scanner.take(UInt8(ascii: ".")),
                  let fraction = scanner.digits(), fraction.count == 9, scanner.take(UInt8(ascii: "]")),
                  scanner.take(UInt8(ascii: " "))
            else { return nil }
            if scanner.peek == UInt8(ascii: "(") { _ = scanner.word(); _ = scanner.take(UInt8(ascii: " ")) }
            var word = scanner.word()
            if !word.starts(with: "katana:".utf8) { word = scanner.word() }  // the host name, when recorded
            guard word.starts(with: "katana:".utf8), word.last == UInt8(ascii: ":") else { return nil }
            let eventName = String(decoding: word.dropFirst(7).dropLast(), as: UTF8.self)
            guard let seconds = Int64(String(decoding: seconds, as: UTF8.self)),
                  let nanoseconds = Int64(String(decoding: fraction, as: UTF8.self)),
                  seconds < Int64.max / 1_000_000_000 - 1
            else { throw TraceToolkitError("\(trace): babeltrace2 printed a timestamp out of range") }
            var values = [Value?](repeating: nil, count: Field.allCases.count)
            // Fields no property holds, by the `{ … }` group they are in: the payload is the last group.
            var others: [(group: Int, name: String, value: Value)] = []
            while let (key, value) = try scanner.field(trace: trace) {
                if let field = Field.byKey[key] {
                    if let value { values[field.rawValue] = value }
                } else if payload, let value {
                    others.append((scanner.group, String(decoding: key, as: UTF8.self), value))
                }
            }
            events += 1
            let (role, needs) = Self.roles[eventName] ?? (.other, [])
            // A field the role needs and the event lacks: shown as it is when the read takes the payload (a dump).
            let missing = needs.first { values[$0.rawValue] == nil }
            if let missing, !payload {
                throw TraceToolkitError("\(trace): event katana:\(eventName) has no field '\(missing.key)'")
            }
            func number(_ field: Field) -> UInt64? {
                if case .number(_, let unsigned, _) = values[field.rawValue] { return unsigned }
                return nil
            }
            func signed(_ field: Field) -> Int64? {
                if case .number(let value, _, _) = values[field.rawValue] { return value }
                return nil
            }
            func text(_ field: Field) -> String? {
                switch values[field.rawValue] {
                case .text(let text): text
                case .number(let value, let unsigned, let negative): negative ? String(value) : String(unsigned)  // an enum value without a label
                case nil: nil
                }
            }
            let idField: Field = switch role {
            case .intervalBegin, .intervalEnd: .intervalID
            case .transitionBegin, .transitionEnd: .transitionID
            default: .id
            }
            let name = text(.name), queue = text(.queue), outcome = text(.outcome)
            let kind = role == .updaterInline ? "state_updater" : text(.kind)
            let carriesParent = switch role {
            case .enqueue, .begin, .updaterInline, .intervalBegin: true
            default: false
            }
            let carriesQueue = switch role {
            case .enqueue, .begin, .end: true
            default: false
            }
            let carriesParallelism = role == .begin || role == .updaterInline
            var event = TraceEvent(
                role: role, event: eventName, timestamp: seconds * 1_000_000_000 + nanoseconds,
                id: number(idField) ?? 0, parentID: carriesParent ? number(.parentID) : nil, name: name, kind: kind,
                queue: carriesQueue ? queue : nil, outcome: outcome,
                parallelism: carriesParallelism ? signed(.parallelism) : nil,
                durationNanoseconds: number(.duration) ?? 0, budgetNanoseconds: number(.budget) ?? 0,
                actualNanoseconds: number(.actual) ?? 0, vpid: signed(.vpid), vtid: signed(.vtid),
                procname: text(.procname), nameID: id(name), queueID: id(queue), outcomeID: id(outcome), kindID: id(kind),
                procnameID: id(text(.procname)))
            event.missingField = missing?.key
            event.payload = others.filter { $0.group == scanner.group }.map { other in
                let value: TraceEvent.PayloadField.Value = switch other.value {
                case .text(let text): .text(text)
                case .number(let signed, let unsigned, let negative): negative ? .signed(signed) : .unsigned(unsigned)
                }
                return TraceEvent.PayloadField(name: other.name, value: value)
            }
            return event
        }

        /// Reads babeltrace2's field syntax.
        private struct Scanner {
            let line: ArraySlice<UInt8>
            var at: Int
            /// How many `{ … }` groups (packet context, event context, payload) have begun.
            private(set) var group = 0

            init(_ line: ArraySlice<UInt8>) {
                self.line = line
                at = line.startIndex
            }

            var peek: UInt8? { at < line.endIndex ? line[at] : nil }

            mutating func take(_ byte: UInt8) -> Bool {
                guard peek == byte else { return false }
                at += 1
                return true
            }

            mutating func digits() -> ArraySlice<UInt8>? {
                let start = at
                while let byte = peek, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { at += 1 }
                return at > start ? line[start..<at] : nil
            }

            /// Up to the next space (which is taken).
            mutating func word() -> ArraySlice<UInt8> {
                let start = at
                while let byte = peek, byte != UInt8(ascii: " ") { at += 1 }
                let word = line[start..<at]
                _ = take(UInt8(ascii: " "))
                return word
            }

            // The byte classes below are switches, not `[…].contains`: unoptimized (the tests' debug katana-trace),
            // an array literal per byte was a quarter of reading a trace (`LTTngRecordingTests`'
            // aRealRecordingHasEveryDispatchWhole, `TraceReaderAgreementTests`).
            mutating func skipSeparators() {
                while let byte = peek {
                    switch byte {
                    case UInt8(ascii: "{"): group += 1
                    case UInt8(ascii: " "), UInt8(ascii: ","), UInt8(ascii: "}"): break
                    default: return
                    }
                    at += 1
                }
            }

            /// The next `key = value` (value nil for one not read here: a structure, an array, a float), or nil at
            /// the end of the line.
            mutating func field(trace: String) throws(TraceToolkitError) -> (ArraySlice<UInt8>, Value?)? {
                skipSeparators()
                guard peek != nil else { return nil }
                let start = at
                while let byte = peek, byte != UInt8(ascii: " ") { at += 1 }
                let key = line[start..<at]
                guard take(UInt8(ascii: " ")), take(UInt8(ascii: "=")), take(UInt8(ascii: " ")) else {
                    throw TraceToolkitError("\(trace): babeltrace2 printed a line this reader does not follow")
                }
                switch peek {
                case UInt8(ascii: "\""):
                    return (key, .text(try string(trace: trace)))
                case UInt8(ascii: "("):
                    // An enum: `( "label" : container = N )`, or `( <unknown> : container = N )`.
                    at += 1
                    _ = take(UInt8(ascii: " "))
                    var label: String?
                    if peek == UInt8(ascii: "\"") { label = try string(trace: trace) }
                    while let byte = peek, byte != UInt8(ascii: "=") { at += 1 }
                    _ = take(UInt8(ascii: "="))
                    _ = take(UInt8(ascii: " "))
                    let number = self.number()
                    while let byte = peek, byte != UInt8(ascii: ")") { at += 1 }
                    _ = take(UInt8(ascii: ")"))
                    if let label { return (key, .text(label)) }
                    return (key, number)
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    try skipNested(trace: trace)
                    return (key, nil)
                default:
                    return (key, number())
                }
            }

            /// A decimal or `0x` number, signed or not; nil (and skipped) for anything else.
            mutating func number() -> Value? {
                let start = at
                scan: while let byte = peek {
                    switch byte {
                    case UInt8(ascii: ","), UInt8(ascii: " "), UInt8(ascii: "}"), UInt8(ascii: ")"): break scan
                    default: at += 1
                    }
                }
                let text = String(decoding: line[start..<at], as: UTF8.self)
                if text.hasPrefix("-"), let value = Int64(text) { return .number(value, unsigned: UInt64(bitPattern: value), negative: true) }
                let unsigned = text.hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
                guard let unsigned else { return nil }
                return .number(Int64(bitPattern: unsigned), unsigned: unsigned, negative: false)
            }

            /// A quoted string, its escapes undone.
            mutating func string(trace: String) throws(TraceToolkitError) -> String {
                at += 1
                var bytes: [UInt8] = []
                while let byte = peek {
                    at += 1
                    if byte == UInt8(ascii: "\"") { return String(decoding: bytes, as: UTF8.self) }
                    guard byte == UInt8(ascii: "\\"), let escaped = peek else {
                        bytes.append(byte)
                        continue
                    }
                    at += 1
                    switch escaped {
                    case UInt8(ascii: "n"): bytes.append(0x0a)
                    case UInt8(ascii: "t"): bytes.append(0x09)
                    case UInt8(ascii: "r"): bytes.append(0x0d)
                    case UInt8(ascii: "a"): bytes.append(0x07)
                    case UInt8(ascii: "b"): bytes.append(0x08)
                    case UInt8(ascii: "f"): bytes.append(0x0c)
                    case UInt8(ascii: "v"): bytes.append(0x0b)
                    case UInt8(ascii: "x"):
                        // Another control character: `\x` and two hex digits (`TraceReaderAgreementTests` found it).
                        var value: UInt8 = 0
                        var digits = 0
                        while digits < 2, let hex = peek, let digit = Self.hexDigit(hex) {
                            value = value << 4 | digit
                            at += 1
                            digits += 1
                        }
                        bytes.append(digits == 0 ? escaped : value)
                    default: bytes.append(escaped)
                    }
                }
                throw TraceToolkitError("\(trace): babeltrace2 printed a string that does not end")
            }

            static func hexDigit(_ byte: UInt8) -> UInt8? {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
                default: nil
                }
            }

            /// A structure or array value, skipped (strings inside included).
            mutating func skipNested(trace: String) throws(TraceToolkitError) {
                var depth = 0
                while let byte = peek {
                    switch byte {
                    case UInt8(ascii: "\""): _ = try string(trace: trace); continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
                    default: break
                    }
                    at += 1
                    if depth == 0 { return }
                }
            }
        }
    }

    /// babeltrace2 as a child process: its standard output and error read line by line.
    private final class Child {
        enum Stream { case output, error }

        private var pid: pid_t
        /// Standard output's and error's read ends (-1 once closed).
        private var descriptors: [Int32]
        private var status: (code: Int32, signal: Int32)?
        private let stallMilliseconds: Int32

        init(_ arguments: [String]) throws(TraceToolkitError) {
            let seconds = ProcessInfo.processInfo.environment["KATANA_TRACE_STALL_SECONDS"].flatMap(Int32.init) ?? 30
            stallMilliseconds = max(1, min(seconds, 3600)) * 1000
            var out: [Int32] = [0, 0], err: [Int32] = [0, 0]
            guard pipe(&out) == 0 else { throw TraceToolkitError("cannot start babeltrace2: no pipe") }
            guard pipe(&err) == 0 else {
                close(out[0]); close(out[1])
                throw TraceToolkitError("cannot start babeltrace2: no pipe")
            }
            // Our ends stay out of the child (and of any other child started meanwhile).
            for descriptor in [out[0], out[1], err[0], err[1]] { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_adddup2(&actions, out[1], 1)
            posix_spawn_file_actions_adddup2(&actions, err[1], 2)
            // Nothing else of ours reaches babeltrace2: a descriptor it held (one our parent gave us without
            // close-on-exec) could keep our caller's pipes open after we ended.
            let pipeEnds = Set(out + err)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
                if let descriptor = Int32(name), descriptor > 2, !pipeEnds.contains(descriptor),
                   case let flags = fcntl(descriptor, F_GETFD), flags >= 0, flags & FD_CLOEXEC == 0 {
                    posix_spawn_file_actions_addclose(&actions, descriptor)
                }
            }
            var environment = ProcessInfo.processInfo.environment
            environment["LIBBABELTRACE2_INIT_LOG_LEVEL"] = "NONE"
            let argv = arguments.map { strdup($0) } + [nil]
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in argv + envp { free(pointer) } }
            var child: pid_t = 0
            let spawned = posix_spawn(&child, arguments[0], &actions, nil, argv, envp)
            close(out[1])
            close(err[1])
            guard spawned == 0 else {
                close(out[0]); close(err[0])
                throw TraceToolkitError("cannot start \(arguments[0]): \(String(cString: strerror(spawned)))")
            }
            pid = child
            descriptors = [out[0], err[0]]
        }

        /// Hands each line (without its newline) to `each` until both streams end or `each` returns false (then the
        /// child is stopped); stops the child when it prints nothing for the stall timeout.
        func lines(_ each: (Stream, ArraySlice<UInt8>) -> Bool) throws(TraceToolkitError) {
            var pending: [[UInt8]] = [[], []]
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while descriptors.contains(where: { $0 >= 0 }) {
                var polled = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                let ready = poll(&polled, nfds_t(polled.count), stallMilliseconds)
                if ready < 0 {
                    if errno == EINTR { continue }
                    throw TraceToolkitError("cannot read babeltrace2's output: \(String(cString: strerror(errno)))")
                }
                if ready == 0 {
                    stop()
                    throw TraceToolkitError("babeltrace2 printed nothing for \(stallMilliseconds / 1000) s and was stopped: a damaged trace (truncated metadata, or a FIFO instead of a file?)")
                }
                for (index, entry) in polled.enumerated() where entry.fd >= 0 && entry.revents != 0 {
                    let count = chunk.withUnsafeMutableBytes { Glibc.read(entry.fd, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    let stream: Stream = index == 0 ? .output : .error
                    var going = true
                    if count <= 0 {
                        if !pending[index].isEmpty { going = each(stream, pending[index][...]) }
                        pending[index] = []
                        close(entry.fd)
                        descriptors[index] = -1
                    } else {
                        var start = 0
                        for at in 0..<count where going && chunk[at] == 0x0a {
                            if pending[index].isEmpty {
                                going = each(stream, chunk[start..<at])
                            } else {
                                pending[index] += chunk[start..<at]
                                going = each(stream, pending[index][...])
                                pending[index] = []
                            }
                            start = at + 1
                        }
                        if going && start < count { pending[index] += chunk[start..<count] }
                    }
                    if !going {
                        stop()
                        return
                    }
                }
            }
        }

        /// How the child ended (waits for it).
        func wait() -> (code: Int32, signal: Int32) {
            if let status { return status }
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            let ended: (code: Int32, signal: Int32) = (raw & 0x7f) == 0 ? ((raw >> 8) & 0xff, 0) : (0, raw & 0x7f)
            status = ended
            return ended
        }

        /// Ends the child if it still runs, and closes the pipes.
        func stop() {
            if status == nil {
                kill(pid, SIGKILL)
                _ = wait()
            }
            for descriptor in descriptors where descriptor >= 0 { close(descriptor) }
            descriptors = [-1, -1]
        }
    }
}
