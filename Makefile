# The two set-up commands of the README, plus the CI gate's pieces. Every target installs what it needs.
SWIFT ?= swift
BENCH_ARGS ?=

.PHONY: setup bench test test-ci walk test-otlp test-install dist test-metrics test-inspector test-tsan test-notrace release perf-gate perf-gate-selftest bench-baseline examples example-dir docs perf-table window-table

setup:
	@bash scripts/setup-system.sh

release: setup
	$(SWIFT) build -c release --product katana-bench

## The main job: a benchmark run that prints latency histograms.
bench: release
	.build/release/katana-bench $(BENCH_ARGS)

## The Examples/ packages, built where the tests look for them (.build/examples/NAME) before the suite runs, so
## their builds do not compete with its timing-sensitive tests for the CPU; from scratch if an incremental build of
## the path dependency is stale.
## TracedHTTPService (swift-otel, SwiftNIO, async-http-client: minutes of build) is not among them: `make test-otlp`
## builds it and runs its test (CI runs both).
## The two HTTP services (MetricsService, TracedHTTPService) share one scratch folder, .build/examples/services, so
## SwiftNIO and the rest they both use compile once (`example_scratch` below).
## Without debug information (-gnone, -g0): nothing debugs the examples' builds, and it takes a little off them
## (MetricsService from scratch: 169 s and 186 s in two runs, against 188 s and 190 s with it). The tests build them
## here too (ExampleBuilds).
## `make example-dir EXAMPLE=NAME` prints the folder an example's executables are built in (the tests, the docs' and
## the services' scripts ask it, so the scratch folders are spelled here only).
EXAMPLES := HelloKatana OrderService
EXAMPLES_BUILD := .build/examples
EXAMPLE_FLAGS := -Xswiftc -gnone -Xcc -g0
example_scratch = $(EXAMPLES_BUILD)/$(if $(filter MetricsService TracedHTTPService,$(1)),services,$(1))
examples:
	@$(foreach example,$(EXAMPLES),echo "building Examples/$(example)" && \
		{ $(SWIFT) build --package-path Examples/$(example) --scratch-path $(call example_scratch,$(example)) $(EXAMPLE_FLAGS) >/dev/null 2>&1 || \
		{ rm -rf $(call example_scratch,$(example)) && $(SWIFT) build --package-path Examples/$(example) --scratch-path $(call example_scratch,$(example)) $(EXAMPLE_FLAGS); }; } && ) true

example-dir:
	@test -d Examples/$(EXAMPLE) || { echo "example-dir: no Examples/$(EXAMPLE) (EXAMPLE=NAME of a folder in Examples/)" >&2; exit 2; }
	@echo $(CURDIR)/$(call example_scratch,$(EXAMPLE))/debug

## The full test suite (including the real LTTng recording tests), but for the OTLP example's (`make test-otlp`).
## Two processes at once, the serialized LTTng recording suite beside the rest (scripts/run-tests.sh says why).
## The katana-trace the tests run as a child process (KATANA_TRACE_EXECUTABLE) is `make dist`'s, the file users
## install: the same code as the debug build's, read traces about fourteen times faster (a dump of 361k events: 2.5 s
## against 35 s), which took the tests from 262 s to 189 s here (their library code still runs in the debug build).
## CI's install test and performance gate reuse its build.
TRACE_TOOL := $(CURDIR)/dist/katana-trace
test: setup examples dist
	KATANA_TRACE_EXECUTABLE=$(TRACE_TOOL) SWIFT=$(SWIFT) bash scripts/run-tests.sh

