/* SPDX-License-Identifier: MIT */
/*
 * test_limit_spec.c - the pure half of the limiter (common/src/limit_spec.c): algorithm names,
 * durations, "KEY=N/DURATION[~PRECISION]" for every algorithm, the SPEC each limit is sent as,
 * and the checks a set of limits passes before any call. Each bound is tried on both sides, and
 * each refusal's whole message is compared: it names the bad value. No network.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "limit_spec.h"
#include "sluice/limit.h"
#include "sluice/status.h"

static char err[512];

#define DAY_MS     86400000LL
#define PERIOD_MAX (366 * DAY_MS)

static void test_alg_names(void) {
    static const struct {
        const char *name;
        sluice_limit_alg alg;
    } algs[] = {{"gcra", SLUICE_LIMIT_GCRA},
                {"window", SLUICE_LIMIT_WINDOW},
                {"log", SLUICE_LIMIT_LOG},
                {"fixed", SLUICE_LIMIT_FIXED},
                {"gate", SLUICE_LIMIT_GATE}};
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
        sluice_limit_alg a = (sluice_limit_alg)99;
        CHECK_OK(sluice_limit_alg_parse(algs[i].name, &a), algs[i].name);
        CHECK_EQ(a, algs[i].alg);
        CHECK_STREQ(sluice_limit_alg_name(algs[i].alg), algs[i].name);
    }
    static const char *const bad[] = {"GCRA", "", "windows", "token", "gcra "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sluice_limit_alg a = SLUICE_LIMIT_LOG;
        CHECK_EQ(sluice_limit_alg_parse(bad[i], &a), SLUICE_EINVAL);
        CHECK_EQ(a, SLUICE_LIMIT_LOG); /* untouched */
    }
    sluice_limit_alg a = SLUICE_LIMIT_LOG;
    CHECK_EQ(sluice_limit_alg_parse(NULL, &a), SLUICE_EINVAL);
    CHECK_STREQ(sluice_limit_alg_name((sluice_limit_alg)5), "unknown");
    CHECK_STREQ(sluice_limit_alg_name((sluice_limit_alg)-1), "unknown");
}

static long long duration_ok(const char *s) {
    long long ms = -1;
    err[0] = '\0';
    CHECK_OK(sluice_duration_parse(s, strlen(s), &ms, err, sizeof(err)), err);
    return ms;
}

/* refused with exactly `msg`; *ms untouched */
static void duration_bad(const char *s, const char *msg) {
    long long ms = -7;
    err[0] = '\0';
    CHECK_EQ(sluice_duration_parse(s, strlen(s), &ms, err, sizeof(err)), SLUICE_EINVAL);
    CHECK_STREQ(err, msg);
    CHECK_EQ(ms, -7);
}

