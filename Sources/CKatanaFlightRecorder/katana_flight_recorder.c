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

typedef struct {
    _Atomic uint64_t head; /* records written so far; slot = head & mask */
    uint64_t mask;
    _Atomic uint64_t *words;
    /* The owner: its thread id, and the first record it wrote (a ring whose thread ended is handed to a new
       thread only when every ring is taken; the old thread's records are then no longer dumped). */
    _Atomic int32_t tid;
    _Atomic uint64_t owner_from;
    _Atomic uint64_t ended; /* 0 while its thread lives, else the order in which it ended */
} ring;

#define MAX_RINGS 4096
static ring *rings[MAX_RINGS];
static _Atomic size_t ring_count;
/* Unconfigured: what katana_fr_configure(16 MiB, 256 KiB) gives (FlightRecorder.configure's defaults). */
static size_t ring_limit = 85, ring_records = 1 << 12;
static _Atomic uint64_t discarded_events;
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;
static int configured;
static uint64_t threads_ended; /* rings_lock */
static __thread ring *current;
static __thread int thread_ended;
static pthread_key_t ring_key;
static pthread_once_t ring_key_once = PTHREAD_ONCE_INIT;

/* The first clock pair (ticks, nanoseconds), taken with the first ring: with a dump's own pair, the tick rate over
   the whole recording. */
static uint64_t base_ticks, base_ns;

void katana_fr_configure(size_t total_bytes, size_t ring_bytes) {
    pthread_mutex_lock(&rings_lock);
    if (!configured) {
        size_t records = ring_bytes / (WORDS * 8);
        size_t power = 64;
        while (power * 2 <= records) power *= 2;
        ring_records = power;
        size_t limit = total_bytes / (power * WORDS * 8);
        ring_limit = limit < 1 ? 1 : limit > MAX_RINGS ? MAX_RINGS : limit;
        configured = 1;
    }
    pthread_mutex_unlock(&rings_lock);
}

/* A thread ends: its ring keeps its records (dumped as before) and becomes the first a new thread may take. */
static void thread_exit(void *value) {
    ring *r = value;
    pthread_mutex_lock(&rings_lock);
    atomic_store_explicit(&r->ended, ++threads_ended, memory_order_release);
    pthread_mutex_unlock(&rings_lock);
    current = NULL;
    thread_ended = 1; /* anything it records from now on (later destructors) is counted as discarded */
}

static void make_key(void) { pthread_key_create(&ring_key, thread_exit); }

/* The calling thread's ring, made on its first event — or, with every ring taken, the ring of the thread that ended
   first; NULL when none is free. */
