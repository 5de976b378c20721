#define _GNU_SOURCE
#include "katana_metrics.h"

#include <CKatanaTraceProvider.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ layout */

#define MAX_SERIES_LIMIT 65536
#define MAX_SHARDS 4096
#define CACHE_SLOTS KATANA_NAME_CACHE_SLOTS /* katana_name_cache_slot's table size */
#define TIMING_SHARDS 64

/* One series' counters on one thread. Only the owning thread writes them (a load and a store, no atomic
   read-modify-write); collectors read them with relaxed loads. A bucket's sum is stored before its count (release),
   so a collector that reads the count first (acquire) has the sum of every sample it counts. */
typedef struct {
    _Atomic uint64_t outcomes[KATANA_METRICS_OUTCOMES];
    _Atomic uint64_t overruns;
    _Atomic uint64_t service_count[KATANA_METRICS_MAX_BUCKETS + 1];
    _Atomic uint64_t service_sum[KATANA_METRICS_MAX_BUCKETS + 1];
    _Atomic uint64_t wait_count[KATANA_METRICS_MAX_BUCKETS + 1];
    _Atomic uint64_t wait_sum[KATANA_METRICS_MAX_BUCKETS + 1];
} block;

/* One thread's part of a set. */
typedef struct {
    _Atomic(block *) *blocks; /* one per series, made on the thread's first dispatch of it */
    _Atomic uint64_t side_effects_begun, side_effects_ended, queued, dequeued;
    _Atomic uint64_t timed, untimed; /* dispatches whose timing began, and whose timing was taken out again */
    _Atomic int free;         /* its thread ended: the next new thread takes it over (its totals stay) */
    /* The updater this thread began applying last, and when: an updater ends on the thread that began it, with no
       other updater's begin in between, so its service time needs nothing shared. */
    uint64_t updater_id, updater_began;
    int shared;               /* written by many threads (with atomic adds): events of exiting threads */
    /* The owner's last series, by name and kind: a direct-mapped table (only the owner touches it). */
    uintptr_t cache_keys[CACHE_SLOTS];
    uint32_t cache_values[CACHE_SLOTS];
} shard;

/* A dispatch between its enqueue and its end: when it was enqueued and began (duration-clock tokens). */
typedef struct {
    uint64_t id, enqueued, began;
    int queued;
} timing;

/* Sharded by id, each a linear-probing table under its own lock: ids are consecutive, so threads working on
   different dispatches take different locks. */
typedef struct {
    pthread_mutex_t lock;
    timing *slots;
    uint32_t mask, used;
    char pad[64];
} timing_shard;

/* Updaters between their enqueue and their begin, by id modulo the table's size: the producer claims its slot
   (compare-and-swap of the id from 0), then stores its enqueue time; the lane's holder, which begins the updater
   after the producer has enqueued it under the lane's lock, reads and frees the slot. A slot still taken by an
   updater 16,384 dispatches older sends the newer one to the locked table instead. */
#define WAITING_SLOTS 16384
typedef struct {
    _Atomic uint64_t id, enqueued, queued;
} waiting_slot;

struct katana_metrics {
    uint32_t number; /* index among the sets, for each thread's table of its shards */
    uint64_t bounds[KATANA_METRICS_MAX_BUCKETS];
    uint32_t bound_count, max_series;

    pthread_mutex_t registry_lock;
    const char **series_names;
    uint8_t *series_kinds;
    _Atomic uint32_t series_count;
    int exclusive;         /* registry_lock */
    uintptr_t *index_keys; /* (name, kind) → series, open addressing over twice the limit (registry_lock) */
    uint32_t *index_values;
    uint32_t index_mask;

    pthread_mutex_t shards_lock;
    shard *shards[MAX_SHARDS];
    _Atomic uint32_t shard_count;
    shard exiting;

    timing_shard timings[TIMING_SHARDS];
    waiting_slot waiting[WAITING_SLOTS];
};

