/* SPDX-License-Identifier: MIT */
/*
 * sluice-worker - the worker daemon: drains one queue with a built-in handler.
 *
 * Exit codes: 0 stopped cleanly (signal, --max-messages), 2 usage or bad input, 3 Redis
 * refused (wrong key type, missing permission), 130 stopped at once by a second signal.
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "sluice/cli.h"
#include "sluice/log.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/url.h"
#include "sluice/worker.h"

#include "handlers.h"
#include "metrics.h"

static const char usage[] =
    "usage: sluice-worker --queue NAME [options]\n"
    "\n"
    "Drains a sluice queue: reads entries through a consumer group, runs the handler,\n"
    "acknowledges and deletes each entry. Processing speed sets the admission rate.\n"
    "\n"
    "  -q, --queue NAME             queue to drain (1-64 of A-Z a-z 0-9 _ . -)\n"
    "  -r, --redis URL              redis://[user:pass@]host:port[/db] or unix:///path\n"
    "                               (default $SLUICE_REDIS_URL, else redis://127.0.0.1:6379)\n"
    "  -H, --handler SPEC           noop | sleep:MS | exec:CMD | crash-on:TEXT (default noop)\n"
    "                               exec: payload on stdin; exit 0 done, 75 retry, else failed\n"
    "  -c, --concurrency N          max in-flight messages, 1..100000 (default 16)\n"
    "  -b, --backend stream|list    (default stream)\n"
    "      --group NAME             consumer group (default workers)\n"
    "      --consumer NAME          consumer name (default HOSTNAME-PID)\n"
    "      --visibility-timeout MS  idle time before others may claim an entry (default 30000)\n"
    "      --max-deliveries N       deliveries before an entry is dead-lettered (default 5)\n"
    "      --retry-backoff MS       first retry delay, doubled per delivery (default 1000)\n"
    "      --grace MS               shutdown waits this long for handlers (default 10000)\n"
    "      --max-messages N         exit after N messages in all (default: run until signalled)\n"
    "      --block MS               XREADGROUP BLOCK time (default 1000)\n"
    "      --read-batch N           max entries per read (default 1000)\n"
    "      --record FILE            append \"ID PAYLOAD WALL_MS\" per processed message\n"
    "                               (checking)\n"
    "      --metrics HOST:PORT      serve Prometheus metrics at http://HOST:PORT/metrics\n"
    "      --log-level LEVEL        error|warn|info|debug|off (default info)\n"
    "  -h, --help                   this text\n"
    "\n"
    "A partitioned queue (sluice-admin partitions QUEUE P) is drained as a whole: one worker\n"
    "per partition, each on a thread of its own (--concurrency applies to each, --max-messages\n"
    "counts them all; partitions added later, also to a queue that was plain when the worker\n"
    "started, are picked up within a second; --metrics shows the queue as one, with a series\n"
    "per partition).\n"
    "\n"
    "SIGTERM/SIGINT: stop reading, finish in-flight work within the grace period, exit 0.\n"
    "A second signal exits at once (130); unfinished entries are reclaimed by other workers.\n"
    "EXAMPLES\n"
    "  sluice-worker --queue jobs --handler 'exec:./process.sh' --concurrency 8\n"
    "  sluice-worker -q jobs -H sleep:20 -c 16 --metrics 127.0.0.1:9100   simulate work\n"
    "  SLUICE_REDIS_URL=unix:///run/redis.sock sluice-worker -q jobs -H 'exec:cat'\n"
    "\n"
    "Exit codes: 0 ok, 2 usage or bad input, 3 redis refused, 130 forced stop.\n";

static sluice_worker *worker;
static int signals_seen;
static uv_timer_t abandon_timer;
static int grace_ms;

static void abandon_cb(uv_timer_t *t) {
    sw_handlers_abandon(t->loop);
}

static void parts_stop_all(void);

static void on_signal(uv_signal_t *s, int signum) {
    if (++signals_seen > 1) {
        fprintf(stderr, "sluice-worker: second signal: exiting now; in-flight entries stay "
                        "pending and will be reclaimed\n");
        _exit(130);
    }
    sluice_worker_stop(worker);
    parts_stop_all(); /* partitions added while it ran (none: a no-op) */
    /* the worker stops waiting after the grace period; then end what its handlers still run */
    uv_timer_start(&abandon_timer, abandon_cb, (uint64_t)grace_ms + 50, 0);
}