static void test_durations(void) {
    CHECK_EQ(duration_ok("1ms"), 1); /* the smallest */
    CHECK_EQ(duration_ok("ms"), 1);
    CHECK_EQ(duration_ok("s"), 1000);
    CHECK_EQ(duration_ok("m"), 60000);
    CHECK_EQ(duration_ok("h"), 3600000);
    CHECK_EQ(duration_ok("d"), DAY_MS);
    CHECK_EQ(duration_ok("10s"), 10000);
    CHECK_EQ(duration_ok("30m"), 1800000);
    CHECK_EQ(duration_ok("000000000001s"), 1000); /* 12 digits, the most */
    CHECK_EQ(duration_ok("366d"), PERIOD_MAX);    /* the largest, in each unit */
    CHECK_EQ(duration_ok("8784h"), PERIOD_MAX);
    CHECK_EQ(duration_ok("527040m"), PERIOD_MAX);
    CHECK_EQ(duration_ok("31622400s"), PERIOD_MAX);
    CHECK_EQ(duration_ok("31622400000ms"), PERIOD_MAX);
    /* only the first len bytes are read */
    long long ms = 0;
    CHECK_OK(sluice_duration_parse("5sxyz", 2, &ms, err, sizeof(err)), err);
    CHECK_EQ(ms, 5000);

    const char *range = "is out of range (1ms..366d)";
    char msg[256];
    static const char *const out[] = {"0ms",
                                      "0s",
                                      "0d",
                                      "367d",
                                      "8785h",
                                      "527041m",
                                      "31622401s",
                                      "31622400001ms",
                                      "999999999999d",
                                      "213503982335d",
                                      "999999999999s"};
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
        snprintf(msg, sizeof(msg), "duration '%s' %s", out[i], range);
        duration_bad(out[i], msg);
    }
    duration_bad("1234567890123s", "duration '1234567890123s' is too long");
    duration_bad("0000000000001s", "duration '0000000000001s' is too long");
    static const char *const unitless[] = {"10", "", "1.5s", "5sec", "5 s", "-5s", "5S", "1w"};
    for (size_t i = 0; i < sizeof(unitless) / sizeof(unitless[0]); i++) {
        snprintf(msg, sizeof(msg),
                 "duration '%s' needs a unit: ms, s, m, h or d (e.g. 500ms, 10s, 30m)",
                 unitless[i]);
        duration_bad(unitless[i], msg);
    }
}

static void test_duration_format(void) {
    static const struct {
        long long ms;
        const char *text;
    } cases[] = {{0, "0ms"},       {1, "1ms"},     {999, "999ms"},          {1000, "1s"},
                 {1001, "1001ms"}, {59000, "59s"}, {60000, "1m"},           {3600000, "1h"},
                 {5400000, "90m"}, {DAY_MS, "1d"}, {25 * 3600000LL, "25h"}, {PERIOD_MAX, "366d"}};
    char buf[32];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK_OK(sluice_duration_format(cases[i].ms, buf, sizeof(buf)), cases[i].text);
        CHECK_STREQ(buf, cases[i].text);
        if (cases[i].ms > 0) {
            CHECK_EQ(duration_ok(buf), cases[i].ms);
        }
    }
    CHECK_OK(sluice_duration_format(1000, buf, 3), "exactly room for \"1s\"");
    CHECK_STREQ(buf, "1s");
    CHECK_EQ(sluice_duration_format(1000, buf, 2), SLUICE_EINVAL);
    CHECK_EQ(sluice_duration_format(-1, buf, sizeof(buf)), SLUICE_EINVAL);
    CHECK_EQ(sluice_duration_format(1000, NULL, 8), SLUICE_EINVAL);
}

/* Parses spec with alg, checks every field and the SPEC it is sent as. */
static void limit_ok(const char *spec, sluice_limit_alg alg, long long count, long long period,
                     long long precision, const char *sent) {
    sluice_limit l;
    char buf[SLUICE__LIMIT_SPEC_MAX];
    err[0] = '\0';
    CHECK_OK(sluice_limit_parse(spec, alg, &l, err, sizeof(err)), err);
    CHECK(l.key == spec); /* borrowed from the spec */
    CHECK_EQ(l.keylen, strchr(spec, '=') - spec);
    CHECK_EQ(l.alg, alg);
    CHECK_EQ(l.count, count);
    CHECK_EQ(l.period_ms, period);
    CHECK_EQ(l.precision_ms, precision);
    CHECK_OK(sluice_limit_spec(&l, buf, sizeof(buf)), spec);
    CHECK_STREQ(buf, sent);
}

/* refused with exactly `msg`, and *out holds no limit (no key, no count) */
static void limit_bad(const char *spec, sluice_limit_alg alg, const char *msg) {
    sluice_limit l;
    memset(&l, 0x5a, sizeof(l));
    err[0] = '\0';
    CHECK_EQ(sluice_limit_parse(spec, alg, &l, err, sizeof(err)), SLUICE_EINVAL);
    CHECK_STREQ(err, msg);
    CHECK(l.key == NULL);
    CHECK_EQ(l.count, 0);
}

