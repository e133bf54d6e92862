/* SPDX-License-Identifier: MIT */
/*
 * test_url.c - Redis URL parsing and redaction: every accepted form, and the malformed URLs of
 * docs/faults.md B11, each refused with a message naming the bad part and never the password;
 * the TLS (rediss://) and Sentinel (redis+sentinel://) forms and that this build refuses to
 * connect to them yet. No network.
 */
#include <stdlib.h>

#include "harness.h"
#include "sluice/client.h"
#include "sluice/status.h"
#include "sluice/url.h"

static char err[512];

static sluice_url parse_ok_at(int line, const char *s) {
    sluice_url u;
    err[0] = '\0';
    if (sluice_url_parse(&u, s, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s:%d: \"%s\" refused: %s\n", __FILE__, line, s, err);
        exit(1);
    }
    return u;
}

static void parse_bad_at(int line, const char *s, const char *needle) {
    sluice_url u;
    int rc;
    err[0] = '\0';
    rc = sluice_url_parse(&u, s, err, sizeof(err));
    if (rc != SLUICE_EINVAL || strstr(err, needle) == NULL) {
        fprintf(stderr, "%s:%d: \"%s\" gave %d \"%s\"; wanted EINVAL and \"%s\"\n", __FILE__, line,
                s, rc, err, needle);
        exit(1);
    }
    /* nothing half-parsed is left behind, and the secret never reaches the message */
    CHECK_STREQ(u.password, "");
    CHECK_STREQ(u.sentinel_password, "");
    CHECK(strstr(err, "hunter2") == NULL);
}

#define PARSE_OK(s)       parse_ok_at(__LINE__, s)
#define PARSE_BAD(s, msg) parse_bad_at(__LINE__, s, msg)

static void test_tcp(void) {
    sluice_url u = PARSE_OK("redis://127.0.0.1:6379");
    CHECK_EQ(u.is_unix, 0);
    CHECK_STREQ(u.host, "127.0.0.1");
    CHECK_EQ(u.port, 6379);
    CHECK_STREQ(u.user, "");
    CHECK_STREQ(u.password, "");
    CHECK_EQ(u.db, 0);
    u = PARSE_OK("redis://cache.internal");
    CHECK_STREQ(u.host, "cache.internal");
    CHECK_EQ(u.port, 6379);
    u = PARSE_OK("redis://worker:hunter2@redis-1:6380/2");
    CHECK_STREQ(u.user, "worker");
    CHECK_STREQ(u.password, "hunter2");
    CHECK_STREQ(u.host, "redis-1");
    CHECK_EQ(u.port, 6380);
    CHECK_EQ(u.db, 2);
    u = PARSE_OK("redis://:hunter2@host");
    CHECK_STREQ(u.user, "");
    CHECK_STREQ(u.password, "hunter2");
    u = PARSE_OK("redis://alice@host");
    CHECK_STREQ(u.user, "alice");
    CHECK_STREQ(u.password, "");
    u = PARSE_OK("redis://host/");
    CHECK_EQ(u.db, 0);
    u = PARSE_OK("redis://host:1/2147483647");
    CHECK_EQ(u.port, 1);
    CHECK_EQ(u.db, 2147483647);
    u = PARSE_OK("redis://host:65535");
    CHECK_EQ(u.port, 65535);
    u = PARSE_OK("REDIS://Host_1");
    CHECK_STREQ(u.host, "Host_1");
}

static void test_ipv6_and_escapes(void) {
    sluice_url u = PARSE_OK("redis://[::1]:7000/3");
    CHECK_STREQ(u.host, "::1");
    CHECK_EQ(u.port, 7000);
    CHECK_EQ(u.db, 3);
    u = PARSE_OK("redis://[2001:db8::2]");
    CHECK_STREQ(u.host, "2001:db8::2");
    CHECK_EQ(u.port, 6379);
    u = PARSE_OK("redis://us%40er:p%3Ass%2Fw%25@host");
    CHECK_STREQ(u.user, "us@er");
    CHECK_STREQ(u.password, "p:ss/w%");
    /* credentials end at the last '@': a raw '@' or '/' in a password still works */
    u = PARSE_OK("redis://u:pa@ss/w@host:6379");
    CHECK_STREQ(u.password, "pa@ss/w");
    CHECK_STREQ(u.host, "host");
    u = PARSE_OK("redis://u:a:b@host");
    CHECK_STREQ(u.user, "u");
    CHECK_STREQ(u.password, "a:b");
}

