#!/usr/bin/env bash
# KatanaMetrics against a real Prometheus (`make test-metrics`): installs Debian's prometheus when it is missing, builds
# Examples/MetricsService and runs its check_prometheus.py, which starts the service and Prometheus on loopback, puts
# a known load through the service and holds Prometheus's answers against the service's own (and stops both).
# Under CI=true a Prometheus that cannot be installed fails the run; elsewhere the check is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KATANA_EXAMPLES_BUILD:-.build/examples}/MetricsService"

if ! command -v prometheus >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "test-metrics: installing prometheus" >&2
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq prometheus >/dev/null; }; then
    if [ "${CI:-}" = "true" ]; then
      echo "test-metrics: prometheus could not be installed, and CI must run this check" >&2
      exit 1
    fi
    echo "test-metrics: SKIPPED: prometheus could not be installed (apt-get install prometheus, then make test-metrics)" >&2
    exit 0
  fi
fi
# The Debian package starts a Prometheus of its own as a service where there is an init system; the check runs its own.

swift build --package-path Examples/MetricsService --scratch-path "$build"
python3 Examples/MetricsService/check_prometheus.py "$build/debug/order-service-metrics" "$@"
