/* SPDX-License-Identifier: MIT */
/*
 * bench_e2e.c - `sluice-bench e2e`: admit -> handler-start latency at a fixed offered rate.
 *
 * One producer (the blocking API, one admission per message, as a web handler does) offers
 * --rate messages per second on an open-loop schedule: message i is due at t0 + i/rate and is
 * sent at once when the producer is behind, so a slow moment is not hidden by sending less
 * (no coordinated omission). A worker (the same library sluice-worker runs, in this process on
 * its own thread and loop) drains the queue; its handler records, as its first instruction,
 * now - the send time the payload carries. Both timestamps are this process's monotonic clock,
 * so the figure is exact to the microsecond:
 *
 *   latency = handler start - the producer's clock just before the admission call
 *
 * It includes the admission round trip, the worker's XREADGROUP wake-up and the dispatch; not
 * the handler's work (--work-ms only keeps slots busy). Rejected admissions (a full bucket)
 * have no latency and are counted apart. The queue is unique and purged afterwards.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/producer.h"
#include "sluice/redis.h"
#include "sluice/url.h"
#include "sluice/worker.h"

#include "bench.h"
#include "bench_util.h"

#define MAX_MESSAGES 5000000LL /* rate x duration at most */
#define NO_SAMPLE    UINT32_MAX

static const char usage[] =
    "usage: sluice-bench e2e --rate R [--redis URL] [--duration S] [--work-ms MS]\n"
    "                        [--concurrency C] [--capacity N] [--json]\n"
    "  --rate R          offered admissions per second, open loop (default 1000)\n"
    "  --duration S      seconds of offering (default 10)\n"
    "  --work-ms MS      handler work after it starts (default 0: an inline no-op)\n"
    "  --concurrency C   worker in-flight limit (default 16)\n"
    "  --capacity N      the queue's capacity (default 10000)\n"
    "Latency: producer clock before the admission call -> the handler's first instruction.\n";

typedef struct e2e {
    const char *url;
    long long rate, duration_s, work_ms, conc, capacity;
    int json;
    char queue[80];
    long long total;      /* messages scheduled */
    uint32_t *lat_us;     /* per message: latency in us, NO_SAMPLE until handled */
    atomic_llong handled; /* handler starts */
    unsigned long long admitted, rejected, failed;
    double behind_max_ms; /* how late the producer fell behind its schedule at worst */
    uint64_t t0_ns, t1_ns;
    sluice_worker *w;
} e2e;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    interrupted = 1;
}

/* ---- the worker ---- */

static void record_start(e2e *b, const sluice_job *job) {
    uint64_t now = sluice_now_ns();
    char buf[48];
    size_t n = job->payload_len < sizeof(buf) - 1 ? job->payload_len : sizeof(buf) - 1;
    memcpy(buf, job->payload, n);
    buf[n] = '\0';
    long long seq = -1;
    unsigned long long sent = 0;
    if (sscanf(buf, "%lld %llu", &seq, &sent) == 2 && seq >= 0 && seq < b->total && now >= sent) {
        uint64_t us = (now - sent) / 1000u;
        b->lat_us[seq] = us < NO_SAMPLE ? (uint32_t)us : NO_SAMPLE - 1;
        atomic_fetch_add(&b->handled, 1);
    }
}

