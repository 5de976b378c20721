#ifndef CKATANA_TRACE_PROVIDER_H
#define CKATANA_TRACE_PROVIDER_H

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The seam between Katana's core and a native tracing provider linked into the same process.
 *
 * The core (KatanaTrace) depends only on this file. A provider — KatanaLTTng's LTTng-UST tracepoints — fills one
 * `katana_trace_provider` table and registers it from an ELF constructor, so linking the provider's product is the
 * whole opt-in: stores created afterwards trace through it with no code. A process that links no provider pays
 * nothing: no library is loaded and no thread is started. */

#ifdef __cplusplus
extern "C" {
#endif

/* Every pointer here is non-null unless marked otherwise: Swift then calls the table's functions without a nil check. */
#pragma clang assume_nonnull begin

/* Bumped when the table's layout changes; the core ignores a provider of another version. */
#define KATANA_TRACE_PROVIDER_ABI 5

struct katana_trace_provider {
    uint32_t abi;                  /* KATANA_TRACE_PROVIDER_ABI */
    const char *name;              /* e.g. "lttng-ust" */
    /* Non-zero when any of the provider's events is being recorded. Called once per dispatch: keep it cheap. */
    int (*any_enabled)(void);
    void (*dispatch_enqueue)(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                             uint8_t queue, uint32_t queue_depth);
    void (*dispatch_begin)(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                           uint8_t queue, uint32_t parallelism);
    void (*dispatch_end)(uint64_t id, uint8_t kind, const char *name, uint8_t queue, uint8_t outcome);
    /* An updater applied inline, as one event at its end (enqueue = begin = now − duration_ns). `name` need not be
     * NUL-terminated: `name_length` bytes are recorded. */
    void (*updater_inline)(uint64_t id, uint64_t parent_id, const char *name, uint32_t name_length,
                           uint32_t parallelism, uint64_t duration_ns, uint8_t outcome);
    void (*store_ready)(uint64_t store_id, const char *state_type);
    void (*listeners_notified)(uint64_t store_id, uint32_t changes, uint32_t listeners);
    void (*transition_begin)(uint64_t transition_id, const char *name);
    void (*transition_end)(uint64_t transition_id, const char *name, uint8_t outcome);
    void (*interval_begin)(uint64_t interval_id, uint64_t parent_id, const char *name);
    void (*interval_end)(uint64_t interval_id, const char *name, uint8_t outcome);
    void (*budget_exceeded)(uint64_t id, uint8_t kind, const char *name, uint64_t budget_ns, uint64_t actual_ns);
    /* Non-zero when interval_begin or interval_end is being recorded: the check a user interval makes, cheaper
     * than any_enabled (two flags instead of every event's). */
    int (*intervals_enabled)(void);
};

/* Durations of a few hundred nanoseconds, measured cheaply: a start token from `katana_duration_start`, then
 * `katana_duration_ns(token)` at the end. On x86-64 with an invariant TSC (constant_tsc and nonstop_tsc) and on
 * AArch64 the token is a tick count read in one instruction (x86-64: ~11 ns here against clock_gettime's ~27 ns),
 * converted with a rate calibrated against CLOCK_MONOTONIC once at least 20 ms have passed since the first use
 * (AArch64: the counter's own frequency); until then, and anywhere else, it is CLOCK_MONOTONIC nanoseconds. The top
 * bit of a token says which (ticks when set). */
uint64_t katana_duration_start_slow(void);
uint64_t katana_duration_ns_slow(uint64_t token);
/* Nanoseconds per tick once calibrated (a double's bits), else 0. Accessed atomically. */
extern uint64_t katana_ns_per_tick_bits;

static inline uint64_t katana_ticks(void) {
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
    uint64_t value;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(value));
    return value;
#else
    return 0;
#endif
}

static inline uint64_t katana_duration_start(void) {
    if (__atomic_load_n(&katana_ns_per_tick_bits, __ATOMIC_RELAXED) != 0)
        return katana_ticks() | (UINT64_C(1) << 63);
    return katana_duration_start_slow();
}

static inline uint64_t katana_duration_ns(uint64_t token) {
    if (token >> 63) {
        uint64_t bits = __atomic_load_n(&katana_ns_per_tick_bits, __ATOMIC_RELAXED);
        double per_tick;
        __builtin_memcpy(&per_tick, &bits, sizeof per_tick);
        uint64_t ticks = (katana_ticks() - (token & ~(UINT64_C(1) << 63))) & ~(UINT64_C(1) << 63);
        return (uint64_t)((double)ticks * per_tick);
    }
    return katana_duration_ns_slow(token);
}

/* The futex calls behind the engine's lock and its condition (`Lock`, whose words Swift's atomics change): only a
 * lock that another thread holds, or a producer waiting for room in a full lane, sleeps here. `syscall` is variadic,
 * which Swift cannot call. */
static inline void katana_futex_wait(void *word, uint32_t expected) {
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, (void *)0, (void *)0, 0);
}
/* Sleeps while `*word == expected`, at most `nanoseconds` (a relative timeout: the kernel measures it on the monotonic
 * clock). 0: woken, or the word had changed already, or interrupted (a spurious wake-up: callers loop); 1: timed out. */
