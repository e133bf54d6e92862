/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - sluice-worker's Prometheus endpoint (GET /metrics on --metrics HOST:PORT).
 */
#ifndef SLUICE_WORKER_METRICS_H
#define SLUICE_WORKER_METRICS_H

#include <stddef.h>

#include <uv.h>

#include "sluice/worker.h"
#include "sluice/worker_http.h"

typedef struct sluice_metrics sluice_metrics;

/* Starts listening on `addr` ("HOST:PORT") on `loop`. Returns 0 or -1 with a message. */
int sw_metrics_start(uv_loop_t *loop, const char *addr, sluice_worker *w, sluice_metrics **out,
                     char *err, size_t errlen);

/* A partitioned queue's workers, each on a thread of its own: the module asks the caller (on the
 * module's loop) for the sum of their counters and for the number of partitions to read. */
typedef struct sw_metrics_parts {
    sluice_worker *first; /* partition 0's worker: queue, group, consumer, backend, Redis URL */
    sluice_worker *watch; /* a worker on this loop whose closing closes the module; NULL: the
                             caller stops it */
    void (*stats)(void *arg, sluice_worker_stats *sum);
    int (*partitions)(void *arg);
    void *arg;
} sw_metrics_parts;

/* Like sw_metrics_start, for a partitioned queue: the queue's totals and one series per partition.
 * The caller stops it (sw_metrics_stop) once the workers are done; with src->watch it also closes
 * itself when that worker starts closing. */
int sw_metrics_start_parts(uv_loop_t *loop, const char *addr, const sw_metrics_parts *src,
                           sluice_metrics **out, char *err, size_t errlen);

/* --handler http(s)://: the target whose deliveries (by answer) and holds are exposed too, as
 * sluice_worker_http_*; the process's one, set before the module starts. NULL: none. */
void sw_metrics_http(const sluice_http *h);

/* Stops listening and closes every connection (frees once libuv closed them). NULL: no-op. */
void sw_metrics_stop(sluice_metrics *m);

#endif
