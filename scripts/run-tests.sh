#!/usr/bin/env bash
# The suite as two `swift test` processes at once: the LTTng recording suite (LTTngRecordingTests, serialized: real
# sessions, one at a time, mostly waiting on the child processes it records) and everything else.
#
# Why two: in one process, the serialized suite's next test is a task queued behind every parallel test still
# waiting for one of the two cooperative threads of a 2-core machine, so it ran only once they had drained — 150 s
# alone at the end of a 340 s run (`make test`'s per-test times).
#
# Usage: scripts/run-tests.sh [BUILD OPTIONS...] [-- OPTIONS FOR THE REST...]
#   BUILD OPTIONS go to the build and to both processes (--sanitize=thread, --scratch-path DIR);
#   OPTIONS FOR THE REST (--filter, --skip) choose among the other suites; `--no-rest` runs the recording suite alone.
# The recording suite's output follows the rest's; the status is non-zero if either failed.
set -uo pipefail
swift=${SWIFT:-swift}
build=()
rest=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do build+=("$1"); shift; done
[ $# -gt 0 ] && shift
rest=("$@")

$swift build --build-tests "${build[@]}" || exit 1

log=$(mktemp /tmp/katana-recording-tests.XXXXXX)
$swift test --skip-build "${build[@]}" --filter LTTngRecordingTests >"$log" 2>&1 &
recording=$!
# Interrupted (Ctrl-C, a cancelled job): the recording suite in the background goes too — with the test binary
# `swift test` started, which would otherwise keep recording (and keep the session daemon it owns) after we are gone.
stop_recording() {
    if kill -0 "$recording" 2>/dev/null; then
        pkill -TERM -P "$recording" 2>/dev/null
        kill -TERM "$recording" 2>/dev/null
    fi
    rm -f "$log"
}
trap stop_recording EXIT
trap 'exit 130' INT TERM

status=0
if [ "${rest[*]:-}" != "--no-rest" ]; then
    $swift test --skip-build "${build[@]}" --skip LTTngRecordingTests "${rest[@]}" || status=$?
fi
wait "$recording" || recording_status=$?
echo "---- LTTngRecordingTests (run beside the rest) ----"
cat "$log"
if [ "${recording_status:-0}" -ne 0 ]; then
    echo "run-tests: LTTngRecordingTests failed (status ${recording_status})" >&2
    status=1
fi
[ "$status" -eq 0 ] || echo "run-tests: the suite failed" >&2
exit "$status"
