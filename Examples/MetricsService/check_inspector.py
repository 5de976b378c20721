#!/usr/bin/env python3
"""The live page in a real browser: starts order-service-metrics with one slow order injected — the inspector mounted
on its Hummingbird server and on listeners of its own (a loopback port, a Unix socket) —, opens /debug/katana from the
inspector's own listener in headless Chromium, waits for the page's live updates (server-sent events) and reads what a
person would see — the rendered tables, through the DevTools protocol — then checks it against what the service did.
The mounted page and the Unix socket answer the same; the own listener is on loopback only; nothing but GET is served.

Then hostile clients, against the inspector's own listener: 1,000 idle connections, an oversized and a malformed
request, a live stream that is never read, more live streams than allowed, a stream held open past its longest
duration. After each the service must still answer, its memory must stay bounded (RSS), and it must not have crashed.

    check_inspector.py SERVICE-BINARY [--orders N] [--screenshot FILE.png]

Exits 0 when every check holds, 1 listing what failed, 2 when it cannot run. Stops what it started."""
import argparse
import importlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPS = ROOT / ".build" / "inspector-python"


def load_websocket():
    sys.path.insert(0, str(DEPS))
    try:
        import websocket  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(DEPS), "websocket-client"],
                       check=True, stdout=subprocess.DEVNULL)
        # The first import looked in DEPS before it existed, and Python remembers that it found nothing there: on a
        # fresh machine the import after the install failed until the caches were dropped.
        sys.path_importer_cache.pop(str(DEPS), None)
        importlib.invalidate_caches()
        import websocket  # noqa: F401
    import websocket
    return websocket


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevTools:
    """One page's DevTools protocol connection."""

    def __init__(self, websocket, url):
        self.socket = websocket.create_connection(url, timeout=30)
        self.next = 0

    def call(self, method, **params):
        self.next += 1
        self.socket.send(json.dumps({"id": self.next, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == self.next:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def get(port, path, timeout=10):
    """Status of GET path, or the error."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:
        return str(error)


def unix_get(path, target, timeout=10):
    """Status line and body of GET target over the Unix socket at path."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout)
        connection.connect(path)
        connection.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return head.split(b"\r\n")[0].decode(), body


def other_addresses():
    """This host's addresses other than loopback (IPv4), as `hostname -I` lists them."""
    try:
        listed = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=10).stdout.split()
    except OSError:
        return []
    return [address for address in listed if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", address) and not address.startswith("127.")]


def raw(port, data, timeout=10):
    """Sends `data` on a fresh connection; returns what came back before the server closed or the timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        try:
            connection.sendall(data)
        except OSError:
            pass  # the server may close before taking it all: that is a refusal too
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except OSError:
            pass
        return received


# How long the inspector's own listener keeps a connection that asks for nothing (the service's
# --inspector-idle-seconds): long enough for the 1,000 idle connections' checks, short enough to wait for.
IDLE_SECONDS = 10


def hostile(service, port, stream_seconds, check):
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    snapshot = "/debug/katana/snapshot.json"
    before = rss_kib(service.pid)
    bound = before + 64 * 1024  # KiB: what any of these may add to the service's memory

    # 1,000 idle connections: held open while the page is asked for.
    idle = []
    for _ in range(1000):
        idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    check(get(port, snapshot) == 200, "with 1,000 idle connections open, the page still answers")
    held = rss_kib(service.pid)
    check(held < bound, f"1,000 idle connections: RSS {before} → {held} KiB, under {bound}")
    for connection in idle:
        connection.close()

    # An oversized request (a 1 MiB header) and a malformed one: refused, the service carries on.
    oversized = raw(port, b"GET /debug/katana HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")
    check(not oversized.startswith(b"HTTP/1.1 200"), f"a 1 MiB header is not served: {oversized[:40]!r}")
    malformed = raw(port, b"\x00\x01\x02 NOT HTTP \xff\xfe\r\n\r\n")
    check(not malformed.startswith(b"HTTP/1.1 200"), f"a malformed request is not served: {malformed[:40]!r}")
    check(get(port, snapshot) == 200, "after the oversized and malformed requests, the page still answers")

    # A live stream that is never read (a tiny receive buffer, nothing read for 8 s): memory stays bounded.
    stuck = socket.socket()
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.connect(("127.0.0.1", port))
    stuck.sendall(b"GET /debug/katana/events HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(8)
    unread = rss_kib(service.pid)
    check(unread < bound, f"a stream never read for 8 s: RSS {unread} KiB, under {bound}")
    check(get(port, snapshot) == 200, "while a stream is never read, the page still answers")
    stuck.close()

    # More live streams than allowed (16): the rest are refused with 503, not queued.
    streams, statuses = [], []
    for _ in range(20):
        connection = socket.create_connection(("127.0.0.1", port), timeout=10)
        connection.sendall(b"GET /debug/katana/events HTTP/1.1\r\nHost: x\r\n\r\n")
        statuses.append(connection.recv(12)[9:12])
        streams.append(connection)
    check(statuses.count(b"200") <= 16 and statuses.count(b"503") >= 4,
          f"20 live streams at once: {statuses.count(b'200')} served, {statuses.count(b'503')} refused (at most 16 served)")
    for connection in streams:
        connection.close()

    # A stream held open: it ends by itself after its longest duration, and the browser's EventSource reconnects.
    # (The places of the streams just closed come back when the server next writes to them: within a refresh.)
    lasted = None
    deadline = time.time() + 15
    while lasted is None and time.time() < deadline:
        with socket.create_connection(("127.0.0.1", port), timeout=stream_seconds + 10) as connection:
            connection.sendall(b"GET /debug/katana/events HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            first = connection.recv(65536)
            if not first.startswith(b"HTTP/1.1 200"):
                time.sleep(0.5)
                continue
            started = time.time()
            try:
                while connection.recv(65536):
                    pass
                lasted = time.time() - started
            except OSError:
                break
    check(lasted is not None and stream_seconds - 1 <= lasted < stream_seconds + 10,
          f"a stream held open ends after its longest duration ({stream_seconds} s): it lasted {lasted and round(lasted, 1)} s")
    # A connection that asks for nothing is closed after the idle timeout: such clients do not pile up.
    with socket.create_connection(("127.0.0.1", port), timeout=IDLE_SECONDS + 10) as connection:
        started = time.time()
        try:
            closed = connection.recv(1) == b""
        except OSError:
            closed = True
        waited = time.time() - started
    check(closed and IDLE_SECONDS - 1 <= waited < IDLE_SECONDS + 8,
          f"a connection that asks for nothing is closed after the idle timeout ({IDLE_SECONDS} s): after {round(waited, 1)} s")
    check(service.poll() is None, "the service is still running after every hostile client")
    check(get(port, "/debug/katana") == 200, "and still serves the page")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("service")
    parser.add_argument("--orders", type=int, default=400)
    parser.add_argument("--screenshot")
    args = parser.parse_args()
    slow_order = 7
    failures = []

    def check(condition, message):
        print(("ok   " if condition else "FAIL ") + message)
        if not condition:
            failures.append(message)

    stream_seconds = 3
    socket_path = f"/tmp/katana-inspector-{os.getpid()}.sock"
    service = subprocess.Popen([args.service, "--port", "0", "--orders", str(args.orders), "--concurrency", "8",
                                "--slow-order", str(slow_order), "--stream-seconds", str(stream_seconds),
                                "--inspector-port", "0", "--inspector-socket", socket_path,
                                "--inspector-idle-seconds", str(IDLE_SECONDS)],
                               stdout=subprocess.PIPE, text=True)
    browser = None
    try:
        main_port = port = None
        deadline = time.time() + 120
        for line in service.stdout:
            match = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if match:
                main_port = int(match.group(1))
            match = re.match(r"inspector on http://127\.0\.0\.1:(\d+)/debug/katana", line)
            if match:
                port = int(match.group(1))
            if line.startswith("orders done") or time.time() > deadline:
                break
        if port is None or main_port is None:
            print("check_inspector: the service did not start (or its inspector's listener did not)", file=sys.stderr)
            return 2

        # The inspector's own listener, the mounted page and the Unix socket: the same answers; nothing but GET.
        snapshot = "/debug/katana/snapshot.json"
        check(get(main_port, snapshot) == 200, "the page mounted on the service's own server answers")
        status, body = unix_get(socket_path, snapshot)
        check(status == "HTTP/1.1 200 OK" and b'"types"' in body, f"the Unix socket listener answers: {status}")
        for method in ("POST", "PUT", "DELETE"):
            answer = raw(port, f"{method} {snapshot} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
            check(answer.startswith(b"HTTP/1.1 405"), f"{method} is refused (405): {answer[:30]!r}")
        head = raw(port, b"HEAD /debug/katana HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check(head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n"), f"HEAD gets the headers alone: {head[-40:]!r}")
        addresses = other_addresses()
        for address in addresses:
            try:
                with socket.create_connection((address, port), timeout=5):
                    reached = True
            except OSError:
                reached = False
            check(not reached, f"the inspector's own listener is on loopback only: {address}:{port} refused")
        if not addresses:
            print("note: this host has no address but loopback; the loopback-only check had nothing to try")
        base = f"http://127.0.0.1:{port}/debug/katana"

        websocket = load_websocket()
        debug_port = free_port()
        browser = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                                    f"--remote-debugging-port={debug_port}", "--window-size=1400,1700", base],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        page = None
        deadline = time.time() + 60
        while page is None and time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{debug_port}/json") as answer:
                    targets = json.load(answer)
                page = next((t for t in targets if t.get("type") == "page" and t.get("url", "").startswith(base)), None)
            except OSError:
                pass
            time.sleep(0.2)
        if page is None:
            print("check_inspector: chromium did not open the page", file=sys.stderr)
            return 2
        tools = DevTools(websocket, page["webSocketDebuggerUrl"])

        # The page renders once from the JSON, then on every server-sent event: wait for three renders.
        updates = 0
        deadline = time.time() + 60
        while updates < 3 and time.time() < deadline:
            updates = int(tools.evaluate("Number(document.body.dataset.updates || 0)") or 0)
            time.sleep(0.2)
        check(updates >= 3, f"the page updated live without a reload ({updates} renders)")
        check(tools.evaluate("document.getElementById('status').textContent") == "live", "the live stream is connected")

        def rows(table):
            return tools.evaluate(
                f"Array.from(document.getElementById('{table}').rows).map(r => Array.from(r.cells).map(c => c.innerText))")

        types = rows("types")
        header, body = types[0], types[1:]
        check(header[:4] == ["type", "kind", "count", "≥0"], f"the types table's columns: {header}")
        by_name = {row[0]: row for row in body}
        process = by_name.get("OrderProcessing.ProcessOrder")
        check(process is not None and process[2] == str(args.orders),
              f"ProcessOrder's count is the orders taken ({args.orders}): {process}")
        charge = by_name.get("OrderProcessing.ChargePayment")
        check(charge is not None and charge[header.index("≥100ms")] == "1",
              f"ChargePayment shows the one slow payment in the ≥100 ms row: {charge}")
        declined = args.orders // 13
        check(charge is not None and f"error {declined}" in charge[-1],
              f"ChargePayment's outcomes show the {declined} declined payments: {charge and charge[-1]}")

        slowest = rows("slowest")
        first = dict(zip(slowest[0], slowest[1])) if len(slowest) > 1 else {}
        check(first.get("dispatch") == "OrderProcessing.ProcessOrder" or first.get("dispatch") == "OrderProcessing.ChargePayment",
              f"the slowest recent dispatch is the slow order's: {first}")
        slow_charge = next((dict(zip(slowest[0], row)) for row in slowest[1:] if row[0] == "OrderProcessing.ChargePayment"), None)
        check(slow_charge is not None and "OrderProcessing.ProcessOrder #" in slow_charge.get("parents", ""),
              f"the slow ChargePayment is shown with its parent ProcessOrder: {slow_charge}")
        check(slow_charge is not None and slow_charge.get("service", "").endswith(" ms")
              and float(slow_charge["service"].split()[0]) >= 300,
              f"its service time is the injected 300 ms or more: {slow_charge and slow_charge.get('service')}")

        failed = rows("failed")
        check(len(failed) > 1 and any(row[3] == "error" for row in failed[1:]), f"failed dispatches are listed: {failed[:3]}")
        state = json.loads(tools.evaluate("document.getElementById('state').textContent"))
        check(state.get("orders") == args.orders, f"the redacted state shows the orders' count: {state}")
        check("stock" not in state and "customer" not in json.dumps(state),
              f"the state shows only what the app's redaction gave: {sorted(state)}")
        trace_link = tools.evaluate("document.getElementById('trace').getAttribute('href')")
        check(trace_link == "/debug/katana/trace.pftrace", f"the trace link: {trace_link}")
        metrics_link = tools.evaluate("document.getElementById('metrics').getAttribute('href')")
        check(metrics_link == "/metrics", f"the metrics link: {metrics_link}")

        if args.screenshot:
            shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            import base64
            Path(args.screenshot).write_bytes(base64.b64decode(shot["data"]))
            print(f"screenshot: {args.screenshot}")
        tools.socket.close()
        browser.send_signal(signal.SIGTERM)
        browser.wait(timeout=30)
        hostile(service, port, stream_seconds, check)
    finally:
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        for process in (browser, service):
            if process and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
    # An idle timeout that is not a duration the listener can keep: refused in one line, not served wrongly.
    refused = subprocess.run([args.service, "--port", "0", "--orders", "1", "--inspector-port", "0",
                              "--inspector-idle-seconds", "0"], capture_output=True, text=True, timeout=60)
    check(refused.returncode != 0 and "idleTimeout" in refused.stderr and "positive" in refused.stderr,
          f"an idle timeout of 0 is refused with a message: status {refused.returncode}, {refused.stderr.strip()[-120:]!r}")
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
