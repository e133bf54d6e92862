/* SPDX-License-Identifier: MIT */
/*
 * test_queue.c - queue names (docs/faults.md B10) and the keys of a queue (data model version 1).
 * Every refused name is refused here, before anything could reach Redis. No network.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sluice/cluster.h"
#include "sluice/keys.h"
#include "sluice/queue.h"
#include "sluice/status.h"

static char err[256];

static void name_ok_at(int line, const char *name) {
    err[0] = '\0';
    if (sluice_queue_name_check(name, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s:%d: \"%s\" refused: %s\n", __FILE__, line, name, err);
        exit(1);
    }
}

static void name_bad_at(int line, const char *name, const char *want) {
    int rc;
    err[0] = '\0';
    rc = sluice_queue_name_check(name, err, sizeof(err));
    if (rc != SLUICE_EINVAL || strcmp(err, want) != 0) {
        fprintf(stderr, "%s:%d: got %d \"%s\"; wanted EINVAL and \"%s\"\n", __FILE__, line, rc, err,
                want);
        exit(1);
    }
}

#define NAME_OK(n)        name_ok_at(__LINE__, n)
#define NAME_BAD(n, want) name_bad_at(__LINE__, n, want)

static void test_good_names(void) {
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    static const char ab_nul_cd[] = "ab\0cd"; /* a C string: the name is "ab" */
    NAME_OK("a");
    NAME_OK("orders");
    NAME_OK("Orders_2026.v1-eu");
    NAME_OK("-._");
    NAME_OK(ab_nul_cd);
    memset(name, 'q', SLUICE_QUEUE_NAME_MAX);
    name[SLUICE_QUEUE_NAME_MAX] = '\0';
    NAME_OK(name);
    CHECK_EQ(sluice_queue_name_check("x", NULL, 0), 0);
}

/* Partition names: "Q~N", N 1..63 without a leading zero, only at the end. */
static void test_partition_names(void) {
    char buf[SLUICE_QUEUE_NAME_MAX + 1], base[SLUICE_QUEUE_NAME_MAX + 1];
    NAME_OK("orders~1");
    NAME_OK("orders~63");
    const char *bad[] = {"orders~0", "orders~64",  "orders~01",  "orders~", "~1",
                         "or~1ders", "orders~1~2", "orders~100", "a~~1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ(sluice_queue_name_check(bad[i], NULL, 0), SLUICE_EINVAL);
    }
    CHECK_EQ(sluice_partition_name("orders", 0, buf, sizeof(buf)), 0);
    CHECK_STREQ(buf, "orders");
    CHECK_EQ(sluice_partition_name("orders", 5, buf, sizeof(buf)), 0);
    CHECK_STREQ(buf, "orders~5");
    CHECK_EQ(sluice_partition_name("orders", 64, buf, sizeof(buf)), SLUICE_EINVAL);
    CHECK_EQ(sluice_partition_name("orders", -1, buf, sizeof(buf)), SLUICE_EINVAL);
    CHECK_EQ(sluice_partition_name("orders~1", 2, buf, sizeof(buf)), SLUICE_EINVAL);
    memset(base, 'q', 62); /* 62 + "~9" = 64 fits; + "~10" does not */
    base[62] = '\0';
    CHECK_EQ(sluice_partition_name(base, 9, buf, sizeof(buf)), 0);
    CHECK_EQ(sluice_partition_name(base, 10, buf, sizeof(buf)), SLUICE_EINVAL);
    sluice_keys k;
    CHECK_EQ(sluice_keys_init(&k, "orders~2", NULL, 0), 0);
    CHECK_STREQ(k.stream, "sluice:{orders~2}:stream");
    /* a tenant's partition is the jump consistent hash of FNV-1a-32, the function producers in
     * other languages use: FNV-1a-32("a") = 0xe40c292c, ("tenant-42") = 0xf7d215c2 */
    CHECK_EQ(sluice_partition_of("a", 7), 4);
    CHECK_EQ(sluice_partition_of("tenant-42", 64), 10);
    CHECK_EQ(sluice_partition_of("", 5), 1);
    CHECK_EQ(sluice_partition_of("t1", 2), 0);
    CHECK_EQ(sluice_partition_of("t1", 3), 2);
    CHECK_EQ(sluice_partition_of("a", 1), 0);
    CHECK_EQ(sluice_partition_of("a", 0), 0);
}

