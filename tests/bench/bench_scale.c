/* SPDX-License-Identifier: MIT */
/*
 * bench_scale.c - `sluice-bench scale`: throughput and latency against the number of worker
 * processes, the figure that says how many workers a queue needs.
 *
 * For each count N in --workers it starts N `sluice-worker` processes (from the directory of
 * this binary) with `--handler sleep:WORK_MS --concurrency C --record FILE`, and --producers
 * threads that keep the bucket full: each admits batches of --batch messages as fast as Redis
 * answers and pauses 1 ms after a batch that met a full bucket (a client honouring 429, at the
 * smallest scale). After --warmup seconds it measures for --duration seconds:
 *   processed/s  delta of the queue's `acked` counter / window
 *   admitted/s   delta of `admitted`; rejected/s delta of `rejected`
 *   p50/p99      end-to-end latency of the messages finished inside the window: from the
 *                producer's wall clock just before the admission call (carried in the payload)
 *                to the worker's wall clock at the handler's verdict (the third field of its
 *                --record line); both clocks are this host's, so no skew; resolution 1 ms
 *   ideal/s      N x C x 1000 / WORK_MS: what the workers could do if nothing else limited them
 *   redis cpu    redis-server's CPU time in the window (INFO cpu), % of one core
 *   cpu          the whole machine (/proc/stat), % of all cores
 * With the bucket full, Little's law predicts p50 ~ capacity / processed/s + WORK_MS.
 *
 * Every queue is unique (bench-scale-PID-N) and purged afterwards; every child is killed at the
 * end, on failure and on SIGINT. Output: table on stdout, progress on stderr, --csv FILE,
 * --plot FILE.png (gnuplot, if installed), --json (one object per line).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/producer.h"
#include "sluice/redis.h"
#include "sluice/url.h"

#include "bench.h"
#include "bench_scale.h"
#include "bench_util.h"

volatile sig_atomic_t bench_scale_interrupted;

static void on_sigint(int sig) {
    (void)sig;
    bench_scale_interrupted = 1;
}

void bench_scale_nap_ms(long long ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !bench_scale_interrupted) {
    }
}

/* ---- options ---- */

static int parse_opt(opts *o, int ch, const char *v, char *err, size_t n) {
    switch (ch) {
    case 'r':
        o->url = v;
        return 0;
    case 'w':
        return sluice_parse_ll_list("--workers", v, 1, MAX_WORKERS, o->counts, MAX_COUNTS,
                                    &o->ncounts, err, n);
    case 'm':
        return sluice_parse_ll("--work-ms", v, 0, 10000, &o->work_ms, err, n);
    case 'd':
        return sluice_parse_ll("--duration", v, 1, 3600, &o->duration_s, err, n);
    case 'W':
        return sluice_parse_ll("--warmup", v, 0, 600, &o->warmup_s, err, n);
    case 'c':
        return sluice_parse_ll("--concurrency", v, 1, 100000, &o->conc, err, n);
    case 'C':
        return sluice_parse_ll("--capacity", v, 1, 100000000, &o->capacity, err, n);
    case 'p':
        return sluice_parse_ll("--producers", v, 1, MAX_PROD, &o->producers, err, n);
    case 'b':
        return sluice_parse_ll("--batch", v, 1, 1000, &o->batch, err, n);
    case 't':
        return sluice_parse_ll("--tenants", v, 1, BENCH_TENANTS_MAX, &o->tenants, err, n);
    case 'v':
        o->csv = v;
        return 0;
    case 'P':
        o->plot = v;
        return 0;
    case 'j':
        o->json = 1;
        return 0;
    default:
        snprintf(err, n, "unknown option (see --help)");
        return -1;
    }
}

static int parse_args(opts *o, int argc, char **argv) {
    static const struct option lo[] = {
        {"redis", 1, NULL, 'r'},    {"workers", 1, NULL, 'w'},   {"work-ms", 1, NULL, 'm'},
        {"duration", 1, NULL, 'd'}, {"warmup", 1, NULL, 'W'},    {"concurrency", 1, NULL, 'c'},
        {"capacity", 1, NULL, 'C'}, {"producers", 1, NULL, 'p'}, {"batch", 1, NULL, 'b'},
        {"tenants", 1, NULL, 't'},  {"csv", 1, NULL, 'v'},       {"plot", 1, NULL, 'P'},
        {"json", 0, NULL, 'j'},     {"help", 0, NULL, 'h'},      {NULL, 0, NULL, 0}};
    static const long long dflt[] = {1, 2, 4, 8};
    char err[256];
    int ch;
    *o = (opts){.url = sluice_url_default(),
                .ncounts = 4,
                .work_ms = 5,
                .duration_s = 10,
                .warmup_s = 1,
                .conc = 16,
                .capacity = 1000,
                .producers = 2,
                .batch = 50};
    memcpy(o->counts, dflt, sizeof(dflt));
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "hr:", lo, NULL)) != -1) {
        if (ch == 'h') {
            fputs(usage, stdout);
            exit(0);
        }
        if (ch == '?' || parse_opt(o, ch, optarg, err, sizeof(err)) != 0) {
            fprintf(stderr, "sluice-bench scale: %s\n",
                    ch == '?' ? "unknown option or missing value (see --help)" : err);
            return SLUICE_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice-bench scale: unexpected argument '%s'\n", argv[optind]);
        return SLUICE_EXIT_USAGE;
    }
    return 0;
}

