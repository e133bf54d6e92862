/* SPDX-License-Identifier: MIT */
/*
 * test_sentinel.c - the I/O-free part of the Sentinel routers (sluice/sentinel.h): the
 * sentinels' credentials, SENTINEL GET-MASTER-ADDR-BY-NAME answers (an address, nil, an empty
 * array, an error, no address), ROLE answers, READONLY / -REDIRECT, the +switch-master message
 * and the error line of a round without a primary. Replies are made by hiredis' own reader from
 * RESP text, as a server sends them. No network.
 */
#include "harness.h"

#include "sluice/reply.h"
#include "sluice/sentinel.h"
#include "sluice/status.h"

/* The reply hiredis reads from len bytes of RESP (freed by the caller). */
static redisReply *parse_n(const char *resp, size_t len) {
    redisReader *rd = redisReaderCreate();
    CHECK(rd != NULL);
    CHECK_EQ(redisReaderFeed(rd, resp, len), REDIS_OK);
    void *r = NULL;
    CHECK_EQ(redisReaderGetReply(rd, &r), REDIS_OK);
    CHECK(r != NULL);
    redisReaderFree(rd);
    return r;
}

static redisReply *parse(const char *resp) {
    return parse_n(resp, strlen(resp));
}

static void test_auth(void) {
    sluice_url u, a;
    char err[256];
    CHECK_EQ(sluice_url_parse(&u, "redis+sentinel://app:pw@s1,s2/m", err, sizeof(err)), 0);
    sluice__sentinel_auth(&u, &a);
    CHECK_STREQ(a.user, "app");
    CHECK_STREQ(a.password, "pw");
    CHECK_EQ(sluice_url_parse(&u,
                              "redis+sentinel://app:pw@s1/m?sentinel_user=sen&"
                              "sentinel_password=spw",
                              err, sizeof(err)),
             0);
    sluice__sentinel_auth(&u, &a);
    CHECK_STREQ(a.user, "sen");
    CHECK_STREQ(a.password, "spw");
    /* sentinel_password= (empty) means: the sentinels take no password */
    CHECK_EQ(
        sluice_url_parse(&u, "redis+sentinel://app:pw@s1/m?sentinel_password=", err, sizeof(err)),
        0);
    sluice__sentinel_auth(&u, &a);
    CHECK_STREQ(a.password, "");
}