/* Growing a queue from P to P + 1 partitions moves a tenant only into the new partition, and
 * about 1 in P + 1 of them: the others keep their partition, with their order and limits. */
static void test_partition_growth(void) {
    char t[32];
    for (int parts = 1; parts < SLUICE_PARTITIONS_MAX; parts++) {
        int moved = 0;
        for (int i = 0; i < 2000; i++) {
            snprintf(t, sizeof(t), "tenant-%d", i);
            int before = sluice_partition_of(t, parts), after = sluice_partition_of(t, parts + 1);
            CHECK(before >= 0 && before < parts);
            if (after != before) {
                CHECK_EQ(after, parts);
                moved++;
            }
        }
        /* 2000 / (P + 1) expected; generous bounds */
        CHECK(moved >= 2000 / (parts + 1) / 2 && moved <= 2 * 2000 / (parts + 1) + 10);
    }
}

static void test_bad_names(void) {
    const char *tail = "; allowed: A-Z a-z 0-9 _ . - (and ~N at the end: partition N of a queue, "
                       "1..63)";
    char want[128];
    char *big = malloc(10 * 1024 + 1);
    CHECK(big != NULL);
    NAME_BAD("", "queue name is empty");
    NAME_BAD(NULL, "queue name is missing");
    snprintf(want, sizeof(want), "queue name has ' ' (0x20) at position 2%s", tail);
    NAME_BAD("my queue", want);
    snprintf(want, sizeof(want), "queue name has '{' (0x7b) at position 0%s", tail);
    NAME_BAD("{orders}", want);
    snprintf(want, sizeof(want), "queue name has '}' (0x7d) at position 1%s", tail);
    NAME_BAD("a}b", want);
    snprintf(want, sizeof(want), "queue name has '*' (0x2a) at position 6%s", tail);
    NAME_BAD("orders*", want);
    snprintf(want, sizeof(want), "queue name has ':' (0x3a) at position 6%s", tail);
    NAME_BAD("sluice:x", want);
    snprintf(want, sizeof(want), "queue name has byte 0x0a at position 1%s", tail);
    NAME_BAD("a\nb", want);
    snprintf(want, sizeof(want), "queue name has byte 0xc3 at position 3%s", tail);
    NAME_BAD("caf\xc3\xa9", want);
    memset(big, 'a', 10 * 1024);
    big[10 * 1024] = '\0';
    NAME_BAD(big, "queue name is longer than 64 characters; the limit is 64");
    big[SLUICE_QUEUE_NAME_MAX + 1] = '\0';
    NAME_BAD(big, "queue name is longer than 64 characters; the limit is 64");
    free(big);
    /* an unterminated 65-byte buffer: the check stops at byte 65 (ASan would see more) */
    big = malloc(SLUICE_QUEUE_NAME_MAX + 1);
    CHECK(big != NULL);
    memset(big, 'a', SLUICE_QUEUE_NAME_MAX + 1);
    CHECK_EQ(sluice_queue_name_check(big, err, sizeof(err)), SLUICE_EINVAL);
    free(big);
    /* a short err buffer is cut, not overrun */
    char tiny[6];
    CHECK_EQ(sluice_queue_name_check("a b", tiny, sizeof(tiny)), SLUICE_EINVAL);
    CHECK_STREQ(tiny, "queue");
}