static int bad(const char *msg) {
    fprintf(stderr, "sluice-worker: %s\n", msg);
    fprintf(stderr, "Try 'sluice-worker --help'.\n");
    return SLUICE_EXIT_USAGE;
}

enum {
    OPT_GROUP = 256,
    OPT_CONSUMER,
    OPT_VIS,
    OPT_MAXDEL,
    OPT_BACKOFF,
    OPT_GRACE,
    OPT_MAXMSG,
    OPT_BLOCK,
    OPT_BATCH,
    OPT_RECORD,
    OPT_METRICS,
    OPT_LOG,
};

static const struct option longopts[] = {
    {"queue", required_argument, NULL, 'q'},
    {"redis", required_argument, NULL, 'r'},
    {"handler", required_argument, NULL, 'H'},
    {"concurrency", required_argument, NULL, 'c'},
    {"backend", required_argument, NULL, 'b'},
    {"group", required_argument, NULL, OPT_GROUP},
    {"consumer", required_argument, NULL, OPT_CONSUMER},
    {"visibility-timeout", required_argument, NULL, OPT_VIS},
    {"max-deliveries", required_argument, NULL, OPT_MAXDEL},
    {"retry-backoff", required_argument, NULL, OPT_BACKOFF},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"max-messages", required_argument, NULL, OPT_MAXMSG},
    {"block", required_argument, NULL, OPT_BLOCK},
    {"read-batch", required_argument, NULL, OPT_BATCH},
    {"record", required_argument, NULL, OPT_RECORD},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"log-level", required_argument, NULL, OPT_LOG},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef struct args {
    sluice_worker_options o;
    const char *handler;
    const char *record;
    const char *metrics;
    int log_level;
} args;