## What CI's environment changes in the suite, after `make test` ran it as a user would (CI unset, no schema folder): the
## Trace Compass schema test (KATANA_TRACECOMPASS_XSD names CI's copy of the schema), reader-agreement cases 41-100 per
## trace (`make test` ran 1-40 and the kept seeds), and the recording tests that check CI owns the only session daemon (CI_DAEMON_TESTS). Only
## those: the rest of the suite behaves the same with CI set (CI=true only keeps a test from skipping where a tool is
## missing, and `make test` installed them all) and ran in `make test`. Reuses that build.
## Without the schema folder (a user's clone has none) the schema test is skipped, saying so; the rest runs.
CI_DAEMON_TESTS := LTTngRecordingTests/(theApplicationCarriesOnWhenTheSessionDaemonDies|aCommandThatRegistersLateIsStillRecorded|traceStartsASessionDaemonWhenNoneRunsAndRecords|katanaTraceRecordStopsTheSessionDaemonItStarted)
CI_SCHEMA_TEST := TraceToolkitTests/theTraceCompassAnalysisValidatesAgainstTheSchema
test-ci: setup examples dist
	@export KATANA_TRACE_EXECUTABLE=$(TRACE_TOOL); \
	if [ -f "$${KATANA_TRACECOMPASS_XSD:-/nonexistent}/xmlDefinition.xsd" ]; then \
		CI=true KATANA_AGREEMENT_CASES=41-100 $(SWIFT) test --filter '$(CI_SCHEMA_TEST)|TraceReaderAgreementTests|$(CI_DAEMON_TESTS)'; \
	else \
		echo "test-ci: KATANA_TRACECOMPASS_XSD names no folder with xmlDefinition.xsd (CI sets it to its copy of Trace Compass's schema; a clone has none): the Trace Compass schema test is skipped, the rest runs"; \
		CI=true KATANA_AGREEMENT_CASES=41-100 $(SWIFT) test --filter 'TraceReaderAgreementTests|$(CI_DAEMON_TESTS)'; \
	fi

## The Architecture article's dispatch walk, held to what a dispatch enters: a debug katana-bench under callgrind
## (scripts/dispatch-walk; `scripts/dispatch-walk --write` rewrites the article's table after a change to the walk).
walk: setup
	python3 scripts/dispatch-walk --check

## Distributed tracing end to end: Examples/TracedHTTPService built (its OpenTelemetry dependencies take minutes, so
## not in `make test`), its spans exported over OTLP/HTTP to a receiver on loopback and checked. CI runs it.
test-otlp: setup
	$(MAKE) examples EXAMPLES=TracedHTTPService
	KATANA_TEST_OTLP=1 $(SWIFT) test --filter OTLPExportTests

## katana-trace for a host without Swift (a production box where the flight recorder dumped): the Swift runtime and
## Foundation linked in statically — one file that needs glibc and libstdc++ only, `dist/katana-trace`.
## Built as the performance gate builds katana-bench (same flags, same folder), so the modules they share compile once
## in CI.
dist:
	$(SWIFT) build -c release --product katana-trace --static-swift-stdlib -Xswiftc -gnone --scratch-path .build-static
	mkdir -p dist
	cp .build-static/release/katana-trace dist/katana-trace
	strip dist/katana-trace
	dist/katana-trace --version

## Installing from a URL: a package made of the README's Install lines and quick start, resolving Katana over git
## from a copy of this checkout, built from scratch and run with LTTng's headers and libraries hidden (a mount
## namespace: needs root); and `make dist`'s katana-trace recording, analysing and exporting with the toolchain
## hidden. Minutes of build, so not in `make test` (CI runs both).
test-install: setup dist
	KATANA_TEST_INSTALL=1 $(SWIFT) test --filter InstallTests

## KatanaMetrics against a real Prometheus: Examples/MetricsService (Hummingbird, swift-prometheus) under a known load,
## scraped every second; Prometheus's counts and p99s held against the service's own. Its own target, so `make test`
## builds no server (CI runs both).
test-metrics: setup
	bash scripts/test-service.sh metrics

## KatanaInspector's live page in a real browser: Examples/MetricsService with one slow order, /debug/katana opened in
## headless Chromium, what the page shows after its live updates checked against the service. Its own target (CI runs it).
test-inspector: setup
	bash scripts/test-service.sh inspector