static void test_keys(void) {
    sluice_keys k;
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    CHECK_OK(sluice_keys_init(&k, "orders", err, sizeof(err)), "");
    CHECK_STREQ(k.stream, "sluice:{orders}:stream");
    CHECK_STREQ(k.dead, "sluice:{orders}:dead");
    CHECK_STREQ(k.meta, "sluice:{orders}:meta");
    CHECK_STREQ(k.stats, "sluice:{orders}:stats");
    CHECK_STREQ(k.list, "sluice:{orders}:list");
    CHECK_STREQ(k.procs, "sluice:{orders}:procs");
    CHECK_STREQ(k.prefix, "sluice:{orders}:");
    /* the longest name still fits every key */
    memset(name, 'z', SLUICE_QUEUE_NAME_MAX);
    name[SLUICE_QUEUE_NAME_MAX] = '\0';
    CHECK_OK(sluice_keys_init(&k, name, err, sizeof(err)), "");
    CHECK_EQ(strlen(k.stream), SLUICE_QUEUE_NAME_MAX + strlen("sluice:{}:stream"));
    CHECK_EQ(strlen(k.procs), SLUICE_QUEUE_NAME_MAX + strlen("sluice:{}:procs"));
    CHECK_EQ(sluice_keys_init(&k, "a{b}", err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "'{' (0x7b) at position 1") != NULL);
    CHECK_EQ(sluice_keys_init(NULL, "a", err, sizeof(err)), SLUICE_EINVAL);
    CHECK_EQ(sluice_keys_init(&k, NULL, NULL, 0), SLUICE_EINVAL);
}

/* An HTTP target's hold key: under the queue's hash tag, the target as given, bounded. */
static void test_hold_key(void) {
    sluice_keys k;
    char buf[SLUICE_KEY_MAX + 64];
    CHECK_OK(sluice_keys_init(&k, "notify", err, sizeof(err)), "");
    CHECK_OK(sluice_key_hold(&k, "hooks.example.com:443", 21, buf, sizeof(buf)), "");
    CHECK_STREQ(buf, "sluice:{notify}:hold:hooks.example.com:443");
    CHECK_OK(sluice_key_hold(&k, "[::1]:8080", 10, buf, sizeof(buf)), "");
    CHECK_STREQ(buf, "sluice:{notify}:hold:[::1]:8080");
    CHECK_EQ(sluice_key_hold(&k, "a\0b", 3, buf, sizeof(buf)), SLUICE_EINVAL);
    CHECK_EQ(sluice_key_hold(&k, "hooks.example.com:443", 21, buf, 30), SLUICE_EINVAL);
}

/* Every key of a queue, as docs/data-model.md lists them: the names are the data model, so a
 * change here is a change of the data model (byte for byte). Named kinds with the part "T". */
