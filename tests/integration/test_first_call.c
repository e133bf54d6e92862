/* SPDX-License-Identifier: MIT */
/*
 * test_first_call.c - every server function works as the first call on a fresh Lua state.
 *
 * A Redis function runs on a fresh Lua state after a restart, a failover or any FUNCTION LOAD;
 * nothing may depend on another function having run first. Each function is called here right
 * after FUNCTION LOAD REPLACE of the library (which gives every function new upvalues), and
 * again as its EVALSHA form run with EVAL (which runs the whole text at every call), with
 * arguments it accepts: each call must succeed. A table of calls covers every function of
 * SLUICE_FN; the test fails when one is missing. And whichever function a fresh state runs
 * first, the state it leaves (the limiter's caches, the runtime API) gives the same results: one
 * probe sequence after each of several first calls gets the same replies.
 */
#include <stdarg.h>

#include "harness.h"
#include "sluice/lua.h"
#include "sluice/redis.h"

#define MAX_ARGS 16

static int eval_mode;
static int called[SLUICE_FN_COUNT_];

/* Runs `fn` with the NULL-terminated keys then args; fresh: as the first call of a Lua state.
 * Returns the reply, CHECKed not to be an error. */
static redisReply *call(redisContext *c, int fresh, sluice_fn fn, int nkeys, ...) {
    const char *argv[MAX_ARGS + 3];
    size_t lens[MAX_ARGS + 3];
    char nk[16];
    char *script = NULL;
    int argc = 0;
    snprintf(nk, sizeof(nk), "%d", nkeys);
    if (eval_mode) {
        size_t len = 0;
        script = sluice_lua_script(fn, &len);
        CHECK(script != NULL);
        argv[argc] = "EVAL", lens[argc++] = 4;
        argv[argc] = script, lens[argc++] = len;
    } else {
        if (fresh) {
            size_t len = 0;
            const char *lib = sluice_lua_library(&len);
            const char *load[] = {"FUNCTION", "LOAD", "REPLACE", lib};
            size_t load_lens[] = {8, 4, 7, len};
            redisReply *r = redisCommandArgv(c, 4, load, load_lens);
            CHECK(r != NULL && r->type == REDIS_REPLY_STRING);
            freeReplyObject(r);
        }
        argv[argc] = "FCALL", lens[argc++] = 5;
        argv[argc] = sluice_fn_name(fn), lens[argc++] = strlen(sluice_fn_name(fn));
    }
    argv[argc] = nk, lens[argc++] = strlen(nk);
    va_list ap;
    va_start(ap, nkeys);
    for (const char *a = va_arg(ap, const char *); a != NULL; a = va_arg(ap, const char *)) {
        CHECK(argc < MAX_ARGS + 3);
        argv[argc] = a, lens[argc++] = strlen(a);
    }
    va_end(ap);
    redisReply *r = redisCommandArgv(c, argc, argv, lens);
    free(script);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "%s (%s, %s call) failed: %s\n", sluice_fn_name(fn),
                eval_mode ? "EVAL" : "FCALL", fresh ? "first" : "setup", r ? r->str : c->errstr);
        exit(1);
    }
    if (fresh) {
        called[fn] = 1;
    }
    return r;
}

#define FIRST(c, fn, nkeys, ...) freeReplyObject(call(c, 1, fn, nkeys, __VA_ARGS__, NULL))
#define SETUP(c, fn, nkeys, ...) freeReplyObject(call(c, 0, fn, nkeys, __VA_ARGS__, NULL))

/* The first entry id of stream `key` (or its first element for a list), into buf. */
static const char *first_of(redisContext *c, const char *cmd, const char *key, char *buf,
                            size_t len) {
    redisReply *r = strcmp(cmd, "XRANGE") == 0 ? redisCommand(c, "XRANGE %s - + COUNT 1", key)
                                               : redisCommand(c, "LINDEX %s 0", key);
    CHECK(r != NULL);
    if (r->type == REDIS_REPLY_ARRAY) {
        CHECK(r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY);
        snprintf(buf, len, "%s", r->element[0]->element[0]->str);
    } else {
        CHECK(r->type == REDIS_REPLY_STRING);
        snprintf(buf, len, "%s", r->str);
    }
    freeReplyObject(r);
    return buf;
}