/* ---- redis figures ---- */

/* The three counters a row needs: admitted, rejected, acked. */
static int read_counters(sluice_conn *c, const sluice_keys *k, long long v[3]) {
    sluice_figures f;
    int st = bench_figures(c, k, &f);
    v[0] = f.counters[SLUICE_COUNTER_ADMITTED];
    v[1] = f.counters[SLUICE_COUNTER_REJECTED];
    v[2] = f.counters[SLUICE_COUNTER_ACKED];
    return st;
}

/* busy and total jiffies of the whole machine from /proc/stat. */
static void machine_cpu(unsigned long long *busy, unsigned long long *total) {
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    *busy = *total = 0;
    if (f == NULL) {
        return;
    }
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) == 8) {
        for (int i = 0; i < 8; i++) {
            *total += v[i];
        }
        *busy = *total - v[3] - v[4];
    }
    fclose(f);
}

/* The number of consumers of group "workers" (-1: no stream or no group yet). A blocked
 * XREADGROUP on an empty stream does not create its consumer: only one that got entries. */
static long long consumers(sluice_conn *c, const sluice_keys *k) {
    sluice_figures f;
    return bench_figures(c, k, &f) == 0 && f.group_exists ? f.consumers : -1;
}

/* ---- producers ---- */

typedef struct producer_thread {
    pthread_t t;
    const opts *o;
    const char *queue;
    atomic_int *stop;
    unsigned long long failures;
    char err[300];
} producer_thread;

static void *produce(void *arg) {
    producer_thread *pt = arg;
    sluice_producer_options po;
    sluice_producer *p;
    sluice_producer_options_init(&po);
    po.redis_url = pt->o->url;
    po.tls = bench_conn_options();
    po.queue = pt->queue;
    po.capacity = pt->o->capacity;
    if (sluice_producer_new(&po, &p, pt->err, sizeof(pt->err)) != 0) {
        return NULL;
    }
    size_t n = (size_t)pt->o->batch;
    long long tenants = pt->o->tenants, next = 0;
    sluice_message *msgs = calloc(n, sizeof(*msgs));
    sluice_admit_result *res = calloc(n, sizeof(*res));
    char(*bodies)[24] = calloc(n, sizeof(*bodies));
    char(*names)[BENCH_TENANT_LEN] = bench_tenant_names(tenants);
    while (msgs && res && bodies && (tenants == 0 || names) && !atomic_load(pt->stop) &&
           !bench_scale_interrupted) {
        unsigned long long now = (unsigned long long)sluice_wall_ms();
        for (size_t i = 0; i < n; i++) {
            msgs[i].payload = bodies[i];
            msgs[i].len = (size_t)snprintf(bodies[i], sizeof(bodies[i]), "%llu", now);
            if (tenants > 0) { /* round robin over the tenants */
                msgs[i].tenant = names[next];
                next = (next + 1) % tenants;
            }
        }
        size_t admitted = 0;
        if (sluice_producer_admit_batch(p, msgs, n, res, &admitted) != 0) {
            snprintf(pt->err, sizeof(pt->err), "%s", sluice_producer_errstr(p));
            pt->failures++;
            bench_scale_nap_ms(10);
        } else if (admitted < n) {
            bench_scale_nap_ms(
                1); /* the bucket is full: back off a little, as a 429'd client would */
        }
    }
    free(msgs);
    free(res);
    free(bodies);
    free(names);
    sluice_producer_free(p);
    return NULL;
}

/* ---- worker processes ---- */

/* Starts the workers and waits until their group exists; the warm-up lets every worker connect
 * and fill up. */
static int fleet_start(fleet *f, const opts *o, const char *queue, long long n, sluice_conn *c,
                       const sluice_keys *k) {
    int rc = fleet_spawn(f, o, queue, n);
    for (int i = 0; rc == 0 && i < 1000 && !bench_scale_interrupted; i++) {
        if (consumers(c, k) >= 0) {
            return 0;
        }
        if (fleet_alive(f) != 0) {
            return SLUICE_EXIT_REDIS;
        }
        bench_scale_nap_ms(10);
    }
    if (rc == 0) {
        fprintf(stderr, "sluice-bench scale: the workers did not start within 10 s\n");
    }
    return rc != 0 ? rc : SLUICE_EXIT_REDIS;
}

