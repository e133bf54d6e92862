/* SPDX-License-Identifier: MIT */
/*
 * test_reply.c - the pure modules between the wire and the meaning: reply helpers
 * (sluice/reply.h), the queue figures (sluice/figures.h), what a connection does after the
 * library probe and how the loader cuts the library for EVALSHA mode (sluice/lua.h), the
 * reconnect backoff, and building and reading the admission call (producer/src/admit.h).
 * Replies are made by hiredis' own reader from RESP text, as they arrive from a server.
 */
#include <stdarg.h>

#include "harness.h"

#include "admit.h"
#include "conn_internal.h"
#include "sluice/figures.h"
#include "sluice/lua.h"
#include "sluice/reply.h"
#include "sluice/status.h"

static void test_reply_helpers(void) {
    redisReply *r = th_resp(":5\r\n");
    CHECK_EQ(sluice_reply_ll(r, -1), 5);
    freeReplyObject(r);
    r = th_resp("$2\r\n12\r\n");
    CHECK_EQ(sluice_reply_ll(r, -1), 12);
    freeReplyObject(r);
    r = th_resp("$5\r\n12abc\r\n");
    CHECK_EQ(sluice_reply_ll(r, -1), -1);
    freeReplyObject(r);
    r = th_resp("$-1\r\n");
    CHECK_EQ(sluice_reply_ll(r, 7), 7);
    freeReplyObject(r);
    CHECK_EQ(sluice_reply_ll(NULL, 3), 3);

    r = th_resp("*4\r\n$4\r\nname\r\n$1\r\na\r\n$7\r\npending\r\n:3\r\n");
    CHECK_EQ(sluice_reply_ll(sluice_reply_field(r, "pending"), -1), 3);
    CHECK_STREQ(sluice_reply_field(r, "name")->str, "a");
    CHECK(sluice_reply_field(r, "idle") == NULL);
    CHECK(sluice_reply_field(NULL, "x") == NULL);
    freeReplyObject(r);

    /* a stream entry [id, [field, value, ...]]: string values only */
    r = th_resp("*2\r\n$3\r\n1-0\r\n*4\r\n$6\r\nreason\r\n$4\r\nboom\r\n$1\r\nn\r\n:5\r\n");
    CHECK_STREQ(sluice_reply_entry_field(r, "reason")->str, "boom");
    CHECK(sluice_reply_entry_field(r, "n") == NULL);
    CHECK(sluice_reply_entry_field(r, "consumer") == NULL);
    CHECK(sluice_reply_entry_field(r->element[1], "reason") == NULL); /* not an entry */
    CHECK(sluice_reply_entry_field(NULL, "reason") == NULL);
    freeReplyObject(r);

    /* the reply of sluice_replay: six integers, then one outcome 0..3 per id */
    r = th_resp("*7\r\n:1\r\n:1\r\n:0\r\n:0\r\n:5\r\n:5\r\n*2\r\n:0\r\n:1\r\n");
    CHECK(sluice_reply_replay_ok(r, 2));
    CHECK(!sluice_reply_replay_ok(r, 3));
    freeReplyObject(r);
    r = th_resp("*7\r\n:1\r\n:1\r\n:0\r\n:0\r\n:5\r\n:5\r\n*2\r\n:0\r\n:4\r\n");
    CHECK(!sluice_reply_replay_ok(r, 2)); /* no outcome 4 */
    freeReplyObject(r);
    CHECK(!sluice_reply_replay_ok(NULL, 0));

    static const struct {
        const char *text;
        int status;
    } errs[] = {
        {"NOPERM this user has no permissions", SLUICE_ENOPERM},
        {"ERR Function not found", SLUICE_ENOSCRIPT},
        {"NOSCRIPT No matching script", SLUICE_ENOSCRIPT},
        {"SLUICECONFIG invalid capacity", SLUICE_ECONFIG},
        {"OOM command not allowed", SLUICE_EOOM},
        {"ERR The user executing the script can't run this command", SLUICE_ENOPERM},
        {"ERR something else", SLUICE_EREDIS},
        {"TRYAGAIN Multiple keys request during rehashing of slot", SLUICE_EMIGRATING},
        {"ASK 3999 127.0.0.1:7001", SLUICE_EMIGRATING},
    };
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        CHECK_EQ(sluice_reply_error_status(errs[i].text, strlen(errs[i].text)), errs[i].status);
    }
    r = th_resp("-ERR unknown command 'FCALL', with args beginning with:\r\n");
    CHECK(sluice_reply_unknown_command(r));
    freeReplyObject(r);
    r = th_resp("-ERR Function not found\r\n");
    CHECK(!sluice_reply_unknown_command(r));
    freeReplyObject(r);
}

