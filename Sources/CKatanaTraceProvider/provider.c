#include "CKatanaTraceProvider.h"

#include <stddef.h>

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
