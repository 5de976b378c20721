#!/usr/bin/env python3
"""Checks a `katana-trace export` protobuf file with Perfetto's own schema (perfetto_trace_pb2, from the `perfetto`
PyPI package, installed with protobuf into a folder of this checkout's .build if missing): Perfetto's trace processor
downloads its binary at run time, so the file is checked here without it.

    check_perfetto.py EXPORT.pftrace DUMP.jsonl

DUMP.jsonl is `katana-trace dump` of the same recording: the dispatches the export must show. What must hold:
  - each sequence's first packet clears incremental state, and every packet after it that uses interned data says
    it needs that state;
  - every interned id (event names, categories, argument names, string values) is defined earlier in its sequence;
  - every track an event is on was described earlier;
  - slices nest per track: each end closes the innermost open slice of its track, never one of another track;
  - every flow has both ends: started (flow_ids) and terminated (terminating_flow_ids) exactly once;
  - every dispatch that begins in the dump (dispatch_begin, or updater_inline) appears exactly once as a slice whose
    `id` argument is its id, with its type as the slice's name; no other does, but for those an exported window's
    opening cut (`cut`: "began before the window") and those dispatched in a window that began between two (the
    dump of the same windows has no begin of theirs), each at most once.
Prints a JSON summary; exits 1 listing what is wrong, 2 when it cannot run."""
import collections
import importlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEPS = ROOT / ".build" / "perfetto-python"


def load_schema():
    sys.path.insert(0, str(DEPS))
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
        return perfetto_trace_pb2
    except ImportError:
        pass
    print(f"check_perfetto: installing perfetto and protobuf into {DEPS}", file=sys.stderr)
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "--target", str(DEPS), "perfetto", "protobuf"], capture_output=True, text=True)
    if install.returncode != 0:
        sys.exit(f"check_perfetto: could not install perfetto from PyPI (its schema decodes the export):\n{install.stderr}")
    sys.path_importer_cache.pop(str(DEPS), None)
    importlib.invalidate_caches()
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    return perfetto_trace_pb2


def dispatches_in(dump_path):
    """(vpid, id) → type name of every dispatch that begins in the dump; and the (vpid, id) of those dispatched in it."""
    begun, dispatched = {}, set()
    with open(dump_path) as handle:
        for line in handle:
            event = json.loads(line)
            if event["event"] in ("dispatch_begin", "updater_inline"):
                begun[(event.get("vpid", 0), event["id"])] = event["name"]
            if event["event"] == "dispatch_enqueue":
                dispatched.add((event.get("vpid", 0), event["id"]))
    return begun, dispatched