static katana_metrics *sets[KATANA_METRICS_MAX_SETS];
static _Atomic uint32_t set_count;
static katana_metrics *_Atomic primary;
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

/* Each thread's shard of each set, by the set's number. Initial-exec: the module is linked into the program, so a
   thread's variables are at a fixed offset from its thread pointer (no __tls_get_addr call per dispatch). */
#define THREAD_LOCAL __thread __attribute__((tls_model("initial-exec")))
static THREAD_LOCAL shard *thread_shards[KATANA_METRICS_MAX_SETS];
static THREAD_LOCAL int thread_ended;
static pthread_key_t thread_key;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;

static uint32_t hash64(uint64_t key) { return (uint32_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 32); }

/* ------------------------------------------------------------------------------------------ sets */

static void thread_exit(void *value) {
    (void)value;
    thread_ended = 1; /* anything it records from now on goes to the shared shards */
    for (int i = 0; i < KATANA_METRICS_MAX_SETS; i++) {
        if (thread_shards[i]) atomic_store_explicit(&thread_shards[i]->free, 1, memory_order_release);
        thread_shards[i] = NULL;
    }
}

static void make_key(void) { pthread_key_create(&thread_key, thread_exit); }

katana_metrics *katana_metrics_create(const uint64_t *bounds, uint32_t count, uint32_t max_types, char *error,
                                      size_t error_size) {
    if (count > KATANA_METRICS_MAX_BUCKETS) {
        snprintf(error, error_size, "%u buckets: at most %d", count, KATANA_METRICS_MAX_BUCKETS);
        return NULL;
    }
    for (uint32_t i = 0; i < count; i++) {
        if (bounds[i] == 0 || (i > 0 && bounds[i] <= bounds[i - 1])) {
            snprintf(error, error_size, "bucket bounds must be positive and ascending (bound %u is not)", i + 1);
            return NULL;
        }
    }
    if (max_types > MAX_SERIES_LIMIT - 2) {
        snprintf(error, error_size, "maxTypes %u: at most %d", max_types, MAX_SERIES_LIMIT - 2);
        return NULL;
    }
    pthread_once(&thread_key_once, make_key);
    katana_metrics *m = calloc(1, sizeof *m);
    uint32_t max_series = max_types + 2, index_size = 16;
    while (index_size < max_series * 2) index_size *= 2;
    if (m) {
        m->series_names = calloc(max_series, sizeof *m->series_names);
        m->series_kinds = calloc(max_series, sizeof *m->series_kinds);
        m->index_keys = calloc(index_size, sizeof *m->index_keys);
        m->index_values = calloc(index_size, sizeof *m->index_values);
        m->exiting.blocks = calloc(max_series, sizeof *m->exiting.blocks);
    }
    if (!m || !m->series_names || !m->series_kinds || !m->index_keys || !m->index_values || !m->exiting.blocks) {
        if (m) {
            free(m->series_names), free(m->series_kinds), free(m->index_keys), free(m->index_values);
            free(m->exiting.blocks);
        }
        free(m);
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    memcpy(m->bounds, bounds, count * sizeof *bounds);
    m->bound_count = count;
    m->max_series = max_series;
    m->index_mask = index_size - 1;
    atomic_store_explicit(&m->series_count, 2, memory_order_relaxed);
    m->exiting.shared = 1;
    pthread_mutex_init(&m->registry_lock, NULL);
    pthread_mutex_init(&m->shards_lock, NULL);
    for (int i = 0; i < TIMING_SHARDS; i++) pthread_mutex_init(&m->timings[i].lock, NULL);

    pthread_mutex_lock(&sets_lock);
    uint32_t number = atomic_load_explicit(&set_count, memory_order_relaxed);
    if (number < KATANA_METRICS_MAX_SETS) {
        m->number = number;
        sets[number] = m;
        atomic_store_explicit(&set_count, number + 1, memory_order_release);
        if (number == 0) atomic_store_explicit(&primary, m, memory_order_release);
    }
    pthread_mutex_unlock(&sets_lock);
    if (number >= KATANA_METRICS_MAX_SETS) {
        snprintf(error, error_size, "at most %d DispatchMetrics in a process", KATANA_METRICS_MAX_SETS);
        pthread_mutex_destroy(&m->registry_lock);
        free(m->series_names), free(m->series_kinds), free(m->index_keys), free(m->index_values);
        free(m->exiting.blocks);
        free(m);
        return NULL;
    }
    return m;
}

int katana_metrics_is_primary(const katana_metrics *m) {
    return atomic_load_explicit(&primary, memory_order_acquire) == m;
}

uint32_t katana_metrics_bounds(const katana_metrics *m, uint64_t *out) {
    memcpy(out, m->bounds, m->bound_count * sizeof *out);
    return m->bound_count;
}

/* The bucket of `ns`: the first whose bound is >= it, else the +Inf bucket (index bound_count). A scan from the
   first bucket: an updater's few hundred nanoseconds end it within a few steps that the branch predictor learns, and a
   side effect's milliseconds cost a dozen steps beside its own microseconds. (Measured with `katana-bench micro
   --backend metrics`: a binary search, a branch-free one and a per-power-of-two table all cost more per record
   — each of their steps waits on a load the one before chose.) */
static inline uint32_t bucket_of(const katana_metrics *m, uint64_t ns) {
    uint32_t i = 0;
    while (i < m->bound_count && m->bounds[i] < ns) i++;
    return i;
}

/* ------------------------------------------------------------------------------------------ series */

/* Series 0 and 1 are `other` (updaters, side effects); the rest are named, in the order first seen (or reserved). */
static inline uintptr_t series_key(const char *name, uint8_t kind) {
    return (uintptr_t)name ^ ((uintptr_t)kind << 63) ^ 1;
}

/* The series of (name, kind), added when there is room and `add` (registry_lock held). Names folded into `other`
   are not kept: a flood of generated types leaves the table as it was. */
static int lookup_locked(katana_metrics *m, const char *name, uint8_t kind, int add) {
    uintptr_t key = series_key(name, kind);
    for (uint32_t slot = hash64(key) & m->index_mask;; slot = (slot + 1) & m->index_mask) {
        if (m->index_keys[slot] == key) return (int)m->index_values[slot];
        if (m->index_keys[slot] != 0) continue;
        uint32_t count = atomic_load_explicit(&m->series_count, memory_order_relaxed);
        if (!add || count >= m->max_series) return -1;
        m->series_names[count] = name;
        m->series_kinds[count] = kind;
        m->index_keys[slot] = key;
        m->index_values[slot] = count;
        atomic_store_explicit(&m->series_count, count + 1, memory_order_release);
        return (int)count;
    }
}

int katana_metrics_reserve(katana_metrics *m, const char *name, uint8_t kind, int exclusive) {
    pthread_mutex_lock(&m->registry_lock);
    if (exclusive) m->exclusive = 1;
    int index = name ? lookup_locked(m, name, kind & 1, 1) : -1;
    pthread_mutex_unlock(&m->registry_lock);
    return index;
}

static uint32_t series_of_slow(katana_metrics *m, const char *name, uint8_t kind) {
    pthread_mutex_lock(&m->registry_lock);
    int index = lookup_locked(m, name, kind, !m->exclusive);
    pthread_mutex_unlock(&m->registry_lock);
    return index < 0 ? kind : (uint32_t)index;
}

uint32_t katana_metrics_series_count(const katana_metrics *m) {
    return atomic_load_explicit(&m->series_count, memory_order_acquire);
}

const char *katana_metrics_series_name(const katana_metrics *m, uint32_t index, uint8_t *kind) {
    if (index < 2) { *kind = (uint8_t)index; return NULL; }
    *kind = m->series_kinds[index];
    return m->series_names[index];
}

/* ------------------------------------------------------------------------------------------ shards */

static inline void add(shard *s, _Atomic uint64_t *counter, uint64_t value, memory_order order) {
    if (__builtin_expect(s->shared, 0)) atomic_fetch_add_explicit(counter, value, order);
    else atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + value, order);
}

