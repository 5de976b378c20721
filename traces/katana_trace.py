#!/usr/bin/python3
"""Read, check, analyse and export recorded Katana LTTng traces.

Uses the official babeltrace2 Python bindings (Debian's python3-bt2), so run it with /usr/bin/python3:

    /usr/bin/python3 traces/katana_trace.py check   TRACE_DIR      # integrity: every dispatch enqueued, begun, ended
    /usr/bin/python3 traces/katana_trace.py dump    TRACE_DIR      # events as JSON lines
    /usr/bin/python3 traces/katana_trace.py analyze TRACE_DIR [--top N] [--begin S] [--end S]
                                                    [--min-duration D] [--histogram] [--json]
    /usr/bin/python3 traces/katana_trace.py export  TRACE_DIR -o trace.json   # Chrome/Perfetto trace-event JSON

`analyze` decodes the trace with katana_scan.c (beside this file; built with the machine's C compiler on first use,
several million events/s) and falls back to babeltrace2 when that reader declines the trace (--reader chooses).

Every command streams the trace: memory grows with the dispatches in flight at one moment, not with the trace's
length. Reading runs in a child process watched by this one, so a damaged trace that makes babeltrace2 abort or
spin ends the command with one line and exit status 2 (a read that makes no progress for --stall-timeout seconds,
30 by default, is stopped).

Exit status: 0 ok, 1 the trace has problems (check), 2 bad input (not a trace, damaged, no katana events, an
output that cannot be written).
"""
import argparse
import hashlib
import heapq
import json
import math
import os
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

PROG = "katana_trace"
STAGES = ("dispatch_enqueue", "dispatch_begin", "dispatch_end")


class TraceError(Exception):
    """Bad input: the path is not a readable trace with katana events, or an output cannot be written."""


# ---------------------------------------------------------------------------------------------------------- reading

LINE = re.compile(r'^\[(\d+)\.(\d{9})\] (?:\([^)]*\) )?\S+ katana:(\w+): (.*)$')
FIELD = re.compile(r'(\w+) = (?:"((?:[^"\\]|\\.)*)"|\( "((?:[^"\\]|\\.)*)" : container = -?\d+ \)|(-?\d+))')
DISCARDED = re.compile(r'^WARNING: Tracer discarded (\d+) events?\b')  # "1 event", "2 events"
SKIPPED_FIELDS = {"cpu_id"}  # packet context, not the event's


PLUGIN_ERROR = re.compile(r'^\S+ \S+ +\d+ +\d+ E PLUGIN/\S+ \S+ (?:\[[^\]]*\] )?(.*)$')


def babeltrace_cause(lines):
    """The most telling line of babeltrace2's error report: the first error a plugin logged (e.g. "Invalid metadata
    version found in plain text signature"), else the innermost CAUSED BY, without its addresses."""
    for line in lines:
        match = PLUGIN_ERROR.match(line)
        if match:
            return match.group(1).split(": ")[0].strip()
    causes = [index for index, line in enumerate(lines) if line.startswith("CAUSED BY")]
    if causes and causes[-1] + 1 < len(lines):
        return lines[causes[-1] + 1].strip().split(": ")[0]
    return None


def _unescape(text):
    return text.replace('\\"', '"').replace("\\\\", "\\") if "\\" in text else text


class Reader:
    """Streams the katana events of a trace in time order, as dicts, counting discarded events as it goes.

    babeltrace2's own reader (the `babeltrace2` command, C) decodes the trace and prints each event on a line; this
    parses those lines. That is ten times faster than the Python bindings, which create an object per field, and
    keeps babeltrace2 in a process of its own."""

    def __init__(self, path, progress=None):
        self.path = path
        self.progress = progress
        self.discarded = 0
        self.count = 0

    def __iter__(self):
        try:
            process = subprocess.Popen(["babeltrace2", "--clock-seconds", "--no-delta", self.path],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       env=dict(os.environ, LIBBABELTRACE2_INIT_LOG_LEVEL="NONE"), bufsize=1 << 20)
        except FileNotFoundError:
            raise TraceError("babeltrace2 is not installed: apt-get install babeltrace2") from None
        errors = []

        def drain():
            # Discarded-events warnings (and errors) arrive on standard error while events arrive on standard output.
            for raw in process.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                match = DISCARDED.match(line)
                if match:
                    # A count past 2**40 is a per-stream counter that wrapped (snapshots out of step when a full
                    # ring buffer reorders packets): events were still lost, so count it as one.
                    count = int(match.group(1))
                    self.discarded += count if 0 < count < 2**40 else 1
                elif line.strip() and len(errors) < 200:
                    errors.append(line)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        line_pattern, field_pattern, skipped = LINE, FIELD, SKIPPED_FIELDS
        layouts = {}
        try:
            for raw in process.stdout:
                match = line_pattern.match(raw.decode("utf-8", errors="replace"))
                if match is None:
                    continue
                seconds, nanoseconds, name, rest = match.groups()
                record = {"event": name, "ts": int(seconds) * 1_000_000_000 + int(nanoseconds)}
                layout = layouts.get(name)
                values = layout[0].fullmatch(rest) if layout else None
                if values is None:
                    # First line of this event (or a line laid out differently): parse it field by field, and
                    # learn its layout so the next lines of the event take one match.
                    fields = list(field_pattern.finditer(rest))
                    layouts[name] = self._layout(rest, fields)
                    for field in fields:
                        key, string, label, number = field.groups()
                        if key not in skipped:
                            record[key] = int(number) if number else _unescape(label if label is not None else string)
                else:
                    for (key, numeric), value in zip(layout[1], values.groups()):
                        if key not in skipped:
                            record[key] = int(value) if numeric else _unescape(value)
                self.count += 1
                if self.progress is not None and self.count % 20_000 == 0:
                    self.progress()
                yield record
        finally:
            if process.poll() is None:
                process.kill()
            status = process.wait()
            reader.join()
        if status != 0:
            if status < 0:
                detail = f"babeltrace2 ended with {signal.Signals(-status).name}: damaged metadata or data streams"
            else:
                detail = babeltrace_cause(errors) or f"babeltrace2 exited with status {status}"
            raise TraceError(f"{self.path}: not a readable CTF trace ({detail[:300]})")
        if self.count == 0:
            raise TraceError(f"{self.path}: no katana events in this trace (was `lttng enable-event -u 'katana:*'` run?)")

    @staticmethod
    def _layout(rest, fields):
        """A regex for lines laid out like `rest` (same fields, same order, same text between them), with one group
        per field value, and each field's (key, is-a-number)."""
        parts, keys, position = [], [], 0
        for field in fields:
            key, string, label, number = field.groups()
            parts.append(re.escape(rest[position:field.start()]))
            if number:
                parts.append(re.escape(key) + r" = (-?\d+)")
            elif label is not None:
                parts.append(re.escape(key) + r' = \( "((?:[^"\\]|\\.)*)" : container = -?\d+ \)')
            else:
                parts.append(re.escape(key) + r' = "((?:[^"\\]|\\.)*)"')
            keys.append((key, bool(number)))
            position = field.end()
        parts.append(re.escape(rest[position:]))
        return re.compile("".join(parts)), keys


