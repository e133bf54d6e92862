/* SPDX-License-Identifier: MIT */
/*
 * pool.c - sluice_worker_pool: a queue drained as a whole, one worker per partition.
 *
 * A partitioned queue (meta `partitions` = P) is P queues: Q, Q~1 .. Q~P-1. The pool runs a
 * worker for each, every one on a thread and a loop of its own (a worker's loop is single
 * threaded; one thread per partition lets a partition's reads and handlers go on while another
 * waits for its Redis node). The pool's own loop (the caller's) holds the supervisor: once every
 * check_ms it reads the count again, off the loop on libuv's thread pool, and starts workers for
 * partitions added since; it hears stop requests and passes them on, and ends when the workers
 * have.
 *
 * A queue that is plain when the pool starts (or whose count Redis cannot give then) keeps its
 * worker on the pool's loop as partition 0, as a lone sluice_worker would run; the same check
 * starts threads for partitions added while it runs, and the pool ends with that worker. A name
 * holding '~' is a partition on its own: the pool runs its worker alone and never looks for
 * more.
 *
 * Counters: a partition's thread copies its worker's counters and concurrency limit (one
 * reading) every SNAPSHOT_MS (and once more when the worker returned) under the pool's mutex;
 * sluice_worker_pool_get_stats and _concurrency_limit sum those copies with the reading of the
 * worker on the pool's loop. max_messages counts the whole pool:
 * every worker shares one tally (the caller's, or the pool's own).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/client.h"
#include "sluice/log.h"
#include "sluice/options.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/tls.h"
#include "sluice/worker.h"

#define SNAPSHOT_MS   250     /* how often a partition's thread copies its worker's counters */
#define GRACE_SLACK   50      /* ms after grace_ms before on_grace_expired runs */
#define CHECK_MS_MIN  10      /* check_ms range */
#define CHECK_MS_MAX  3600000 /* (an hour) */
#define CHECK_DEFAULT 1000

/* What a partition's worker reports: its counters and its concurrency limit. */
typedef struct reading {
    sluice_worker_stats stats;
    int limit;
} reading;

typedef struct part {
    sluice_worker_pool *pool;
    sluice_worker *w; /* NULL until the partition is started */
    pthread_t thread;
    int threaded;     /* runs on a thread of its own (joined by the pool) */
    int status;       /* what its sluice_worker_run returned */
    reading snap;     /* its counters and limit, copied on its thread (under mu) */
    uv_async_t *stop; /* on its loop: a stop came, start the grace period (under mu;
                         NULL while the thread has none) */
    char name[SLUICE_QUEUE_NAME_MAX + 1];
} part;

struct sluice_worker_pool {
    sluice_worker_options o; /* every partition's, but the queue; strings below */
    char *queue, *redis_url, *group, *consumer;
    sluice_conn_options tls; /* the tls_* options, copied; o.tls points here */
    sluice_worker_pool_options po;
    sluice_worker_tally *own_tally; /* max_messages without a caller's tally */
    sluice_keys keys;               /* the queue's: meta `partitions` */
    sluice_conn *conn;              /* reads it; NULL for a partition named on its own */
    sluice_worker_info info;        /* partition 0's, taken before it ran */
    part parts[SLUICE_PARTITIONS_MAX];
    atomic_int n;    /* partitions with a worker (written on the pool's loop) */
    int plain;       /* partition 0 runs on the pool's loop */
    int ran;         /* sluice_worker_pool_run was called */
    int w0_running;  /* plain: partition 0's worker runs on the loop */
    int stopping;    /* stop levels applied: 1 graceful, 2 at once (under mu) */
    int closing;     /* the pool closes its handles: every worker returned */
    int threads;     /* threads started */
    int done;        /* threads whose worker returned (under mu) */
    int wake_closed; /* wake is closing (under mu) */
    atomic_int stop_requests;
    atomic_int async_live; /* stop_async is open */
    uv_loop_t own_loop;
    uv_loop_t *loop;
    uv_async_t stop_async; /* a stop request */
    uv_async_t wake;       /* a partition's thread ended */
    uv_timer_t check;      /* the partition count, every check_ms */
    uv_timer_t grace;      /* plain: on_grace_expired for the loop's worker */
    uv_work_t check_req;
    int checking, seen; /* a check under way; the partitions it saw */
    pthread_mutex_t mu;
    int status;
    char err[SLUICE_QUEUE_NAME_MAX + 600];
};

