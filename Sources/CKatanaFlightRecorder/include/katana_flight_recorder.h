#ifndef KATANA_FLIGHT_RECORDER_H
#define KATANA_FLIGHT_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#pragma clang assume_nonnull begin

/* Katana's in-process flight recorder: every thread records into a ring buffer of its own (no lock, no system call
   on the recording path), and a dump writes the rings' recent events as a CTF 1.8 trace in LTTng-UST's `katana:*`
   layout, which katana-trace, babeltrace2 and Trace Compass read. */

enum {
    KATANA_FR_ENQUEUE, KATANA_FR_BEGIN, KATANA_FR_END, KATANA_FR_INLINE, KATANA_FR_BUDGET, KATANA_FR_INTERVAL_BEGIN,
    KATANA_FR_INTERVAL_END, KATANA_FR_TRANSITION_BEGIN, KATANA_FR_TRANSITION_END, KATANA_FR_STORE_READY,
    KATANA_FR_LISTENERS_NOTIFIED, KATANA_FR_EVENT_COUNT
};

/* Sets the recorder up: at most `total_bytes` for the records of all threads, handed to them in segments as they
   record (a thread past the total, when every segment is another thread's current one, records nothing: counted as
   discarded). Later calls change nothing. */
void katana_fr_configure(size_t total_bytes);

/* The most records the recorder keeps, all threads together. */
uint64_t katana_fr_capacity(void);

/* Records one event on the calling thread's ring. `name` must live as long as the process (interned names).
   Fields by event: enqueue (id, parent, kind, name, queue, b = queue depth); begin (id, parent, kind, name, queue,
   b = parallelism); end (id, kind, name, queue, outcome); inline (id, parent, name, b = parallelism, a = duration,
   outcome, kind | queue << 8 = listeners handed its change; timestamp `at` = its end, 0: now); budget (id, kind, name, a = budget, parent = actual); interval and
   transition begin/end (id, parent, name, outcome); store ready (id = store, name = state type); listeners
   notified (id = store, a = changes, b = listeners). `at`: a `katana_duration_start` token, 0 for now.
   A thread's events outlive it (still dumped) until they are the oldest and their memory is taken for newer ones. */
void katana_fr_record(uint8_t event, uint64_t at, uint64_t id, uint64_t parent, const char *_Nullable name, uint64_t a,
                      uint32_t b, uint8_t kind, uint8_t queue, uint8_t outcome);

/* An updater applied inline, recorded at its end with its start token (from `katana_duration_start`): the one event
   of a recorded fire-and-forget dispatch, its duration worked out when a dump writes it (no clock read but the end's).
   `listeners`: how many its change was handed to, kept in the record's kind and queue bytes (up to 65,535) for
   `katana_fr_visit` — the dump's `updater_inline` (LTTng's layout) has no field for it. */
void katana_fr_updater_inline_since(uint64_t id, uint64_t parent, const char *name, uint32_t parallelism,
                                    uint64_t started, uint8_t outcome, uint32_t listeners);

/* The same, its duration already measured (a backend's `updaterInline` event), recorded now. */
void katana_fr_updater_inline(uint64_t id, uint64_t parent, const char *name, uint32_t parallelism,
                              uint64_t duration_ns, uint8_t outcome, uint32_t listeners);

/* For benchmarks: nanoseconds taken by `count` records of what a recorded inline updater cannot do without (two
   clock reads and one record stored into a per-thread ring). */
uint64_t katana_fr_floor(uint64_t count);

/* Writes the rings' events as a CTF trace into the directory `path` (created; it must not exist or be empty).
   Recording goes on meanwhile: events overwritten during the copy are left out. Returns 0, or -1 with one line in
   `error` and nothing left behind (no partial trace). `written`: the events written. */
int katana_fr_dump(const char *path, uint64_t *written, char *error, size_t error_size);

/* One recent event as `katana_fr_visit` hands it: the fields of `katana_fr_record` (an inline updater's `a` is its
   duration), its timestamp in CLOCK_MONOTONIC nanoseconds and its thread. */
typedef struct {
    uint64_t timestamp_ns, id, parent, a;
    const char *_Nullable name;
    uint32_t b;
    int32_t tid;
    uint8_t event, kind, queue, outcome;
} katana_fr_event;

typedef void (*katana_fr_visitor)(const katana_fr_event *event, void *_Nullable context);

/* The events a dump would write, handed to `visit` in memory instead: ring by ring, each ring's oldest first — or only
   each ring's `newest` most recent (0: all). Recording goes on meanwhile (what a thread overwrites during the copy is
   left out). `now_ns`: CLOCK_MONOTONIC at the copy. Returns the events visited, or -1 when the copy's memory could not
   be had. */
int64_t katana_fr_visit(katana_fr_visitor visit, void *_Nullable context, uint64_t newest, uint64_t *now_ns);

/* Makes `signal` ask for a dump: its handler writes the signal's number to a pipe, whose read end it returns (the
   same for every signal); -1 with one line in `error` on failure. `katana_fr_next_signal` blocks until the next such
   signal and returns its number (-1 when the pipe fails). */
int katana_fr_watch_signal(int signal, char *error, size_t error_size);
int katana_fr_next_signal(int fd);

/* Events recorded so far on all threads, and events lost for want of a ring. */
void katana_fr_counts(uint64_t *recorded, uint64_t *discarded);

#pragma clang assume_nonnull end

#endif
