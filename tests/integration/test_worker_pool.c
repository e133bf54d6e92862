/* SPDX-License-Identifier: MIT */
/*
 * test_worker_pool.c - sluice_worker_pool against a real redis-server, through the public API
 * only: a queue of 3 partitions is drained exactly once by one pool, which then picks up a 4th
 * partition added while it runs and stops on request (counters summed, nothing left pending);
 * max_messages counts the whole pool; a stop reaches every partition's thread and after the
 * grace period on_grace_expired ends what the handlers still hold on each loop; bad options
 * and a stop before run.
 *
 * The pool runs in a thread; the test thread watches the handler's counts with a deadline.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "sluice/producer.h"
#include "sluice/worker.h"

#define N       90 /* messages over the first 3 partitions */
#define M       10 /* messages in the partition added later */
#define WAIT_MS 20000

static atomic_int seen[N + M]; /* deliveries of message i ("m<i>") */
static atomic_int handled;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Counts the delivery of "m<i>". */
static sluice_verdict count_handler(const sluice_job *job, void *arg) {
    (void)arg;
    char buf[16] = {0};
    if (job->payload_len > 1 && job->payload_len < sizeof(buf)) {
        memcpy(buf, job->payload + 1, job->payload_len - 1);
        int i = atoi(buf);
        if (i >= 0 && i < N + M) {
            atomic_fetch_add(&seen[i], 1);
        }
    }
    atomic_fetch_add(&handled, 1);
    return SLUICE_DONE;
}

/* Admits "m<from>" .. "m<to-1>" to `queue` (routed over its partitions when it has some). */
static void fill(const char *queue, int from, int to) {
    sluice_producer_options o;
    sluice_producer *p;
    sluice_admit_result res;
    char err[256], body[16];
    sluice_producer_options_init(&o);
    o.redis_url = th_redis_url();
    o.queue = queue;
    o.capacity = 100000;
    CHECK_OK(sluice_producer_new(&o, &p, err, sizeof(err)), err);
    for (int i = from; i < to; i++) {
        snprintf(body, sizeof(body), "m%d", i);
        CHECK_OK(sluice_producer_admit(p, body, strlen(body), &res), sluice_producer_errstr(p));
        CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    }
    sluice_producer_free(p);
}

static void partition(const char *q, int i, char *name, size_t len) {
    CHECK_OK(sluice_partition_name(q, i, name, len), "partition name");
}

static void cleanup(redisContext *c, const char *q, int parts) {
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    for (int i = 0; i < parts; i++) {
        partition(q, i, name, sizeof(name));
        th_cleanup_queue(c, name);
    }
}

typedef struct runner {
    sluice_worker_pool *pool;
    pthread_t thread;
    atomic_int returned;
    int rc;
} runner;

static void *run_thread(void *arg) {
    runner *r = arg;
    r->rc = sluice_worker_pool_run(r->pool, NULL);
    atomic_store(&r->returned, 1);
    return NULL;
}

static void start(runner *r, const sluice_worker_options *o, const sluice_worker_pool_options *po) {
    char err[256];
    atomic_init(&r->returned, 0);
    CHECK_OK(sluice_worker_pool_new(o, po, &r->pool, err, sizeof(err)), err);
    CHECK(pthread_create(&r->thread, NULL, run_thread, r) == 0);
}

/* Waits up to WAIT_MS for *v to reach `want`. */
static void wait_for(atomic_int *v, int want, const char *what) {
    uint64_t deadline = now_ms() + WAIT_MS;
    while (atomic_load(v) < want && now_ms() < deadline) {
        usleep(20000);
    }
    if (atomic_load(v) != want) {
        fprintf(stderr, "wait_for %s: %d, wanted %d\n", what, atomic_load(v), want);
        exit(1);
    }
}

static void join(runner *r) {
    CHECK(pthread_join(r->thread, NULL) == 0);
}

static void base_options(sluice_worker_options *o, const char *q) {
    sluice_worker_options_init(o);
    o->redis_url = th_redis_url();
    o->queue = q;
    o->handler = count_handler;
    o->handler_mode = SLUICE_HANDLER_INLINE;
    o->concurrency = 4;
    o->block_ms = 100;
}

