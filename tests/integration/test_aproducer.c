/* SPDX-License-Identifier: MIT */
/*
 * test_aproducer.c - the async (libuv) producer against the fixture's redis-server.
 *
 * Covers what an event-loop web handler relies on: 10,000 pipelined admissions each called back
 * exactly once and admitted in submission order in a few coalesced calls; the capacity boundary
 * across coalesced batches (capacity N -> exactly the first N admitted); idempotency keys
 * (sent alone, DUPLICATE with the first id); the message copied at submission; synchronous
 * refusals that never call back; close with admissions waiting, in flight and from inside a
 * callback (ECANCELED, each once); a server that is not there (error callbacks, fail-open); a
 * deadline passing while the server is blocked (EUNKNOWN, honest, then recovery); the queue
 * info; and the Retry-After estimate from the measured drain rate.
 *
 * Every wait runs the loop under a watchdog timer.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "sluice/aproducer.h"
#include "sluice/envelope.h"

#include "uvwait.h"

typedef struct outcome {
    int calls;
    sluice_admit_result res;
} outcome;

static int done; /* callbacks so far, across outcomes */

static void on_admit(sluice_aproducer *ap, const sluice_admit_result *res, void *arg) {
    (void)ap;
    outcome *o = arg;
    o->calls++;
    o->res = *res;
    done++;
}

static void on_closed(void *arg) {
    (*(int *)arg)++;
}

static sluice_aproducer *make_url(const char *url, const char *queue, long long cap,
                                  size_t max_batch, int timeout_ms, int fail_open) {
    sluice_producer_options o;
    sluice_aproducer *ap = NULL;
    char err[256] = "";
    sluice_producer_options_init(&o);
    o.redis_url = url;
    o.queue = queue;
    o.capacity = cap;
    o.max_batch = max_batch;
    o.max_payload = 4096;
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = timeout_ms;
    o.fail_open = fail_open;
    CHECK_OK(sluice_aproducer_new(&loop, &o, NULL, &ap, err, sizeof(err)), err);
    return ap;
}

static sluice_aproducer *make(const char *queue, long long cap, size_t max_batch) {
    return make_url(th_redis_url(), queue, cap, max_batch, 5000, 0);
}

static void close_ap(sluice_aproducer *ap) {
    int closed = 0;
    sluice_aproducer_close(ap, on_closed, &closed);
    WAIT(closed == 1);
}

static int admit(sluice_aproducer *ap, const char *payload, const char *key, outcome *o) {
    sluice_message m = {payload, strlen(payload), NULL, 0, NULL, key, NULL};
    memset(o, 0, sizeof(*o));
    return sluice_aproducer_admit(ap, &m, on_admit, o);
}

/* 1 when stream id a < b ("ms-seq"). */
static int id_less(const char *a, const char *b) {
    unsigned long long am, as, bm, bs;
    CHECK(sscanf(a, "%llu-%llu", &am, &as) == 2);
    CHECK(sscanf(b, "%llu-%llu", &bm, &bs) == 2);
    return am < bm || (am == bm && as < bs);
}

#define PIPELINED 10000

/* Submitted before the connection is up: they wait for it, then go in coalesced calls. */
static void test_pipelined(void) {
    static outcome o[PIPELINED];
    char q[64], num[16];
    th_queue(q, sizeof(q), "ap-pipe");
    sluice_aproducer *ap = make(q, PIPELINED + 1, 1000);
    done = 0;
    for (int i = 0; i < PIPELINED; i++) {
        snprintf(num, sizeof(num), "%d", i);
        CHECK_OK(admit(ap, num, NULL, &o[i]), sluice_aproducer_errstr(ap));
    }
    CHECK_EQ(sluice_aproducer_pending(ap), PIPELINED);
    CHECK_EQ(done, 0); /* never from inside admit */
    WAIT(done == PIPELINED);
    run_for(50);
    for (int i = 0; i < PIPELINED; i++) {
        CHECK_EQ(o[i].calls, 1);
        CHECK_EQ(o[i].res.outcome, SLUICE_ADMITTED);
        if (i > 0 && !id_less(o[i - 1].res.id, o[i].res.id)) { /* say where, for a rerun */
            fprintf(stderr, "admission order broken at %d: %s then %s\n", i, o[i - 1].res.id,
                    o[i].res.id);
            CHECK(id_less(o[i - 1].res.id, o[i].res.id));
        }
    }
    sluice_aproducer_counters k;
    sluice_aproducer_get_counters(ap, &k);
    CHECK_EQ(k.admitted, PIPELINED);
    CHECK(k.calls >= 10 && k.calls <= 20); /* batches of at most 1000, coalesced */
    CHECK_EQ(sluice_aproducer_pending(ap), 0);
    redisContext *c = th_redis();
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), PIPELINED);
    th_cleanup_queue(c, q);
    redisFree(c);
    close_ap(ap);
}

