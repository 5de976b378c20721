#ifndef CLTTNG_H
#define CLTTNG_H

#include <stdint.h>

/* The `katana` LTTng-UST tracepoint provider, as a Katana native trace provider (CKatanaTraceProvider.h).
 * Linked into a process, it registers itself from a constructor, so every store traces to LTTng by default.
 * Built without the LTTng trait it registers nothing and `katana_lttng_provider` returns NULL. */

#include "CKatanaTraceProvider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* This provider's table, or NULL when the LTTng trait is off. */
const struct katana_trace_provider *_Nullable katana_lttng_provider(void);

#ifdef __cplusplus
}
#endif

#endif
