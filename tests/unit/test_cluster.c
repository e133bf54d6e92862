/* SPDX-License-Identifier: MIT */
/*
 * test_cluster.c - the pure part of Redis Cluster routing (sluice/cluster.h): CRC16 and hash
 * tags against the values of the Redis Cluster spec, which key routes each command sluice
 * sends, the slot map from CLUSTER SHARDS and CLUSTER SLOTS replies, and MOVED/ASK/TRYAGAIN/
 * CLUSTERDOWN. Replies are made by hiredis' own reader from RESP text, as a server sends them.
 * No network.
 */
#include <stdarg.h>

#include "harness.h"

#include "sluice/cluster.h"
#include "sluice/status.h"

/* RESP text, appended piece by piece: B bulk string, I integer, A array header. */
static char text[8192];
static size_t text_len;

static void put(const char *piece, size_t n) {
    CHECK(text_len + n < sizeof(text));
    memcpy(text + text_len, piece, n);
    text_len += n;
    text[text_len] = '\0';
}
static void B(const char *s) {
    char head[32];
    put(head, (size_t)snprintf(head, sizeof(head), "$%zu\r\n", strlen(s)));
    put(s, strlen(s));
    put("\r\n", 2);
}
static void I(long long v) {
    char buf[32];
    put(buf, (size_t)snprintf(buf, sizeof(buf), ":%lld\r\n", v));
}
static void A(int n) {
    char buf[32];
    put(buf, (size_t)snprintf(buf, sizeof(buf), "*%d\r\n", n));
}

/* One node of a CLUSTER SHARDS shard, as Redis 7.0 writes it. */
static void shard_node(const char *ip, const char *endpoint, int port, const char *role) {
    A(14);
    B("id"), B("0123456789012345678901234567890123456789");
    B("port"), I(port);
    B("ip"), B(ip);
    B("endpoint"), B(endpoint);
    B("role"), B(role);
    B("replication-offset"), I(0);
    B("health"), B("online");
}

static void test_crc_and_slots(void) {
    CHECK_EQ(sluice__crc16("123456789", 9), 0x31C3); /* the spec's check value */
    CHECK_EQ(sluice__crc16("", 0), 0);
    /* values Redis gives for CLUSTER KEYSLOT */
    CHECK_EQ(sluice__cluster_key_slot("foo", 3), 12182);
    CHECK_EQ(sluice__cluster_key_slot("bar", 3), 5061);
    CHECK_EQ(sluice__cluster_key_slot("123456789", 9), 0x31C3 % 16384);
    /* the hash tag: first '{', first '}' after it, non-empty content */
    int foo = sluice__cluster_key_slot("foo", 3);
    CHECK_EQ(sluice__cluster_key_slot("{foo}bar", 8), foo);
    CHECK_EQ(sluice__cluster_key_slot("sluice:{foo}:stream", 19), foo);
    CHECK_EQ(sluice__cluster_key_slot("sluice:{foo}:meta", 17), foo);
    CHECK_EQ(sluice__cluster_key_slot("a{foo}b{bar}", 12), foo);
    CHECK_EQ(sluice__cluster_key_slot("{foo}}", 6), foo);
    CHECK_EQ(sluice__cluster_key_slot("{}foo", 5), sluice__crc16("{}foo", 5) % 16384);
    CHECK_EQ(sluice__cluster_key_slot("foo{", 4), sluice__crc16("foo{", 4) % 16384);
    CHECK_EQ(sluice__cluster_key_slot("{{foo}}", 7), sluice__crc16("{foo", 4) % 16384);
    CHECK_EQ(sluice__cluster_key_slot("{user1000}.following", 20), 3443);
}

#define KEY(...) key_of(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *), __VA_ARGS__)
static int key_of(size_t n, ...) {
    const char *argv[16];
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++) {
        argv[i] = va_arg(ap, const char *);
    }
    va_end(ap);
    return sluice__cluster_command_key((int)n, argv, NULL);
}

