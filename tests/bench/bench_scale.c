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
#include "bench_util.h"

extern char **environ;

#define MAX_COUNTS  16
#define MAX_WORKERS 64
#define MAX_PROD    16
#define MAX_SAMPLES 20000000 /* latency samples kept per step */

static const char usage[] =
    "usage: sluice-bench scale [--redis URL] [--workers 1,2,4,8] [--work-ms MS] [--duration S]\n"
    "                          [--warmup S] [--concurrency C] [--capacity N] [--producers P]\n"
    "                          [--batch B] [--csv FILE] [--plot FILE.png] [--json]\n"
    "  --workers LIST    worker process counts to measure (default 1,2,4,8; each 1..64)\n"
    "  --work-ms MS      simulated work per message: --handler sleep:MS (default 5)\n"
    "  --duration S      measured seconds per count (default 10)\n"
    "  --warmup S        seconds before measuring, to fill the bucket (default 1)\n"
    "  --concurrency C   in-flight messages per worker (default 16)\n"
    "  --capacity N      the queue's capacity (default 1000)\n"
    "  --producers P     producer threads keeping the bucket full (default 2)\n"
    "  --batch B         messages per admission call (default 50)\n"
    "  --csv FILE        write the table as CSV\n"
    "  --plot FILE.png   draw throughput and latency against workers (needs gnuplot)\n"
    "Latency is end to end: producer send (before the admission call) to the handler's verdict.\n";

typedef struct opts {
    const char *url;
    long long counts[MAX_COUNTS];
    size_t ncounts;
    long long work_ms, duration_s, warmup_s, conc, capacity, producers, batch;
    const char *csv, *plot;
    int json;
} opts;

typedef struct row {
    long long workers, samples;
    double processed, admitted, rejected, ideal, p50, p99, redis_cpu, cpu;
} row;

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    interrupted = 1;
}

static void nap_ms(long long ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !interrupted) {
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
        {"csv", 1, NULL, 'v'},      {"plot", 1, NULL, 'P'},      {"json", 0, NULL, 'j'},
        {"help", 0, NULL, 'h'},     {NULL, 0, NULL, 0}};
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

/* redis-server's CPU seconds (user + sys) from INFO cpu; -1 when unknown. */
static double redis_cpu_s(sluice_conn *c) {
    const char *argv[] = {"INFO", "cpu"};
    redisReply *r = NULL;
    double total = -1;
    if (sluice_conn_command(c, 2, argv, NULL, &r, NULL) == 0 && r->type == REDIS_REPLY_STRING) {
        const char *u = strstr(r->str, "used_cpu_user:"), *s = strstr(r->str, "used_cpu_sys:");
        if (u != NULL && s != NULL) {
            total = atof(u + 14) + atof(s + 13);
        }
    }
    freeReplyObject(r);
    return total;
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
    po.queue = pt->queue;
    po.capacity = pt->o->capacity;
    if (sluice_producer_new(&po, &p, pt->err, sizeof(pt->err)) != 0) {
        return NULL;
    }
    size_t n = (size_t)pt->o->batch;
    sluice_message *msgs = calloc(n, sizeof(*msgs));
    sluice_admit_result *res = calloc(n, sizeof(*res));
    char(*bodies)[24] = calloc(n, sizeof(*bodies));
    while (msgs && res && bodies && !atomic_load(pt->stop) && !interrupted) {
        unsigned long long now = (unsigned long long)sluice_wall_ms();
        for (size_t i = 0; i < n; i++) {
            msgs[i].payload = bodies[i];
            msgs[i].len = (size_t)snprintf(bodies[i], sizeof(bodies[i]), "%llu", now);
        }
        size_t admitted = 0;
        if (sluice_producer_admit_batch(p, msgs, n, res, &admitted) != 0) {
            snprintf(pt->err, sizeof(pt->err), "%s", sluice_producer_errstr(p));
            pt->failures++;
            nap_ms(10);
        } else if (admitted < n) {
            nap_ms(1); /* the bucket is full: back off a little, as a 429'd client would */
        }
    }
    free(msgs);
    free(res);
    free(bodies);
    sluice_producer_free(p);
    return NULL;
}

/* ---- worker processes ---- */

typedef struct fleet {
    pid_t pids[MAX_WORKERS];
    int n;
    char dir[PATH_MAX];
} fleet;

static int worker_path(char *out, size_t len) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        return -1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    int k = snprintf(out, len, "%s/sluice-worker", self);
    return k > 0 && (size_t)k < len ? access(out, X_OK) : -1;
}