INLINE_PAYLOAD = {"event", "ts", "parent_id", "_name_length", "parallelism", "duration_ns", "outcome"}


def expand_inline(events):
    """The events with each `updater_inline` (an updater applied inline, recorded as one event at its end) replaced by
    the enqueue, begin and end it stands for: enqueue and begin at (its time − duration_ns) on `updater_inline` with
    queue depth 0, the end at its time. Context fields (vpid, vtid, procname) are the event's. The replayed enqueue
    and begin are earlier than the events just before them in the stream; everything downstream pairs by id."""
    for event in events:
        if event["event"] != "updater_inline":
            yield event
            continue
        end = event["ts"]
        begin = max(0, end - event["duration_ns"])
        common = {key: value for key, value in event.items() if key not in INLINE_PAYLOAD}
        common["kind"] = "state_updater"
        common["queue"] = "updater_inline"
        yield dict(common, event="dispatch_enqueue", ts=begin, parent_id=event["parent_id"], queue_depth=0)
        yield dict(common, event="dispatch_begin", ts=begin, parent_id=event["parent_id"],
                   parallelism=event["parallelism"])
        yield dict(common, event="dispatch_end", ts=end, outcome=event["outcome"])


# ------------------------------------------------------------------------------------------------------- statistics

class Histogram:
    """Latencies in log-linear buckets (64 per power of two: values within 1.6 %), with count, exact min/max, mean
    and sample standard deviation (Welford; n - 1, as lttng-analyses reports it). Memory is bounded whatever the
    number of values."""

    __slots__ = ("buckets", "count", "min", "max", "mean", "m2")

    def __init__(self):
        self.buckets = {}
        self.count = 0
        self.min = None
        self.max = 0
        self.mean = 0.0
        self.m2 = 0.0

    @staticmethod
    def key(value):
        if value < 64:
            return value
        shift = value.bit_length() - 6
        return ((value >> shift) << shift) | ((1 << shift) >> 1)  # the middle of the bucket

    def add(self, value):
        value = max(0, int(value))
        key = self.key(value)
        self.buckets[key] = self.buckets.get(key, 0) + 1
        self.count += 1
        self.min = value if self.min is None else min(self.min, value)
        self.max = max(self.max, value)
        delta = value - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (value - self.mean)

    def percentile(self, p):
        """Nearest-rank percentile (p in 0..100); the maximum is exact."""
        if not self.count:
            return 0
        if p >= 100:
            return self.max
        rank = max(1, int(round(p / 100.0 * self.count + 0.5)))
        seen = 0
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if seen >= rank:
                return min(max(key, self.min), self.max)
        return self.max

    @property
    def stddev(self):
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 0.0

    def summary(self):
        return {"p50": self.percentile(50), "p90": self.percentile(90), "p99": self.percentile(99),
                "max": self.max, "mean": round(self.mean, 1), "stddev": round(self.stddev, 1)}

    def distribution(self):
        """Counts per power-of-two range: [(low, high, count)], empty ranges inside the span included."""
        if not self.count:
            return []
        counts = {}
        for key, n in self.buckets.items():
            exponent = key.bit_length()  # values in [2**(e-1), 2**e)
            counts[exponent] = counts.get(exponent, 0) + n
        low, high = min(counts), max(counts)
        return [((1 << (e - 1)) if e else 0, (1 << e), counts.get(e, 0)) for e in range(low, high + 1)]