/* A fair queue with limits of every drain scope: the functions of fair queues and limits. */
static void fair_queue(redisContext *c) {
    char q[64], k[8][96], id[64];
    th_queue(q, sizeof(q), "first-fair");
    const char *names[] = {"stream", "meta", "stats", "limits", "lk", "lane:gold", "lwait", "ring"};
    for (int i = 0; i < 8; i++) {
        snprintf(k[i], sizeof(k[i]), "sluice:{%s}:%s", q, names[i]);
    }
    FIRST(c, SLUICE_FN_VERSION, 0, "x");
    FIRST(c, SLUICE_FN_LIMIT, 1, k[4], "1", "gcra:10:1000");
    FIRST(c, SLUICE_FN_GROUP, 2, k[0], k[1], "workers", "c1");
    FIRST(c, SLUICE_FN_LIMITS_CONFIG, 2, k[3], k[1], "set", "dt", "drain-tenant",
          "window:100000:1000:100");
    SETUP(c, SLUICE_FN_LIMITS_CONFIG, 2, k[3], k[1], "set", "it", "inflight-tenant", "100");
    SETUP(c, SLUICE_FN_LIMITS_CONFIG, 2, k[3], k[1], "set", "t", "tenant", "log:1000:1000");
    FIRST(c, SLUICE_FN_FAIR_CONFIG, 2, k[0], k[1], "weight", "gold", "3");
    CHECK_EQ(th_int(c, "HGET sluice:{%s}:weights gold", q), 3);
    FIRST(c, SLUICE_FN_FAIR_CONFIG, 2, k[0], k[1], "on");
    FIRST(c, SLUICE_FN_ADMIT2, 3, k[0], k[1], k[2], "1000", "0", "3", "gold", "", "g1", "", "",
          "u1");
    FIRST(c, SLUICE_FN_FAIR_TAKE, 2, k[0], k[1], "workers", "c1", "10");
    FIRST(c, SLUICE_FN_LANE_ACK, 2, k[0], k[2], "workers", "gold",
          first_of(c, "XRANGE", k[5], id, sizeof(id)));
    FIRST(c, SLUICE_FN_LANE_RECLAIM, 2, k[0], k[2], "workers", "c2", "0", "0", "10");
    SETUP(c, SLUICE_FN_ADMIT2, 3, k[0], k[1], k[2], "1000", "0", "3", "gold", "", "g2");
    FIRST(c, SLUICE_FN_FAIR_GRANT, 2, k[0], k[1], "workers", "c1", "10");
    FIRST(c, SLUICE_FN_FAIR_REFUND, 2, k[0], k[1], "short", "0", "gold", "1", "1");
    th_cleanup_queue(c, q);
    for (int i = 3; i < 8; i++) {
        th_int(c, "DEL %s", k[i]);
    }
    th_int(c,
           "DEL sluice:{%s}:weights sluice:{%s}:lanes sluice:{%s}:served sluice:{%s}:wake "
           "sluice:{%s}:deficit sluice:{%s}:lim:t:gold sluice:{%s}:lim:dt:gold",
           q, q, q, q, q, q, q);
}

/* A plain stream queue: admission, a paced read, and the life of an entry. */
static void stream_queue(redisContext *c) {
    char q[64], k[4][96], id[4][64];
    th_queue(q, sizeof(q), "first-stream");
    const char *names[] = {"stream", "meta", "stats", "dead"};
    for (int i = 0; i < 4; i++) {
        snprintf(k[i], sizeof(k[i]), "sluice:{%s}:%s", q, names[i]);
    }
    SETUP(c, SLUICE_FN_GROUP, 2, k[0], k[1], "workers", "c1");
    FIRST(c, SLUICE_FN_ADMIT, 3, k[0], k[1], k[2], "1000", "0", "e1", "e2", "e3", "e4");
    FIRST(c, SLUICE_FN_TAKE, 2, k[0], k[1], "workers", "c1", "10");
    redisReply *r = redisCommand(c, "XRANGE %s - +", k[0]);
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 4);
    for (int i = 0; i < 4; i++) {
        snprintf(id[i], sizeof(id[i]), "%s", r->element[i]->element[0]->str);
    }
    freeReplyObject(r);
    FIRST(c, SLUICE_FN_ACK, 2, k[0], k[2], "workers", id[0]);
    FIRST(c, SLUICE_FN_RETRY, 2, k[0], k[2], "workers", "c1", id[1], "0");
    FIRST(c, SLUICE_FN_RECLAIM, 2, k[0], k[2], "workers", "c2", "0", "0-0", "10");
    FIRST(c, SLUICE_FN_TOUCH, 1, k[0], "workers", "c2", id[2]);
    FIRST(c, SLUICE_FN_DEAD, 3, k[0], k[3], k[2], "workers", id[3], "c2", "1", "failed");
    FIRST(c, SLUICE_FN_REPLAY, 4, k[0], k[1], k[2], k[3], "1000",
          first_of(c, "XRANGE", k[3], id[0], sizeof(id[0])));
    FIRST(c, SLUICE_FN_CLEAR, 2, k[0], k[1], "workers", "1000");
    FIRST(c, SLUICE_FN_PRUNE, 1, k[0], "workers", "c1");
    th_cleanup_queue(c, q);
}

