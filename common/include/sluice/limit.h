/* SPDX-License-Identifier: MIT */
/*
 * limit.h - rate limits on their own: check one request of some weight against several limits
 * in one atomic server-side call (the function sluice_limit of the library), counted in all of
 * them or in none.
 *
 * A limit is KEY=RATE: RATE is "N/DURATION" (N per DURATION; durations "500ms", "10s", "30m",
 * "1h", "1d", or just a unit: "5/s"), with "~PRECISION" for the window algorithm. Its state
 * lives in the Redis key sluice:{NAMESPACE}:lim:KEY: one hash tag per namespace, so every call
 * runs in one Redis Cluster slot. Time is the server's, never the client's.
 *
 * Algorithms (docs/limits.md compares them):
 *   GCRA    one value per key; a burst of N, then N per DURATION spread evenly (the default)
 *   WINDOW  sliding window counted in sub-buckets of PRECISION (default DURATION/60), one hash
 *   LOG     exact sliding window: one sorted-set member per unit (memory O(N))
 *   FIXED   a counter per clock-aligned window (up to 2N across a window boundary)
 *   GATE    one unit every DURATION/N
 *
 * Without scripts (proxies that refuse FCALL/EVAL), sluice_limiter_options.no_scripts makes a
 * fixed-window check with MULTI: INCRBY + PEXPIRE NX + PTTL per key. Its window starts at the
 * key's first request, not on the clock; the number of allowed requests per window and key is
 * still exact under concurrency, but refused requests are counted too (the counter passes N),
 * and with several limits a request refused by one is still counted by the others.
 *
 * A sluice_limiter is for one thread (like the blocking connection it owns); the parse
 * functions are pure and thread-safe.
 */
#ifndef SLUICE_LIMIT_H
#define SLUICE_LIMIT_H

#include <stddef.h>

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sluice_limit_alg {
    SLUICE_LIMIT_GCRA = 0,
    SLUICE_LIMIT_WINDOW,
    SLUICE_LIMIT_LOG,
    SLUICE_LIMIT_FIXED,
    SLUICE_LIMIT_GATE,
} sluice_limit_alg;

#define SLUICE_LIMIT_KEY_MAX   200        /* bytes of a limit key */
#define SLUICE_LIMIT_COUNT_MAX 1000000000 /* the largest N, and the largest weight */
#define SLUICE_LIMIT_MAX       32         /* limits in one call */
/* The units one call may count in LOG limits: weight x the number of log limits (a log
 * writes one sorted-set member per unit, and one call must stay near a millisecond). */
#define SLUICE_LIMIT_LOG_UNITS_MAX 500

/* One limit of a call. `key` is borrowed for the call. */
typedef struct sluice_limit {
    const char *key;
    size_t keylen; /* bytes of key; 0 = strlen(key) */
    sluice_limit_alg alg;
    long long count;        /* N: 1..SLUICE_LIMIT_COUNT_MAX */
    long long period_ms;    /* DURATION: 1 ms .. 366 days */
    long long precision_ms; /* WINDOW only: 1..period_ms, period_ms/precision_ms <= 1000;
                               0 = period_ms / 60 (at least 1) */
} sluice_limit;

typedef struct sluice_limit_result {
    int allowed;              /* 1 allowed (counted everywhere), 0 limited, -1 never: the weight
                                 is more than limit `limited_by` ever allows */
    int limited_by;           /* index of the refusing limit (largest retry-after), -1 when
                                 allowed */
    long long remaining;      /* the smallest number of units left among the limits */
    long long retry_after_ms; /* limited: ms until the same call passes, rounded up; else 0 */
    long long reset_ms;       /* ms until every limit is back to full, rounded up */
} sluice_limit_result;

/* "gcra", "window", "log", "fixed", "gate" <-> the enum. Parse returns 0 or SLUICE_EINVAL. */
SLUICE_API int sluice_limit_alg_parse(const char *s, sluice_limit_alg *out);
SLUICE_API const char *sluice_limit_alg_name(sluice_limit_alg a);

/* Parses a duration "500ms", "10s", "30m", "1h", "1d" (or a bare unit, "s" = 1 s) into ms.
 * Returns 0 or SLUICE_EINVAL with a message naming the value in err. */
SLUICE_API int sluice_duration_parse(const char *s, size_t len, long long *ms, char *err,
                                     size_t errlen);