static const char *const orders_keys[SLUICE_KEY_KINDS_] = {
    [SLUICE_KEY_STREAM] = "sluice:{orders}:stream",
    [SLUICE_KEY_DEAD] = "sluice:{orders}:dead",
    [SLUICE_KEY_META] = "sluice:{orders}:meta",
    [SLUICE_KEY_STATS] = "sluice:{orders}:stats",
    [SLUICE_KEY_LIST] = "sluice:{orders}:list",
    [SLUICE_KEY_PROCS] = "sluice:{orders}:procs",
    [SLUICE_KEY_LIMITS] = "sluice:{orders}:limits",
    [SLUICE_KEY_TDEPTH] = "sluice:{orders}:tdepth",
    [SLUICE_KEY_LANES] = "sluice:{orders}:lanes",
    [SLUICE_KEY_LWAIT] = "sluice:{orders}:lwait",
    [SLUICE_KEY_SERVED] = "sluice:{orders}:served",
    [SLUICE_KEY_RING] = "sluice:{orders}:ring",
    [SLUICE_KEY_DEFICIT] = "sluice:{orders}:deficit",
    [SLUICE_KEY_WEIGHTS] = "sluice:{orders}:weights",
    [SLUICE_KEY_WAKE] = "sluice:{orders}:wake",
    [SLUICE_KEY_LANE] = "sluice:{orders}:lane:T",
    [SLUICE_KEY_PROC] = "sluice:{orders}:proc:T",
    [SLUICE_KEY_IDEM] = "sluice:{orders}:idem:T",
    [SLUICE_KEY_QLIM] = "sluice:{orders}:qlim:T",
    [SLUICE_KEY_LIM] = "sluice:{orders}:lim:T",
    [SLUICE_KEY_HOLD] = "sluice:{orders}:hold:T",
};
/* partition 3 of orders: a queue of its own, with its own hash tag */
static const char *const part3_keys[SLUICE_KEY_KINDS_] = {
    [SLUICE_KEY_STREAM] = "sluice:{orders~3}:stream",
    [SLUICE_KEY_DEAD] = "sluice:{orders~3}:dead",
    [SLUICE_KEY_META] = "sluice:{orders~3}:meta",
    [SLUICE_KEY_STATS] = "sluice:{orders~3}:stats",
    [SLUICE_KEY_LIST] = "sluice:{orders~3}:list",
    [SLUICE_KEY_PROCS] = "sluice:{orders~3}:procs",
    [SLUICE_KEY_LIMITS] = "sluice:{orders~3}:limits",
    [SLUICE_KEY_TDEPTH] = "sluice:{orders~3}:tdepth",
    [SLUICE_KEY_LANES] = "sluice:{orders~3}:lanes",
    [SLUICE_KEY_LWAIT] = "sluice:{orders~3}:lwait",
    [SLUICE_KEY_SERVED] = "sluice:{orders~3}:served",
    [SLUICE_KEY_RING] = "sluice:{orders~3}:ring",
    [SLUICE_KEY_DEFICIT] = "sluice:{orders~3}:deficit",
    [SLUICE_KEY_WEIGHTS] = "sluice:{orders~3}:weights",
    [SLUICE_KEY_WAKE] = "sluice:{orders~3}:wake",
    [SLUICE_KEY_LANE] = "sluice:{orders~3}:lane:T",
    [SLUICE_KEY_PROC] = "sluice:{orders~3}:proc:T",
    [SLUICE_KEY_IDEM] = "sluice:{orders~3}:idem:T",
    [SLUICE_KEY_QLIM] = "sluice:{orders~3}:qlim:T",
    [SLUICE_KEY_LIM] = "sluice:{orders~3}:lim:T",
    [SLUICE_KEY_HOLD] = "sluice:{orders~3}:hold:T",
};

/* Each kind of `k` is want[kind]; the fields of sluice_keys are the same keys; every key is in
 * the slot of `queue` (the hash tag is the queue's name, so a Cluster keeps it in one slot). */
static void check_all_keys(const sluice_keys *k, const char *queue,
                           const char *const want[SLUICE_KEY_KINDS_]) {
    char key[SLUICE_KEY_MAX];
    int slot = sluice__cluster_key_slot(queue, strlen(queue));
    for (int i = 0; i < SLUICE_KEY_KINDS_; i++) {
        sluice_key_kind kind = (sluice_key_kind)i;
        int named = sluice__key_named(kind);
        CHECK_EQ(sluice__key(k, kind, named ? "T" : NULL, named ? 1 : 0, key, sizeof(key)), 0);
        CHECK_STREQ(key, want[i]);
        CHECK_EQ(sluice__cluster_key_slot(key, strlen(key)), slot);
        size_t len = 0;
        char *dup = sluice__key_new(k, kind, named ? "T" : NULL, named ? 1 : 0, &len);
        CHECK_STREQ(dup, want[i]);
        CHECK_EQ(len, strlen(want[i]));
        free(dup);
    }
    CHECK_STREQ(k->stream, want[SLUICE_KEY_STREAM]);
    CHECK_STREQ(k->dead, want[SLUICE_KEY_DEAD]);
    CHECK_STREQ(k->meta, want[SLUICE_KEY_META]);
    CHECK_STREQ(k->stats, want[SLUICE_KEY_STATS]);
    CHECK_STREQ(k->list, want[SLUICE_KEY_LIST]);
    CHECK_STREQ(k->procs, want[SLUICE_KEY_PROCS]);
    CHECK_STREQ(k->limits, want[SLUICE_KEY_LIMITS]);
    CHECK_EQ(strncmp(k->stream, k->prefix, strlen(k->prefix)), 0);
    CHECK_EQ(sluice__cluster_key_slot(k->prefix, strlen(k->prefix)), slot);
}