/* Capacity N across coalesced calls submitted over several loop iterations. */
static void test_boundary(void) {
    enum { N = 777, TOTAL = 2000 };
    static outcome o[TOTAL];
    char q[64];
    th_queue(q, sizeof(q), "ap-bound");
    sluice_aproducer *ap = make(q, N, 300);
    WAIT(sluice_aproducer_ready(ap));
    done = 0;
    for (int i = 0; i < TOTAL; i++) {
        CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
        if (i % 500 == 499) {
            uv_run(&loop, UV_RUN_NOWAIT);
        }
    }
    WAIT(done == TOTAL);
    for (int i = 0; i < TOTAL; i++) {
        CHECK_EQ(o[i].calls, 1);
        CHECK_EQ(o[i].res.outcome, i < N ? SLUICE_ADMITTED : SLUICE_FULL);
        CHECK_EQ(o[i].res.capacity, N);
        if (i >= N) {
            CHECK_EQ(o[i].res.depth, N);
            CHECK(o[i].res.retry_after_s >= 1 && o[i].res.retry_after_s <= 60);
        }
    }
    redisContext *c = th_redis();
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), N);
    CHECK_EQ(th_int(c, "HGET sluice:{%s}:stats admitted", q), N);
    CHECK_EQ(th_int(c, "HGET sluice:{%s}:stats rejected", q), TOTAL - N);
    th_cleanup_queue(c, q);
    redisFree(c);
    close_ap(ap);
}

/* Headers, tenant and payload are copied at submission; keys go alone and dedupe. */
static void test_copy_and_idempotency(void) {
    char q[64], key[64], payload[16] = "hello", name[16] = "request-id", value[16] = "abc-1";
    char tenant[16] = "t1";
    outcome o[5];
    th_queue(q, sizeof(q), "ap-idem");
    snprintf(key, sizeof(key), "k-%d", (int)getpid());
    sluice_aproducer *ap = make(q, 100, 1000);
    WAIT(sluice_aproducer_ready(ap));
    sluice_header h = {name, strlen(name), value, strlen(value)};
    sluice_message m = {payload, strlen(payload), &h, 1, tenant, NULL, NULL};
    memset(o, 0, sizeof(o));
    done = 0;
    CHECK_OK(sluice_aproducer_admit(ap, &m, on_admit, &o[0]), sluice_aproducer_errstr(ap));
    memset(payload, 'X', 5); /* the caller's buffers are its own again */
    memset(value, 'Y', 5);
    memset(tenant, 'Z', 2);
    CHECK_OK(admit(ap, "a", key, &o[1]), sluice_aproducer_errstr(ap));
    CHECK_OK(admit(ap, "b", NULL, &o[2]), sluice_aproducer_errstr(ap));
    CHECK_OK(admit(ap, "c", key, &o[3]), sluice_aproducer_errstr(ap));
    CHECK_OK(admit(ap, "d", NULL, &o[4]), sluice_aproducer_errstr(ap));
    WAIT(done == 5);
    CHECK_EQ(o[1].res.outcome, SLUICE_ADMITTED);
    CHECK_EQ(o[3].res.outcome, SLUICE_DUPLICATE);
    CHECK_STREQ(o[3].res.id, o[1].res.id);
    CHECK_EQ(o[2].res.outcome, SLUICE_ADMITTED);
    CHECK_EQ(o[4].res.outcome, SLUICE_ADMITTED);
    redisContext *c = th_redis();
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), 4);
    redisReply *r = redisCommand(c, "XRANGE sluice:{%s}:stream %s %s", q, o[0].res.id, o[0].res.id);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    const redisReply *body = r->element[0]->element[1]->element[1];
    sluice_envelope e;
    sluice_header hd[4];
    char err[128];
    CHECK_OK(sluice_envelope_decode((const unsigned char *)body->str, body->len, 0, &e, hd, 4, err,
                                    sizeof(err)),
             err);
    CHECK(e.payload_len == 5 && memcmp(e.payload, "hello", 5) == 0);
    CHECK(e.nheaders == 1 && memcmp(e.headers[0].value, "abc-1", 5) == 0);
    CHECK(e.tenant_len == 2 && memcmp(e.tenant, "t1", 2) == 0);
    freeReplyObject(r);
    th_int(c, "DEL sluice:{%s}:idem:%s", q, key);
    th_cleanup_queue(c, q);
    redisFree(c);
    close_ap(ap);
}

