/* SPDX-License-Identifier: MIT */
/*
 * clock.h - the clocks of the libraries and the binaries: monotonic for deadlines, backoff and
 * durations, wall for timestamps a person or another process reads. Internal to sluice (not
 * installed); pure, thread-safe. A failing clock_gettime reads as 0.
 */
#ifndef SLUICE_CLOCK_H
#define SLUICE_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t sluice_now_ns(void);
uint64_t sluice_now_ms(void);

/* Wall clock in milliseconds since the epoch. */
uint64_t sluice_wall_ms(void);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_CLOCK_H */