static pid_t spawn_worker(const opts *o, const char *exe, const char *queue, const char *dir,
                          int i) {
    char handler[32], conc[24], rec[PATH_MAX + 32], log[PATH_MAX + 32], name[48];
    snprintf(handler, sizeof(handler), "sleep:%lld", o->work_ms);
    snprintf(conc, sizeof(conc), "%lld", o->conc);
    snprintf(rec, sizeof(rec), "%s/worker-%d.rec", dir, i);
    snprintf(log, sizeof(log), "%s/worker-%d.log", dir, i);
    snprintf(name, sizeof(name), "scale-%d-%d", (int)getpid(), i);
    const char *argv[] = {exe,     "--queue",       queue,  "--redis",     o->url, "--handler",
                          handler, "--concurrency", conc,   "--record",    rec,    "--consumer",
                          name,    "--grace",       "2000", "--log-level", "warn", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    if (posix_spawn(&pid, exe, &fa, NULL, (char *const *)argv, environ) != 0) {
        pid = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

/* SIGTERM, up to 5 s for a clean exit, then SIGKILL. */
static void fleet_stop(fleet *f) {
    for (int i = 0; i < f->n; i++) {
        kill(f->pids[i], SIGTERM);
    }
    uint64_t until = sluice_now_ms() + 5000;
    for (int i = 0; i < f->n; i++) {
        while (waitpid(f->pids[i], NULL, WNOHANG) == 0) {
            if (sluice_now_ms() > until) {
                kill(f->pids[i], SIGKILL);
                waitpid(f->pids[i], NULL, 0);
                break;
            }
            nap_ms(10);
        }
    }
    f->n = 0;
}

/* 0 while every worker runs; else prints which one exited and returns -1. */
static int fleet_alive(const fleet *f) {
    for (int i = 0; i < f->n; i++) {
        int status;
        if (waitpid(f->pids[i], &status, WNOHANG) == f->pids[i]) {
            fprintf(stderr,
                    "\nsluice-bench scale: worker %d exited early (status %d); see %s/"
                    "worker-%d.log\n",
                    i, status, f->dir, i);
            return -1;
        }
    }
    return 0;
}

static int fleet_start(fleet *f, const opts *o, const char *queue, long long n, sluice_conn *c,
                       const sluice_keys *k) {
    char exe[PATH_MAX];
    if (worker_path(exe, sizeof(exe)) != 0) {
        fprintf(stderr, "sluice-bench scale: no sluice-worker next to this binary (%s)\n", exe);
        return SLUICE_EXIT_USAGE;
    }
    for (f->n = 0; f->n < n; f->n++) {
        if ((f->pids[f->n] = spawn_worker(o, exe, queue, f->dir, f->n)) < 0) {
            fprintf(stderr, "sluice-bench scale: cannot start %s\n", exe);
            return SLUICE_EXIT_REDIS;
        }
    }
    /* ready enough = the group exists; the warm-up lets every worker connect and fill up */
    for (int i = 0; i < 1000 && !interrupted; i++) {
        if (consumers(c, k) >= 0) {
            return 0;
        }
        if (fleet_alive(f) != 0) {
            return SLUICE_EXIT_REDIS;
        }
        nap_ms(10);
    }
    fprintf(stderr, "sluice-bench scale: the workers did not start within 10 s\n");
    return SLUICE_EXIT_REDIS;
}

/* ---- latency from the workers' records ---- */

typedef struct lat {
    unsigned *v; /* ms */
    size_t n, cap;
} lat;

static void lat_add(lat *l, unsigned ms) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 65536;
        unsigned *v = cap <= MAX_SAMPLES ? realloc(l->v, cap * sizeof(*v)) : NULL;
        if (v == NULL) {
            return; /* keep what we have: a bounded sample */
        }
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = ms;
}

/* Lines "<id> <send_ms> <done_ms>" finished inside [w0, w1]; the files are removed after. */
static void read_records(const char *dir, int nworkers, uint64_t w0, uint64_t w1, lat *l) {
    for (int i = 0; i < nworkers; i++) {
        char path[PATH_MAX + 32], id[64];
        unsigned long long sent, done;
        snprintf(path, sizeof(path), "%s/worker-%d.rec", dir, i);
        FILE *f = fopen(path, "r");
        while (f != NULL && fscanf(f, "%63s %llu %llu", id, &sent, &done) == 3) {
            if (done >= w0 && done <= w1 && done >= sent) {
                lat_add(l, (unsigned)(done - sent));
            }
        }
        if (f != NULL) {
            fclose(f);
        }
        unlink(path);
    }
}

static int cmp_unsigned(const void *a, const void *b) {
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

static double percentile(const lat *l, double q) {
    if (l->n == 0) {
        return -1;
    }
    size_t i = (size_t)(q * (double)l->n);
    return (double)l->v[i < l->n ? i : l->n - 1];
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
    s->redis_s = redis_cpu_s(c);
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
    while (!interrupted) {
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
        nap_ms(250);
    }
    return 0;
}

static void fill_row(const opts *o, long long n, const sample *a, const sample *b, lat *l,
                     row *out) {
    double secs = (double)(b->mono_ns - a->mono_ns) / 1e9;
    qsort(l->v, l->n, sizeof(*l->v), cmp_unsigned);
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

/* After the warm-up every worker must have taken entries; else the row would lie. */
static int all_reading(sluice_conn *c, const sluice_keys *k, long long n) {
    long long got = consumers(c, k);
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
         take_sample(c, &k, &a) != 0 || !all_reading(c, &k, n) ||
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
    if (rc == 0 && !interrupted) {
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

/* ---- output ---- */

static void print_table(const opts *o, const row *rows, size_t n) {
    char a[32], b[32], c[32], d[32];
    printf("sluice-bench scale: handler sleep:%lld, concurrency %lld per worker, capacity %lld, "
           "%lld producer thread%s x batch %lld, %llds measured per row\n",
           o->work_ms, o->conc, o->capacity, o->producers, o->producers == 1 ? "" : "s", o->batch,
           o->duration_s);
    printf("%7s %12s %12s %12s %8s %8s %12s %9s %6s\n", "workers", "processed/s", "admitted/s",
           "rejected/s", "p50 ms", "p99 ms", "ideal/s", "redis cpu", "cpu");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        printf("%7lld %12s %12s %12s %8.0f %8.0f %12s %8.0f%% %5.0f%%\n", r->workers,
               sluice_fmt_count(a, sizeof(a), (unsigned long long)r->processed),
               sluice_fmt_count(b, sizeof(b), (unsigned long long)r->admitted),
               sluice_fmt_count(c, sizeof(c), (unsigned long long)r->rejected), r->p50, r->p99,
               r->ideal >= 0 ? sluice_fmt_count(d, sizeof(d), (unsigned long long)r->ideal) : "-",
               r->redis_cpu, r->cpu);
    }
    printf("latency: producer send -> handler verdict (ms). ideal: workers x concurrency / work. "
           "redis cpu: %% of one core; cpu: %% of all %ld cores.\n",
           sysconf(_SC_NPROCESSORS_ONLN));
}

static void print_json(const opts *o, const row *r) {
    printf("{\"bench\":\"scale\",\"workers\":%lld,\"processed_per_s\":%.1f,\"admitted_per_s\":%.1f,"
           "\"rejected_per_s\":%.1f,\"p50_ms\":%.0f,\"p99_ms\":%.0f,\"ideal_per_s\":%.0f,"
           "\"redis_cpu_pct\":%.1f,\"cpu_pct\":%.1f,\"samples\":%lld,\"work_ms\":%lld,"
           "\"concurrency\":%lld,\"capacity\":%lld}\n",
           r->workers, r->processed, r->admitted, r->rejected, r->p50, r->p99, r->ideal,
           r->redis_cpu, r->cpu, r->samples, o->work_ms, o->conc, o->capacity);
}

static int write_csv(const char *path, const row *rows, size_t n) {
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "sluice-bench scale: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "workers,processed_per_s,admitted_per_s,rejected_per_s,p50_ms,p99_ms,ideal_per_s,"
               "redis_cpu_pct,cpu_pct,samples\n");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f, "%lld,%.1f,%.1f,%.1f,%.0f,%.0f,%.0f,%.1f,%.1f,%lld\n", r->workers, r->processed,
                r->admitted, r->rejected, r->p50, r->p99, r->ideal, r->redis_cpu, r->cpu,
                r->samples);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Path of `prog` in $PATH, the way `command -v` finds it. */
static int find_in_path(const char *prog, char *out, size_t len) {
    const char *path = getenv("PATH");
    while (path != NULL && *path != '\0') {
        size_t n = strcspn(path, ":");
        snprintf(out, len, "%.*s/%s", (int)n, path, prog);
        if (n > 0 && access(out, X_OK) == 0) {
            return 0;
        }
        path += n + (path[n] == ':');
    }
    return -1;
}

static void gnuplot_script(FILE *f, const opts *o, const char *csv, const row *rows, size_t n) {
    double ymax = 1;
    for (size_t i = 0; i < n; i++) {
        ymax = rows[i].processed > ymax ? rows[i].processed : ymax;
        ymax = rows[i].admitted > ymax ? rows[i].admitted : ymax;
    }
    fprintf(f, "set terminal pngcairo size 900,700 font 'sans,10'\nset output '%s'\n", o->plot);
    fprintf(f,
            "set datafile separator ','\nset multiplot layout 2,1 title "
            "'sluice-bench scale: sleep:%lld ms handler, concurrency %lld per worker, "
            "capacity %lld'\n",
            o->work_ms, o->conc, o->capacity);
    fprintf(f, "set lmargin 12\nset rmargin 10\nset logscale x 2\nset grid\nset key left top\n"
               "set xtics (");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s'%lld' %lld", i ? ", " : "", rows[i].workers, rows[i].workers);
    }
    fprintf(f, ")\nset xrange [%g:%g]\n", (double)rows[0].workers * 0.8,
            (double)rows[n - 1].workers * 1.25);
    fprintf(f,
            "set ylabel 'messages / s'\nset yrange [0:%.0f]\n"
            "set y2label 'cpu %%'\nset y2range [0:100]\nset y2tics 25\n"
            "plot '%s' every ::1 using 1:2 with linespoints lw 2 title 'processed/s', \\\n"
            "     '' every ::1 using 1:3 with linespoints title 'admitted/s', \\\n"
            "     '' every ::1 using 1:7 with lines dt 2 title 'ideal (workers x C / work)', \\\n"
            "     '' every ::1 using 1:9 axes x1y2 with linespoints dt 3 title "
            "'machine cpu %% (right)'\n",
            ymax * 1.4, csv);
    fprintf(f,
            "unset y2label\nunset y2tics\nset key right top\nset xlabel 'worker processes'\n"
            "set ylabel 'end-to-end latency, ms'\nset yrange [0:*]\n"
            "plot '%s' every ::1 using 1:5 with linespoints lw 2 title 'p50', \\\n"
            "     '' every ::1 using 1:6 with linespoints title 'p99'\n"
            "unset multiplot\n",
            csv);
}

static void plot(const opts *o, const char *csv, const char *dir, const row *rows, size_t n) {
    char gp[PATH_MAX], script[PATH_MAX + 16];
    if (find_in_path("gnuplot", gp, sizeof(gp)) != 0) {
        fprintf(stderr, "sluice-bench scale: plot skipped: gnuplot is not installed "
                        "(apt-get install gnuplot-nox)\n");
        return;
    }
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    FILE *f = fopen(script, "w");
    if (f == NULL) {
        return;
    }
    gnuplot_script(f, o, csv, rows, n);
    fclose(f);
    pid_t pid;
    int status = -1;
    const char *argv[] = {gp, script, NULL};
    if (posix_spawn(&pid, gp, NULL, NULL, (char *const *)argv, environ) == 0) {
        waitpid(pid, &status, 0);
    }
    if (status == 0) {
        fprintf(stderr, "sluice-bench scale: plot written to %s\n", o->plot);
    } else {
        fprintf(stderr, "sluice-bench scale: gnuplot failed (script %s)\n", script);
    }
    unlink(script);
}

static void report(const opts *o, const char *dir, const row *rows, size_t n) {
    char csv[PATH_MAX + 16];
    if (o->json) {
        for (size_t i = 0; i < n; i++) {
            print_json(o, &rows[i]);
        }
    } else {
        print_table(o, rows, n);
    }
    if (o->csv != NULL && write_csv(o->csv, rows, n) == 0) {
        fprintf(stderr, "sluice-bench scale: CSV written to %s\n", o->csv);
    }
    if (o->plot != NULL && n > 0) {
        snprintf(csv, sizeof(csv), "%s/scale.csv", dir);
        if (write_csv(o->csv != NULL ? o->csv : csv, rows, n) == 0) {
            plot(o, o->csv != NULL ? o->csv : csv, dir, rows, n);
        }
        unlink(csv);
    }
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
    sluice_conn *c = sluice_conn_new(&u, NULL);
    if (c == NULL || sluice_conn_ensure(c) != 0) {
        fprintf(stderr, "sluice-bench scale: %s\n", c ? sluice_conn_errstr(c) : "out of memory");
        rc = SLUICE_EXIT_REDIS;
    }
    size_t done = 0;
    for (; rc == 0 && done < o.ncounts && !interrupted; done++) {
        rc = run_step(&o, done, &f, c, &rows[done]);
        if (rc == 0 && !isatty(2) && !interrupted) {
            fprintf(stderr, "sluice-bench scale: workers=%lld done\n", o.counts[done]);
        }
    }
    if (isatty(2)) {
        fprintf(stderr, "\n");
    }
    if (interrupted) {
        fprintf(stderr, "sluice-bench scale: interrupted; workers stopped, queues purged\n");
        rc = 130;
    } else if (rc == 0) {
        report(&o, f.dir, rows, done);
    }
    sluice_conn_free(c);
    rmdir(f.dir); /* fails, harmlessly, when a worker log was kept for a failure */
    return rc;
}