static void test_unix(void) {
    char path[200];
    sluice_url u = PARSE_OK("unix:///tmp/redis.sock");
    CHECK_EQ(u.is_unix, 1);
    CHECK_STREQ(u.path, "/tmp/redis.sock");
    CHECK_EQ(u.db, 0);
    u = PARSE_OK("unix:///var/run/redis/redis.sock?db=5");
    CHECK_STREQ(u.path, "/var/run/redis/redis.sock");
    CHECK_EQ(u.db, 5);
    u = PARSE_OK("unix://worker:hunter2@/run/r.sock?db=1");
    CHECK_STREQ(u.user, "worker");
    CHECK_STREQ(u.password, "hunter2");
    CHECK_STREQ(u.path, "/run/r.sock");
    CHECK_EQ(u.db, 1);
    u = PARSE_OK("unix://:hunter2@/r.sock");
    CHECK_STREQ(u.user, "");
    CHECK_STREQ(u.password, "hunter2");
    /* sun_path holds 107 bytes and a NUL */
    snprintf(path, sizeof(path), "unix:///%0106d", 7);
    u = PARSE_OK(path);
    CHECK_EQ(strlen(u.path), 107);
    snprintf(path, sizeof(path), "unix:///%0107d", 7);
    PARSE_BAD(path, "unix socket path is 108 bytes; the limit is 107");
    PARSE_BAD("unix://relative/redis.sock", "unix socket path is relative");
    PARSE_BAD("unix://u:hunter2@relative", "unix socket path is relative");
    PARSE_BAD("unix://", "unix socket path is empty");
    PARSE_BAD("unix:///tmp/r.sock?db=x", "db \"x\" is not a non-negative integer");
    PARSE_BAD("unix:///tmp/r.sock?db=", "db \"\" is not a non-negative integer");
    PARSE_BAD("unix:///tmp/r.sock?timeout=5", "unknown query parameter \"timeout\"");
    PARSE_BAD("unix:///tmp/r.sock?db=1&x=2", "unexpected \"&x=***\" after db=1");
    PARSE_BAD("unix:///tmp/r.sock#x", "unexpected \"#x\" after the socket path");
}

