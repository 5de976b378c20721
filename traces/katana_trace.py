#!/usr/bin/python3
"""Read, check, analyse and export recorded Katana LTTng traces.

Uses the official babeltrace2 Python bindings (Debian's python3-bt2), so run it with /usr/bin/python3:

    /usr/bin/python3 traces/katana_trace.py check   TRACE_DIR      # integrity: every dispatch enqueued, begun, ended
    /usr/bin/python3 traces/katana_trace.py dump    TRACE_DIR      # events as JSON lines
    /usr/bin/python3 traces/katana_trace.py analyze TRACE_DIR [--json]
    /usr/bin/python3 traces/katana_trace.py export  TRACE_DIR -o trace.json   # Chrome/Perfetto trace-event JSON

Exit status: 0 ok, 1 the trace has problems (check), 2 bad input (not a trace, truncated, no katana events).
"""
import argparse
import json
import os
import signal
import sys

try:
    import bt2
except ImportError:  # pragma: no cover - depends on the machine
    sys.stderr.write("katana_trace: the babeltrace2 Python bindings are missing: apt-get install python3-bt2, "
                     "and run this script with /usr/bin/python3\n")
    sys.exit(2)


class TraceError(Exception):
    """Bad input: the path is not a readable trace with katana events."""


def _field(value):
    if isinstance(value, bt2._EnumerationFieldConst):
        labels = list(value.labels)
        return labels[0] if labels else int(value)
    if isinstance(value, bt2._IntegerFieldConst):
        return int(value)
    if isinstance(value, bt2._StringFieldConst):
        return str(value)
    if isinstance(value, bt2._RealFieldConst):
        return float(value)
    return str(value)


def read_events(path):
    """Returns (events, discarded): events as dicts in time order, and the number of discarded events."""
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or directory")
    if not os.path.isdir(path):
        raise TraceError(f"{path}: not a directory (give the trace directory lttng printed)")
    events = []
    discarded = 0
    try:
        iterator = bt2.TraceCollectionMessageIterator(path)
        for message in iterator:
            kind = type(message)
            if kind is bt2._EventMessageConst:
                event = message.event
                if not event.name.startswith("katana:"):
                    continue
                record = {"event": event.name[len("katana:"):], "ts": message.default_clock_snapshot.ns_from_origin}
                context = event.common_context_field
                if context is not None:
                    for key, value in context.items():
                        record[key] = _field(value)
                for key, value in event.payload_field.items():
                    record[key] = _field(value)
                events.append(record)
            elif kind is bt2._DiscardedEventsMessageConst:
                # The count is the difference of two snapshots of a per-stream counter; when a full ring buffer
                # makes packets arrive out of step it can come out "negative" (wrapped to nearly 2**64). Such a
                # count, or none, still means events were lost: count it as one.
                count = message.count
                discarded += count if count is not None and 0 < count < 2**40 else 1
    except TraceError:
        raise
    except Exception as error:  # bt2 raises its own error types for unreadable or truncated traces
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TraceError(f"{path}: not a readable CTF trace ({first_line})") from None
    if not events:
        raise TraceError(f"{path}: no katana events in this trace (was `lttng enable-event -u 'katana:*'` run?)")
    return events, discarded


def check(events, discarded):
    """Integrity of the dispatch events: a list of problems (empty when the trace is whole)."""
    problems = []
    by_id = {}
    for event in events:
        if event["event"] in ("dispatch_enqueue", "dispatch_begin", "dispatch_end"):
            # Ids are unique per process: a trace of several processes is keyed by (vpid, id).
            by_id.setdefault((event.get("vpid"), event["id"]), []).append(event)
    order = ["dispatch_enqueue", "dispatch_begin", "dispatch_end"]
    rank = {name: index for index, name in enumerate(order)}
    for (_, dispatch_id), unordered in by_id.items():
        # The requirement is time order; per-CPU buffers do not promise the merged output is in it.
        seen = sorted(unordered, key=lambda e: (e["ts"], rank[e["event"]]))
        names = [e["event"] for e in seen]
        if names != order:
            problems.append(f"id {dispatch_id}: events {names}, expected enqueue, begin, end once each in that order")
            continue
        if not seen[0]["ts"] <= seen[1]["ts"] <= seen[2]["ts"]:
            problems.append(f"id {dispatch_id}: timestamps out of order")
        kinds = {e["kind"] for e in seen}
        names_ = {e["name"] for e in seen}
        if len(kinds) != 1 or len(names_) != 1:
            problems.append(f"id {dispatch_id}: kind or name differs between its events")
        if seen[0]["parent_id"] != seen[1]["parent_id"]:
            problems.append(f"id {dispatch_id}: parent_id differs between enqueue and begin")
    for t in transitions(events).values():
        if "begin" not in t or "end" not in t:
            problems.append(f"transition {t['id']} ({t['name']}): has {'begin' if 'begin' in t else 'end'} only")
        elif t["end"] < t["begin"]:
            problems.append(f"transition {t['id']} ({t['name']}): ends before it begins")
    if discarded:
        problems.insert(0, f"{discarded} events were DISCARDED by the tracer, so some dispatches look incomplete: "
                           f"use a bigger channel (lttng enable-channel -u --subbuf-size=8M --num-subbuf=8)")
    return problems, len(by_id)


