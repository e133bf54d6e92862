/* SPDX-License-Identifier: MIT */
/*
 * drain.h - drain-rate estimate and Retry-After.
 *
 * Fed with samples of the queue's monotonic `acked` counter and the time they were taken, it
 * keeps a smoothed acks-per-second rate (exponentially weighted, samples closer than
 * `min_interval_ms` are merged) and turns it into a Retry-After: the seconds until
 * (depth - capacity + 1) more entries have drained, rounded up, at least 1, at most `max_s`
 * (also the answer while nothing drains and while no rate is known yet: a client told "1"
 * before anything was measured would come straight back into a full bucket). Pure: no I/O, no clock
 * of its own.
 */
#ifndef SLUICE_DRAIN_H
#define SLUICE_DRAIN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_drain {
    uint64_t last_ms; /* time of the last accepted sample, 0 = none yet */
    long long last_acked;
    double rate;              /* acks per second, smoothed; < 0 = unknown */
    double alpha;             /* weight of a new sample, default 0.3 */
    unsigned min_interval_ms; /* default 250 */
    unsigned max_s;           /* ceiling of retry_after, default 60 */
} sluice_drain;

void sluice_drain_init(sluice_drain *d);

/* Adds a sample: the `acked` counter read at `now_ms`. A counter that went backwards (the
 * queue was purged or Redis lost its data) restarts the estimate. */
void sluice_drain_sample(sluice_drain *d, uint64_t now_ms, long long acked);

/* Seconds to wait before retrying when depth >= capacity. 1..max_s. Unknown rate: max_s. */
unsigned sluice_drain_retry_after(const sluice_drain *d, long long depth, long long capacity);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_DRAIN_H */