/* Refused at submission: the callback never runs. */
static void test_refusals(void) {
    static outcome more[10];
    char q[64], big[5000], longkey[202], err[256] = "";
    outcome o;
    th_queue(q, sizeof(q), "ap-refuse");
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';

    sluice_producer_options po;
    sluice_producer_options_init(&po);
    po.redis_url = th_redis_url();
    po.queue = "bad name";
    sluice_aproducer *ap = NULL;
    CHECK_EQ(sluice_aproducer_new(&loop, &po, NULL, &ap, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(ap == NULL && strstr(err, "position 3") != NULL);

    po.queue = q;
    po.max_payload = 4096;
    sluice_aproducer_options ao;
    sluice_aproducer_options_init(&ao);
    ao.max_queued = 10;
    CHECK_OK(sluice_aproducer_new(&loop, &po, &ao, &ap, err, sizeof(err)), err);
    done = 0;
    memset(&o, 0, sizeof(o));
    sluice_message m = {"x", 1, NULL, 0, NULL, NULL, NULL};
    CHECK_EQ(sluice_aproducer_admit(ap, &m, NULL, &o), SLUICE_EINVAL);
    CHECK_EQ(sluice_aproducer_admit(NULL, &m, on_admit, &o), SLUICE_EINVAL);
    CHECK_EQ(admit(ap, "x", longkey, &o), SLUICE_EINVAL);
    CHECK_EQ(admit(ap, "x", "", &o), SLUICE_EINVAL);
    CHECK_EQ(admit(ap, big, NULL, &o), SLUICE_ETOOBIG); /* over max_payload */
    CHECK(strstr(sluice_aproducer_errstr(ap), "4999 bytes") != NULL);
    for (int i = 0; i < 10; i++) {
        CHECK_OK(admit(ap, "x", NULL, &more[i]), sluice_aproducer_errstr(ap));
    }
    CHECK_EQ(admit(ap, "x", NULL, &o), SLUICE_ETOOBIG); /* max_queued */
    CHECK(strstr(sluice_aproducer_errstr(ap), "limit is 10") != NULL);
    WAIT(done == 10);
    run_for(20);
    CHECK_EQ(o.calls, 0);
    CHECK_EQ(done, 10);
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(more[i].res.outcome, SLUICE_ADMITTED);
    }
    close_ap(ap);
    redisContext *c = th_redis();
    th_cleanup_queue(c, q);
    redisFree(c);
}

/* Closing with admissions waiting: ECANCELED for each before close returns. */
static void test_close_waiting(void) {
    enum { N = 1000 };
    static outcome o[N];
    char q[64];
    int closed = 0;
    th_queue(q, sizeof(q), "ap-closew");
    sluice_aproducer *ap = make(q, 10 * N, 100);
    done = 0;
    for (int i = 0; i < N; i++) {
        CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
    }
    sluice_aproducer_close(ap, on_closed, &closed);
    CHECK_EQ(done, N);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(o[i].calls, 1);
        CHECK_EQ(o[i].res.outcome, SLUICE_FAILED);
        CHECK_EQ(o[i].res.status, SLUICE_ECANCELED);
    }
    WAIT(closed == 1);
    run_for(20);
    CHECK_EQ(done, N);
    CHECK_EQ(closed, 1);
}

