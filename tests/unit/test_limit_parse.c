/* SPDX-License-Identifier: MIT */
/*
 * test_limit_parse.c - what the standalone limiter refuses before any Redis call: durations out
 * of range (however many digits), a key given twice, log limits heavier than one call may
 * count; durations written back as they are read; the state key of a queue's limit. No
 * network: a limiter connects only when a call passes these checks.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sluice/limit.h"
#include "sluice/queue.h"
#include "sluice/status.h"

static char err[256];

static long long duration_ok(const char *s) {
    long long ms = -1;
    err[0] = '\0';
    CHECK_OK(sluice_duration_parse(s, strlen(s), &ms, err, sizeof(err)), err);
    return ms;
}

/* refused with a message naming the value and the range */
static void duration_bad(const char *s) {
    long long ms = -7;
    err[0] = '\0';
    CHECK_EQ(sluice_duration_parse(s, strlen(s), &ms, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, s) != NULL);
    CHECK_EQ(ms, -7);
}

static void test_duration(void) {
    CHECK_EQ(duration_ok("500ms"), 500);
    CHECK_EQ(duration_ok("s"), 1000);
    CHECK_EQ(duration_ok("366d"), 366LL * 86400000);
    CHECK_EQ(duration_ok("8784h"), 366LL * 86400000);
    CHECK_EQ(duration_ok("31622400000ms"), 31622400000LL);
    /* n * unit overflowed a long long and wrapped into range: 213503982335 d is 9.6 h */
    duration_bad("213503982335d");
    duration_bad("999999999999d");
    duration_bad("999999999999h");
    duration_bad("999999999999m");
    duration_bad("999999999999s");
    duration_bad("367d");
    duration_bad("0s");
    duration_bad("1234567890123d"); /* more than 12 digits */
    CHECK(strstr(err, "too long") != NULL);
    duration_bad("213503982335d");
    CHECK(strstr(err, "out of range (1ms..366d)") != NULL);
}

static void test_duration_format(void) {
    static const struct {
        long long ms;
        const char *text;
    } cases[] = {{1800000, "30m"}, {90000, "90s"},   {1500, "1500ms"},
                 {3600000, "1h"},  {86400000, "1d"}, {90000000, "25h"},
                 {1, "1ms"},       {0, "0ms"},       {31622400000, "366d"}};
    char buf[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK_OK(sluice_duration_format(cases[i].ms, buf, sizeof(buf)), "");
        CHECK_STREQ(buf, cases[i].text);
        if (cases[i].ms > 0) {
            CHECK_EQ(duration_ok(buf), cases[i].ms); /* read back as written */
        }
    }
    CHECK_EQ(sluice_duration_format(-1, buf, sizeof(buf)), SLUICE_EINVAL);
    CHECK_EQ(sluice_duration_format(1800000, buf, 3), SLUICE_EINVAL);
}

/* sluice_limiter_check's refusals before any call (the URL's server is never asked) */
static void test_refused_before_redis(void) {
    sluice_limiter_options o;
    sluice_limiter *l;
    sluice_limit lim[3];
    sluice_limit_result res;
    sluice_limiter_options_init(&o);
    o.ns = "ns";
    o.redis_url = "redis://127.0.0.1:1";
    CHECK_OK(sluice_limiter_new(&o, &l, err, sizeof(err)), err);
    CHECK_OK(sluice_limit_parse("a=5/1s", SLUICE_LIMIT_GCRA, &lim[0], err, sizeof(err)), err);
    CHECK_OK(sluice_limit_parse("b=5/1m", SLUICE_LIMIT_GCRA, &lim[1], err, sizeof(err)), err);
    CHECK_OK(sluice_limit_parse("a=9/1h", SLUICE_LIMIT_GCRA, &lim[2], err, sizeof(err)), err);
    CHECK_EQ(sluice_limiter_check(l, lim, 3, 1, &res), SLUICE_EINVAL);
    CHECK(strstr(sluice_limiter_errstr(l), "limit key 'a' is given twice") != NULL);
    /* window limits of other periods or precisions share a key; the same one does not */
    CHECK_OK(sluice_limit_parse("a=5/1s", SLUICE_LIMIT_WINDOW, &lim[0], err, sizeof(err)), err);
    CHECK_OK(sluice_limit_parse("a=5/1m", SLUICE_LIMIT_WINDOW, &lim[1], err, sizeof(err)), err);
    CHECK_OK(sluice_limit_parse("a=9/1m~1s", SLUICE_LIMIT_WINDOW, &lim[2], err, sizeof(err)), err);
    CHECK_EQ(sluice_limiter_check(l, lim, 3, 1, &res), SLUICE_EINVAL);
    CHECK(strstr(sluice_limiter_errstr(l), "limit key 'a' is given twice") != NULL);
    /* log limits: at most SLUICE_LIMIT_LOG_UNITS_MAX units a call, weight x log limits */
    CHECK_OK(sluice_limit_parse("a=1000000/1h", SLUICE_LIMIT_LOG, &lim[0], err, sizeof(err)), err);
    CHECK_OK(sluice_limit_parse("b=1000000/1h", SLUICE_LIMIT_LOG, &lim[1], err, sizeof(err)), err);
    CHECK_EQ(sluice_limiter_check(l, lim, 1, SLUICE_LIMIT_LOG_UNITS_MAX + 1, &res), SLUICE_EINVAL);
    CHECK(strstr(sluice_limiter_errstr(l), "weight 501 in 1 log limit(s) is more than 500") !=
          NULL);
    CHECK_EQ(sluice_limiter_check(l, lim, 2, 251, &res), SLUICE_EINVAL);
    CHECK(strstr(sluice_limiter_errstr(l), "weight 251 in 2 log limit(s)") != NULL);
    sluice_limiter_free(l);
}

static void test_queue_limit_key(void) {
    sluice_keys k;
    char buf[SLUICE_KEY_MAX + 64];
    CHECK_OK(sluice_keys_init(&k, "orders", err, sizeof(err)), err);
    CHECK_OK(sluice_key_queue_limit(&k, "per-t", "gcra", "acme", 4, buf, sizeof(buf)), "");
    CHECK_STREQ(buf, "sluice:{orders}:qlim:per-t:gcra:acme");
    CHECK_OK(sluice_key_queue_limit(&k, "all", "log", NULL, 0, buf, sizeof(buf)), "");
    CHECK_STREQ(buf, "sluice:{orders}:qlim:all:log:");
    /* never the standalone limiter's sluice:{NS}:lim:KEY, whatever KEY */
    CHECK_OK(sluice_key_limit(&k, "all:log:", 8, buf, sizeof(buf)), "");
    CHECK_STREQ(buf, "sluice:{orders}:lim:all:log:");
    CHECK_EQ(sluice_key_queue_limit(&k, "x", "gcra", "a\0b", 3, buf, sizeof(buf)), SLUICE_EINVAL);
    CHECK_EQ(sluice_key_queue_limit(&k, "x", "gcra", "abc", 3, buf, 20), SLUICE_EINVAL);
}

int main(void) {
    test_duration();
    test_duration_format();
    test_refused_before_redis();
    test_queue_limit_key();
    printf("test_limit_parse: ok\n");
    return 0;
}