static void test_cluster(void) {
    sluice_url u = PARSE_OK("redis+cluster://127.0.0.1:7000,127.0.0.1:7001,[::1]:7002");
    CHECK_EQ(u.is_cluster, 1);
    CHECK_EQ(u.is_unix, 0);
    CHECK_EQ(u.nseeds, 3);
    CHECK_STREQ(u.seeds[0].host, "127.0.0.1");
    CHECK_EQ(u.seeds[0].port, 7000);
    CHECK_EQ(u.seeds[1].port, 7001);
    CHECK_STREQ(u.seeds[2].host, "::1");
    CHECK_EQ(u.seeds[2].port, 7002);
    CHECK_STREQ(u.host, "127.0.0.1"); /* host and port are the first seed */
    CHECK_EQ(u.port, 7000);
    CHECK_EQ(u.db, 0);
    u = PARSE_OK("REDIS+CLUSTER://worker:hunter2@node-a,node-b:6380/");
    CHECK_STREQ(u.user, "worker");
    CHECK_STREQ(u.password, "hunter2");
    CHECK_EQ(u.nseeds, 2);
    CHECK_STREQ(u.seeds[0].host, "node-a");
    CHECK_EQ(u.seeds[0].port, 6379);
    CHECK_STREQ(u.seeds[1].host, "node-b");
    CHECK_EQ(u.seeds[1].port, 6380);
    u = PARSE_OK("redis+cluster://:p%40ss@h:1/0");
    CHECK_STREQ(u.password, "p@ss");
    CHECK_EQ(u.nseeds, 1);
    u = PARSE_OK("redis://h:1");
    CHECK_EQ(u.is_cluster, 0);
    CHECK_EQ(u.nseeds, 0);
    /* 16 seeds are accepted, the 17th is refused */
    char many[SLUICE_URL_MAX];
    size_t n = (size_t)snprintf(many, sizeof(many), "redis+cluster://");
    for (int i = 0; i < SLUICE_URL_SEEDS_MAX; i++) {
        n += (size_t)snprintf(many + n, sizeof(many) - n, "%sh%d:%d", i ? "," : "", i, 7000 + i);
    }
    u = PARSE_OK(many);
    CHECK_EQ(u.nseeds, SLUICE_URL_SEEDS_MAX);
    CHECK_STREQ(u.seeds[15].host, "h15");
    CHECK_EQ(u.seeds[15].port, 7015);
    snprintf(many + n, sizeof(many) - n, ",h16:7016");
    PARSE_BAD(many, "more than 16 seed nodes");
    PARSE_BAD("redis+cluster://", "empty host");
    PARSE_BAD("redis+cluster://u:hunter2@", "empty host");
    PARSE_BAD("redis+cluster://a:7000,", "seed 2 is empty (a comma at the end)");
    PARSE_BAD("redis+cluster://a:7000,,b:7001", "seed 2 is empty (two commas in a row)");
    PARSE_BAD("redis+cluster://a:1,b:2,,c:3", "seed 3 is empty (two commas in a row)");
    PARSE_BAD("redis+cluster://a:7000,b:7001,A:7000", "seed 3 (A:7000) is seed 1 again");
    /* an IPv6 address without brackets: the bracketed form to write */
    PARSE_BAD("redis+cluster://::1:7000", "host \"::1:7000\" looks like an IPv6 address: write it "
                                          "in brackets, as in [::1]:7000");
    PARSE_BAD("redis+cluster://a:1,fe80::1:7001", "as in [fe80::1]:7001");
    PARSE_BAD("redis+cluster://2001:db8::1", "as in [2001:db8::1]");
    PARSE_BAD("redis://::1:6380/0", "as in [::1]:6380");
    PARSE_BAD("redis://::1", "as in [::1]");
    PARSE_BAD("redis+cluster://a:7000,b:x", "port \"x\" is not a number");
    PARSE_BAD("redis+cluster://a:70000", "port 70000 is out of range 1..65535");
    PARSE_BAD("redis+cluster://a:7000,b:", "port is empty");
    PARSE_BAD("redis+cluster://a:7000/2", "takes no db (Redis Cluster has only db 0)");
    PARSE_BAD("redis+cluster://u:hunter2@a:7000?db=1", "takes no db");
    PARSE_BAD("redis+cluster://a:7000?password=hunter2", "unexpected \"?password=***\"");
    PARSE_BAD("redis+cluster://a:7000#x", "unexpected \"#x\" after the seed nodes");
    PARSE_BAD("redis+cluster://a!b:7000", "host \"a!b\" has '!' at position 1");
    PARSE_BAD("redis+cluster://a:7000,b c:1", "URL has a space");
    PARSE_BAD("redis+cluster://[::1:7000", "no closing ']'");
    PARSE_BAD("rediscluster://a:7000", "unknown scheme \"rediscluster\"");
}