static void test_drain_and_grow(void) {
    char q[64], name[SLUICE_QUEUE_NAME_MAX + 1];
    th_queue(q, sizeof(q), "pool");
    redisContext *c = th_redis();
    th_int(c, "HSET sluice:{%s}:meta partitions 3", q);
    fill(q, 0, N); /* the producer spreads them over the 3 partitions */
    long long in_all = 0;
    for (int i = 0; i < 3; i++) {
        partition(q, i, name, sizeof(name));
        long long n = th_int(c, "XLEN sluice:{%s}:stream", name);
        CHECK(n > 0); /* every partition holds some */
        in_all += n;
    }
    CHECK_EQ(in_all, N);

    sluice_worker_options o;
    base_options(&o, q);
    sluice_worker_pool_options po;
    sluice_worker_pool_options_init(&po);
    po.check_ms = 100;
    runner r;
    start(&r, &o, &po);
    wait_for(&handled, N, "the first 3 partitions");
    CHECK_EQ(sluice_worker_pool_partitions(r.pool), 3);

    /* a 4th partition while the pool runs: its entries are drained too */
    th_int(c, "HSET sluice:{%s}:meta partitions 4", q);
    partition(q, 3, name, sizeof(name));
    fill(name, N, N + M);
    wait_for(&handled, N + M, "the added partition");
    CHECK_EQ(sluice_worker_pool_partitions(r.pool), 4);
    CHECK_EQ(atomic_load(&r.returned), 0); /* it runs until stopped */

    sluice_worker_pool_stop(r.pool);
    join(&r);
    CHECK_OK(r.rc, sluice_worker_pool_errstr(r.pool));
    for (int i = 0; i < N + M; i++) {
        CHECK_EQ(atomic_load(&seen[i]), 1); /* every message exactly once */
    }
    sluice_worker_stats st;
    sluice_worker_pool_get_stats(r.pool, &st);
    CHECK_EQ(st.processed, N + M);
    CHECK_EQ(st.read, N + M);
    CHECK_EQ(st.in_flight, 0);
    for (int i = 0; i < 4; i++) {
        partition(q, i, name, sizeof(name));
        CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", name), 0);
    }
    sluice_worker_info info;
    sluice_worker_pool_get_info(r.pool, &info);
    CHECK_STREQ(info.queue, q);
    CHECK_STREQ(info.group, "workers");
    CHECK_EQ(info.stopping, 2);
    CHECK_EQ(sluice_worker_pool_run(r.pool, NULL), SLUICE_EINVAL); /* once */
    sluice_worker_pool_free(r.pool);
    cleanup(c, q, 4);
    redisFree(c);
}

/* max_messages counts the pool: 30 over 3 partitions, the pool stops by itself after 12. */
static void test_max_messages(void) {
    char q[64], name[SLUICE_QUEUE_NAME_MAX + 1];
    th_queue(q, sizeof(q), "poolmax");
    redisContext *c = th_redis();
    th_int(c, "HSET sluice:{%s}:meta partitions 3", q);
    fill(q, 0, 30);
    sluice_worker_options o;
    base_options(&o, q);
    o.max_messages = 12;
    runner r;
    start(&r, &o, NULL);
    wait_for(&r.returned, 1, "the pool to end after max_messages");
    join(&r);
    CHECK_OK(r.rc, sluice_worker_pool_errstr(r.pool));
    sluice_worker_stats st;
    sluice_worker_pool_get_stats(r.pool, &st);
    CHECK_EQ(st.processed, 12);
    CHECK_EQ(sluice_worker_pool_partitions(r.pool), 3);
    long long left = 0;
    for (int i = 0; i < 3; i++) {
        partition(q, i, name, sizeof(name));
        left += th_int(c, "XLEN sluice:{%s}:stream", name);
    }
    CHECK_EQ(left, 18);
    sluice_worker_pool_free(r.pool);
    cleanup(c, q, 3);
    redisFree(c);
}

/* ---- a stop, the grace period and on_grace_expired ---- */

static atomic_int holding, grace_calls;
static _Thread_local uv_timer_t *held; /* the job this loop's handler holds (one: concurrency 1) */

static void hold_closed(uv_handle_t *h) {
    free(h);
}

static void hold_expired(uv_timer_t *t) {
    (void)t; /* never: the grace period ends first */
}

/* Holds its job with a long timer on the worker's loop: the loop cannot end while it runs. */
static void hold_handler(sluice_worker *w, const sluice_job *job, void *arg) {
    (void)job, (void)arg;
    uv_timer_t *t = malloc(sizeof(*t));
    CHECK(t != NULL && held == NULL);
    uv_timer_init(sluice_worker_loop(w), t);
    uv_timer_start(t, hold_expired, 600000, 0);
    held = t;
    atomic_fetch_add(&holding, 1);
}

