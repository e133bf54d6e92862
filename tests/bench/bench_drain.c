/* SPDX-License-Identifier: MIT */
/*
 * bench_drain.c - `sluice-bench drain`: how fast one worker empties a full queue.
 *
 * Fills a fresh queue with --count messages, then runs one in-process worker with an inline
 * no-op handler and --max-messages count, and times it from start until every message was
 * acknowledged and deleted (the queue is checked empty afterwards, nothing dead). This is the
 * cost of sluice itself per message: read, decode, verdict, batched ack + delete.
 *
 * --tenants N switches the queue to fair before the fill (sluice_fair_config, as `sluice-admin
 * fair Q on`) and spreads the messages round robin over the tenants t0..tN-1, one lane each:
 * the same drain through sluice_fair_take's deficit round robin. The worker starts after the
 * switch, so it reads fair from its first read.
 *
 * --pace N/DURATION sets a drain limit (GCRA, as `sluice-admin limit Q set bench-pace drain
 * N/DURATION`), fills enough for the run, lets the worker run for 1 + --seconds s and reports
 * the processed rate over the last --seconds s (the queue's `acked` counter) against the
 * configured rate: pacing accuracy. The first second is left out: GCRA allows a burst of N
 * there on top of the rate.
 *
 * --drain-limit N/DURATION sets the same drain limit and drains --count as without it: the cost
 * of a paced read when its rate does not bind (e.g. 100000000/1s) against a plain drain.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/limit.h"
#include "sluice/redis.h"
#include "sluice/url.h"
#include "sluice/worker.h"

#include "bench.h"
#include "bench_util.h"

static const char usage[] =
    "usage: sluice-bench drain [--redis URL] [--queue Q] [--count N] [--concurrency C]\n"
    "                          [--read-batch B] [--size BYTES] [--tenants N]\n"
    "                          [--pace N/DURATION [--seconds S]] [--drain-limit N/DURATION]\n"
    "                          [--json]\n"
    "  --count N        messages to pre-fill and drain (default 300000; with --pace: what the\n"
    "                   pace allows in 1 + S seconds, plus its burst and 10 %)\n"
    "  --concurrency C  worker in-flight limit (default 2000)\n"
    "  --read-batch B   entries per XREADGROUP (default 1000)\n"
    "  --tenants N      a fair queue (sluice-admin fair Q on) with the messages spread round\n"
    "                   robin over N tenants t0..tN-1, one lane each (1..100000)\n"
    "  --pace N/DURATION  a drain limit (GCRA, e.g. 2000/1s): run for 1 + S seconds and report\n"
    "                   the processed rate over the last S against N/DURATION (pacing accuracy)\n"
    "  --seconds S      with --pace: seconds measured after the first (default 60, 1..3600)\n"
    "  --drain-limit N/DURATION  the same drain limit, and a drain of --count as without it\n"
    "                   (the paced read's cost when its rate does not bind, e.g. 100000000/1s)\n";

#define PACE_LIMIT "bench-pace" /* the drain limit's name */

static sluice_verdict noop(const sluice_job *job, void *arg) {
    return SLUICE_DONE;
}

typedef struct args {
    const char *url;
    char queue[80];
    long long count, conc, batch, size, tenants, seconds;
    int count_given, seconds_given, json;
    const char *pace;     /* as given, "2000/1s" */
    char pace_spec[96];   /* as the library spells it, "gcra:2000:1000" */
    double pace_per_s;    /* the configured rate */
    long long pace_burst; /* N: what GCRA allows at once on top of the rate */
    int limit_only;       /* --drain-limit: the limit set, the drain as without one */
} args;

static int parse_pace(args *a, const char *opt, const char *v, char *err, size_t n) {
    char spec[300], e[256];
    sluice_limit l;
    snprintf(spec, sizeof(spec), "%s=%s", PACE_LIMIT, v);
    if (sluice_limit_parse(spec, SLUICE_LIMIT_GCRA, &l, e, sizeof(e)) != 0 ||
        sluice_limit_spec(&l, a->pace_spec, sizeof(a->pace_spec)) != 0) {
        snprintf(err, n, "%s \"%s\": %s", opt, v, e);
        return -1;
    }
    if (a->pace != NULL) {
        snprintf(err, n, "%s \"%s\": --pace and --drain-limit go one at a time", opt, v);
        return -1;
    }
    a->pace = v;
    a->pace_burst = l.count;
    a->pace_per_s = (double)l.count * 1000.0 / (double)l.period_ms;
    return 0;
}

