/* SPDX-License-Identifier: MIT */
/*
 * test_worker.c - the worker against a real redis-server: it drains everything (both backends;
 * depth back to 0, nothing pending, counters right), never exceeds its concurrency, handles
 * the three verdicts and undecodable envelopes, reclaims a dead consumer's entries after the
 * visibility timeout (F1), cleans up a pending entry an operator deleted (B13), and a
 * graceful stop acknowledges what was in flight.
 *
 * Each worker runs in a thread; the test thread watches Redis with a deadline and stops it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sluice/cli.h"
#include "sluice/producer.h"
#include "sluice/worker.h"

typedef struct fixture {
    char q[64];
    redisContext *c;
    sluice_worker *w;
    pthread_t thread;
    int rc;
} fixture;

static atomic_int active, max_active, handled, second_deliveries;

static sluice_verdict slow_handler(const sluice_job *job, void *arg) {
    int now = atomic_fetch_add(&active, 1) + 1;
    int seen = atomic_load(&max_active);
    while (now > seen && !atomic_compare_exchange_weak(&max_active, &seen, now)) {
    }
    usleep((useconds_t)(intptr_t)arg);
    atomic_fetch_sub(&active, 1);
    atomic_fetch_add(&handled, 1);
    return SLUICE_DONE;
}

/* "bad" fails, "again" asks for a retry on its first delivery, anything else is done. */
static sluice_verdict verdict_handler(const sluice_job *job, void *arg) {
    atomic_fetch_add(&handled, 1);
    if (job->deliveries > 1) {
        atomic_fetch_add(&second_deliveries, 1);
    }
    if (job->payload_len == 3 && memcmp(job->payload, "bad", 3) == 0) {
        return SLUICE_FAIL;
    }
    if (job->payload_len == 5 && memcmp(job->payload, "again", 5) == 0 && job->deliveries == 1) {
        return SLUICE_RETRY;
    }
    return SLUICE_DONE;
}

static void *run_thread(void *arg) {
    fixture *f = arg;
    f->rc = sluice_worker_run(f->w, NULL);
    return NULL;
}

static void start(fixture *f, sluice_worker_options *o) {
    char err[256];
    o->redis_url = th_redis_url();
    o->queue = f->q;
    CHECK_OK(sluice_worker_new(o, &f->w, err, sizeof(err)), err);
    CHECK(pthread_create(&f->thread, NULL, run_thread, f) == 0);
}

static void stop(fixture *f) {
    sluice_worker_stop(f->w);
    CHECK(pthread_join(f->thread, NULL) == 0);
    CHECK_EQ(f->rc, 0);
}

/* Waits up to 20 s for the integer result of `cmd` (on the queue's key) to equal `want`. */
static void wait_int(fixture *f, long long want, const char *fmt, const char *key_suffix) {
    uint64_t deadline = sluice_now_ms() + 20000;
    long long v = -1;
    while (sluice_now_ms() < deadline) {
        v = th_int(f->c, fmt, f->q, key_suffix);
        if (v == want) {
            return;
        }
        usleep(20000);
    }
    fprintf(stderr, "wait_int: \"%s\" %s stayed %lld, wanted %lld\n", fmt, key_suffix, v, want);
    exit(1);
}

static long long pending(fixture *f) {
    redisReply *r = redisCommand(f->c, "XPENDING sluice:{%s}:stream workers", f->q);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY);
    long long n = r->element[0]->integer;
    freeReplyObject(r);
    return n;
}