/* The calling thread's shard of `m`: a new one, or one whose thread ended. A thread past its end (another key's
   destructor dispatching) and threads past MAX_SHARDS share the set's shared shard. */
static shard *attach(katana_metrics *m) {
    if (thread_ended) return &m->exiting;
    pthread_setspecific(thread_key, (void *)1); /* so that thread_exit runs for this thread */
    pthread_mutex_lock(&m->shards_lock);
    shard *s = NULL;
    uint32_t count = atomic_load_explicit(&m->shard_count, memory_order_relaxed);
    for (uint32_t i = 0; i < count && !s; i++) {
        int expected = 1;
        if (atomic_compare_exchange_strong(&m->shards[i]->free, &expected, 0)) s = m->shards[i];
    }
    if (s) {
        memset(s->cache_keys, 0, sizeof s->cache_keys);
    } else if (count < MAX_SHARDS) {
        s = calloc(1, sizeof *s);
        if (s) s->blocks = calloc(m->max_series, sizeof *s->blocks);
        if (s && s->blocks) {
            m->shards[count] = s;
            atomic_store_explicit(&m->shard_count, count + 1, memory_order_release);
        } else {
            free(s);
            s = NULL;
        }
    }
    pthread_mutex_unlock(&m->shards_lock);
    if (!s) return &m->exiting;
    thread_shards[m->number] = s;
    return s;
}

