/* SPDX-License-Identifier: MIT */
/*
 * test_adaptive.c - the adaptive concurrency limit (worker/src/adaptive.c) against a simulated
 * back end: C slots serving a request in S ms each (+-10 %), a FIFO queue in front of them, and
 * a client that always has work and keeps `limit` requests in flight. The limit must settle
 * near C (never far below: the slots stay busy; never far above: little queueing), follow C
 * as it changes 8 -> 16 -> 4, stay within its bounds and a cap, and not grow while there is
 * too little work to use it. No network, no clock: simulated time.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "adaptive.h"
#include "harness.h"

#define MS       1000000ull
#define MAXSLOTS 64
#define MAXREQ   4096

typedef struct sim {
    sluice__adaptive a;
    uint64_t now;
    int slots;
    uint64_t slot_free[MAXSLOTS]; /* when each slot is free */
    uint64_t issue[MAXREQ];       /* FIFO of requests out: when issued ... */
    uint64_t done[MAXREQ];        /* ... and when they complete */
    size_t head, n;               /* ring */
    uint32_t rng;
    unsigned long long served;     /* completions since the last measure */
    unsigned long long inside_sum; /* sum of requests inside the back end, per completion */
    int inside[MAXREQ];            /* inside the back end at each completion (for a median) */
    size_t ninside;
} sim;

static uint64_t service(sim *s) {
    s->rng = s->rng * 1103515245u + 12345u;
    return 25 * MS * (90 + (s->rng >> 16) % 21) / 100; /* 25 ms +-10 % */
}

static void sim_init(sim *s, int slots, int min, int max) {
    memset(s, 0, sizeof(*s));
    s->now = 1000 * MS;
    s->slots = slots;
    s->rng = 7;
    sluice__adaptive_init(&s->a, min, max, s->now, 42);
}

static void set_slots(sim *s, int slots) {
    for (int i = s->slots; i < slots; i++) {
        s->slot_free[i] = s->now;
    }
    s->slots = slots; /* shrinking: the others finish what they serve and take no more */
}

static void issue(sim *s) {
    int best = 0;
    for (int i = 1; i < s->slots; i++) {
        if (s->slot_free[i] < s->slot_free[best]) {
            best = i;
        }
    }
    uint64_t begin = s->slot_free[best] > s->now ? s->slot_free[best] : s->now;
    s->slot_free[best] = begin + service(s);
    size_t k = (s->head + s->n) % MAXREQ;
    s->issue[k] = s->now;
    s->done[k] = s->slot_free[best];
    s->n++;
}

/* Runs for `ms` of simulated time with at most `demand` requests wanted (0 = unbounded). */
static void run(sim *s, uint64_t ms, int demand) {
    uint64_t end = s->now + ms * MS;
    while (s->now < end) {
        int limit = sluice__adaptive_limit(&s->a);
        while ((int)s->n < limit && (demand == 0 || (int)s->n < demand) && s->n < MAXREQ) {
            issue(s);
        }
        /* the earliest completion (FIFO per slot; with jitter not quite in issue order) */
        size_t best = 0;
        for (size_t i = 1; i < s->n; i++) {
            if (s->done[(s->head + i) % MAXREQ] < s->done[(s->head + best) % MAXREQ]) {
                best = i;
            }
        }
        size_t k = (s->head + best) % MAXREQ;
        uint64_t is = s->issue[k], dn = s->done[k];
        int inflight = (int)s->n;
        /* remove it: move the head into its place */
        s->issue[k] = s->issue[s->head];
        s->done[k] = s->done[s->head];
        s->head = (s->head + 1) % MAXREQ;
        s->n--;
        s->now = dn;
        s->served++;
        s->inside_sum += (unsigned long long)inflight;
        if (s->ninside < MAXREQ) {
            s->inside[s->ninside++] = inflight;
        }
        sluice__adaptive_sample(&s->a, is, dn, inflight);
    }
}

static int median_inside(sim *s) {
    int *v = s->inside;
    size_t n = s->ninside;
    for (size_t i = 1; i < n; i++) { /* insertion sort: a few thousand values */
        int x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--) {
            v[j] = v[j - 1];
        }
        v[j] = x;
    }
    return n ? v[n / 2] : 0;
}

static void measure_reset(sim *s) {
    s->served = 0;
    s->inside_sum = 0;
    s->ninside = 0;
}

/* Settled at C slots: throughput near C / 25 ms, median inside the back end <= 2 C. */
static void check_settled(sim *s, int slots, uint64_t ms) {
    measure_reset(s);
    run(s, ms, 0);
    double rate = (double)s->served * 1000.0 / (double)ms, best = slots * 1000.0 / 25.0;
    int med = median_inside(s), limit = sluice__adaptive_limit(&s->a);
    printf("  slots %2d: limit %3d, %.0f/s of %.0f/s, median inside %d\n", slots, limit, rate, best,
           med);
    CHECK(rate >= 0.85 * best);
    CHECK(med <= 2 * slots);
    CHECK(limit >= slots * 3 / 4 && limit <= 2 * slots);
}

static void test_converges_and_follows(void) {
    static sim s;
    sim_init(&s, 8, 1, 256);
    run(&s, 3000, 0); /* the first probe and the climb */
    check_settled(&s, 8, 5000);
    set_slots(&s, 16);
    run(&s, 5000, 0); /* follows within 5 s */
    CHECK(sluice__adaptive_limit(&s.a) >= 16);
    check_settled(&s, 16, 5000);
    set_slots(&s, 4);
    run(&s, 5000, 0);
    CHECK(sluice__adaptive_limit(&s.a) <= 8);
    check_settled(&s, 4, 5000);
    /* through several probes (every ~30 s) the throughput stays */
    measure_reset(&s);
    run(&s, 65000, 0);
    CHECK((double)s.served / 65.0 >= 0.85 * 4 * 1000 / 25.0);
}

static void test_bounds(void) {
    static sim s;
    sim_init(&s, 64, 2, 10); /* the back end could take 64: MAX holds it at 10 */
    run(&s, 5000, 0);
    CHECK_EQ(sluice__adaptive_limit(&s.a), 10);
    sim_init(&s, 1, 5, 50); /* one slot: MIN holds it near 5, never below */
    for (int i = 0; i < 50; i++) {
        run(&s, 100, 0);
        CHECK(sluice__adaptive_limit(&s.a) >= 5);
    }
    CHECK(sluice__adaptive_limit(&s.a) <= 8);
    sim_init(&s, 64, 1, 256);
    run(&s, 3000, 0);
    sluice__adaptive_cap(&s.a, 6); /* an inflight limit held the worker at 6 */
    CHECK(sluice__adaptive_limit(&s.a) <= 6);
    run(&s, 5000, 0);
    CHECK(sluice__adaptive_limit(&s.a) <= 6);
    sluice__adaptive_cap(&s.a, 0);
    run(&s, 3000, 0);
    CHECK(sluice__adaptive_limit(&s.a) > 6);
}

/* Only 3 requests of work at a time: the limit does not run away to MAX. */
static void test_app_limited(void) {
    static sim s;
    sim_init(&s, 64, 1, 256);
    run(&s, 10000, 3);
    CHECK(sluice__adaptive_limit(&s.a) <= 8);
}

int main(void) {
    test_converges_and_follows();
    test_bounds();
    test_app_limited();
    printf("test_adaptive: 3 groups passed\n");
    return 0;
}