/* B11 */
static void test_bad(void) {
    sluice_url u;
    char long_url[SLUICE_URL_MAX + 16];
    PARSE_BAD("http://host:6379", "unknown scheme \"http\"");
    PARSE_BAD("redis+tls://host", "unknown scheme \"redis+tls\"");
    PARSE_BAD("host:6379", "URL has no scheme");
    PARSE_BAD("hunter2@host", "URL has no scheme");
    PARSE_BAD("", "URL is empty");
    PARSE_BAD("redis://", "empty host");
    PARSE_BAD("redis://:6379", "empty host");
    PARSE_BAD("redis://u:hunter2@", "empty host");
    PARSE_BAD("redis://u:hunter2@:6379/1", "empty host");
    PARSE_BAD("redis://host:0", "port 0 is out of range 1..65535");
    PARSE_BAD("redis://host:65536", "port 65536 is out of range 1..65535");
    PARSE_BAD("redis://host:99999999999999999999999", "out of range 1..65535");
    PARSE_BAD("redis://host:abc", "port \"abc\" is not a number");
    PARSE_BAD("redis://host:-1", "port \"-1\" is not a number");
    PARSE_BAD("redis://host:", "port is empty");
    PARSE_BAD("redis://host:6379:6380", "port \"6379:6380\" is not a number");
    PARSE_BAD("redis://host/x", "db \"x\" is not a non-negative integer");
    /* a password in a query string is not echoed either */
    PARSE_BAD("redis://host:6379/0?password=hunter2", "unexpected \"?password=***\"");
    PARSE_BAD("redis://host?user=u&password=hunter2#x", "?user=***&password=***#x");
    PARSE_BAD("unix:///tmp/r.sock?db=1&password=hunter2", "\"&password=***\" after db=1");
    PARSE_BAD("unix:///tmp/r.sock#password=hunter2", "after the socket path");
    PARSE_BAD("redis://host/-1", "db \"-1\" is not a non-negative integer");
    PARSE_BAD("redis://host/2147483648", "db 2147483648 is out of range 0..2147483647");
    PARSE_BAD("redis://host/1/2", "unexpected \"/2\"");
    PARSE_BAD("redis://host?db=1", "unexpected \"?db=***\"");
    PARSE_BAD("redis://host#frag", "unexpected \"#frag\"");
    PARSE_BAD("redis://ho st", "URL has a space at position 10");
    PARSE_BAD("redis://u:hunter 2@host", "URL has a space at position 16");
    PARSE_BAD("redis://host\n", "control character 0x0a at position 12");
    PARSE_BAD("redis://host\x7f", "control character 0x7f");
    PARSE_BAD("redis://[::1", "no closing ']'");
    PARSE_BAD("redis://[zz::1]:6379", "host \"[zz::1]\" is not an IPv6 address");
    PARSE_BAD("redis://[]:6379", "empty host");
    PARSE_BAD("redis://h!st", "host \"h!st\" has '!' at position 1");
    PARSE_BAD("redis://u:%zz@host", "password has a bad percent-escape");
    PARSE_BAD("redis://u:hunter2%4@host", "password has a bad percent-escape");
    PARSE_BAD("redis://u%00:p@host", "user contains %00");
    memset(long_url, 'a', sizeof(long_url));
    memcpy(long_url, "redis://u:", 10);
    long_url[10 + 256] = '@';
    long_url[10 + 256 + 1] = 'h';
    long_url[10 + 256 + 2] = '\0';
    PARSE_BAD(long_url, "password is longer than 255 bytes");
    memset(long_url, 'a', sizeof(long_url));
    memcpy(long_url, "redis://", 8);
    long_url[SLUICE_URL_MAX] = '\0';
    PARSE_BAD(long_url, "host is longer than 255 bytes"); /* 1024 bytes: the length is fine */
    long_url[SLUICE_URL_MAX] = 'a';
    long_url[SLUICE_URL_MAX + 1] = '\0';
    PARSE_BAD(long_url, "URL is longer than 1024 bytes");
    CHECK_EQ(sluice_url_parse(&u, NULL, NULL, 0), SLUICE_EINVAL);
    CHECK_EQ(sluice_url_parse(NULL, "redis://h", err, sizeof(err)), SLUICE_EINVAL);
}

