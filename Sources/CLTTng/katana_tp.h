/* The `katana` LTTng-UST tracepoint provider. Private to CLTTng: included by katana_tp.c only. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER katana

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "katana_tp.h"

#if !defined(KATANA_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define KATANA_TP_H

#include <lttng/tracepoint.h>
#include <stdint.h>

LTTNG_UST_TRACEPOINT_ENUM(katana, kind,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("state_updater", 0)
        lttng_ust_field_enum_value("side_effect", 1)
    )
)

LTTNG_UST_TRACEPOINT_ENUM(katana, queue,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("updater_inline", 0)
        lttng_ust_field_enum_value("updater_queue", 1)
        lttng_ust_field_enum_value("side_effect_pool", 2)
        lttng_ust_field_enum_value("held", 3)
    )
)

LTTNG_UST_TRACEPOINT_ENUM(katana, outcome,
    LTTNG_UST_TP_ENUM_VALUES(
        lttng_ust_field_enum_value("ok", 0)
        lttng_ust_field_enum_value("error", 1)
        lttng_ust_field_enum_value("blocked", 2)
        lttng_ust_field_enum_value("applied_with_error", 3)
        lttng_ust_field_enum_value("cancelled", 4)
    )
)

/* enqueue: `dispatch` was called; queue_depth = updaters waiting in the lane at that moment. */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(katana, dispatch_enqueue_class,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint64_t, parent_id, uint8_t, kind, const char *, name,
                      uint8_t, queue, uint32_t, queue_depth),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, id, id)
        lttng_ust_field_integer(uint64_t, parent_id, parent_id)
        lttng_ust_field_enum(katana, kind, uint8_t, kind, kind)
        lttng_ust_field_string(name, name)
        lttng_ust_field_enum(katana, queue, uint8_t, queue, queue)
        lttng_ust_field_integer(uint32_t, queue_depth, queue_depth)
    )
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(katana, dispatch_enqueue_class, katana, dispatch_enqueue,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint64_t, parent_id, uint8_t, kind, const char *, name,
                      uint8_t, queue, uint32_t, queue_depth))
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, dispatch_enqueue, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* begin: the updater is applied / the side effect body starts; parallelism = side effects in flight. */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(katana, dispatch_begin_class,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint64_t, parent_id, uint8_t, kind, const char *, name,
                      uint8_t, queue, uint32_t, parallelism),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, id, id)
        lttng_ust_field_integer(uint64_t, parent_id, parent_id)
        lttng_ust_field_enum(katana, kind, uint8_t, kind, kind)
        lttng_ust_field_string(name, name)
        lttng_ust_field_enum(katana, queue, uint8_t, queue, queue)
        lttng_ust_field_integer(uint32_t, parallelism, parallelism)
    )
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(katana, dispatch_begin_class, katana, dispatch_begin,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint64_t, parent_id, uint8_t, kind, const char *, name,
                      uint8_t, queue, uint32_t, parallelism))
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, dispatch_begin, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* end: the updater was applied or rejected / the side effect returned or threw. */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(katana, dispatch_end_class,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint8_t, kind, const char *, name, uint8_t, queue, uint8_t, outcome),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, id, id)
        lttng_ust_field_enum(katana, kind, uint8_t, kind, kind)
        lttng_ust_field_string(name, name)
        lttng_ust_field_enum(katana, queue, uint8_t, queue, queue)
        lttng_ust_field_enum(katana, outcome, uint8_t, outcome, outcome)
    )
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(katana, dispatch_end_class, katana, dispatch_end,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint8_t, kind, const char *, name, uint8_t, queue, uint8_t, outcome))
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, dispatch_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* An updater applied inline (on the dispatching thread, which found the lane idle), recorded as ONE event at its
 * end instead of enqueue + begin + end: its enqueue and begin are at (this event's time − duration_ns), its kind is
 * state_updater, its queue updater_inline, the queue depth 0. The name is a text sequence (one copy of known
 * length) rather than a NUL-terminated string; readers see a string either way. */
LTTNG_UST_TRACEPOINT_EVENT(katana, updater_inline,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint64_t, parent_id, const char *, name, uint32_t, name_length,
                      uint32_t, parallelism, uint64_t, duration_ns, uint8_t, outcome),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, id, id)
        lttng_ust_field_integer(uint64_t, parent_id, parent_id)
        lttng_ust_field_sequence_text(char, name, name, uint32_t, name_length)
        lttng_ust_field_integer(uint32_t, parallelism, parallelism)
        lttng_ust_field_integer(uint64_t, duration_ns, duration_ns)
        lttng_ust_field_enum(katana, outcome, uint8_t, outcome, outcome)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, updater_inline, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT_CLASS(katana, store_ready_class,
    LTTNG_UST_TP_ARGS(uint64_t, store_id, const char *, state_type),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, store_id, store_id)
        lttng_ust_field_string(state_type, state_type)
    )
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(katana, store_ready_class, katana, store_ready,
    LTTNG_UST_TP_ARGS(uint64_t, store_id, const char *, state_type))
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, store_ready, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT_CLASS(katana, listeners_notified_class,
    LTTNG_UST_TP_ARGS(uint64_t, store_id, uint32_t, changes, uint32_t, listeners),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, store_id, store_id)
        lttng_ust_field_integer(uint32_t, changes, changes)
        lttng_ust_field_integer(uint32_t, listeners, listeners)
    )
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(katana, listeners_notified_class, katana, listeners_notified,
    LTTNG_UST_TP_ARGS(uint64_t, store_id, uint32_t, changes, uint32_t, listeners))
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, listeners_notified, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