static ring *attach(void) {
    if (thread_ended) return NULL;
    pthread_once(&ring_key_once, make_key);
    int32_t tid = (int32_t)syscall(SYS_gettid);
    pthread_mutex_lock(&rings_lock);
    configured = 1;
    ring *r = NULL;
    size_t count = atomic_load_explicit(&ring_count, memory_order_relaxed);
    if (count == 0) (void)katana_clock_pair(&base_ticks, &base_ns);
    if (count < ring_limit) {
        r = calloc(1, sizeof *r);
        _Atomic uint64_t *words = r ? calloc(ring_records * WORDS, sizeof *words) : NULL;
        if (words) {
            r->words = words;
            r->mask = ring_records - 1;
            atomic_store_explicit(&r->tid, tid, memory_order_relaxed);
            rings[count] = r;
            atomic_store_explicit(&ring_count, count + 1, memory_order_release);
        } else {
            free(r);
            r = NULL;
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
    _Atomic uint64_t *w = r->words + (h & r->mask) * WORDS;
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

int katana_fr_enabled(void) { return 1; }

/* The floor of a recorded inline updater: what it cannot do without — its two clock reads (start and end) and one
   record stored into a ring of this thread's — on a ring of its own, so the recorder's rings are left alone. */
static __thread ring *floor_ring;
static __thread ring floor_scratch;
static __thread _Atomic uint64_t floor_words[64 * WORDS];

uint64_t katana_fr_floor(uint64_t count) {
    floor_scratch.mask = 63;
    floor_scratch.words = floor_words;
    floor_ring = &floor_scratch;
    uint64_t start = katana_monotonic_ns();
    for (uint64_t i = 0; i < count; i++) {
        ring *volatile *slot = &floor_ring;
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

/* The ring's recent records of its present owner, oldest first, with nanosecond timestamps (never decreasing), into
   `out` (room for the ring's size); returns how many, and the owner's thread id. Records the thread overwrote while
   they were copied (and the slot it may be writing) are left out; so is the ring if a new thread took it meanwhile. */
static size_t copy_ring(ring *r, const clock_map *map, record *out, int32_t *tid) {
    uint64_t size = r->mask + 1;
    uint64_t owner = atomic_load_explicit(&r->owner_from, memory_order_acquire);
    *tid = atomic_load_explicit(&r->tid, memory_order_acquire);
    uint64_t end = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t start = end > size ? end - size : 0;
    if (start < owner) start = owner;
    uint64_t words[WORDS];
    size_t n = 0;
    for (uint64_t i = start; i < end; i++) {
        _Atomic uint64_t *w = r->words + (i & r->mask) * WORDS;
        for (int k = 0; k < WORDS; k++) words[k] = atomic_load_explicit(&w[k], memory_order_relaxed);
        out[n++] = (record){.ts = words[0], .id = words[1], .parent = words[2], .a = words[3],
                            .name = (const char *)(uintptr_t)words[4], .b = (uint32_t)words[5],
                            .event = (uint8_t)(words[5] >> 32), .kind = (uint8_t)(words[5] >> 40),
                            .queue = (uint8_t)(words[5] >> 48), .outcome = (uint8_t)(words[5] >> 56)};
    }
    atomic_thread_fence(memory_order_acquire);
    uint64_t after = atomic_load_explicit(&r->head, memory_order_acquire);
    if (atomic_load_explicit(&r->owner_from, memory_order_acquire) != owner) return 0;
    /* Slots of index ≤ after − size may have been rewritten during the copy. */
    uint64_t first_safe = after >= size ? after - size + 1 : 0;
    size_t skip = first_safe > start ? (size_t)(first_safe - start) : 0;
    if (skip > n) skip = n;
    memmove(out, out + skip, (n - skip) * sizeof *out);
    n -= skip;
    uint64_t last = 0;
    for (size_t i = 0; i < n; i++) {
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
    return n;
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

int64_t katana_fr_visit(katana_fr_visitor visit, void *context, uint64_t *now_ns) {
    clock_map map = dump_clock();
    *now_ns = map.ns;
    size_t count = atomic_load_explicit(&ring_count, memory_order_acquire);
    if (!count) return 0;
    pthread_mutex_lock(&rings_lock);
    size_t per_ring = ring_records;
    pthread_mutex_unlock(&rings_lock);
    record *records = malloc(per_ring * sizeof(record));
    if (!records) return -1;
    int64_t visited = 0;
    for (size_t i = 0; i < count; i++) {
        int32_t tid;
        size_t taken = copy_ring(rings[i], &map, records, &tid);
        for (size_t k = 0; k < taken; k++) {
            const record *r = &records[k];
            katana_fr_event event = {.timestamp_ns = r->ts, .id = r->id, .parent = r->parent, .a = r->a,
                                     .name = r->name, .b = r->b, .tid = tid, .event = r->event, .kind = r->kind,
                                     .queue = r->queue, .outcome = r->outcome};
            visit(&event, context);
        }
        visited += (int64_t)taken;
    }
    free(records);
    return visited;
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

    size_t count = atomic_load_explicit(&ring_count, memory_order_acquire);
    pthread_mutex_lock(&rings_lock); /* set by katana_fr_configure, under the lock */
    size_t per_ring = ring_records;
    pthread_mutex_unlock(&rings_lock);
    record *records = count ? malloc(per_ring * sizeof(record)) : NULL;
    unsigned char *made = count ? calloc(count, 1) : NULL;
    if (count && (!records || !made)) {
        free(records);
        free(made);
        undo(path, created, 0, NULL);
        return fail(error, error_size, "out of memory");
    }
    int32_t pid = (int32_t)getpid();
    buffer data = {0};
    for (size_t i = 0; i < count && status == 0; i++) {
        int32_t tid;
        size_t taken = copy_ring(rings[i], &map, records, &tid);
        if (!taken) continue;
        data.length = 0;
        put32(&data, 0xC1FC1FC1);
        put(&data, uuid, 16);
        put32(&data, 0);
        put64(&data, i);
        put64(&data, records[0].ts);
        put64(&data, records[taken - 1].ts);
        size_t sizes_at = data.length;
        put64(&data, 0); /* content size, set below */
        put64(&data, 0); /* packet size */
        put64(&data, 0);
        put64(&data, 0);
        put32(&data, (uint32_t)i);
        for (size_t k = 0; k < taken; k++) {
            put32(&data, records[k].event);
            put64(&data, records[k].ts);
            put32(&data, (uint32_t)pid);
            put32(&data, (uint32_t)tid);
            put_payload(&data, &records[k]);
        }
        if (data.failed) { status = fail(error, error_size, "out of memory"); break; }
        uint64_t bits = (uint64_t)data.length * 8;
        memcpy(data.bytes + sizes_at, &bits, 8);
        memcpy(data.bytes + sizes_at + 8, &bits, 8);
        char name[64];
        snprintf(name, sizeof name, "katana_%zu", i);
        status = write_file(path, name, data.bytes, data.length, error, error_size);
        if (status == 0) *written += taken, made[i] = 1;
    }
    free(data.bytes);
    free(records);
    /* A dump is whole or absent: a failed one (a full disk, say) leaves no partial trace for a tool to misread. */
    if (status) undo(path, created, made ? count : 0, made);
    free(made);
    return status;
}
