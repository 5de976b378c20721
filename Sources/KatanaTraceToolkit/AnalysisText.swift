import Foundation

extension AnalysisReport {
    /// The report as `katana-trace analyze` prints it; with `histogram`, each type's service-time distribution too.
    public func text(histogram: Bool = false) -> String {
        var lines: [String] = []
        if discardedEvents > 0 {
            lines.append("!!! WARNING: \(discardedEvents) events were DISCARDED by the tracer: figures below are incomplete. "
                         + "Record with a bigger channel (--subbuf-size=8M --num-subbuf=8).")
        }
        lines.append("\(dispatches) dispatches (\(complete) complete), max parallelism \(maxParallelism)")
        if window.beginS != nil || window.endS != nil || window.minDurationNs != 0 || window.windows != nil || window.types != nil {
            var parts: [String] = []
            if let types = window.types { parts.append("are of \(types.joined(separator: ", "))") }
            if let windows = window.windows { parts.append("began in the \(windows) windows around the longest") }
            if window.beginS != nil || window.endS != nil {
                let until = window.endS.map { "\(general($0)) s" } ?? "the end"
                parts.append("began between \(general(window.beginS ?? 0)) s and \(until)")
            }
            if window.minDurationNs != 0 { parts.append("took at least \(nanoseconds(Double(window.minDurationNs)))") }
            lines.append("kept \(window.dispatches) dispatches that " + parts.joined(separator: " and "))
        }
        lines.append("")
        let header = left("type", 44) + " " + left("kind", 13) + " " + right("count", 8) + "  "
            + ["wait p50", "wait p99", "wait max"].map { right($0, 9) }.joined(separator: " ") + "  "
            + ["svc p50", "svc p99", "svc max", "svc sd"].map { right($0, 9) }.joined(separator: " ")
        lines.append(header)
        lines.append(String(repeating: "-", count: header.count))
        for type in types {
            let wait = type.queueWaitNs, service = type.serviceNs
            lines.append(left(String(type.name.prefix(44)), 44) + " " + left(type.kind, 13) + " " + right("\(type.count)", 8)
                         + "  " + [wait.p50, wait.p99 ?? 0, wait.max].map { right(nanoseconds($0), 9) }.joined(separator: " ")
                         + "  " + [service.p50, service.p99 ?? 0, service.max, service.stddev ?? 0]
                            .map { right(nanoseconds($0), 9) }.joined(separator: " "))
        }
        if histogram {
            for type in types {
                lines.append("")
                lines.append("\(type.name) — service time distribution (\(type.count) dispatches):")
                let buckets = type.serviceDistribution ?? []
                let peak = buckets.map(\.count).max() ?? 0
                for bucket in buckets {
                    let width = peak > 0 ? 50 * Double(bucket.count) / Double(peak) : 0
                    lines.append("  \(right(nanoseconds(bucket.fromNs), 9)) – \(right(nanoseconds(bucket.toNs), 9))  "
                                 + "\(right("\(bucket.count)", 8))  \(bar(width))")
                }
            }
        }
        lines.append("")
        lines.append("side effects in flight over time:")
        for slice in parallelismTimeline {
            lines.append("  " + fixed(slice.fromMs, 9, 3) + "–" + fixed(slice.toMs, 9, 3) + " ms  mean "
                         + fixed(slice.meanInFlight, 6, 2) + "  max " + right("\(slice.maxInFlight)", 3) + "  "
                         + bar(slice.meanInFlight * 4))
        }
        lines.append("")
        lines.append("nesting (parent → child: count):")
        for (name, count) in nesting.roots.sorted(by: { ($1.value, $0.key) < ($0.value, $1.key) }) {
            lines.append("  (top level) → \(name): \(count)")
        }
        for edge in nesting.children { lines.append("  \(edge.parent) → \(edge.child): \(edge.count)") }
        if let over = overBudget, over.count > 0 {
            lines.append("")
            lines.append("!!! \(over.count) dispatches went OVER their latency budget:")
            for item in over.dispatches.prefix(50) {
                lines.append("  at \(fixed(item.atS, 0, 6)) s  \(item.name) #\(item.id) (\(item.kind)) took "
                             + "\(nanoseconds(item.actualNs)), budget \(nanoseconds(item.budgetNs)), on thread \(item.vtid); "
                             + "dispatched by \(chain(item.parents))")
            }
        }
        if let intervals, !intervals.isEmpty {
            lines.append("")
            lines.append("intervals (context.interval / traceInterval):")
            for interval in intervals {
                let duration = interval.durationNs
                let parents = interval.parents.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
                    .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
                lines.append("  " + left(String(interval.name.prefix(44)), 44) + " " + right("\(interval.count)", 6)
                             + "  p50 " + right(nanoseconds(duration.p50), 9) + "  p99 " + right(nanoseconds(duration.p99 ?? 0), 9)
                             + "  max " + right(nanoseconds(duration.max), 9) + "  in \(parents)")
            }
        }
        if let transitions, !transitions.isEmpty {
            lines.append("")
            lines.append("navigation transitions (KatanaRouter):")
            for transition in transitions {
                let outcomes = transition.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
                    .joined(separator: ", ")
                lines.append("  " + left(String(transition.name.prefix(44)), 44) + " " + right("\(transition.count)", 6)
                             + "  p50 " + right(nanoseconds(transition.durationNs.p50), 9)
                             + "  max " + right(nanoseconds(transition.durationNs.max), 9) + "  (\(outcomes))")
            }
        }
        if let top {
            lines.append("")
            lines.append("the \(top.count) longest dispatches (service time):")
            for item in top {
                lines.append("  " + right("\(item.rank)", 3) + ". " + right(nanoseconds(item.serviceNs), 9)
                             + "  at \(fixed(item.beginS, 0, 6)) s  \(item.name) #\(item.id) (\(item.kind), \(item.outcome)) "
                             + "on thread \(item.vtid), waited \(nanoseconds(item.queueWaitNs)); dispatched by "
                             + chain(item.parents ?? []))
            }
        }
        return lines.joined(separator: "\n")
    }
}

