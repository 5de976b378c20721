#!/usr/bin/env bash
# Installs the system packages Katana's tests, tracing and tools need (and, with --sessiond, starts an LTTng
# session daemon).
# Idempotent: does nothing that is already done. Needs root (or sudo) for apt-get.
set -euo pipefail

packages=(liblttng-ust-dev lttng-tools babeltrace2 python3-lttnganalyses libxml2-utils valgrind binutils gcc)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The OpenTelemetry protobuf definitions, to decode what Examples/TracedHTTPService exports (its test); into a folder
# of this checkout's .build, never the system's Python. check_otlp.py installs them too when run on its own.
otlp_python="$(cd "$(dirname "$0")/.." && pwd)/.build/otlp-python"
if [ ! -d "$otlp_python/opentelemetry/proto" ]; then
  echo "setup: installing opentelemetry-proto (PyPI) into $otlp_python" >&2
  python3 -m pip install --quiet --disable-pip-version-check --target "$otlp_python" opentelemetry-proto >/dev/null 2>&1 ||
    echo "setup: could not install opentelemetry-proto; the OTLP export test will say so" >&2
fi

# Perfetto's own trace schema (the `perfetto` package's perfetto_trace_pb2, with protobuf), which the tests use to
# check katana-trace's protobuf export (traces/check_perfetto.py, which installs it too when run on its own).
perfetto_python="$(cd "$(dirname "$0")/.." && pwd)/.build/perfetto-python"
if [ ! -d "$perfetto_python/perfetto/protos" ]; then
  echo "setup: installing perfetto and protobuf (PyPI) into $perfetto_python" >&2
  python3 -m pip install --quiet --disable-pip-version-check --target "$perfetto_python" perfetto protobuf >/dev/null 2>&1 ||
    echo "setup: could not install perfetto; the Perfetto export tests will say so" >&2
fi

# A session daemon for LTTng recordings. Off by default: the LTTng tests and katana-trace record start one when none
# runs (the fault test must own the daemon it kills). `setup-system.sh --sessiond` starts one now.
if [ "${1:-}" = "--sessiond" ] && ! pgrep -x lttng-sessiond >/dev/null 2>&1; then
  echo "setup: starting lttng-sessiond" >&2
  $sudo lttng-sessiond --daemonize >/dev/null 2>&1 || echo "setup: could not start lttng-sessiond" >&2
fi