/* ---- one step: N workers ---- */

static void progress(const opts *o, size_t idx, long long n, const char *phase, double done_s,
                     double rate) {
    if (!isatty(2)) {
        return;
    }
    double step = (double)(o->warmup_s + o->duration_s);
    double frac = ((double)idx + (done_s > step ? step : done_s) / step) / (double)o->ncounts;
    int w = (int)(frac * 30.0 + 0.5);
    char r[32];
    fprintf(stderr, "\r[%.*s%*s] %3.0f%%  workers=%-3lld %-8s %5.1fs  %s processed/s      ", w,
            "##############################", 30 - w, "", frac * 100.0, n, phase, done_s,
            rate >= 0 ? sluice_fmt_count(r, sizeof(r), (unsigned long long)rate) : "-");
    fflush(stderr);
}

typedef struct sample {
    long long c[3]; /* admitted, rejected, acked */
    double redis_s;
    unsigned long long busy, total;
    uint64_t mono_ns, wall_ms;
} sample;

static int take_sample(sluice_conn *c, const sluice_keys *k, sample *s) {
    s->redis_s = bench_redis_cpu_s(c);
    machine_cpu(&s->busy, &s->total);
    s->mono_ns = sluice_now_ns();
    s->wall_ms = sluice_wall_ms();
    return read_counters(c, k, s->c);
}

/* Runs the producers for `secs`, showing progress; returns -1 if a worker died. */
static int run_for(const opts *o, size_t idx, long long n, const char *phase, double from,
                   double secs, fleet *f, sluice_conn *c, const sluice_keys *k) {
    uint64_t t0 = sluice_now_ns();
    long long prev = -1, v[3];
    uint64_t prev_ns = t0;
    double rate = -1;
    while (!bench_scale_interrupted) {
        double el = (double)(sluice_now_ns() - t0) / 1e9;
        if (el >= secs) {
            return 0;
        }
        if (fleet_alive(f) != 0) {
            return -1;
        }
        if (read_counters(c, k, v) == 0) {
            uint64_t now = sluice_now_ns();
            if (prev >= 0 && now > prev_ns) {
                rate = (double)(v[2] - prev) / ((double)(now - prev_ns) / 1e9);
            }
            prev = v[2], prev_ns = now;
        }
        progress(o, idx, n, phase, from + el, rate);
        bench_scale_nap_ms(250);
    }
    return 0;
}

static void fill_row(const opts *o, long long n, const sample *a, const sample *b, lat *l,
                     row *out) {
    double secs = (double)(b->mono_ns - a->mono_ns) / 1e9;
    lat_sort(l);
    out->workers = n;
    out->admitted = (double)(b->c[0] - a->c[0]) / secs;
    out->rejected = (double)(b->c[1] - a->c[1]) / secs;
    out->processed = (double)(b->c[2] - a->c[2]) / secs;
    out->ideal = o->work_ms > 0 ? (double)(n * o->conc * 1000) / (double)o->work_ms : -1;
    out->p50 = percentile(l, 0.50);
    out->p99 = percentile(l, 0.99);
    out->samples = (long long)l->n;
    out->redis_cpu =
        a->redis_s >= 0 && b->redis_s >= 0 ? 100.0 * (b->redis_s - a->redis_s) / secs : -1;
    out->cpu = b->total > a->total
                   ? 100.0 * (double)(b->busy - a->busy) / (double)(b->total - a->total)
                   : -1;
}

/* The queue's capacity in its meta hash, so `sluice-admin stats` shows it too. */
static int set_capacity(sluice_conn *c, const sluice_keys *k, long long cap) {
    char v[24];
    snprintf(v, sizeof(v), "%lld", cap);
    const char *argv[] = {"HSET", k->meta, "capacity", v};
    redisReply *r = NULL;
    int st = sluice_conn_command(c, 4, argv, NULL, &r, NULL);
    freeReplyObject(r);
    if (st != 0) {
        fprintf(stderr, "sluice-bench scale: %s\n", sluice_conn_errstr(c));
    }
    return st == 0 ? 0 : SLUICE_EXIT_REDIS;
}

/* After the warm-up every worker must have taken entries; else the row would lie. On a fair
 * queue they read the lanes, not the stream: there each must have recorded a message. */