## The suite under ThreadSanitizer, default build, in its own build folder. The test binary links no LTTng; the
## LTTng-linked executables it runs handle TSan's verdict on liblttng-ust's exit (the Tracing with LTTng article, ThreadSanitizer).
## detect_deadlocks=0: TSan's lock-order checker once hung a CI rehearsal for 20 minutes in its own internal mutex
## (every thread spinning in sanitizer_deadlock_detector1 MutexAfterLock, from Foundation's Process.run and NSLock
## in the tests' process runner) - a TSan runtime hang, not a report; races are still all detected.
## KATANA_TSAN_SUITE (the tests' `underThreadSanitizerSuite`): smaller recording runs, four times wider watchdogs, and the
## suites whose subject is the katana-trace command skipped (`.checkedInChildProcesses`: the reader agreement cases, the
## native reader's fuzz, the export, window and command suites, the window on a long recording): they start the plain
## build `make test` ran them against and wait, nothing instrumented, and their long chains of children were what the
## step's last minutes waited for; the recording tests whose subject is how katana-trace record runs a session
## (`.aboutTheRecordingCommand`: the daemon started and stopped, signals, late registration, the live relay); and the
## flight recorder's resident-memory test (its subject is memory, not races).
## KATANA_SERIAL_TESTS: the core suites (KatanaTests) in a process of their own, one test at a time: in parallel under
## TSan their threads contended for the two cores (134 s, 76 s of it in the kernel), one at a time they took 28 s.
## Otherwise as `make test` runs them (scripts/run-tests.sh): the serialized recording suite beside the rest. In one
## process its every await waited behind the instrumented tests filling both of the cooperative pool's threads: in a
## CI rehearsal its first test ended after 327 s (of which 20 s its own) and the suite 187 s after everything else
## (564 s in all); side by side the two took 411 s here, the rest the longer.
## KATANA_TRACE_EXECUTABLE: the katana-trace the tests run is `make dist`'s, as in `make test` (CI's already built it): the
## toolkit starts no task and no thread, so instrumenting it checked nothing and tripled its reads' time.
## SWIFT_BACKTRACE=enable=no and the timeout: a test process that crashes under TSan ends at once (its backtracer
## could not suspend the instrumented threads), and one that hangs fails the step with a message instead of running
## into CI's limit with nothing said (a CI run that was cut there).
TSAN_TIMEOUT ?= 2400
test-tsan: setup dist
	@KATANA_TRACE_EXECUTABLE=$(TRACE_TOOL) KATANA_TSAN_SUITE=1 SWIFT_BACKTRACE=enable=no \
		KATANA_SERIAL_TESTS='KatanaTests\.' \
		TSAN_OPTIONS="detect_deadlocks=0 $$TSAN_OPTIONS" SWIFT=$(SWIFT) \
		timeout --kill-after=30 $(TSAN_TIMEOUT) bash scripts/run-tests.sh --sanitize=thread --scratch-path .build-tsan; \
	status=$$?; \
	if [ $$status -eq 124 ] || [ $$status -eq 137 ]; then \
		echo "test-tsan: the suite under ThreadSanitizer ran past $(TSAN_TIMEOUT) s and was stopped" >&2; fi; \
	exit $$status

## A build without the LTTng trait (no liblttng-ust): it must build, and the in-memory tracing must work.
test-notrace:
	$(SWIFT) test --disable-default-traits --scratch-path .build-notrace --filter 'KatanaTests|InMemoryTracingTests'

## The performance gate (after the tests in CI): callgrind instruction counts against
## Benchmarks/callgrind-baseline.json, package-benchmark's thresholds in Benchmarks/Thresholds, and a wall-clock A/B
## against the previous commit. See the Performance article.
perf-gate: setup
	python3 scripts/perf-gate all

## Proves the gate fails on a slower dispatch: the builds the gate measured, run with one more listener on every store
## (katana-bench micro --inject-regression, KATANA_INJECT_REGRESSION=1 for the benchmarks: an allocation and ~170
## instructions more per dispatch); passes only if both deterministic gates report it. After `make perf-gate` it
## compiles nothing.
perf-gate-selftest: setup
	python3 scripts/perf-gate callgrind --inject-regression
	python3 scripts/perf-gate benchmarks --inject-regression

## After an intentional performance change: re-record both baselines and show what moved (commit the result).
bench-baseline: setup
	python3 scripts/perf-gate callgrind --update
	python3 scripts/perf-gate benchmarks --update
	git --no-pager diff --stat -- Benchmarks/callgrind-baseline.json Benchmarks/Thresholds
	git --no-pager diff -- Benchmarks/callgrind-baseline.json

## The DocC catalogs (Sources/*/*.docc) built with the toolchain's docc into .build/docs, warnings as errors; also
## checks that the Performance article's table is what Benchmarks/Results/micro.json gives.
docs:
	bash scripts/build-docs.sh

## Re-measures the Performance article's figures (katana-bench micro, release build, in five processes: about 30 s) into
## Benchmarks/Results/micro.json and rewrites the article's table from it (commit both).
perf-table:
	python3 scripts/perf-table record

## Re-measures the Flight recorder article's window table (katana-bench micro --only window, release build, about 70 s)
## into Benchmarks/Results/flight-window.json and rewrites the table from it (commit both).
window-table:
	python3 scripts/perf-table record-window