static void test_lua(void) {
    size_t len = 0;
    const char *lib = sluice_lua_library(&len);
    const char *v = sluice_lua_version();
    CHECK(strncmp(lib, "#!lua name=sluice\n", 18) == 0 && len == strlen(lib));
    CHECK(strncmp(v, "1:", 2) == 0 && strlen(v) > 2);
    CHECK(strstr(lib, v) != NULL);

    /* EVALSHA mode: the text above the marker, no shebang, no registration, one return */
    char *s = sluice_lua_script(SLUICE_FN_ADMIT, &len);
    CHECK(s != NULL && len == strlen(s));
    CHECK(strncmp(s, "#!", 2) != 0 && strstr(s, "#!lua") == NULL);
    CHECK(strstr(s, "register_function") == NULL);
    CHECK(strstr(s, "local function admit(") != NULL);
    const char *tail = "\nreturn entry(admit)(KEYS, ARGV)\n";
    CHECK(len > strlen(tail) && strcmp(s + len - strlen(tail), tail) == 0);
    free(s);
    s = sluice_lua_script(SLUICE_FN_LIST_ACK, NULL);
    CHECK(s != NULL && strstr(s, "\nreturn entry(list_ack)(KEYS, ARGV)\n") != NULL);
    free(s);
    CHECK(sluice_lua_script(SLUICE_FN_COUNT_, NULL) == NULL);
    /* each function's EVALSHA script returns the local its registration names */
    for (int fn = 0; fn < SLUICE_FN_COUNT_; fn++) {
        char *one = sluice_lua_script((sluice_fn)fn, NULL);
        char local[64] = "", reg[160], reg2[160];
        const char *ret = one != NULL ? strstr(one, "\nreturn entry(") : NULL;
        CHECK(ret != NULL && sscanf(ret, "\nreturn entry(%63[a-z_0-9])(", local) == 1);
        snprintf(reg, sizeof(reg), "'%s', %s)", sluice_fn_name((sluice_fn)fn), local);
        snprintf(reg2, sizeof(reg2), "function_name = '%s', callback = %s,",
                 sluice_fn_name((sluice_fn)fn), local);
        if (strstr(lib, reg) == NULL && strstr(lib, reg2) == NULL) {
            fprintf(stderr, "%s: the EVALSHA script returns %s, not the registered function\n",
                    sluice_fn_name((sluice_fn)fn), local);
            CHECK(0);
        }
        free(one);
    }

    /* the decision after FCALL sluice_version, one rule for both connections */
    char cur[128], old[] = "$8\r\n1:000000\r\n";
    snprintf(cur, sizeof(cur), "$%zu\r\n%s\r\n", strlen(v), v);
    redisReply *r = th_resp(cur);
    CHECK_EQ(sluice_lua_probe(0, r, 0), SLUICE_LUA_USE);
    freeReplyObject(r);
    r = th_resp(old);
    CHECK_EQ(sluice_lua_probe(0, r, 0), SLUICE_LUA_LOAD); /* another build's library */
    CHECK_EQ(sluice_lua_probe(0, r, 1), SLUICE_LUA_USE);  /* may not load: use it */
    freeReplyObject(r);
    r = th_resp("-ERR Function not found\r\n");
    CHECK_EQ(sluice_lua_probe(SLUICE_ENOSCRIPT, r, 0), SLUICE_LUA_LOAD);
    freeReplyObject(r);
    r = th_resp("-NOPERM no permissions to run the 'fcall' command\r\n");
    CHECK_EQ(sluice_lua_probe(SLUICE_ENOPERM, r, 0), SLUICE_LUA_USE);
    freeReplyObject(r);
    r = th_resp("-ERR unknown command 'FCALL'\r\n");
    CHECK_EQ(sluice_lua_probe(SLUICE_EREDIS, r, 0), SLUICE_LUA_EVAL);
    freeReplyObject(r);
    r = th_resp("-LOADING Redis is loading the dataset in memory\r\n");
    CHECK_EQ(sluice_lua_probe(SLUICE_ELOADING, r, 0), SLUICE_LUA_FAIL);
    freeReplyObject(r);
    CHECK_EQ(sluice_lua_probe(SLUICE_ECONN, NULL, 0), SLUICE_LUA_FAIL);
}

