#ifndef CLTTNG_H
#define CLTTNG_H

#include <stdint.h>

/* C entry points over the `katana` LTTng-UST tracepoint provider. Swift cannot expand the tracepoint macros,
 * so each event has one function here. Every function checks `lttng_ust_tracepoint_enabled` first and is a
 * no-op when no session enables the event; built without the LTTng trait they are all no-ops. */

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this build has the LTTng-UST provider compiled in, else 0. */
int katana_lttng_compiled_in(void);

/* Non-zero when any `katana:*` tracepoint is enabled by a session. One call per dispatch. */
int katana_lttng_any_enabled(void);

void katana_lttng_dispatch_enqueue(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                   uint8_t queue, uint32_t queue_depth);
void katana_lttng_dispatch_begin(uint64_t id, uint64_t parent_id, uint8_t kind, const char *name,
                                 uint8_t queue, uint32_t parallelism);
void katana_lttng_dispatch_end(uint64_t id, uint8_t kind, const char *name, uint8_t queue, uint8_t outcome);
void katana_lttng_store_ready(uint64_t store_id, const char *state_type);
void katana_lttng_listeners_notified(uint64_t store_id, uint32_t changes, uint32_t listeners);
void katana_lttng_transition_begin(uint64_t transition_id, const char *name);
void katana_lttng_transition_end(uint64_t transition_id, const char *name, uint8_t outcome);

#ifdef __cplusplus
}
#endif

#endif