static void test_tls(void) {
    sluice_url u = PARSE_OK("rediss://worker:hunter2@cache.example.com:6380/2");
    CHECK_EQ(u.is_tls, 1);
    CHECK_EQ(u.is_cluster, 0);
    CHECK_EQ(u.is_sentinel, 0);
    CHECK_STREQ(u.host, "cache.example.com");
    CHECK_EQ(u.port, 6380);
    CHECK_STREQ(u.user, "worker");
    CHECK_STREQ(u.password, "hunter2");
    CHECK_EQ(u.db, 2);
    u = PARSE_OK("REDISS://[::1]");
    CHECK_EQ(u.is_tls, 1);
    CHECK_STREQ(u.host, "::1");
    CHECK_EQ(u.port, 6379);
    u = PARSE_OK("redis://host");
    CHECK_EQ(u.is_tls, 0);
    u = PARSE_OK("rediss+cluster://u:hunter2@a:7000,b:7001,[::1]");
    CHECK_EQ(u.is_tls, 1);
    CHECK_EQ(u.is_cluster, 1);
    CHECK_EQ(u.nseeds, 3);
    CHECK_STREQ(u.seeds[1].host, "b");
    CHECK_EQ(u.seeds[2].port, 6379);
    CHECK_STREQ(u.password, "hunter2");
    u = PARSE_OK("redis+cluster://a:7000");
    CHECK_EQ(u.is_tls, 0);
    PARSE_BAD("rediss://", "empty host");
    PARSE_BAD("rediss://host:70000", "port 70000 is out of range 1..65535");
    PARSE_BAD("rediss://host/x", "db \"x\" is not a non-negative integer");
    PARSE_BAD("rediss+cluster://a:7000/3", "a rediss+cluster:// URL takes no db");
    PARSE_BAD("rediss+cluster://a:7000,,b", "seed 2 is empty (two commas in a row)");
    PARSE_BAD("rediss+cluster://a,b?password=hunter2", "unexpected \"?password=***\"");
    PARSE_BAD("rediss+unix:///tmp/r.sock", "unknown scheme \"rediss+unix\"");
}

static void test_sentinel(void) {
    sluice_url u = PARSE_OK("redis+sentinel://s1,s2:26380,[::1]:26381/mymaster");
    CHECK_EQ(u.is_sentinel, 1);
    CHECK_EQ(u.is_cluster, 0);
    CHECK_EQ(u.is_tls, 0);
    CHECK_EQ(u.nseeds, 3);
    CHECK_STREQ(u.seeds[0].host, "s1");
    CHECK_EQ(u.seeds[0].port, SLUICE_SENTINEL_PORT);
    CHECK_EQ(u.seeds[1].port, 26380);
    CHECK_STREQ(u.seeds[2].host, "::1");
    CHECK_STREQ(u.host, "s1"); /* host/port: the first sentinel */
    CHECK_EQ(u.port, 26379);
    CHECK_STREQ(u.master_name, "mymaster");
    CHECK_EQ(u.db, 0);
    CHECK_EQ(u.sentinel_auth, 0);
    CHECK_STREQ(u.user, "");
    u = PARSE_OK("rediss+sentinel://app:hunter2@s1:26379/my%2Dmaster.1?db=3&sentinel_user=sen&"
                 "sentinel_password=p%40ss@w");
    CHECK_EQ(u.is_sentinel, 1);
    CHECK_EQ(u.is_tls, 1);
    CHECK_STREQ(u.user, "app");
    CHECK_STREQ(u.password, "hunter2"); /* a raw '@' in the query is not the credentials' end */
    CHECK_STREQ(u.master_name, "my-master.1");
    CHECK_EQ(u.db, 3);
    CHECK_EQ(u.sentinel_auth, 1);
    CHECK_STREQ(u.sentinel_user, "sen");
    CHECK_STREQ(u.sentinel_password, "p@ss@w");
    /* sentinels without AUTH in front of data nodes with it: both options, empty */
    u = PARSE_OK("redis+sentinel://:pw@s1/m?sentinel_user=&sentinel_password=");
    CHECK_EQ(u.sentinel_auth, 1);
    CHECK_STREQ(u.sentinel_password, "");
    CHECK_STREQ(u.password, "pw");
    u = PARSE_OK("redis+sentinel://s1/m?sentinel_password=x");
    CHECK_EQ(u.sentinel_auth, 1);
    CHECK_STREQ(u.sentinel_user, "");
    CHECK_STREQ(u.sentinel_password, "x");

    PARSE_BAD("redis+sentinel://s1", "needs the master's name after the sentinels");
    PARSE_BAD("redis+sentinel://s1/", "needs the master's name");
    PARSE_BAD("rediss+sentinel://s1/?db=1", "a rediss+sentinel:// URL needs the master's name");
    PARSE_BAD("redis+sentinel:///m", "empty host");
    PARSE_BAD("redis+sentinel://s1,,s2/m", "seed 2 is empty");
    /* a sentinel named twice is a typo (another port meant), not a second sentinel */
    PARSE_BAD("redis+sentinel://s1,s2:26380,s1:26379/m", "seed 3 (s1:26379) is seed 1 again");
    PARSE_BAD("redis+sentinel://[::1]:26381,S1,[::1]:26381/m",
              "seed 3 ([::1]:26381) is seed 1 again");
    PARSE_BAD("redis+sentinel://s1:0/m", "port 0 is out of range 1..65535");
    PARSE_BAD("redis+sentinel://s1/m/2", "unexpected \"/2\" after the master name (a db is given "
                                         "as ?db=N)");
    PARSE_BAD("redis+sentinel://s1/m?db=x", "db \"x\" is not a non-negative integer");
    PARSE_BAD("redis+sentinel://s1/m?db=1&db=2", "option db is given twice");
    PARSE_BAD("redis+sentinel://s1/m?password=hunter2", "unknown option \"password\"");
    PARSE_BAD("redis+sentinel://s1/m?sentinel_password", "option sentinel_password has no '='");
    PARSE_BAD("redis+sentinel://s1/m?sentinel_password=hunter2&sentinel_password=hunter2",
              "option sentinel_password is given twice");
    PARSE_BAD("redis+sentinel://s1/m?sentinel_password=hunter2%zz",
              "sentinel_password has a bad percent-escape");
    PARSE_BAD("redis+sentinel://s1/m?sentinel_password=hunter2#frag",
              "unexpected \"#frag\" after the master name");
    PARSE_BAD("redis+sentinel://s1/m%20x", "master name has a space or control character");
    PARSE_BAD("redis+sentinel://s1/m%00", "master name contains %00");
    PARSE_BAD("redis+sentinel://u:hunter2%zz@s1/m", "password has a bad percent-escape");
}

