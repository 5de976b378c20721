#!/usr/bin/env bash
# The suite as two `swift test` processes at once: the LTTng recording suite (LTTngRecordingTests, serialized: real
# sessions, one at a time, mostly waiting on the child processes it records) and everything else.
#
# Why two: in one process, the serialized suite's next test is a task queued behind every parallel test still
# waiting for one of the two cooperative threads of a 2-core machine, so it ran only once they had drained — 150 s
# alone at the end of a 340 s run (`make test`'s per-test times). Side by side: 276 s, the rest taking 148 s and the
# recording suite 269 s (slower for sharing the machine, and now the longer of the two).
#
# Usage: scripts/run-tests.sh [BUILD OPTIONS...]   (for the build and both: `make test-tsan` passes --sanitize=thread
# and its own --scratch-path; the Makefile says what the split saves there)
# The recording suite's output follows the rest's; the status is non-zero if either failed.
set -uo pipefail
swift=${SWIFT:-swift}
build=("$@")

$swift build --build-tests "${build[@]}" || exit 1

log=$(mktemp /tmp/katana-recording-tests.XXXXXX)
# --ignore-lock, on both: `swift test` holds the build folder's lock while its tests run (even with --ignore-lock,
# which only keeps it from waiting for another's), so whichever came second waited for the first to finish and the
# two ran one after the other. Neither builds (--skip-build): nothing in the folder changes.
$swift test --skip-build --ignore-lock "${build[@]}" --filter LTTngRecordingTests >"$log" 2>&1 &
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
$swift test --skip-build --ignore-lock "${build[@]}" --skip LTTngRecordingTests || status=$?
wait "$recording" || recording_status=$?
echo "---- LTTngRecordingTests (run beside the rest) ----"
cat "$log"
if [ "${recording_status:-0}" -ne 0 ]; then
    echo "run-tests: LTTngRecordingTests failed (status ${recording_status})" >&2
    status=1
fi
[ "$status" -eq 0 ] || echo "run-tests: the suite failed" >&2
exit "$status"