def check(pb, export_path, dump_path):
    trace = pb.Trace()
    with open(export_path, "rb") as handle:
        trace.ParseFromString(handle.read())
    problems = []

    def problem(text):
        if len(problems) < 50:
            problems.append(text)

    CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    BEGIN, END, INSTANT, COUNTER = (pb.TrackEvent.TYPE_SLICE_BEGIN, pb.TrackEvent.TYPE_SLICE_END,
                                    pb.TrackEvent.TYPE_INSTANT, pb.TrackEvent.TYPE_COUNTER)
    seen_sequences = set()
    interned = collections.defaultdict(lambda: {"names": {}, "categories": {}, "arguments": {}, "strings": {}})
    tracks = {}
    track_pids = {}
    open_slices = collections.defaultdict(list)
    slices = 0
    flows_started = collections.Counter()
    flows_ended = collections.Counter()
    shown = collections.Counter()
    shown_name = {}
    cut_before = set()  # dispatches a window's opening cut: shown from its edge, begun before it (not in its dump)
    counts = collections.Counter()

    for index, packet in enumerate(trace.packet):
        sequence = packet.trusted_packet_sequence_id
        if sequence not in seen_sequences:
            seen_sequences.add(sequence)
            if not packet.sequence_flags & CLEARED:
                problem(f"packet {index}: first of sequence {sequence} does not clear incremental state")
        if index == 0:
            snapshot = packet.clock_snapshot if packet.HasField("clock_snapshot") else None
            if snapshot is None or snapshot.primary_trace_clock != 3 or {c.clock_id for c in snapshot.clocks} != {3, 64}:
                problem("packet 0: no clock snapshot tying the sequence's clock (64) to CLOCK_MONOTONIC (3), the trace's")
            if packet.trace_packet_defaults.timestamp_clock_id != 64:
                problem("packet 0: the sequence's timestamps are not said to be on its clock (64)")
        state = interned[sequence]
        if packet.HasField("interned_data"):
            data = packet.interned_data
            for table, entries in (("names", data.event_names), ("categories", data.event_categories),
                                   ("arguments", data.debug_annotation_names)):
                for entry in entries:
                    state[table][entry.iid] = entry.name
            for entry in data.debug_annotation_string_values:
                state["strings"][entry.iid] = entry.str.decode()
        if packet.HasField("track_descriptor"):
            descriptor = packet.track_descriptor
            if descriptor.HasField("parent_uuid") and descriptor.parent_uuid not in tracks:
                problem(f"packet {index}: track {descriptor.uuid}'s parent {descriptor.parent_uuid} is not described")
            tracks[descriptor.uuid] = descriptor
            if descriptor.HasField("process"):
                track_pids[descriptor.uuid] = descriptor.process.pid
            elif descriptor.HasField("thread"):
                track_pids[descriptor.uuid] = descriptor.thread.pid
            else:
                track_pids[descriptor.uuid] = track_pids.get(descriptor.parent_uuid, 0)
            counts["track_descriptors"] += 1
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        counts["track_events"] += 1
        if not packet.sequence_flags & (NEEDS | CLEARED):
            problem(f"packet {index}: a track event that does not say it needs incremental state")
        if event.track_uuid not in tracks:
            problem(f"packet {index}: track {event.track_uuid} used before it is described")
        name = None
        if event.HasField("name_iid"):
            name = state["names"].get(event.name_iid)
            if name is None:
                problem(f"packet {index}: event name iid {event.name_iid} not defined earlier in its sequence")
        for iid in event.category_iids:
            if iid not in state["categories"]:
                problem(f"packet {index}: category iid {iid} not defined earlier in its sequence")
        arguments = {}
        for annotation in event.debug_annotations:
            key = state["arguments"].get(annotation.name_iid)
            if key is None:
                problem(f"packet {index}: argument name iid {annotation.name_iid} not defined earlier")
                continue
            if annotation.HasField("string_value_iid"):
                value = state["strings"].get(annotation.string_value_iid)
                if value is None:
                    problem(f"packet {index}: string value iid {annotation.string_value_iid} not defined earlier")
                arguments[key] = value
            elif annotation.HasField("uint_value"):
                arguments[key] = annotation.uint_value
            elif annotation.HasField("int_value"):
                arguments[key] = annotation.int_value
        for flow in event.flow_ids:
            flows_started[flow] += 1
        for flow in event.terminating_flow_ids:
            flows_ended[flow] += 1
        if event.type == BEGIN:
            slices += 1
            open_slices[event.track_uuid].append((packet.timestamp, index))
            categories = {state["categories"].get(iid) for iid in event.category_iids}
            if categories & {"state_updater", "side_effect"} and "id" in arguments:
                key = (track_pids.get(event.track_uuid, 0), arguments["id"])
                shown[key] += 1
                shown_name[key] = name
                if "cut" in arguments and arguments["cut"] != "ended after the window":
                    cut_before.add(key)
        elif event.type == END:
            stack = open_slices[event.track_uuid]
            if not stack:
                problem(f"packet {index}: a slice end on track {event.track_uuid} with no slice open there")
            else:
                begun, _ = stack.pop()
                if packet.timestamp < begun:
                    problem(f"packet {index}: a slice on track {event.track_uuid} ends before it begins")
        counts[{BEGIN: "slice_begins", END: "slice_ends", INSTANT: "instants", COUNTER: "counter_values"}
               .get(event.type, "other_events")] += 1

    for flow in set(flows_started) | set(flows_ended):
        if flows_ended[flow] != 1 or flows_started[flow] < 1:
            problem(f"flow {flow}: started {flows_started[flow]} times, terminated {flows_ended[flow]} times")
    expected, dispatched = dispatches_in(dump_path)
    for key, type_name in expected.items():
        if shown[key] != 1:
            problem(f"dispatch {key[1]} (pid {key[0]}, {type_name}): shown {shown[key]} times, expected once")
        elif shown_name[key] != type_name:
            problem(f"dispatch {key[1]}: slice named {shown_name[key]!r}, expected {type_name!r}")
    for key in set(shown) - set(expected):
        if key not in cut_before and key not in dispatched:
            problem(f"dispatch {key[1]} (pid {key[0]}): shown but never begins in the dump")
        elif shown[key] != 1:
            problem(f"dispatch {key[1]} (pid {key[0]}): shown {shown[key]} times, expected once")
    still_open = sum(len(stack) for stack in open_slices.values())
    summary = dict(counts, packets=len(trace.packet), sequences=len(seen_sequences), tracks=len(tracks),
                   slices=slices, slices_left_open=still_open, flows=len(set(flows_started) | set(flows_ended)),
                   dispatches=len(expected), dispatches_shown=sum(shown.values()), problems=problems)
    return summary


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_perfetto.py EXPORT.pftrace DUMP.jsonl")
    summary = check(load_schema(), sys.argv[1], sys.argv[2])
    print(json.dumps(summary, indent=2, sort_keys=True))
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
