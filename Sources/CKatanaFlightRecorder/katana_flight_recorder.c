#define _GNU_SOURCE
#include "katana_flight_recorder.h"
#include "CKatanaTraceProvider.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int fail(char *error, size_t size, const char *format, ...);

/* ------------------------------------------------------------------------------------------------------ recording */

/* A record is six 64-bit words: timestamp, id, parent, a, name, and b | event << 32 | kind << 40 | queue << 48 |
   outcome << 56. Words are stored and loaded with relaxed atomics (plain moves on x86-64 and arm64): a dump may
   copy a slot while its thread overwrites it, and that copy is then discarded (see `copy_ring`).
   Timestamps are `katana_duration_start` tokens — a tick count in one instruction once the provider's clock is
   calibrated, CLOCK_MONOTONIC nanoseconds before — converted to nanoseconds only when a dump writes them. */
#define WORDS 6

/* An inline updater recorded with its start token in `a` (its duration is worked out at dump time, from the same
   tick reads): written as updater_inline. */
#define KATANA_FR_INLINE_SINCE 0x7f

/* The memory is one pool of segments of SEGMENT_RECORDS records (12 KiB), handed to threads as they fill them: a
   thread takes a new segment from the pool while the total allows, else the segment whose records are the oldest
   of all (in the order segments were filled, whichever thread's). So memory follows the busy threads and the dump
   holds the most recent stretch of time the total can: one thread alone at 100,000 dispatches a second keeps the
   last 3.5 seconds of 16 MiB, where a fixed ring per thread kept 40 ms (`katana-bench micro --only window`). A
   thread that recorded keeps the one segment it writes in (its recent past is never taken from it); a segment is
   small so that many idle threads pin little. The writer takes `rings_lock` only to move to its next segment (once
   per SEGMENT_RECORDS records). */
#define SEGMENT_RECORDS 256
#define SEGMENT_BYTES ((size_t)SEGMENT_RECORDS * WORDS * 8)

typedef struct ring ring;

typedef struct {
    _Atomic uint64_t *words;
    /* Changed under rings_lock when the segment is handed to a ring: its new owner, the owner's record index of the
       segment's first slot, and a generation a dump compares before and after copying (a segment handed on meanwhile
       is left out of that dump). */
    _Atomic(ring *) owner;
    _Atomic uint64_t base;
    _Atomic uint64_t generation;
} segment;

struct ring {
    _Atomic uint64_t head; /* records written so far */
    /* The writer's: the segment it writes in, its words, and the record indexes it covers ([base, end)). `end ==
       head` sends the next record to `next_segment`. Changed by the writer under rings_lock (and at thread exit). */
    segment *current;
    _Atomic uint64_t *slots;
    uint64_t base, end;
    size_t index; /* in `rings` */
    /* The owner: its thread id, and the first record it wrote (a ring whose thread ended is handed to a new
       thread only when MAX_RINGS threads recorded; the old thread's records are then no longer dumped). */
    _Atomic int32_t tid;
    _Atomic uint64_t owner_from;
    _Atomic uint64_t ended; /* 0 while its thread lives, else the order in which it ended */
};

#define MAX_RINGS 1024
static ring *rings[MAX_RINGS];
static _Atomic size_t ring_count;
static _Atomic uint64_t discarded_events;
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;
static int configured;
static uint64_t threads_ended; /* rings_lock */
static __thread ring *current;
static __thread int thread_ended;
static pthread_key_t ring_key;
static pthread_once_t ring_key_once = PTHREAD_ONCE_INIT;

/* The pool (rings_lock): segments made so far, the most the total allows (unconfigured: what
   katana_fr_configure(16 MiB) gives, FlightRecorder.configure's default), and the segments no thread writes in, in
   the order they were filled (a ring buffer of `segment_limit` entries; each segment is in it at most once). */
static segment *segments;
static size_t segment_count, segment_limit = (16u << 20) / SEGMENT_BYTES;
static segment **filled;
static size_t filled_first, filled_count;

/* The first clock pair (ticks, nanoseconds), taken with the first ring: with a dump's own pair, the tick rate over
   the whole recording. */
static uint64_t base_ticks, base_ns;

void katana_fr_configure(size_t total_bytes) {
    pthread_mutex_lock(&rings_lock);
    if (!configured) {
        size_t limit = total_bytes / SEGMENT_BYTES;
        segment_limit = limit < 1 ? 1 : limit;
        configured = 1;
    }
    pthread_mutex_unlock(&rings_lock);
}

uint64_t katana_fr_capacity(void) {
    pthread_mutex_lock(&rings_lock);
    uint64_t records = (uint64_t)segment_limit * SEGMENT_RECORDS;
    pthread_mutex_unlock(&rings_lock);
    return records;
}