LTTNG_UST_TRACEPOINT_EVENT_CLASS(katana, transition_class,
    LTTNG_UST_TP_ARGS(uint64_t, transition_id, const char *, name, uint8_t, outcome),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, transition_id, transition_id)
        lttng_ust_field_string(name, name)
        lttng_ust_field_enum(katana, outcome, uint8_t, outcome, outcome)
    )
)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(katana, transition_class, katana, transition_begin,
    LTTNG_UST_TP_ARGS(uint64_t, transition_id, const char *, name, uint8_t, outcome))
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, transition_begin, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(katana, transition_class, katana, transition_end,
    LTTNG_UST_TP_ARGS(uint64_t, transition_id, const char *, name, uint8_t, outcome))
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, transition_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* A user interval (SideEffectContext.interval, traceInterval): parent_id = the side effect it runs in (0: none). */
LTTNG_UST_TRACEPOINT_EVENT(katana, interval_begin,
    LTTNG_UST_TP_ARGS(uint64_t, interval_id, uint64_t, parent_id, const char *, name),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, interval_id, interval_id)
        lttng_ust_field_integer(uint64_t, parent_id, parent_id)
        lttng_ust_field_string(name, name)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, interval_begin, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)
LTTNG_UST_TRACEPOINT_EVENT(katana, interval_end,
    LTTNG_UST_TP_ARGS(uint64_t, interval_id, const char *, name, uint8_t, outcome),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, interval_id, interval_id)
        lttng_ust_field_string(name, name)
        lttng_ust_field_enum(katana, outcome, uint8_t, outcome, outcome)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, interval_end, LTTNG_UST_TRACEPOINT_LOGLEVEL_INFO)

/* A dispatch took longer than its type's latency budget (begin → end); emitted just before its dispatch_end. The
 * flight recorder (katana-trace record --flight-recorder) snapshots the session when this event fires. */
LTTNG_UST_TRACEPOINT_EVENT(katana, budget_exceeded,
    LTTNG_UST_TP_ARGS(uint64_t, id, uint8_t, kind, const char *, name, uint64_t, budget_ns, uint64_t, actual_ns),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint64_t, id, id)
        lttng_ust_field_enum(katana, kind, uint8_t, kind, kind)
        lttng_ust_field_string(name, name)
        lttng_ust_field_integer(uint64_t, budget_ns, budget_ns)
        lttng_ust_field_integer(uint64_t, actual_ns, actual_ns)
    )
)
LTTNG_UST_TRACEPOINT_LOGLEVEL(katana, budget_exceeded, LTTNG_UST_TRACEPOINT_LOGLEVEL_WARNING)

#endif /* KATANA_TP_H */

#include <lttng/tracepoint-event.h>