static inline shard *shard_of(katana_metrics *m) {
    shard *s = thread_shards[m->number];
    return __builtin_expect(s != NULL, 1) ? s : attach(m);
}

uint32_t katana_metrics_shard_count(const katana_metrics *m) {
    return atomic_load_explicit(&m->shard_count, memory_order_acquire);
}

static inline uint32_t series_of(katana_metrics *m, shard *s, const char *name, uint8_t kind) {
    if (__builtin_expect(s->shared, 0)) return series_of_slow(m, name, kind);
    uintptr_t key = series_key(name, kind);
    uint32_t slot = katana_name_cache_slot(key);
    if (__builtin_expect(s->cache_keys[slot] == key, 1)) return s->cache_values[slot];
    uint32_t index = series_of_slow(m, name, kind);
    s->cache_keys[slot] = key;
    s->cache_values[slot] = index;
    return index;
}

static block *make_block(shard *s, uint32_t index) {
    block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    block *expected = NULL;
    if (!atomic_compare_exchange_strong_explicit(&s->blocks[index], &expected, b, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(b); /* the shared shard: another thread made it first */
        return expected;
    }
    return b;
}

static inline block *block_of(katana_metrics *m, shard *s, const char *name, uint8_t kind) {
    uint32_t index = series_of(m, s, name, kind & 1);
    block *b = atomic_load_explicit(&s->blocks[index], memory_order_acquire);
    return __builtin_expect(b != NULL, 1) ? b : make_block(s, index);
}

static inline void record(const katana_metrics *m, shard *s, _Atomic uint64_t *counts, _Atomic uint64_t *sums,
                          uint64_t ns) {
    uint32_t bucket = bucket_of(m, ns);
    add(s, &sums[bucket], ns, memory_order_relaxed);
    add(s, &counts[bucket], 1, memory_order_release);
}

static inline void count_outcome(shard *s, block *b, uint8_t outcome) {
    add(s, &b->outcomes[outcome < KATANA_METRICS_OUTCOMES ? outcome : 1], 1, memory_order_relaxed);
}

void katana_metrics_updater_inline(katana_metrics *m, const char *name, uint64_t duration_ns, uint8_t outcome) {
    shard *s = shard_of(m);
    block *b = block_of(m, s, name, 0);
    if (!b) return;
    record(m, s, b->service_count, b->service_sum, duration_ns);
    add(s, &b->wait_count[0], 1, memory_order_release); /* applied inline: it waited for nothing (a sum of 0) */
    count_outcome(s, b, outcome);
}

void katana_metrics_updater_inline_since(uint64_t id, uint64_t parent, const char *name, uint32_t parallelism,
                                         uint64_t started, uint8_t outcome, uint32_t listeners) {
    (void)id, (void)parent, (void)parallelism, (void)listeners;
    uint64_t duration = katana_duration_ns(started);
    katana_metrics *m = atomic_load_explicit(&primary, memory_order_relaxed);
    if (m) katana_metrics_updater_inline(m, name, duration, outcome);
}

void katana_metrics_budget_exceeded(katana_metrics *m, uint8_t kind, const char *name) {
    shard *s = shard_of(m);
    block *b = block_of(m, s, name, kind);
    if (b) add(s, &b->overruns, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------------------------------------ dispatches in progress */

static inline uint32_t timing_slot(uint64_t id, uint32_t mask) { return hash64(id / TIMING_SHARDS) & mask; }

/* The entry of `id`, or the empty slot where it goes (t->lock held, t->slots made). */
static timing *find(timing_shard *t, uint64_t id) {
    for (uint32_t slot = timing_slot(id, t->mask);; slot = (slot + 1) & t->mask)
        if (t->slots[slot].id == id || t->slots[slot].id == 0) return &t->slots[slot];
}

static int grow(timing_shard *t) {
    uint32_t old_size = t->slots ? t->mask + 1 : 0, size = old_size ? old_size * 2 : 64;
    timing *old = t->slots, *slots = calloc(size, sizeof *slots);
    if (!slots) return -1;
    t->slots = slots;
    t->mask = size - 1;
    for (uint32_t i = 0; i < old_size; i++)
        if (old[i].id) *find(t, old[i].id) = old[i];
    free(old);
    return 0;
}

/* Empties `slot`, moving later entries of its run back so that every entry stays reachable (t->lock held). */
static void remove_at(timing_shard *t, uint32_t slot) {
    uint32_t hole = slot;
    for (uint32_t next = (hole + 1) & t->mask; t->slots[next].id; next = (next + 1) & t->mask) {
        uint32_t home = timing_slot(t->slots[next].id, t->mask);
        if (((next - home) & t->mask) >= ((next - hole) & t->mask)) {
            t->slots[hole] = t->slots[next];
            hole = next;
        }
    }
    t->slots[hole].id = 0;
    t->used--;
}

/* Nanoseconds from the duration-clock token `start` to the token `end`, taken later: one clock read serves a
   dispatch's wait (its end) and its service (its start). Tokens of two kinds (the clock calibrated in between) are
   measured with a read of their own. */
static inline uint64_t nanoseconds_between(uint64_t start, uint64_t end) {
    if ((start >> 63) != (end >> 63)) return katana_duration_ns(start);
    if (start >> 63) {
        uint64_t bits = __atomic_load_n(&katana_ns_per_tick_bits, __ATOMIC_RELAXED);
        double per_tick;
        __builtin_memcpy(&per_tick, &bits, sizeof per_tick);
        uint64_t ticks = (end - start) & ~(UINT64_C(1) << 63);
        return (uint64_t)((double)ticks * per_tick);
    }
    return end >= start ? end - start : 0;
}

static inline waiting_slot *waiting_of(katana_metrics *m, uint64_t id) {
    return &m->waiting[hash64(id) & (WAITING_SLOTS - 1)]; /* hashed: consecutive ids on distant lines */
}

void katana_metrics_enqueue(katana_metrics *m, uint64_t id, uint8_t kind, int queued) {
    shard *s = shard_of(m);
    if (queued) add(s, &s->queued, 1, memory_order_relaxed);
    if (id == 0) return;
    uint64_t now = katana_duration_start();
    add(s, &s->timed, 1, memory_order_relaxed);
    if (kind == 0) {
        waiting_slot *w = waiting_of(m, id);
        uint64_t free_slot = 0;
        if (atomic_compare_exchange_strong_explicit(&w->id, &free_slot, id, memory_order_acquire, memory_order_relaxed)) {
            atomic_store_explicit(&w->queued, (uint64_t)queued, memory_order_relaxed);
            atomic_store_explicit(&w->enqueued, now, memory_order_release);
            return;
        }
    }
    timing_shard *t = &m->timings[id % TIMING_SHARDS];
    pthread_mutex_lock(&t->lock);
    if ((t->used + 1) * 2 > (t->slots ? t->mask + 1 : 0) && grow(t) != 0) {
        pthread_mutex_unlock(&t->lock); /* out of memory: this dispatch is counted, not timed */
        if (queued) add(s, &s->dequeued, 1, memory_order_relaxed);
        add(s, &s->untimed, 1, memory_order_relaxed);
        return;
    }
    timing *entry = find(t, id);
    if (entry->id == 0) t->used++;
    *entry = (timing){.id = id, .enqueued = now, .began = 0, .queued = queued};
    pthread_mutex_unlock(&t->lock);
}

/* Takes the timing of `id` out of the locked table (side effects: only the enqueue's, leaving the begin's). */
static int take_timing(katana_metrics *m, uint64_t id, uint64_t began, uint64_t *enqueued, int *queued, uint64_t *began_at) {
    int found = 0;
    timing_shard *t = &m->timings[id % TIMING_SHARDS];
    pthread_mutex_lock(&t->lock);
    if (t->slots) {
        timing *entry = find(t, id);
        if (entry->id == id) {
            found = 1;
            *enqueued = entry->enqueued;
            *queued = entry->queued;
            *began_at = entry->began;
            entry->queued = 0;
            if (began) entry->began = began;
            else remove_at(t, (uint32_t)(entry - t->slots));
        }
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}

void katana_metrics_begin(katana_metrics *m, uint64_t id, uint8_t kind, const char *name) {
    shard *s = shard_of(m);
    if (kind == 1) add(s, &s->side_effects_begun, 1, memory_order_relaxed);
    if (id == 0) return;
    uint64_t now = katana_duration_start(), enqueued = 0, unused = 0;
    int queued = 0, found = 0;
    if (kind == 0) {
        /* Applied on this thread, ended before another updater begins here. */
        s->updater_id = id;
        s->updater_began = now;
        waiting_slot *w = waiting_of(m, id);
        if (atomic_load_explicit(&w->id, memory_order_acquire) == id) {
            enqueued = atomic_load_explicit(&w->enqueued, memory_order_acquire);
            queued = (int)atomic_load_explicit(&w->queued, memory_order_relaxed);
            atomic_store_explicit(&w->id, 0, memory_order_release);
            found = 1;
        } else {
            found = take_timing(m, id, 0, &enqueued, &queued, &unused);
        }
        if (found) add(s, &s->untimed, 1, memory_order_relaxed);
    } else {
        found = take_timing(m, id, now, &enqueued, &queued, &unused);
    }
    if (queued) add(s, &s->dequeued, 1, memory_order_relaxed);
    if (found) {
        block *b = block_of(m, s, name, kind);
        if (b) record(m, s, b->wait_count, b->wait_sum, nanoseconds_between(enqueued, now));
    }
}

void katana_metrics_end(katana_metrics *m, uint64_t id, uint8_t kind, const char *name, uint8_t outcome) {
    shard *s = shard_of(m);
    uint64_t began = 0;
    if (kind == 0) {
        if (id != 0 && s->updater_id == id) {
            began = s->updater_began;
            s->updater_id = 0;
        }
    } else {
        uint64_t enqueued = 0;
        int queued = 0;
        if (id != 0 && take_timing(m, id, 0, &enqueued, &queued, &began)) {
            add(s, &s->untimed, 1, memory_order_relaxed);
            if (queued) add(s, &s->dequeued, 1, memory_order_relaxed);
        }
        add(s, &s->side_effects_ended, 1, memory_order_release);
    }
    uint64_t service = began ? katana_duration_ns(began) : 0;
    block *b = block_of(m, s, name, kind);
    if (!b) return;
    if (began) record(m, s, b->service_count, b->service_sum, service);
    count_outcome(s, b, outcome);
}

/* ------------------------------------------------------------------------------------------ collection */

static void sum_block(const katana_metrics *m, block *b, katana_metrics_series *out) {
    for (uint32_t i = 0; i <= m->bound_count; i++) {
        out->service_count[i] += atomic_load_explicit(&b->service_count[i], memory_order_acquire);
        out->wait_count[i] += atomic_load_explicit(&b->wait_count[i], memory_order_acquire);
    }
    for (uint32_t i = 0; i <= m->bound_count; i++) {
        out->service_sum[i] += atomic_load_explicit(&b->service_sum[i], memory_order_relaxed);
        out->wait_sum[i] += atomic_load_explicit(&b->wait_sum[i], memory_order_relaxed);
    }
    for (int i = 0; i < KATANA_METRICS_OUTCOMES; i++)
        out->outcomes[i] += atomic_load_explicit(&b->outcomes[i], memory_order_relaxed);
    out->overruns += atomic_load_explicit(&b->overruns, memory_order_relaxed);
}

void katana_metrics_collect(katana_metrics *m, uint32_t index, katana_metrics_series *out) {
    memset(out, 0, sizeof *out);
    if (index >= m->max_series) return;
    uint32_t count = atomic_load_explicit(&m->shard_count, memory_order_acquire);
    for (uint32_t i = 0; i <= count; i++) {
        shard *s = i < count ? m->shards[i] : &m->exiting;
        block *b = atomic_load_explicit(&s->blocks[index], memory_order_acquire);
        if (b) sum_block(m, b, out);
    }
}

void katana_metrics_gauges(katana_metrics *m, int64_t *side_effects_in_flight, int64_t *updaters_queued,
                           uint64_t *in_progress) {
    uint64_t begun = 0, ended = 0, queued = 0, dequeued = 0, timed = 0, untimed = 0;
    uint32_t count = atomic_load_explicit(&m->shard_count, memory_order_acquire);
    /* Ends before begins: an item that ends while this reads is never counted as ended and not begun. */
    for (uint32_t i = 0; i <= count; i++) {
        shard *s = i < count ? m->shards[i] : &m->exiting;
        ended += atomic_load_explicit(&s->side_effects_ended, memory_order_acquire);
        dequeued += atomic_load_explicit(&s->dequeued, memory_order_relaxed);
        untimed += atomic_load_explicit(&s->untimed, memory_order_relaxed);
    }
    atomic_thread_fence(memory_order_acquire);
    for (uint32_t i = 0; i <= count; i++) {
        shard *s = i < count ? m->shards[i] : &m->exiting;
        begun += atomic_load_explicit(&s->side_effects_begun, memory_order_relaxed);
        queued += atomic_load_explicit(&s->queued, memory_order_relaxed);
        timed += atomic_load_explicit(&s->timed, memory_order_relaxed);
    }
    *side_effects_in_flight = begun > ended ? (int64_t)(begun - ended) : 0;
    *updaters_queued = queued > dequeued ? (int64_t)(queued - dequeued) : 0;
    *in_progress = timed > untimed ? timed - untimed : 0;
}

/* ------------------------------------------------------------------------------------------ floor */

static THREAD_LOCAL block floor_block;

uint64_t katana_metrics_floor(const katana_metrics *m, uint64_t count) {
    shard scratch = {0};
    uint64_t start = katana_monotonic_ns();
    for (uint64_t i = 0; i < count; i++) {
        block *volatile target = &floor_block;
        uint64_t began = katana_duration_start();
        record(m, &scratch, target->service_count, target->service_sum, katana_duration_ns(began));
    }
    return katana_monotonic_ns() - start;
}
