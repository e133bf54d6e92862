/* SPDX-License-Identifier: MIT */
/*
 * limit_spec.h - the pure half of sluice/limit.h: rate limits as text and as the function
 * library spells them, and the checks a set of limits passes before any Redis call. No Redis,
 * no I/O, no state: the public parse and print functions (sluice_limit_parse,
 * sluice_duration_parse, sluice_duration_format, sluice_limit_alg_*, sluice_limit_spec) live in
 * limit_spec.c with these helpers; the limiter (limit.c) builds keys and calls from them.
 * Internal to libsluice, not installed.
 */
#ifndef SLUICE_LIMIT_SPEC_H
#define SLUICE_LIMIT_SPEC_H

#include <stddef.h>

#include "sluice/limit.h"

/* Bytes of the longest spec sluice_limit_spec writes ("window:N:P:PREC" with the NUL). */
#define SLUICE__LIMIT_SPEC_MAX 80

/*
 * Whether limits[0..n) may be checked together with `weight`, in the order the limiter checks:
 * n in 1..SLUICE_LIMIT_MAX, weight in 1..SLUICE_LIMIT_COUNT_MAX, weight x the log limits at most
 * SLUICE_LIMIT_LOG_UNITS_MAX (unless some limit refuses the weight outright), then each limit:
 * its fields in range, its key not given by an earlier limit (window limits of different
 * period or precision may share one), its key 1..SLUICE_LIMIT_KEY_MAX bytes. Returns 0, or
 * SLUICE_EINVAL with a message naming the bad value in err.
 */
int sluice__limit_set_check(const sluice_limit *limits, size_t n, long long weight, char *err,
                            size_t errlen);

#endif /* SLUICE_LIMIT_SPEC_H */
