/* SPDX-License-Identifier: MIT */
/*
 * test_producer.c - the blocking producer against a real redis-server: the capacity boundary,
 * batches at the boundary, capacity changed at run time, both backends, the payload limits
 * (B1, B3), idempotency keys, EVALSHA mode and a server that lost the library (F14), many
 * concurrent producer processes never exceeding the capacity by even one; a batch holding an
 * idempotency key refused whole on a partitioned queue too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "sluice/producer.h"

static sluice_producer *make(const char *queue, long long cap, sluice_backend b, int force_eval) {
    sluice_producer_options o;
    sluice_producer *p;
    char err[256] = "";
    sluice_producer_options_init(&o);
    o.redis_url = th_redis_url();
    o.queue = queue;
    o.capacity = cap;
    o.backend = b;
    o.force_eval = force_eval;
    o.max_payload = 4096;
    CHECK_OK(sluice_producer_new(&o, &p, err, sizeof(err)), err);
    return p;
}

/* Reads one entry as consumer c1 and acknowledges it with the sluice_ack function. */
static void ack_one(redisContext *c, const char *q) {
    char stream[128];
    snprintf(stream, sizeof(stream), "sluice:{%s}:stream", q);
    redisReply *r = redisCommand(c, "XGROUP CREATE %s workers 0 MKSTREAM", stream);
    freeReplyObject(r);
    r = redisCommand(c, "XREADGROUP GROUP workers c1 COUNT 1 STREAMS %s >", stream);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY);
    const char *id = r->element[0]->element[1]->element[0]->element[0]->str;
    CHECK_EQ(th_int(c, "FCALL sluice_ack 2 %s sluice:{%s}:stats workers %s", stream, q, id), 1);
    freeReplyObject(r);
}

static void test_boundary(sluice_backend b) {
    char q[64];
    th_queue(q, sizeof(q), "boundary");
    redisContext *c = th_redis();
    sluice_producer *p = make(q, 5, b, 0);
    sluice_admit_result res;
    for (int i = 0; i < 5; i++) {
        CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
        CHECK_EQ(res.outcome, SLUICE_ADMITTED);
        CHECK_EQ(res.depth, i + 1);
        CHECK_EQ(res.capacity, 5);
        CHECK(res.id[0] != '\0');
    }
    CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_FULL);
    CHECK_EQ(res.depth, 5);
    CHECK(res.retry_after_s >= 1);
    if (b == SLUICE_BACKEND_STREAM) {
        CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), 5);
        ack_one(c, q);
        CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), 4);
    } else {
        CHECK_EQ(th_int(c, "LLEN sluice:{%s}:list", q), 5);
        redisReply *r = redisCommand(c,
                                     "FCALL sluice_list_take 3 sluice:{%s}:list "
                                     "sluice:{%s}:proc:t sluice:{%s}:procs 1",
                                     q, q, q);
        CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
        /* taken but not acknowledged: still counts against the capacity */
        sluice_admit_result full;
        CHECK_OK(sluice_producer_admit(p, "x", 1, &full), sluice_producer_errstr(p));
        CHECK_EQ(full.outcome, SLUICE_FULL);
        CHECK_EQ(th_int(c,
                        "FCALL sluice_list_ack 3 sluice:{%s}:proc:t sluice:{%s}:meta "
                        "sluice:{%s}:stats %b",
                        q, q, q, r->element[0]->str, r->element[0]->len),
                 1);
        freeReplyObject(r);
    }
    CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_FULL);
    CHECK_EQ(th_int(c, "HGET sluice:{%s}:stats admitted", q), 6);
    CHECK(th_int(c, "HGET sluice:{%s}:stats rejected", q) >= 2);
    th_cleanup_queue(c, q);
    sluice_producer_free(p);
    redisFree(c);
}

static void test_batch_boundary(sluice_backend b) {
    char q[64];
    th_queue(q, sizeof(q), "batch");
    redisContext *c = th_redis();
    sluice_producer *p = make(q, 10, b, 0);
    sluice_message m[7];
    sluice_admit_result res[7];
    char bodies[7][8];
    for (int i = 0; i < 7; i++) {
        snprintf(bodies[i], sizeof(bodies[i]), "m%d", i);
        m[i] = (sluice_message){bodies[i], strlen(bodies[i]), NULL, 0, NULL, NULL, NULL};
    }
    size_t admitted;
    CHECK_OK(sluice_producer_admit_batch(p, m, 7, res, &admitted), sluice_producer_errstr(p));
    CHECK_EQ(admitted, 7);
    CHECK_OK(sluice_producer_admit_batch(p, m, 7, res, &admitted), sluice_producer_errstr(p));
    CHECK_EQ(admitted, 3); /* the first three fit, in order */
    for (int i = 0; i < 7; i++) {
        CHECK_EQ(res[i].outcome, i < 3 ? SLUICE_ADMITTED : SLUICE_FULL);
    }
    CHECK_EQ(res[6].depth, 10);
    th_cleanup_queue(c, q);
    sluice_producer_free(p);
    redisFree(c);
}