static sluice_verdict handler(const sluice_job *job, void *arg) {
    e2e *b = arg;
    record_start(b, job);
    if (b->work_ms > 0) {
        struct timespec ts = {(time_t)(b->work_ms / 1000), (long)(b->work_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return SLUICE_DONE;
}

static void *worker_main(void *arg) {
    e2e *b = arg;
    int rc = sluice_worker_run(b->w, NULL);
    if (rc != 0) {
        fprintf(stderr, "sluice-bench e2e: worker: %s\n", sluice_worker_errstr(b->w));
    }
    return NULL;
}

static int worker_start(e2e *b, pthread_t *t) {
    sluice_worker_options o;
    char err[256], threads[24];
    sluice_worker_options_init(&o);
    o.redis_url = b->url;
    o.tls = bench_conn_options();
    o.queue = b->queue;
    o.concurrency = (int)b->conc;
    o.handler = handler;
    o.handler_arg = b;
    o.handler_mode = b->work_ms > 0 ? SLUICE_HANDLER_POOL : SLUICE_HANDLER_INLINE;
    snprintf(threads, sizeof(threads), "%lld", b->conc < 128 ? b->conc : 128);
    setenv("UV_THREADPOOL_SIZE", threads, 0); /* one pool thread per slot for --work-ms */
    if (sluice_worker_new(&o, &b->w, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench e2e: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    pthread_create(t, NULL, worker_main, b);
    return 0;
}

/* Waits (up to 5 s) until the worker created its group: then it is reading. */
static int worker_ready(const e2e *b, sluice_conn *c) {
    sluice_keys k;
    sluice_keys_init(&k, b->queue, NULL, 0);
    for (int i = 0; i < 500 && !interrupted; i++) {
        sluice_figures f;
        if (bench_figures(c, &k, &f) == 0 && f.group_exists) {
            struct timespec ts = {0, 100000000L}; /* its first XREADGROUP is on its way */
            nanosleep(&ts, NULL);
            return 0;
        }
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "sluice-bench e2e: the worker did not start within 5 s\n");
    return SLUICE_EXIT_REDIS;
}

/* ---- the producer ---- */

static void sleep_until(uint64_t due_ns) {
    struct timespec ts = {(time_t)(due_ns / 1000000000u), (long)(due_ns % 1000000000u)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR && !interrupted) {
    }
}

static void progress(const e2e *b, long long i) {
    if (!isatty(2)) {
        return;
    }
    double frac = (double)i / (double)b->total;
    int w = (int)(frac * 30.0 + 0.5);
    fprintf(stderr, "\r[%.*s%*s] %3.0f%%  offered %lld of %lld   ", w,
            "##############################", 30 - w, "", frac * 100.0, i, b->total);
    fflush(stderr);
}

static int offer(e2e *b) {
    sluice_producer_options po;
    sluice_producer *p;
    char err[256], body[48];
    sluice_producer_options_init(&po);
    po.redis_url = b->url;
    po.tls = bench_conn_options();
    po.queue = b->queue;
    po.capacity = b->capacity;
    if (sluice_producer_new(&po, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench e2e: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    uint64_t period = 1000000000ull / (uint64_t)b->rate;
    b->t0_ns = sluice_now_ns();
    for (long long i = 0; i < b->total && !interrupted; i++) {
        uint64_t due = b->t0_ns + (uint64_t)i * period;
        uint64_t now = sluice_now_ns();
        if (now < due) {
            sleep_until(due);
        } else if ((double)(now - due) / 1e6 > b->behind_max_ms) {
            b->behind_max_ms = (double)(now - due) / 1e6;
        }
        sluice_admit_result res;
        size_t n = (size_t)snprintf(body, sizeof(body), "%lld %llu", i,
                                    (unsigned long long)sluice_now_ns());
        int st = sluice_producer_admit(p, body, n, &res);
        b->admitted += st == 0 && res.outcome == SLUICE_ADMITTED;
        b->rejected += st == 0 && res.outcome == SLUICE_FULL;
        b->failed += st != 0;
        if (i % 1000 == 0) {
            progress(b, i);
        }
    }
    b->t1_ns = sluice_now_ns();
    if (isatty(2)) {
        fprintf(stderr, "\n");
    }
    sluice_producer_free(p);
    return 0;
}

/* ---- results ---- */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts the samples to the front of lat_us; returns how many there are. */
static size_t gather(e2e *b) {
    size_t n = 0;
    for (long long i = 0; i < b->total; i++) {
        if (b->lat_us[i] != NO_SAMPLE) {
            b->lat_us[n++] = b->lat_us[i];
        }
    }
    qsort(b->lat_us, n, sizeof(*b->lat_us), cmp_u32);
    return n;
}

static double pct_ms(const e2e *b, size_t n, double q) {
    if (n == 0) {
        return -1;
    }
    size_t i = (size_t)(q * (double)n);
    return (double)b->lat_us[i < n ? i : n - 1] / 1000.0;
}

static void report(e2e *b) {
    size_t n = gather(b);
    double secs = (double)(b->t1_ns - b->t0_ns) / 1e9;
    double q[] = {0.50, 0.90, 0.99, 0.999, 1.0};
    double v[5];
    for (int i = 0; i < 5; i++) {
        v[i] = pct_ms(b, n, q[i]);
    }
    if (b->json) {
        printf("{\"bench\":\"e2e\",\"rate\":%lld,\"offered_per_s\":%.1f,\"admitted\":%llu,"
               "\"rejected\":%llu,\"failed\":%llu,\"samples\":%zu,\"p50_ms\":%.3f,"
               "\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f,"
               "\"behind_max_ms\":%.1f,\"work_ms\":%lld,\"definition\":\"producer clock before "
               "the admission call -> handler start\"}\n",
               b->rate, (double)(b->admitted + b->rejected + b->failed) / secs, b->admitted,
               b->rejected, b->failed, n, v[0], v[1], v[2], v[3], v[4], b->behind_max_ms,
               b->work_ms);
        return;
    }
    char a[32], c[32];
    printf("sluice-bench e2e: offered %s/s for %.1f s (target %s/s), one admission per call\n",
           sluice_fmt_count(a, sizeof(a),
                            (unsigned long long)((double)(b->admitted + b->rejected) / secs)),
           secs, sluice_fmt_count(c, sizeof(c), (unsigned long long)b->rate));
    printf("  admitted %llu, rejected %llu, failed %llu, latency samples %zu\n", b->admitted,
           b->rejected, b->failed, n);
    printf("  admit -> handler start: p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  p99.9 %.3f ms  "
           "max %.3f ms\n",
           v[0], v[1], v[2], v[3], v[4]);
    printf("  definition: the producer's monotonic clock just before the admission call to the "
           "handler's first instruction (same process); includes the admission round trip, the "
           "worker's XREADGROUP wake-up and dispatch\n");
    double offered = (double)(b->admitted + b->rejected + b->failed) / secs;
    if (offered < 0.95 * (double)b->rate) {
        printf("  note: only %.0f/s could be offered: one admission per round trip cannot go "
               "faster here (latency is still measured from each actual send)\n",
               offered);
    } else if (b->behind_max_ms > 10) {
        printf("  note: the producer fell up to %.1f ms behind its schedule once (a stall of "
               "this host or of Redis); later messages were sent at once to catch up\n",
               b->behind_max_ms);
    }
}

/* ---- main ---- */

static int parse_args(e2e *b, int argc, char **argv) {
    static const struct option lo[] = {
        {"redis", 1, NULL, 'r'},   {"rate", 1, NULL, 'R'},        {"duration", 1, NULL, 'd'},
        {"work-ms", 1, NULL, 'm'}, {"concurrency", 1, NULL, 'c'}, {"capacity", 1, NULL, 'C'},
        {"json", 0, NULL, 'j'},    {"help", 0, NULL, 'h'},        {NULL, 0, NULL, 0}};
    char err[256];
    int ch, rc = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "hr:", lo, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            exit(0);
        case 'r':
            b->url = optarg;
            break;
        case 'R':
            rc = sluice_parse_ll("--rate", optarg, 1, 1000000, &b->rate, err, sizeof(err));
            break;
        case 'd':
            rc = sluice_parse_ll("--duration", optarg, 1, 3600, &b->duration_s, err, sizeof(err));
            break;
        case 'm':
            rc = sluice_parse_ll("--work-ms", optarg, 0, 60000, &b->work_ms, err, sizeof(err));
            break;
        case 'c':
            rc = sluice_parse_ll("--concurrency", optarg, 1, 100000, &b->conc, err, sizeof(err));
            break;
        case 'C':
            rc = sluice_parse_ll("--capacity", optarg, 1, 1000000000, &b->capacity, err,
                                 sizeof(err));
            break;
        case 'j':
            b->json = 1;
            break;
        default:
            snprintf(err, sizeof(err), "unknown option or missing value (see --help)");
            rc = -1;
        }
        if (rc != 0) {
            fprintf(stderr, "sluice-bench e2e: %s\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    if (optind < argc || b->rate * b->duration_s > MAX_MESSAGES) {
        fprintf(stderr, "sluice-bench e2e: %s\n",
                optind < argc ? "unexpected argument" : "--rate x --duration is over 5,000,000");
        return SLUICE_EXIT_USAGE;
    }
    return 0;
}

/* After offering: up to 5 s for the worker to start every admitted message. */
static void drain_wait(e2e *b) {
    for (int i = 0; i < 500 && !interrupted; i++) {
        if ((unsigned long long)atomic_load(&b->handled) >= b->admitted) {
            return;
        }
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
}

int bench_e2e(int argc, char **argv) {
    static e2e b;
    b = (e2e){
        .url = sluice_url_default(), .rate = 1000, .duration_s = 10, .conc = 16, .capacity = 10000};
    int rc = parse_args(&b, argc, argv);
    if (rc != 0) {
        return rc;
    }
    b.total = b.rate * b.duration_s;
    b.lat_us = malloc((size_t)b.total * sizeof(*b.lat_us));
    if (b.lat_us == NULL) {
        fprintf(stderr, "sluice-bench e2e: out of memory\n");
        return SLUICE_EXIT_USAGE;
    }
    memset(b.lat_us, 0xff, (size_t)b.total * sizeof(*b.lat_us));
    snprintf(b.queue, sizeof(b.queue), "bench-e2e-%d", (int)getpid());
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sluice_url u;
    sluice_url_parse(&u, b.url, NULL, 0);
    sluice_conn *c = sluice_conn_new(&u, bench_conn_options());
    pthread_t t;
    if ((rc = bench_purge(b.url, b.queue)) != 0 || (rc = worker_start(&b, &t)) != 0) {
        sluice_conn_free(c);
        free(b.lat_us);
        return rc;
    }
    if ((rc = worker_ready(&b, c)) == 0) {
        rc = offer(&b);
        drain_wait(&b);
    }
    sluice_worker_stop(b.w);
    pthread_join(t, NULL);
    sluice_worker_free(b.w);
    sluice_conn_free(c);
    bench_purge(b.url, b.queue);
    if (rc == 0 && !interrupted) {
        report(&b);
    }
    free(b.lat_us);
    return interrupted ? 130 : rc;
}
