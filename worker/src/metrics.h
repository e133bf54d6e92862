/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - sluice-worker's Prometheus endpoint (GET /metrics on --metrics HOST:PORT).
 */
#ifndef SLUICE_WORKER_METRICS_H
#define SLUICE_WORKER_METRICS_H

#include <stddef.h>

#include <uv.h>

#include "sluice/redis.h"
#include "sluice/worker.h"
#include "sluice/worker_http.h"

typedef struct sluice_metrics sluice_metrics;

/* Starts listening on `addr` ("HOST:PORT") on `loop`, the loop the pool runs on: the counters of
 * its workers (summed), the queue figures (a partitioned queue's totals and one series per
 * partition). Closes itself as soon as the pool closes. Returns 0 or -1 with a message. */
int sw_metrics_start(uv_loop_t *loop, const char *addr, sluice_worker_pool *pool,
                     const sluice_conn_options *tls, sluice_metrics **out, char *err,
                     size_t errlen);

/* --handler http(s)://: the target whose deliveries (by answer) and holds are exposed too, as
 * sluice_worker_http_*; the process's one, set before the module starts. NULL: none. */
void sw_metrics_http(const sluice_http *h);

/* Stops listening and closes every connection (frees once libuv closed them). NULL: no-op. */
void sw_metrics_stop(sluice_metrics *m);

#endif
