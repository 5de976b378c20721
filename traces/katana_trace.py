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
                discarded += message.count if message.count is not None else 1
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
    for (_, dispatch_id), seen in by_id.items():
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
    if discarded:
        problems.insert(0, f"{discarded} events were DISCARDED by the tracer, so some dispatches look incomplete: "
                           f"use a bigger channel (lttng enable-channel -u --subbuf-size=8M --num-subbuf=8)")
    return problems, len(by_id)


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("check", "dump"):
        p = sub.add_parser(name)
        p.add_argument("trace")
    args = parser.parse_args(argv)
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