/* Pool bookkeeping; callers hold rings_lock. Made whole on first use, so a segment's address never changes while a
   dump copies it. The records' memory is one anonymous mapping of the total: the kernel's zero pages until a thread
   first writes them, so the process holds only what has been recorded, and taking a new segment allocates nothing
   (a calloc per segment cost the callgrind gate's `fire_and_forget_flight_recorder` a dozen instructions a dispatch
   in zeroing). */
static _Atomic uint64_t *pool_words;

static int pool_ready(void) {
    configured = 1;
    if (segments) return 1;
    void *words = mmap(NULL, segment_limit * SEGMENT_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    segments = calloc(segment_limit, sizeof *segments);
    filled = calloc(segment_limit, sizeof *filled);
    if (words != MAP_FAILED && segments && filled) {
        pool_words = words;
        return 1;
    }
    if (words != MAP_FAILED) munmap(words, segment_limit * SEGMENT_BYTES);
    free(segments);
    free(filled);
    segments = NULL;
    filled = NULL;
    return 0;
}

static void push_filled(segment *s) {
    filled[(filled_first + filled_count) % segment_limit] = s;
    filled_count++;
}

static segment *pop_filled(void) {
    if (!filled_count) return NULL;
    segment *s = filled[filled_first];
    filled_first = (filled_first + 1) % segment_limit;
    filled_count--;
    return s;
}

/* The segment for the ring's next records, from record index `h` on: a new one while the total allows, else the
   one filled first of all. NULL when every segment is some thread's current one. Caller holds rings_lock. */
static segment *take_segment(ring *r, uint64_t h) {
    segment *s = NULL;
    if (segment_count < segment_limit && pool_ready()) {
        s = &segments[segment_count];
        s->words = pool_words + segment_count * SEGMENT_RECORDS * WORDS;
        segment_count++;
    }
    if (!s) s = pop_filled();
    if (!s) return NULL;
    atomic_fetch_add_explicit(&s->generation, 1, memory_order_relaxed);
    atomic_store_explicit(&s->owner, r, memory_order_relaxed);
    atomic_store_explicit(&s->base, h, memory_order_relaxed);
    /* A dump that copies a slot of the records written from here on sees the new generation after it (seqlock). */
    atomic_thread_fence(memory_order_release);
    return s;
}

/* The ring's current segment is full (or it has none yet): move to the next. 0 when there is none to move to. */
static int next_segment(ring *r, uint64_t h) {
    pthread_mutex_lock(&rings_lock);
    if (r->current) push_filled(r->current);
    segment *s = take_segment(r, h);
    r->current = s;
    r->slots = s ? s->words : NULL;
    r->base = h;
    r->end = s ? h + SEGMENT_RECORDS : h;
    pthread_mutex_unlock(&rings_lock);
    return s != NULL;
}

/* A thread ends: its records stay (dumped as before, under its thread id) until their segments are the oldest and
   handed on; its ring becomes the first a new thread may take once MAX_RINGS threads recorded. */
static void thread_exit(void *value) {
    ring *r = value;
    pthread_mutex_lock(&rings_lock);
    atomic_store_explicit(&r->ended, ++threads_ended, memory_order_release);
    if (r->current) push_filled(r->current);
    r->current = NULL;
    r->end = atomic_load_explicit(&r->head, memory_order_relaxed);
    pthread_mutex_unlock(&rings_lock);
    current = NULL;
    thread_ended = 1; /* anything it records from now on (later destructors) is counted as discarded */
}

static void make_key(void) { pthread_key_create(&ring_key, thread_exit); }

/* The calling thread's ring, made on its first event — or, once MAX_RINGS threads recorded, the ring of the thread
   that ended first; NULL when none is free. Its first record takes it a segment. */
static ring *attach(void) {
    if (thread_ended) return NULL;
    pthread_once(&ring_key_once, make_key);
    int32_t tid = (int32_t)syscall(SYS_gettid);
    pthread_mutex_lock(&rings_lock);
    configured = 1;
    ring *r = NULL;
    size_t count = atomic_load_explicit(&ring_count, memory_order_relaxed);
    if (count == 0) (void)katana_clock_pair(&base_ticks, &base_ns);
    if (count < MAX_RINGS) {
        r = calloc(1, sizeof *r);
        if (r) {
            r->index = count;
            atomic_store_explicit(&r->tid, tid, memory_order_relaxed);
            rings[count] = r;
            atomic_store_explicit(&ring_count, count + 1, memory_order_release);
        }
    } else {
        uint64_t oldest = 0;
        for (size_t i = 0; i < count; i++) {
            uint64_t ended = atomic_load_explicit(&rings[i]->ended, memory_order_relaxed);
            if (ended && (!oldest || ended < oldest)) { oldest = ended; r = rings[i]; }
        }
        if (r) {
            /* The new owner goes on from the old one's head; a dump tells the two apart by `owner_from`. */
            atomic_store_explicit(&r->owner_from, atomic_load_explicit(&r->head, memory_order_relaxed), memory_order_release);
            atomic_store_explicit(&r->tid, tid, memory_order_release);
            atomic_store_explicit(&r->ended, 0, memory_order_release);
        }
    }
    pthread_mutex_unlock(&rings_lock);
    if (r) pthread_setspecific(ring_key, r);
    current = r;
    return r;
}

static inline void put_record(ring *r, uint64_t ts, uint64_t id, uint64_t parent, uint64_t a, const char *name,
                              uint64_t last) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (__builtin_expect(h == r->end, 0) && !next_segment(r, h)) {
        atomic_fetch_add_explicit(&discarded_events, 1, memory_order_relaxed);
        return;
    }
    _Atomic uint64_t *w = r->slots + (h - r->base) * WORDS;
    atomic_store_explicit(&w[0], ts, memory_order_relaxed);
    atomic_store_explicit(&w[1], id, memory_order_relaxed);
    atomic_store_explicit(&w[2], parent, memory_order_relaxed);
    atomic_store_explicit(&w[3], a, memory_order_relaxed);
    atomic_store_explicit(&w[4], (uint64_t)(uintptr_t)name, memory_order_relaxed);
    atomic_store_explicit(&w[5], last, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

static ring *ring_or_discard(void) {
    ring *r = current;
    if (__builtin_expect(r == NULL, 0) && (r = attach()) == NULL)
        atomic_fetch_add_explicit(&discarded_events, 1, memory_order_relaxed);
    return r;
}

void katana_fr_record(uint8_t event, uint64_t at, uint64_t id, uint64_t parent, const char *name, uint64_t a,
                      uint32_t b, uint8_t kind, uint8_t queue, uint8_t outcome) {
    ring *r = ring_or_discard();
    if (!r) return;
    put_record(r, at ? at : katana_duration_start(), id, parent, a, name,
               (uint64_t)b | (uint64_t)event << 32 | (uint64_t)kind << 40 | (uint64_t)queue << 48 |
                   (uint64_t)outcome << 56);
}

/* An inline updater's last record word: its listener count (up to 65,535) in the kind and queue bytes. */
static inline uint64_t inline_word(uint32_t parallelism, uint8_t event, uint8_t outcome, uint32_t listeners) {
    uint64_t told = listeners < 0xffff ? listeners : 0xffff;
    return (uint64_t)parallelism | (uint64_t)event << 32 | told << 40 | (uint64_t)outcome << 56;
}

void katana_fr_updater_inline_since(uint64_t id, uint64_t parent, const char *name, uint32_t parallelism,
                                    uint64_t started, uint8_t outcome, uint32_t listeners) {
    ring *r = ring_or_discard();
    if (!r) return;
    put_record(r, katana_duration_start(), id, parent, started, name,
               inline_word(parallelism, KATANA_FR_INLINE_SINCE, outcome, listeners));
}

void katana_fr_updater_inline(uint64_t id, uint64_t parent, const char *name, uint32_t parallelism,
                              uint64_t duration_ns, uint8_t outcome, uint32_t listeners) {
    ring *r = ring_or_discard();
    if (!r) return;
    put_record(r, katana_duration_start(), id, parent, duration_ns, name,
               inline_word(parallelism, KATANA_FR_INLINE, outcome, listeners));
}

/* The floor of a recorded inline updater: what it cannot do without — its two clock reads (start and end) and one
   record stored into a segment of this thread's — on a segment of its own, which it goes round in place of moving
   to the next (once per SEGMENT_RECORDS records, as a thread moves), so the recorder's pool is left alone. */
static __thread ring *floor_ring;
static __thread ring floor_scratch;
static __thread _Atomic uint64_t floor_words[SEGMENT_RECORDS * WORDS];

uint64_t katana_fr_floor(uint64_t count) {
    floor_scratch.slots = floor_words;
    floor_scratch.base = 0;
    floor_scratch.end = SEGMENT_RECORDS;
    floor_ring = &floor_scratch;
    uint64_t start = katana_monotonic_ns();
    for (uint64_t i = 0; i < count; i++) {
        ring *volatile *slot = &floor_ring;
        if (__builtin_expect(i % SEGMENT_RECORDS == 0, 0)) atomic_store_explicit(&floor_scratch.head, 0, memory_order_relaxed);
        uint64_t began = katana_duration_start();
        put_record(*slot, katana_duration_start(), i, 0, began, "floor", (uint64_t)KATANA_FR_INLINE_SINCE << 32);
    }
    return katana_monotonic_ns() - start;
}

/* Signals that ask for a dump reach a pipe: the handler only writes the signal's number to it (async-signal-safe),
   and a thread of the recorder's reads it. */
static int signal_pipe[2] = {-1, -1};
static pthread_mutex_t signal_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_dump_signal(int number) {
    int saved = errno;
    unsigned char byte = (unsigned char)number;
    ssize_t ignored = write(signal_pipe[1], &byte, 1); /* a full pipe drops the signal: a dump is on its way */
    (void)ignored;
    errno = saved;
}

int katana_fr_watch_signal(int number, char *error, size_t error_size) {
    pthread_mutex_lock(&signal_lock);
    int status = 0;
    if (signal_pipe[0] < 0 && pipe2(signal_pipe, O_CLOEXEC) != 0) {
        status = fail(error, error_size, "cannot make the signal pipe: %s", strerror(errno));
    } else {
        fcntl(signal_pipe[1], F_SETFL, fcntl(signal_pipe[1], F_GETFL) | O_NONBLOCK);
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = on_dump_signal;
        sigemptyset(&action.sa_mask);
        action.sa_flags = SA_RESTART;
        if (sigaction(number, &action, NULL) != 0) status = fail(error, error_size, "cannot handle signal %d: %s", number, strerror(errno));
    }
    int fd = signal_pipe[0];
    pthread_mutex_unlock(&signal_lock);
    return status ? -1 : fd;
}

int katana_fr_next_signal(int fd) {
    for (;;) {
        unsigned char byte;
        ssize_t n = read(fd, &byte, 1);
        if (n == 1) return byte;
        if (n < 0 && errno == EINTR) continue;
        return -1;
    }
}

void katana_fr_counts(uint64_t *recorded, uint64_t *discarded) {
    uint64_t total = 0;
    size_t count = atomic_load_explicit(&ring_count, memory_order_acquire);
    for (size_t i = 0; i < count; i++) total += atomic_load_explicit(&rings[i]->head, memory_order_acquire);
    *recorded = total;
    *discarded = atomic_load_explicit(&discarded_events, memory_order_relaxed);
}

typedef struct {
    uint64_t ts, id, parent, a;
    const char *name;
    uint32_t b;
    uint8_t event, kind, queue, outcome;
} record;

/* Timestamp tokens to monotonic nanoseconds: ticks through the rate between the first ring's clock pair and the
   dump's (the provider's calibrated rate when the two are too close to measure it); nanosecond tokens as they are. */
typedef struct {
    uint64_t ticks, ns;
    double per_tick;
} clock_map;

static clock_map dump_clock(void) {
    clock_map map = {0, 0, 0};
    (void)katana_clock_pair(&map.ticks, &map.ns);
    uint64_t bits = __atomic_load_n(&katana_ns_per_tick_bits, __ATOMIC_RELAXED);
    memcpy(&map.per_tick, &bits, sizeof map.per_tick);
    pthread_mutex_lock(&rings_lock);
    uint64_t ticks0 = base_ticks, ns0 = base_ns;
    pthread_mutex_unlock(&rings_lock);
    if (map.ns > ns0 + 100000000u && map.ticks > ticks0) map.per_tick = (double)(map.ns - ns0) / (double)(map.ticks - ticks0);
    return map;
}

static uint64_t to_ns(const clock_map *map, uint64_t token) {
    if (!(token >> 63)) return token;
    int64_t ago = (int64_t)(map->ticks - (token & ~(UINT64_C(1) << 63)));
    double ns = (double)map->ns - (double)ago * map->per_tick;
    return ns > 0 ? (uint64_t)ns : 0;
}

/* What a dump copies, taken under rings_lock: every segment with an owner (its ring, base and generation at that
   moment), sorted by ring and base — each ring's oldest first — and each ring's head, first record and thread. */
typedef struct {
    segment *s;
    size_t ring;
    uint64_t base, generation;
    size_t at, taken; /* where its records went in a copy, and how many */
} segment_view;

typedef struct {
    uint64_t head, owner_from;
    int32_t tid;
} ring_view;

typedef struct {
    segment_view *segments;
    size_t segment_count;
    ring_view *rings;
    size_t ring_count;
    size_t most_records; /* the most records one ring's segments hold */
} snapshot;

static int by_ring_and_base(const void *a, const void *b) {
    const segment_view *x = a, *y = b;
    if (x->ring != y->ring) return x->ring < y->ring ? -1 : 1;
    return x->base < y->base ? -1 : x->base > y->base;
}

/* 0, or -1 when its memory could not be had. */
static int take_snapshot(snapshot *snap) {
    memset(snap, 0, sizeof *snap);
    pthread_mutex_lock(&rings_lock);
    size_t count = atomic_load_explicit(&ring_count, memory_order_relaxed);
    snap->segments = segment_count ? malloc(segment_count * sizeof *snap->segments) : NULL;
    snap->rings = count ? malloc(count * sizeof *snap->rings) : NULL;
    if ((segment_count && !snap->segments) || (count && !snap->rings)) {
        pthread_mutex_unlock(&rings_lock);
        free(snap->segments);
        free(snap->rings);
        return -1;
    }
    for (size_t i = 0; i < segment_count; i++) {
        segment *s = &segments[i];
        ring *owner = atomic_load_explicit(&s->owner, memory_order_relaxed);
        if (!owner) continue;
        snap->segments[snap->segment_count++] = (segment_view){
            .s = s, .ring = owner->index, .base = atomic_load_explicit(&s->base, memory_order_relaxed),
            .generation = atomic_load_explicit(&s->generation, memory_order_relaxed)};
    }
    for (size_t i = 0; i < count; i++) {
        snap->rings[i] = (ring_view){.head = atomic_load_explicit(&rings[i]->head, memory_order_acquire),
                                     .owner_from = atomic_load_explicit(&rings[i]->owner_from, memory_order_relaxed),
                                     .tid = atomic_load_explicit(&rings[i]->tid, memory_order_relaxed)};
    }
    snap->ring_count = count;
    pthread_mutex_unlock(&rings_lock);
    qsort(snap->segments, snap->segment_count, sizeof *snap->segments, by_ring_and_base);
    for (size_t i = 0, first = 0; i <= snap->segment_count; i++) {
        if (i < snap->segment_count && snap->segments[i].ring == snap->segments[first].ring) continue;
        size_t records = (i - first) * SEGMENT_RECORDS;
        if (records > snap->most_records) snap->most_records = records;
        first = i;
    }
    return 0;
}

static void free_snapshot(snapshot *snap) {
    free(snap->segments);
    free(snap->rings);
}

/* The records of one ring's present owner — its segments, `views[0..<count]` of the snapshot — oldest first, with
   nanosecond timestamps (never decreasing), into `out` (room for `most_records`); returns how many. A segment handed
   on while it was copied is left out (its generation changed: its thread, or another, writes it anew). */
static size_t copy_ring(const snapshot *snap, segment_view *views, size_t count, const clock_map *map, record *out) {
    const ring_view *owner = &snap->rings[views[0].ring];
    size_t n = 0;
    uint64_t words[WORDS];
    for (size_t v = 0; v < count; v++) {
        segment_view *view = &views[v];
        uint64_t from = view->base > owner->owner_from ? view->base : owner->owner_from;
        uint64_t to = view->base + SEGMENT_RECORDS < owner->head ? view->base + SEGMENT_RECORDS : owner->head;
        view->at = n;
        for (uint64_t i = from; i < to; i++) {
            _Atomic uint64_t *w = view->s->words + (i - view->base) * WORDS;
            for (int k = 0; k < WORDS; k++) words[k] = atomic_load_explicit(&w[k], memory_order_relaxed);
            out[n++] = (record){.ts = words[0], .id = words[1], .parent = words[2], .a = words[3],
                                .name = (const char *)(uintptr_t)words[4], .b = (uint32_t)words[5],
                                .event = (uint8_t)(words[5] >> 32), .kind = (uint8_t)(words[5] >> 40),
                                .queue = (uint8_t)(words[5] >> 48), .outcome = (uint8_t)(words[5] >> 56)};
        }
        view->taken = n - view->at;
    }
    atomic_thread_fence(memory_order_acquire);
    size_t kept = 0;
    for (size_t v = 0; v < count; v++) {
        if (atomic_load_explicit(&views[v].s->generation, memory_order_relaxed) != views[v].generation) continue;
        memmove(out + kept, out + views[v].at, views[v].taken * sizeof *out);
        kept += views[v].taken;
    }
    uint64_t last = 0;
    for (size_t i = 0; i < kept; i++) {
        record *x = &out[i];
        uint64_t ts = to_ns(map, x->ts);
        if (x->event == KATANA_FR_INLINE_SINCE) {
            uint64_t began = to_ns(map, x->a);
            x->a = ts > began ? ts - began : 0;
            x->event = KATANA_FR_INLINE;
        }
        x->ts = ts < last ? last : ts;
        last = x->ts;
    }
    return kept;
}

/* Calls `each(ring, records, taken, tid, context)` for every ring of the snapshot with records, in ring order; stops
   at (and returns) a non-zero status. `newest`: at most that many of each ring's most recent records (0: all), and
   only the segments that hold them are copied. */
typedef int (*ring_visitor)(size_t ring, const record *records, size_t taken, int32_t tid, void *context);

static int copy_rings(snapshot *snap, const clock_map *map, record *out, uint64_t newest, ring_visitor each,
                      void *context) {
    for (size_t first = 0; first < snap->segment_count;) {
        size_t last = first;
        while (last < snap->segment_count && snap->segments[last].ring == snap->segments[first].ring) last++;
        size_t index = snap->segments[first].ring, from = first;
        /* The newest segment may be partly written: keep one more than `newest` needs when full. */
        while (newest && (uint64_t)(last - from - 1) * SEGMENT_RECORDS >= newest + SEGMENT_RECORDS) from++;
        size_t taken = copy_ring(snap, &snap->segments[from], last - from, map, out);
        if (newest && taken > newest) {
            memmove(out, out + (taken - newest), (size_t)newest * sizeof *out);
            taken = (size_t)newest;
        }
        if (taken) {
            int status = each(index, out, taken, snap->rings[index].tid, context);
            if (status) return status;
        }
        first = last;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------------------ CTF */

typedef struct {
    unsigned char *bytes;
    size_t length, capacity;
    int failed;
} buffer;

static void put(buffer *b, const void *data, size_t length) {
    if (b->failed) return;
    if (b->length + length > b->capacity) {
        size_t capacity = b->capacity ? b->capacity * 2 : 1 << 16;
        while (capacity < b->length + length) capacity *= 2;
        unsigned char *grown = realloc(b->bytes, capacity);
        if (!grown) { b->failed = 1; return; }
        b->bytes = grown;
        b->capacity = capacity;
    }
    memcpy(b->bytes + b->length, data, length);
    b->length += length;
}

static void put8(buffer *b, uint8_t v) { put(b, &v, 1); }
static void put32(buffer *b, uint32_t v) { put(b, &v, 4); } /* little-endian hosts only (x86-64, arm64) */
static void put64(buffer *b, uint64_t v) { put(b, &v, 8); }
static void put_string(buffer *b, const char *s) { put(b, s ? s : "", s ? strlen(s) + 1 : 1); }

static const char *const event_names[KATANA_FR_EVENT_COUNT] = {
    "dispatch_enqueue", "dispatch_begin", "dispatch_end", "updater_inline", "budget_exceeded", "interval_begin",
    "interval_end", "transition_begin", "transition_end", "store_ready", "listeners_notified"};

#define U64 "integer { size = 64; align = 8; signed = 0; encoding = none; base = 10; }"
#define U32 "integer { size = 32; align = 8; signed = 0; encoding = none; base = 10; }"
#define KIND "enum : integer { size = 8; align = 8; signed = 0; encoding = none; base = 10; } { \"state_updater\" = 0, \"side_effect\" = 1 }"
#define QUEUE "enum : integer { size = 8; align = 8; signed = 0; encoding = none; base = 10; } { \"updater_inline\" = 0, \"updater_queue\" = 1, \"side_effect_pool\" = 2, \"held\" = 3 }"
#define OUTCOME "enum : integer { size = 8; align = 8; signed = 0; encoding = none; base = 10; } { \"ok\" = 0, \"error\" = 1, \"blocked\" = 2, \"applied_with_error\" = 3, \"cancelled\" = 4 }"

/* Each event's payload, as LTTng-UST declares it for Katana's provider (the inline updater's name is a plain
   string here rather than a counted sequence: readers show both the same). */
static const char *const event_fields[KATANA_FR_EVENT_COUNT] = {
    U64 " _id; " U64 " _parent_id; " KIND " _kind; string _name; " QUEUE " _queue; " U32 " _queue_depth;",
    U64 " _id; " U64 " _parent_id; " KIND " _kind; string _name; " QUEUE " _queue; " U32 " _parallelism;",
    U64 " _id; " KIND " _kind; string _name; " QUEUE " _queue; " OUTCOME " _outcome;",
    U64 " _id; " U64 " _parent_id; string _name; " U32 " _parallelism; " U64 " _duration_ns; " OUTCOME " _outcome;",
    U64 " _id; " KIND " _kind; string _name; " U64 " _budget_ns; " U64 " _actual_ns;",
    U64 " _interval_id; " U64 " _parent_id; string _name;",
    U64 " _interval_id; string _name; " OUTCOME " _outcome;",
    U64 " _transition_id; string _name; " OUTCOME " _outcome;",
    U64 " _transition_id; string _name; " OUTCOME " _outcome;",
    U64 " _store_id; string _state_type;",
    U64 " _store_id; " U32 " _changes; " U32 " _listeners;",
};

static void put_payload(buffer *b, const record *r) {
    switch (r->event) {
    case KATANA_FR_ENQUEUE: case KATANA_FR_BEGIN:
        put64(b, r->id); put64(b, r->parent); put8(b, r->kind); put_string(b, r->name); put8(b, r->queue);
        put32(b, r->b);
        break;
    case KATANA_FR_END:
        put64(b, r->id); put8(b, r->kind); put_string(b, r->name); put8(b, r->queue); put8(b, r->outcome);
        break;
    case KATANA_FR_INLINE:
        put64(b, r->id); put64(b, r->parent); put_string(b, r->name); put32(b, r->b); put64(b, r->a);
        put8(b, r->outcome);
        break;
    case KATANA_FR_BUDGET:
        put64(b, r->id); put8(b, r->kind); put_string(b, r->name); put64(b, r->a); put64(b, r->parent);
        break;
    case KATANA_FR_INTERVAL_BEGIN:
        put64(b, r->id); put64(b, r->parent); put_string(b, r->name);
        break;
    case KATANA_FR_INTERVAL_END: case KATANA_FR_TRANSITION_BEGIN: case KATANA_FR_TRANSITION_END:
        put64(b, r->id); put_string(b, r->name); put8(b, r->outcome);
        break;
    case KATANA_FR_STORE_READY:
        put64(b, r->id); put_string(b, r->name);
        break;
    default: /* listeners notified */
        put64(b, r->id); put32(b, (uint32_t)r->a); put32(b, r->b);
        break;
    }
}

static int fail(char *error, size_t size, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(error, size, format, args);
    va_end(args);
    return -1;
}

static int write_file(const char *dir, const char *name, const void *data, size_t length, char *error, size_t size) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return fail(error, size, "%s: path too long", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return fail(error, size, "cannot create %s: %s", path, strerror(errno));
    const unsigned char *p = data;
    while (length) {
        ssize_t n = write(fd, p, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int saved = errno;
            close(fd);
            unlink(path);
            return fail(error, size, "cannot write %s: %s", path, n < 0 ? strerror(saved) : "no space");
        }
        p += n;
        length -= (size_t)n;
    }
    if (close(fd) != 0) {
        int saved = errno;
        unlink(path);
        return fail(error, size, "cannot write %s: %s", path, strerror(saved));
    }
    return 0;
}

static void random_uuid(unsigned char uuid[16]) {
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(uuid, 1, 16, f) != 16) {
        uint64_t seed = katana_monotonic_ns() ^ (uint64_t)getpid() << 32;
        for (int i = 0; i < 16; i++) { seed = seed * 6364136223846793005u + 1442695040888963407u; uuid[i] = (unsigned char)(seed >> 56); }
    }
    if (f) fclose(f);
    uuid[6] = (uuid[6] & 0x0f) | 0x40;
    uuid[8] = (uuid[8] & 0x3f) | 0x80;
}

static void uuid_text(const unsigned char u[16], char out[37]) {
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
             u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

/* Removes what a failed dump wrote: its metadata, its stream files, and the folder if the dump made it. */
static void undo(const char *dir, int created, size_t streams, const unsigned char *made) {
    char path[4096];
    snprintf(path, sizeof path, "%s/metadata", dir);
    unlink(path);
    for (size_t i = 0; i < streams; i++) {
        if (!made[i]) continue;
        snprintf(path, sizeof path, "%s/katana_%zu", dir, i);
        unlink(path);
    }
    if (created) rmdir(dir);
}

typedef struct {
    katana_fr_visitor visit;
    void *context;
    int64_t visited;
} visit_state;

static int visit_ring(size_t ring, const record *records, size_t taken, int32_t tid, void *context) {
    (void)ring;
    visit_state *state = context;
    for (size_t k = 0; k < taken; k++) {
        const record *r = &records[k];
        katana_fr_event event = {.timestamp_ns = r->ts, .id = r->id, .parent = r->parent, .a = r->a, .name = r->name,
                                 .b = r->b, .tid = tid, .event = r->event, .kind = r->kind, .queue = r->queue,
                                 .outcome = r->outcome};
        state->visit(&event, state->context);
    }
    state->visited += (int64_t)taken;
    return 0;
}

int64_t katana_fr_visit(katana_fr_visitor visit, void *context, uint64_t newest, uint64_t *now_ns) {
    clock_map map = dump_clock();
    *now_ns = map.ns;
    snapshot snap;
    if (take_snapshot(&snap)) return -1;
    record *records = snap.most_records ? malloc(snap.most_records * sizeof(record)) : NULL;
    if (snap.most_records && !records) {
        free_snapshot(&snap);
        return -1;
    }
    visit_state state = {visit, context, 0};
    (void)copy_rings(&snap, &map, records, newest, visit_ring, &state);
    free(records);
    free_snapshot(&snap);
    return state.visited;
}

/* One ring's records as a CTF stream file `katana_N` (N: the ring's index) of the dump being written. */
typedef struct {
    const char *path;
    const unsigned char *uuid;
    int32_t pid;
    unsigned char *made;
    uint64_t *written;
    char *error;
    size_t error_size;
    buffer data;
} stream_state;

static int write_stream(size_t ring, const record *records, size_t taken, int32_t tid, void *context) {
    stream_state *state = context;
    buffer *data = &state->data;
    data->length = 0;
    put32(data, 0xC1FC1FC1);
    put(data, state->uuid, 16);
    put32(data, 0);
    put64(data, ring);
    put64(data, records[0].ts);
    put64(data, records[taken - 1].ts);
    size_t sizes_at = data->length;
    put64(data, 0); /* content size, set below */
    put64(data, 0); /* packet size */
    put64(data, 0);
    put64(data, 0);
    put32(data, (uint32_t)ring);
    for (size_t k = 0; k < taken; k++) {
        put32(data, records[k].event);
        put64(data, records[k].ts);
        put32(data, (uint32_t)state->pid);
        put32(data, (uint32_t)tid);
        put_payload(data, &records[k]);
    }
    if (data->failed) return fail(state->error, state->error_size, "out of memory");
    uint64_t bits = (uint64_t)data->length * 8;
    memcpy(data->bytes + sizes_at, &bits, 8);
    memcpy(data->bytes + sizes_at + 8, &bits, 8);
    char name[64];
    snprintf(name, sizeof name, "katana_%zu", ring);
    int status = write_file(state->path, name, data->bytes, data->length, state->error, state->error_size);
    if (status == 0) *state->written += taken, state->made[ring] = 1;
    return status;
}

int katana_fr_dump(const char *path, uint64_t *written, char *error, size_t error_size) {
    *written = 0;
    int created = mkdir(path, 0755) == 0;
    if (!created && errno != EEXIST) return fail(error, error_size, "cannot create %s: %s", path, strerror(errno));
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/metadata", path);
    if (access(probe, F_OK) == 0) return fail(error, error_size, "%s already holds a trace", path);
    clock_map map = dump_clock();

    unsigned char uuid[16];
    random_uuid(uuid);
    char uuid_string[37];
    uuid_text(uuid, uuid_string);
    /* LTTng's clock offset: the monotonic clock's zero in nanoseconds since the epoch. */
    struct timespec real, mono;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    int64_t offset = ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000000 + ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec);
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);

    buffer meta = {0};
    char text[4096];
    int n = snprintf(text, sizeof text,
        "/* CTF 1.8 */\n\n"
        "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n"
        "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n"
        "typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n\n"
        "trace {\n\tmajor = 1;\n\tminor = 8;\n\tuuid = \"%s\";\n\tbyte_order = le;\n"
        "\tpacket.header := struct {\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n\t\tuint32_t stream_id;\n"
        "\t\tuint64_t stream_instance_id;\n\t};\n};\n\n"
        "env {\n\tdomain = \"ust\";\n\ttracer_name = \"katana-flight-recorder\";\n\thostname = \"%s\";\n};\n\n"
        "clock {\n\tname = \"monotonic\";\n\tuuid = \"%s\";\n\tdescription = \"Monotonic Clock\";\n"
        "\tfreq = 1000000000;\n\toffset = %lld;\n};\n\n"
        "typealias integer { size = 64; align = 8; signed = false; map = clock.monotonic.value; } := uint64_clock_monotonic_t;\n\n"
        "stream {\n\tid = 0;\n"
        "\tpacket.context := struct {\n\t\tuint64_clock_monotonic_t timestamp_begin;\n"
        "\t\tuint64_clock_monotonic_t timestamp_end;\n\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n"
        "\t\tuint64_t packet_seq_num;\n\t\tuint64_t events_discarded;\n\t\tuint32_t cpu_id;\n\t};\n"
        "\tevent.header := struct {\n\t\tuint32_t id;\n\t\tuint64_clock_monotonic_t timestamp;\n\t};\n"
        "\tevent.context := struct {\n"
        "\t\tinteger { size = 32; align = 8; signed = 1; encoding = none; base = 10; } _vpid;\n"
        "\t\tinteger { size = 32; align = 8; signed = 1; encoding = none; base = 10; } _vtid;\n\t};\n};\n\n",
        uuid_string, host, uuid_string, (long long)offset);
    put(&meta, text, (size_t)n);
    for (int e = 0; e < KATANA_FR_EVENT_COUNT; e++) {
        n = snprintf(text, sizeof text, "event {\n\tname = \"katana:%s\";\n\tid = %d;\n\tstream_id = 0;\n\tfields := struct { %s };\n};\n\n",
                     event_names[e], e, event_fields[e]);
        put(&meta, text, (size_t)n);
    }
    if (meta.failed) { free(meta.bytes); return fail(error, error_size, "out of memory"); }
    int status = write_file(path, "metadata", meta.bytes, meta.length, error, error_size);
    free(meta.bytes);
    if (status) return undo(path, created, 0, NULL), status;

    snapshot snap;
    if (take_snapshot(&snap)) return undo(path, created, 0, NULL), fail(error, error_size, "out of memory");
    size_t count = snap.ring_count;
    record *records = snap.most_records ? malloc(snap.most_records * sizeof(record)) : NULL;
    unsigned char *made = count ? calloc(count, 1) : NULL;
    if ((snap.most_records && !records) || (count && !made)) {
        free(records);
        free(made);
        free_snapshot(&snap);
        undo(path, created, 0, NULL);
        return fail(error, error_size, "out of memory");
    }
    stream_state streams = {.path = path, .uuid = uuid, .pid = (int32_t)getpid(), .made = made, .written = written,
                            .error = error, .error_size = error_size};
    status = copy_rings(&snap, &map, records, 0, write_stream, &streams);
    free(streams.data.bytes);
    free(records);
    free_snapshot(&snap);
    /* A dump is whole or absent: a failed one (a full disk, say) leaves no partial trace for a tool to misread. */
    if (status) undo(path, created, made ? count : 0, made);
    free(made);
    return status;
}