static int all_reading(const opts *o, const fleet *f, sluice_conn *c, const sluice_keys *k,
                       long long n) {
    long long got = o->tenants > 0 ? fleet_recording(f) : consumers(c, k);
    if (got < n) {
        fprintf(stderr,
                "\nsluice-bench scale: only %lld of %lld workers took entries during the "
                "warm-up; try a longer --warmup\n",
                got, n);
    }
    return got >= n;
}

static int run_step(const opts *o, size_t idx, fleet *f, sluice_conn *c, row *out) {
    long long n = o->counts[idx];
    char queue[80], err[256];
    sluice_keys k;
    snprintf(queue, sizeof(queue), "bench-scale-%d-%lld", (int)getpid(), n);
    sluice_keys_init(&k, queue, err, sizeof(err));
    int rc = bench_purge(o->url, queue);
    if (rc == 0) {
        rc = set_capacity(c, &k, o->capacity);
    }
    if (rc == 0 && o->tenants > 0) { /* before the workers start: they read fair from the first */
        rc = bench_fair_on(o->url, queue);
    }
    if (rc == 0) {
        rc = fleet_start(f, o, queue, n, c, &k);
    }
    atomic_int stop = 0;
    producer_thread pt[MAX_PROD];
    sample a, b;
    long long np = 0;
    for (; rc == 0 && np < o->producers; np++) {
        pt[np] = (producer_thread){.o = o, .queue = queue, .stop = &stop};
        pthread_create(&pt[np].t, NULL, produce, &pt[np]);
    }
    if (rc == 0 &&
        (run_for(o, idx, n, "warmup", 0, (double)o->warmup_s, f, c, &k) != 0 ||
         take_sample(c, &k, &a) != 0 || !all_reading(o, f, c, &k, n) ||
         run_for(o, idx, n, "measure", (double)o->warmup_s, (double)o->duration_s, f, c, &k) != 0 ||
         take_sample(c, &k, &b) != 0)) {
        rc = SLUICE_EXIT_REDIS;
    }
    atomic_store(&stop, 1);
    for (long long i = 0; i < np; i++) {
        pthread_join(pt[i].t, NULL);
        if (pt[i].err[0] != '\0' && rc == 0) {
            fprintf(stderr, "\nsluice-bench scale: producer: %s\n", pt[i].err);
        }
    }
    int nw = f->n;
    fleet_stop(f);
    lat l = {NULL, 0, 0};
    read_records(f->dir, nw, rc == 0 ? a.wall_ms : 0, rc == 0 ? b.wall_ms : 0, &l);
    if (rc == 0 && !bench_scale_interrupted) {
        fill_row(o, n, &a, &b, &l, out);
    }
    free(l.v);
    for (int i = 0; rc == 0 && i < nw; i++) {
        char log[PATH_MAX + 32];
        snprintf(log, sizeof(log), "%s/worker-%d.log", f->dir, i);
        unlink(log); /* kept when something failed: the message names it */
    }
    bench_purge(o->url, queue);
    return rc;
}

int bench_scale(int argc, char **argv) {
    static opts o;
    static fleet f;
    static row rows[MAX_COUNTS];
    sluice_url u;
    char err[256];
    int rc = parse_args(&o, argc, argv);
    if (rc != 0) {
        return rc;
    }
    if (sluice_url_parse(&u, o.url, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench scale: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    snprintf(f.dir, sizeof(f.dir), "/tmp/sluice-scale-XXXXXX");
    if (mkdtemp(f.dir) == NULL) {
        fprintf(stderr, "sluice-bench scale: mkdtemp: %s\n", strerror(errno));
        return SLUICE_EXIT_USAGE;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sluice_conn *c = sluice_conn_new(&u, bench_conn_options());
    if (c == NULL || sluice_conn_ensure(c) != 0) {
        fprintf(stderr, "sluice-bench scale: %s\n", c ? sluice_conn_errstr(c) : "out of memory");
        rc = SLUICE_EXIT_REDIS;
    }
    size_t done = 0;
    for (; rc == 0 && done < o.ncounts && !bench_scale_interrupted; done++) {
        rc = run_step(&o, done, &f, c, &rows[done]);
        if (rc == 0 && !isatty(2) && !bench_scale_interrupted) {
            fprintf(stderr, "sluice-bench scale: workers=%lld done\n", o.counts[done]);
        }
    }
    if (isatty(2)) {
        fprintf(stderr, "\n");
    }
    if (bench_scale_interrupted) {
        fprintf(stderr,
                "sluice-bench scale: bench_scale_interrupted; workers stopped, queues purged\n");
        rc = 130;
    } else if (rc == 0) {
        report(&o, f.dir, rows, done);
    }
    sluice_conn_free(c);
    rmdir(f.dir); /* fails, harmlessly, when a worker log was kept for a failure */
    return rc;
}