/* Closing with calls written and not answered: each once, ADMITTED only if it really was. */
static void test_close_inflight(void) {
    enum { N = 5000 };
    static outcome o[N];
    char q[64];
    int closed = 0, canceled = 0, admitted = 0;
    th_queue(q, sizeof(q), "ap-closef");
    sluice_aproducer *ap = make(q, 10 * N, 100);
    WAIT(sluice_aproducer_ready(ap));
    done = 0;
    for (int i = 0; i < N; i++) {
        CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
    }
    uv_run(&loop, UV_RUN_NOWAIT); /* the calls are written */
    sluice_aproducer_close(ap, on_closed, &closed);
    WAIT(closed == 1);
    run_for(20);
    CHECK_EQ(done, N);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(o[i].calls, 1);
        if (o[i].res.outcome == SLUICE_ADMITTED) {
            admitted++;
        } else {
            CHECK_EQ(o[i].res.outcome, SLUICE_FAILED);
            CHECK_EQ(o[i].res.status, SLUICE_ECANCELED);
            canceled++;
        }
    }
    CHECK(canceled > 0);
    redisContext *c = th_redis();
    CHECK(th_int(c, "XLEN sluice:{%s}:stream", q) >= admitted); /* never claimed falsely */
    th_cleanup_queue(c, q);
    redisFree(c);
}

typedef struct closer {
    sluice_aproducer *ap;
    int closed;
    int after_close; /* what admit returned after close */
    outcome first;
} closer;

static void on_first_close(sluice_aproducer *ap, const sluice_admit_result *res, void *arg) {
    closer *k = arg;
    on_admit(ap, res, &k->first);
    sluice_aproducer_close(ap, on_closed, &k->closed);
    sluice_aproducer_close(ap, on_closed, &k->closed); /* ignored */
    sluice_message m = {"x", 1, NULL, 0, NULL, NULL, NULL};
    k->after_close = sluice_aproducer_admit(ap, &m, on_admit, &k->first);
}

/* Closing from inside a callback, with more admissions before and after it. */
static void test_close_in_callback(void) {
    enum { N = 300 };
    static outcome o[N];
    static closer k;
    char q[64];
    th_queue(q, sizeof(q), "ap-closecb");
    sluice_aproducer *ap = make(q, 10 * N, 50);
    WAIT(sluice_aproducer_ready(ap));
    done = 0;
    for (int i = 0; i < N; i++) {
        if (i == N / 2) {
            sluice_message m = {"x", 1, NULL, 0, NULL, NULL, NULL};
            CHECK_OK(sluice_aproducer_admit(ap, &m, on_first_close, &k), "");
        }
        CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
    }
    WAIT(k.closed == 1);
    run_for(20);
    CHECK_EQ(done, N + 1);
    CHECK_EQ(k.first.calls, 1);
    CHECK_EQ(k.after_close, SLUICE_ECANCELED);
    CHECK_EQ(k.closed, 1);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(o[i].calls, 1);
        CHECK(o[i].res.outcome == SLUICE_ADMITTED || o[i].res.status == SLUICE_ECANCELED);
    }
    redisContext *c = th_redis();
    th_cleanup_queue(c, q);
    redisFree(c);
}