static void test_supported(void) {
    static const struct {
        const char *url, *msg;
    } cases[] = {
        {"redis://h", NULL},
        {"unix:///tmp/r.sock", NULL},
        {"redis+cluster://a,b", NULL},
        {"rediss://h", NULL}, /* the blocking connection; the async one refuses it itself */
        {"rediss+cluster://a", NULL},
        {"redis+sentinel://s/m", NULL},
        {"rediss+sentinel://s/m", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sluice_url u = PARSE_OK(cases[i].url);
        err[0] = '\0';
        CHECK_EQ(sluice_url_supported(&u, err, sizeof(err)), cases[i].msg ? SLUICE_EINVAL : 0);
        CHECK_STREQ(err, cases[i].msg ? cases[i].msg : "");
    }
    CHECK_EQ(sluice_url_supported(NULL, NULL, 0), SLUICE_EINVAL);
    /* the async connection: plain, TLS, cluster and Sentinel URLs */
    static const struct {
        const char *url, *msg;
    } async[] = {
        {"redis://h", NULL}, {"redis+cluster://a,b", NULL},
        /* the async connection: plain, TLS, cluster and Sentinel URLs */
    };
    for (size_t i = 0; i < sizeof(async) / sizeof(async[0]); i++) {
        sluice_url u = PARSE_OK(async[i].url);
        err[0] = '\0';
        CHECK_EQ(sluice_client_async_supported(&u, err, sizeof(err)),
                 async[i].msg ? SLUICE_EINVAL : 0);
        CHECK(strncmp(err, async[i].msg ? async[i].msg : "",
                      strlen(async[i].msg ? async[i].msg : "")) == 0);
    }
}

static void redacts_to_at(int line, const char *url, const char *want) {
    sluice_url u = parse_ok_at(line, url);
    char buf[512];
    sluice_url_redact(&u, buf, sizeof(buf));
    if (strcmp(buf, want) != 0) {
        fprintf(stderr, "%s:%d: redact(\"%s\") = \"%s\", wanted \"%s\"\n", __FILE__, line, url, buf,
                want);
        exit(1);
    }
}

#define REDACTS_TO(url, want) redacts_to_at(__LINE__, url, want)

static void test_redact(void) {
    sluice_url u = PARSE_OK("redis://worker:hunter2@host:6380/2");
    char small[10];
    REDACTS_TO("redis://worker:hunter2@host:6380/2", "redis://worker:***@host:6380/2");
    REDACTS_TO("redis://host", "redis://host:6379");
    REDACTS_TO("redis://:hunter2@host", "redis://:***@host:6379");
    REDACTS_TO("redis://alice@host/0", "redis://alice@host:6379");
    REDACTS_TO("redis://[::1]:7000/1", "redis://[::1]:7000/1");
    REDACTS_TO("redis://us%40er:x@h", "redis://us%40er:***@h:6379");
    REDACTS_TO("unix:///tmp/r.sock", "unix:///tmp/r.sock");
    REDACTS_TO("unix:///tmp/r.sock?db=3", "unix:///tmp/r.sock?db=3");
    REDACTS_TO("unix://u:hunter2@/tmp/r.sock", "unix://u:***@/tmp/r.sock");
    REDACTS_TO("redis+cluster://u:hunter2@a:7000,[::1]:7001,b",
               "redis+cluster://u:***@a:7000,[::1]:7001,b:6379");
    REDACTS_TO("redis+cluster://a:7000/0", "redis+cluster://a:7000");
    REDACTS_TO("rediss://u:hunter2@h:6380/1", "rediss://u:***@h:6380/1");
    REDACTS_TO("rediss://[::1]", "rediss://[::1]:6379");
    REDACTS_TO("rediss+cluster://u:hunter2@a,b:7001", "rediss+cluster://u:***@a:6379,b:7001");
    REDACTS_TO("redis+sentinel://s1,s2:26380/mymaster",
               "redis+sentinel://s1:26379,s2:26380/mymaster");
    REDACTS_TO("rediss+sentinel://:hunter2@s1/my%40m?db=2&sentinel_user=s%20u&"
               "sentinel_password=hunter2",
               "rediss+sentinel://:***@s1:26379/my%40m?db=2&sentinel_user=s%20u&"
               "sentinel_password=***");
    REDACTS_TO("redis+sentinel://s1/m?sentinel_password=hunter2",
               "redis+sentinel://s1:26379/m?sentinel_user=&sentinel_password=***");
    REDACTS_TO("redis+sentinel://s1/m?sentinel_user=x&sentinel_password=",
               "redis+sentinel://s1:26379/m?sentinel_user=x&sentinel_password=");
    /* always NUL-terminated, even when cut short */
    sluice_url_redact(&u, small, sizeof(small));
    CHECK_STREQ(small, "redis://w");
    sluice_url_redact(&u, small, 0);
    sluice_url_redact(NULL, small, sizeof(small));
    CHECK(strlen(small) < sizeof(small));
}

static void test_default(void) {
    unsetenv("SLUICE_REDIS_URL");
    CHECK_STREQ(sluice_url_default(), SLUICE_DEFAULT_REDIS_URL);
    setenv("SLUICE_REDIS_URL", "", 1);
    CHECK_STREQ(sluice_url_default(), "redis://127.0.0.1:6379");
    setenv("SLUICE_REDIS_URL", "unix:///tmp/x.sock", 1);
    CHECK_STREQ(sluice_url_default(), "unix:///tmp/x.sock");
    unsetenv("SLUICE_REDIS_URL");
    (void)PARSE_OK(SLUICE_DEFAULT_REDIS_URL);
}

int main(void) {
    test_tcp();
    test_ipv6_and_escapes();
    test_unix();
    test_cluster();
    test_bad();
    test_tls();
    test_sentinel();
    test_supported();
    test_redact();
    test_default();
    printf("test_url: 10 groups passed\n");
    return 0;
}