void sluice_worker_pool_options_init_sized(sluice_worker_pool_options *o, size_t size) {
    sluice_worker_pool_options d;
    memset(&d, 0, sizeof(d));
    d.check_ms = CHECK_DEFAULT;
    sluice__options_give(o, size, &d, sizeof(d));
}

/* ---- counters ---- */

static void stats_add(sluice_worker_stats *sum, const sluice_worker_stats *s) {
    sum->processed += s->processed, sum->failed += s->failed, sum->retried += s->retried;
    sum->dead += s->dead, sum->reclaimed += s->reclaimed, sum->abandoned += s->abandoned;
    sum->read += s->read, sum->redis_errors += s->redis_errors;
    sum->paced_wait_ms += s->paced_wait_ms, sum->in_flight += s->in_flight;
    for (int b = 0; b < SLUICE_WORKER_LATENCY_BUCKETS; b++) {
        sum->latency_buckets[b] += s->latency_buckets[b];
    }
    sum->latency_sum_s += s->latency_sum_s;
}

static void read_worker(sluice_worker *w, reading *r) {
    sluice_worker_get_stats(w, &r->stats);
    r->limit = sluice_worker_concurrency_limit(w);
}

static void snapshot(part *t) {
    reading r;
    read_worker(t->w, &r);
    pthread_mutex_lock(&t->pool->mu);
    t->snap = r;
    pthread_mutex_unlock(&t->pool->mu);
}

/* The sum over the partitions: the threads' last snapshots, a worker on this loop (or never run)
 * read now. */
static void pool_sum(const sluice_worker_pool *cp, reading *sum) {
    sluice_worker_pool *p = (sluice_worker_pool *)cp; /* the mutex only */
    memset(sum, 0, sizeof(*sum));
    int n = atomic_load(&p->n);
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++) {
        reading now;
        const reading *r = p->parts[i].threaded ? &p->parts[i].snap : NULL;
        if (r == NULL && p->parts[i].w != NULL) {
            read_worker(p->parts[i].w, &now);
            r = &now;
        }
        if (r != NULL) {
            stats_add(&sum->stats, &r->stats);
            sum->limit += r->limit;
        }
    }
    pthread_mutex_unlock(&p->mu);
}

void sluice_worker_pool_get_stats(const sluice_worker_pool *p, sluice_worker_stats *sum) {
    reading r;
    pool_sum(p, &r);
    *sum = r.stats;
}

int sluice_worker_pool_concurrency_limit(const sluice_worker_pool *p) {
    reading r;
    pool_sum(p, &r);
    return r.limit;
}

int sluice_worker_pool_partitions(const sluice_worker_pool *p) {
    return atomic_load(&p->n);
}

void sluice_worker_pool_get_info(const sluice_worker_pool *p, sluice_worker_info *out) {
    *out = p->info;
    if (p->plain && p->w0_running) {
        sluice_worker_info w0;
        sluice_worker_get_info(p->parts[0].w, &w0);
        out->stopping = w0.stopping;
    } else {
        out->stopping = p->closing ? 2 : p->stopping ? 1 : 0;
    }
}

const char *sluice_worker_pool_errstr(const sluice_worker_pool *p) {
    return p->err;
}

/* ---- a partition's thread ---- */

static void grace_expired(sluice_worker_pool *p, uv_loop_t *loop) {
    if (p->po.on_grace_expired != NULL) {
        p->po.on_grace_expired(loop, p->po.arg);
    }
}

/* The delay before on_grace_expired after a stop: none after a second one. */
static uint64_t grace_delay(sluice_worker_pool *p) {
    pthread_mutex_lock(&p->mu);
    int now = p->stopping >= 2;
    pthread_mutex_unlock(&p->mu);
    return now ? 0 : (uint64_t)p->o.grace_ms + GRACE_SLACK;
}

