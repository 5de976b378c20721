#include "CLTTng.h"

#ifdef KATANA_LTTNG

#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "katana_tp.h"

int katana_lttng_compiled_in(void) { return 1; }

int katana_lttng_any_enabled(void) {
    return lttng_ust_tracepoint_enabled(katana, dispatch_enqueue)
        | lttng_ust_tracepoint_enabled(katana, dispatch_begin)
        | lttng_ust_tracepoint_enabled(katana, dispatch_end)
        | lttng_ust_tracepoint_enabled(katana, store_ready)
        | lttng_ust_tracepoint_enabled(katana, listeners_notified)
        | lttng_ust_tracepoint_enabled(katana, transition_begin)
        | lttng_ust_tracepoint_enabled(katana, transition_end);
}

void katana_lttng_dispatch_enqueue(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                   uint8_t queue, uint32_t queue_depth) {
    if (lttng_ust_tracepoint_enabled(katana, dispatch_enqueue))
        lttng_ust_do_tracepoint(katana, dispatch_enqueue, id, parent_id, kind, name, queue, queue_depth);
}

void katana_lttng_dispatch_begin(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                 uint8_t queue, uint32_t parallelism) {
    if (lttng_ust_tracepoint_enabled(katana, dispatch_begin))
        lttng_ust_do_tracepoint(katana, dispatch_begin, id, parent_id, kind, name, queue, parallelism);
}

void katana_lttng_dispatch_end(uint64_t id, uint8_t kind, const char *name, uint8_t queue, uint8_t outcome) {
    if (lttng_ust_tracepoint_enabled(katana, dispatch_end))
        lttng_ust_do_tracepoint(katana, dispatch_end, id, kind, name, queue, outcome);
}

void katana_lttng_store_ready(uint64_t store_id, const char *state_type) {
    if (lttng_ust_tracepoint_enabled(katana, store_ready))
        lttng_ust_do_tracepoint(katana, store_ready, store_id, state_type);
}

void katana_lttng_listeners_notified(uint64_t store_id, uint32_t changes, uint32_t listeners) {
    if (lttng_ust_tracepoint_enabled(katana, listeners_notified))
        lttng_ust_do_tracepoint(katana, listeners_notified, store_id, changes, listeners);
}

void katana_lttng_transition_begin(uint64_t transition_id, const char *name) {
    if (lttng_ust_tracepoint_enabled(katana, transition_begin))
        lttng_ust_do_tracepoint(katana, transition_begin, transition_id, name, 0);
}

void katana_lttng_transition_end(uint64_t transition_id, const char *name, uint8_t outcome) {
    if (lttng_ust_tracepoint_enabled(katana, transition_end))
        lttng_ust_do_tracepoint(katana, transition_end, transition_id, name, outcome);
}

#else /* built without the LTTng trait: every entry point is a no-op */

int katana_lttng_compiled_in(void) { return 0; }
int katana_lttng_any_enabled(void) { return 0; }
void katana_lttng_dispatch_enqueue(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                   uint8_t queue, uint32_t queue_depth) {
    (void)id; (void)parent_id; (void)kind; (void)name; (void)queue; (void)queue_depth;
}
void katana_lttng_dispatch_begin(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                 uint8_t queue, uint32_t parallelism) {
    (void)id; (void)parent_id; (void)kind; (void)name; (void)queue; (void)parallelism;
}
void katana_lttng_dispatch_end(uint64_t id, uint8_t kind, const char *name, uint8_t queue, uint8_t outcome) {
    (void)id; (void)kind; (void)name; (void)queue; (void)outcome;
}
void katana_lttng_store_ready(uint64_t store_id, const char *state_type) { (void)store_id; (void)state_type; }
void katana_lttng_listeners_notified(uint64_t store_id, uint32_t changes, uint32_t listeners) {
    (void)store_id; (void)changes; (void)listeners;
}
void katana_lttng_transition_begin(uint64_t transition_id, const char *name) { (void)transition_id; (void)name; }
void katana_lttng_transition_end(uint64_t transition_id, const char *name, uint8_t outcome) {
    (void)transition_id; (void)name; (void)outcome;
}

#endif
