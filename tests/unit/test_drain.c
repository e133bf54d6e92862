/* SPDX-License-Identifier: MIT */
/*
 * test_drain.c - the drain-rate estimator and the Retry-After it gives: the ceiling while no
 * rate is known or nothing drains, (depth - capacity + 1) / rate rounded up otherwise, samples
 * closer than min_interval_ms merged, a counter going backwards restarting the estimate.
 */
#include <stdio.h>

#include "harness.h"
#include "drain.h"

int main(void) {
    sluice_drain d;
    sluice_drain_init(&d);
    d.max_s = 30;
    /* nothing measured yet: the ceiling, never "1" (the first 429 of a fresh producer) */
    CHECK_EQ(sluice_drain_retry_after(&d, 1000, 1000), 30);
    sluice_drain_sample(&d, 1000, 0);
    CHECK_EQ(sluice_drain_retry_after(&d, 1000, 1000), 30); /* one sample is no rate */
    sluice_drain_sample(&d, 1100, 50);                      /* closer than 250 ms: merged */
    CHECK(d.rate < 0);
    sluice_drain_sample(&d, 2000, 100); /* 100 acks in 1 s */
    CHECK(d.rate > 99.9 && d.rate < 100.1);
    CHECK_EQ(sluice_drain_retry_after(&d, 1000, 1000), 1);    /* 1 / 100 rounds up to 1 */
    CHECK_EQ(sluice_drain_retry_after(&d, 1249, 1000), 3);    /* 250 / 100 = 2.5 -> 3 */
    CHECK_EQ(sluice_drain_retry_after(&d, 100000, 1000), 30); /* capped */
    /* smoothing: a second second at 300/s moves the rate by alpha (0.3) */
    sluice_drain_sample(&d, 3000, 400);
    CHECK(d.rate > 159.9 && d.rate < 160.1);
    /* nothing drains: each second without acks decays the rate; at 0, the ceiling */
    sluice_drain_sample(&d, 4000, 400);
    CHECK(d.rate > 111.9 && d.rate < 112.1);
    sluice_drain rate0 = d;
    rate0.rate = 0;
    CHECK_EQ(sluice_drain_retry_after(&rate0, 1000, 1000), 30);
    /* the counter went backwards (purge, data loss): unknown again, so the ceiling */
    sluice_drain_sample(&d, 61000, 5);
    CHECK(d.rate < 0);
    CHECK_EQ(sluice_drain_retry_after(&d, 1000, 1000), 30);
    printf("test_drain: ok\n");
    return 0;
}
