/* SPDX-License-Identifier: MIT */
/*
 * limit_spec.c - rate limits as text, without Redis or I/O (see limit_spec.h): algorithm names,
 * durations read and written, "KEY=N/DURATION[~PRECISION]" parsed, a limit spelled as the
 * function library's SPEC, and the checks a set of limits passes before the limiter (limit.c)
 * calls anything.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/limit.h"
#include "sluice/status.h"

#include "limit_spec.h"

#define PERIOD_MAX_MS (366LL * 86400000LL) /* the function's bound (LIMIT_MAX_PERIOD_MS) */
#define WINDOW_BLOCKS 60                   /* default precision: period / 60 */
#define BLOCKS_MAX    1000                 /* the function's bound (LIMIT_MAX_BLOCKS) */

static const char *const alg_names[] = {"gcra", "window", "log", "fixed", "gate"};

int sluice_limit_alg_parse(const char *s, sluice_limit_alg *out) {
    for (size_t i = 0; i < sizeof(alg_names) / sizeof(alg_names[0]); i++) {
        if (s != NULL && strcmp(s, alg_names[i]) == 0) {
            *out = (sluice_limit_alg)i;
            return 0;
        }
    }
    return SLUICE_EINVAL;
}

const char *sluice_limit_alg_name(sluice_limit_alg a) {
    return (unsigned)a < sizeof(alg_names) / sizeof(alg_names[0]) ? alg_names[a] : "unknown";
}

int sluice_duration_parse(const char *s, size_t len, long long *ms, char *err, size_t errlen) {
    static const struct {
        const char *unit;
        long long ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    size_t digits = 0;
    long long n = 1;
    while (digits < len && isdigit((unsigned char)s[digits])) {
        digits++;
    }
    if (digits > 12) {
        snprintf(err, errlen, "duration '%.*s' is too long", (int)len, s);
        return SLUICE_EINVAL;
    }
    if (digits > 0) {
        char buf[16];
        memcpy(buf, s, digits);
        buf[digits] = '\0';
        n = strtoll(buf, NULL, 10);
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t ul = strlen(units[i].unit);
        if (len - digits == ul && memcmp(s + digits, units[i].unit, ul) == 0) {
            /* compared before multiplying: 12 digits of days overflow a long long */
            if (n < 1 || n > PERIOD_MAX_MS / units[i].ms) {
                snprintf(err, errlen, "duration '%.*s' is out of range (1ms..366d)", (int)len, s);
                return SLUICE_EINVAL;
            }
            *ms = n * units[i].ms;
            return 0;
        }
    }
    snprintf(err, errlen, "duration '%.*s' needs a unit: ms, s, m, h or d (e.g. 500ms, 10s, 30m)",
             (int)len, s);
    return SLUICE_EINVAL;
}

int sluice_duration_format(long long ms, char *buf, size_t len) {
    static const struct {
        const char *unit;
        long long ms;
    } units[] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
    const char *unit = "ms";
    long long n = ms;
    for (size_t i = 0; ms > 0 && i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms % units[i].ms == 0) {
            unit = units[i].unit;
            n = ms / units[i].ms;
            break;
        }
    }
    int k = ms >= 0 && buf != NULL ? snprintf(buf, len, "%lld%s", n, unit) : -1;
    return k >= 0 && (size_t)k < len ? 0 : SLUICE_EINVAL;
}

