#!/usr/bin/env python3
"""Runs order-service-metrics under a real Prometheus and checks what Prometheus answers against what the service
itself measured (issue #48, point 5).

  check_prometheus.py SERVICE_BINARY [--orders N] [--concurrency N]

Starts the service on a free loopback port with --report, writes a Prometheus configuration that scrapes it every
second, starts `prometheus` on another loopback port with its storage in a temporary folder, waits for the orders to
be done and for a scrape that saw all of them, then asks Prometheus's HTTP API:

  - sum by (type) (katana_dispatches_total) equals, for every type, the dispatches the service saw end, exactly;
  - histogram_quantile(0.99, sum by (le, type) (katana_dispatch_service_seconds_bucket)) lies within one bucket of
    the p99 of the service's own HdrHistogram of the same dispatches' service times.

Stops both processes (by their PIDs) however it ends. Exit 0 when every check passes, 1 when one fails, 2 when it
cannot run (no prometheus: install Debian's `prometheus`, as `make test-metrics` does).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

def bucket(nanoseconds: float, bounds: list) -> int:
    """The index of the bucket a value falls in (le semantics); len(bounds) for +Inf."""
    for index, bound in enumerate(bounds):
        if nanoseconds <= bound:
            return index
    return len(bounds)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def query(prometheus: str, expression: str) -> list:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"query {expression!r}: {body}")
    return body["data"]["result"]


def stop(process):
    if process and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("service")
    parser.add_argument("--orders", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    prometheus_binary = shutil.which("prometheus")
    if prometheus_binary is None:
        print("check_prometheus: prometheus is not installed (apt-get install prometheus; make test-metrics does)", file=sys.stderr)
        return 2

    work = tempfile.mkdtemp(prefix="katana-prometheus-")
    service = prometheus = None
    try:
        report = os.path.join(work, "report.json")
        service_port = free_port()
        service = subprocess.Popen(
            [args.service, "--port", str(service_port), "--orders", str(args.orders), "--concurrency", str(args.concurrency),
             "--report", report], stdout=subprocess.PIPE, text=True)
        line = service.stdout.readline()
        if not line.startswith("listening on "):
            print(f"check_prometheus: the service did not start: {line!r}", file=sys.stderr)
            return 2
        target = line.split("//", 1)[1].strip()

        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as file:
            file.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                       "scrape_configs:\n  - job_name: order-service\n    static_configs:\n"
                       f"      - targets: ['{target}']\n")
        prometheus_port = free_port()
        prometheus = subprocess.Popen(
            [prometheus_binary, f"--config.file={config}", f"--storage.tsdb.path={os.path.join(work, 'data')}",
             f"--web.listen-address=127.0.0.1:{prometheus_port}"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w"))
        api = f"http://127.0.0.1:{prometheus_port}"

        deadline = time.monotonic() + 300
        for line in service.stdout:
            print(f"  service: {line.rstrip()}")
            if line.startswith("orders done"):
                break
        expected = json.load(open(report))
        total = sum(entry["ended"] for entry in expected.values())
        print(f"check_prometheus: the service dispatched {total} items of {len(expected)} types; waiting for a scrape that saw them")
        seen = None
        while time.monotonic() < deadline:
            try:
                result = query(api, "sum(katana_dispatches_total)")
                seen = int(float(result[0]["value"][1])) if result else None
            except OSError:
                seen = None  # Prometheus still starting
            if seen == total:
                break
            time.sleep(0.5)
        if seen != total:
            print(f"check_prometheus: FAILED: Prometheus never saw {total} dispatches (last: {seen}); its log: "
                  f"{open(os.path.join(work, 'prometheus.log')).read()[-2000:]}", file=sys.stderr)
            return 1

        failures, passed = [], 0
        # The buckets as Prometheus has them (the service's histogram bounds, in nanoseconds).
        bounds = sorted(round(float(r["metric"]["le"]) * 1e9)
                        for r in query(api, "count by (le) (katana_dispatch_service_seconds_bucket)")
                        if r["metric"]["le"] != "+Inf")
        if not bounds:
            print("check_prometheus: FAILED: Prometheus has no katana_dispatch_service_seconds buckets", file=sys.stderr)
            return 1
        counts = {r["metric"]["type"]: int(float(r["value"][1])) for r in query(api, "sum by (type) (katana_dispatches_total)")}
        quantiles = {r["metric"]["type"]: float(r["value"][1]) * 1e9
                     for r in query(api, "histogram_quantile(0.99, sum by (le, type) (katana_dispatch_service_seconds_bucket))")}
        print(f"{'type':40} {'service':>8} {'prometheus':>10}   {'p99 (HdrHistogram)':>18} {'p99 (Prometheus)':>16}")
        for type_name, entry in sorted(expected.items()):
            short = type_name.split(".")[-1]
            count = counts.get(type_name)
            if count == entry["ended"]:
                passed += 1
            else:
                failures.append(f"{short}: Prometheus counts {count} dispatches, the service {entry['ended']}")
            line = f"{short:40} {entry['ended']:8} {str(count):>10}"
            if "service_p99_ns" in entry:
                reference, measured = entry["service_p99_ns"], quantiles.get(type_name)
                if measured is not None and abs(bucket(measured, bounds) - bucket(reference, bounds)) <= 1:
                    passed += 1
                else:
                    failures.append(f"{short}: p99 {measured} ns from Prometheus, {reference} ns from HdrHistogram: more than one bucket apart")
                line += f"   {reference / 1e3:15.1f} µs {(measured or 0) / 1e3:13.1f} µs"
            print(line)
        unexpected = set(counts) - set(expected)
        if unexpected:
            failures.append(f"types Prometheus has and the service never dispatched: {sorted(unexpected)}")
        for failure in failures:
            print(f"check_prometheus: FAILED: {failure}", file=sys.stderr)
        print(f"{passed} passed, {len(failures)} failed")
        return 1 if failures else 0
    finally:
        stop(service)
        stop(prometheus)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