/* Nothing listens: every admission gets an error callback (or OPEN), none is silent. */
static void test_dead_server(int fail_open) {
    enum { N = 100 };
    static outcome o[N + 10];
    char url[64];
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", th_free_port());
    sluice_aproducer *ap = make_url(url, "ap-dead", 10, 1000, 3000, fail_open);
    done = 0;
    for (int i = 0; i < N; i++) {
        CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
    }
    WAIT(done == N);
    CHECK(strstr(sluice_aproducer_errstr(ap), url) != NULL); /* says where */
    for (int i = 0; i < N + 10; i++) {
        if (i >= N) { /* known down now: fail fast, still through the callback */
            CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
            CHECK_EQ(o[i].calls, 0);
            WAIT(o[i].calls == 1);
        }
        CHECK_EQ(o[i].calls, 1);
        CHECK_EQ(o[i].res.outcome, fail_open ? SLUICE_OPEN : SLUICE_FAILED);
        CHECK_EQ(o[i].res.status, SLUICE_ECONN);
        CHECK_EQ(o[i].res.depth, -1);
    }
    CHECK(!sluice_aproducer_ready(ap));
    close_ap(ap);
}

static void *sleeper(void *arg) {
    redisContext *c = arg;
    redisReply *r = redisCommand(c, "DEBUG SLEEP 0.6");
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    return NULL;
}

/* The server blocks for 600 ms; admissions with a 200 ms deadline are reported unknown (they
 * were written and may run later) at their deadline, not after the stall; then it recovers. */
static void test_deadline(void) {
    enum { N = 20 };
    outcome o[N], after;
    char q[64];
    pthread_t t;
    th_queue(q, sizeof(q), "ap-deadline");
    sluice_aproducer *ap = make_url(th_redis_url(), q, 1000, 1000, 200, 0);
    WAIT(sluice_aproducer_ready(ap));
    redisContext *c = th_redis();
    CHECK_EQ(pthread_create(&t, NULL, sleeper, c), 0);
    usleep(100 * 1000);    /* DEBUG SLEEP has started */
    uv_update_time(&loop); /* deadlines count from the loop's time */
    done = 0;
    uint64_t t0 = uv_hrtime();
    for (int i = 0; i < N; i++) {
        CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
    }
    WAIT(done == N);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    CHECK(ms >= 150 && ms < 450);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(o[i].calls, 1);
        CHECK_EQ(o[i].res.outcome, SLUICE_FAILED);
        CHECK_EQ(o[i].res.status, SLUICE_EUNKNOWN);
    }
    CHECK_EQ(pthread_join(t, NULL), 0);
    WAIT(sluice_aproducer_ready(ap));
    CHECK_OK(admit(ap, "y", NULL, &after), sluice_aproducer_errstr(ap));
    WAIT(after.calls == 1);
    CHECK_EQ(after.res.outcome, SLUICE_ADMITTED);
    sluice_aproducer_counters k;
    sluice_aproducer_get_counters(ap, &k);
    CHECK_EQ(k.unknown, N);
    th_cleanup_queue(c, q);
    redisFree(c);
    close_ap(ap);
}

typedef struct info_result {
    int calls;
    int status;
    sluice_queue_info info;
} info_result;

static void on_info(sluice_aproducer *ap, int status, const sluice_queue_info *info, void *arg) {
    (void)ap;
    info_result *x = arg;
    x->calls++;
    x->status = status;
    if (info != NULL) {
        x->info = *info;
    }
}

static void get_info(sluice_aproducer *ap, info_result *x) {
    memset(x, 0, sizeof(*x));
    CHECK_OK(sluice_aproducer_info(ap, on_info, x), sluice_aproducer_errstr(ap));
    WAIT(x->calls == 1);
    CHECK_OK(x->status, sluice_aproducer_errstr(ap));
}

/* Reads `n` entries as consumer c1 and acknowledges `nack` of them with sluice_ack. */
static void read_and_ack(redisContext *c, const char *q, int n, int nack) {
    redisReply *r = redisCommand(c,
                                 "XREADGROUP GROUP workers c1 COUNT %d STREAMS "
                                 "sluice:{%s}:stream >",
                                 n, q);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY);
    const redisReply *entries = r->element[0]->element[1];
    CHECK_EQ(entries->elements, n);
    for (int i = 0; i < nack; i++) {
        CHECK_EQ(th_int(c, "FCALL sluice_ack 2 sluice:{%s}:stream sluice:{%s}:stats workers %s", q,
                        q, entries->element[i]->element[0]->str),
                 1);
    }
    freeReplyObject(r);
}

