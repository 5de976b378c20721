#!/usr/bin/env bash
# KatanaInspector in a real browser (`make test-inspector`): installs Debian's chromium when it is missing, builds
# Examples/MetricsService (Hummingbird, the page mounted beside /metrics) and runs its check_inspector.py, which starts
# the service on loopback with one slow order, opens /debug/katana in headless Chromium, waits for the live updates and
# checks what the page shows (and stops both). Under CI=true a Chromium that cannot be installed fails the run;
# elsewhere the check is skipped with a message. KATANA_INSPECTOR_SCREENSHOT=FILE.png keeps a screenshot of the page.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KATANA_EXAMPLES_BUILD:-.build/examples}/MetricsService"

if ! command -v chromium >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "test-inspector: installing chromium" >&2
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null; }; then
    if [ "${CI:-}" = "true" ]; then
      echo "test-inspector: chromium could not be installed, and CI must run this check" >&2
      exit 1
    fi
    echo "test-inspector: SKIPPED: chromium could not be installed (apt-get install chromium, then make test-inspector)" >&2
    exit 0
  fi
fi

swift build --package-path Examples/MetricsService --scratch-path "$build"
screenshot=()
if [ -n "${KATANA_INSPECTOR_SCREENSHOT:-}" ]; then screenshot=(--screenshot "$KATANA_INSPECTOR_SCREENSHOT"); fi
python3 Examples/MetricsService/check_inspector.py "$build/debug/order-service-metrics" "${screenshot[@]}"