class Timeline:
    """Side effects in flight over time, kept in at most 2 * LIMIT equal time buckets (the width doubles as the
    trace goes on), summarised into ten at the end."""

    LIMIT = 2048

    def __init__(self):
        self.start = None
        self.width = 1_000  # 1 µs, doubled as needed
        self.area = []
        self.peak = []
        self.level = 0
        self.last = None

    def _grow(self, upto):
        index = int((upto - self.start) // self.width)
        while index >= 2 * self.LIMIT:
            self.area = [self.area[i] + (self.area[i + 1] if i + 1 < len(self.area) else 0) for i in range(0, len(self.area), 2)]
            self.peak = [max(self.peak[i], self.peak[i + 1] if i + 1 < len(self.peak) else 0) for i in range(0, len(self.peak), 2)]
            self.width *= 2
            index = int((upto - self.start) // self.width)
        while len(self.area) <= index:
            self.area.append(0.0)
            self.peak.append(0)
        return index

    def advance(self, ts):
        if self.start is None:
            self.start = self.last = ts
        if ts < self.last:
            ts = self.last
        # The level was constant on [last, ts): add its time-weighted share to each bucket it overlaps.
        last_index = self._grow(ts)  # may widen the buckets: index the start of the span afterwards
        first = int((self.last - self.start) // self.width)
        for index in range(first, last_index + 1):
            lo = max(self.last, self.start + index * self.width)
            hi = min(ts, self.start + (index + 1) * self.width)
            if hi > lo:
                self.area[index] += self.level * (hi - lo)
                self.peak[index] = max(self.peak[index], self.level)
        self.last = ts

    def change(self, ts, delta):
        self.advance(ts)
        self.level += delta
        index = self._grow(ts)
        self.peak[index] = max(self.peak[index], self.level)

    def summary(self, stop, buckets=10):
        if self.start is None:
            return []
        self.advance(stop)
        span = max(stop - self.start, 1)
        width = span / buckets
        area = [0.0] * buckets
        peak = [0] * buckets
        for index, (a, p) in enumerate(zip(self.area, self.peak)):
            # Share the fine bucket's area between the summary buckets it overlaps, in proportion.
            lo, hi = index * self.width, (index + 1) * self.width
            first, last = min(int(lo / width), buckets - 1), min(int(hi / width), buckets - 1)
            for target in range(first, last + 1):
                overlap = min(hi, (target + 1) * width) - max(lo, target * width)
                if overlap > 0 or first == last:
                    area[target] += a * (overlap / self.width if first != last else 1)
                    if p and overlap > 0:
                        peak[target] = max(peak[target], p)
        return [{"from_ms": round(i * width / 1e6, 3), "to_ms": round((i + 1) * width / 1e6, 3),
                 "mean_in_flight": round(area[i] / width, 3), "max_in_flight": peak[i]} for i in range(buckets)]


def parse_duration(text):
    """'1500' (ns), '250us', '2ms', '1.5s' → nanoseconds."""
    units = (("ns", 1), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9))
    value = text.strip()
    for suffix, scale in sorted(units, key=lambda u: -len(u[0])):
        if value.endswith(suffix):
            number, factor = value[: -len(suffix)], scale
            break
    else:
        number, factor = value, 1
    try:
        result = float(number) * factor
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration (e.g. 1500, 250us, 2ms, 1.5s)") from None
    if not math.isfinite(result) or result < 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration (e.g. 1500, 250us, 2ms, 1.5s)")
    return int(result)


def parse_seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be a finite number of seconds from the trace's start, >= 0")
    return value


def parse_top(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"--top takes 1 to 100000, not {value}")
    return value


# ------------------------------------------------------------------------------------------------------- dispatches

class Dispatches:
    """Pairs the three events of each dispatch as they stream by and hands each whole dispatch to `on_whole` when
    its last event arrives; only dispatches in flight are held. Per (vpid, id): the event's fields plus `chain`,
    the (id, name) of its parent side effects, nearest first, resolved while the parent is in flight."""

    def __init__(self, on_whole):
        self.on_whole = on_whole
        self.open = {}
        self.seen = 0

    def add(self, event):
        key = (event.get("vpid"), event["id"])
        entry = self.open.get(key)
        if entry is None:
            entry = self.open[key] = {"id": event["id"], "vpid": event.get("vpid"), "name": event["name"],
                                      "kind": event["kind"]}
            self.seen += 1
        stage = event["event"][9:]
        if stage in entry:  # a second event of the same stage: an id reused (or damaged data); start again
            self.open[key] = entry = {"id": event["id"], "vpid": event.get("vpid"), "name": event["name"],
                                      "kind": event["kind"]}
            self.seen += 1
        entry[stage] = event["ts"]
        if stage == "enqueue":
            entry["parent"] = parent = event["parent_id"]
            entry["enqueue_queue"] = event["queue"]
            entry["enqueue_vtid"] = event.get("vtid")
            entry["queue_depth"] = event.get("queue_depth")
            if parent:
                up = self.open.get((event.get("vpid"), parent))
                entry["chain"] = ((parent, up["name"]),) + up.get("chain", ())[:15] if up else ((parent, None),)
        elif stage == "begin":
            entry["queue"] = event["queue"]
            entry["vtid"] = event.get("vtid")
            entry["parallelism"] = event["parallelism"]
            if "parent" not in entry:
                entry["parent"] = event["parent_id"]
        else:
            entry["outcome"] = event["outcome"]
            entry["end_vtid"] = event.get("vtid")
        if "enqueue" in entry and "begin" in entry and "end" in entry:
            del self.open[key]
            self.on_whole(entry)

    def incomplete(self):
        return list(self.open.values())


class Transitions:
    """Navigation transitions (KatanaRouter), paired the same way."""

    def __init__(self, on_whole):
        self.on_whole = on_whole
        self.open = {}

    def add(self, event):
        key = (event.get("vpid"), event["transition_id"])
        entry = self.open.setdefault(key, {"id": event["transition_id"], "vpid": event.get("vpid"),
                                           "name": event["name"]})
        if event["event"] == "transition_begin":
            entry["begin"] = event["ts"]
            entry["vtid"] = event.get("vtid")
        else:
            entry["end"] = event["ts"]
            entry["outcome"] = event["outcome"]
            entry["end_vtid"] = event.get("vtid")
        if "begin" in entry and "end" in entry:
            del self.open[key]
            self.on_whole(entry)


class Intervals:
    """User intervals (`SideEffectContext.interval`, `traceInterval`), paired; `parent` is the side effect's name
    when it was in flight at the interval's begin."""

    def __init__(self, on_whole, dispatches=None):
        self.on_whole = on_whole
        self.dispatches = dispatches
        self.open = {}

    def add(self, event):
        key = (event.get("vpid"), event["interval_id"])
        if event["event"] == "interval_begin":
            entry = self.open[key] = {"id": event["interval_id"], "vpid": event.get("vpid"), "name": event["name"],
                                      "begin": event["ts"], "vtid": event.get("vtid"), "parent_id": event["parent_id"]}
            if self.dispatches is not None and event["parent_id"]:
                up = self.dispatches.open.get((event.get("vpid"), event["parent_id"]))
                entry["parent"] = up["name"] if up else None
            return
        entry = self.open.pop(key, None)
        if entry is None:
            return
        entry["end"] = event["ts"]
        entry["outcome"] = event["outcome"]
        entry["end_vtid"] = event.get("vtid")
        self.on_whole(entry)


# ------------------------------------------------------------------------------------------------------------ check

def check(reader):
    """Integrity of the dispatch events: (problems, dispatches). Streams: holds only dispatches in flight."""
    problems = []
    rank = {name: index for index, name in enumerate(STAGES)}
    open_ = {}
    dispatches = 0
    transitions = {}
    intervals = {}

    def finish(key, events):
        dispatch_id = key[1]
        seen = sorted(events, key=lambda e: (e["ts"], rank[e["event"]]))
        names = [e["event"] for e in seen]
        if names != list(STAGES):
            problems.append(f"id {dispatch_id}: events {names}, expected enqueue, begin, end once each in that order")
            return
        if not seen[0]["ts"] <= seen[1]["ts"] <= seen[2]["ts"]:
            problems.append(f"id {dispatch_id}: timestamps out of order")
        if len({e["kind"] for e in seen}) != 1 or len({e["name"] for e in seen}) != 1:
            problems.append(f"id {dispatch_id}: kind or name differs between its events")
        if seen[0]["parent_id"] != seen[1]["parent_id"]:
            problems.append(f"id {dispatch_id}: parent_id differs between enqueue and begin")

    def pair(table, label, id_field, event, begins):
        """Transitions and intervals: a begin and an end per id, in that order."""
        key = (event.get("vpid"), event[id_field])
        t = table.setdefault(key, {"id": event[id_field], "name": event["name"]})
        t["begin" if begins else "end"] = event["ts"]
        if "begin" in t and "end" in t:
            if t["end"] < t["begin"]:
                problems.append(f"{label} {t['id']} ({t['name']}): ends before it begins")
            del table[key]

    for event in expand_inline(reader):
        name = event["event"]
        if name in rank:
            # Ids are unique per process: a trace of several processes is keyed by (vpid, id).
            key = (event.get("vpid"), event["id"])
            events = open_.get(key)
            if events is None:
                events = open_[key] = []
                dispatches += 1
            events.append(event)
            if len(events) == 3:
                finish(key, open_.pop(key))
        elif name in ("interval_begin", "interval_end"):
            pair(intervals, "interval", "interval_id", event, name == "interval_begin")
        elif name in ("transition_begin", "transition_end"):
            pair(transitions, "transition", "transition_id", event, name == "transition_begin")
    for key, events in open_.items():
        finish(key, events)
    for label, table in (("transition", transitions), ("interval", intervals)):
        for t in table.values():
            problems.append(f"{label} {t['id']} ({t['name']}): has {'begin' if 'begin' in t else 'end'} only")
    if reader.discarded:
        problems.insert(0, f"{reader.discarded} events were DISCARDED by the tracer, so some dispatches look "
                           f"incomplete: use a bigger channel (lttng enable-channel -u --subbuf-size=8M --num-subbuf=8)")
    return problems, dispatches


# ---------------------------------------------------------------------------------------------------------- analyze

def analyze(reader, top=0, begin=None, end=None, min_duration=0):
    """The analysis report, computed in one pass. `begin`/`end` (seconds from the trace's first event) keep the
    dispatches that began in that window; `min_duration` (ns) keeps those whose service took at least that long."""
    types = {}
    edges = {}
    roots = {}
    longest = []
    order = [0]
    timeline = Timeline()
    state = {"origin": None, "stop": None, "whole": 0, "kept": 0, "max_parallelism": 0}
    transition_stats = {}

    def keep(d):
        origin = state["origin"]
        if begin is not None and d["begin"] < origin + begin * 1e9:
            return False
        if end is not None and d["begin"] > origin + end * 1e9:
            return False
        return d["end"] - d["begin"] >= min_duration

    def on_whole(d):
        state["whole"] += 1
        if d["kind"] == "side_effect":
            timeline.change(d["end"], -1)
        if not keep(d):
            return
        state["kept"] += 1
        state["max_parallelism"] = max(state["max_parallelism"], d.get("parallelism", 0))
        wait, service = d["begin"] - d["enqueue"], d["end"] - d["begin"]
        t = types.get(d["name"])
        if t is None:
            t = types[d["name"]] = {"kind": d["kind"], "count": 0, "outcomes": {}, "wait": Histogram(), "service": Histogram()}
        t["count"] += 1
        t["outcomes"][d["outcome"]] = t["outcomes"].get(d["outcome"], 0) + 1
        t["wait"].add(wait)
        t["service"].add(service)
        chain = d.get("chain", ())
        if not chain or chain[0][1] is None:
            roots[d["name"]] = roots.get(d["name"], 0) + 1
        else:
            edge = (chain[0][1], d["name"])
            edges[edge] = edges.get(edge, 0) + 1
        if top:
            order[0] += 1
            item = (service, -order[0], d)
            if len(longest) < top:
                heapq.heappush(longest, item)
            elif item > longest[0]:
                heapq.heapreplace(longest, item)

    def on_transition(t):
        stats = transition_stats.setdefault(t["name"], {"count": 0, "outcomes": {}, "duration": Histogram()})
        stats["count"] += 1
        stats["outcomes"][str(t["outcome"])] = stats["outcomes"].get(str(t["outcome"]), 0) + 1
        stats["duration"].add(t["end"] - t["begin"])

    interval_stats = {}

    def on_interval(i):
        if not keep(i):  # the same window and duration filter as dispatches
            return
        stats = interval_stats.setdefault(i["name"], {"count": 0, "outcomes": {}, "duration": Histogram(), "parents": {}})
        stats["count"] += 1
        stats["outcomes"][str(i["outcome"])] = stats["outcomes"].get(str(i["outcome"]), 0) + 1
        stats["duration"].add(i["end"] - i["begin"])
        parent = i.get("parent") or "(top level)"
        stats["parents"][parent] = stats["parents"].get(parent, 0) + 1

    over_budget = []
    over_budget_count = [0]

    def on_budget(event):
        over_budget_count[0] += 1
        if len(over_budget) >= 1000:
            return
        d = table.open.get((event.get("vpid"), event["id"]), {})
        over_budget.append({"at_s": round((event["ts"] - state["origin"]) / 1e9, 9), "ts_ns": event["ts"],
                            "id": event["id"], "vpid": event.get("vpid"), "vtid": event.get("vtid"),
                            "name": event["name"], "kind": event["kind"],
                            "budget_ns": event["budget_ns"], "actual_ns": event["actual_ns"],
                            "parents": [{"id": i, "name": n} for i, n in d.get("chain", ())],
                            "queue_wait_ns": d["begin"] - d["enqueue"] if "begin" in d and "enqueue" in d else None})

    table = Dispatches(on_whole)
    paired_transitions = Transitions(on_transition)
    paired_intervals = Intervals(on_interval, table)
    for event in expand_inline(reader):
        if state["origin"] is None:
            state["origin"] = event["ts"]
        state["stop"] = event["ts"]
        name = event["event"]
        if name == "budget_exceeded":
            on_budget(event)
            continue
        if name in STAGES:
            if name == "dispatch_begin" and event["kind"] == "side_effect":
                timeline.change(event["ts"], 1)
            table.add(event)
        elif name in ("interval_begin", "interval_end"):
            paired_intervals.add(event)
        elif name in ("transition_begin", "transition_end"):
            paired_transitions.add(event)
    # Side effects that began but never ended still count as in flight up to the end of the trace.
    origin = state["origin"]

    def relative(ts):
        return round((ts - origin) / 1e9, 9)

    report_types = []
    for name, t in sorted(types.items(), key=lambda kv: (-kv[1]["count"], kv[0])):
        report_types.append({"name": name, "kind": t["kind"], "count": t["count"], "outcomes": t["outcomes"],
                             "queue_wait_ns": t["wait"].summary(), "service_ns": t["service"].summary(),
                             "service_distribution": [{"from_ns": lo, "to_ns": hi, "count": n}
                                                      for lo, hi, n in t["service"].distribution()]})
    report = {
        "dispatches": table.seen, "complete": state["whole"], "discarded_events": reader.discarded,
        "events": reader.count,
        "window": {"begin_s": begin, "end_s": end, "min_duration_ns": min_duration, "dispatches": state["kept"]},
        "types": report_types, "parallelism_timeline": timeline.summary(state["stop"]),
        "max_parallelism": state["max_parallelism"],
        "nesting": {"roots": roots, "children": [{"parent": p, "child": c, "count": n}
                                                for (p, c), n in sorted(edges.items(), key=lambda kv: (-kv[1], kv[0]))]},
    }
    if over_budget_count[0]:
        report["over_budget"] = {"count": over_budget_count[0], "dispatches": over_budget}
    if interval_stats:
        report["intervals"] = [
            {"name": name, "count": i["count"], "outcomes": i["outcomes"], "duration_ns": i["duration"].summary(),
             "parents": i["parents"]}
            for name, i in sorted(interval_stats.items(), key=lambda kv: (-kv[1]["count"], kv[0]))]
    if transition_stats:
        report["transitions"] = [
            {"name": name, "count": s["count"], "outcomes": s["outcomes"],
             "duration_ns": {"p50": s["duration"].percentile(50), "max": s["duration"].max}}
            for name, s in sorted(transition_stats.items(), key=lambda kv: (-kv[1]["count"], kv[0]))]
    if top:
        report["top"] = [{"rank": rank + 1, "service_ns": service, "queue_wait_ns": d["begin"] - d["enqueue"],
                          "begin_s": relative(d["begin"]), "begin_ns": d["begin"], "id": d["id"], "vpid": d["vpid"],
                          "vtid": d.get("vtid"), "name": d["name"], "kind": d["kind"], "outcome": d["outcome"],
                          "queue": d.get("queue"),
                          "parents": [{"id": i, "name": n} for i, n in d.get("chain", ())]}
                         for rank, (service, _, d) in enumerate(sorted(longest, reverse=True))]
    return report


def ns_text(value):
    if value < 1_000:
        return f"{value:.0f} ns"
    if value < 1_000_000:
        return f"{value / 1e3:.2f} µs"
    if value < 1_000_000_000:
        return f"{value / 1e6:.2f} ms"
    return f"{value / 1e9:.2f} s"


def format_analysis(report, histogram=False):
    lines = []
    if report["discarded_events"]:
        lines.append(f"!!! WARNING: {report['discarded_events']} events were DISCARDED by the tracer: figures below "
                     f"are incomplete. Record with a bigger channel (--subbuf-size=8M --num-subbuf=8).")
    lines.append(f"{report['dispatches']} dispatches ({report['complete']} complete), "
                 f"max parallelism {report['max_parallelism']}")
    window = report["window"]
    if window["begin_s"] is not None or window["end_s"] is not None or window["min_duration_ns"]:
        parts = []
        if window["begin_s"] is not None or window["end_s"] is not None:
            until = "the end" if window["end_s"] is None else f"{window['end_s']:g} s"
            parts.append(f"began between {window['begin_s'] or 0:g} s and {until}")
        if window["min_duration_ns"]:
            parts.append(f"took at least {ns_text(window['min_duration_ns'])}")
        lines.append(f"kept {window['dispatches']} dispatches that " + " and ".join(parts))
    lines.append("")
    header = (f"{'type':44} {'kind':13} {'count':>8}  {'wait p50':>9} {'wait p99':>9} {'wait max':>9}  "
              f"{'svc p50':>9} {'svc p99':>9} {'svc max':>9} {'svc sd':>9}")
    lines.append(header)
    lines.append("-" * len(header))
    for t in report["types"]:
        w, s = t["queue_wait_ns"], t["service_ns"]
        lines.append(f"{t['name'][:44]:44} {t['kind']:13} {t['count']:>8}  {ns_text(w['p50']):>9} {ns_text(w['p99']):>9} "
                     f"{ns_text(w['max']):>9}  {ns_text(s['p50']):>9} {ns_text(s['p99']):>9} {ns_text(s['max']):>9} "
                     f"{ns_text(s['stddev']):>9}")
    if histogram:
        for t in report["types"]:
            lines.append("")
            lines.append(f"{t['name']} — service time distribution ({t['count']} dispatches):")
            peak = max((b["count"] for b in t["service_distribution"]), default=0)
            for b in t["service_distribution"]:
                bar = "#" * (int(round(50 * b["count"] / peak)) if peak else 0)
                lines.append(f"  {ns_text(b['from_ns']):>9} – {ns_text(b['to_ns']):>9}  {b['count']:>8}  {bar}")
    lines.append("")
    lines.append("side effects in flight over time:")
    for b in report["parallelism_timeline"]:
        bar = "#" * int(round(b["mean_in_flight"] * 4))
        lines.append(f"  {b['from_ms']:9.3f}–{b['to_ms']:9.3f} ms  mean {b['mean_in_flight']:6.2f}  max {b['max_in_flight']:3}  {bar}")
    lines.append("")
    lines.append("nesting (parent → child: count):")
    for name, count in sorted(report["nesting"]["roots"].items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  (top level) → {name}: {count}")
    for edge in report["nesting"]["children"]:
        lines.append(f"  {edge['parent']} → {edge['child']}: {edge['count']}")
    if report.get("over_budget"):
        over = report["over_budget"]
        lines.append("")
        lines.append(f"!!! {over['count']} dispatches went OVER their latency budget:")
        for item in over["dispatches"][:50]:
            chain = " ← ".join(f"{p['name'] or '?'} #{p['id']}" for p in item["parents"]) or "(top level)"
            lines.append(f"  at {item['at_s']:.6f} s  {item['name']} #{item['id']} ({item['kind']}) took "
                         f"{ns_text(item['actual_ns'])}, budget {ns_text(item['budget_ns'])}, on thread {item['vtid']}; "
                         f"dispatched by {chain}")
    if report.get("intervals"):
        lines.append("")
        lines.append("intervals (context.interval / traceInterval):")
        for i in report["intervals"]:
            d = i["duration_ns"]
            parents = ", ".join(f"{p} {n}" for p, n in sorted(i["parents"].items(), key=lambda kv: -kv[1]))
            lines.append(f"  {i['name'][:44]:44} {i['count']:>6}  p50 {ns_text(d['p50']):>9}  p99 {ns_text(d['p99']):>9}  "
                         f"max {ns_text(d['max']):>9}  in {parents}")
    if report.get("transitions"):
        lines.append("")
        lines.append("navigation transitions (KatanaRouter):")
        for t in report["transitions"]:
            outcomes = ", ".join(f"{k} {v}" for k, v in sorted(t["outcomes"].items()))
            lines.append(f"  {t['name'][:44]:44} {t['count']:>6}  p50 {ns_text(t['duration_ns']['p50']):>9}  "
                         f"max {ns_text(t['duration_ns']['max']):>9}  ({outcomes})")
    if "top" in report:
        lines.append("")
        lines.append(f"the {len(report['top'])} longest dispatches (service time):")
        for item in report["top"]:
            chain = " ← ".join(f"{p['name'] or '?'} #{p['id']}" for p in item["parents"]) or "(top level)"
            lines.append(f"  {item['rank']:>3}. {ns_text(item['service_ns']):>9}  at {item['begin_s']:.6f} s  "
                         f"{item['name']} #{item['id']} ({item['kind']}, {item['outcome']}) on thread {item['vtid']}, "
                         f"waited {ns_text(item['queue_wait_ns'])}; dispatched by {chain}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------------------- export

class JsonArrayWriter:
    """Writes `{"traceEvents": [ … ], …}` one event at a time."""

    def __init__(self, handle):
        self.handle = handle
        self.first = True
        self.counts = {}
        handle.write('{"traceEvents":[')

    def add(self, event):
        self.handle.write(("" if self.first else ",") + json.dumps(event, separators=(",", ":")))
        self.first = False
        self.counts[event["ph"]] = self.counts.get(event["ph"], 0) + 1

    def close(self, extra):
        self.handle.write("]," + json.dumps(extra, separators=(",", ":"))[1:])


ROLES = {"updater_inline": "dispatching thread", "updater_queue": "updater lane", "side_effect_pool": "side-effect pool"}


def export_perfetto(reader, handle):
    """Chrome/Perfetto trace-event JSON, streamed to `handle`. Timestamps in µs from the first event.

    - updaters: `X` slices on the thread that applied them (they never overlap there, so they nest strictly);
    - side effects, which suspend and may move threads: async slices (`b`/`e`), one track group per type;
    - queue waits: async slices from enqueue to begin ("queue wait");
    - every dispatch call: a zero-length `X` slice ("dispatch NAME") where `dispatch` was called, and one flow from
      the parent side effect (an instant on its track) through that call to the dispatch's begin;
    - user intervals (`context.interval`): async slices of category `interval`, one track group per name;
    - navigation transitions: async slices; a "side effects in flight" counter; process names (the main thread's
      `procname` context when recorded) and thread names by role (what the thread ran) and their own name."""
    writer = JsonArrayWriter(handle)
    state = {"origin": None}
    level = {}
    roles = {}
    procnames = {}
    threadnames = {}

    def us(ts):
        return round((ts - state["origin"]) / 1000.0, 3)

    def flow_id(d):
        return f"{d['vpid'] or 0}:{d['id']}"

    def on_whole(d):
        pid, tid = d["vpid"] or 0, d.get("vtid") or 0
        caller = d.get("enqueue_vtid") or tid
        roles.setdefault((pid, tid), {}).setdefault(d.get("queue"), 0)
        roles[(pid, tid)][d.get("queue")] += 1
        args = {"id": d["id"], "parent_id": d.get("parent", 0), "queue": d.get("queue"),
                "outcome": d.get("outcome"), "parallelism": d.get("parallelism"),
                "queue_wait_us": round((d["begin"] - d["enqueue"]) / 1000.0, 3)}
        bind = flow_id(d)
        chain = d.get("chain", ())
        # Where it was dispatched: the parent side effect (an instant on its async track) → the dispatch call.
        if chain:
            parent_id, parent_name = chain[0]
            writer.add({"name": parent_name or "side effect", "cat": "side_effect", "ph": "n", "id": f"{pid}:{parent_id}",
                        "ts": us(d["enqueue"]), "pid": pid, "tid": caller, "bind_id": bind, "flow_out": True,
                        "args": {"dispatched": d["name"], "child_id": d["id"]}})
        call = {"name": f"dispatch {d['name']}", "cat": "dispatch", "ph": "X", "ts": us(d["enqueue"]), "dur": 0,
                "pid": pid, "tid": caller, "bind_id": bind, "flow_out": True,
                "args": {"id": d["id"], "queue": d.get("enqueue_queue"), "queue_depth": d.get("queue_depth")}}
        if chain:
            call["flow_in"] = True
        writer.add(call)
        # The queue wait, then the dispatch itself, which ends the flow.
        writer.add({"name": "queue wait", "cat": "queue_wait", "ph": "b", "id": f"w{pid}:{d['id']}",
                    "ts": us(d["enqueue"]), "pid": pid, "tid": caller,
                    "args": {"dispatchable": d["name"], "queue": d.get("enqueue_queue")}})
        writer.add({"name": "queue wait", "cat": "queue_wait", "ph": "e", "id": f"w{pid}:{d['id']}",
                    "ts": us(d["begin"]), "pid": pid, "tid": caller})
        if d["kind"] == "side_effect":
            writer.add({"name": d["name"], "cat": "side_effect", "ph": "b", "id": f"{pid}:{d['id']}",
                        "ts": us(d["begin"]), "pid": pid, "tid": tid, "bind_id": bind, "flow_in": True, "args": args})
            writer.add({"name": d["name"], "cat": "side_effect", "ph": "e", "id": f"{pid}:{d['id']}",
                        "ts": us(d["end"]), "pid": pid, "tid": d.get("end_vtid") or tid})
        else:
            writer.add({"name": d["name"], "cat": "state_updater", "ph": "X", "ts": us(d["begin"]),
                        "dur": round((d["end"] - d["begin"]) / 1000.0, 3), "pid": pid, "tid": tid,
                        "bind_id": bind, "flow_in": True, "args": args})

    def on_transition(t):
        pid, tid = t["vpid"] or 0, t.get("vtid") or 0
        writer.add({"name": t["name"], "cat": "navigation", "ph": "b", "id": f"t{pid}:{t['id']}", "ts": us(t["begin"]),
                    "pid": pid, "tid": tid, "args": {"transition_id": t["id"], "outcome": t.get("outcome")}})
        writer.add({"name": t["name"], "cat": "navigation", "ph": "e", "id": f"t{pid}:{t['id']}", "ts": us(t["end"]),
                    "pid": pid, "tid": t.get("end_vtid") or tid})

    def on_interval(i):
        pid = i["vpid"] or 0
        writer.add({"name": i["name"], "cat": "interval", "ph": "b", "id": f"i{pid}:{i['id']}", "ts": us(i["begin"]),
                    "pid": pid, "tid": i.get("vtid") or 0,
                    "args": {"interval_id": i["id"], "parent_id": i["parent_id"], "parent": i.get("parent"),
                             "outcome": i["outcome"]}})
        writer.add({"name": i["name"], "cat": "interval", "ph": "e", "id": f"i{pid}:{i['id']}", "ts": us(i["end"]),
                    "pid": pid, "tid": i.get("end_vtid") or i.get("vtid") or 0})

    table = Dispatches(on_whole)
    paired_transitions = Transitions(on_transition)
    paired_intervals = Intervals(on_interval, table)
    for event in expand_inline(reader):
        if state["origin"] is None:
            state["origin"] = event["ts"]
        pid = event.get("vpid") or 0
        if "procname" in event:
            # procname is the thread's name: the process is named by its main thread's (vtid == vpid).
            tid = event.get("vtid") or 0
            if tid == pid and pid not in procnames:
                procnames[pid] = event["procname"]
            threadnames.setdefault((pid, tid), event["procname"])
        name = event["event"]
        if name == "budget_exceeded":
            writer.add({"name": f"over budget: {event['name']}", "cat": "budget", "ph": "i", "s": "p", "ts": us(event["ts"]),
                        "pid": pid, "tid": event.get("vtid") or 0,
                        "args": {"id": event["id"], "budget_ns": event["budget_ns"], "actual_ns": event["actual_ns"]}})
            continue
        if name in STAGES:
            if event["kind"] == "side_effect" and name != "dispatch_enqueue":
                level[pid] = level.get(pid, 0) + (1 if name == "dispatch_begin" else -1)
                writer.add({"name": "side effects in flight", "ph": "C", "ts": us(event["ts"]), "pid": pid,
                            "args": {"in_flight": level[pid]}})
            table.add(event)
        elif name in ("interval_begin", "interval_end"):
            paired_intervals.add(event)
        elif name in ("transition_begin", "transition_end"):
            paired_transitions.add(event)
        else:
            roles.setdefault((pid, event.get("vtid") or 0), {})
    pids = sorted({pid for pid, _ in roles} | set(level) | set(procnames))
    for pid in pids:
        writer.add({"name": "process_name", "ph": "M", "pid": pid,
                    "args": {"name": f"{procnames[pid]} (pid {pid})" if pid in procnames else f"katana pid {pid}"}})
    for (pid, tid), seen in sorted(roles.items()):
        ran = [ROLES.get(queue, queue) for queue, _ in sorted(seen.items(), key=lambda kv: -kv[1]) if queue]
        label = " + ".join(ran) if ran else "thread"
        own = f" ({threadnames[(pid, tid)]})" if (pid, tid) in threadnames else ""
        writer.add({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"{label} {tid}{own}"}})
    incomplete = len(table.incomplete())
    writer.close({"displayTimeUnit": "ns", "otherData": {"source": "katana_trace.py export",
                                                         "dispatches": table.seen - incomplete,
                                                         "incomplete_dispatches": incomplete}})
    return writer.counts, table.seen - incomplete


# -------------------------------------------------------------------------------------------- commands and workers

def output_target(path):
    """Where the export goes: a symbolic link is followed to its target; a directory or anything else that is not a
    regular file is refused."""
    real = os.path.realpath(path)
    if os.path.isdir(real):
        raise TraceError(f"cannot write {path}: it is a directory (give a file name, e.g. {os.path.join(path, 'trace.json')})")
    if os.path.exists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        raise TraceError(f"cannot write {path}: it exists and is not a regular file")
    directory = os.path.dirname(real)
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise TraceError(f"cannot write {path}: {directory} is not a writable directory")
    return real


def open_output(path):
    """A temporary file beside the target, which replaces it only when the export succeeded."""
    real = output_target(path)
    descriptor, temporary = tempfile.mkstemp(prefix=".katana-export-", dir=os.path.dirname(real))
    return real, temporary, os.fdopen(descriptor, "w")


# ---------------------------------------------------------------------------------------------------- native reader

SCANNER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "katana_scan.c")
# What katana_scan.c includes: the package's CTF reader (its hash is part of the cached build's name too).
SCANNER_LIBRARY = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources", "CKatanaCTF", path)
                   for path in ("katana_ctf.c", os.path.join("include", "katana_ctf.h"))]
SCANNER_FLAGS = ["-O2", "-std=gnu11", "-ffp-contract=off"]


class NativeUnavailable(Exception):
    """The native reader cannot be built, or declined this trace (the reason is the message)."""


def scanner_cache():
    base = os.environ.get("KATANA_TRACE_CACHE")
    if not base:
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(home, "katana-trace")
    try:
        os.makedirs(base, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    fallback = os.path.join(tempfile.gettempdir(), f"katana-trace-{os.getuid()}")
    os.makedirs(fallback, mode=0o700, exist_ok=True)
    return fallback


def native_scanner():
    """katana_scan, built from katana_scan.c beside this file with the machine's C compiler ($CC, else cc, gcc or the
    Swift toolchain's clang) the first time it is needed, and cached under ~/.cache/katana-trace by the source's hash (a changed source builds anew)."""
    try:
        source = b""
        for path in [SCANNER_SOURCE] + SCANNER_LIBRARY:
            with open(path, "rb") as handle:
                source += handle.read()
    except OSError as error:
        raise NativeUnavailable(f"{error.filename}: {error.strerror}") from None
    compiler = os.environ.get("CC") or next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), "cc")
    digest = hashlib.sha256(source + " ".join([compiler] + SCANNER_FLAGS).encode()).hexdigest()[:16]
    directory = scanner_cache()
    binary = os.path.join(directory, f"katana_scan-{digest}")
    if os.access(binary, os.X_OK):
        return binary
    temporary = f"{binary}.{os.getpid()}.tmp"
    try:
        built = subprocess.run([compiler] + SCANNER_FLAGS + ["-o", temporary, SCANNER_SOURCE, "-lm"],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    except FileNotFoundError:
        raise NativeUnavailable("no C compiler to build katana_scan.c (apt-get install gcc, or set CC)") from None
    except subprocess.TimeoutExpired:
        raise NativeUnavailable("building katana_scan.c took over 300 s") from None
    if built.returncode != 0:
        first = (built.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
        raise NativeUnavailable(f"katana_scan.c did not build with {compiler}: {first[:200]}")
    os.replace(temporary, binary)  # atomic: a concurrent build of the same source writes the same file
    return binary


def native_analyze(args, progress_fd=None):
    """The analysis report from katana_scan, which decodes the trace itself (several million events/s) instead of
    reading babeltrace2's text output. Raises NativeUnavailable when it cannot build or declines the trace."""
    command = [native_scanner(), "analyze", args.trace]
    if args.top:
        command += ["--top", str(args.top)]
    if args.begin is not None:
        command += ["--begin", repr(args.begin)]
    if args.end is not None:
        command += ["--end", repr(args.end)]
    if args.min_duration:
        command += ["--min-duration", str(args.min_duration)]
    fds = ()
    if progress_fd is not None:
        command += ["--progress-fd", str(progress_fd)]
        fds = (progress_fd,)
    done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          pass_fds=fds)
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        if done.returncode < 0:
            reason = f"katana_scan ended with signal {-done.returncode}"
        else:
            reason = lines[-1].split(": ", 2)[-1] if lines else f"katana_scan exited with status {done.returncode}"
        raise NativeUnavailable(reason)
    return json.loads(done.stdout)


def run_command(args, progress, progress_fd=None):
    reader = Reader(args.trace, progress)
    if args.command == "dump":
        out = sys.stdout
        for event in reader:  # as recorded: an inline updater is one updater_inline event
            out.write(json.dumps(event, sort_keys=True) + "\n")
        out.write(json.dumps({"event": "_summary", "discarded": reader.discarded, "count": reader.count}) + "\n")
        return 0
    if args.command == "analyze":
        report, declined = None, None
        if args.reader != "babeltrace2":
            try:
                report = native_analyze(args, progress_fd)
            except NativeUnavailable as error:
                if args.reader == "native":
                    raise TraceError(f"{args.trace}: the native reader cannot read it: {error}") from None
                declined = str(error)
        if report is None:
            report = analyze(reader, top=args.top or 0, begin=args.begin, end=args.end, min_duration=args.min_duration)
            report = dict({"reader": "babeltrace2"}, **report)
            if declined:
                # Only once babeltrace2 has read the trace: a damaged one ends with babeltrace2's one line instead.
                report["native_reader_declined"] = declined
                sys.stderr.write(f"{PROG}: note: read with babeltrace2 (slower); the native reader: {declined}\n")
        print(json.dumps(report, indent=2) if args.json else format_analysis(report, histogram=args.histogram))
        if report["discarded_events"]:
            sys.stderr.write(f"{PROG}: WARNING: {report['discarded_events']} events were DISCARDED by the tracer\n")
        return 0
    if args.command == "export":
        target, temporary, handle = open_output(args.output)
        try:
            with handle:
                counts, dispatches = export_perfetto(reader, handle)
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        print(json.dumps({"output": args.output, "dispatches": dispatches, "events_by_phase": counts}, sort_keys=True))
        return 0
    if args.command == "check":
        problems, dispatches = check(reader)
        if reader.discarded:
            sys.stderr.write(f"{PROG}: WARNING: {reader.discarded} events were DISCARDED by the tracer\n")
        print(json.dumps({"dispatches": dispatches, "events": reader.count, "discarded": reader.discarded,
                          "problems": problems[:20], "problem_count": len(problems)}, indent=2))
        return 1 if problems else 0
    return 2


def worker(args):
    """The child: runs the command, and writes a byte to the progress pipe every 20,000 events. (Its babeltrace2
    can sit in a long metadata parse before the first event: the supervisor's stall timeout bounds that.)"""
    fd = int(os.environ["KATANA_TRACE_PROGRESS_FD"])

    def progress():
        try:
            os.write(fd, b".")
        except OSError:
            pass

    progress()
    try:
        return run_command(args, progress, fd)
    except TraceError as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 2
    except KeyError as error:
        # babeltrace2 read the trace, but a katana event lacks a field the command needs.
        sys.stderr.write(f"{PROG}: {args.trace}: a katana event has no field '{error.args[0] if error.args else '?'}' "
                         f"(damaged metadata, or events of another version of the provider)\n")
        return 2
    except Exception as error:  # never a traceback, never a silent status: one line and exit 2
        sys.stderr.write(f"{PROG}: {args.trace}: cannot read this trace ({type(error).__name__}: {str(error)[:200]})\n")
        return 2


def check_trace_path(path):
    if not os.path.exists(path):
        raise TraceError(f"{path}: no such file or directory")
    mode = os.stat(path).st_mode
    if not stat.S_ISDIR(mode):
        raise TraceError(f"{path}: not a directory (give the trace directory lttng printed)")
    if not os.access(path, os.R_OK | os.X_OK):
        raise TraceError(f"{path}: not readable")
    # A CTF trace (or a folder of them) has a metadata file per trace: say plainly when there is none, or when one
    # is empty or not a file (babeltrace2 would block on a FIFO, and report an empty file only obscurely).
    found = False
    for directory, subdirectories, files in os.walk(path):
        subdirectories[:] = subdirectories[:64]
        if "metadata" in files:
            found = True
            metadata = os.path.join(directory, "metadata")
            mode = os.stat(metadata).st_mode
            if not stat.S_ISREG(mode):
                raise TraceError(f"{path}: not a readable CTF trace ({metadata} is not a regular file)")
            if os.path.getsize(metadata) == 0:
                raise TraceError(f"{path}: not a readable CTF trace ({metadata} is empty)")
    if not found:
        raise TraceError(f"{path}: not a CTF trace (no metadata file in it; give the trace directory lttng printed)")


def supervise(argv, args):
    """Runs the command in a child process and watches it: babeltrace2 aborting or spinning on a damaged trace ends
    the command with one line and exit status 2, never with a hang, a core dump or a page of logs."""
    read_end, write_end = os.pipe()
    environment = dict(os.environ, KATANA_TRACE_PROGRESS_FD=str(write_end), LIBBABELTRACE2_INIT_LOG_LEVEL="NONE",
                       BABELTRACE_PYTHON_BT2_LOG_LEVEL="NONE")
    # A process group of its own, so stopping it also stops the babeltrace2 it runs.
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--_worker"] + argv,
                             stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(write_end,), env=environment,
                             start_new_session=True)

    def stop():
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    os.close(write_end)
    errors = bytearray()
    last_progress = time.monotonic()
    streams = [read_end, child.stderr.fileno()]
    stalled = False
    interrupted = False
    try:
        while streams:
            ready, _, _ = select.select(streams, [], [], 0.5)
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    streams.remove(fd)
                elif fd == read_end:
                    last_progress = time.monotonic()
                else:
                    errors.extend(chunk)
                    del errors[:-65536]
            if read_end in streams and time.monotonic() - last_progress > args.stall_timeout:
                stalled = True
                stop()
                break
    except KeyboardInterrupt:
        interrupted = True
        stop()
    status = child.wait()
    stop()  # whatever the worker left running
    os.close(read_end)
    own = [line for line in errors.decode(errors="replace").splitlines() if line.startswith(f"{PROG}:")]
    if interrupted:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    if stalled:
        sys.stderr.write(f"{PROG}: {args.trace}: reading made no progress for {args.stall_timeout:g} s and was "
                         f"stopped: babeltrace2 is stuck on it (truncated metadata, or a FIFO instead of a file?)\n")
        return 2
    for line in own:
        sys.stderr.write(line + "\n")
    if status == -signal.SIGPIPE:
        return 128 + signal.SIGPIPE  # the reader of our output went away (… | head): not the trace's fault
    if status < 0:
        reason = signal.Signals(-status).name if -status in signal.Signals._value2member_map_ else f"signal {-status}"
        sys.stderr.write(f"{PROG}: {args.trace}: not a readable CTF trace (babeltrace2 ended with {reason}: "
                         f"damaged metadata or data streams)\n")
        return 2
    if (status not in (0, 1, 2) or (status == 1 and args.command != "check")) and not own:
        sys.stderr.write(f"{PROG}: {args.trace}: reading failed (exit status {status})\n")
        return 2
    return status