/* Queue info, and Retry-After from the drain rate the rejections' replies measured. */
static void test_info_and_retry_after(void) {
    enum { N = 20 };
    outcome o[N], full;
    info_result x;
    char q[64];
    th_queue(q, sizeof(q), "ap-info");
    sluice_aproducer *ap = make(q, N, 100);
    WAIT(sluice_aproducer_ready(ap));
    get_info(ap, &x);
    CHECK_EQ(x.info.depth, 0);
    CHECK_EQ(x.info.capacity, N);
    CHECK_EQ(x.info.pending, 0);
    done = 0;
    for (int i = 0; i < N; i++) {
        CHECK_OK(admit(ap, "x", NULL, &o[i]), sluice_aproducer_errstr(ap));
    }
    WAIT(done == N);
    redisContext *c = th_redis();
    th_int(c, "XGROUP CREATE sluice:{%s}:stream workers 0", q);
    read_and_ack(c, q, N, 0);
    th_int(c, "HSET sluice:{%s}:meta capacity 1", q); /* depth 20 against capacity 1 */
    get_info(ap, &x);
    CHECK_EQ(x.info.depth, N);
    CHECK_EQ(x.info.capacity, 1);
    CHECK_EQ(x.info.pending, N);
    CHECK_EQ(x.info.consumers, 1);
    CHECK_EQ(x.info.admitted, N);
    CHECK_EQ(x.info.acked, 0);
    CHECK_OK(admit(ap, "x", NULL, &full), "");
    WAIT(full.calls == 1);
    CHECK_EQ(full.res.outcome, SLUICE_FULL);
    CHECK_EQ(full.res.retry_after_s, 60); /* first sample: rate unknown yet, so the ceiling */
    run_for(300);
    redisReply *r = redisCommand(c, "XRANGE sluice:{%s}:stream - + COUNT 4", q);
    for (size_t i = 0; i < r->elements; i++) {
        CHECK_EQ(th_int(c, "FCALL sluice_ack 2 sluice:{%s}:stream sluice:{%s}:stats workers %s", q,
                        q, r->element[i]->element[0]->str),
                 1);
    }
    freeReplyObject(r);
    CHECK_OK(admit(ap, "x", NULL, &full), "");
    WAIT(full.calls == 1);
    CHECK_EQ(full.res.outcome, SLUICE_FULL);
    CHECK_EQ(full.res.depth, N - 4);
    /* 4 acks in >= 300 ms: at most 13.4/s, so 16 entries to drain take at least 2 s */
    double rate = sluice_aproducer_drain_rate(ap);
    CHECK(rate > 0 && rate < 13.4);
    CHECK(full.res.retry_after_s >= 2 && full.res.retry_after_s <= 60);
    CHECK_EQ(full.res.retry_after_s, sluice_aproducer_retry_after(ap, N - 4, 1));
    CHECK(sluice_aproducer_retry_after(ap, N - 4, N - 4) < full.res.retry_after_s);
    get_info(ap, &x);
    CHECK_EQ(x.info.acked, 4);
    CHECK(x.info.drain_rate > 0);
    th_cleanup_queue(c, q);
    redisFree(c);
    close_ap(ap);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    CHECK_EQ(uv_loop_init(&loop), 0);
    CHECK_EQ(uv_timer_init(&loop, &watchdog), 0);
    test_pipelined();
    test_boundary();
    test_copy_and_idempotency();
    test_refusals();
    test_close_waiting();
    test_close_inflight();
    test_close_in_callback();
    test_dead_server(0);
    test_dead_server(1);
    test_deadline();
    test_info_and_retry_after();
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    printf("test_aproducer: ok\n");
    return 0;
}