static void test_parse_each_algorithm(void) {
    limit_ok("api=5/1s", SLUICE_LIMIT_GCRA, 5, 1000, 0, "gcra:5:1000");
    limit_ok("api=5/s", SLUICE_LIMIT_GCRA, 5, 1000, 0, "gcra:5:1000");
    limit_ok("api=100/1m", SLUICE_LIMIT_LOG, 100, 60000, 0, "log:100:60000");
    limit_ok("api=100/1h", SLUICE_LIMIT_FIXED, 100, 3600000, 0, "fixed:100:3600000");
    limit_ok("api=10/1d", SLUICE_LIMIT_GATE, 10, DAY_MS, 0, "gate:10:86400000");
    /* window: precision period/60 by default, at least 1 ms; or ~PRECISION */
    limit_ok("api=240/1h", SLUICE_LIMIT_WINDOW, 240, 3600000, 0, "window:240:3600000:60000");
    limit_ok("api=5/59ms", SLUICE_LIMIT_WINDOW, 5, 59, 0, "window:5:59:1");
    limit_ok("api=5/120ms", SLUICE_LIMIT_WINDOW, 5, 120, 0, "window:5:120:2");
    limit_ok("api=60/1m~1s", SLUICE_LIMIT_WINDOW, 60, 60000, 1000, "window:60:60000:1000");
    limit_ok("api=60/1s~1s", SLUICE_LIMIT_WINDOW, 60, 1000, 1000, "window:60:1000:1000");
    limit_ok("api=60/1s~1ms", SLUICE_LIMIT_WINDOW, 60, 1000, 1, "window:60:1000:1"); /* 1000 */
    limit_ok("api=60/1001ms~2ms", SLUICE_LIMIT_WINDOW, 60, 1001, 2, "window:60:1001:2");
    /* the key is anything before the first '=', of 1..200 bytes */
    limit_ok("a:b/c=1/1s", SLUICE_LIMIT_GCRA, 1, 1000, 0, "gcra:1:1000");
}

static void test_parse_bounds(void) {
    char spec[512], msg[512];
    limit_ok("a=1/1ms", SLUICE_LIMIT_GCRA, 1, 1, 0, "gcra:1:1");
    limit_ok("a=1000000000/366d", SLUICE_LIMIT_LOG, 1000000000, PERIOD_MAX, 0,
             "log:1000000000:31622400000");
    limit_ok("a=007/1s", SLUICE_LIMIT_GATE, 7, 1000, 0, "gate:7:1000");
    memset(spec, 'k', SLUICE_LIMIT_KEY_MAX);
    snprintf(spec + SLUICE_LIMIT_KEY_MAX, sizeof(spec) - SLUICE_LIMIT_KEY_MAX, "=1/1s");
    limit_ok(spec, SLUICE_LIMIT_FIXED, 1, 1000, 0, "fixed:1:1000");

    memset(spec, 'k', SLUICE_LIMIT_KEY_MAX + 1);
    snprintf(spec + SLUICE_LIMIT_KEY_MAX + 1, sizeof(spec) - SLUICE_LIMIT_KEY_MAX - 1, "=1/1s");
    limit_bad(spec, SLUICE_LIMIT_GCRA,
              "limit key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...' is 201 bytes; at most 200");

    static const char *const counts[] = {
        "0", "1000000001", "99999999999999999999", "-1", "+5", " 5", "5 ", "x", "", "5.0", "0x10"};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        snprintf(spec, sizeof(spec), "api=%s/1s", counts[i]);
        snprintf(msg, sizeof(msg),
                 "rate '%s/1s' of limit 'api' is not N/DURATION with N in 1..1000000000",
                 counts[i]);
        limit_bad(spec, SLUICE_LIMIT_GCRA, msg);
    }
    limit_bad("api=5", SLUICE_LIMIT_GCRA,
              "rate '5' of limit 'api' is not N/DURATION with N in 1..1000000000");
    limit_bad("api=", SLUICE_LIMIT_GCRA,
              "rate '' of limit 'api' is not N/DURATION with N in 1..1000000000");
    limit_bad("a=1/0s", SLUICE_LIMIT_GCRA, "duration '0s' is out of range (1ms..366d)");
    limit_bad("a=1/367d", SLUICE_LIMIT_LOG, "duration '367d' is out of range (1ms..366d)");
    limit_bad("a=1/", SLUICE_LIMIT_GCRA,
              "duration '' needs a unit: ms, s, m, h or d (e.g. 500ms, 10s, 30m)");
    limit_bad("a=1/10", SLUICE_LIMIT_FIXED,
              "duration '10' needs a unit: ms, s, m, h or d (e.g. 500ms, 10s, 30m)");
    limit_bad("a=1/1s/2s", SLUICE_LIMIT_GCRA,
              "duration '1s/2s' needs a unit: ms, s, m, h or d (e.g. 500ms, 10s, 30m)");
}

