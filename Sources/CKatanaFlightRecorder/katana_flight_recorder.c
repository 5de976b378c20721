#define _GNU_SOURCE
#include "katana_flight_recorder.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------------------ recording */

/* A record is six 64-bit words: timestamp, id, parent, a, name, and b | event << 32 | kind << 40 | queue << 48 |
   outcome << 56. Words are stored and loaded with relaxed atomics (plain moves on x86-64 and arm64): a dump may
   copy a slot while its thread overwrites it, and that copy is then discarded (see `copy_ring`). */
#define WORDS 6

typedef struct {
    _Atomic uint64_t head; /* records written so far; slot = head & mask */
    uint64_t mask;
    _Atomic uint64_t *words;
    int32_t tid;
} ring;

#define MAX_RINGS 4096
static ring *rings[MAX_RINGS];
static _Atomic size_t ring_count;
/* Unconfigured: what katana_fr_configure(16 MiB, 256 KiB) gives (FlightRecorder.configure's defaults). */
static size_t ring_limit = 85, ring_records = 1 << 12;
static _Atomic uint64_t discarded_events;
static pthread_mutex_t rings_lock = PTHREAD_MUTEX_INITIALIZER;
static int configured;
static __thread ring *current;

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

/* The calling thread's ring, made on its first event; NULL when every ring is taken. Rings live as long as the
   process: a thread that ended still has its recent events dumped. */
static ring *attach(void) {
    pthread_mutex_lock(&rings_lock);
    configured = 1;
    ring *r = NULL;
    size_t count = atomic_load_explicit(&ring_count, memory_order_relaxed);
    if (count < ring_limit) {
        r = calloc(1, sizeof *r);
        _Atomic uint64_t *words = r ? calloc(ring_records * WORDS, sizeof *words) : NULL;
        if (words) {
            r->words = words;
            r->mask = ring_records - 1;
            r->tid = (int32_t)syscall(SYS_gettid);
            rings[count] = r;
            atomic_store_explicit(&ring_count, count + 1, memory_order_release);
        } else {
            free(r);
            r = NULL;
        }
    }
    pthread_mutex_unlock(&rings_lock);
    current = r;
    return r;
}

static uint64_t now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void katana_fr_record(uint8_t event, uint64_t at, uint64_t id, uint64_t parent, const char *name, uint64_t a,
                      uint32_t b, uint8_t kind, uint8_t queue, uint8_t outcome) {
    ring *r = current;
    if (__builtin_expect(r == NULL, 0) && (r = attach()) == NULL) {
        atomic_fetch_add_explicit(&discarded_events, 1, memory_order_relaxed);
        return;
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    _Atomic uint64_t *w = r->words + (h & r->mask) * WORDS;
    atomic_store_explicit(&w[0], at ? at : now(), memory_order_relaxed);
    atomic_store_explicit(&w[1], id, memory_order_relaxed);
    atomic_store_explicit(&w[2], parent, memory_order_relaxed);
    atomic_store_explicit(&w[3], a, memory_order_relaxed);
    atomic_store_explicit(&w[4], (uint64_t)(uintptr_t)name, memory_order_relaxed);
    atomic_store_explicit(&w[5], (uint64_t)b | (uint64_t)event << 32 | (uint64_t)kind << 40 | (uint64_t)queue << 48 |
                                     (uint64_t)outcome << 56, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
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

/* The ring's recent records, oldest first, into `out` (room for the ring's size); returns how many. Records the
   thread overwrote while they were copied (and the slot it may be writing) are left out. */
static size_t copy_ring(ring *r, record *out, uint64_t *lost) {
    uint64_t size = r->mask + 1;
    uint64_t end = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t start = end > size ? end - size : 0;
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
    /* Slots of index ≤ after − size may have been rewritten during the copy. */
    uint64_t first_safe = after >= size ? after - size + 1 : 0;
    size_t skip = first_safe > start ? (size_t)(first_safe - start) : 0;
    if (skip > n) skip = n;
    *lost = skip;
    memmove(out, out + skip, (n - skip) * sizeof *out);
    return n - skip;
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
            return fail(error, size, "cannot write %s: %s", path, n < 0 ? strerror(saved) : "no space");
        }
        p += n;
        length -= (size_t)n;
    }
    if (close(fd) != 0) return fail(error, size, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

static void random_uuid(unsigned char uuid[16]) {
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(uuid, 1, 16, f) != 16) {
        uint64_t seed = now() ^ (uint64_t)getpid() << 32;
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

int katana_fr_dump(const char *path, uint64_t *written, char *error, size_t error_size) {
    *written = 0;
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return fail(error, error_size, "cannot create %s: %s", path, strerror(errno));
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/metadata", path);
    if (access(probe, F_OK) == 0) return fail(error, error_size, "%s already holds a trace", path);

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
    if (status) return status;

    size_t count = atomic_load_explicit(&ring_count, memory_order_acquire);
    record *records = count ? malloc(ring_records * sizeof(record)) : NULL;
    if (count && !records) return fail(error, error_size, "out of memory");
    int32_t pid = (int32_t)getpid();
    buffer data = {0};
    for (size_t i = 0; i < count && status == 0; i++) {
        uint64_t lost;
        size_t taken = copy_ring(rings[i], records, &lost);
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
            put32(&data, (uint32_t)rings[i]->tid);
            put_payload(&data, &records[k]);
        }
        if (data.failed) { status = fail(error, error_size, "out of memory"); break; }
        uint64_t bits = (uint64_t)data.length * 8;
        memcpy(data.bytes + sizes_at, &bits, 8);
        memcpy(data.bytes + sizes_at + 8, &bits, 8);
        char name[64];
        snprintf(name, sizeof name, "katana_%zu", i);
        status = write_file(path, name, data.bytes, data.length, error, error_size);
        if (status == 0) *written += taken;
    }
    free(data.bytes);
    free(records);
    return status;
}
