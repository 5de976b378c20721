#define _GNU_SOURCE
#include "CKatanaTraceProvider.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Written once (normally from a provider's constructor, before main), read by any thread: C11 atomics with
 * release/acquire order, which ThreadSanitizer understands. */
static const struct katana_trace_provider *registered = NULL;

int katana_trace_register_provider(const struct katana_trace_provider *provider) {
    if (provider == NULL || provider->abi != KATANA_TRACE_PROVIDER_ABI) return -2;
    const struct katana_trace_provider *expected = NULL;
    return __atomic_compare_exchange_n(&registered, &expected, provider, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) ? 0 : -1;
}

const struct katana_trace_provider *katana_trace_registered_provider(void) {
    return __atomic_load_n(&registered, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------------------------------ ids */

static uint64_t id_counter; /* ids handed out in blocks so far; accessed atomically */
__thread uint64_t katana_id_next __attribute__((tls_model("initial-exec")));
__thread uint64_t katana_id_end __attribute__((tls_model("initial-exec")));

uint64_t katana_id_refill(void) {
    uint64_t first = __atomic_fetch_add(&id_counter, KATANA_ID_BLOCK, __ATOMIC_RELAXED) + 1; /* never 0 */
    katana_id_next = first + 1;
    katana_id_end = first + KATANA_ID_BLOCK;
    return first;
}

__thread uintptr_t katana_name_cache_keys[KATANA_NAME_CACHE_SLOTS] __attribute__((tls_model("initial-exec")));
__thread const void *katana_name_cache_values[KATANA_NAME_CACHE_SLOTS] __attribute__((tls_model("initial-exec")));

__thread void *katana_interception_frame __attribute__((tls_model("initial-exec")));
__thread char katana_thread_marker __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------------------------------------ short durations */

uint64_t katana_ns_per_tick_bits = 0;

uint64_t katana_monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Whether the tick counter is usable as a clock: x86-64 with an invariant TSC (the kernel's flags say so), or
 * AArch64's generic timer. Set once, with the calibration's first point. */
static int ticks_usable;
static uint64_t first_ticks, first_ns;
static pthread_once_t ticks_once = PTHREAD_ONCE_INIT;

static int tsc_invariant(void) {
#if defined(__x86_64__)
    FILE *cpuinfo = fopen("/proc/cpuinfo", "r");
    if (!cpuinfo) return 0;
    char line[8192];
    int constant = 0, nonstop = 0;
    while (fgets(line, sizeof line, cpuinfo)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        constant = strstr(line, " constant_tsc") != NULL;
        nonstop = strstr(line, " nonstop_tsc") != NULL;
        break;
    }
    fclose(cpuinfo);
    return constant && nonstop;
#elif defined(__aarch64__)
    return 1;
#else
    return 0;
#endif
}

static void store_rate(double per_tick) {
    uint64_t bits;
    memcpy(&bits, &per_tick, sizeof bits);
    __atomic_store_n(&katana_ns_per_tick_bits, bits, __ATOMIC_RELAXED);
}

/* A tick count and the CLOCK_MONOTONIC time at the same instant: the tick read bracketed by two clock reads, the
 * tightest of a few tries (a thread preempted between the reads would otherwise skew the rate by the time it lost).
 * Returns 0 when no try was bracketed within 20 µs. */
int katana_clock_pair(uint64_t *ticks, uint64_t *ns) {
    uint64_t best = UINT64_MAX;
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t before = katana_monotonic_ns(), now = katana_ticks(), after = katana_monotonic_ns();
        if (after - before < best) {
            best = after - before;
            *ticks = now;
            *ns = before + (after - before) / 2;
        }
        if (best < 2000) break;
    }
    return best < 20000;
}

static void ticks_init(void) {
    ticks_usable = tsc_invariant() && katana_clock_pair(&first_ticks, &first_ns);
    if (!ticks_usable) return;
#if defined(__aarch64__)
    uint64_t frequency;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(frequency));
    if (frequency) store_rate(1e9 / (double)frequency);
#endif
}

/* Not calibrated yet: a CLOCK_MONOTONIC token (top bit clear). The first call takes the calibration's first point;
 * a call 20 ms or more later sets the rate and returns a tick token (racing callers each compute one; they differ by parts per million). */
uint64_t katana_duration_start_slow(void) {
    pthread_once(&ticks_once, ticks_init);
    uint64_t now = katana_monotonic_ns();
    if (ticks_usable && now - first_ns >= 20000000u) {
        uint64_t ticks, ns;
        if (katana_clock_pair(&ticks, &ns) && ticks > first_ticks && ns > first_ns) {
            store_rate((double)(ns - first_ns) / (double)(ticks - first_ticks));
            return ticks | (UINT64_C(1) << 63);  /* the call that calibrates already measures in ticks */
        }
    }
    return now & ~(UINT64_C(1) << 63);
}

uint64_t katana_duration_ns_slow(uint64_t token) {
    uint64_t now = katana_monotonic_ns() & ~(UINT64_C(1) << 63);
    return now >= token ? now - token : 0;
}

void katana_name_this_thread(const char *name) {
    char shortened[16];
    strncpy(shortened, name, sizeof shortened - 1);
    shortened[sizeof shortened - 1] = '\0';
    pthread_setname_np(pthread_self(), shortened);
}