/* The one table of keys (sluice/keys.h) and the public builders that go through it. */
static void test_key_table(void) {
    sluice_keys k, p;
    char key[SLUICE_KEY_MAX];
    CHECK_OK(sluice_keys_init(&k, "orders", err, sizeof(err)), "");
    CHECK_STREQ(k.prefix, "sluice:{orders}:");
    check_all_keys(&k, "orders", orders_keys);
    /* a partitioned queue: partition 3 has keys of its own in another slot; partition 0 is the
     * queue itself */
    CHECK_EQ(sluice__partition_keys("orders", 3, &p), 0);
    CHECK_STREQ(p.prefix, "sluice:{orders~3}:");
    check_all_keys(&p, "orders~3", part3_keys);
    CHECK(sluice__cluster_key_slot(p.meta, strlen(p.meta)) !=
          sluice__cluster_key_slot(k.meta, strlen(k.meta)));
    CHECK_EQ(sluice__partition_keys("orders", 0, &p), 0);
    CHECK_STREQ(p.meta, "sluice:{orders}:meta");
    CHECK_EQ(sluice__partition_keys("orders", SLUICE_PARTITIONS_MAX, &p), SLUICE_EINVAL);
    CHECK_EQ(sluice__partition_keys("orders~1", 2, &p), SLUICE_EINVAL);
    /* the same names through the public builders */
    CHECK_EQ(sluice_key_proc(&k, "w-1", key, sizeof(key)), 0);
    CHECK_STREQ(key, "sluice:{orders}:proc:w-1");
    CHECK_STREQ(sluice_key_proc_consumer(&k, key), "w-1");
    CHECK_STREQ(sluice_key_proc_consumer(&k, "sluice:{other}:proc:w-1"), "sluice:{other}:proc:w-1");
    CHECK_STREQ(sluice_key_proc_consumer(&k, "sluice:{orders}:procs"), "sluice:{orders}:procs");
    CHECK_EQ(sluice_key_idem(&k, "order-42", 8, key, sizeof(key)), 0);
    CHECK_STREQ(key, "sluice:{orders}:idem:order-42");
    CHECK_EQ(sluice_key_limit(&k, "api:7", 5, key, sizeof(key)), 0);
    CHECK_STREQ(key, "sluice:{orders}:lim:api:7");
    CHECK_EQ(sluice_key_queue_limit(&k, "api", "gcra", "t1", 2, key, sizeof(key)), 0);
    CHECK_STREQ(key, "sluice:{orders}:qlim:api:gcra:t1");
    CHECK_EQ(sluice_key_queue_limit(&k, "all", "window", NULL, 0, key, sizeof(key)), 0);
    CHECK_STREQ(key, "sluice:{orders}:qlim:all:window:");
    CHECK_EQ(sluice_key_queue_limit(&k, "c", "gcra", "ip:127.0.0.1", 12, key, sizeof(key)), 0);
    CHECK_STREQ(key, "sluice:{orders}:qlim:c:gcra:ip:127.0.0.1");
    /* refused: a part with a NUL, a key that does not fit, a part where none belongs */
    CHECK_EQ(sluice_key_idem(&k, "a\0b", 3, key, sizeof(key)), SLUICE_EINVAL);
    CHECK_EQ(sluice_key_queue_limit(&k, "n", "gcra", "a\0b", 3, key, sizeof(key)), SLUICE_EINVAL);
    CHECK_EQ(sluice_key_idem(&k, "order-42", 8, key, 20), SLUICE_EINVAL);
    CHECK_EQ(sluice_key_queue_limit(&k, "api", "gcra", "t1", 2, key, 30), SLUICE_EINVAL);
    CHECK_EQ(sluice__key(&k, SLUICE_KEY_META, "x", 1, key, sizeof(key)), SLUICE_EINVAL);
    CHECK_EQ(sluice__key(&k, SLUICE_KEY_KINDS_, NULL, 0, key, sizeof(key)), SLUICE_EINVAL);
    CHECK(sluice__key_suffix(SLUICE_KEY_KINDS_) == NULL);
    CHECK(sluice__key_new(&k, SLUICE_KEY_WAKE, "x", 1, NULL) == NULL);
    /* a lane of any length: a tenant longer than SLUICE_KEY_MAX */
    char tenant[300];
    memset(tenant, 't', sizeof(tenant));
    size_t len = 0;
    char *lane = sluice__key_new(&k, SLUICE_KEY_LANE, tenant, sizeof(tenant), &len);
    CHECK(lane != NULL);
    CHECK_EQ(len, strlen("sluice:{orders}:lane:") + sizeof(tenant));
    CHECK_EQ(strncmp(lane, "sluice:{orders}:lane:ttt", 24), 0);
    CHECK_EQ(strlen(sluice__key_part(&k, SLUICE_KEY_LANE, lane)), sizeof(tenant));
    free(lane);
    /* a tenant may hold any byte, NUL too (valid UTF-8): its lane key is binary-safe */
    lane = sluice__key_new(&k, SLUICE_KEY_LANE, "a\0b", 3, &len);
    CHECK(lane != NULL);
    CHECK_EQ(len, strlen("sluice:{orders}:lane:") + 3);
    CHECK_EQ(memcmp(lane, "sluice:{orders}:lane:a\0b", len + 1), 0);
    free(lane);
}