/* Parses RESP replies 0..n-1 into f; returns the first failure. */
static int parse_all(sluice_figures *f, sluice_backend b, const char *group, size_t n, ...) {
    va_list ap;
    int st = 0;
    sluice_figures_init(f);
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) {
        redisReply *r = th_resp(va_arg(ap, const char *));
        int s = sluice_figures_parse(f, b, group, i, r);
        st = st ? st : s;
        freeReplyObject(r);
    }
    va_end(ap);
    sluice_figures_finish(f, b);
    return st;
}

/* One group of XINFO GROUPS: name, consumers, pending (Redis sends more fields). */
#define GROUP(namelen, name, consumers, pending)                                                   \
    "*6\r\n$4\r\nname\r\n$" namelen "\r\n" name "\r\n$9\r\nconsumers\r\n:" consumers               \
    "\r\n$7\r\npending\r\n:" pending "\r\n"

static void test_figures(void) {
    sluice_keys k;
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS];
    sluice_figures f;
    CHECK_EQ(sluice_keys_init(&k, "fig", NULL, 0), 0);

    size_t n = sluice_figures_commands(&k, SLUICE_BACKEND_STREAM, cmds);
    CHECK_EQ(n, 6);
    CHECK_STREQ(cmds[5].argv[0], "HMGET");
    CHECK_STREQ(cmds[5].argv[2], "lane_depth");
    CHECK_STREQ(cmds[0].argv[0], "XLEN");
    CHECK_STREQ(cmds[0].argv[1], "sluice:{fig}:stream");
    CHECK_STREQ(cmds[2].argv[0], "XINFO");
    CHECK_STREQ(cmds[4].argv[0], "HMGET");
    CHECK_EQ(cmds[4].argc, 2 + SLUICE_COUNTER_COUNT_);
    CHECK_STREQ(cmds[4].argv[2 + SLUICE_COUNTER_ACKED], "acked");

    const char *stats =
        "*7\r\n$2\r\n20\r\n$1\r\n4\r\n$2\r\n12\r\n$-1\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n";
    /* two groups: the named one is reported; NULL sums them */
    const char *groups = "*2\r\n" GROUP("7", "workers", "2", "3") GROUP("5", "other", "1", "5");
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, "workers", 5, ":10\r\n", "$3\r\n100\r\n", groups,
                       ":1\r\n", stats),
             0);
    CHECK_EQ(f.depth, 10);
    CHECK_EQ(f.capacity, 100);
    CHECK_EQ(f.in_flight, 3);
    CHECK_EQ(f.waiting, 7);
    CHECK_EQ(f.consumers, 2);
    CHECK_EQ(f.dead, 1);
    CHECK(f.group_exists);
    CHECK_EQ(f.counters[SLUICE_COUNTER_ADMITTED], 20);
    CHECK_EQ(f.counters[SLUICE_COUNTER_ACKED], 12);
    CHECK_EQ(f.counters[SLUICE_COUNTER_RETRIED], 0);
    CHECK_EQ(f.counters[SLUICE_COUNTER_LIMITED], 3);
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, NULL, 3, ":10\r\n", "$-1\r\n", groups), 0);
    CHECK_EQ(f.in_flight, 8);
    CHECK_EQ(f.consumers, 3);
    CHECK_EQ(f.waiting, 2);
    CHECK_EQ(f.capacity, SLUICE_FIGURE_UNSET);
    /* a fair queue: its tenant lanes hold 30 entries, 4 of them delivered */
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, "workers", 6, ":10\r\n", "$3\r\n100\r\n", groups,
                       ":1\r\n", stats, "*2\r\n$2\r\n30\r\n$2\r\n26\r\n"),
             0);
    CHECK_EQ(f.depth, 40);
    CHECK_EQ(f.in_flight, 7);
    CHECK_EQ(f.waiting, 33);
    /* its stream apart from the lanes (sluice-admin fair's lane ''): 10, 3 of them delivered */
    long long sdepth = -1, swaiting = -1;
    sluice_figures_stream_lane(&f, &sdepth, &swaiting);
    CHECK_EQ(sdepth, 10);
    CHECK_EQ(swaiting, 7);
    /* the same replies arriving together (an EXEC array) read the same */
    const char *fair_replies[] = {":10\r\n", "$3\r\n100\r\n", groups,
                                  ":1\r\n",  stats,           "*2\r\n$2\r\n30\r\n$2\r\n26\r\n"};
    redisReply *rs[6];
    for (size_t i = 0; i < 6; i++) {
        rs[i] = th_resp(fair_replies[i]);
    }
    sluice_figures g, sum;
    size_t bad = 99;
    CHECK_EQ(sluice_figures_read(&g, SLUICE_BACKEND_STREAM, "workers", rs, 6, &bad), 0);
    CHECK_EQ(bad, 99);
    CHECK_EQ(g.depth, 40);
    CHECK_EQ(g.in_flight, 7);
    CHECK_EQ(g.waiting, 33);
    CHECK_EQ(g.counters[SLUICE_COUNTER_ACKED], 12);
    /* partitions add up; a capacity not set in one leaves the sum unset */
    memset(&sum, 0, sizeof(sum));
    sluice_figures_add(&sum, &f);
    sluice_figures_add(&sum, &g);
    CHECK_EQ(sum.depth, 80);
    CHECK_EQ(sum.waiting, 66);
    CHECK_EQ(sum.in_flight, 14);
    CHECK_EQ(sum.dead, 2);
    CHECK_EQ(sum.capacity, 200);
    CHECK_EQ(sum.counters[SLUICE_COUNTER_ADMITTED], 40);
    g.capacity = SLUICE_FIGURE_UNSET;
    sluice_figures_add(&sum, &g);
    CHECK_EQ(sum.capacity, SLUICE_FIGURE_UNSET);
    /* a bad reply is named by its index; the others are still read */
    freeReplyObject(rs[3]);
    rs[3] = th_resp("*0\r\n");
    CHECK_EQ(sluice_figures_read(&g, SLUICE_BACKEND_STREAM, "workers", rs, 6, &bad), SLUICE_EPROTO);
    CHECK_EQ(bad, 3);
    CHECK_EQ(g.depth, 40);
    for (size_t i = 0; i < 6; i++) {
        freeReplyObject(rs[i]);
    }
    /* not fair: both fields absent */
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, "workers", 6, ":10\r\n", "$3\r\n100\r\n", groups,
                       ":1\r\n", stats, "*2\r\n$-1\r\n$-1\r\n"),
             0);
    CHECK_EQ(f.depth, 10);
    CHECK_EQ(f.waiting, 7);
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, NULL, 6, ":10\r\n", "$-1\r\n", groups, ":1\r\n",
                       stats, ":3\r\n"),
             SLUICE_EPROTO);

    /* capacity and paused come in one HMGET of meta; a partitioned sum counts the paused */
    CHECK_STREQ(cmds[1].argv[0], "HMGET");
    CHECK_STREQ(cmds[1].argv[3], "paused");
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, "workers", 2, ":10\r\n",
                       "*2\r\n$2\r\n50\r\n$1\r\n1\r\n"),
             0);
    CHECK_EQ(f.capacity, 50);
    CHECK_EQ(f.paused, 1);
    memset(&sum, 0, sizeof(sum));
    sluice_figures_add(&sum, &f);
    sluice_figures_add(&sum, &f);
    CHECK_EQ(sum.paused, 2);
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, "workers", 2, ":10\r\n", "*2\r\n$-1\r\n$-1\r\n"),
             0);
    CHECK_EQ(f.capacity, SLUICE_FIGURE_UNSET);
    CHECK_EQ(f.paused, 0);
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, "workers", 2, ":10\r\n", "*1\r\n$-1\r\n"),
             SLUICE_EPROTO);

    /* nothing admitted yet: no stream, an empty queue, not an error */
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, "workers", 3, ":0\r\n", "$3\r\n2.5\r\n",
                       "-ERR no such key\r\n"),
             0);
    CHECK(!f.group_exists);
    CHECK_EQ(f.capacity, SLUICE_FIGURE_INVALID);
    /* a wrong shape or another error is reported */
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, NULL, 1, "*0\r\n"), SLUICE_EPROTO);
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_STREAM, NULL, 1, "-NOPERM no\r\n"), SLUICE_ENOPERM);

    n = sluice_figures_commands(&k, SLUICE_BACKEND_LIST, cmds);
    CHECK_EQ(n, 6);
    CHECK_STREQ(cmds[0].argv[2], "list_depth");
    CHECK_STREQ(cmds[2].argv[0], "LLEN");
    CHECK_STREQ(cmds[5].argv[0], "SCARD");
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_LIST, NULL, 6, "$1\r\n9\r\n", "$-1\r\n", ":4\r\n",
                       ":0\r\n", stats, ":2\r\n"),
             0);
    CHECK_EQ(f.depth, 9);
    CHECK_EQ(f.waiting, 4);
    CHECK_EQ(f.in_flight, 5);
    CHECK_EQ(f.consumers, 2);
    /* foreign elements in the list never make in_flight negative */
    CHECK_EQ(parse_all(&f, SLUICE_BACKEND_LIST, NULL, 3, "$1\r\n2\r\n", "$-1\r\n", ":4\r\n"), 0);
    CHECK_EQ(f.in_flight, 0);
}