static inline int katana_futex_wait_for(void *word, uint32_t expected, uint64_t nanoseconds) {
    struct timespec timeout = { (time_t)(nanoseconds / 1000000000u), (long)(nanoseconds % 1000000000u) };
    long rc = syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, &timeout, (void *)0, 0);
    return rc != 0 && errno == ETIMEDOUT;
}
static inline void katana_futex_wake_one(void *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, (void *)0, (void *)0, 0);
}
static inline void katana_futex_wake_all(void *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, (void *)0, (void *)0, 0);
}

/* A spin-wait hint: lets the core the waiter shares run, and keeps its polling off the line it watches. */
static inline void katana_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Process-unique, non-zero ids for dispatches, transitions and stores. Each thread takes a block of KATANA_ID_BLOCK
 * ids from one shared counter and hands them out itself: a traced dispatch then makes no read-modify-write on a line
 * every dispatching thread shares (two producers contended on it: `katana-bench micro --backend metrics`). Ids are
 * unique, not in time order across threads. */
#define KATANA_ID_BLOCK 1024
extern __thread uint64_t katana_id_next __attribute__((tls_model("initial-exec")));
extern __thread uint64_t katana_id_end __attribute__((tls_model("initial-exec")));
uint64_t katana_id_refill(void);

static inline uint64_t katana_next_id(void) {
    uint64_t id = katana_id_next;
    if (__builtin_expect(id != katana_id_end, 1)) {
        katana_id_next = id + 1;
        return id;
    }
    return katana_id_refill();
}

/* Each thread's last type names (TraceName.of): a direct-mapped table from a type's metadata address to its interned
 * name's storage (immortal, so held without a reference count), in thread-local storage reached from the thread
 * pointer — no pthread_getspecific call per traced dispatch. */
#define KATANA_NAME_CACHE_SLOTS 64
extern __thread uintptr_t katana_name_cache_keys[KATANA_NAME_CACHE_SLOTS] __attribute__((tls_model("initial-exec")));
extern __thread const void *_Nullable katana_name_cache_values[KATANA_NAME_CACHE_SLOTS] __attribute__((tls_model("initial-exec")));

static inline unsigned katana_name_cache_slot(uintptr_t key) {
    /* Type metadata are word-aligned: mix bits above the alignment into a slot. */
    return (unsigned)((key >> 4) ^ (key >> 10)) & (KATANA_NAME_CACHE_SLOTS - 1);
}

static inline const void *_Nullable katana_name_cache_get(uintptr_t key) {
    unsigned slot = katana_name_cache_slot(key);
    return katana_name_cache_keys[slot] == key ? katana_name_cache_values[slot] : NULL;
}

static inline void katana_name_cache_put(uintptr_t key, const void *value) {
    unsigned slot = katana_name_cache_slot(key);
    katana_name_cache_keys[slot] = key;
    katana_name_cache_values[slot] = value;
}

/* The run through a store's interceptor closures in progress on this thread (Katana's InterceptionFrame), or NULL:
 * how the closure chain's last `next`, composed once, finds the run it ends. Thread-local storage reached from the
 * thread pointer: two loads and a store per run where pthread_getspecific/setspecific were three calls. */
extern __thread void *_Nullable katana_interception_frame __attribute__((tls_model("initial-exec")));

static inline void *_Nullable katana_current_interception_frame(void) { return katana_interception_frame; }

static inline void katana_set_interception_frame(void *_Nullable frame) { katana_interception_frame = frame; }

/* This thread's id for the engine (a lane's holder, a lock's holder, a producer's flood-policy slot): the address of a
 * thread-local byte, unique among live threads and never 0. It replaces pthread_self() there, a call into libc through
 * the PLT on every dispatch, twice through interceptors (whose state lock asks again): `katana-bench micro`, same
 * run, fire-and-forget 12.6-12.8 -> 11.2-11.4 ns, 3 closure interceptors +36.3..+37.4 -> +30.2..+30.3 ns over none.
 * Always inlined, in debug builds too: no function of its own in the dispatch walks (`make walk`). */
extern __thread char katana_thread_marker __attribute__((tls_model("initial-exec")));

static inline __attribute__((always_inline)) uintptr_t katana_thread_id(void) {
    return (uintptr_t)&katana_thread_marker;
}

/* Makes `provider` (which must live for the whole process) this process's native provider. The first
 * registration wins; returns 0 then, -1 if another provider was registered first, -2 for a table of another ABI. */
int katana_trace_register_provider(const struct katana_trace_provider *provider);

/* The registered provider, or NULL when no provider is linked into this process. */
const struct katana_trace_provider *_Nullable katana_trace_registered_provider(void);

#pragma clang assume_nonnull end

/// CLOCK_MONOTONIC in nanoseconds.
uint64_t katana_monotonic_ns(void);

/// A tick count and the monotonic time at the same moment: the tick read bracketed by two clock reads, the tightest
/// of a few tries. Returns 0 when no try was bracketed within 20 µs (the values are the best try's still). What the
/// duration clock calibrates with, and the flight recorder maps its ticks to time with.
int katana_clock_pair(uint64_t *_Nonnull ticks, uint64_t *_Nonnull ns);

/// Names the calling thread for `top`, `perf` and traces (at most 15 bytes are kept): Katana's own threads (a
/// dispatch log's writer, the flight recorder's dumper).
void katana_name_this_thread(const char *_Nonnull name);

#ifdef __cplusplus
}
#endif

#endif