static int parse_args(args *a, int argc, char **argv) {
    static const struct option opts[] = {{"redis", 1, NULL, 'r'},
                                         {"queue", 1, NULL, 'q'},
                                         {"count", 1, NULL, 'n'},
                                         {"concurrency", 1, NULL, 'c'},
                                         {"read-batch", 1, NULL, 'b'},
                                         {"size", 1, NULL, 's'},
                                         {"tenants", 1, NULL, 't'},
                                         {"pace", 1, NULL, 'p'},
                                         {"seconds", 1, NULL, 'S'},
                                         {"json", 0, NULL, 'j'},
                                         {"help", 0, NULL, 'h'},
                                         {"drain-limit", 1, NULL, 'L'},
                                         {NULL, 0, NULL, 0}};
    char err[512];
    int ch, rc = 0;
    *a = (args){.url = sluice_url_default(),
                .count = 300000,
                .conc = 2000,
                .batch = 1000,
                .size = 64,
                .seconds = 60};
    snprintf(a->queue, sizeof(a->queue), "bench-drain-%d", (int)getpid());
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'r':
            a->url = optarg;
            break;
        case 'q':
            snprintf(a->queue, sizeof(a->queue), "%s", optarg);
            break;
        case 'n':
            rc = sluice_parse_ll("--count", optarg, 1, (long long)1e9, &a->count, err, sizeof(err));
            a->count_given = 1;
            break;
        case 'c':
            rc = sluice_parse_ll("--concurrency", optarg, 1, 100000, &a->conc, err, sizeof(err));
            break;
        case 'b':
            rc = sluice_parse_ll("--read-batch", optarg, 1, 100000, &a->batch, err, sizeof(err));
            break;
        case 's':
            rc = sluice_parse_ll("--size", optarg, 0, 1 << 20, &a->size, err, sizeof(err));
            break;
        case 't':
            rc = sluice_parse_ll("--tenants", optarg, 1, BENCH_TENANTS_MAX, &a->tenants, err,
                                 sizeof(err));
            break;
        case 'p':
            rc = parse_pace(a, "--pace", optarg, err, sizeof(err));
            break;
        case 'L':
            rc = parse_pace(a, "--drain-limit", optarg, err, sizeof(err));
            a->limit_only = 1;
            break;
        case 'S':
            rc = sluice_parse_ll("--seconds", optarg, 1, 3600, &a->seconds, err, sizeof(err));
            a->seconds_given = 1;
            break;
        case 'j':
            a->json = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            exit(0);
        default:
            fputs(usage, stderr);
            return SLUICE_EXIT_USAGE;
        }
        if (rc != 0) {
            fprintf(stderr, "sluice-bench drain: %s\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice-bench drain: unexpected argument '%s'\n", argv[optind]);
        return SLUICE_EXIT_USAGE;
    }
    if (a->seconds_given && (a->pace == NULL || a->limit_only)) {
        fprintf(stderr, "sluice-bench drain: --seconds %lld needs --pace (see --help)\n",
                a->seconds);
        return SLUICE_EXIT_USAGE;
    }
    if (a->pace != NULL && !a->limit_only) {
        /* enough for the first second's burst + rate and the measured seconds, and 10 % more */
        long long need =
            (long long)(a->pace_per_s * (double)(a->seconds + 1) * 1.1) + a->pace_burst + 1000;
        if (a->count_given && a->count < need) {
            fprintf(stderr,
                    "sluice-bench drain: --count %lld is less than the %lld that --pace %s can "
                    "take in 1 + %lld s (with its burst and 10 %%): the queue would run dry\n",
                    a->count, need, a->pace, a->seconds);
            return SLUICE_EXIT_USAGE;
        }
        if (!a->count_given) {
            a->count = need;
        }
    }
    return 0;
}

/* ---- the paced run: the worker on a thread, the rate read from the queue's counters ---- */

typedef struct runner {
    sluice_worker *w;
    int rc;
    atomic_int done;
} runner;

static void *run_worker(void *arg) {
    runner *r = arg;
    r->rc = sluice_worker_run(r->w, NULL);
    atomic_store(&r->done, 1);
    return NULL;
}

/* Sleeps until `until_ns` (monotonic) or until the worker has returned. */
static void nap_until(uint64_t until_ns, runner *r) {
    while (!atomic_load(&r->done)) {
        uint64_t now = sluice_now_ns();
        if (now >= until_ns) {
            return;
        }
        uint64_t d = until_ns - now < 100000000ULL ? until_ns - now : 100000000ULL;
        struct timespec ts = {0, (long)d};
        nanosleep(&ts, NULL);
    }
}

