/* SPDX-License-Identifier: MIT */
/*
 * bench_deliver.c - `sluice-bench deliver`: HTTP deliveries per second from one `sluice-worker`
 * process (--handler http://...) to a local keep-alive back end, sluice-bench-backend
 * (backend.c), both started from the directory of this binary.
 *
 * Without --slots: the back end answers 204 at once. The queue is filled with --count messages
 * and the worker runs with --max-messages count; the time from its start to its exit gives the
 * deliveries per second. The CPU of both processes over the run (the worker's from wait4, the
 * back end's from /proc/PID/stat before and after) is reported per delivery: what the back end
 * costs, so a reader can see it was not the bottleneck.
 *
 * With --slots N: the back end serves N at a time, --service-ms each (at best N x 1000 / MS per
 * second), the others wait in its FIFO. Two runs of --seconds after a warm-up of 3 s, first
 * with `--concurrency auto`, then with the fixed --concurrency: processed/s (the queue's `acked`
 * counter over the measured seconds), the worker's concurrency limit at the end (its summary
 * line) and the median number of requests inside the back end (the median of its per-second
 * medians over the measured seconds).
 *
 * The queue is bench-deliver-PID, purged before and after. Every child is killed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/clock.h"
#include "sluice/redis.h"
#include "sluice/url.h"

#include "bench.h"
#include "bench_util.h"

extern char **environ;

static const char usage[] =
    "usage: sluice-bench deliver [--redis URL] [--count N] [--concurrency C]\n"
    "                            [--slots N --service-ms MS --seconds S] [--json]\n"
    "  --count N         messages to deliver to a back end that answers at once (default 100000)\n"
    "  --concurrency C   the worker's fixed --concurrency (default 64)\n"
    "  --slots N         a capacity-limited back end: N at a time, the others wait in its FIFO;\n"
    "                    runs --concurrency auto, then C, and compares them\n"
    "  --service-ms MS   with --slots: each request's service time (default 25)\n"
    "  --seconds S       with --slots: measured seconds per run, after 3 s of warm-up (default "
    "10)\n"
    "The worker and the back end (sluice-bench-backend) are started from this binary's "
    "directory.\n";

#define WARMUP_S 3

typedef struct args {
    const char *url;
    long long count, conc, slots, service_ms, seconds;
    int json;
} args;

typedef struct proc {
    pid_t pid;
    char out[512]; /* its stdout */
} proc;

static char dir[] = "/tmp/sluice-bench-deliver-XXXXXX";