def percentile(sorted_values, p):
    """Nearest-rank percentile of an already sorted list (p in 0..100)."""
    if not sorted_values:
        return 0
    rank = max(1, int(round(p / 100.0 * len(sorted_values) + 0.5)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def dispatches(events):
    """Complete dispatches keyed by (vpid, id): {name, kind, parent, enqueue, begin, end, queue, vtid, outcome}."""
    table = {}
    for event in events:
        name = event["event"]
        if name not in ("dispatch_enqueue", "dispatch_begin", "dispatch_end"):
            continue
        entry = table.setdefault((event.get("vpid"), event["id"]), {"id": event["id"], "vpid": event.get("vpid")})
        stage = name[len("dispatch_"):]
        entry[stage] = event["ts"]
        entry["name"] = event["name"]
        entry["kind"] = event["kind"]
        if stage == "enqueue":
            entry["parent"] = event["parent_id"]
            entry["enqueue_queue"] = event["queue"]
            entry["enqueue_vtid"] = event.get("vtid")
        elif stage == "begin":
            entry["queue"] = event["queue"]
            entry["vtid"] = event.get("vtid")
            entry["parallelism"] = event["parallelism"]
        else:
            entry["outcome"] = event["outcome"]
    return table


def transitions(events):
    """Navigation transitions (KatanaRouter) keyed by (vpid, transition_id): {name, begin, end, outcome, vtid}."""
    table = {}
    for event in events:
        if event["event"] not in ("transition_begin", "transition_end"):
            continue
        entry = table.setdefault((event.get("vpid"), event["transition_id"]),
                                 {"id": event["transition_id"], "vpid": event.get("vpid"), "name": event["name"]})
        if event["event"] == "transition_begin":
            entry["begin"] = event["ts"]
            entry["vtid"] = event.get("vtid")
        else:
            entry["end"] = event["ts"]
            entry["outcome"] = event["outcome"]
    return table


def transition_summary(events):
    """Per transition name: count, outcomes, duration percentiles (complete begin/end pairs only)."""
    by_name = {}
    for t in transitions(events).values():
        if "begin" in t and "end" in t:
            by_name.setdefault(t["name"], []).append(t)
    summary = []
    for name, items in sorted(by_name.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        durations = sorted(t["end"] - t["begin"] for t in items)
        outcomes = {}
        for t in items:
            outcomes[str(t["outcome"])] = outcomes.get(str(t["outcome"]), 0) + 1
        summary.append({"name": name, "count": len(items), "outcomes": outcomes,
                        "duration_ns": {q: percentile(durations, p) for q, p in (("p50", 50), ("max", 100))}})
    return summary


def analyze(events, discarded):
    table = dispatches(events)
    whole = [d for d in table.values() if "enqueue" in d and "begin" in d and "end" in d]
    by_name = {}
    for d in whole:
        by_name.setdefault(d["name"], []).append(d)
    types = []
    for name, items in sorted(by_name.items(), key=lambda kv: -len(kv[1])):
        waits = sorted(d["begin"] - d["enqueue"] for d in items)
        services = sorted(d["end"] - d["begin"] for d in items)
        outcomes = {}
        for d in items:
            outcomes[d["outcome"]] = outcomes.get(d["outcome"], 0) + 1
        types.append({
            "name": name, "kind": items[0]["kind"], "count": len(items), "outcomes": outcomes,
            "queue_wait_ns": {q: percentile(waits, p) for q, p in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
            "service_ns": {q: percentile(services, p) for q, p in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))},
        })
    # Parallelism over time: side effects in flight, sampled from begin/end, summarised per tenth of the trace.
    side = sorted((d["begin"], d["end"]) for d in whole if d["kind"] == "side_effect")
    timeline = []
    if whole:
        start = min(d["enqueue"] for d in whole)
        stop = max(d["end"] for d in whole)
        span = max(stop - start, 1)
        edges = sorted([(b, 1) for b, _ in side] + [(e, -1) for _, e in side])
        buckets = 10
        width = span / buckets
        peak = [0] * buckets
        area = [0.0] * buckets
        level, last = 0, start
        for ts, delta in edges + [(stop, 0)]:
            # The level was constant on [last, ts): add its time-weighted share to each bucket it overlaps.
            if ts > last:
                first_bucket = min(int((last - start) / width), buckets - 1)
                last_bucket = min(int((ts - start) / width), buckets - 1)
                for index in range(first_bucket, last_bucket + 1):
                    lo = max(last, start + index * width)
                    hi = min(ts, start + (index + 1) * width)
                    if hi > lo:
                        area[index] += level * (hi - lo)
                        peak[index] = max(peak[index], level)
            level += delta
            index = min(int((ts - start) / width), buckets - 1)
            peak[index] = max(peak[index], level)
            last = ts
        for index in range(buckets):
            timeline.append({"from_ms": round(index * span / buckets / 1e6, 3),
                             "to_ms": round((index + 1) * span / buckets / 1e6, 3),
                             "mean_in_flight": round(area[index] / width, 3), "max_in_flight": peak[index]})
    # Nesting: which types dispatch which, via parent_id.
    by_key = {(d["vpid"], d["id"]): d for d in whole}
    edges_count = {}
    roots = {}
    for d in whole:
        parent = by_key.get((d["vpid"], d.get("parent", 0)))
        if parent is None:
            roots[d["name"]] = roots.get(d["name"], 0) + 1
        else:
            key = (parent["name"], d["name"])
            edges_count[key] = edges_count.get(key, 0) + 1
    report_transitions = transition_summary(events)
    return {
        **({"transitions": report_transitions} if report_transitions else {}),
        "dispatches": len(table), "complete": len(whole), "discarded_events": discarded,
        "types": types, "parallelism_timeline": timeline,
        "max_parallelism": max((d.get("parallelism", 0) for d in whole), default=0),
        "nesting": {"roots": roots, "children": [{"parent": p, "child": c, "count": n}
                                                for (p, c), n in sorted(edges_count.items(), key=lambda kv: -kv[1])]},
    }


def format_analysis(report):
    def ns(value):
        if value < 1_000:
            return f"{value:.0f} ns"
        if value < 1_000_000:
            return f"{value / 1e3:.2f} µs"
        if value < 1_000_000_000:
            return f"{value / 1e6:.2f} ms"
        return f"{value / 1e9:.2f} s"
    lines = []
    if report["discarded_events"]:
        lines.append(f"!!! WARNING: {report['discarded_events']} events were DISCARDED by the tracer: figures below "
                     f"are incomplete. Record with a bigger channel (--subbuf-size=8M --num-subbuf=8).")
    lines.append(f"{report['dispatches']} dispatches ({report['complete']} complete), "
                 f"max parallelism {report['max_parallelism']}")
    lines.append("")
    header = f"{'type':44} {'kind':13} {'count':>8}  {'wait p50':>9} {'wait p99':>9} {'wait max':>9}  {'svc p50':>9} {'svc p99':>9} {'svc max':>9}"
    lines.append(header)
    lines.append("-" * len(header))
    for t in report["types"]:
        w, s = t["queue_wait_ns"], t["service_ns"]
        lines.append(f"{t['name'][:44]:44} {t['kind']:13} {t['count']:>8}  {ns(w['p50']):>9} {ns(w['p99']):>9} {ns(w['max']):>9}"
                     f"  {ns(s['p50']):>9} {ns(s['p99']):>9} {ns(s['max']):>9}")
    lines.append("")
    lines.append("side effects in flight over time:")
    for b in report["parallelism_timeline"]:
        bar = "#" * int(round(b["mean_in_flight"] * 4))
        lines.append(f"  {b['from_ms']:9.3f}–{b['to_ms']:9.3f} ms  mean {b['mean_in_flight']:6.2f}  max {b['max_in_flight']:3}  {bar}")
    lines.append("")
    lines.append("nesting (parent → child: count):")
    for name, count in sorted(report["nesting"]["roots"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  (top level) → {name}: {count}")
    for edge in report["nesting"]["children"]:
        lines.append(f"  {edge['parent']} → {edge['child']}: {edge['count']}")
    if report.get("transitions"):
        lines.append("")
        lines.append("navigation transitions (KatanaRouter):")
        for t in report["transitions"]:
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(t["outcomes"].items()))
            lines.append(f"  {t['name'][:44]:44} {t['count']:>6}  p50 {ns(t['duration_ns']['p50']):>9}  "
                         f"max {ns(t['duration_ns']['max']):>9}  ({outcomes})")
    return "\n".join(lines)


def export_perfetto(events):
    """Chrome/Perfetto trace-event JSON: X slices on the thread that ran each dispatch, queue waits as async
    b/e pairs, a parallelism counter track, and process/thread names. Timestamps in µs."""
    table = dispatches(events)
    whole = sorted((d for d in table.values() if "enqueue" in d and "begin" in d and "end" in d), key=lambda d: d["begin"])
    origin = min((e["ts"] for e in events), default=0)
    us = lambda ts: round((ts - origin) / 1000.0, 3)
    out = []
    pids, tids = set(), set()
    for d in whole:
        pid, tid = d["vpid"] or 0, d.get("vtid") or 0
        pids.add(pid)
        tids.add((pid, tid))
        out.append({"name": d["name"], "cat": d["kind"], "ph": "X", "ts": us(d["begin"]),
                    "dur": round((d["end"] - d["begin"]) / 1000.0, 3), "pid": pid, "tid": tid,
                    "args": {"id": d["id"], "parent_id": d.get("parent", 0), "queue": d.get("queue"),
                             "outcome": d.get("outcome"), "parallelism": d.get("parallelism")}})
        # The wait between dispatch and begin, as an async slice with an id unique per (process, dispatch).
        async_id = f"{pid}:{d['id']}"
        waiter = d.get("enqueue_vtid") or tid
        out.append({"name": "queue wait", "cat": "queue_wait", "ph": "b", "id": async_id, "ts": us(d["enqueue"]),
                    "pid": pid, "tid": waiter, "args": {"dispatchable": d["name"], "queue": d.get("enqueue_queue")}})
        out.append({"name": "queue wait", "cat": "queue_wait", "ph": "e", "id": async_id, "ts": us(d["begin"]),
                    "pid": pid, "tid": waiter})
    # Navigation transitions: X slices on the thread that ran them, category "navigation".
    for t in sorted(transitions(events).values(), key=lambda t: t.get("begin", 0)):
        if "begin" not in t or "end" not in t:
            continue
        pid, tid = t["vpid"] or 0, t.get("vtid") or 0
        pids.add(pid)
        tids.add((pid, tid))
        out.append({"name": t["name"], "cat": "navigation", "ph": "X", "ts": us(t["begin"]),
                    "dur": round((t["end"] - t["begin"]) / 1000.0, 3), "pid": pid, "tid": tid,
                    "args": {"transition_id": t["id"], "outcome": t.get("outcome")}})
    # Parallelism counter: side effects in flight, per process.
    for pid in pids:
        level = 0
        changes = sorted([(d["begin"], 1) for d in whole if d["kind"] == "side_effect" and (d["vpid"] or 0) == pid]
                         + [(d["end"], -1) for d in whole if d["kind"] == "side_effect" and (d["vpid"] or 0) == pid])
        for ts, delta in changes:
            level += delta
            out.append({"name": "side effects in flight", "ph": "C", "ts": us(ts), "pid": pid, "args": {"in_flight": level}})
    metadata = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"katana pid {pid}"}} for pid in sorted(pids)]
    metadata += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"thread {tid}"}}
                 for pid, tid in sorted(tids)]
    return {"traceEvents": metadata + out, "displayTimeUnit": "ns",
            "otherData": {"source": "katana_trace.py export", "dispatches": len(whole)}}


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("check", "dump"):
        p = sub.add_parser(name)
        p.add_argument("trace")
    p = sub.add_parser("analyze")
    p.add_argument("trace")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p = sub.add_parser("export")
    p.add_argument("trace")
    p.add_argument("-o", "--output", required=True, help="where to write the trace-event JSON")
    args = parser.parse_args(argv)
    if args.command == "export":
        directory = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
            sys.stderr.write(f"katana_trace: cannot write {args.output}: {directory} is not a writable directory\n")
            return 2
    try:
        events, discarded = read_events(args.trace)
    except TraceError as error:
        sys.stderr.write(f"katana_trace: {error}\n")
        return 2
    if args.command == "dump":
        out = sys.stdout
        for event in events:
            out.write(json.dumps(event, sort_keys=True) + "\n")
        out.write(json.dumps({"event": "_summary", "discarded": discarded, "count": len(events)}) + "\n")
        return 0
    if args.command == "analyze":
        report = analyze(events, discarded)
        print(json.dumps(report, indent=2) if args.json else format_analysis(report))
        if discarded:
            sys.stderr.write(f"katana_trace: WARNING: {discarded} events were DISCARDED by the tracer\n")
        return 0
    if args.command == "export":
        document = export_perfetto(events)
        with open(args.output, "w") as handle:
            json.dump(document, handle, separators=(",", ":"))
        counts = {}
        for e in document["traceEvents"]:
            counts[e["ph"]] = counts.get(e["ph"], 0) + 1
        print(json.dumps({"output": args.output, "events_by_phase": counts}, sort_keys=True))
        return 0
    if args.command == "check":
        problems, dispatches = check(events, discarded)
        if discarded:
            sys.stderr.write(f"katana_trace: WARNING: {discarded} events were DISCARDED by the tracer\n")
        print(json.dumps({"dispatches": dispatches, "events": len(events), "discarded": discarded,
                          "problems": problems[:20], "problem_count": len(problems)}, indent=2))
        return 1 if problems else 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
