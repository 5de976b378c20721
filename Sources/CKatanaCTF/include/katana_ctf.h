#ifndef KATANA_CTF_H
#define KATANA_CTF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
} katana_ctf_options;

/* Reads the LTTng-UST CTF trace(s) under `root` and writes the analysis report, one JSON document, to `out`.
   Returns 0, or 3 with one line in `error` when the trace is not read here (damaged, or a construct this reader
   does not know: babeltrace2 is the reference reader). One analysis per process: the reader keeps its state in
   statics and frees nothing (a second call returns 3). */
int katana_ctf_analyze(const char *root, const katana_ctf_options *options, FILE *out, char *error,
                       size_t error_size);

#endif