static void test_command_key(void) {
    CHECK_EQ(KEY("XADD", "sluice:{q}:stream", "*", "m", "x"), 1);
    CHECK_EQ(KEY("XLEN", "k"), 1);
    CHECK_EQ(KEY("hgetall", "k"), 1);
    CHECK_EQ(KEY("DEL", "a", "b"), 1);
    CHECK_EQ(KEY("FCALL", "sluice_admit", "2", "k1", "k2", "arg"), 3);
    CHECK_EQ(KEY("FCALL", "sluice_version", "0"), -1);
    CHECK_EQ(KEY("EVALSHA", "abc", "1", "k1"), 3);
    CHECK_EQ(KEY("XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "k", ">"), 7);
    CHECK_EQ(KEY("XREAD", "BLOCK", "0", "streams", "k", "$"), 4);
    CHECK_EQ(KEY("XREAD", "COUNT", "1"), -1);
    CHECK_EQ(KEY("XINFO", "GROUPS", "k"), 2);
    CHECK_EQ(KEY("XINFO", "CONSUMERS", "k", "workers"), 2);
    CHECK_EQ(KEY("XINFO", "HELP"), -1);
    CHECK_EQ(KEY("XGROUP", "CREATE", "k", "g", "$"), 2);
    CHECK_EQ(KEY("PING"), -1);
    CHECK_EQ(KEY("TIME"), -1);
    CHECK_EQ(KEY("MULTI"), -1);
    CHECK_EQ(KEY("EXEC"), -1);
    CHECK_EQ(KEY("FUNCTION", "LOAD", "REPLACE", "#!lua"), -1);
    CHECK_EQ(KEY("INFO", "commandstats"), -1);
    CHECK_EQ(KEY("SCAN", "0", "MATCH", "sluice:{q}:*"), -1);

    const char *scan[] = {"SCAN", "0", "MATCH", "sluice:{q}:*", "COUNT", "1000"};
    CHECK_EQ(sluice__cluster_command_slot(6, scan, NULL), sluice__cluster_key_slot("q", 1));
    const char *glob[] = {"SCAN", "0", "MATCH", "sluice:{q*}:*"};
    CHECK_EQ(sluice__cluster_command_slot(4, glob, NULL), -1);
    const char *pre[] = {"SCAN", "0", "MATCH", "*{q}"};
    CHECK_EQ(sluice__cluster_command_slot(4, pre, NULL), -1);
    const char *plain[] = {"SCAN", "0"};
    CHECK_EQ(sluice__cluster_command_slot(2, plain, NULL), -1);
    const char *xadd[] = {"XADD", "sluice:{q}:stream", "*"};
    CHECK_EQ(sluice__cluster_command_slot(3, xadd, NULL), sluice__cluster_key_slot("q", 1));
    /* lengths are honoured: a key with a NUL in it */
    const char *bin[] = {"GET", "a\0b"};
    size_t lens[] = {3, 3};
    CHECK_EQ(sluice__cluster_command_slot(2, bin, lens), sluice__crc16("a\0b", 3) % 16384);
}

static void test_shards(void) {
    char err[256];
    sluice_cluster_map *m = malloc(sizeof(*m));
    CHECK(m != NULL);
    text_len = 0;
    A(3);
    /* shard 1: slots 0-5460 and 16000-16383, primary 127.0.0.1:7001 plus a replica */
    A(4), B("slots"), A(4), I(0), I(5460), I(16000), I(16383), B("nodes"), A(2);
    shard_node("127.0.0.1", "127.0.0.1", 7002, "replica");
    shard_node("127.0.0.1", "127.0.0.1", 7001, "master");
    /* a primary without slots */
    A(4), B("slots"), A(0), B("nodes"), A(1);
    shard_node("127.0.0.1", "127.0.0.1", 7009, "master");
    /* shard 2: endpoint unknown ("?"): the ip is used */
    A(4), B("slots"), A(2), I(5461), I(15999), B("nodes"), A(1);
    shard_node("10.0.0.2", "?", 7003, "master");
    redisReply *r = th_resp(text);
    CHECK_OK(sluice__cluster_parse_shards(r, "seed", m, err, sizeof(err)), err);
    freeReplyObject(r);
    CHECK_EQ(m->nnodes, 2);
    CHECK_STREQ(sluice__cluster_map_lookup(m, 0)->host, "127.0.0.1");
    CHECK_EQ(sluice__cluster_map_lookup(m, 0)->port, 7001);
    CHECK_EQ(sluice__cluster_map_lookup(m, 5460)->port, 7001);
    CHECK_EQ(sluice__cluster_map_lookup(m, 16383)->port, 7001);
    CHECK_STREQ(sluice__cluster_map_lookup(m, 5461)->host, "10.0.0.2");
    CHECK_EQ(sluice__cluster_map_lookup(m, 15999)->port, 7003);
    CHECK(sluice__cluster_map_lookup(m, -1) == NULL);
    CHECK(sluice__cluster_map_lookup(m, 16384) == NULL);

    /* slot out of range, a shard with slots and no primary, not an array, nothing served */
    text_len = 0;
    A(1), A(4), B("slots"), A(2), I(0), I(16384), B("nodes"), A(1);
    shard_node("127.0.0.1", "127.0.0.1", 7001, "master");
    r = th_resp(text);
    CHECK_EQ(sluice__cluster_parse_shards(r, "seed", m, err, sizeof(err)), SLUICE_EPROTO);
    CHECK(strstr(err, "out of 0..16383") != NULL);
    CHECK(m->nnodes == 0 && m->slot_node[0] == -1); /* no half-built map */
    freeReplyObject(r);
    text_len = 0;
    A(1), A(4), B("slots"), A(2), I(0), I(10), B("nodes"), A(1);
    shard_node("127.0.0.1", "127.0.0.1", 7002, "replica");
    r = th_resp(text);
    CHECK_EQ(sluice__cluster_parse_shards(r, "seed", m, err, sizeof(err)), SLUICE_EPROTO);
    CHECK(strstr(err, "no primary") != NULL);
    freeReplyObject(r);
    r = th_resp("-ERR unknown subcommand 'SHARDS'\r\n");
    CHECK_EQ(sluice__cluster_parse_shards(r, "seed", m, err, sizeof(err)), SLUICE_EPROTO);
    freeReplyObject(r);
    r = th_resp("*0\r\n");
    CHECK_EQ(sluice__cluster_parse_shards(r, "seed", m, err, sizeof(err)), SLUICE_ENOTFOUND);
    freeReplyObject(r);
    free(m);
}

static void test_slots(void) {
    char err[256];
    sluice_cluster_map *m = malloc(sizeof(*m));
    CHECK(m != NULL);
    text_len = 0;
    A(3);
    A(4), I(0), I(5460), A(3), B("127.0.0.1"), I(7001), B("id1"), A(3), B("127.0.0.1"), I(7004),
        B("id4");
    A(3), I(5461), I(10922), A(3), B(""), I(7002), B("id2"); /* empty host: the node asked */
    A(3), I(10923), I(16383), A(2), B("127.0.0.1"), I(7003);
    redisReply *r = th_resp(text);
    CHECK_OK(sluice__cluster_parse_slots(r, "seed-host", m, err, sizeof(err)), err);
    freeReplyObject(r);
    CHECK_EQ(m->nnodes, 3);
    CHECK_EQ(sluice__cluster_map_lookup(m, 5460)->port, 7001);
    CHECK_STREQ(sluice__cluster_map_lookup(m, 5461)->host, "seed-host");
    CHECK_EQ(sluice__cluster_map_lookup(m, 16383)->port, 7003);
    r = th_resp("*1\r\n*3\r\n:10\r\n:5\r\n*2\r\n$1\r\nh\r\n:1\r\n"); /* start > end */
    CHECK_EQ(sluice__cluster_parse_slots(r, "seed", m, err, sizeof(err)), SLUICE_EPROTO);
    freeReplyObject(r);
    r = th_resp("*1\r\n*2\r\n:0\r\n:5\r\n");
    CHECK_EQ(sluice__cluster_parse_slots(r, "seed", m, err, sizeof(err)), SLUICE_EPROTO);
    CHECK(strstr(err, "start, end") != NULL);
    freeReplyObject(r);
    r = th_resp("*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\nh\r\n:70000\r\n");
    CHECK_EQ(sluice__cluster_parse_slots(r, "seed", m, err, sizeof(err)), SLUICE_EPROTO);
    freeReplyObject(r);
    /* the map holds at most SLUICE_CLUSTER_NODES_MAX primaries */
    sluice__cluster_map_init(m);
    for (int i = 0; i < SLUICE_CLUSTER_NODES_MAX; i++) {
        CHECK_EQ(sluice__cluster_map_node(m, "h", 1000 + i), i);
    }
    CHECK_EQ(sluice__cluster_map_node(m, "h", 1000), 0);
    CHECK_EQ(sluice__cluster_map_node(m, "h", 5000), -1);
    free(m);
}

static void redirect_ok(const char *s, sluice_cluster_redirect_kind kind, int slot,
                        const char *host, int port) {
    sluice_cluster_redirect rd;
    CHECK_EQ(sluice__cluster_redirect_parse(s, strlen(s), &rd), kind);
    CHECK_EQ(rd.kind, kind);
    CHECK_EQ(rd.slot, slot);
    CHECK_STREQ(rd.addr.host, host);
    CHECK_EQ(rd.addr.port, port);
}

static void test_redirects(void) {
    redirect_ok("MOVED 3999 127.0.0.1:6381", SLUICE_REDIRECT_MOVED, 3999, "127.0.0.1", 6381);
    redirect_ok("ASK 3999 127.0.0.1:6381", SLUICE_REDIRECT_ASK, 3999, "127.0.0.1", 6381);
    redirect_ok("MOVED 0 [::1]:7000", SLUICE_REDIRECT_MOVED, 0, "::1", 7000);
    redirect_ok("MOVED 16383 ::1:7000", SLUICE_REDIRECT_MOVED, 16383, "::1", 7000);
    redirect_ok("MOVED 12 :7000", SLUICE_REDIRECT_MOVED, 12, "", 7000); /* endpoint unknown */
    redirect_ok("TRYAGAIN Multiple keys request during rehashing of slot", SLUICE_REDIRECT_TRYAGAIN,
                0, "", 0);
    redirect_ok("CLUSTERDOWN The cluster is down", SLUICE_REDIRECT_DOWN, 0, "", 0);
    redirect_ok("CLUSTERDOWN Hash slot not served", SLUICE_REDIRECT_DOWN, 0, "", 0);
    /* malformed redirections are plain errors */
    redirect_ok("MOVED 16384 h:1", SLUICE_REDIRECT_NONE, 0, "", 0);
    redirect_ok("MOVED 1 h", SLUICE_REDIRECT_NONE, 0, "", 0);
    redirect_ok("MOVED 1 h:0", SLUICE_REDIRECT_NONE, 0, "", 0);
    redirect_ok("MOVED 1 h:12x", SLUICE_REDIRECT_NONE, 0, "", 0);
    redirect_ok("MOVED x h:1", SLUICE_REDIRECT_NONE, 0, "", 0);
    redirect_ok("ASK", SLUICE_REDIRECT_NONE, 0, "", 0);
    redirect_ok("ERR unknown command", SLUICE_REDIRECT_NONE, 0, "", 0);
    redirect_ok("NOSCRIPT No matching script", SLUICE_REDIRECT_NONE, 0, "", 0);
    sluice_cluster_redirect rd;
    CHECK_EQ(sluice__cluster_redirect_parse(NULL, 0, &rd), SLUICE_REDIRECT_NONE);
}

int main(void) {
    test_crc_and_slots();
    test_command_key();
    test_shards();
    test_slots();
    test_redirects();
    printf("test_cluster: 5 groups passed\n");
    return 0;
}