static void test_addr(void) {
    char host[64], why[256];
    int port = 0;
    redisReply *r = parse("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
    CHECK_EQ(sluice__sentinel_addr_reply(r, host, sizeof(host), &port, why, sizeof(why)),
             SLUICE_SENTINEL_FOUND);
    CHECK_STREQ(host, "127.0.0.1");
    CHECK_EQ(port, 6380);
    freeReplyObject(r);
    static const struct {
        const char *resp;
        int res;
        const char *why;
    } bad[] = {
        {"$-1\r\n", SLUICE_SENTINEL_UNKNOWN, "master name unknown"},
        {"*-1\r\n", SLUICE_SENTINEL_UNKNOWN, "master name unknown"},
        {"*0\r\n", SLUICE_SENTINEL_UNKNOWN, "master name unknown"},
        {"-NOPERM no\r\n", SLUICE_SENTINEL_REFUSED, "SENTINEL GET-MASTER-ADDR-BY-NAME: NOPERM no"},
        {"*2\r\n$1\r\nh\r\n$5\r\n70000\r\n", SLUICE_SENTINEL_REFUSED, "not an address"},
        {"*2\r\n$1\r\nh\r\n$2\r\n0x\r\n", SLUICE_SENTINEL_REFUSED, "not an address"},
        {"*2\r\n$0\r\n\r\n$2\r\n10\r\n", SLUICE_SENTINEL_REFUSED, "not an address"},
        {"*1\r\n$1\r\nh\r\n", SLUICE_SENTINEL_REFUSED, "not an address"},
        {"+OK\r\n", SLUICE_SENTINEL_REFUSED, "not an address"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = parse(bad[i].resp);
        port = -1;
        CHECK_EQ(sluice__sentinel_addr_reply(r, host, sizeof(host), &port, why, sizeof(why)),
                 bad[i].res);
        CHECK(strstr(why, bad[i].why) != NULL);
        CHECK_EQ(port, -1);
        freeReplyObject(r);
    }
    /* a host with a byte no host name or IP address has (a space, CR LF, a NUL that would cut
     * it short) is no address, the value named in the reason */
    static const struct {
        const char *resp;
        size_t len;
        const char *why;
    } odd[] = {
        {"*2\r\n$7\r\nfoo bar\r\n$4\r\n6379\r\n", 27,
         "not an address (host \"foo bar\": byte 3 is 0x20)"},
        {"*2\r\n$5\r\na\r\nbc\r\n$4\r\n6379\r\n", 25,
         "not an address (host \"a\\x0d\\nbc\": byte 1 is 0x0d)"},
        {"*2\r\n$11\r\n127.0.0.1\0x\r\n$4\r\n6379\r\n", 32,
         "not an address (host \"127.0.0.1\": byte 9 is 0x00)"},
        {"*2\r\n$1\r\nh\r\n$5\r\n70000\r\n", 22, "not an address (port \"70000\")"},
    };
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        r = parse_n(odd[i].resp, odd[i].len);
        port = -1;
        CHECK_EQ(sluice__sentinel_addr_reply(r, host, sizeof(host), &port, why, sizeof(why)),
                 SLUICE_SENTINEL_REFUSED);
        CHECK_STREQ(why + strlen("SENTINEL GET-MASTER-ADDR-BY-NAME: "), odd[i].why);
        CHECK_EQ(port, -1);
        freeReplyObject(r);
    }
    /* a host longer than the buffer is no address, never cut short */
    r = parse("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
    CHECK_EQ(sluice__sentinel_addr_reply(r, host, 9, &port, why, sizeof(why)),
             SLUICE_SENTINEL_REFUSED);
    freeReplyObject(r);
}

static void test_role(void) {
    char why[256] = "";
    redisReply *r = parse("*3\r\n$6\r\nmaster\r\n:10\r\n*0\r\n");
    CHECK_EQ(sluice__sentinel_role_reply(r, "W", "h:1", why, sizeof(why)), 0);
    freeReplyObject(r);
    r = parse("*5\r\n$5\r\nslave\r\n$1\r\nh\r\n:1\r\n$9\r\nconnected\r\n:1\r\n");
    CHECK_EQ(sluice__sentinel_role_reply(r, "W", "h:2", why, sizeof(why)), 1);
    CHECK_STREQ(why, "W: h:2 answered ROLE slave (not the primary)");
    freeReplyObject(r);
    r = parse(":1\r\n");
    CHECK_EQ(sluice__sentinel_role_reply(r, "W", "h:2", why, sizeof(why)), 1);
    CHECK_STREQ(why, "W: h:2: ROLE: unexpected answer");
    freeReplyObject(r);
}

static void test_not_primary(void) {
    redisReply *r = parse("-READONLY You can't write against a read only replica.\r\n");
    CHECK(sluice__sentinel_not_primary(sluice_reply_error_status(r->str, r->len), r));
    freeReplyObject(r);
    r = parse("-REDIRECT 127.0.0.1:6380\r\n");
    CHECK(sluice__sentinel_not_primary(sluice_reply_error_status(r->str, r->len), r));
    freeReplyObject(r);
    r = parse("-UNBLOCKED force unblock from blocking operation, instance state changed "
              "(master -> replica?)\r\n");
    CHECK(sluice__sentinel_not_primary(sluice_reply_error_status(r->str, r->len), r));
    freeReplyObject(r);
    r = parse("-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    CHECK(!sluice__sentinel_not_primary(sluice_reply_error_status(r->str, r->len), r));
    freeReplyObject(r);
    r = parse("-ERR REDIRECT\r\n");
    CHECK(!sluice__sentinel_not_primary(sluice_reply_error_status(r->str, r->len), r));
    freeReplyObject(r);
    r = parse("+REDIRECT 1\r\n");
    CHECK(!sluice__sentinel_not_primary(0, r));
    freeReplyObject(r);
    CHECK(!sluice__sentinel_not_primary(SLUICE_EREADONLY, NULL));
}

static void test_switch(void) {
    char host[64];
    int port = 0;
    const char *m = "mymaster 127.0.0.1 6379 127.0.0.1 6380";
    CHECK_EQ(sluice__sentinel_switch_parse(m, strlen(m), "mymaster", host, sizeof(host), &port), 1);
    CHECK_STREQ(host, "127.0.0.1");
    CHECK_EQ(port, 6380);
    CHECK_EQ(sluice__sentinel_switch_parse(m, strlen(m), "other", host, sizeof(host), &port), 0);
    CHECK_EQ(sluice__sentinel_switch_parse(m, strlen(m), "mymaste", host, sizeof(host), &port), 0);
    static const char *const bad[] = {"",
                                      "mymaster 1 2 3",
                                      "mymaster a 1 b 2 c",
                                      "mymaster a 1 b x",
                                      "mymaster a 1 b 99999",
                                      "mymaster a 1 b\r\nx 2",
                                      "mymaster a 1 b\"c 2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ(sluice__sentinel_switch_parse(bad[i], strlen(bad[i]), "mymaster", host,
                                               sizeof(host), &port),
                 -1);
    }
    const char *v6 = "m ::1 6379 ::1 6381";
    CHECK_EQ(sluice__sentinel_switch_parse(v6, strlen(v6), "m", host, sizeof(host), &port), 1);
    CHECK_STREQ(host, "::1");
    CHECK_EQ(port, 6381);
}

static int starts(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_round(void) {
    sluice_url_seed a = {"s1", 26379}, b = {"s2", 26380};
    char err[512];
    sluice__sentinel_round rd = {0};
    sluice__sentinel_round_add(&rd, &a, SLUICE_SENTINEL_DOWN, "Connection refused");
    sluice__sentinel_round_add(&rd, &b, SLUICE_SENTINEL_DOWN, "Connection refused");
    CHECK_EQ(sluice__sentinel_round_fail(&rd, "W", "m", err, sizeof(err)), SLUICE_ECONN);
    CHECK_STREQ(err, "W: no sentinel reachable for master 'm' (s1:26379: Connection refused; "
                     "s2:26380: Connection refused)");
    sluice__sentinel_round un = {0};
    sluice__sentinel_round_add(&un, &a, SLUICE_SENTINEL_UNKNOWN, "master name unknown");
    sluice__sentinel_round_add(&un, &b, SLUICE_SENTINEL_DOWN, "Connection refused");
    CHECK_EQ(sluice__sentinel_round_fail(&un, "W", "m", err, sizeof(err)), SLUICE_ENOTFOUND);
    CHECK(starts(err, "W: master name unknown to the sentinels for master 'm' ("));
    sluice__sentinel_round re = {0};
    sluice__sentinel_round_add(&re, &a, SLUICE_SENTINEL_REFUSED, "AUTH: WRONGPASS");
    sluice__sentinel_round_add(&re, &b, SLUICE_SENTINEL_UNKNOWN, "master name unknown");
    CHECK_EQ(sluice__sentinel_round_fail(&re, "W", "m", err, sizeof(err)), SLUICE_ECONN);
    CHECK(starts(err, "W: no sentinel named the primary for master 'm' (s1:26379: AUTH"));
    /* many long answers: the line is cut, never overrun */
    sluice__sentinel_round big = {0};
    char why[200];
    memset(why, 'x', sizeof(why) - 1);
    why[sizeof(why) - 1] = '\0';
    for (int i = 0; i < 16; i++) {
        sluice__sentinel_round_add(&big, &a, SLUICE_SENTINEL_DOWN, why);
    }
    CHECK_EQ(big.asked, 16);
    CHECK(strlen(big.all) < sizeof(big.all));
    CHECK_EQ(sluice__sentinel_round_fail(&big, "W", "m", err, sizeof(err)), SLUICE_ECONN);
}

int main(void) {
    test_auth();
    test_addr();
    test_role();
    test_not_primary();
    test_switch();
    test_round();
    printf("test_sentinel: 6 groups passed\n");
    return 0;
}