static void test_parse_malformed(void) {
    limit_bad("api", SLUICE_LIMIT_GCRA, "limit 'api' is not KEY=RATE (e.g. api=5/1s)");
    limit_bad("", SLUICE_LIMIT_GCRA, "limit '' is not KEY=RATE (e.g. api=5/1s)");
    limit_bad("=5/1s", SLUICE_LIMIT_GCRA, "limit '=5/1s' is not KEY=RATE (e.g. api=5/1s)");
    limit_bad("api:5/1s", SLUICE_LIMIT_GCRA, "limit 'api:5/1s' is not KEY=RATE (e.g. api=5/1s)");
    limit_bad("k=v=1/1s", SLUICE_LIMIT_GCRA,
              "rate 'v=1/1s' of limit 'k' is not N/DURATION with N in 1..1000000000");
    /* ~PRECISION: the window algorithm's only, 1/1000 of the period up to the whole period */
    static const sluice_limit_alg others[] = {SLUICE_LIMIT_GCRA, SLUICE_LIMIT_LOG,
                                              SLUICE_LIMIT_FIXED, SLUICE_LIMIT_GATE};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        limit_bad("a=5/1m~1s", others[i],
                  "'~PRECISION' in 'a=5/1m~1s' is for the window algorithm only");
    }
    limit_bad("a=5/1s~1001ms", SLUICE_LIMIT_WINDOW,
              "precision in 'a=5/1s~1001ms' must be at most the period and at least 1/1000 of it");
    limit_bad("a=5/1001ms~1ms", SLUICE_LIMIT_WINDOW,
              "precision in 'a=5/1001ms~1ms' must be at most the period and at least 1/1000 of "
              "it");
    limit_bad("a=5/1m~0s", SLUICE_LIMIT_WINDOW, "duration '0s' is out of range (1ms..366d)");
    limit_bad("a=5/1m~", SLUICE_LIMIT_WINDOW,
              "duration '' needs a unit: ms, s, m, h or d (e.g. 500ms, 10s, 30m)");
    limit_bad("a=5/1m~1x", SLUICE_LIMIT_WINDOW,
              "duration '1x' needs a unit: ms, s, m, h or d (e.g. 500ms, 10s, 30m)");
}

/* A limit out of range in each field in turn: no key, an unknown algorithm, count, period and
 * precision each past a bound. */
