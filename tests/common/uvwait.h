/* SPDX-License-Identifier: MIT */
/*
 * uvwait.h - bounded waiting on a libuv loop for the async tests: WAIT(cond) runs the test's
 * loop until `cond` holds and fails the test after WAIT_MS; run_for(ms) runs it for a while.
 * Include it in one test file; it defines the test's `loop` and its watchdog timer (the test
 * initializes both: uv_loop_init(&loop), uv_timer_init(&loop, &watchdog)).
 */
#ifndef SLUICE_UVWAIT_H
#define SLUICE_UVWAIT_H

#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#define WAIT_MS 10000

static uv_loop_t loop;
static uv_timer_t watchdog;
static int watchdog_fired;

static void on_watchdog(uv_timer_t *t) {
    (void)t;
    watchdog_fired = 1;
}

/* Runs the loop until `cond` holds; fails the test after WAIT_MS. */
#define WAIT(cond)                                                                                 \
    do {                                                                                           \
        watchdog_fired = 0;                                                                        \
        uv_timer_start(&watchdog, on_watchdog, WAIT_MS, 0);                                        \
        while (!(cond) && !watchdog_fired) {                                                       \
            uv_run(&loop, UV_RUN_ONCE);                                                            \
        }                                                                                          \
        uv_timer_stop(&watchdog);                                                                  \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: timed out waiting for %s\n", __FILE__, __LINE__, #cond);       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Runs the loop for `ms` milliseconds. */
static inline void run_for(int ms) {
    watchdog_fired = 0;
    uv_timer_start(&watchdog, on_watchdog, (uint64_t)ms, 0);
    while (!watchdog_fired) {
        uv_run(&loop, UV_RUN_ONCE);
    }
}

#endif