static void on_grace(uv_loop_t *loop, void *arg) {
    CHECK(arg == &grace_calls);
    if (held != NULL) {
        CHECK(held->loop == loop); /* called on the thread of the loop that holds it */
        uv_close((uv_handle_t *)held, hold_closed);
        held = NULL;
    }
    atomic_fetch_add(&grace_calls, 1);
}

static void test_stop_grace(void) {
    char q[64], name[SLUICE_QUEUE_NAME_MAX + 1];
    th_queue(q, sizeof(q), "poolgrace");
    redisContext *c = th_redis();
    for (int i = 0; i < 2; i++) { /* one in each: the first before it is partitioned (no routing) */
        partition(q, i, name, sizeof(name));
        fill(name, 0, 1);
        th_int(c, "HSET sluice:{%s}:meta partitions 2", q);
    }
    sluice_worker_options o;
    base_options(&o, q);
    o.handler = NULL;
    o.async_handler = hold_handler;
    o.concurrency = 1;
    o.grace_ms = 200;
    sluice_worker_pool_options po;
    sluice_worker_pool_options_init(&po);
    po.on_grace_expired = on_grace;
    po.arg = &grace_calls;
    runner r;
    start(&r, &o, &po);
    wait_for(&holding, 2, "a job held in each partition");
    sluice_worker_pool_stop(r.pool);
    wait_for(&r.returned, 1, "the pool to end after the grace period");
    join(&r);
    CHECK_OK(r.rc, sluice_worker_pool_errstr(r.pool));
    CHECK_EQ(atomic_load(&grace_calls), 2); /* once on each partition's loop */
    sluice_worker_stats st;
    sluice_worker_pool_get_stats(r.pool, &st);
    CHECK_EQ(st.abandoned, 0); /* no verdict came: the jobs are left pending, not settled */
    CHECK_EQ(st.processed, 0);
    for (int i = 0; i < 2; i++) { /* left pending for another worker to reclaim */
        partition(q, i, name, sizeof(name));
        redisReply *p = redisCommand(c, "XPENDING sluice:{%s}:stream workers", name);
        CHECK(p != NULL && p->type == REDIS_REPLY_ARRAY);
        CHECK_EQ(p->element[0]->integer, 1);
        freeReplyObject(p);
    }
    sluice_worker_pool_free(r.pool);
    cleanup(c, q, 2);
    redisFree(c);
}

static void test_bad_options(void) {
    char err[256] = "";
    sluice_worker_pool *p = (sluice_worker_pool *)&err; /* set to NULL on failure */
    sluice_worker_options o;
    base_options(&o, "badpool");
    o.concurrency = -1;
    CHECK_EQ(sluice_worker_pool_new(&o, NULL, &p, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(p == NULL);
    CHECK(strstr(err, "concurrency -1") != NULL);
    base_options(&o, "badpool");
    sluice_worker_pool_options po;
    sluice_worker_pool_options_init(&po);
    po.check_ms = 5;
    CHECK_EQ(sluice_worker_pool_new(&o, &po, &p, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "check ms 5") != NULL);
    base_options(&o, "bad queue");
    CHECK_EQ(sluice_worker_pool_new(&o, NULL, &p, err, sizeof(err)), SLUICE_EINVAL);
    sluice_worker_pool_free(NULL);
    sluice_worker_pool_stop(NULL);
}

/* A stop before run: the pool returns at once, on a partitioned queue and on a plain one. */
static void test_stop_before_run(void) {
    char q[64], err[256];
    th_queue(q, sizeof(q), "poolearly");
    redisContext *c = th_redis();
    for (int parts = 2; parts >= 1; parts--) {
        th_int(c, "HSET sluice:{%s}:meta partitions %d", q, parts);
        sluice_worker_options o;
        base_options(&o, q);
        sluice_worker_pool *p;
        CHECK_OK(sluice_worker_pool_new(&o, NULL, &p, err, sizeof(err)), err);
        sluice_worker_pool_stop(p);
        uint64_t t0 = now_ms();
        CHECK_OK(sluice_worker_pool_run(p, NULL), sluice_worker_pool_errstr(p));
        CHECK(now_ms() - t0 < 5000);
        CHECK_EQ(sluice_worker_pool_partitions(p), 1);
        sluice_worker_pool_free(p);
    }
    cleanup(c, q, 2);
    redisFree(c);
}

int main(void) {
    test_bad_options();
    test_stop_before_run();
    test_drain_and_grow();
    test_max_messages();
    test_stop_grace();
    printf("test_worker_pool: ok\n");
    return 0;
}