typedef struct pace_result {
    long long acked; /* over the measured seconds */
    double secs;
} pace_result;

/* Runs the worker for 1 + a->seconds s, counting `acked` after the first second and at the
 * end; then stops it. Returns the worker's status (or an exit code when the counters could not
 * be read). */
static int run_paced(const args *a, sluice_worker *w, sluice_conn *c, const sluice_keys *k,
                     pace_result *out) {
    runner r = {.w = w};
    pthread_t t;
    if (pthread_create(&t, NULL, run_worker, &r) != 0) {
        fprintf(stderr, "sluice-bench drain: cannot start the worker thread: %s\n",
                strerror(errno));
        return SLUICE_EXIT_USAGE;
    }
    sluice_figures f0, f1;
    uint64_t t0 = sluice_now_ns(), m0, m1;
    nap_until(t0 + 1000000000ULL, &r);
    int st = bench_figures(c, k, &f0);
    m0 = sluice_now_ns();
    nap_until(m0 + (uint64_t)a->seconds * 1000000000ULL, &r);
    if (st == 0) {
        st = bench_figures(c, k, &f1);
    }
    m1 = sluice_now_ns();
    int early = atomic_load(&r.done);
    sluice_worker_stop(w);
    pthread_join(t, NULL);
    if (r.rc != 0 || early) {
        fprintf(stderr, "sluice-bench drain: the worker stopped early: %s (%s)\n",
                sluice_worker_errstr(w), sluice_err_name(r.rc));
        return r.rc != 0 ? r.rc : SLUICE_EXIT_REDIS;
    }
    if (st != 0) {
        fprintf(stderr, "sluice-bench drain: reading the counters: %s\n", sluice_conn_errstr(c));
        return SLUICE_EXIT_REDIS;
    }
    out->acked = f1.counters[SLUICE_COUNTER_ACKED] - f0.counters[SLUICE_COUNTER_ACKED];
    out->secs = (double)(m1 - m0) / 1e9;
    return 0;
}

/* ---- checks and report ---- */

/* After the run: `processed` acknowledged (the counter agrees), the rest still in the queue,
 * nothing dead. Returns 0 or exit code 3 after saying what is wrong. */
static int check_queue(const args *a, sluice_conn *c, const sluice_keys *k,
                       unsigned long long processed) {
    sluice_figures f;
    if (bench_figures(c, k, &f) != 0) {
        fprintf(stderr, "sluice-bench drain: reading the queue: %s\n", sluice_conn_errstr(c));
        return SLUICE_EXIT_REDIS;
    }
    long long left = a->count - (long long)processed;
    if (f.depth != left || f.dead != 0 ||
        f.counters[SLUICE_COUNTER_ACKED] != (long long)processed) {
        fprintf(stderr,
                "sluice-bench drain: after processing %llu of %lld the queue holds %lld (expected "
                "%lld), %lld dead, acked counter %lld\n",
                processed, a->count, f.depth, left, f.dead, f.counters[SLUICE_COUNTER_ACKED]);
        return SLUICE_EXIT_REDIS;
    }
    return 0;
}

/* redis_us: Redis's CPU time per message during the drain (-1 unknown) */
static void report(const args *a, double secs, double redis_us, const pace_result *p) {
    char n1[32], n2[48];
    double rate = p != NULL ? (double)p->acked / p->secs : (double)a->count / secs;
    double ratio = p != NULL ? rate / a->pace_per_s : 0;
    if (a->json) {
        printf("{\"bench\":\"drain\",\"per_s\":%.0f,\"count\":%lld,\"concurrency\":%lld,"
               "\"tenants\":%lld,\"redis_us_per_msg\":%.2f",
               rate, a->count, a->conc, a->tenants, redis_us);
        if (p != NULL) {
            printf(",\"pace_per_s\":%.3f,\"pace_ratio\":%.4f,\"seconds\":%.2f,\"processed\":%lld",
                   a->pace_per_s, ratio, p->secs, p->acked);
        }
        printf("}\n");
        return;
    }
    if (a->tenants > 0) {
        snprintf(n2, sizeof(n2), "fair, %lld tenant%s, ", a->tenants, a->tenants == 1 ? "" : "s");
    } else if (a->limit_only) {
        snprintf(n2, sizeof(n2), "drain limit %s, ", a->pace);
    } else {
        n2[0] = '\0';
    }
    if (p != NULL) {
        printf("drain paced at %s, %sone worker, no-op handler: %.1f msg/s over %.1f s after the "
               "first = x%.4f of the configured %.1f/s (%s processed, concurrency %lld)\n",
               a->pace, n2, rate, p->secs, ratio, a->pace_per_s,
               sluice_fmt_count(n1, sizeof(n1), (unsigned long long)p->acked), a->conc);
        return;
    }
    printf("drain, %sone worker, no-op handler: %s msg/s (%lld messages in %.2f s, "
           "concurrency %lld; Redis CPU %.2f us per message)\n",
           n2, sluice_fmt_count(n1, sizeof(n1), (unsigned long long)rate), a->count, secs, a->conc,
           redis_us);
}