/* A list queue. */
static void list_queue(redisContext *c) {
    char q[64], k[6][96], e[128], id[64];
    th_queue(q, sizeof(q), "first-list");
    const char *names[] = {"list", "meta", "stats", "dead", "procs", "proc:c1"};
    for (int i = 0; i < 6; i++) {
        snprintf(k[i], sizeof(k[i]), "sluice:{%s}:%s", q, names[i]);
    }
    FIRST(c, SLUICE_FN_LIST_ADMIT, 3, k[0], k[1], k[2], "1000", "0", "e1", "e2");
    FIRST(c, SLUICE_FN_LIST_ADMIT2, 3, k[0], k[1], k[2], "1000", "0", "1", "e3");
    FIRST(c, SLUICE_FN_LIST_TAKE, 3, k[0], k[5], k[4], "10");
    FIRST(c, SLUICE_FN_LIST_ACK, 3, k[5], k[1], k[2], first_of(c, "LINDEX", k[5], e, sizeof(e)));
    FIRST(c, SLUICE_FN_LIST_DEAD, 4, k[5], k[3], k[1], k[2],
          first_of(c, "LINDEX", k[5], e, sizeof(e)), "c1", "1", "failed");
    FIRST(c, SLUICE_FN_LIST_RECOVER, 3, k[0], k[5], k[4]);
    FIRST(c, SLUICE_FN_LIST_REPLAY, 4, k[0], k[1], k[2], k[3], "1000",
          first_of(c, "XRANGE", k[3], id, sizeof(id)));
    FIRST(c, SLUICE_FN_LIST_CLEAR, 2, k[0], k[1], "1000");
    th_cleanup_queue(c, q);
    th_int(c, "DEL %s", k[5]);
}

/* Appends reply r to buf as text, a stream id as "<id>" (ids differ from run to run). */
static void render(const redisReply *r, char *buf, size_t len) {
    size_t n = strlen(buf);
    if (r->type == REDIS_REPLY_ARRAY) {
        snprintf(buf + n, len - n, "[");
        for (size_t i = 0; i < r->elements; i++) {
            render(r->element[i], buf, len);
        }
        n = strlen(buf);
        snprintf(buf + n, len - n, "]");
    } else if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(buf + n, len - n, "%lld ", r->integer);
    } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_ERROR) {
        int id = r->len > 0 && strspn(r->str, "0123456789-") == r->len && strchr(r->str, '-');
        snprintf(buf + n, len - n, "%s ", id ? "<id>" : r->str);
    } else {
        snprintf(buf + n, len - n, "nil ");
    }
}

/* One call's reply appended to buf; `keep`: how many leading elements of it (0: all). */
static void probe(redisContext *c, char *buf, size_t len, size_t keep, sluice_fn fn, int nkeys,
                  ...) {
    const char *argv[MAX_ARGS + 3];
    char nk[16];
    int argc = 0;
    snprintf(nk, sizeof(nk), "%d", nkeys);
    argv[argc++] = "FCALL";
    argv[argc++] = sluice_fn_name(fn);
    argv[argc++] = nk;
    va_list ap;
    va_start(ap, nkeys);
    for (const char *a = va_arg(ap, const char *); a != NULL; a = va_arg(ap, const char *)) {
        CHECK(argc < MAX_ARGS + 3);
        argv[argc++] = a;
    }
    va_end(ap);
    redisReply *r = redisCommandArgv(c, argc, argv, NULL);
    CHECK(r != NULL);
    if (keep > 0 && r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < keep && i < r->elements; i++) {
            render(r->element[i], buf, len);
        }
    } else {
        render(r, buf, len);
    }
    freeReplyObject(r);
}

#define PROBE(keep, fn, nkeys, ...) probe(c, out, len, keep, fn, nkeys, __VA_ARGS__, NULL)