static int parse_args(args *a, int argc, char **argv) {
    static const struct option lo[] = {
        {"redis", 1, NULL, 'r'}, {"count", 1, NULL, 'n'},      {"concurrency", 1, NULL, 'c'},
        {"slots", 1, NULL, 's'}, {"service-ms", 1, NULL, 'm'}, {"seconds", 1, NULL, 'S'},
        {"json", 0, NULL, 'j'},  {"help", 0, NULL, 'h'},       {NULL, 0, NULL, 0}};
    char err[256];
    int ch, st = 0;
    *a = (args){
        .url = sluice_url_default(), .count = 100000, .conc = 64, .service_ms = 25, .seconds = 10};
    opterr = 0;
    while (st == 0 && (ch = getopt_long(argc, argv, "hr:", lo, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            exit(0);
        case 'r':
            a->url = optarg;
            break;
        case 'n':
            st = sluice_parse_ll("--count", optarg, 1, 100000000, &a->count, err, sizeof(err));
            break;
        case 'c':
            st = sluice_parse_ll("--concurrency", optarg, 1, 100000, &a->conc, err, sizeof(err));
            break;
        case 's':
            st = sluice_parse_ll("--slots", optarg, 1, 100000, &a->slots, err, sizeof(err));
            break;
        case 'm':
            st =
                sluice_parse_ll("--service-ms", optarg, 1, 60000, &a->service_ms, err, sizeof(err));
            break;
        case 'S':
            st = sluice_parse_ll("--seconds", optarg, 1, 3600, &a->seconds, err, sizeof(err));
            break;
        case 'j':
            a->json = 1;
            break;
        default:
            snprintf(err, sizeof(err), "unknown option or missing value (see --help)");
            st = -1;
        }
    }
    if (st == 0 && optind < argc) {
        snprintf(err, sizeof(err), "unexpected argument '%s'", argv[optind]);
        st = -1;
    }
    if (st != 0) {
        fprintf(stderr, "sluice-bench deliver: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    return 0;
}

/* Starts the sibling program argv[0] with stdout to p->out (stderr to p->out.err). */
static int spawn(proc *p, const char *tag, const char **argv) {
    char exe[PATH_MAX], err[600];
    snprintf(p->out, sizeof(p->out), "%s/%s.out", dir, tag);
    snprintf(err, sizeof(err), "%s/%s.err", dir, tag);
    if (bench_sibling_path(argv[0], exe, sizeof(exe)) != 0) {
        fprintf(stderr, "sluice-bench deliver: %s is not next to sluice-bench\n", argv[0]);
        return -1;
    }
    argv[0] = exe;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawn(&p->pid, exe, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        p->pid = 0;
        fprintf(stderr, "sluice-bench deliver: cannot start %s: %s\n", exe, strerror(rc));
        return -1;
    }
    return 0;
}

/* SIGTERM, then waits; cpu_s (may be NULL) gets its user + system CPU seconds. */
static void stop(proc *p, double *cpu_s) {
    struct rusage ru;
    int status;
    if (p->pid <= 0) {
        return;
    }
    kill(p->pid, SIGTERM);
    if (wait4(p->pid, &status, 0, &ru) == p->pid && cpu_s != NULL) {
        *cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    }
    p->pid = 0;
}

static void nap_ms(long long ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* CPU seconds (user + system) of a running process, from /proc/PID/stat; -1 unknown. */
static double proc_cpu_s(pid_t pid) {
    char path[64];
    unsigned long ut = 0, st = 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    int n = fscanf(f, "%*d (%*[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    fclose(f);
    return n == 2 ? (double)(ut + st) / (double)sysconf(_SC_CLK_TCK) : -1;
}

/* The value of `key=` in the first line of file that starts with `prefix`, or -1. */
static long long file_field(const char *file, const char *prefix, const char *key) {
    char line[1024], pat[64];
    long long v = -1;
    FILE *f = fopen(file, "r");
    snprintf(pat, sizeof(pat), " %s=", key);
    while (f != NULL && v < 0 && fgets(line, sizeof(line), f) != NULL) {
        const char *at = strstr(line, pat);
        if (strncmp(line, prefix, strlen(prefix)) == 0 && at != NULL) {
            v = atoll(at + strlen(pat));
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return v;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The median of the back end's per-second inside_p50 after `from_s` seconds; -1 none. */
static long long inside_median(const char *file, double from_s) {
    long long v[4096];
    size_t n = 0;
    char line[1024];
    FILE *f = fopen(file, "r");
    while (f != NULL && n < 4096 && fgets(line, sizeof(line), f) != NULL) {
        double t;
        long long in;
        if (sscanf(line, "t=%lf slots=%*d inside_p50=%lld", &t, &in) == 2 && t > from_s) {
            v[n++] = in;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    qsort(v, n, sizeof(v[0]), cmp_ll);
    return n > 0 ? v[(n - 1) / 2] : -1;
}

/* Starts the back end (extra: its capacity options) and waits for its port. */
static int backend_start(proc *b, const char **extra, int *port) {
    char pf[600];
    snprintf(pf, sizeof(pf), "%s/port", dir);
    unlink(pf);
    const char *argv[16] = {"sluice-bench-backend", "--port-file", pf};
    int k = 3;
    for (; extra != NULL && *extra != NULL && k < 15; extra++) {
        argv[k++] = *extra;
    }
    argv[k] = NULL;
    if (spawn(b, "backend", argv) != 0) {
        return -1;
    }
    for (int i = 0; i < 100; i++) {
        FILE *f = fopen(pf, "r");
        int ok = f != NULL && fscanf(f, "%d", port) == 1;
        if (f != NULL) {
            fclose(f);
        }
        if (ok) {
            return 0;
        }
        nap_ms(50);
    }
    fprintf(stderr, "sluice-bench deliver: the back end did not start\n");
    return -1;
}

static int worker_start(proc *w, const args *a, const char *queue, int port, const char *conc,
                        long long max) {
    char target[64], maxs[32];
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/deliver", port);
    snprintf(maxs, sizeof(maxs), "%lld", max);
    const char *argv[] = {
        "sluice-worker", "--redis", a->url,           "--queue", queue,         "--handler", target,
        "--concurrency", conc,      "--max-messages", maxs,      "--log-level", "warn",      NULL};
    return spawn(w, "worker", argv);
}

static long long acked(sluice_conn *c, const char *queue) {
    sluice_keys k;
    sluice_figures f;
    char err[128];
    if (sluice_keys_init(&k, queue, err, sizeof(err)) != 0 || bench_figures(c, &k, &f) != 0) {
        return -1;
    }
    return f.counters[SLUICE_COUNTER_ACKED];
}

/* ---- a back end that answers at once ---- */

static int run_instant(const args *a, const char *queue) {
    proc b = {0}, w = {0};
    char n1[32], n2[32], conc[24];
    int port = 0, rc = bench_fill(a->url, queue, a->count, 64, 0);
    double wcpu = -1, bcpu0, bcpu1;
    const char *extra[] = {"--report-ms", "0", NULL};
    snprintf(conc, sizeof(conc), "%lld", a->conc);
    if (rc != 0 || backend_start(&b, extra, &port) != 0) {
        stop(&b, NULL);
        return rc != 0 ? rc : 1;
    }
    bcpu0 = proc_cpu_s(b.pid);
    uint64_t t0 = sluice_now_ns();
    if (worker_start(&w, a, queue, port, conc, a->count) != 0) {
        stop(&b, NULL);
        return 1;
    }
    struct rusage ru;
    int status = 0;
    wait4(w.pid, &status, 0, &ru);
    w.pid = 0;
    double secs = (double)(sluice_now_ns() - t0) / 1e9;
    bcpu1 = proc_cpu_s(b.pid);
    stop(&b, NULL);
    wcpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    long long ok = file_field(w.out, "processed=", "http_ok");
    long long conns = file_field(b.out, "total", "connections");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || ok != a->count) {
        fprintf(stderr, "sluice-bench deliver: the worker delivered %lld of %lld (exit %d)\n", ok,
                a->count, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return SLUICE_EXIT_REDIS;
    }
    double rate = (double)a->count / secs;
    double wus = wcpu * 1e6 / (double)a->count, bus = (bcpu1 - bcpu0) * 1e6 / (double)a->count;
    if (a->json) {
        printf("{\"bench\":\"deliver\",\"per_s\":%.0f,\"count\":%lld,\"concurrency\":%lld,"
               "\"seconds\":%.2f,\"worker_us_per_msg\":%.1f,\"backend_us_per_req\":%.1f,"
               "\"connections\":%lld}\n",
               rate, a->count, a->conc, secs, wus, bus, conns);
    } else {
        printf("deliver, one worker process, keep-alive back end answering 204 at once: %s "
               "deliveries/s (%s in %.2f s, concurrency %lld, %lld connections; CPU per "
               "delivery: worker %.1f us, back end %.1f us)\n",
               sluice_fmt_count(n1, sizeof(n1), (unsigned long long)rate),
               sluice_fmt_count(n2, sizeof(n2), (unsigned long long)a->count), secs, a->conc, conns,
               wus, bus);
    }
    return 0;
}

/* ---- a capacity-limited back end: auto against a fixed concurrency ---- */

static int run_limited(const args *a, const char *queue, const char *conc, sluice_conn *c) {
    proc b = {0}, w = {0};
    char slots[24], ms[24];
    int port = 0;
    double best = (double)a->slots * 1000.0 / (double)a->service_ms;
    snprintf(slots, sizeof(slots), "%lld", a->slots);
    snprintf(ms, sizeof(ms), "%lld", a->service_ms);
    const char *extra[] = {"--slots", slots, "--service-ms", ms, "--report-ms", "1000", NULL};
    int rc = bench_purge(a->url, queue);
    if (rc == 0) {
        rc = bench_fill(a->url, queue, (long long)(best * 1.5) * (WARMUP_S + a->seconds) + 1000, 64,
                        0);
    }
    if (rc != 0 || backend_start(&b, extra, &port) != 0 ||
        worker_start(&w, a, queue, port, conc, 1000000000000LL) != 0) {
        stop(&w, NULL);
        stop(&b, NULL);
        return rc != 0 ? rc : 1;
    }
    nap_ms(WARMUP_S * 1000);
    long long a0 = acked(c, queue);
    uint64_t t0 = sluice_now_ns();
    nap_ms(a->seconds * 1000);
    long long a1 = acked(c, queue);
    double secs = (double)(sluice_now_ns() - t0) / 1e9;
    stop(&w, NULL);
    stop(&b, NULL);
    long long limit = file_field(w.out, "processed=", "concurrency_limit");
    long long inside = inside_median(b.out, WARMUP_S + 0.5);
    if (a0 < 0 || a1 < 0) {
        fprintf(stderr, "sluice-bench deliver: cannot read the queue's counters\n");
        return SLUICE_EXIT_REDIS;
    }
    double rate = (double)(a1 - a0) / secs;
    if (limit < 0) {
        limit = atoll(conc);
    }
    if (a->json) {
        printf("{\"bench\":\"deliver\",\"concurrency\":\"%s\",\"slots\":%lld,\"service_ms\":%lld,"
               "\"best_per_s\":%.0f,\"per_s\":%.0f,\"limit\":%lld,\"inside_p50\":%lld,"
               "\"seconds\":%.2f}\n",
               conc, a->slots, a->service_ms, best, rate, limit, inside, secs);
    } else {
        printf("  %-12s %12.0f %7.2f %8lld %16lld\n", conc, rate, rate / best, limit, inside);
    }
    return 0;
}

int bench_deliver(int argc, char **argv) {
    args a;
    char queue[64], err[256], conc[24];
    int rc = parse_args(&a, argc, argv);
    sluice_url u;
    if (rc != 0) {
        return rc;
    }
    if (sluice_url_parse(&u, a.url, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench deliver: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "sluice-bench deliver: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    snprintf(queue, sizeof(queue), "bench-deliver-%d", (int)getpid());
    snprintf(conc, sizeof(conc), "%lld", a.conc);
    if ((rc = bench_purge(a.url, queue)) != 0) {
        return rc;
    }
    if (a.slots == 0) {
        rc = run_instant(&a, queue);
    } else {
        sluice_conn *c = sluice_conn_new(&u, bench_conn_options());
        if (c == NULL) {
            rc = SLUICE_EXIT_REDIS;
        } else if (!a.json) {
            printf("deliver to a back end of %lld slots x %lld ms (at best %.0f/s), one worker "
                   "process, %d s warm-up + %lld s measured\n",
                   a.slots, a.service_ms, (double)a.slots * 1000.0 / (double)a.service_ms, WARMUP_S,
                   a.seconds);
            printf("  %-12s %12s %7s %8s %16s\n", "concurrency", "processed/s", "x best", "limit",
                   "inside (median)");
        }
        if (rc == 0) {
            rc = run_limited(&a, queue, "auto", c);
        }
        if (rc == 0) {
            rc = run_limited(&a, queue, conc, c);
        }
        sluice_conn_free(c);
    }
    bench_purge(a.url, queue);
    char cmd[600];
    const char *files[] = {"backend.out", "backend.err", "worker.out", "worker.err", "port"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(cmd, sizeof(cmd), "%s/%s", dir, files[i]);
        unlink(cmd);
    }
    rmdir(dir);
    return rc;
}
