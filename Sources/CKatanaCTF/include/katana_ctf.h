#ifndef KATANA_CTF_H
#define KATANA_CTF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Called every KATANA_CTF_PROGRESS_EVERY katana events with the count so far (`katana_ctf_bytes` tells how much of
   the trace that is). */
typedef void (*katana_ctf_progress_handler)(uint64_t events, void *context);
#define KATANA_CTF_PROGRESS_EVERY 524288

/* Bytes of the trace's data streams read so far (to the end of the packets begun), and in all. */
void katana_ctf_bytes(uint64_t *read, uint64_t *total);

/* What `katana-trace analyze` keeps and lists (see its --help). */
typedef struct katana_ctf_options {
    /* The N longest dispatches to list (0: none). */
    int top;
    /* Keep dispatches that began at least `begin_s` (at most `end_s`) seconds after the trace's first event. */
    int has_begin, has_end;
    double begin_s, end_s;
    /* Keep dispatches whose service took at least this long. */
    int64_t min_duration_ns;
    /* A descriptor to write one '.' to every 20,000 events (progress), or -1. */
    int progress_fd;
    /* Progress for a person (or NULL), and what it is handed. */
    katana_ctf_progress_handler progress;
    void *progress_context;
    /* Keep only dispatches that began within one of these windows: `window_count` pairs of seconds after the trace's
       first event, from and to (0: no such limit). */
    const double *windows;
    int window_count;
    /* Keep only dispatches of these types (their names as recorded), and no intervals or transitions; 0: all. */
    const char *const *types;
    int type_count;
} katana_ctf_options;

/* Reads the LTTng-UST CTF trace(s) under `root` and writes the analysis report, one JSON document, to `out`.
   Returns 0; 3 with one line in `error` when the trace is damaged; 4 with one line when it uses a sound construct
   this reader does not know (floating-point fields, typedef, several clocks, …: babeltrace2, the reference reader,
   may read it). One analysis per process: the reader keeps its state in statics and frees nothing (a second call
   returns 3). */
int katana_ctf_analyze(const char *root, const katana_ctf_options *options, FILE *out, char *error,
                       size_t error_size);

/* What a katana event is (its LTTng name without the provider is in `event`). */
enum {
    KATANA_CTF_OTHER, KATANA_CTF_ENQUEUE, KATANA_CTF_BEGIN, KATANA_CTF_END, KATANA_CTF_BUDGET,
    KATANA_CTF_INTERVAL_BEGIN, KATANA_CTF_INTERVAL_END, KATANA_CTF_TRANSITION_BEGIN, KATANA_CTF_TRANSITION_END,
    KATANA_CTF_INLINE
};

/* A payload field of a katana event that the struct below has no member for (queue_depth, store_id, state_type,
   …): an integer, or text (a string, or an enum's label). */
typedef struct katana_ctf_field {
    const char *name;
    int is_text, is_signed;
    uint64_t value;
    const char *text;
} katana_ctf_field;

/* One katana event, decoded. Strings are NUL-terminated and live until the process ends; absent ones are NULL. */
typedef struct katana_ctf_event {
    int role;
    const char *event;
    int64_t timestamp_ns;
    /* The dispatch's id, or the interval's or transition's. */
    uint64_t id;
    uint64_t parent_id;
    int has_parent_id;
    /* The dispatched type's name, or the interval's or transition's. */
    const char *name;
    const char *kind, *queue, *outcome;
    int64_t parallelism;
    int has_parallelism;
    uint64_t duration_ns, budget_ns, actual_ns;
    int has_vpid, has_vtid;
    int64_t vpid, vtid;
    /* The thread's name (LTTng's `procname` context), when recorded. */
    const char *procname;
    /* Each string's id in the reader's table (0: absent): equal strings have equal ids, so a consumer can key
       on these instead of hashing the text. Ids are small, dense and below katana_ctf_string_count(). */
    uint32_t event_id, name_id, kind_id, queue_id, outcome_id, procname_id;
    /* The event's other payload fields, in their declared order (valid during the handler's call only). */
    const katana_ctf_field *extra;
    int extra_count;
    /* A field the event's role needs that its class does not declare (NULL: none): valid CTF, read and dumped as it
       is (the field absent, 0 above), but nothing can be analysed from it. The analysis refuses such an event. */
    const char *missing;
} katana_ctf_event;

/* Limits the next read to a time range, in seconds after the trace's first event (the earliest of its streams' first
   events): packets that end before `from_s` are skipped without reading their events (their headers are still
   checked), no event before `from_s` is handed on, and the read ends with the first event after `to_s`. */
void katana_ctf_set_range(int has_from, double from_s, int has_to, double to_s);
/* The trace's first event's time (an inline updater's beginning), once a read with a range has begun: 1, else 0. */
int katana_ctf_origin(int64_t *origin);
/* The packets (and their bytes) the range let the read skip. */
void katana_ctf_skipped(uint64_t *packets, uint64_t *bytes);

/* How many string ids there are so far (ids are below it). */
uint32_t katana_ctf_string_count(void);

/* Called for every katana event in timestamp order; return nonzero to end the read there. */
typedef int (*katana_ctf_event_handler)(const katana_ctf_event *event, void *context);

/* Reads the trace(s) under `root` and hands each katana event to `handler`. Returns 0 (with the events the tracer
   discarded in `discarded`), or 3 or 4 with one line in `error`, as `katana_ctf_analyze` does. One read per process. */
int katana_ctf_read(const char *root, katana_ctf_event_handler handler, void *context, uint64_t *discarded,
                    char *error, size_t error_size);

/* The analysis of `katana_ctf_analyze` over events read elsewhere (babeltrace2's, when this reader declines a
   trace): begin, add each katana event in timestamp order (its role, timestamp, numbers and strings are read; string
   ids are ignored), end with the events the tracer discarded; the report says `"reader": "babeltrace2"`. `root`
   names the trace in messages. Each returns 0, or 3 with one line in `error` (then stop). One analysis per process,
   as above (begin is allowed after katana_ctf_analyze declined a trace). */
int katana_ctf_analysis_begin(const char *root, const katana_ctf_options *options, char *error, size_t error_size);
int katana_ctf_analysis_add(const katana_ctf_event *event, char *error, size_t error_size);
int katana_ctf_analysis_end(uint64_t discarded, FILE *out, char *error, size_t error_size);

#endif