/* Writes ms (>= 0) as a duration sluice_duration_parse reads back: in the largest unit that
 * holds it whole ("30m" for 1800000, "90s", "1500ms"). Returns 0 or SLUICE_EINVAL (buf too
 * small or ms negative). */
SLUICE_API int sluice_duration_format(long long ms, char *buf, size_t len);

/* Parses "KEY=N/DURATION[~PRECISION]" into *out (out->key points into `spec`, which must stay
 * valid, with out->keylen the bytes before '='). `alg` is the algorithm to use; "~PRECISION"
 * is allowed only for WINDOW. Returns 0 or SLUICE_EINVAL with a message naming the value. */
SLUICE_API int sluice_limit_parse(const char *spec, sluice_limit_alg alg, sluice_limit *out,
                                  char *err, size_t errlen);

/* The limit as the function library spells it ("gcra:5:1000", "window:240:3600000:60000"): the
 * SPEC of FCALL sluice_limit and of a queue's limits hash. Returns 0 or SLUICE_EINVAL (a bad
 * limit, or buf too small). */
SLUICE_API int sluice_limit_spec(const sluice_limit *l, char *buf, size_t len);

typedef struct sluice_limiter_options {
    size_t struct_size;     /* set by _init (sluice/export.h) */
    const char *redis_url;  /* NULL = $SLUICE_REDIS_URL, else redis://127.0.0.1:6379 */
    const char *ns;         /* the namespace, required: 1..64 of [A-Za-z0-9_.-] (a queue name's
                               rules); keys are sluice:{ns}:lim:KEY */
    int connect_timeout_ms; /* default 2000 */
    int command_timeout_ms; /* default 5000 */
    int no_scripts;         /* 1: the MULTI fixed-window check described above */
    int force_eval;         /* 1: EVALSHA instead of FCALL (tests, old servers) */
    const struct sluice_conn_options *tls; /* NULL = none; else its tls_* fields (sluice/redis.h)
                                              are used for a rediss:// URL (copied by _new) */
} sluice_limiter_options;

typedef struct sluice_limiter sluice_limiter;

SLUICE_API void sluice_limiter_options_init_sized(sluice_limiter_options *o, size_t size);
#define sluice_limiter_options_init(o) sluice_limiter_options_init_sized((o), sizeof(*(o)))

/* Copies the options; connects lazily. Returns 0 or SLUICE_EINVAL with a message in err. */
SLUICE_API int sluice_limiter_new(const sluice_limiter_options *o, sluice_limiter **out, char *err,
                                  size_t errlen);
SLUICE_API void sluice_limiter_free(sluice_limiter *l);

/*
 * Checks one request of `weight` (1..SLUICE_LIMIT_COUNT_MAX) against limits[0..n) (1..
 * SLUICE_LIMIT_MAX) in one round trip. Returns 0 with *res filled when Redis answered, else a
 * status: EINVAL for bad limits (before any Redis call: a key given twice, unless by window
 * limits of different period or precision; weight x log limits over
 * SLUICE_LIMIT_LOG_UNITS_MAX; with no_scripts every limit must be FIXED), ECONFIG when the
 * server refused a spec (a key holding another algorithm's state is not an error: it reads as
 * empty and is replaced when the call is counted), ECONN /
 * ETIMEDOUT / EUNKNOWN (the call may have counted) when Redis was not reachable. Detail in
 * sluice_limiter_errstr().
 */
SLUICE_API int sluice_limiter_check(sluice_limiter *l, const sluice_limit *limits, size_t n,
                                    long long weight, sluice_limit_result *res);

SLUICE_API const char *sluice_limiter_errstr(const sluice_limiter *l);

/*
 * The same check on an async connection (sluice/redis.h: sluice_aconn_new) of a libuv loop, for
 * servers that already hold one; scripts only. `limits` and `ns` are copied. Returns 0
 * (cb runs exactly once on the loop thread, with status 0 and the result, or a status as
 * above; `res` is borrowed for the callback) or an error (cb never runs: EINVAL, ECONN when
 * the connection is not ready, ENOMEM). timeout_ms 0 = the connection's command timeout.
 */
struct sluice_aconn;
typedef void (*sluice_limit_cb)(int status, const sluice_limit_result *res, void *arg);
SLUICE_API int sluice_limit_acheck(struct sluice_aconn *c, const char *ns,
                                   const sluice_limit *limits, size_t n, long long weight,
                                   int timeout_ms, sluice_limit_cb cb, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_LIMIT_H */