def build_parser():
    parser = argparse.ArgumentParser(prog="katana_trace.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stall-timeout", type=parse_seconds, default=30.0,
                        help="stop a read that makes no progress for this many seconds (default 30)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, summary in (("check", "integrity: every dispatch enqueued, begun and ended, nothing discarded"),
                          ("dump", "the katana events as JSON lines")):
        p = sub.add_parser(name, help=summary)
        p.add_argument("trace")
    p = sub.add_parser("analyze", help="per-type latencies, parallelism, nesting, the longest dispatches")
    p.add_argument("trace")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--top", type=parse_top, metavar="N", help="list the N longest dispatches (service time) with "
                   "timestamp, id, type, thread and parent chain")
    p.add_argument("--begin", type=parse_seconds, metavar="S", help="keep dispatches that began at least S seconds "
                   "after the trace's first event")
    p.add_argument("--end", type=parse_seconds, metavar="S", help="keep dispatches that began at most S seconds after it")
    p.add_argument("--min-duration", type=parse_duration, default=0, metavar="D",
                   help="keep dispatches whose service took at least D (e.g. 500us, 2ms)")
    p.add_argument("--histogram", action="store_true", help="print each type's service-time distribution")
    p.add_argument("--reader", choices=("auto", "native", "babeltrace2"), default="auto",
                   help="how the trace is decoded: native (katana_scan.c, built on first use; several million "
                        "events/s), babeltrace2 (the reference, ~80,000 events/s), or auto (default: native, and "
                        "babeltrace2 when the native reader declines the trace)")
    p = sub.add_parser("export", help="Chrome/Perfetto trace-event JSON (open it at ui.perfetto.dev)")
    p.add_argument("trace")
    p.add_argument("-o", "--output", required=True, help="where to write the trace-event JSON")
    return parser


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = list(sys.argv[1:] if argv is None else argv)
    is_worker = argv[:1] == ["--_worker"]
    if is_worker:
        argv = argv[1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "analyze" and args.begin is not None and args.end is not None and args.end < args.begin:
        parser.error(f"--end ({args.end:g}) is before --begin ({args.begin:g})")
    if is_worker:
        return worker(args)
    try:
        check_trace_path(args.trace)
        if args.command == "export":
            output_target(args.output)
    except TraceError as error:
        sys.stderr.write(f"{PROG}: {error}\n")
        return 2
    return supervise(argv, args)


if __name__ == "__main__":
    sys.exit(main())