static int int_opt(const char *name, const char *v, long long lo, long long hi, int *out, char *err,
                   size_t errlen) {
    long long x;
    if (sluice_parse_ll(name, v, lo, hi, &x, err, errlen) != 0) {
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_one(args *a, int ch, const char *v, char *err, size_t n) {
    sluice_worker_options *o = &a->o;
    switch (ch) {
    case 'q':
        o->queue = v;
        return 0;
    case 'r':
        o->redis_url = v;
        return 0;
    case 'H':
        a->handler = v;
        return 0;
    case 'c':
        return int_opt("--concurrency", v, 1, 100000, &o->concurrency, err, n);
    case 'b':
        if (sluice_backend_parse(v, &o->backend) != 0) {
            snprintf(err, n, "--backend: \"%s\" is not stream or list", v);
            return -1;
        }
        return 0;
    case OPT_GROUP:
        o->group = v;
        return 0;
    case OPT_CONSUMER:
        o->consumer = v;
        return 0;
    case OPT_VIS:
        return int_opt("--visibility-timeout", v, 100, 86400000, &o->visibility_timeout_ms, err, n);
    case OPT_MAXDEL:
        return int_opt("--max-deliveries", v, 1, 1000000, &o->max_deliveries, err, n);
    case OPT_BACKOFF:
        return int_opt("--retry-backoff", v, 0, 86400000, &o->retry_backoff_ms, err, n);
    case OPT_GRACE:
        return int_opt("--grace", v, 0, 86400000, &o->grace_ms, err, n);
    case OPT_MAXMSG:
        return sluice_parse_ll("--max-messages", v, 1, (long long)1e15, &o->max_messages, err, n);
    case OPT_BLOCK:
        return int_opt("--block", v, 1, 600000, &o->block_ms, err, n);
    case OPT_BATCH:
        return int_opt("--read-batch", v, 1, 100000, &o->read_batch, err, n);
    case OPT_RECORD:
        a->record = v;
        return 0;
    case OPT_METRICS:
        a->metrics = v;
        return 0;
    case OPT_LOG:
        a->log_level = sluice_log_level_parse(v);
        if (a->log_level < -1) {
            snprintf(err, n, "--log-level: \"%s\" is not error, warn, info, debug or off", v);
            return -1;
        }
        return 0;
    default:
        snprintf(err, n, "unknown option");
        return -1;
    }
}

static int parse_args(args *a, int argc, char **argv, char *err, size_t n) {
    memset(a, 0, sizeof(*a));
    sluice_worker_options_init(&a->o);
    a->handler = "noop";
    a->log_level = SLUICE_LOG_INFO;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":q:r:H:c:b:hV", longopts, NULL)) != -1) {
        if (ch == 'V') {
            exit(sluice_cli_version("sluice-worker"));
        }
        if (ch == 'h') {
            fputs(usage, stdout);
            exit(0);
        }
        if (ch == '?' || ch == ':') {
            snprintf(err, n, "%s option '%s'", ch == '?' ? "unknown" : "missing value for",
                     argv[optind - 1]);
            return -1;
        }
        if (parse_one(a, ch, optarg, err, n) != 0) {
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, n, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (a->o.queue == NULL) {
        snprintf(err, n, "--queue is required");
        return -1;
    }
    return sw_handler_parse(a->handler, a->o.queue, &a->o, err, n);
}

/* ---- a partitioned queue: a worker per partition, each on its own thread and loop ----
 *
 * The worker of a plain queue (the single path of main) runs on the main loop as partition 0
 * (pq.plain): the same check starts workers for partitions added later on threads of their
 * own, so a queue partitioned while its worker runs is still drained as a whole. */

#define PARTS_CHECK_MS 1000

typedef struct part {
    sluice_worker *w;
    pthread_t thread;
    int started, status;
    sluice_worker_stats snap; /* its counters, copied on its thread (under pq.mu) */
    uv_async_t *stop;         /* on its loop: a stop came, start the grace period (under pq.mu;
                                 NULL while the thread has none) */
    char name[SLUICE_QUEUE_NAME_MAX + 1];
} part;

static struct {
    part parts[SLUICE_PARTITIONS_MAX];
    int n;            /* partitions with a worker */
    int stopping;     /* a signal came: start no more */
    atomic_int done;  /* workers that returned */
    uv_async_t wake;  /* a worker returned */
    uv_timer_t check; /* the partitions of the queue, once a second */
    uv_work_t check_req;
    int checking, seen; /* a check under way; the partitions it saw */
    sluice_conn *conn;  /* reads meta `partitions` */
    const char *queue;
    sluice_worker_options o;
    int plain;               /* partition 0 is the main loop's worker, not a thread of parts[] */
    pthread_mutex_t mu;      /* the parts' snapshots */
    sluice_metrics *metrics; /* --metrics of a queue partitioned at start */
} pq = {.mu = PTHREAD_MUTEX_INITIALIZER};

#define SNAPSHOT_MS 250 /* how often a partition's counters are copied for --metrics */

static void snapshot(part *p) {
    sluice_worker_stats s;
    sluice_worker_get_stats(p->w, &s);
    pthread_mutex_lock(&pq.mu);
    p->snap = s;
    pthread_mutex_unlock(&pq.mu);
}

static void on_snapshot(uv_timer_t *t) {
    snapshot(t->data);
}

/* A stop reached a partition's thread: after the grace period, end what its handlers still run
 * (sleeps and commands live on the loop of the thread that started them). */
static void on_part_stop(uv_async_t *a) {
    uv_timer_start(a->data, abandon_cb, (uint64_t)grace_ms + 50, 0);
}

/* A partition's thread: its worker on a loop of its own, its counters copied for --metrics, and
 * the grace period of a stop as on the main loop. */
static void *part_main(void *arg) {
    part *p = arg;
    uv_loop_t loop;
    uv_timer_t snap, abandon;
    uv_async_t stop;
    uv_loop_init(&loop);
    uv_timer_init(&loop, &snap);
    uv_timer_init(&loop, &abandon);
    uv_async_init(&loop, &stop, on_part_stop);
    snap.data = p;
    stop.data = &abandon;
    uv_timer_start(&snap, on_snapshot, SNAPSHOT_MS, SNAPSHOT_MS);
    uv_unref((uv_handle_t *)&snap); /* the loop ends with the worker */
    uv_unref((uv_handle_t *)&abandon);
    uv_unref((uv_handle_t *)&stop);
    pthread_mutex_lock(&pq.mu);
    p->stop = &stop;
    if (pq.stopping) { /* the stop came before this thread could hear it */
        uv_async_send(&stop);
    }
    pthread_mutex_unlock(&pq.mu);
    p->status = sluice_worker_run(p->w, &loop);
    pthread_mutex_lock(&pq.mu);
    p->stop = NULL;
    pthread_mutex_unlock(&pq.mu);
    snapshot(p);
    uv_close((uv_handle_t *)&snap, NULL);
    uv_close((uv_handle_t *)&abandon, NULL);
    uv_close((uv_handle_t *)&stop, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    atomic_fetch_add(&pq.done, 1);
    if (!pq.plain) { /* a plain queue's main loop ends with its own worker, not with these */
        uv_async_send(&pq.wake);
    }
    return NULL;
}

/* The queue's partitions (1 when not partitioned; -1 when Redis cannot say). */
static int parts_of(sluice_conn *c, const sluice_keys *k) {
    const char *argv[] = {"HGET", k->meta, "partitions"};
    redisReply *r = NULL;
    int n = -1;
    if (sluice_conn_command(c, 3, argv, NULL, &r, NULL) == 0) {
        long long v = sluice_reply_ll(r, 1);
        n = v < 1 ? 1 : v > SLUICE_PARTITIONS_MAX ? SLUICE_PARTITIONS_MAX : (int)v;
    }
    freeReplyObject(r);
    return n;
}

/* Starts workers for partitions [pq.n, n). 0, or a message in err. */
static int parts_grow(int n, char *err, size_t errlen) {
    while (pq.n < n && !pq.stopping) {
        part *p = &pq.parts[pq.n];
        sluice_worker_options o = pq.o;
        if (sluice_partition_name(pq.queue, pq.n, p->name, sizeof(p->name)) != 0) {
            snprintf(err, errlen, "partition %d of %s: name too long", pq.n, pq.queue);
            return -1;
        }
        o.queue = p->name;
        if (sluice_worker_new(&o, &p->w, err, errlen) != 0) {
            return -1;
        }
        if (pthread_create(&p->thread, NULL, part_main, p) != 0) {
            snprintf(err, errlen, "cannot start a thread for %s", p->name);
            sluice_worker_free(p->w);
            p->w = NULL;
            return -1;
        }
        p->started = 1;
        pq.n++;
        SLUICE_LOG(SLUICE_LOG_INFO, "event=partition_started queue=%s partition=%s", pq.queue,
                   p->name);
    }
    return 0;
}

static void parts_stop_all(void) {
    if (pq.stopping) {
        return; /* once: a second stop would end in-flight work at once */
    }
    pthread_mutex_lock(&pq.mu);
    pq.stopping = 1;
    for (int i = pq.plain; i < pq.n; i++) {
        sluice_worker_stop(pq.parts[i].w);
        if (pq.parts[i].stop != NULL) {
            uv_async_send(pq.parts[i].stop); /* the grace period, on its loop */
        }
    }
    pthread_mutex_unlock(&pq.mu);
}

/* The check asks Redis off the loop (libuv's thread pool): on a plain queue the loop also runs
 * the queue's own worker, which must not wait for a connect timeout. One check at a time. */
static void parts_check_work(uv_work_t *req) {
    sluice_keys k;
    pq.seen = sluice_keys_init(&k, pq.queue, NULL, 0) == 0 ? parts_of(pq.conn, &k) : -1;
}

static void parts_check_done(uv_work_t *req, int status) {
    char err[256];
    pq.checking = 0;
    if (status != 0 || pq.seen <= pq.n || pq.stopping) {
        return;
    }
    if (parts_grow(pq.seen, err, sizeof(err)) != 0) {
        SLUICE_LOG(SLUICE_LOG_ERROR, "event=partition_failed detail=\"%s\"", err);
    }
}

static void parts_check_cb(uv_timer_t *t) {
    if (!pq.checking && !pq.stopping &&
        uv_queue_work(t->loop, &pq.check_req, parts_check_work, parts_check_done) == 0) {
        pq.checking = 1;
    }
}

/* --metrics: the sum of the partitions' counters (the threads' last snapshots; a plain queue's
 * own worker, on this loop, read directly). */
static void parts_stats(void *arg, sluice_worker_stats *sum) {
    (void)arg;
    memset(sum, 0, sizeof(*sum));
    if (pq.plain) {
        sluice_worker_get_stats(worker, sum);
    }
    pthread_mutex_lock(&pq.mu);
    for (int i = pq.plain; i < pq.n; i++) {
        const sluice_worker_stats *s = &pq.parts[i].snap;
        sum->processed += s->processed, sum->failed += s->failed, sum->retried += s->retried;
        sum->dead += s->dead, sum->reclaimed += s->reclaimed, sum->abandoned += s->abandoned;
        sum->read += s->read, sum->redis_errors += s->redis_errors;
        sum->paced_wait_ms += s->paced_wait_ms, sum->in_flight += s->in_flight;
        for (int b = 0; b < SLUICE_WORKER_LATENCY_BUCKETS; b++) {
            sum->latency_buckets[b] += s->latency_buckets[b];
        }
        sum->latency_sum_s += s->latency_sum_s;
    }
    pthread_mutex_unlock(&pq.mu);
}

static int parts_count(void *arg) {
    (void)arg;
    return pq.n;
}

static void parts_wake_cb(uv_async_t *a) {
    if (atomic_load(&pq.done) >= pq.n) { /* every worker returned (--max-messages, an error) */
        pthread_mutex_lock(&pq.mu);
        pq.stopping = 1;
        pthread_mutex_unlock(&pq.mu);
        sw_metrics_stop(pq.metrics);
        pq.metrics = NULL;
        uv_timer_stop(&pq.check);
        uv_close((uv_handle_t *)&pq.check, NULL);
        uv_close((uv_handle_t *)a, NULL);
    }
}

static void parts_signal(uv_signal_t *s, int signum) {
    (void)s, (void)signum;
    if (++signals_seen > 1) {
        fprintf(stderr, "sluice-worker: second signal: exiting now; in-flight entries stay "
                        "pending and will be reclaimed\n");
        _exit(130);
    }
    parts_stop_all();
}

/* Waits for the partitions' threads, adds their counts to *sum and frees their workers; one
 * that failed makes *rc SLUICE_EXIT_REDIS (the first says why on stderr). */
static void parts_join(sluice_worker_stats *sum, int *rc) {
    for (int i = pq.plain; i < pq.n; i++) {
        pthread_join(pq.parts[i].thread, NULL);
        sluice_worker_stats s;
        sluice_worker_get_stats(pq.parts[i].w, &s);
        sum->processed += s.processed, sum->failed += s.failed, sum->retried += s.retried;
        sum->dead += s.dead, sum->reclaimed += s.reclaimed;
        if (pq.parts[i].status != 0 && *rc == 0) {
            fprintf(stderr, "sluice-worker: %s: %s\n", pq.parts[i].name,
                    sluice_worker_errstr(pq.parts[i].w));
            *rc = SLUICE_EXIT_REDIS;
        }
        sluice_worker_free(pq.parts[i].w);
    }
}

/* A plain queue: its worker runs on `loop` as partition 0; once a second the check looks for
 * partitions added since (see above). conn reads meta `partitions`. */
static void plain_watch_start(uv_loop_t *loop, const args *a, sluice_conn *conn) {
    pq.conn = conn;
    pq.queue = a->o.queue;
    pq.o = a->o;
    pq.plain = 1;
    pq.n = 1;
    snprintf(pq.parts[0].name, sizeof(pq.parts[0].name), "%s", a->o.queue);
    uv_timer_init(loop, &pq.check);
    uv_timer_start(&pq.check, parts_check_cb, PARTS_CHECK_MS, PARTS_CHECK_MS);
    uv_unref((uv_handle_t *)&pq.check); /* the loop ends with the queue's own worker */
}

/* The queue's own worker returned: the others stop too (their in-flight work within the grace
 * period) and are waited for. Returns the number of partitions that were drained. */
static int plain_watch_stop(sluice_worker_stats *sum, int *rc) {
    parts_stop_all();
    uv_timer_stop(&pq.check);
    uv_close((uv_handle_t *)&pq.check, NULL);
    parts_join(sum, rc);
    return pq.n;
}

static int run_partitioned(args *a, sluice_conn *conn, int n) {
    char err[512];
    uv_loop_t *loop = uv_default_loop();
    grace_ms = a->o.grace_ms;
    pq.conn = conn;
    pq.queue = a->o.queue;
    pq.o = a->o;
    uv_async_init(loop, &pq.wake, parts_wake_cb);
    uv_timer_init(loop, &pq.check);
    uv_timer_start(&pq.check, parts_check_cb, PARTS_CHECK_MS, PARTS_CHECK_MS);
    uv_signal_t sigterm, sigint;
    uv_signal_init(loop, &sigterm);
    uv_signal_init(loop, &sigint);
    uv_signal_start(&sigterm, parts_signal, SIGTERM);
    uv_signal_start(&sigint, parts_signal, SIGINT);
    uv_unref((uv_handle_t *)&sigterm);
    uv_unref((uv_handle_t *)&sigint);
    int rc = 0;
    if (parts_grow(n, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-worker: %s\n", err);
        parts_stop_all();
        rc = SLUICE_EXIT_USAGE;
        if (pq.n == 0) { /* nothing to wait for */
            uv_close((uv_handle_t *)&pq.check, NULL);
            uv_close((uv_handle_t *)&pq.wake, NULL);
        }
    } else if (a->metrics != NULL) {
        sw_metrics_parts src = {pq.parts[0].w, NULL, parts_stats, parts_count, NULL};
        if (sw_metrics_start_parts(loop, a->metrics, &src, &pq.metrics, err, sizeof(err)) != 0) {
            fprintf(stderr, "sluice-worker: %s\n", err);
            parts_stop_all();
            rc = SLUICE_EXIT_USAGE;
        }
    }
    SLUICE_LOG(SLUICE_LOG_INFO, "event=partitioned queue=%s partitions=%d", pq.queue, pq.n);
    uv_run(loop, UV_RUN_DEFAULT);
    sluice_worker_stats sum = {0};
    parts_join(&sum, &rc);
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    printf("processed=%llu failed=%llu retried=%llu dead=%llu reclaimed=%llu partitions=%d\n",
           sum.processed, sum.failed, sum.retried, sum.dead, sum.reclaimed, pq.n);
    return rc;
}

/* The number of partitions of the queue the worker was given (1: not partitioned, or Redis
 * cannot say now), and in *out a connection that reads them (NULL for a partition named on its
 * own or a URL the worker will refuse). */
static int partitions_of_queue(const args *a, sluice_conn **out) {
    char err[256];
    sluice_url url;
    sluice_keys k;
    *out = NULL;
    if (strchr(a->o.queue, '~') != NULL || sluice_keys_init(&k, a->o.queue, NULL, 0) != 0 ||
        sluice_url_parse(&url, a->o.redis_url ? a->o.redis_url : sluice_url_default(), err,
                         sizeof(err)) != 0 ||
        sluice_url_supported(&url, err, sizeof(err)) != 0) {
        return 1; /* a partition named on its own, or a bad URL the worker reports */
    }
    sluice_conn_options co;
    sluice_conn_options_init(&co);
    co.connect_timeout_ms = a->o.connect_timeout_ms > 0 ? a->o.connect_timeout_ms : 2000;
    co.queue = a->o.queue;
    co.name = "partitions";
    *out = sluice_conn_new(&url, &co);
    int n = *out != NULL ? parts_of(*out, &k) : -1;
    return n > 1 ? n : 1; /* unreachable now: the worker retries as ever, the check too */
}

int main(int argc, char **argv) {
    args a;
    char err[512];
    signal(SIGPIPE, SIG_IGN);
    if (parse_args(&a, argc, argv, err, sizeof(err)) != 0) {
        return bad(err);
    }
    sluice_log_set_level(a.log_level, "sluice-worker");
    if (a.record != NULL && sw_handlers_record(a.record) != 0) {
        snprintf(err, sizeof(err), "--record: cannot open \"%s\"", a.record);
        return bad(err);
    }
    sluice_conn *pconn;
    int nparts = partitions_of_queue(&a, &pconn);
    /* --max-messages is the process's: every partition's worker counts into one tally */
    sluice_worker_tally *tally = a.o.max_messages > 0 ? sluice_worker_tally_new() : NULL;
    if (a.o.max_messages > 0 && tally == NULL) {
        sluice_conn_free(pconn);
        return bad("out of memory");
    }
    a.o.tally = tally;
    if (nparts > 1) {
        int rc = run_partitioned(&a, pconn, nparts);
        sluice_conn_free(pconn);
        sluice_worker_tally_free(tally);
        return rc;
    }
    if (sluice_worker_new(&a.o, &worker, err, sizeof(err)) != 0) {
        sluice_conn_free(pconn);
        sluice_worker_tally_free(tally);
        return bad(err);
    }
    uv_loop_t *loop = uv_default_loop();
    uv_signal_t sigterm, sigint;
    uv_signal_init(loop, &sigterm);
    uv_signal_init(loop, &sigint);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_start(&sigint, on_signal, SIGINT);
    uv_unref((uv_handle_t *)&sigterm); /* signals alone do not keep the loop running */
    uv_unref((uv_handle_t *)&sigint);
    uv_timer_init(loop, &abandon_timer);
    uv_unref((uv_handle_t *)&abandon_timer);
    grace_ms = a.o.grace_ms;
    sluice_metrics *m = NULL;
    /* a plain queue that may be partitioned while this runs: its metrics follow the partitions */
    sw_metrics_parts src = {worker, worker, parts_stats, parts_count, NULL};
    if (a.metrics != NULL &&
        (pconn != NULL ? sw_metrics_start_parts(loop, a.metrics, &src, &m, err, sizeof(err))
                       : sw_metrics_start(loop, a.metrics, worker, &m, err, sizeof(err))) != 0) {
        sluice_worker_free(worker);
        sluice_conn_free(pconn);
        sluice_worker_tally_free(tally);
        return bad(err);
    }
    if (pconn != NULL) {
        plain_watch_start(loop, &a, pconn);
    }
    int st = sluice_worker_run(worker, loop);
    sw_metrics_stop(m);
    sluice_worker_stats s;
    sluice_worker_get_stats(worker, &s);
    int prc = 0, parts = pconn != NULL ? plain_watch_stop(&s, &prc) : 1;
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_close((uv_handle_t *)&abandon_timer, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    printf("processed=%llu failed=%llu retried=%llu dead=%llu reclaimed=%llu", s.processed,
           s.failed, s.retried, s.dead, s.reclaimed);
    if (parts > 1) {
        printf(" partitions=%d", parts);
    }
    printf("\n");
    if (st != 0) {
        fprintf(stderr, "sluice-worker: %s\n", sluice_worker_errstr(worker));
    }
    sluice_worker_free(worker);
    sluice_conn_free(pconn);
    sluice_worker_tally_free(tally);
    uv_loop_close(loop);
    return st == 0 && prc == 0 ? 0 : SLUICE_EXIT_REDIS;
}
