/* SPDX-License-Identifier: MIT */
/*
 * test_limit.c - sluice/limit.h against the fixture's Redis: the blocking limiter (FCALL and
 * EVALSHA mode give the same answers), the async check on a libuv connection, keys of the form
 * sluice:{NS}:lim:KEY, and bad limits refused before any Redis call.
 */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "harness.h"
#include "uvwait.h"

#include "sluice/limit.h"
#include "sluice/redis.h"
#include "sluice/status.h"
#include "sluice/url.h"

static void blocking(int force_eval) {
    char ns[64], err[256];
    th_queue(ns, sizeof(ns), force_eval ? "limeval" : "limfn");
    sluice_limiter_options o;
    sluice_limiter_options_init(&o);
    o.redis_url = th_redis_url();
    o.ns = ns;
    o.force_eval = force_eval;
    sluice_limiter *l;
    CHECK_OK(sluice_limiter_new(&o, &l, err, sizeof(err)), err);
    sluice_limit lim[2];
    CHECK_OK(sluice_limit_parse("user=3/10s", SLUICE_LIMIT_GCRA, &lim[0], err, sizeof(err)), err);
    lim[1] = (sluice_limit){"global", 0, SLUICE_LIMIT_GCRA, 4, 10000, 0};
    sluice_limit_result r;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(sluice_limiter_check(l, lim, 2, 1, &r), sluice_limiter_errstr(l));
        CHECK_EQ(r.allowed, 1);
        CHECK_EQ(r.limited_by, -1);
        CHECK_EQ(r.remaining, 2 - i); /* the smaller of user's and global's */
    }
    CHECK_OK(sluice_limiter_check(l, lim, 2, 1, &r), sluice_limiter_errstr(l));
    CHECK_EQ(r.allowed, 0);
    CHECK_EQ(r.limited_by, 0);
    CHECK(r.retry_after_ms > 3000 && r.retry_after_ms <= 3334); /* one interval: 10 s / 3 */
    CHECK_OK(sluice_limiter_check(l, &lim[1], 1, 2, &r), sluice_limiter_errstr(l));
    CHECK_EQ(r.allowed, 0); /* global has 1 left: weight 2 must wait */
    CHECK_OK(sluice_limiter_check(l, &lim[1], 1, 5, &r), sluice_limiter_errstr(l));
    CHECK_EQ(r.allowed, -1); /* more than global ever allows */
    CHECK_EQ(r.limited_by, 0);

    /* the keys: one hash tag per namespace, so a call stays in one cluster slot */
    redisContext *c = th_redis();
    char key[200];
    snprintf(key, sizeof(key), "sluice:{%s}:lim:user", ns);
    CHECK(th_int(c, "PTTL %s", key) > 0);
    snprintf(key, sizeof(key), "sluice:{%s}:lim:global", ns);
    CHECK(th_int(c, "EXISTS %s", key) == 1);

    /* bad limits: refused before any call, with the value named */
    sluice_limit bad = {"k", 0, SLUICE_LIMIT_WINDOW, 5, 1000, 2000};
    CHECK_EQ(sluice_limiter_check(l, &bad, 1, 1, &r), SLUICE_EINVAL);
    CHECK_EQ(sluice_limiter_check(l, lim, 0, 1, &r), SLUICE_EINVAL);
    CHECK_EQ(sluice_limiter_check(l, lim, 1, 0, &r), SLUICE_EINVAL);
    CHECK(strstr(sluice_limiter_errstr(l), "weight 0") != NULL);
    sluice_limiter_free(l);
    redisFree(c);
}

/* Without scripts, a command refused while queuing (an ACL without PEXPIRE) must not leave the
 * connection inside MULTI: the next check gets the same clear refusal, not "MULTI calls can not
 * be nested". */
static void no_scripts_refused_twice(void) {
    char ns[64], err[256], user[64], url[300];
    th_queue(ns, sizeof(ns), "limacl");
    snprintf(user, sizeof(user), "lim-%d", (int)getpid());
    redisContext *c = th_redis();
    redisReply *r = redisCommand(c,
                                 "ACL SETUSER %s on >pw ~* resetchannels -@all +multi +exec "
                                 "+discard +incrby +pttl +fcall",
                                 user);
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    const char *base = th_redis_url(); /* redis://HOST:PORT */
    snprintf(url, sizeof(url), "redis://%s:pw@%s", user, base + strlen("redis://"));
    sluice_limiter_options o;
    sluice_limiter_options_init(&o);
    o.redis_url = url;
    o.ns = ns;
    o.no_scripts = 1;
    sluice_limiter *l;
    CHECK_OK(sluice_limiter_new(&o, &l, err, sizeof(err)), err);
    sluice_limit lim = {"k", 0, SLUICE_LIMIT_FIXED, 5, 10000, 0};
    sluice_limit_result res;
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(sluice_limiter_check(l, &lim, 1, 1, &res), SLUICE_ENOPERM);
        CHECK(strstr(sluice_limiter_errstr(l), "nested") == NULL);
    }
    sluice_limiter_free(l);
    r = redisCommand(c, "ACL DELUSER %s", user);
    freeReplyObject(r);
    redisFree(c);
}

static int got = 0, got_status = -99;
static sluice_limit_result got_res;
static void on_check(int status, const sluice_limit_result *res, void *arg) {
    (void)arg;
    got++;
    got_status = status;
    if (res != NULL) {
        got_res = *res;
    }
}
static void on_state(sluice_aconn *c, int ready, int status, void *arg) {
    (void)c, (void)status;
    *(int *)arg = ready;
}

static void async_check(void) {
    char ns[64], err[256];
    th_queue(ns, sizeof(ns), "limasync");
    uv_loop_init(&loop);
    uv_timer_init(&loop, &watchdog);
    sluice_url url;
    CHECK_OK(sluice_url_parse(&url, th_redis_url(), err, sizeof(err)), err);
    int ready = 0;
    sluice_aconn *c = sluice_aconn_new(&loop, &url, NULL, on_state, &ready);
    WAIT(ready);
    sluice_limit lim = {"k", 0, SLUICE_LIMIT_LOG, 2, 60000, 0};
    for (int i = 0; i < 3; i++) {
        CHECK_OK(sluice_limit_acheck(c, ns, &lim, 1, 1, 0, on_check, NULL), "acheck");
        WAIT(got == i + 1);
        CHECK_EQ(got_status, 0);
        CHECK_EQ(got_res.allowed, i < 2 ? 1 : 0);
    }
    CHECK(got_res.retry_after_ms > 59000 && got_res.retry_after_ms <= 60000);
    CHECK_EQ(sluice_limit_acheck(c, "bad ns", &lim, 1, 1, 0, on_check, NULL), SLUICE_EINVAL);
    sluice_aconn_close(c, NULL, NULL);
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
}

int main(void) {
    blocking(0);
    blocking(1);
    no_scripts_refused_twice();
    async_check();
    puts("test_limit: ok");
    return 0;
}