static const sluice_limit bad_limits[] = {
    {NULL, 0, SLUICE_LIMIT_GCRA, 5, 1000, 0},
    {"b", 0, (sluice_limit_alg)5, 5, 1000, 0},
    {"b", 0, SLUICE_LIMIT_GCRA, 0, 1000, 0},
    {"b", 0, SLUICE_LIMIT_GCRA, SLUICE_LIMIT_COUNT_MAX + 1LL, 1000, 0},
    {"b", 0, SLUICE_LIMIT_GCRA, 5, 0, 0},
    {"b", 0, SLUICE_LIMIT_GCRA, 5, PERIOD_MAX + 1, 0},
    {"b", 0, SLUICE_LIMIT_WINDOW, 5, 1000, -1},
    {"b", 0, SLUICE_LIMIT_WINDOW, 5, 1000, 1001},
};

/* sluice_limit_spec refuses a limit out of range and a buffer too small */
static void test_spec(void) {
    sluice_limit l = {"k", 0, SLUICE_LIMIT_GCRA, 5, 1000, 0};
    char buf[SLUICE__LIMIT_SPEC_MAX];
    CHECK_OK(sluice_limit_spec(&l, buf, 12), "\"gcra:5:1000\" and its NUL");
    CHECK_STREQ(buf, "gcra:5:1000");
    CHECK_EQ(sluice_limit_spec(&l, buf, 11), SLUICE_EINVAL);
    /* the longest spec fits SLUICE__LIMIT_SPEC_MAX */
    sluice_limit w = {"k", 0, SLUICE_LIMIT_WINDOW, SLUICE_LIMIT_COUNT_MAX, PERIOD_MAX, PERIOD_MAX};
    CHECK_OK(sluice_limit_spec(&w, buf, sizeof(buf)), "");
    CHECK_STREQ(buf, "window:1000000000:31622400000:31622400000");
    for (size_t i = 0; i < sizeof(bad_limits) / sizeof(bad_limits[0]); i++) {
        strcpy(buf, "untouched");
        CHECK_EQ(sluice_limit_spec(&bad_limits[i], buf, sizeof(buf)), SLUICE_EINVAL);
        CHECK_STREQ(buf, "untouched");
    }
}

static int set_check(const sluice_limit *l, size_t n, long long weight) {
    err[0] = '\0';
    return sluice__limit_set_check(l, n, weight, err, sizeof(err));
}

static void set_bad(const sluice_limit *l, size_t n, long long weight, const char *msg) {
    CHECK_EQ(set_check(l, n, weight), SLUICE_EINVAL);
    CHECK_STREQ(err, msg);
}

static void test_set_sizes(void) {
    sluice_limit l[SLUICE_LIMIT_MAX + 1];
    char keys[SLUICE_LIMIT_MAX + 1][8];
    for (int i = 0; i <= SLUICE_LIMIT_MAX; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
        l[i] = (sluice_limit){keys[i], 0, SLUICE_LIMIT_GCRA, 5, 1000, 0};
    }
    CHECK_OK(set_check(l, 1, 1), err);
    CHECK_OK(set_check(l, SLUICE_LIMIT_MAX, 1), err);
    set_bad(l, 0, 1, "0 limits in one call; 1..32 allowed");
    set_bad(l, SLUICE_LIMIT_MAX + 1, 1, "33 limits in one call; 1..32 allowed");
    CHECK_OK(set_check(l, 1, SLUICE_LIMIT_COUNT_MAX), err); /* refused "never" by Redis */
    set_bad(l, 1, 0, "weight 0 is not in 1..1000000000");
    set_bad(l, 1, -3, "weight -3 is not in 1..1000000000");
    set_bad(l, 1, SLUICE_LIMIT_COUNT_MAX + 1LL, "weight 1000000001 is not in 1..1000000000");
}