static void test_backend(void) {
    sluice_backend b = SLUICE_BACKEND_LIST;
    CHECK_OK(sluice_backend_parse("stream", &b), "");
    CHECK_EQ(b, SLUICE_BACKEND_STREAM);
    CHECK_OK(sluice_backend_parse("list", &b), "");
    CHECK_EQ(b, SLUICE_BACKEND_LIST);
    CHECK_EQ(sluice_backend_parse("Stream", &b), SLUICE_EINVAL);
    CHECK_EQ(sluice_backend_parse("", &b), SLUICE_EINVAL);
    CHECK_EQ(sluice_backend_parse(NULL, &b), SLUICE_EINVAL);
    CHECK_EQ(sluice_backend_parse("list", NULL), SLUICE_EINVAL);
    CHECK_EQ(b, SLUICE_BACKEND_LIST);
    CHECK_STREQ(sluice_backend_name(SLUICE_BACKEND_STREAM), "stream");
    CHECK_STREQ(sluice_backend_name(SLUICE_BACKEND_LIST), "list");
    CHECK_STREQ(sluice_backend_name((sluice_backend)7), "unknown");
}

/* docs/faults.md B16: the one capacity rule, the same as the server functions' */
static void test_capacity(void) {
    static const char *const bad[] = {"2.5",
                                      "1e30",
                                      "inf",
                                      "nan",
                                      "0x10",
                                      "-1",
                                      "+5",
                                      " 5",
                                      "5 ",
                                      "",
                                      "9007199254740993",
                                      "9223372036854775807",
                                      "00000000000000001"};
    long long v = -7;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ(sluice_capacity_parse(bad[i], strlen(bad[i]), &v), SLUICE_ECONFIG);
        CHECK_EQ(v, -7); /* untouched on failure */
    }
    CHECK_EQ(sluice_capacity_parse(NULL, 0, &v), SLUICE_ECONFIG);
    CHECK_EQ(sluice_capacity_parse("0", 1, &v), 0);
    CHECK_EQ(v, 0);
    CHECK_EQ(sluice_capacity_parse("010", 3, &v), 0);
    CHECK_EQ(v, 10);
    CHECK_EQ(sluice_capacity_parse("9007199254740992", 16, &v), 0);
    CHECK_EQ(v, SLUICE_CAPACITY_MAX);
    CHECK_EQ(sluice_capacity_parse("12345", 3, &v), 0); /* only len bytes are read */
    CHECK_EQ(v, 123);
}

int main(void) {
    test_capacity();
    test_good_names();
    test_partition_names();
    test_partition_growth();
    test_bad_names();
    test_keys();
    test_hold_key();
    test_key_table();
    test_backend();
    printf("test_queue: 6 groups passed\n");
    return 0;
}
