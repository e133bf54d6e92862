/* SPDX-License-Identifier: MIT */
/* bench_util.h - what several sluice-bench commands share. */
#ifndef SLUICE_BENCH_UTIL_H
#define SLUICE_BENCH_UTIL_H

#include <stddef.h>

#include "sluice/figures.h"
#include "sluice/redis.h"

/* The connection options of every connection a bench makes (blocking, and the tls field of the
 * producer, async producer, worker and limiter options): the defaults and the SLUICE_TLS_*
 * variables (sluice_cli_tls_env), read once (thread-safe); a bad variable ends the program with
 * exit code 2 after saying which. */
const sluice_conn_options *bench_conn_options(void);

/* Deletes the keys of `queue` (stream, dead, meta, stats, list, limits, and a fair queue's lanes
 * and their bookkeeping; not the limiter state sluice:{Q}:qlim:*), and of each of its partitions
 * when it is partitioned (sluice-admin partitions). Returns 0 or exit code 3. */
int bench_purge(const char *url, const char *queue);

/* As bench_purge, but keeps the queue's configuration: its meta hash (capacity, backend, the
 * count of limits, per-tenant share) and its limits hash are not touched, so limits set with
 * `sluice-admin limit` stay in force, and so do a fair queue's switch and weights (its lanes are
 * deleted and meta's lane counts cleared), and a partitioned queue's partitions (each keeps its
 * meta). Stream backend only (a list queue's depth is in meta).
 * Limiter state (sluice:{Q}:qlim:*) is left as it is. Returns 0 or exit code 3. */
int bench_purge_data(const char *url, const char *queue);

/* The queue figures (sluice/figures.h) of a stream queue read over `c`, group "workers".
 * Returns 0 or a status. */
int bench_figures(sluice_conn *c, const sluice_keys *k, sluice_figures *f);

/* redis-server's CPU seconds (user + sys) from INFO cpu; -1 when unknown. */
double bench_redis_cpu_s(sluice_conn *c);

/* Admits `count` payloads of `size` bytes in batches of 1000 (capacity count + 1); with
 * tenants > 0, message i has tenant "t<i mod tenants>" (bench_tenant_names), else none.
 * Returns 0 or an exit code. */
int bench_fill(const char *url, const char *queue, long long count, size_t size, long long tenants);

/* The most tenants a bench spreads its messages over, and the names it gives them: "t0" ..
 * "t<n-1>" (calloc'd; NULL after printing why). */
#define BENCH_TENANTS_MAX 100000
#define BENCH_TENANT_LEN  24
char (*bench_tenant_names(long long n))[BENCH_TENANT_LEN];

/* Switches `queue` to fair, as `sluice-admin fair QUEUE on` (the function sluice_fair_config):
 * entries with a tenant then wait in that tenant's lane, and workers serve the lanes in turn
 * (they read the switch from meta before their first read). Returns 0 or an exit code. */
int bench_fair_on(const char *url, const char *queue);

/* Sets the drain limit NAME (as `sluice-admin limit QUEUE set NAME drain ...`; `spec` as the
 * function library spells it, sluice_limit_spec: "gcra:2000:1000"). Returns 0 or an exit code. */
int bench_drain_limit(const char *url, const char *queue, const char *name, const char *spec);

/* The path of the program `name` in the directory of this binary (sluice-worker,
 * sluice-bench-backend) into out. Returns 0, or -1 when it is not there or not executable. */
int bench_sibling_path(const char *name, char *out, size_t len);

#endif
