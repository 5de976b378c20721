#ifndef CKATANA_TRACE_PROVIDER_H
#define CKATANA_TRACE_PROVIDER_H

#include <stdint.h>

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

/* Makes `provider` (which must live for the whole process) this process's native provider. The first
 * registration wins; returns 0 then, -1 if another provider was registered first, -2 for a table of another ABI. */
int katana_trace_register_provider(const struct katana_trace_provider *provider);

/* The registered provider, or NULL when no provider is linked into this process. */
const struct katana_trace_provider *_Nullable katana_trace_registered_provider(void);

#pragma clang assume_nonnull end

#ifdef __cplusplus
}
#endif

#endif