/* The probe sequence on fresh keys of round `round`: standalone limits of each algorithm (their
 * allowed, limited_by, remaining: reset times follow the clock), a queue limit set and an
 * admission it limits. */
static void probes(redisContext *c, int round, char *out, size_t len) {
    char q[64], k[8][96];
    th_queue(q, sizeof(q), "first-same");
    const char *names[] = {"stream", "meta", "stats", "limits", "la", "lb", "lc", "ld"};
    for (int i = 0; i < 8; i++) {
        snprintf(k[i], sizeof(k[i]), "sluice:{%s}:%s", q, names[i]);
        if (i >= 4) { /* standalone limit keys: fresh ones each round */
            snprintf(k[i] + strlen(k[i]), sizeof(k[i]) - strlen(k[i]), "%d", round);
        }
    }
    out[0] = '\0';
    PROBE(3, SLUICE_FN_LIMIT, 2, k[4], k[5], "3", "gcra:10:1000", "window:10:1000:100");
    PROBE(3, SLUICE_FN_LIMIT, 2, k[6], k[7], "2", "log:5:1000", "fixed:4:60000");
    PROBE(3, SLUICE_FN_LIMIT, 1, k[4], "9", "gcra:10:1000");
    PROBE(0, SLUICE_FN_LIMITS_CONFIG, 2, k[3], k[1], "set", "t", "tenant", "gcra:1:60000");
    PROBE(0, SLUICE_FN_ADMIT2, 3, k[0], k[1], k[2], "1000", "0", "3", "gold", "", "a", "gold", "",
          "b", "blue", "", "c");
    th_cleanup_queue(c, q);
    for (int i = 3; i < 8; i++) {
        th_int(c, "DEL %s", k[i]);
    }
    th_int(c, "DEL sluice:{%s}:qlim:t:gcra:gold sluice:{%s}:qlim:t:gcra:blue", q, q);
}

/* After each of these as the first call of a fresh library, the probes give the same replies. */
static void same_whichever_first(redisContext *c) {
    char first[2048], again[2048], q[64], k[3][96];
    th_queue(q, sizeof(q), "first-any");
    const char *names[] = {"stream", "meta", "limits"};
    for (int i = 0; i < 3; i++) {
        snprintf(k[i], sizeof(k[i]), "sluice:{%s}:%s", q, names[i]);
    }
    for (int round = 0; round < 6; round++) {
        switch (round) {
        case 0:
            FIRST(c, SLUICE_FN_VERSION, 0, "x");
            break;
        case 1:
            FIRST(c, SLUICE_FN_LIMIT, 1, k[2], "1", "window:10:1000:100");
            break;
        case 2:
            FIRST(c, SLUICE_FN_LIMITS_CONFIG, 2, k[2], k[1], "set", "d", "drain", "log:9:1000");
            break;
        case 3:
            FIRST(c, SLUICE_FN_GROUP, 2, k[0], k[1], "workers", "c1");
            break;
        case 4:
            FIRST(c, SLUICE_FN_TAKE, 2, k[0], k[1], "workers", "c1", "1");
            break;
        default:
            FIRST(c, SLUICE_FN_FAIR_CONFIG, 2, k[0], k[1], "weight", "gold", "2");
            break;
        }
        probes(c, round, round == 0 ? first : again, sizeof(first));
        if (round > 0 && strcmp(first, again) != 0) {
            fprintf(stderr, "after first call %d:\n  %s\nafter sluice_version:\n  %s\n", round,
                    again, first);
            exit(1);
        }
    }
    th_cleanup_queue(c, q);
    th_int(c, "DEL %s sluice:{%s}:weights", k[2], q);
    th_int(c, "DEL sluice:{%s}:qlim:d:log:", q);
}

int main(void) {
    redisContext *c = th_redis();
    for (eval_mode = 0; eval_mode < 2; eval_mode++) {
        memset(called, 0, sizeof(called));
        fair_queue(c);
        stream_queue(c);
        list_queue(c);
        for (int fn = 0; fn < SLUICE_FN_COUNT_; fn++) {
            if (!called[fn]) {
                fprintf(stderr, "%s was not called first (%s)\n", sluice_fn_name((sluice_fn)fn),
                        eval_mode ? "EVAL" : "FCALL");
                exit(1);
            }
        }
    }
    eval_mode = 0;
    same_whichever_first(c);
    redisFree(c);
    printf("ok: each of %d functions works as the first call after FUNCTION LOAD and as EVAL\n",
           SLUICE_FN_COUNT_);
    return 0;
}
