/* SPDX-License-Identifier: MIT */
/* drain.c - drain-rate estimate and Retry-After (see drain.h). */
#include <math.h>

#include "drain.h"

void sluice_drain_init(sluice_drain *d) {
    d->last_ms = 0;
    d->last_acked = 0;
    d->rate = -1.0;
    d->alpha = 0.3;
    d->min_interval_ms = 250;
    d->max_s = 60;
}

void sluice_drain_sample(sluice_drain *d, uint64_t now_ms, long long acked) {
    if (d->last_ms == 0 || acked < d->last_acked || now_ms < d->last_ms) {
        d->last_ms = now_ms == 0 ? 1 : now_ms;
        d->last_acked = acked;
        d->rate = -1.0;
        return;
    }
    uint64_t dt = now_ms - d->last_ms;
    if (dt < d->min_interval_ms) {
        return;
    }
    double r = (double)(acked - d->last_acked) * 1000.0 / (double)dt;
    d->rate = d->rate < 0 ? r : d->alpha * r + (1.0 - d->alpha) * d->rate;
    d->last_ms = now_ms;
    d->last_acked = acked;
}

unsigned sluice_drain_retry_after(const sluice_drain *d, long long depth, long long capacity) {
    long long need = depth - capacity + 1;
    if (need < 1) {
        need = 1;
    }
    if (d->rate < 1e-9) { /* unknown (nothing measured yet) or nothing drains */
        return d->max_s;
    }
    double s = ceil((double)need / d->rate);
    if (s < 1) {
        return 1;
    }
    if (s > d->max_s) {
        return d->max_s;
    }
    return (unsigned)s;
}