static void test_runtime_capacity(void) {
    char q[64];
    th_queue(q, sizeof(q), "runtime");
    redisContext *c = th_redis();
    sluice_producer *p = make(q, 2, SLUICE_BACKEND_STREAM, 0);
    sluice_admit_result res;
    for (int i = 0; i < 2; i++) {
        CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
    }
    CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_FULL);
    th_int(c, "HSET sluice:{%s}:meta capacity 3", q); /* what sluice-admin capacity does */
    CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    CHECK_EQ(res.capacity, 3);
    th_int(c, "HSET sluice:{%s}:meta capacity 1", q); /* shrink below depth: all rejected */
    CHECK_OK(sluice_producer_admit(p, "x", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_FULL);
    CHECK_EQ(res.capacity, 1);
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), 3);
    th_cleanup_queue(c, q);
    sluice_producer_free(p);
    redisFree(c);
}

static void test_limits(void) {
    char q[64];
    th_queue(q, sizeof(q), "limits");
    redisContext *c = th_redis();
    sluice_producer *p = make(q, 100, SLUICE_BACKEND_STREAM, 0);
    sluice_admit_result res;
    char *big = calloc(1, 4097);
    CHECK_EQ(sluice_producer_admit(p, big, 4097, &res), SLUICE_ETOOBIG); /* B1 */
    CHECK_EQ(res.outcome, SLUICE_FAILED);
    CHECK(strstr(sluice_producer_errstr(p), "4097") != NULL);
    CHECK_EQ(th_int(c, "EXISTS sluice:{%s}:stream", q), 0); /* nothing reached redis */
    CHECK_OK(sluice_producer_admit(p, big, 4096, &res), sluice_producer_errstr(p)); /* B3 */
    CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    CHECK_OK(sluice_producer_admit(p, "", 0, &res), sluice_producer_errstr(p)); /* B3 */
    CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    free(big);
    th_cleanup_queue(c, q);
    sluice_producer_free(p);
    redisFree(c);
}

static void test_idempotency(void) {
    char q[64];
    th_queue(q, sizeof(q), "idem");
    redisContext *c = th_redis();
    sluice_producer *p = make(q, 100, SLUICE_BACKEND_STREAM, 0);
    sluice_message m = {"once", 4, NULL, 0, NULL, "order-17", NULL};
    sluice_admit_result a, b;
    CHECK_OK(sluice_producer_admit_msg(p, &m, &a), sluice_producer_errstr(p));
    CHECK_EQ(a.outcome, SLUICE_ADMITTED);
    CHECK_OK(sluice_producer_admit_msg(p, &m, &b), sluice_producer_errstr(p));
    CHECK_EQ(b.outcome, SLUICE_DUPLICATE);
    CHECK_STREQ(a.id, b.id);
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), 1);
    CHECK(th_int(c, "PTTL sluice:{%s}:idem:order-17", q) > 0); /* it expires */
    th_int(c, "DEL sluice:{%s}:idem:order-17", q);
    th_cleanup_queue(c, q);
    sluice_producer_free(p);
    redisFree(c);
}

/* A batch holding an idempotency key is refused whole, on a partitioned queue as on a plain one:
 * never split so that the keyed message goes alone to its tenant's partition and is admitted
 * there, where its key is never looked up (partition 0 is). */
static void test_partitioned_batch_key(void) {
    char q[64], t[2][16] = {"", ""};
    th_queue(q, sizeof(q), "pkey");
    for (int i = 0; i < 64 && (t[0][0] == '\0' || t[1][0] == '\0'); i++) {
        char name[16];
        snprintf(name, sizeof(name), "t%d", i);
        snprintf(t[sluice_partition_of(name, 2)], sizeof(t[0]), "%s", name);
    }
    CHECK(t[0][0] != '\0' && t[1][0] != '\0');
    redisContext *c = th_redis();
    th_int(c, "HSET sluice:{%s}:meta partitions 2", q);
    sluice_producer *p = make(q, 100, SLUICE_BACKEND_STREAM, 0);
    sluice_message m[2] = {{"a", 1, NULL, 0, t[0], NULL, NULL},
                           {"b", 1, NULL, 0, t[1], "key-1", NULL}};
    sluice_admit_result res[2];
    size_t admitted = 9;
    CHECK_EQ(sluice_producer_admit_batch(p, m, 2, res, &admitted), SLUICE_EINVAL);
    CHECK(strstr(sluice_producer_errstr(p), "not batches") != NULL);
    CHECK_EQ(admitted, 0);
    CHECK_EQ(th_int(c, "EXISTS sluice:{%s}:stream sluice:{%s~1}:stream", q, q), 0);
    CHECK_EQ(th_int(c, "EXISTS sluice:{%s~1}:idem:key-1", q), 0);
    th_int(c, "DEL sluice:{%s~1}:idem:key-1", q);
    char q1[80];
    snprintf(q1, sizeof(q1), "%s~1", q);
    th_cleanup_queue(c, q1);
    th_cleanup_queue(c, q);
    sluice_producer_free(p);
    redisFree(c);
}

