/* SPDX-License-Identifier: MIT */
/*
 * test_partition_route.c - where the producers send a message on a partitioned queue
 * (producer/src/route.c, used by the blocking and the async producer alike): one partition or an
 * idempotency key to partition 0, a tenant to its own partition only, any other message to the
 * emptier of two partitions drawn from the producer's seeded random source, the other one to try
 * when that is full. No network.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "route.h"
#include "sluice/queue.h"

#define SEED 12345u

static sluice__route route(const char *tenant, const char *key, int parts, const long long *depth,
                           unsigned *rnd) {
    sluice_message m = {"x", 1, NULL, 0, tenant, key, NULL};
    return sluice__route_message(&m, parts, depth, rnd);
}

/* partitions and tenants of the queue below */
static const long long flat[SLUICE_PARTITIONS_MAX];
static const char *const tenants[] = {"acme", "globex", "initech", "t1", "t2", "a"};

static void test_one_partition(void) {
    for (int parts = -1; parts <= 1; parts++) {
        for (int k = 0; k < 4; k++) {
            unsigned rnd = SEED;
            sluice__route r = route(k & 1 ? "acme" : NULL, k & 2 ? "key" : NULL, parts, flat, &rnd);
            CHECK_EQ(r.part, 0);
            CHECK_EQ(r.alt, 0);
            CHECK_EQ(rnd, SEED); /* nothing drawn */
        }
    }
}

/* An idempotency key goes to partition 0, the one place it is looked up, whatever its tenant
 * and however deep partition 0 is. */
static void test_idempotency_key(void) {
    long long depth[8] = {1000000, 0, 0, 0, 0, 0, 0, 0};
    for (int parts = 2; parts <= 8; parts++) {
        for (size_t t = 0; t < sizeof(tenants) / sizeof(tenants[0]); t++) {
            unsigned rnd = SEED;
            sluice__route r = route(tenants[t], "order-17", parts, depth, &rnd);
            CHECK_EQ(r.part, 0);
            CHECK_EQ(r.alt, 0);
            r = route(NULL, "order-17", parts, depth, &rnd);
            CHECK_EQ(r.part, 0);
            CHECK_EQ(r.alt, 0);
            CHECK_EQ(rnd, SEED);
        }
    }
}

/* A tenant's messages go to sluice_partition_of(tenant) and nowhere else (no second try), deep
 * or not: its order and its limits stay in one partition. */
static void test_tenant(void) {
    long long deep[SLUICE_PARTITIONS_MAX];
    for (int i = 0; i < SLUICE_PARTITIONS_MAX; i++) {
        deep[i] = 1000LL * i;
    }
    static const int counts[] = {2, 3, 5, 16, SLUICE_PARTITIONS_MAX};
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        for (size_t t = 0; t < sizeof(tenants) / sizeof(tenants[0]); t++) {
            unsigned rnd = SEED;
            int want = sluice_partition_of(tenants[t], counts[c]);
            sluice__route r = route(tenants[t], NULL, counts[c], deep, &rnd);
            CHECK_EQ(r.part, want);
            CHECK_EQ(r.alt, want);
            r = route(tenants[t], NULL, counts[c], flat, &rnd);
            CHECK_EQ(r.part, want);
            CHECK_EQ(rnd, SEED);
        }
    }
}

/* The two candidates a producer seeded with `seed` draws on `parts` partitions, and its state
 * after them. */
static void candidates(unsigned seed, int parts, int *a, int *b, unsigned *after) {
    *after = seed;
    *a = (int)(rand_r(after) % (unsigned)parts);
    *b = (int)(rand_r(after) % (unsigned)parts);
}

/* Any other message: candidates a then b from the seeded source; the emptier first (a on a
 * tie), the other as the second try; exactly two draws. */
static void test_emptier_of_two(void) {
    long long up[8], down[8];
    for (int i = 0; i < 8; i++) {
        up[i] = 10LL * i;     /* the lower index is the emptier */
        down[i] = 80 - up[i]; /* the higher index is the emptier */
    }
    int distinct = 0;
    for (unsigned seed = 1; seed <= 200; seed++) {
        for (int parts = 2; parts <= 8; parts++) {
            int a, b;
            unsigned after, rnd = seed;
            candidates(seed, parts, &a, &b, &after);
            distinct += a != b;
            sluice__route r = route(NULL, NULL, parts, flat, &rnd);
            CHECK_EQ(r.part, a); /* a tie: the first drawn */
            CHECK_EQ(r.alt, b);
            CHECK_EQ(rnd, after);
            rnd = seed;
            r = route(NULL, NULL, parts, up, &rnd);
            CHECK_EQ(r.part, a < b ? a : b);
            CHECK_EQ(r.alt, a < b ? b : a);
            CHECK_EQ(rnd, after);
            rnd = seed;
            r = route(NULL, NULL, parts, down, &rnd);
            CHECK_EQ(r.part, a > b ? a : b);
            CHECK_EQ(r.alt, a > b ? b : a);
            CHECK_EQ(rnd, after);
        }
    }
    CHECK(distinct > 0); /* the seeds above draw two different partitions too */
    /* the same seed routes the same way; the state goes on to other candidates */
    unsigned r1 = SEED, r2 = SEED;
    sluice__route x = route(NULL, NULL, 8, up, &r1), y = route(NULL, NULL, 8, up, &r2);
    CHECK_EQ(x.part, y.part);
    CHECK_EQ(x.alt, y.alt);
    CHECK_EQ(r1, r2);
}

/* One deep partition among empty ones is tried first only when both candidates are it; every
 * other partition takes a share. */
static void test_deep_partition_avoided(void) {
    long long depth[4] = {0, 0, 500, 0};
    int first[4] = {0, 0, 0, 0};
    unsigned rnd = SEED;
    for (int i = 0; i < 400; i++) {
        sluice__route r = route(NULL, NULL, 4, depth, &rnd);
        CHECK(r.part >= 0 && r.part < 4 && r.alt >= 0 && r.alt < 4);
        if (r.part == 2) {
            CHECK_EQ(r.alt, 2);
        }
        first[r.part]++;
    }
    CHECK(first[0] > 0 && first[1] > 0 && first[3] > 0);
    CHECK(first[2] < first[0] && first[2] < first[1] && first[2] < first[3]);
}

int main(void) {
    test_one_partition();
    test_idempotency_key();
    test_tenant();
    test_emptier_of_two();
    test_deep_partition_avoided();
    printf("test_partition_route: ok\n");
    return 0;
}
