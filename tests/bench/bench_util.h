/* SPDX-License-Identifier: MIT */
/* bench_util.h - what several sluice-bench commands share. */
#ifndef SLUICE_BENCH_UTIL_H
#define SLUICE_BENCH_UTIL_H

#include <stddef.h>

#include "sluice/figures.h"
#include "sluice/redis.h"

/* Deletes the keys of `queue` (stream, dead, meta, stats, list, limits; not the limiter state
 * sluice:{Q}:lim:*). Returns 0 or exit code 3. */
int bench_purge(const char *url, const char *queue);

/* As bench_purge, but keeps the queue's configuration: its meta hash (capacity, backend, the
 * count of limits, per-tenant share) and its limits hash are not touched, so limits set with
 * `sluice-admin limit` stay in force. Stream backend only (a list queue's depth is in meta).
 * Limiter state (sluice:{Q}:lim:*) is left as it is. Returns 0 or exit code 3. */
int bench_purge_data(const char *url, const char *queue);

/* The queue figures (sluice/figures.h) of a stream queue read over `c`, group "workers".
 * Returns 0 or a status. */
int bench_figures(sluice_conn *c, const sluice_keys *k, sluice_figures *f);

/* Admits `count` payloads of `size` bytes in batches of 1000 (capacity count + 1).
 * Returns 0 or an exit code. */
int bench_fill(const char *url, const char *queue, long long count, size_t size);

#endif