static void on_part_grace(uv_timer_t *t) {
    part *pt = t->data;
    grace_expired(pt->pool, t->loop);
}

static void on_snapshot(uv_timer_t *t) {
    snapshot(t->data);
}

/* A stop reached a partition's thread: after the grace period, on_grace_expired on its loop
 * (what async handlers start lives on the loop of the thread that started it). */
static void on_part_stop(uv_async_t *a) {
    uv_timer_t *grace = a->data;
    part *pt = grace->data;
    uv_timer_start(grace, on_part_grace, grace_delay(pt->pool), 0);
}

static void *part_main(void *arg) {
    part *t = arg;
    sluice_worker_pool *p = t->pool;
    uv_loop_t loop;
    uv_timer_t snap, grace;
    uv_async_t stop;
    uv_loop_init(&loop);
    uv_timer_init(&loop, &snap);
    uv_timer_init(&loop, &grace);
    uv_async_init(&loop, &stop, on_part_stop);
    snap.data = grace.data = t;
    stop.data = &grace;
    uv_timer_start(&snap, on_snapshot, SNAPSHOT_MS, SNAPSHOT_MS);
    uv_unref((uv_handle_t *)&snap); /* the loop ends with the worker */
    uv_unref((uv_handle_t *)&grace);
    uv_unref((uv_handle_t *)&stop);
    pthread_mutex_lock(&p->mu);
    t->stop = &stop;
    if (p->stopping) { /* the stop came before this thread could hear it */
        uv_async_send(&stop);
    }
    pthread_mutex_unlock(&p->mu);
    t->status = sluice_worker_run(t->w, &loop);
    pthread_mutex_lock(&p->mu);
    t->stop = NULL;
    pthread_mutex_unlock(&p->mu);
    snapshot(t);
    uv_close((uv_handle_t *)&snap, NULL);
    uv_close((uv_handle_t *)&grace, NULL);
    uv_close((uv_handle_t *)&stop, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    pthread_mutex_lock(&p->mu); /* the count and the wake-up together: see on_wake */
    p->done++;
    if (!p->plain && !p->wake_closed) { /* a plain queue's pool ends with its own worker */
        uv_async_send(&p->wake);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* ---- the supervisor, on the pool's loop ---- */

/* The queue's partitions (1 when not partitioned; -1 when Redis cannot say). */
static int partitions_of(sluice_worker_pool *p) {
    const char *argv[] = {"HGET", p->keys.meta, "partitions"};
    redisReply *r = NULL;
    int n = -1;
    if (sluice_conn_command(p->conn, 3, argv, NULL, &r, NULL) == 0) {
        long long v = sluice_reply_ll(r, 1);
        n = v < 1 ? 1 : v > SLUICE_PARTITIONS_MAX ? SLUICE_PARTITIONS_MAX : (int)v;
    }
    freeReplyObject(r);
    return n;
}

/* A worker for partition i (0 has one from _new). 0 or a status, the message in p->err. */
static int part_worker(sluice_worker_pool *p, int i) {
    part *t = &p->parts[i];
    if (t->w != NULL) {
        return 0;
    }
    if (sluice_partition_name(p->queue, i, t->name, sizeof(t->name)) != 0) {
        snprintf(p->err, sizeof(p->err), "partition %d of %s: name too long", i, p->queue);
        return SLUICE_EINVAL;
    }
    sluice_worker_options o = p->o;
    o.queue = t->name;
    return sluice_worker_new(&o, &t->w, p->err, sizeof(p->err));
}

/* Starts threaded workers for the partitions from the first without one (1 on a plain queue,
 * whose partition 0 runs on the loop) to want - 1. 0, or a status with the message in p->err. */
static int grow(sluice_worker_pool *p, int want) {
    for (int i = p->threads + p->plain; i < want && !p->stopping; i++) {
        part *t = &p->parts[i];
        int st = part_worker(p, i);
        if (st != 0) {
            return st;
        }
        t->pool = p;
        t->threaded = 1;
        if (pthread_create(&t->thread, NULL, part_main, t) != 0) {
            snprintf(p->err, sizeof(p->err), "cannot start a thread for %s", t->name);
            t->threaded = 0;
            return SLUICE_ENOMEM;
        }
        p->threads++;
        if (i + 1 > atomic_load(&p->n)) {
            atomic_store(&p->n, i + 1);
        }
        SLUICE_LOG(SLUICE_LOG_INFO, "event=partition_started queue=%s partition=%s", p->queue,
                   t->name);
    }
    return 0;
}

static void on_grace(uv_timer_t *t) {
    grace_expired(t->data, t->loop);
}

/* One more stop level (1: stop reading, finish in-flight work; 2: at once) for every worker. */
static void stop_level(sluice_worker_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->stopping++;
    for (int i = 0; i < atomic_load(&p->n); i++) {
        sluice_worker_stop(p->parts[i].w);
        if (p->parts[i].stop != NULL) {
            uv_async_send(p->parts[i].stop); /* the grace period, on its loop */
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (p->w0_running) {
        uv_timer_start(&p->grace, on_grace, grace_delay(p), 0);
    }
}

static void apply_stops(sluice_worker_pool *p) {
    int want = atomic_load(&p->stop_requests);
    while (p->stopping < want && p->stopping < 2) {
        stop_level(p);
    }
}

static void on_stop(uv_async_t *a) {
    apply_stops(a->data);
}

void sluice_worker_pool_stop(sluice_worker_pool *p) {
    if (p == NULL) {
        return;
    }
    atomic_fetch_add(&p->stop_requests, 1);
    if (atomic_load(&p->async_live)) {
        uv_async_send(&p->stop_async);
    }
}

/* The check reads Redis off the loop (libuv's thread pool): on a plain queue the loop also runs
 * the queue's own worker, which must not wait for a connect timeout. One check at a time. */
static void check_work(uv_work_t *req) {
    sluice_worker_pool *p = req->data;
    p->seen = partitions_of(p);
}

static void check_done(uv_work_t *req, int status) {
    sluice_worker_pool *p = req->data;
    p->checking = 0;
    if (status != 0 || p->seen <= atomic_load(&p->n) || p->stopping || p->closing) {
        return;
    }
    if (grow(p, p->seen) != 0) {
        SLUICE_LOG(SLUICE_LOG_ERROR, "event=partition_failed detail=\"%s\"", p->err);
        p->err[0] = '\0'; /* not the pool's failure: the others go on */
    }
}

static void on_check(uv_timer_t *t) {
    sluice_worker_pool *p = t->data;
    if (!p->checking && !p->stopping && !p->closing &&
        uv_queue_work(t->loop, &p->check_req, check_work, check_done) == 0) {
        p->checking = 1;
    }
}

static void close_handles(sluice_worker_pool *p) {
    if (p->closing) {
        return;
    }
    p->closing = 1;
    atomic_store(&p->async_live, 0);
    uv_handle_t *hs[] = {(uv_handle_t *)&p->stop_async, (uv_handle_t *)&p->wake,
                         (uv_handle_t *)&p->check, (uv_handle_t *)&p->grace};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
        uv_close(hs[i], NULL);
    }
}

/* A partitioned queue: a partition's thread ended; once all have, the pool closes. */
static void on_wake(uv_async_t *a) {
    sluice_worker_pool *p = a->data;
    pthread_mutex_lock(&p->mu);
    int all = p->done >= p->threads;
    if (all) {
        p->stopping = p->stopping > 0 ? p->stopping : 1; /* start no more */
        p->wake_closed = 1; /* a thread ending now has sent its wake-up already */
    }
    pthread_mutex_unlock(&p->mu);
    if (all) {
        close_handles(p);
    }
}

static void init_handles(sluice_worker_pool *p) {
    uv_async_init(p->loop, &p->stop_async, on_stop);
    uv_async_init(p->loop, &p->wake, on_wake);
    uv_timer_init(p->loop, &p->check);
    uv_timer_init(p->loop, &p->grace);
    p->stop_async.data = p->wake.data = p->check.data = p->grace.data = p->check_req.data = p;
    uv_unref((uv_handle_t *)&p->stop_async);
    uv_unref((uv_handle_t *)&p->grace);
    if (p->plain) { /* the loop ends with the queue's own worker */
        uv_unref((uv_handle_t *)&p->wake);
        uv_unref((uv_handle_t *)&p->check);
    }
    if (p->conn != NULL) {
        uv_timer_start(&p->check, on_check, (uint64_t)p->po.check_ms, (uint64_t)p->po.check_ms);
    }
    atomic_store(&p->async_live, 1);
}

/* Waits for the partitions' threads; the first that failed gives the pool's status (unless it
 * has one) and its message, prefixed with its name. */
static void join(sluice_worker_pool *p) {
    for (int i = 0; i < atomic_load(&p->n); i++) {
        part *t = &p->parts[i];
        if (!t->threaded) {
            continue;
        }
        pthread_join(t->thread, NULL);
        if (t->status != 0 && p->status == 0) {
            p->status = t->status;
            snprintf(p->err, sizeof(p->err), "%s: %s", t->name, sluice_worker_errstr(t->w));
        }
    }
}

/* Partition 0 on the pool's loop; partitions added while it runs on threads; all end with it. */
static void run_plain(sluice_worker_pool *p) {
    p->w0_running = 1;
    int st = sluice_worker_run(p->parts[0].w, p->loop);
    p->w0_running = 0;
    if (st != 0) {
        p->status = st;
        snprintf(p->err, sizeof(p->err), "%s", sluice_worker_errstr(p->parts[0].w));
    }
    pthread_mutex_lock(&p->mu);
    int stopped = p->stopping > 0;
    pthread_mutex_unlock(&p->mu);
    if (!stopped) {
        stop_level(p); /* the others stop too, their in-flight work within the grace period */
    }
    join(p);
    close_handles(p);
    uv_run(p->loop, UV_RUN_DEFAULT);
}

/* Every partition on a thread; the loop runs until all of them returned. */
static void run_partitioned(sluice_worker_pool *p, int want) {
    int st = grow(p, want);
    if (st != 0) {
        p->status = st; /* p->err says why; the started ones stop */
        if (p->stopping == 0) {
            stop_level(p);
        }
    }
    SLUICE_LOG(SLUICE_LOG_INFO, "event=partitioned queue=%s partitions=%d", p->queue,
               atomic_load(&p->n));
    if (p->threads == 0) {
        p->wake_closed = 1; /* nothing to wait for */
        close_handles(p);
    }
    uv_run(p->loop, UV_RUN_DEFAULT);
    join(p);
}

int sluice_worker_pool_run(sluice_worker_pool *p, uv_loop_t *loop) {
    if (p->ran) {
        return SLUICE_EINVAL;
    }
    p->ran = 1;
    if (loop == NULL) {
        uv_loop_init(&p->own_loop);
        loop = &p->own_loop;
    }
    p->loop = loop;
    int want = p->conn != NULL ? partitions_of(p) : 1; /* Redis cannot say now: the check retries */
    p->plain = want <= 1;
    init_handles(p);
    apply_stops(p); /* asked before the loop ran */
    if (p->plain) {
        run_plain(p);
    } else {
        run_partitioned(p, want); /* partition 0 too runs on a thread of its own */
    }
    if (loop == &p->own_loop) {
        uv_loop_close(loop);
    }
    return p->status;
}

/* ---- life cycle ---- */

static int copy_string(char **dst, const char **field, char *err, size_t errlen) {
    if (*field == NULL) {
        return 0;
    }
    *dst = strdup(*field);
    if (*dst == NULL) {
        snprintf(err, errlen, "out of memory");
        return SLUICE_ENOMEM;
    }
    *field = *dst;
    return 0;
}

/* The copies and checks of _new; 0 or a status with the message in err. */
static int pool_init(sluice_worker_pool *p, const sluice_worker_options *wo,
                     const sluice_worker_pool_options *po, char *err, size_t errlen) {
    sluice_worker_pool_options_init(&p->po);
    if (po != NULL) {
        sluice__options_take(&p->po, sizeof(p->po), po);
    }
    if (p->po.check_ms == 0) {
        p->po.check_ms = CHECK_DEFAULT;
    }
    if (p->po.check_ms < CHECK_MS_MIN || p->po.check_ms > CHECK_MS_MAX) {
        snprintf(err, errlen, "check ms %d is out of range %d..%d", p->po.check_ms, CHECK_MS_MIN,
                 CHECK_MS_MAX);
        return SLUICE_EINVAL;
    }
    sluice_worker_options_init(&p->o);
    sluice__options_take(&p->o, sizeof(p->o), wo);
    int st = 0;
    if ((st = copy_string(&p->queue, &p->o.queue, err, errlen)) != 0 ||
        (st = copy_string(&p->redis_url, &p->o.redis_url, err, errlen)) != 0 ||
        (st = copy_string(&p->group, &p->o.group, err, errlen)) != 0 ||
        (st = copy_string(&p->consumer, &p->o.consumer, err, errlen)) != 0) {
        return st;
    }
    sluice__client_tls(&p->tls, p->o.tls);
    p->o.tls = &p->tls;
    if (sluice__tls_options_keep(&p->tls) != 0) {
        snprintf(err, errlen, "out of memory");
        return SLUICE_ENOMEM;
    }
    if (p->o.max_messages > 0 && p->o.tally == NULL) { /* max_messages counts the whole pool */
        p->o.tally = p->own_tally = sluice_worker_tally_new();
        if (p->own_tally == NULL) {
            snprintf(err, errlen, "out of memory");
            return SLUICE_ENOMEM;
        }
    }
    /* partition 0 is the queue itself: its worker checks every option now */
    if ((st = sluice_worker_new(&p->o, &p->parts[0].w, err, errlen)) != 0) {
        return st;
    }
    snprintf(p->parts[0].name, sizeof(p->parts[0].name), "%s", p->queue);
    sluice_worker_get_info(p->parts[0].w, &p->info);
    atomic_store(&p->n, 1);
    if (strchr(p->queue, '~') != NULL) {
        return 0; /* a partition named on its own: no other partitions to look for */
    }
    sluice_keys_init(&p->keys, p->queue, NULL, 0); /* checked by the worker */
    sluice_conn_options co;
    sluice_conn_options_init(&co);
    sluice__client_tls(&co, &p->tls);
    co.connect_timeout_ms = p->o.connect_timeout_ms > 0 ? p->o.connect_timeout_ms : 2000;
    co.queue = p->queue;
    co.name = "partitions";
    p->conn = sluice_conn_new(p->info.url, &co);
    if (p->conn == NULL) {
        snprintf(err, errlen, "out of memory");
        return SLUICE_ENOMEM;
    }
    return 0;
}

int sluice_worker_pool_new(const sluice_worker_options *wo, const sluice_worker_pool_options *po,
                           sluice_worker_pool **out, char *err, size_t errlen) {
    char ebuf[256];
    if (err == NULL) {
        err = ebuf;
        errlen = sizeof(ebuf);
    }
    *out = NULL;
    sluice_worker_pool *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return SLUICE_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->n, 0);
    atomic_init(&p->stop_requests, 0);
    atomic_init(&p->async_live, 0);
    int st = pool_init(p, wo, po, err, errlen);
    if (st != 0) {
        sluice_worker_pool_free(p);
        return st;
    }
    *out = p;
    return 0;
}

void sluice_worker_pool_free(sluice_worker_pool *p) {
    if (p == NULL) {
        return;
    }
    for (int i = 0; i < SLUICE_PARTITIONS_MAX; i++) {
        sluice_worker_free(p->parts[i].w);
    }
    sluice_worker_tally_free(p->own_tally); /* after its workers */
    sluice_conn_free(p->conn);
    free(p->queue);
    free(p->redis_url);
    free(p->group);
    free(p->consumer);
    sluice__tls_options_release(&p->tls);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
