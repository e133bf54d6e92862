/* SPDX-License-Identifier: MIT */
/* sluice-bench - benchmark programs (see bench.h); `sluice-bench --help` lists them. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "sluice/cli.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} cmds[] = {
    {"admit", bench_admit, "blocking admissions per second: one per round trip, and batched"},
    {"drain", bench_drain, "messages per second one worker drains with a no-op handler"},
    {"async", bench_async, "async producer admissions per second on one connection"},
    {"scale", bench_scale, "throughput and latency against the number of worker processes"},
    {"e2e", bench_e2e, "admit -> handler start latency percentiles at a fixed offered rate"},
    {"gateway", bench_gateway, "HTTP requests per second and latency against sluice-gateway"},
    {"limit", bench_limit, "rate-limit checks per second per algorithm, and bytes per key"},
    {"deliver", bench_deliver, "HTTP deliveries per second from one worker to a local back end"},
    {"reconnect", bench_reconnect,
     "what a blocking (re)connect costs, plain or TLS, new or resumed"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: sluice-bench [--log-level LEVEL] COMMAND [options]   (sluice-bench COMMAND "
               "--help)\n\n");
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].what);
    }
    fprintf(f, "\nEXAMPLES\n"
               "  sluice-bench admit --count 50000 --batch-count 1000000 --batch 100\n"
               "  sluice-bench scale --workers 1,2,4,8 --work-ms 5 --duration 10\n"
               "  sluice-bench limit --algorithms gcra,log --count 100000\n"
               "  sluice-bench deliver --slots 8 --service-ms 25 --seconds 10\n"
               "  scripts/bench                 most of these in one run, side by side with\n"
               "                                redis-benchmark on one private server\n"
               "                                (docs/benchmarks.md names each row's command)\n");
    fprintf(f, "\nEvery command takes --redis URL (default $SLUICE_REDIS_URL, else "
               "redis://127.0.0.1:6379).\n--log-level LEVEL, before the command: error, warn, "
               "info, debug or off (default off),\nthe connections' events on stderr.\n"
               "Exit codes: 0 ok, 2 usage, 3 redis unavailable.\n");
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
        return sluice_cli_version("sluice-bench");
    }
    if (strcmp(argv[1], "--log-level") == 0 || strncmp(argv[1], "--log-level=", 12) == 0) {
        char err[256];
        const char *v = argv[1][11] == '=' ? argv[1] + 12 : argc > 2 ? argv[2] : NULL;
        if (v == NULL) {
            fprintf(stderr, "sluice-bench: missing value for option '--log-level'\n");
            return 2;
        }
        if (sluice_cli_log_level(v, "sluice-bench", err, sizeof(err)) != 0) {
            fprintf(stderr, "sluice-bench: %s\n", err);
            return 2;
        }
        int used = argv[1][11] == '=' ? 1 : 2;
        argc -= used;
        argv += used;
        if (argc < 2) {
            usage(stderr);
            return 2;
        }
    }
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        if (strcmp(argv[1], cmds[i].name) == 0) {
            return cmds[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "sluice-bench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