/// A duration as the report shows it: ns below a microsecond, then µs, ms and s with two decimals.
func nanoseconds(_ value: Double) -> String {
    if value < 1_000 { return fixed(value, 0, 0) + " ns" }
    if value < 1_000_000 { return fixed(value / 1e3, 0, 2) + " µs" }
    if value < 1_000_000_000 { return fixed(value / 1e6, 0, 2) + " ms" }
    return fixed(value / 1e9, 0, 2) + " s"
}

/// `value` with `decimals` decimals, right-aligned in `width` characters.
func fixed(_ value: Double, _ width: Int, _ decimals: Int) -> String {
    String(format: "%\(width).\(decimals)f", value)
}

/// `value` in the shortest of fixed or exponent form (C's and Python's `g`).
func general(_ value: Double) -> String { String(format: "%g", value) }

func left(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

func right(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : String(repeating: " ", count: width - text.count) + text
}

/// A dispatch's ancestors, nearest first, or "(top level)".
func chain(_ parents: [AnalysisReport.Ancestor]) -> String {
    parents.isEmpty ? "(top level)" : parents.map { "\($0.name ?? "?") #\($0.id)" }.joined(separator: " ← ")
}

/// A bar of `length` `#`s, rounded: none for a length that is negative or not a number (a damaged trace's analysis
/// can give a negative mean — more ends than begins — which once crashed the text report:
/// `aDamagedTracesTimelineNeverCrashesTheTextReport`), at most 200.
private func bar(_ length: Double) -> String {
    guard length.isFinite, length > 0 else { return "" }
    return String(repeating: "#", count: Int(min(length, 200).rounded(.toNearestOrEven)))
}
