/* SPDX-License-Identifier: MIT */
/* bench_util.h - what several sluice-bench commands share. */
#ifndef SLUICE_BENCH_UTIL_H
#define SLUICE_BENCH_UTIL_H

#include <stddef.h>

/* Deletes every key of `queue` (stream, dead, meta, stats, list). Returns 0 or exit code 3. */
int bench_purge(const char *url, const char *queue);

/* Admits `count` payloads of `size` bytes in batches of 1000 (capacity count + 1).
 * Returns 0 or an exit code. */
int bench_fill(const char *url, const char *queue, long long count, size_t size);

#endif
