/* SPDX-License-Identifier: MIT */
/*
 * adaptive.h - an adaptive concurrency limit: how many messages a worker lets into its handler
 * at once, from the handler's latency alone (a gradient limit, after the idea of Netflix's
 * Gradient2 and Envoy's adaptive concurrency filter).
 *
 * It keeps the no-load latency of the back end (measured in a probe at the lowest limit, at
 * start and again every ~30 s, and lowered whenever a window is faster) and, per window of about
 * one limit's worth of samples, compares the window's median latency with it: while the
 * latency stays within a tolerance of the no-load latency the limit grows (doubling until the
 * first rise, then by a headroom of about sqrt(limit)/2 per window); once queueing inside the
 * back end raises the latency, the limit shrinks in proportion. It settles a little above the
 * back end's own concurrency, where the latency just starts to rise.
 *
 * Pure: no I/O, no clock (the caller passes times in ns), no allocation; the worker owns the
 * wiring (worker.c, jobs.c). Not thread-safe: one worker's loop thread.
 */
#ifndef SLUICE_ADAPTIVE_H
#define SLUICE_ADAPTIVE_H

#include <stdint.h>

#define SLUICE_ADAPTIVE_WINDOW_MAX 64 /* latencies kept per window for its median */

typedef struct sluice__adaptive {
    int min, max;               /* bounds of the limit */
    double limit;               /* current limit (the caller uses its integer part) */
    double resume;              /* the limit before the probe */
    int probing;                /* 1: the limit is `min` to measure the no-load latency */
    int slow_start;             /* 1: doubling until the latency first rises */
    uint64_t phase_start_ns;    /* when the probe (or the run after it) began */
    uint64_t next_probe_ns;     /* when the next probe starts */
    uint64_t probe_interval_ns; /* between probes (jittered per instance) */
    double noload_ns;           /* no-load latency, 0 = not measured yet */
    int cap;                    /* an outside bound (the queue's inflight limit), 0 = none */
    /* the current window */
    uint64_t win_start_ns;
    int win_n;        /* samples in it */
    int win_inflight; /* the most in flight seen at a sample of it */
    double win_lat[SLUICE_ADAPTIVE_WINDOW_MAX];
} sluice__adaptive;

/* Starts with a probe at `min`. 1 <= min <= max. `seed` spreads the probes of several
 * instances (a pid, a partition number). */
void sluice__adaptive_init(sluice__adaptive *a, int min, int max, uint64_t now_ns, unsigned seed);

/* One job's latency: it entered the handler at start_ns and its verdict came at end_ns (now);
 * in_flight = jobs in the handler just before it ended (itself included). */
void sluice__adaptive_sample(sluice__adaptive *a, uint64_t start_ns, uint64_t end_ns,
                             int in_flight);

/* The current limit: an integer in [min, max], at most the cap. */
int sluice__adaptive_limit(const sluice__adaptive *a);

/* Something outside (the queue's `inflight` limit) held this worker at n jobs: the limit does
 * not grow above max(n, min) until the next probe (which lifts it: the limit may have been raised);
 * n = 0 lifts it now. */
void sluice__adaptive_cap(sluice__adaptive *a, int n);

#endif
