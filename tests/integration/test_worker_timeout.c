/* SPDX-License-Identifier: MIT */
/*
 * test_worker_timeout.c - handler_timeout_ms against a real redis-server: a job whose handler
 * gives no verdict by the deadline is retried (its second delivery is processed, once), the
 * handler is told (abandon_handler for an async handler, sluice_job_abandoned for a blocking
 * one) and its late verdict is ignored; a worker stopped while a timed-out handler still holds
 * its job ends after the grace and frees it. The on_verdict hook sees the timeout's RETRY and
 * the second delivery's DONE, never the ignored late verdict.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sluice/cli.h"
#include "sluice/worker.h"

static atomic_int abandons, firsts;
static const sluice_job *held; /* a first delivery's job, held by the async handler */
static int finish_on_abandon;
static atomic_int hook_done, hook_retry, hook_other;

static void on_verdict(const sluice_job *job, sluice_verdict v, const char *reason, void *arg) {
    (void)job, (void)reason;
    CHECK(arg == &hook_done);
    atomic_fetch_add(v == SLUICE_DONE    ? &hook_done
                     : v == SLUICE_RETRY ? &hook_retry
                                         : &hook_other,
                     1);
}

static void async_handler(sluice_worker *w, const sluice_job *job, void *arg) {
    if (job->deliveries == 1) {
        atomic_fetch_add(&firsts, 1);
        held = job; /* no verdict: the deadline comes first */
        return;
    }
    sluice_job_finish(job, SLUICE_DONE);
}

static void on_abandon(sluice_worker *w, const sluice_job *job, void *arg) {
    atomic_fetch_add(&abandons, 1);
    CHECK(job == held);
    CHECK(sluice_job_abandoned(job));
    if (finish_on_abandon) {
        sluice_job_finish(job, SLUICE_DONE); /* ignored: the entry is retried already */
        held = NULL;
    }
}

static sluice_verdict blocking_handler(const sluice_job *job, void *arg) {
    if (job->deliveries == 1) {
        atomic_fetch_add(&firsts, 1);
        for (int i = 0; i < 500 && !sluice_job_abandoned(job); i++) {
            usleep(10000);
        }
        CHECK(sluice_job_abandoned(job));
    }
    return SLUICE_DONE; /* for the first delivery: ignored */
}

static void start(th_worker_run *r, sluice_worker_options *o, const char *q) {
    char err[256];
    o->redis_url = th_redis_url();
    o->queue = q;
    o->handler_timeout_ms = 200;
    o->visibility_timeout_ms = 1000; /* reclaim passes every 250 ms */
    o->retry_backoff_ms = 0;
    o->block_ms = 100;
    CHECK_OK(sluice_worker_new(o, &r->w, err, sizeof(err)), err);
    th_worker_start(r);
}

/* One message: first delivery times out, the second is processed. */
static void check_retried(int blocking) {
    char q[64];
    th_queue(q, sizeof(q), blocking ? "tmo-pool" : "tmo-async");
    redisContext *c = th_redis();
    th_fill(q, SLUICE_BACKEND_STREAM, 1, "once");
    atomic_store(&abandons, 0);
    atomic_store(&firsts, 0);
    finish_on_abandon = 1;
    atomic_store(&hook_done, 0);
    atomic_store(&hook_retry, 0);
    atomic_store(&hook_other, 0);
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.on_verdict = on_verdict;
    o.on_verdict_arg = &hook_done;
    if (blocking) {
        o.handler = blocking_handler;
    } else {
        o.async_handler = async_handler;
        o.abandon_handler = on_abandon;
    }
    o.max_messages = 2; /* the timeout's RETRY and the DONE */
    th_worker_run r = {0};
    start(&r, &o, q);
    CHECK_EQ(th_worker_join(&r), 0);
    sluice_worker_stats st;
    sluice_worker_get_stats(r.w, &st);
    CHECK_EQ(st.processed, 1);
    CHECK_EQ(st.retried, 1);
    CHECK_EQ(st.dead, 0);
    CHECK_EQ(atomic_load(&firsts), 1);
    CHECK_EQ(atomic_load(&abandons), blocking ? 0 : 1);
    CHECK_EQ(atomic_load(&hook_done), 1); /* the late DONE of the first delivery is not seen */
    CHECK_EQ(atomic_load(&hook_retry), 1);
    CHECK_EQ(atomic_load(&hook_other), 0);
    CHECK_EQ(th_int(c, "HGET sluice:{%s}:stats acked", q), 1);
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), 0);
    sluice_worker_free(r.w);
    th_cleanup_queue(c, q);
    redisFree(c);
}

/* A stop while a timed-out handler never gives its job back: the worker ends after the grace
 * and sluice_worker_free frees the job (the sanitizer build checks it). */
static void check_stop_with_held_job(void) {
    char q[64];
    th_queue(q, sizeof(q), "tmo-held");
    redisContext *c = th_redis();
    th_fill(q, SLUICE_BACKEND_STREAM, 1, "held");
    atomic_store(&abandons, 0);
    atomic_store(&firsts, 0);
    finish_on_abandon = 0;
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.async_handler = async_handler;
    o.abandon_handler = on_abandon;
    o.grace_ms = 300;
    th_worker_run r = {0};
    start(&r, &o, q);
    for (int i = 0; i < 500 && atomic_load(&abandons) == 0; i++) {
        usleep(10000);
    }
    CHECK_EQ(atomic_load(&abandons), 1);
    sluice_worker_stop(r.w);
    CHECK_EQ(th_worker_join(&r), 0);
    sluice_worker_free(r.w);
    th_cleanup_queue(c, q);
    redisFree(c);
}

int main(void) {
    check_retried(0);
    check_retried(1);
    check_stop_with_held_job();
    printf("test_worker_timeout: ok\n");
    return 0;
}