static void test_backoff(void) {
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.backoff_min_ms = 100;
    o.backoff_max_ms = 5000;
    unsigned seed = 42;
    for (int round = 0; round < 50; round++) {
        int d1 = sluice__backoff_ms(&o, 1, &seed);
        int d3 = sluice__backoff_ms(&o, 3, &seed);
        int d40 = sluice__backoff_ms(&o, 40, &seed);
        CHECK(d1 >= 50 && d1 <= 100);
        CHECK(d3 >= 200 && d3 <= 400);
        CHECK(d40 >= 2500 && d40 <= 5000); /* capped, no overflow however many attempts */
    }
    /* jitter: two clients with different seeds do not reconnect in lockstep */
    unsigned s1 = 1, s2 = 2;
    int same = 0;
    for (int i = 0; i < 20; i++) {
        same += sluice__backoff_ms(&o, 10, &s1) == sluice__backoff_ms(&o, 10, &s2);
    }
    CHECK(same < 20);
}

static void test_admit_call(void) {
    sluice_producer_options po;
    sluice_producer_options_init(&po);
    po.queue = "adm";
    sluice__admit_cfg cfg;
    char err[256];
    CHECK_EQ(sluice__admit_cfg_init(&cfg, &po, err, sizeof(err)), 0);
    CHECK_EQ(cfg.capacity, 1000);

    sluice_message m[2] = {{"a", 1, NULL, 0, "t1", NULL, NULL},
                           {"bc", 2, NULL, 0, NULL, NULL, NULL}};
    sluice__admit_call call;
    CHECK_EQ(sluice__admit_call_build(&call, &cfg, m, 2, err, sizeof(err)), 0);
    CHECK_EQ(call.fn, SLUICE_FN_ADMIT2);
    CHECK_EQ(call.nkeys, 3);
    CHECK_STREQ(call.keys[0], "sluice:{adm}:stream");
    CHECK_EQ(call.nargs, 3 + 3 * 2); /* capacity, TTL, stride 3: tenant, client, envelope each */
    CHECK_STREQ(call.args[0], "1000");
    CHECK_STREQ(call.args[2], "3");
    CHECK_STREQ(call.args[3], "t1");
    CHECK_EQ(call.arglens[4], 0); /* no client key */
    CHECK_EQ(call.arglens[6], 0); /* no tenant */
    CHECK(call.arglens[5] > 1 && call.arglens[8] > 2);
    sluice__admit_call_free(&call);

    /* no tenant, no client in the batch: the short form, envelopes only (stride 1) */
    sluice_message plain[2] = {{"a", 1, NULL, 0, NULL, NULL, NULL},
                               {"bc", 2, NULL, 0, NULL, NULL, NULL}};
    CHECK_EQ(sluice__admit_call_build(&call, &cfg, plain, 2, err, sizeof(err)), 0);
    CHECK_EQ(call.nargs, 3 + 2);
    CHECK_STREQ(call.args[2], "1");
    CHECK(call.arglens[3] > 1 && call.arglens[4] > 2);
    sluice__admit_call_free(&call);

    /* an idempotency key: the fourth key, built by queue.c; not in batches; 1..200 bytes */
    m[0].idempotency_key = "order-7";
    CHECK_EQ(sluice__admit_call_build(&call, &cfg, m, 1, err, sizeof(err)), 0);
    CHECK_EQ(call.nkeys, 4);
    CHECK_STREQ(call.keys[3], "sluice:{adm}:idem:order-7");
    sluice__admit_call_free(&call);
    CHECK_EQ(sluice__admit_call_build(&call, &cfg, m, 2, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "batches") != NULL);
    char longkey[SLUICE_IDEMPOTENCY_KEY_MAX + 2];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    m[0].idempotency_key = longkey;
    CHECK_EQ(sluice__admit_check_msg(&cfg, &m[0], err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "201 bytes") != NULL);
    longkey[SLUICE_IDEMPOTENCY_KEY_MAX] = '\0';
    CHECK_EQ(sluice__admit_check_msg(&cfg, &m[0], err, sizeof(err)), 0);
    m[0].idempotency_key = NULL;
    CHECK_EQ(sluice__admit_call_build(&call, &cfg, m, 0, err, sizeof(err)), SLUICE_EINVAL);

    /* the reply: {taken, depth, capacity, duplicate, acked, outcome per message} */
    sluice_drain d;
    sluice_drain_init(&d);
    sluice_admit_result res[2];
    size_t admitted = 0;
    redisReply *r = th_resp("*7\r\n:1\r\n:10\r\n:10\r\n:0\r\n:5\r\n$3\r\n1-1\r\n:0\r\n");
    CHECK_EQ(sluice__admit_parse(r, 2, &d, 1000, res, &admitted), 0);
    CHECK_EQ(admitted, 1);
    CHECK_EQ(res[0].outcome, SLUICE_ADMITTED);
    CHECK_STREQ(res[0].id, "1-1");
    CHECK_EQ(res[1].outcome, SLUICE_FULL);
    CHECK_EQ(res[1].depth, 10);
    CHECK(res[1].retry_after_s >= 1);
    freeReplyObject(r);
    /* limited by "per-tenant" (3 per 10 s): the exact retry-after and the rate come back */
    r = th_resp("*7\r\n:1\r\n:4\r\n:10\r\n:0\r\n:-1\r\n"
                "*4\r\n$10\r\nper-tenant\r\n:2501\r\n:3\r\n:10000\r\n$3\r\n2-1\r\n");
    CHECK_EQ(sluice__admit_parse(r, 2, &d, 1000, res, &admitted), 0);
    CHECK_EQ(admitted, 1);
    CHECK_EQ(res[0].outcome, SLUICE_LIMITED);
    CHECK_STREQ(res[0].limit, "per-tenant");
    CHECK_EQ(res[0].retry_after_ms, 2501);
    CHECK_EQ(res[0].retry_after_s, 3);
    CHECK_EQ(res[0].limit_count, 3);
    CHECK_EQ(res[0].limit_period_ms, 10000);
    CHECK_EQ(res[1].outcome, SLUICE_ADMITTED);
    CHECK_STREQ(res[1].id, "2-1");
    freeReplyObject(r);
    r = th_resp("*6\r\n:2\r\n:10\r\n:10\r\n:0\r\n:5\r\n$3\r\n1-1\r\n"); /* one outcome short */
    CHECK_EQ(sluice__admit_parse(r, 2, &d, 1000, res, &admitted), SLUICE_EPROTO);
    freeReplyObject(r);
}

int main(void) {
    test_reply_helpers();
    test_lua();
    test_figures();
    test_backoff();
    test_admit_call();
    puts("test_reply: ok");
    return 0;
}
