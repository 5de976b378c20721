#!/usr/bin/env bash
# The suite as two (or three) `swift test` processes at once: the LTTng recording suite (LTTngRecordingTests, serialized: real
# sessions, one at a time, mostly waiting on the child processes it records) and everything else.
#
# Why two: in one process, the serialized suite's next test is a task queued behind every parallel test still
# waiting for one of the two cooperative threads of a 2-core machine, so it ran only once they had drained — 150 s
# alone at the end of a 340 s run (`make test`'s per-test times). Side by side: 276 s, the rest taking 148 s and the
# recording suite 269 s (slower for sharing the machine, and now the longer of the two).
#
# KATANA_SERIAL_TESTS (a --filter pattern; `make test-tsan` sets it to the core suites): those tests go in a third
# process, one at a time. Under ThreadSanitizer the core suites took 134 s run in parallel (80 s user, 76 s system:
# their threads, each several times slower instrumented, contending for two cores) and 28 s one at a time; in the
# plain build 8 s and 10 s, so `make test` leaves them in parallel.
#
# Usage: scripts/run-tests.sh [BUILD OPTIONS...]   (for the build and every process: `make test-tsan` passes
# --sanitize=thread and its own --scratch-path; the Makefile says what the split saves there)
# The other processes' output follows the rest's; the status is non-zero if any failed.
set -uo pipefail
swift=${SWIFT:-swift}
build=("$@")

$swift build --build-tests "${build[@]}" || exit 1

# Interrupted (Ctrl-C, a cancelled job): the processes in the background go too — with the test binaries `swift test`
# started, which would otherwise keep recording (and keep the session daemon the recording suite owns) after we are gone.
stop_background() {
    for pid in ${recording:-} ${serial_pid:-}; do
        if kill -0 "$pid" 2>/dev/null; then
            pkill -TERM -P "$pid" 2>/dev/null
            kill -TERM "$pid" 2>/dev/null
        fi
    done
    rm -f ${log:-} ${serial_log:-}
}
trap stop_background EXIT
trap 'exit 130' INT TERM

# Returns once the `swift test` with process id $1 has started its test binary (or has ended). Even with --skip-build,
# `swift test` rewrites the build folder's manifest (.build/debug.yaml) as it starts, and one that read it while another
# wrote it failed before running a test ("unexpected top-level node", "unable to load build file": a CI rehearsal's
# recording suite). So each process starts only once the one before it is past that.
wait_until_testing() {
    if ! command -v pgrep >/dev/null 2>&1; then sleep 10; return; fi
    for _ in $(seq 1 1200); do
        pgrep -P "$1" -f '\.xctest' >/dev/null 2>&1 && return
        kill -0 "$1" 2>/dev/null || return
        sleep 0.1
    done
}

log=$(mktemp /tmp/katana-recording-tests.XXXXXX)
# --ignore-lock, on both: `swift test` holds the build folder's lock while its tests run (even with --ignore-lock,
# which only keeps it from waiting for another's), so whichever came second waited for the first to finish and the
# two ran one after the other. Neither builds (--skip-build).
$swift test --skip-build --ignore-lock "${build[@]}" --filter LTTngRecordingTests >"$log" 2>&1 &
recording=$!
wait_until_testing "$recording"
serial=${KATANA_SERIAL_TESTS:-}
rest_skips=(--skip LTTngRecordingTests)
if [ -n "$serial" ]; then
    serial_log=$(mktemp /tmp/katana-serial-tests.XXXXXX)
    $swift test --skip-build --ignore-lock "${build[@]}" --filter "$serial" --no-parallel >"$serial_log" 2>&1 &
    serial_pid=$!
    wait_until_testing "$serial_pid"
    rest_skips+=(--skip "$serial")
fi

status=0
$swift test --skip-build --ignore-lock "${build[@]}" "${rest_skips[@]}" || status=$?
if [ -n "$serial" ]; then
    wait "$serial_pid" || serial_status=$?
    echo "---- $serial (one at a time, beside the rest) ----"
    cat "$serial_log"
    if [ "${serial_status:-0}" -ne 0 ]; then
        echo "run-tests: $serial failed (status ${serial_status})" >&2
        status=1
    fi
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