/* F14: the server lost the library (FUNCTION FLUSH / SCRIPT FLUSH): admission still works. */
static void test_library_lost(int force_eval) {
    char q[64];
    th_queue(q, sizeof(q), "reload");
    redisContext *c = th_redis();
    sluice_producer *p = make(q, 100, SLUICE_BACKEND_STREAM, force_eval);
    sluice_admit_result res;
    CHECK_OK(sluice_producer_admit(p, "a", 1, &res), sluice_producer_errstr(p));
    redisReply *r = redisCommand(c, force_eval ? "SCRIPT FLUSH" : "FUNCTION DELETE sluice");
    CHECK(r != NULL && r->type != REDIS_REPLY_ERROR);
    freeReplyObject(r);
    CHECK_OK(sluice_producer_admit(p, "b", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), 2);
    th_cleanup_queue(c, q);
    sluice_producer_free(p);
    redisFree(c);
}

/* Many producer processes race for the last slots: the capacity holds exactly. */
static void test_concurrent_producers(void) {
    enum { PROCS = 8, EACH = 400, CAP = 1000 };
    char q[64];
    th_queue(q, sizeof(q), "race");
    redisContext *c = th_redis();
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        CHECK(pids[i] >= 0);
        if (pids[i] == 0) {
            sluice_producer *p = make(q, CAP, SLUICE_BACKEND_STREAM, 0);
            sluice_admit_result res;
            int admitted = 0;
            for (int k = 0; k < EACH; k++) {
                if (sluice_producer_admit(p, "r", 1, &res) != 0) {
                    _exit(100);
                }
                admitted += res.outcome == SLUICE_ADMITTED;
                if (res.depth > CAP) {
                    _exit(101);
                }
            }
            sluice_producer_free(p);
            _exit(admitted > 99 ? 99 : admitted); /* only checked for errors */
        }
    }
    for (int i = 0; i < PROCS; i++) {
        int status;
        CHECK(waitpid(pids[i], &status, 0) == pids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) < 100);
    }
    CHECK_EQ(th_int(c, "XLEN sluice:{%s}:stream", q), CAP);
    CHECK_EQ(th_int(c, "HGET sluice:{%s}:stats admitted", q), CAP);
    CHECK_EQ(th_int(c, "HGET sluice:{%s}:stats rejected", q), PROCS * EACH - CAP);
    th_cleanup_queue(c, q);
    redisFree(c);
}

static void test_unix_socket_and_bad_server(void) {
    char q[64], err[256];
    th_queue(q, sizeof(q), "unix");
    sluice_producer_options o;
    sluice_producer *p;
    sluice_admit_result res;
    sluice_producer_options_init(&o);
    o.redis_url = th_redis_unix_url();
    o.queue = q;
    CHECK_OK(sluice_producer_new(&o, &p, err, sizeof(err)), err);
    CHECK_OK(sluice_producer_admit(p, "u", 1, &res), sluice_producer_errstr(p));
    CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    sluice_producer_free(p);
    o.redis_url = "redis://127.0.0.1:1"; /* nothing listens there: certainly not admitted */
    CHECK_OK(sluice_producer_new(&o, &p, err, sizeof(err)), err);
    CHECK_EQ(sluice_producer_admit(p, "u", 1, &res), SLUICE_ECONN);
    CHECK_EQ(res.outcome, SLUICE_FAILED);
    sluice_producer_free(p);
    o.fail_open = 1;
    CHECK_OK(sluice_producer_new(&o, &p, err, sizeof(err)), err);
    CHECK_EQ(sluice_producer_admit(p, "u", 1, &res), SLUICE_ECONN);
    CHECK_EQ(res.outcome, SLUICE_OPEN);
    sluice_producer_free(p);
    o.queue = "no spaces allowed";
    CHECK_EQ(sluice_producer_new(&o, &p, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "' '") != NULL);
    redisContext *c = th_redis();
    th_cleanup_queue(c, q);
    redisFree(c);
}

int main(void) {
    test_boundary(SLUICE_BACKEND_STREAM);
    test_boundary(SLUICE_BACKEND_LIST);
    test_batch_boundary(SLUICE_BACKEND_STREAM);
    test_batch_boundary(SLUICE_BACKEND_LIST);
    test_runtime_capacity();
    test_limits();
    test_idempotency();
    test_partitioned_batch_key();
    test_library_lost(0);
    test_library_lost(1);
    test_concurrent_producers();
    test_unix_socket_and_bad_server();
    printf("test_producer: ok\n");
    return 0;
}