/* Purges, then configures (fair, pace) and fills the queue. Returns 0 or an exit code. */
static int prepare(const args *a) {
    int rc = bench_purge(a->url, a->queue);
    if (rc == 0 && a->tenants > 0) {
        rc = bench_fair_on(a->url, a->queue);
    }
    if (rc == 0 && a->pace != NULL) {
        rc = bench_drain_limit(a->url, a->queue, PACE_LIMIT, a->pace_spec);
    }
    return rc != 0 ? rc : bench_fill(a->url, a->queue, a->count, (size_t)a->size, a->tenants);
}

int bench_drain(int argc, char **argv) {
    static args a;
    char err[256];
    int rc = parse_args(&a, argc, argv);
    sluice_url u;
    sluice_keys k;
    if (rc != 0) {
        return rc;
    }
    if (sluice_url_parse(&u, a.url, err, sizeof(err)) != 0 ||
        sluice_keys_init(&k, a.queue, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench drain: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    if ((rc = prepare(&a)) != 0) {
        bench_purge(a.url, a.queue);
        return rc;
    }
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.redis_url = a.url;
    o.tls = bench_conn_options(); /* SLUICE_TLS_* for a rediss:// URL */
    o.queue = a.queue;
    o.concurrency = (int)a.conc;
    o.read_batch = (int)a.batch;
    int paced = a.pace != NULL && !a.limit_only; /* a run of 1 + --seconds s */
    o.max_messages = paced ? 0 : a.count;
    o.handler = noop;
    o.handler_mode = SLUICE_HANDLER_INLINE;
    sluice_worker *w;
    if (sluice_worker_new(&o, &w, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench drain: %s\n", err);
        bench_purge(a.url, a.queue);
        return SLUICE_EXIT_USAGE;
    }
    sluice_conn *c = sluice_conn_new(&u, bench_conn_options());
    pace_result p = {0, 0};
    double cpu0 = c != NULL ? bench_redis_cpu_s(c) : -1;
    uint64_t t0 = sluice_now_ns();
    if (c == NULL) {
        rc = SLUICE_EXIT_REDIS;
    } else if (paced) {
        rc = run_paced(&a, w, c, &k, &p);
    } else {
        rc = sluice_worker_run(w, NULL);
    }
    double secs = (double)(sluice_now_ns() - t0) / 1e9;
    double cpu1 = c != NULL ? bench_redis_cpu_s(c) : -1;
    sluice_worker_stats st;
    sluice_worker_get_stats(w, &st);
    double redis_us = cpu0 >= 0 && cpu1 >= 0 && st.processed > 0
                          ? (cpu1 - cpu0) * 1e6 / (double)st.processed
                          : -1;
    if (!paced && (rc != 0 || st.processed != (unsigned long long)a.count)) {
        fprintf(stderr, "sluice-bench drain: processed %llu of %lld (status %s)\n", st.processed,
                a.count, sluice_err_name(rc));
        rc = SLUICE_EXIT_REDIS;
    } else if (rc == 0) {
        rc = check_queue(&a, c, &k, st.processed);
    }
    sluice_worker_free(w);
    if (c != NULL && a.pace != NULL) { /* the limit's state: sluice:{Q}:qlim:bench-pace:gcra: */
        char key[SLUICE_KEY_MAX + 32];
        redisReply *r = NULL;
        const char *del[] = {"DEL", key};
        if (sluice_key_queue_limit(&k, PACE_LIMIT, "gcra", NULL, 0, key, sizeof(key)) == 0) {
            sluice_conn_command(c, 2, del, NULL, &r, NULL);
            freeReplyObject(r);
        }
    }
    sluice_conn_free(c);
    bench_purge(a.url, a.queue);
    if (rc == 0) {
        report(&a, secs, redis_us, paced ? &p : NULL);
    }
    return rc;
}