static void test_drain(sluice_backend b) {
    fixture f = {0};
    th_queue(f.q, sizeof(f.q), b == SLUICE_BACKEND_STREAM ? "drain" : "drainlist");
    f.c = th_redis();
    th_fill(f.q, b, 300, "work");
    atomic_store(&handled, 0);
    atomic_store(&max_active, 0);
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.backend = b;
    o.concurrency = 4;
    o.handler = slow_handler;
    o.handler_arg = (void *)(intptr_t)1000;
    o.block_ms = 100;
    start(&f, &o);
    wait_int(&f, 300, "HGET sluice:{%s}:%s acked", "stats");
    stop(&f);
    CHECK_EQ(atomic_load(&handled), 300);
    CHECK(atomic_load(&max_active) <= 4);
    if (b == SLUICE_BACKEND_STREAM) {
        CHECK_EQ(th_int(f.c, "XLEN sluice:{%s}:stream", f.q), 0);
        CHECK_EQ(pending(&f), 0);
    } else {
        CHECK_EQ(th_int(f.c, "HGET sluice:{%s}:meta list_depth", f.q), 0);
        CHECK_EQ(th_int(f.c, "LLEN sluice:{%s}:list", f.q), 0);
    }
    sluice_worker_stats st;
    sluice_worker_get_stats(f.w, &st);
    CHECK_EQ(st.processed, 300);
    CHECK_EQ(st.in_flight, 0);
    sluice_worker_free(f.w);
    th_cleanup_queue(f.c, f.q);
    redisFree(f.c);
}

static void test_verdicts(void) {
    fixture f = {0};
    th_queue(f.q, sizeof(f.q), "verdicts");
    f.c = th_redis();
    th_int(f.c, "XADD sluice:{%s}:stream * m %s", f.q, "\xc1garbage"); /* undecodable */
    th_fill(f.q, SLUICE_BACKEND_STREAM, 1, "bad");
    th_fill(f.q, SLUICE_BACKEND_STREAM, 1, "again");
    th_fill(f.q, SLUICE_BACKEND_STREAM, 3, "fine");
    atomic_store(&handled, 0);
    atomic_store(&second_deliveries, 0);
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.handler = verdict_handler;
    o.handler_mode = SLUICE_HANDLER_INLINE;
    o.visibility_timeout_ms = 1000;
    o.retry_backoff_ms = 100;
    o.block_ms = 100;
    start(&f, &o);
    wait_int(&f, 0, "XLEN sluice:{%s}:%s", "stream");
    stop(&f);
    CHECK_EQ(atomic_load(&second_deliveries), 1); /* "again" came back once */
    CHECK_EQ(th_int(f.c, "XLEN sluice:{%s}:dead", f.q), 2);
    CHECK_EQ(th_int(f.c, "HGET sluice:{%s}:stats dead", f.q), 2);
    CHECK_EQ(th_int(f.c, "HGET sluice:{%s}:stats retried", f.q), 1);
    CHECK_EQ(th_int(f.c, "HGET sluice:{%s}:stats acked", f.q), 4);
    redisReply *r = redisCommand(f.c, "XRANGE sluice:{%s}:dead - +", f.q);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    int undecodable = 0, failed = 0;
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *fields = r->element[i]->element[1];
        for (size_t k = 0; k + 1 < fields->elements; k += 2) {
            if (strcmp(fields->element[k]->str, "reason") == 0) {
                undecodable += strstr(fields->element[k + 1]->str, "undecodable") != NULL;
                failed += strcmp(fields->element[k + 1]->str, "handler failed") == 0;
            }
        }
    }
    freeReplyObject(r);
    CHECK_EQ(undecodable, 1);
    CHECK_EQ(failed, 1);
    CHECK_EQ(pending(&f), 0);
    sluice_worker_free(f.w);
    th_cleanup_queue(f.c, f.q);
    redisFree(f.c);
}

/* F1 and B13: a consumer read entries and died; one of them was then deleted by hand. */
static void test_reclaim(void) {
    fixture f = {0};
    th_queue(f.q, sizeof(f.q), "reclaim");
    f.c = th_redis();
    th_fill(f.q, SLUICE_BACKEND_STREAM, 4, "orphan");
    th_int(f.c, "XGROUP CREATE sluice:{%s}:stream workers 0", f.q);
    redisReply *r = redisCommand(f.c,
                                 "XREADGROUP GROUP workers ghost COUNT 4 STREAMS "
                                 "sluice:{%s}:stream >",
                                 f.q);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY);
    const char *gone = r->element[0]->element[1]->element[0]->element[0]->str;
    th_int(f.c, "XDEL sluice:{%s}:stream %s", f.q, gone);
    freeReplyObject(r);
    CHECK_EQ(pending(&f), 4);
    atomic_store(&handled, 0);
    atomic_store(&second_deliveries, 0);
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.handler = verdict_handler;
    o.handler_mode = SLUICE_HANDLER_INLINE;
    o.visibility_timeout_ms = 300;
    o.block_ms = 100;
    start(&f, &o);
    wait_int(&f, 3, "HGET sluice:{%s}:%s acked", "stats");
    uint64_t deadline = sluice_now_ms() + 10000;
    while (pending(&f) != 0 && sluice_now_ms() < deadline) {
        usleep(20000);
    }
    stop(&f);
    CHECK_EQ(pending(&f), 0); /* the deleted one was cleaned from the PEL too */
    CHECK_EQ(atomic_load(&second_deliveries), 3);
    CHECK_EQ(th_int(f.c, "XLEN sluice:{%s}:stream", f.q), 0);
    sluice_worker_free(f.w);
    th_cleanup_queue(f.c, f.q);
    redisFree(f.c);
}

