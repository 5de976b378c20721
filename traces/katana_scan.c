/*
 * katana_scan — the package's CTF reader (Sources/CKatanaCTF/katana_ctf.c, which `katana-trace analyze` runs
 * in-process) as a command for katana_trace.py, which builds this file on first use with any C compiler:
 *
 *   katana_scan analyze TRACE_DIR [--top N] [--begin S] [--end S] [--min-duration NS] [--progress-fd FD]
 *
 * It writes the analysis report as JSON on standard output. Exit status: 0 report written; 3 this trace is not read
 * here (reason on standard error, one line); 64 bad usage.
 */
#include "../Sources/CKatanaCTF/katana_ctf.c"

static void usage(void) {
    fprintf(stderr, "usage: katana_scan analyze TRACE_DIR [--top N] [--begin S] [--end S] [--min-duration NS] "
                    "[--progress-fd FD]\n");
    exit(64);
}

static double seconds_argument(const char *text) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || *end || !isfinite(v) || v < 0) usage();
    return v;
}

static long long integer_argument(const char *text, long long low, long long high) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || *end || v < low || v > high) usage();
    return v;
}

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[1], "analyze") != 0) usage();
    katana_ctf_options given = {.progress_fd = -1};
    for (int i = 3; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *o = argv[i], *v = argv[++i];
        if (strcmp(o, "--top") == 0) given.top = (int)integer_argument(v, 1, 100000);
        else if (strcmp(o, "--begin") == 0) { given.has_begin = 1; given.begin_s = seconds_argument(v); }
        else if (strcmp(o, "--end") == 0) { given.has_end = 1; given.end_s = seconds_argument(v); }
        else if (strcmp(o, "--min-duration") == 0) given.min_duration_ns = integer_argument(v, 0, INT64_MAX);
        else if (strcmp(o, "--progress-fd") == 0) given.progress_fd = (int)integer_argument(v, 0, 1 << 20);
        else usage();
    }
    char error[1024];
    if (katana_ctf_analyze(argv[2], &given, stdout, error, sizeof error) != 0) {
        fprintf(stderr, "katana_scan: %s\n", error);
        return 3;
    }
    return 0;
}
