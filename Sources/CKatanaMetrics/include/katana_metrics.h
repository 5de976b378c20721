#ifndef KATANA_METRICS_H
#define KATANA_METRICS_H

#include <stddef.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

/* KatanaMetrics' recording side: every thread adds its dispatches into a shard of its own (plain stores, no lock,
   no read-modify-write on a shared line), and a collector sums the shards when it exports. Service times and queue
   waits are kept per (type, kind) in the exported buckets, each bucket with its count and its sum, so the export
   can hand a metrics backend exactly the counts and sums it would have seen. */

#define KATANA_METRICS_MAX_BUCKETS 64
#define KATANA_METRICS_OUTCOMES 5 /* DispatchOutcome's raw values */

/* One set of metrics (a DispatchMetrics): its buckets, its series, every thread's shard of it. Lives for the
   process once made. */
typedef struct katana_metrics katana_metrics;

/* Makes a set with `count` buckets (upper bounds in nanoseconds, ascending, at most KATANA_METRICS_MAX_BUCKETS; a
   value lands in the first bucket whose bound is >= it, past the last in the +Inf bucket) and room for `max_types`
   (type, kind) series before dispatches of further types count as `other`. NULL with one line in `error` for bounds
   that are not ascending, too many, or more than KATANA_METRICS_MAX_SETS sets in the process. The first set made is
   the one `katana_metrics_updater_inline_since` records into. */
#define KATANA_METRICS_MAX_SETS 64
katana_metrics *_Nullable katana_metrics_create(const uint64_t *bounds, uint32_t count, uint32_t max_types,
                                                char *error, size_t error_size);
/* Whether `m` is the first set made (the one the context-free function below records into). */
int katana_metrics_is_primary(const katana_metrics *m);

/* Reserves a series for `name` (an interned, NUL-terminated name that lives for the process) of `kind`; with
   `exclusive` set, only reserved names get series of their own from then on (`name` NULL: only that). Returns the
   series' index, or -1 when the limit is reached (or no name was given). */
int katana_metrics_reserve(katana_metrics *m, const char *_Nullable name, uint8_t kind, int exclusive);

/* An updater applied inline, at its end, with its start token (`katana_duration_start`): service time, no wait.
   Records into the first set made. */
void katana_metrics_updater_inline_since(uint64_t id, uint64_t parent, const char *name, uint32_t parallelism,
                                         uint64_t started, uint8_t outcome, uint32_t listeners);
/* The same with its duration already measured. */
void katana_metrics_updater_inline(katana_metrics *m, const char *name, uint64_t duration_ns, uint8_t outcome);
/* A dispatch's three events, timed here. `queued`: it waits in the updater lane or until the store is ready. */
void katana_metrics_enqueue(katana_metrics *m, uint64_t id, uint8_t kind, int queued);
void katana_metrics_begin(katana_metrics *m, uint64_t id, uint8_t kind, const char *name);
void katana_metrics_end(katana_metrics *m, uint64_t id, uint8_t kind, const char *name, uint8_t outcome);
/* A dispatch ran over its type's latency budget. */
void katana_metrics_budget_exceeded(katana_metrics *m, uint8_t kind, const char *name);

/* One series' totals since the set was made, summed over every thread. */
typedef struct {
    uint64_t outcomes[KATANA_METRICS_OUTCOMES];
    uint64_t overruns;
    uint64_t service_count[KATANA_METRICS_MAX_BUCKETS + 1];
    uint64_t service_sum[KATANA_METRICS_MAX_BUCKETS + 1];
    uint64_t wait_count[KATANA_METRICS_MAX_BUCKETS + 1];
    uint64_t wait_sum[KATANA_METRICS_MAX_BUCKETS + 1];
} katana_metrics_series;

/* The number of series so far (indexes 0 and 1 are `other` for updaters and side effects), and one's name and kind
   (name NULL for `other`). */
uint32_t katana_metrics_series_count(const katana_metrics *m);
const char *_Nullable katana_metrics_series_name(const katana_metrics *m, uint32_t index, uint8_t *kind);
/* Sums series `index` over every thread into `out`. */
void katana_metrics_collect(katana_metrics *m, uint32_t index, katana_metrics_series *out);
/* Side effects begun and not ended; updaters waiting in a lane; dispatches being timed (an updater from its enqueue
   to its begin, a side effect to its end). */
void katana_metrics_gauges(katana_metrics *m, int64_t *side_effects_in_flight, int64_t *updaters_queued,
                           uint64_t *in_progress);
/* The bucket bounds (nanoseconds) into `out` (room for KATANA_METRICS_MAX_BUCKETS); returns their count. */
uint32_t katana_metrics_bounds(const katana_metrics *m, uint64_t *out);
/* How many threads have had a shard of `m` (shards of ended threads are taken over by new ones). */
uint32_t katana_metrics_shard_count(const katana_metrics *m);

/* For benchmarks: nanoseconds taken by `count` records of what a recorded inline updater cannot do without — a start
   and an end of the duration clock and one value added into a bucket (of `m`'s bounds) of a histogram of this
   thread's, apart from `m`'s own counters. */
uint64_t katana_metrics_floor(const katana_metrics *m, uint64_t count);

#pragma clang assume_nonnull end

#endif
