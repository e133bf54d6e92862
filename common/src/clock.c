/* SPDX-License-Identifier: MIT */
/*
 * clock.c - the monotonic and wall clocks of clock.h.
 */
#include <time.h>

#include "sluice/clock.h"

static uint64_t clock_ns(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) {
        return 0;
    }
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sluice_now_ns(void) {
    return clock_ns(CLOCK_MONOTONIC);
}

uint64_t sluice_now_ms(void) {
    return clock_ns(CLOCK_MONOTONIC) / 1000000u;
}

uint64_t sluice_wall_ms(void) {
    return clock_ns(CLOCK_REALTIME) / 1000000u;
}
