# The two set-up commands of the README, plus the CI gate's pieces. Every target installs what it needs.
SWIFT ?= swift
BENCH_ARGS ?=

.PHONY: setup bench test test-tsan build release

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

## The suite under ThreadSanitizer, in its own build folder.
test-tsan: setup
	$(SWIFT) test --sanitize=thread --scratch-path .build-tsan
