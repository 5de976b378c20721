#!/usr/bin/env python3
"""End to end: the traced HTTP service exports its spans with swift-otel's OTLP/HTTP exporter to a receiver on
loopback; the exported requests are decoded with the OpenTelemetry protobuf definitions (opentelemetry-proto,
installed from PyPI into a folder of this checkout's .build if missing) and the span tree is checked.

    check_otlp.py PATH/TO/traced-http-service [--json]

What must hold: one trace, the caller's (a W3C traceparent sent with the request), holding
  GET /orders/{id}  (server span, child of the caller's span)
    katana.side_effect   katana.type = …PlaceOrder, queue side_effect_pool, outcome ok
      katana.updater     …Reserve   outcome ok
      katana.interval    payment
      katana.updater     …Confirm   outcome ok
and a refused order (out of stock is not reachable here) is not needed: errors are covered by the Swift tests.
Prints the tree (or JSON with --json); exits 1 with what is wrong, 2 when it cannot run."""
import importlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPS = ROOT / ".build" / "otlp-python"


def load_proto():
    sys.path.insert(0, str(DEPS))
    try:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        return trace_service_pb2
    except ImportError:
        pass
    print(f"check_otlp: installing opentelemetry-proto into {DEPS}", file=sys.stderr)
    install = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              "--target", str(DEPS), "opentelemetry-proto"], capture_output=True, text=True)
    if install.returncode != 0:
        sys.exit(f"check_otlp: could not install opentelemetry-proto from PyPI (needed to decode OTLP):\n{install.stderr}")
    # The folder did not exist when it was put on the path: forget that.
    sys.path_importer_cache.pop(str(DEPS), None)
    importlib.invalidate_caches()
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    return trace_service_pb2


class Receiver(BaseHTTPRequestHandler):
    bodies = []
    lock = threading.Lock()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with Receiver.lock:
            Receiver.bodies.append((self.path, self.headers.get("content-type", ""), body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def attribute(span, key):
    for kv in span.attributes:
        if kv.key == key:
            value = kv.value
            return value.string_value if value.HasField("string_value") else value.int_value
    return None


def main():
    args = [a for a in sys.argv[1:] if a != "--json"]
    if len(args) != 1 or not Path(args[0]).is_file():
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    proto = load_proto()

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = dict(os.environ, OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.server_port}",
               OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", OTEL_TRACES_EXPORTER="otlp")
    service = subprocess.Popen([args[0], "--port", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not line.startswith("listening on "):
            line = service.stdout.readline()
            if not line and service.poll() is not None:
                sys.exit(f"check_otlp: the service exited ({service.returncode}) before listening:\n{service.stderr.read()}")
        port = int(line.split()[-1])

        trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/orders/42",
                                         headers={"traceparent": f"00-{trace_id}-{caller_span}-01"})
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = response.read().decode()
        if response.status != 200 or "order 42 confirmed" not in answer:
            sys.exit(f"check_otlp: unexpected answer {response.status}: {answer!r}")
    finally:
        # SIGTERM: the service stops serving and its exporter sends what is left before it exits.
        service.send_signal(signal.SIGTERM)
        try:
            service.wait(timeout=60)
        except subprocess.TimeoutExpired:
            service.kill()
            sys.exit("check_otlp: the service did not exit within 60 s of SIGTERM")
        receiver.shutdown()
    if service.returncode != 0:
        sys.exit(f"check_otlp: the service exited with {service.returncode} after SIGTERM:\n{service.stderr.read()}")

    spans = []
    with Receiver.lock:
        received = list(Receiver.bodies)
    for path, content_type, body in received:
        if path != "/v1/traces":
            sys.exit(f"check_otlp: an export went to {path}, not /v1/traces")
        export = proto.ExportTraceServiceRequest()
        export.ParseFromString(body)
        for resource_spans in export.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                spans.extend(scope_spans.spans)
    if not spans:
        sys.exit("check_otlp: the receiver got no spans")

    by_id = {span.span_id.hex(): span for span in spans}
    problems = []
    if {span.trace_id.hex() for span in spans} != {trace_id}:
        problems.append(f"trace ids {sorted({s.trace_id.hex() for s in spans})}, expected only the caller's {trace_id}")
    servers = [s for s in spans if s.name == "GET /orders/{id}"]
    if len(servers) != 1:
        problems.append(f"{len(servers)} server spans")
    server = servers[0] if servers else None
    if server and server.parent_span_id.hex() != caller_span:
        problems.append("the server span is not the caller's span's child")
    if server and server.kind != 2:  # SPAN_KIND_SERVER
        problems.append(f"the server span's kind is {server.kind}")
    effects = [s for s in spans if s.name == "katana.side_effect"]
    effect = effects[0] if len(effects) == 1 else None
    if effect is None:
        problems.append(f"{len(effects)} side effect spans")
    else:
        if server and effect.parent_span_id != server.span_id:
            problems.append("the side effect is not the request's child")
        if not str(attribute(effect, "katana.type")).endswith("PlaceOrder"):
            problems.append(f"side effect katana.type {attribute(effect, 'katana.type')!r}")
        for key, expected in [("katana.queue", "side_effect_pool"), ("katana.outcome", "ok")]:
            if attribute(effect, key) != expected:
                problems.append(f"side effect {key} = {attribute(effect, key)!r}, expected {expected!r}")
        if attribute(effect, "katana.parallelism") is None:
            problems.append("side effect without katana.parallelism")
    children = [s for s in spans if effect is not None and s.parent_span_id == effect.span_id]
    updaters = sorted((s for s in children if s.name == "katana.updater"), key=lambda s: s.start_time_unix_nano)
    types = [str(attribute(s, "katana.type")).rsplit(".", 1)[-1] for s in updaters]
    if types != ["Reserve", "Confirm"]:
        problems.append(f"the side effect's updaters are {types}, expected Reserve then Confirm")
    for updater in updaters:
        for key in ("katana.queue", "katana.queue_depth", "katana.outcome"):
            if attribute(updater, key) is None:
                problems.append(f"updater {attribute(updater, 'katana.type')} without {key}")
        if attribute(updater, "katana.outcome") != "ok":
            problems.append(f"updater outcome {attribute(updater, 'katana.outcome')!r}")
        if "begin" not in [event.name for event in updater.events]:
            problems.append("an updater span without its begin event")
    intervals = [s for s in children if s.name == "katana.interval" and attribute(s, "katana.type") == "payment"]
    if len(intervals) != 1:
        problems.append(f"{len(intervals)} payment interval spans under the side effect")

    def tree(span, depth=0):
        attrs = {kv.key: attribute(span, kv.key) for kv in span.attributes if kv.key.startswith("katana.")}
        out = [{"name": span.name, "depth": depth, "attributes": attrs,
                "events": [e.name for e in span.events], "duration_us": (span.end_time_unix_nano - span.start_time_unix_nano) // 1000}]
        for child in sorted((s for s in spans if s.parent_span_id == span.span_id), key=lambda s: s.start_time_unix_nano):
            out.extend(tree(child, depth + 1))
        return out

    rows = tree(server) if server else []
    if "--json" in sys.argv:
        print(json.dumps({"trace_id": trace_id, "exports": len(received), "spans": len(spans), "tree": rows}))
    else:
        print(f"trace {trace_id}: {len(spans)} spans in {len(received)} OTLP/HTTP exports")
        for row in rows:
            print(f"{'  ' * row['depth']}{row['name']}  {row['attributes']}  events={row['events']}  {row['duration_us']} µs")
    if problems:
        sys.exit("check_otlp: " + "; ".join(problems))


if __name__ == "__main__":
    main()
