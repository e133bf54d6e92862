/* SPDX-License-Identifier: MIT */
/*
 * adaptive.c - the gradient concurrency limit of adaptive.h: probes for the no-load latency,
 * then windows of latency samples that grow or shrink the limit.
 */
#include <string.h>

#include "adaptive.h"

#define PROBE_INTERVAL_NS 30000000000ull /* a probe every 30 s, +0..10 % per instance */
#define PROBE_SAMPLES     10             /* latencies that make a probe */
#define PROBE_MAX_NS      2000000000ull  /* ... or this long, once one came */
#define WINDOW_MIN        4              /* samples of a window at least */
#define WINDOW_MAX_NS     1000000000ull  /* a window ends after this with any sample */
#define TOLERANCE         0.3  /* latency up to (1 + TOLERANCE) x no-load is "no queueing" */
#define SMOOTH_UP         0.25 /* share of a window's new limit taken when growing */
#define SMOOTH_DOWN       0.5  /* ... when shrinking: back off faster than it grows */
#define GRADIENT_MIN      0.5  /* a window at most halves the limit */

static double clampd(double v, double lo, double hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* sqrt by Newton's method: the library links no libm for one root of a small number */
static double root(double x) {
    double r = x > 1 ? x : 1;
    for (int i = 0; i < 30 && x > 0; i++) {
        r = (r + x / r) / 2;
    }
    return x > 0 ? r : 0;
}

static void window_reset(sluice__adaptive *a, uint64_t now) {
    a->win_start_ns = now;
    a->win_n = 0;
    a->win_inflight = 0;
}

static void probe_start(sluice__adaptive *a, uint64_t now) {
    a->probing = 1;
    a->resume = a->limit;
    a->limit = a->min;
    a->cap = 0; /* an inflight limit may have been raised meanwhile: find it again */
    a->phase_start_ns = now;
    window_reset(a, now);
}

void sluice__adaptive_init(sluice__adaptive *a, int min, int max, uint64_t now_ns, unsigned seed) {
    memset(a, 0, sizeof(*a));
    a->min = min < 1 ? 1 : min;
    a->max = max < a->min ? a->min : max;
    a->limit = a->min;
    a->slow_start = 1;
    /* spread the probes of several workers: 30 s plus 0..10 % by the seed */
    unsigned h = seed * 2654435761u;
    a->probe_interval_ns = PROBE_INTERVAL_NS + PROBE_INTERVAL_NS / 10 * (h % 1000) / 1000;
    probe_start(a, now_ns);
    a->resume = a->min;
}

/* Median of the window's kept latencies (insertion sort of at most WINDOW_MAX). */
static double window_median(sluice__adaptive *a) {
    int n = a->win_n < SLUICE_ADAPTIVE_WINDOW_MAX ? a->win_n : SLUICE_ADAPTIVE_WINDOW_MAX;
    double *v = a->win_lat;
    for (int i = 1; i < n; i++) {
        double x = v[i];
        int j = i - 1;
        for (; j >= 0 && v[j] > x; j--) {
            v[j + 1] = v[j];
        }
        v[j + 1] = x;
    }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void probe_end(sluice__adaptive *a, uint64_t now) {
    a->noload_ns = window_median(a);
    a->probing = 0;
    a->limit = a->resume;
    a->phase_start_ns = now;
    a->next_probe_ns = now + a->probe_interval_ns;
    window_reset(a, now);
}

/* A window closed with median latency `lat`: the new limit. */
static void window_end(sluice__adaptive *a, double lat, uint64_t now) {
    if (a->noload_ns <= 0 || lat < a->noload_ns) {
        a->noload_ns = lat; /* the back end got faster */
    }
    double target = a->noload_ns * (1 + TOLERANCE);
    double l = a->limit;
    if (lat > target) {
        a->slow_start = 0;
        if (l <= a->min) {
            /* at the lowest limit and still slow: that is the no-load latency now */
            a->noload_ns = lat;
        } else {
            double g = clampd(target / lat, GRADIENT_MIN, 1.0);
            double next = l * g + root(l) / 2;
            l = next < l ? l + SMOOTH_DOWN * (next - l) : l;
        }
    } else if (a->win_inflight * 2 >= (int)l) {
        /* no queueing seen, and the limit was in use (not held back by a lack of work) */
        l = a->slow_start ? l * 2 : l + SMOOTH_UP * root(l);
    }
    a->limit = clampd(l, a->min, a->max);
    if (a->cap > 0 && a->limit > a->cap) {
        a->limit = a->cap < a->min ? a->min : a->cap;
    }
    window_reset(a, now);
    if (now >= a->next_probe_ns) {
        probe_start(a, now);
    }
}

void sluice__adaptive_sample(sluice__adaptive *a, uint64_t start_ns, uint64_t end_ns,
                             int in_flight) {
    if (start_ns < a->phase_start_ns || end_ns < start_ns) {
        return; /* started under another limit (before the probe, or during it) */
    }
    if (a->win_n < SLUICE_ADAPTIVE_WINDOW_MAX) {
        a->win_lat[a->win_n] = (double)(end_ns - start_ns);
    }
    a->win_n++;
    if (in_flight > a->win_inflight) {
        a->win_inflight = in_flight;
    }
    uint64_t age = end_ns - a->win_start_ns;
    if (a->probing) {
        if (a->win_n >= PROBE_SAMPLES || age >= PROBE_MAX_NS) {
            probe_end(a, end_ns);
        }
        return;
    }
    int want = (int)a->limit < WINDOW_MIN ? WINDOW_MIN : (int)a->limit;
    if (want > SLUICE_ADAPTIVE_WINDOW_MAX) {
        want = SLUICE_ADAPTIVE_WINDOW_MAX;
    }
    if (a->win_n >= want || age >= WINDOW_MAX_NS) {
        window_end(a, window_median(a), end_ns);
    }
}

int sluice__adaptive_limit(const sluice__adaptive *a) {
    int l = (int)a->limit;
    return l < a->min ? a->min : l > a->max ? a->max : l;
}

void sluice__adaptive_cap(sluice__adaptive *a, int n) {
    a->cap = n;
    if (n > 0 && a->limit > n) {
        a->limit = n < a->min ? a->min : n;
    }
}
