#!/usr/bin/env bash
# Examples/MetricsService against the real thing it serves (`make test-metrics`, `make test-inspector`):
#
#   scripts/test-service.sh metrics    KatanaMetrics against a real Prometheus: check_prometheus.py starts the service and
#                                      Prometheus on loopback, puts a known load through the service and holds
#                                      Prometheus's answers against the service's own (and stops both).
#   scripts/test-service.sh inspector  KatanaInspector in a real browser and against hostile clients: check_inspector.py
#                                      starts the service with one slow order, opens /debug/katana in headless Chromium,
#                                      checks what the page shows after its live updates, then the hostile clients.
#                                      KATANA_INSPECTOR_SCREENSHOT=FILE.png keeps a screenshot of the page.
#
# Installs the Debian package the check needs when it is missing. Under CI=true one that cannot be installed fails the
# run; elsewhere the check is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
service="$(${MAKE:-make} --no-print-directory -s example-dir EXAMPLE=MetricsService)/order-service-metrics"

case "${1:-}" in
  metrics) package=prometheus ;;
  inspector) package=chromium ;;
  *) echo "usage: scripts/test-service.sh metrics|inspector" >&2; exit 2 ;;
esac

if ! command -v "$package" >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "test-$1: installing $package" >&2
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >/dev/null; }; then
    if [ "${CI:-}" = "true" ]; then
      echo "test-$1: $package could not be installed, and CI must run this check" >&2
      exit 1
    fi
    echo "test-$1: SKIPPED: $package could not be installed (apt-get install $package, then make test-$1)" >&2
    exit 0
  fi
fi
# Debian's prometheus package starts a Prometheus of its own as a service where there is an init system; the check
# runs its own.

# Built as `make examples` builds it, in the folder `make example-dir` names (shared with TracedHTTPService; from scratch
# when the incremental build fails).
${MAKE:-make} --no-print-directory examples EXAMPLES=MetricsService
case "$1" in
  metrics) python3 Examples/MetricsService/check_prometheus.py "$service" ;;
  inspector)
    screenshot=()
    if [ -n "${KATANA_INSPECTOR_SCREENSHOT:-}" ]; then screenshot=(--screenshot "$KATANA_INSPECTOR_SCREENSHOT"); fi
    python3 Examples/MetricsService/check_inspector.py "$service" "${screenshot[@]}" ;;
esac
