# The two set-up commands of the README, plus the CI gate's pieces. Every target installs what it needs.
SWIFT ?= swift
BENCH_ARGS ?=

.PHONY: setup bench test test-tsan test-notrace release

setup:
	@bash scripts/setup-system.sh

release: setup
	$(SWIFT) build -c release --product katana-bench

## The main job: a benchmark run that prints latency histograms.
bench: release
	.build/release/katana-bench $(BENCH_ARGS)

## The full test suite (including the real LTTng recording tests).
test: setup
	$(SWIFT) test

## The suite under ThreadSanitizer, in its own build folder, built without the LTTng trait: TSan reports
## liblttng-ust's own listener threads (cancelled at exit while connected to a session daemon) as "finished with
## ignores enabled" — not our code, and not silenceable. This also checks the build without LTTng.
test-tsan: setup
	$(SWIFT) test --sanitize=thread --disable-default-traits --scratch-path .build-tsan

## A build without the LTTng trait (no liblttng-ust): it must build, and the in-memory tracing must work.
test-notrace:
	$(SWIFT) test --disable-default-traits --scratch-path .build-notrace --filter 'KatanaTests|InMemoryTracingTests'
