#define _GNU_SOURCE /* on_exit, RTLD_DEFAULT */
#include "CLTTng.h"

#ifdef KATANA_LTTNG

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "katana_tp.h"

static int katana_lttng_any_enabled(void) {
    return lttng_ust_tracepoint_enabled(katana, dispatch_enqueue)
        | lttng_ust_tracepoint_enabled(katana, dispatch_begin)
        | lttng_ust_tracepoint_enabled(katana, dispatch_end)
        | lttng_ust_tracepoint_enabled(katana, updater_inline)
        | lttng_ust_tracepoint_enabled(katana, store_ready)
        | lttng_ust_tracepoint_enabled(katana, listeners_notified)
        | lttng_ust_tracepoint_enabled(katana, transition_begin)
        | lttng_ust_tracepoint_enabled(katana, transition_end)
        | lttng_ust_tracepoint_enabled(katana, interval_begin)
        | lttng_ust_tracepoint_enabled(katana, interval_end)
        | lttng_ust_tracepoint_enabled(katana, budget_exceeded);
}

static void katana_lttng_dispatch_enqueue(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                   uint8_t queue, uint32_t queue_depth) {
    if (lttng_ust_tracepoint_enabled(katana, dispatch_enqueue))
        lttng_ust_do_tracepoint(katana, dispatch_enqueue, id, parent_id, kind, name, queue, queue_depth);
}

static void katana_lttng_dispatch_begin(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                 uint8_t queue, uint32_t parallelism) {
    if (lttng_ust_tracepoint_enabled(katana, dispatch_begin))
        lttng_ust_do_tracepoint(katana, dispatch_begin, id, parent_id, kind, name, queue, parallelism);
}

static void katana_lttng_dispatch_end(uint64_t id, uint8_t kind, const char *name, uint8_t queue, uint8_t outcome) {
    if (lttng_ust_tracepoint_enabled(katana, dispatch_end))
        lttng_ust_do_tracepoint(katana, dispatch_end, id, kind, name, queue, outcome);
}

static void katana_lttng_updater_inline(uint64_t id, uint64_t parent_id, const char *name, uint32_t name_length,
                                        uint32_t parallelism, uint64_t duration_ns, uint8_t outcome) {
    if (lttng_ust_tracepoint_enabled(katana, updater_inline))
        lttng_ust_do_tracepoint(katana, updater_inline, id, parent_id, name, name_length, parallelism, duration_ns, outcome);
}

static void katana_lttng_store_ready(uint64_t store_id, const char *state_type) {
    if (lttng_ust_tracepoint_enabled(katana, store_ready))
        lttng_ust_do_tracepoint(katana, store_ready, store_id, state_type);
}

static void katana_lttng_listeners_notified(uint64_t store_id, uint32_t changes, uint32_t listeners) {
    if (lttng_ust_tracepoint_enabled(katana, listeners_notified))
        lttng_ust_do_tracepoint(katana, listeners_notified, store_id, changes, listeners);
}

static void katana_lttng_transition_begin(uint64_t transition_id, const char *name) {
    if (lttng_ust_tracepoint_enabled(katana, transition_begin))
        lttng_ust_do_tracepoint(katana, transition_begin, transition_id, name, 0);
}

static void katana_lttng_transition_end(uint64_t transition_id, const char *name, uint8_t outcome) {
    if (lttng_ust_tracepoint_enabled(katana, transition_end))
        lttng_ust_do_tracepoint(katana, transition_end, transition_id, name, outcome);
}

static void katana_lttng_interval_begin(uint64_t interval_id, uint64_t parent_id, const char *name) {
    if (lttng_ust_tracepoint_enabled(katana, interval_begin))
        lttng_ust_do_tracepoint(katana, interval_begin, interval_id, parent_id, name);
}

static void katana_lttng_interval_end(uint64_t interval_id, const char *name, uint8_t outcome) {
    if (lttng_ust_tracepoint_enabled(katana, interval_end))
        lttng_ust_do_tracepoint(katana, interval_end, interval_id, name, outcome);
}

static void katana_lttng_budget_exceeded(uint64_t id, uint8_t kind, const char *name, uint64_t budget_ns,
                                         uint64_t actual_ns) {
    if (lttng_ust_tracepoint_enabled(katana, budget_exceeded))
        lttng_ust_do_tracepoint(katana, budget_exceeded, id, kind, name, budget_ns, actual_ns);
}

static int katana_lttng_intervals_enabled(void) {
    return lttng_ust_tracepoint_enabled(katana, interval_begin) | lttng_ust_tracepoint_enabled(katana, interval_end);
}

static const struct katana_trace_provider provider = {
    .abi = KATANA_TRACE_PROVIDER_ABI,
    .name = "lttng-ust",
    .any_enabled = katana_lttng_any_enabled,
    .dispatch_enqueue = katana_lttng_dispatch_enqueue,
    .dispatch_begin = katana_lttng_dispatch_begin,
    .dispatch_end = katana_lttng_dispatch_end,
    .updater_inline = katana_lttng_updater_inline,
    .store_ready = katana_lttng_store_ready,
    .listeners_notified = katana_lttng_listeners_notified,
    .transition_begin = katana_lttng_transition_begin,
    .transition_end = katana_lttng_transition_end,
    .interval_begin = katana_lttng_interval_begin,
    .interval_end = katana_lttng_interval_end,
    .budget_exceeded = katana_lttng_budget_exceeded,
    .intervals_enabled = katana_lttng_intervals_enabled,
};

const struct katana_trace_provider *katana_lttng_provider(void) { return &provider; }

/* Under ThreadSanitizer only: at exit, flush stdio and leave with the process's status before shared libraries'
 * destructors run. liblttng-ust's destructor cancels its listener thread, which, when connected to a session
 * daemon, sits in recvmsg inside TSan's interceptor; the forced unwind skips the interceptor's scope and TSan
 * aborts the process ("thread T1 …-ust finished with ignores enabled", exit 66), replacing its exit status. The
 * trace loses nothing: the session daemon sees the application go, and committed events are in shared memory. */
static void katana_lttng_exit_under_tsan(int status, void *arg) {
    (void)arg;
    fflush(NULL);
    _exit(status);
}

/* Linking this object is the opt-in: it makes LTTng the process's native provider before main runs. Only a
 * pointer is stored here; no Swift code runs in a constructor. */
__attribute__((constructor)) static void katana_lttng_register(void) {
    (void)katana_trace_register_provider(&provider);
    if (dlsym(RTLD_DEFAULT, "__tsan_init") != NULL) (void)on_exit(katana_lttng_exit_under_tsan, NULL);
}

#else /* built without the LTTng trait: no provider */

const struct katana_trace_provider *katana_lttng_provider(void) { return 0; }

#endif