int sluice_limit_parse(const char *spec, sluice_limit_alg alg, sluice_limit *out, char *err,
                       size_t errlen) {
    const char *eq = strchr(spec, '=');
    memset(out, 0, sizeof(*out));
    if (eq == NULL || eq == spec) {
        snprintf(err, errlen, "limit '%s' is not KEY=RATE (e.g. api=5/1s)", spec);
        return SLUICE_EINVAL;
    }
    size_t keylen = (size_t)(eq - spec);
    if (keylen > SLUICE_LIMIT_KEY_MAX) {
        snprintf(err, errlen, "limit key '%.40s...' is %zu bytes; at most %d", spec, keylen,
                 SLUICE_LIMIT_KEY_MAX);
        return SLUICE_EINVAL;
    }
    const char *rate = eq + 1, *slash = strchr(rate, '/');
    const char *tilde = slash ? strchr(slash, '~') : NULL;
    char *end;
    errno = 0;
    long long n = slash && isdigit((unsigned char)rate[0]) ? strtoll(rate, &end, 10) : 0;
    if (slash == NULL || errno != 0 || end != slash || n < 1 || n > SLUICE_LIMIT_COUNT_MAX) {
        snprintf(err, errlen, "rate '%s' of limit '%.*s' is not N/DURATION with N in 1..%d", rate,
                 (int)keylen, spec, SLUICE_LIMIT_COUNT_MAX);
        return SLUICE_EINVAL;
    }
    size_t dlen = tilde ? (size_t)(tilde - slash - 1) : strlen(slash + 1);
    if (sluice_duration_parse(slash + 1, dlen, &out->period_ms, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    if (tilde != NULL) {
        if (alg != SLUICE_LIMIT_WINDOW) {
            snprintf(err, errlen, "'~PRECISION' in '%s' is for the window algorithm only", spec);
            return SLUICE_EINVAL;
        }
        if (sluice_duration_parse(tilde + 1, strlen(tilde + 1), &out->precision_ms, err, errlen) !=
            0) {
            return SLUICE_EINVAL;
        }
        if (out->precision_ms > out->period_ms ||
            (out->period_ms + out->precision_ms - 1) / out->precision_ms > BLOCKS_MAX) {
            snprintf(err, errlen,
                     "precision in '%s' must be at most the period and at least 1/%d of it", spec,
                     BLOCKS_MAX);
            return SLUICE_EINVAL;
        }
    }
    out->key = spec;
    out->keylen = keylen;
    out->alg = alg;
    out->count = n;
    return 0;
}

/* ---- a set of limits ---- */

static int check_limit(const sluice_limit *l, size_t i, char *err, size_t errlen) {
    if (l->key == NULL || (unsigned)l->alg > SLUICE_LIMIT_GATE || l->count < 1 ||
        l->count > SLUICE_LIMIT_COUNT_MAX || l->period_ms < 1 || l->period_ms > PERIOD_MAX_MS ||
        l->precision_ms < 0 || l->precision_ms > l->period_ms) {
        snprintf(err, errlen, "limit %zu: bad key, algorithm, count, period or precision", i);
        return SLUICE_EINVAL;
    }
    return 0;
}

/* A window limit's PRECISION_MS as sent: 0 means PERIOD / WINDOW_BLOCKS (at least 1 ms). */
static long long window_precision(const sluice_limit *l) {
    long long prec = l->precision_ms ? l->precision_ms : l->period_ms / WINDOW_BLOCKS;
    return prec < 1 ? 1 : prec;
}

/* Whether limit i's key was given by an earlier limit: only window limits of different
 * PERIOD:PRECISION may share a key (they share one hash), as the function checks. */
static int key_repeated(const sluice_limit *limits, size_t i) {
    const sluice_limit *l = &limits[i];
    size_t kl = l->keylen ? l->keylen : strlen(l->key);
    for (size_t j = 0; j < i; j++) {
        const sluice_limit *o = &limits[j];
        size_t ol = o->keylen ? o->keylen : strlen(o->key);
        if (ol == kl && memcmp(o->key, l->key, kl) == 0 &&
            !(l->alg == SLUICE_LIMIT_WINDOW && o->alg == SLUICE_LIMIT_WINDOW &&
              (l->period_ms != o->period_ms || window_precision(l) != window_precision(o)))) {
            return 1;
        }
    }
    return 0;
}

int sluice__limit_set_check(const sluice_limit *limits, size_t n, long long weight, char *err,
                            size_t errlen) {
    if (n < 1 || n > SLUICE_LIMIT_MAX) {
        snprintf(err, errlen, "%zu limits in one call; 1..%d allowed", n, SLUICE_LIMIT_MAX);
        return SLUICE_EINVAL;
    }
    if (weight < 1 || weight > SLUICE_LIMIT_COUNT_MAX) {
        snprintf(err, errlen, "weight %lld is not in 1..%d", weight, SLUICE_LIMIT_COUNT_MAX);
        return SLUICE_EINVAL;
    }
    size_t logs = 0, never = 0; /* never: the function answers "never" before the log bound */
    for (size_t i = 0; i < n; i++) {
        logs += limits[i].alg == SLUICE_LIMIT_LOG;
        never += weight > limits[i].count;
    }
    if (logs > 0 && never == 0 && weight > SLUICE_LIMIT_LOG_UNITS_MAX / (long long)logs) {
        snprintf(err, errlen,
                 "weight %lld in %zu log limit(s) is more than %d units, the most one call counts "
                 "in log limits (a sorted-set member each); use gcra or window for heavier "
                 "requests",
                 weight, logs, SLUICE_LIMIT_LOG_UNITS_MAX);
        return SLUICE_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        const sluice_limit *l = &limits[i];
        if (check_limit(l, i, err, errlen) != 0) {
            return SLUICE_EINVAL;
        }
        size_t kl = l->keylen ? l->keylen : strlen(l->key);
        if (key_repeated(limits, i)) {
            snprintf(err, errlen,
                     "limit key '%.*s' is given twice; only window limits of different "
                     "period or precision may share a key",
                     (int)kl, l->key);
            return SLUICE_EINVAL;
        }
        if (kl == 0 || kl > SLUICE_LIMIT_KEY_MAX) {
            snprintf(err, errlen, "limit %zu: the key is empty or longer than %d bytes", i,
                     SLUICE_LIMIT_KEY_MAX);
            return SLUICE_EINVAL;
        }
    }
    return 0;
}

int sluice_limit_spec(const sluice_limit *l, char *buf, size_t len) {
    char err[160];
    if (check_limit(l, 0, err, sizeof(err)) != 0) {
        return SLUICE_EINVAL;
    }
    int n;
    if (l->alg == SLUICE_LIMIT_WINDOW) {
        n = snprintf(buf, len, "window:%lld:%lld:%lld", l->count, l->period_ms,
                     window_precision(l));
    } else {
        n = snprintf(buf, len, "%s:%lld:%lld", alg_names[l->alg], l->count, l->period_ms);
    }
    return n >= 0 && (size_t)n < len ? 0 : SLUICE_EINVAL;
}