static void test_graceful_stop(void) {
    fixture f = {0};
    th_queue(f.q, sizeof(f.q), "graceful");
    f.c = th_redis();
    th_fill(f.q, SLUICE_BACKEND_STREAM, 40, "slow");
    atomic_store(&handled, 0);
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.concurrency = 8;
    o.handler = slow_handler;
    o.handler_arg = (void *)(intptr_t)200000; /* 200 ms each */
    o.block_ms = 100;
    start(&f, &o);
    /* the real condition: the worker has entries in hand (stats exist since the fill) */
    for (int i = 0; i < 500 && th_int(f.c, "EXISTS sluice:{%s}:stream", f.q) == 1; i++) {
        redisReply *r = redisCommand(f.c, "XPENDING sluice:{%s}:stream workers", f.q);
        int have = r != NULL && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer > 0;
        freeReplyObject(r); /* NOGROUP until the worker created its group */
        if (have) {
            break;
        }
        usleep(10000);
    }
    CHECK(pending(&f) > 0);
    usleep(300000);
    stop(&f);
    int done = atomic_load(&handled);
    CHECK(done >= 8 && done < 40);
    CHECK_EQ(pending(&f), 0); /* everything it had read was finished and acknowledged */
    CHECK_EQ(th_int(f.c, "XLEN sluice:{%s}:stream", f.q), 40 - done);
    CHECK_EQ(th_int(f.c, "HGET sluice:{%s}:stats acked", f.q), done);
    sluice_worker_free(f.w);
    th_cleanup_queue(f.c, f.q);
    redisFree(f.c);
}

static void test_bad_options(void) {
    sluice_worker_options o;
    sluice_worker *w;
    char err[256];
    sluice_worker_options_init(&o);
    o.handler = verdict_handler;
    o.queue = "a{b}";
    CHECK_EQ(sluice_worker_new(&o, &w, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "'{'") != NULL);
    o.queue = "ok";
    o.concurrency = 200000;
    CHECK_EQ(sluice_worker_new(&o, &w, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "200000") != NULL);
    o.concurrency = 1;
    o.redis_url = "http://x";
    CHECK_EQ(sluice_worker_new(&o, &w, err, sizeof(err)), SLUICE_EINVAL);
}

/* sluice_worker_stop() before sluice_worker_run(): no crash, and run returns by itself soon
 * after it started; stop after run returned and stop(NULL) are no-ops. */
static void test_stop_before_run(void) {
    sluice_worker_options o;
    sluice_worker *w;
    char err[256];
    sluice_worker_options_init(&o);
    o.handler = verdict_handler;
    o.redis_url = th_redis_url();
    o.queue = "stop-before-run";
    CHECK_OK(sluice_worker_new(&o, &w, err, sizeof(err)), err);
    sluice_worker_stop(w);
    uint64_t t0 = sluice_now_ms();
    CHECK_EQ(sluice_worker_run(w, NULL), 0);
    CHECK(sluice_now_ms() - t0 < 5000);
    sluice_worker_stop(w);
    sluice_worker_stop(NULL);
    sluice_worker_free(w);
}

int main(void) {
    test_bad_options();
    test_stop_before_run();
    test_drain(SLUICE_BACKEND_STREAM);
    test_drain(SLUICE_BACKEND_LIST);
    test_verdicts();
    test_reclaim();
    test_graceful_stop();
    printf("test_worker: ok\n");
    return 0;
}