static void test_set_log_units(void) {
    sluice_limit l[3] = {{"a", 0, SLUICE_LIMIT_LOG, 1000000, 3600000, 0},
                         {"b", 0, SLUICE_LIMIT_LOG, 1000000, 3600000, 0},
                         {"c", 0, SLUICE_LIMIT_GCRA, 1000000, 3600000, 0}};
    CHECK_OK(set_check(l, 1, 500), err);
    set_bad(l, 1, 501,
            "weight 501 in 1 log limit(s) is more than 500 units, the most one call counts in log "
            "limits (a sorted-set member each); use gcra or window for heavier requests");
    CHECK_OK(set_check(l, 3, 250), err);
    CHECK_EQ(set_check(l, 3, 251), SLUICE_EINVAL);
    CHECK(strstr(err, "weight 251 in 2 log limit(s) is more than 500 units") == err);
    /* a weight some limit never allows is answered "never" by the function: no log bound */
    l[2].count = 300;
    CHECK_OK(set_check(l, 3, 400), err);
}

static void test_set_each_limit(void) {
    char key[SLUICE_LIMIT_KEY_MAX + 2];
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    sluice_limit l[2] = {{"a", 0, SLUICE_LIMIT_GCRA, 5, 1000, 0},
                         {"b", 0, SLUICE_LIMIT_GCRA, 5, 1000, 0}};
    const char *fields = "limit 1: bad key, algorithm, count, period or precision";
    for (size_t i = 0; i < sizeof(bad_limits) / sizeof(bad_limits[0]); i++) {
        l[1] = bad_limits[i];
        set_bad(l, 2, 1, fields);
    }
    /* the key: 1..SLUICE_LIMIT_KEY_MAX bytes, keylen or up to the NUL */
    l[1] = (sluice_limit){"", 0, SLUICE_LIMIT_GCRA, 5, 1000, 0};
    set_bad(l, 2, 1, "limit 1: the key is empty or longer than 200 bytes");
    l[1].key = key;
    set_bad(l, 2, 1, "limit 1: the key is empty or longer than 200 bytes");
    l[1].keylen = SLUICE_LIMIT_KEY_MAX;
    CHECK_OK(set_check(l, 2, 1), err);
    l[1].keylen = SLUICE_LIMIT_KEY_MAX + 1;
    set_bad(l, 2, 1, "limit 1: the key is empty or longer than 200 bytes");
}

static void test_set_repeated_keys(void) {
    const char *twice = "limit key 'a' is given twice; only window limits of different period or "
                        "precision may share a key";
    sluice_limit l[3] = {{"a", 0, SLUICE_LIMIT_GCRA, 5, 1000, 0},
                         {"b", 0, SLUICE_LIMIT_GCRA, 5, 1000, 0},
                         {"a", 0, SLUICE_LIMIT_LOG, 9, 60000, 0}};
    set_bad(l, 3, 1, twice);
    l[2].key = "ab"; /* the first keylen bytes are the key */
    l[2].keylen = 1;
    set_bad(l, 3, 1, twice);
    l[2].keylen = 2;
    CHECK_OK(set_check(l, 3, 1), err);
    /* window limits share a key when period or precision differ */
    l[0] = (sluice_limit){"a", 0, SLUICE_LIMIT_WINDOW, 5, 60000, 0};
    l[1] = (sluice_limit){"a", 0, SLUICE_LIMIT_WINDOW, 5, 3600000, 0};
    l[2] = (sluice_limit){"a", 0, SLUICE_LIMIT_WINDOW, 9, 60000, 2000};
    CHECK_OK(set_check(l, 3, 1), err);
    l[2].precision_ms = 1000; /* 60000 / 60: the default precision of l[0] */
    set_bad(l, 3, 1, twice);
    l[2] = (sluice_limit){"a", 0, SLUICE_LIMIT_GCRA, 9, 7000, 0}; /* not a window */
    set_bad(l, 3, 1, twice);
}

int main(void) {
    test_alg_names();
    test_durations();
    test_duration_format();
    test_parse_each_algorithm();
    test_parse_bounds();
    test_parse_malformed();
    test_spec();
    test_set_sizes();
    test_set_log_units();
    test_set_each_limit();
    test_set_repeated_keys();
    printf("test_limit_spec: ok\n");
    return 0;
}
