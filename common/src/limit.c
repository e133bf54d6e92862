/* SPDX-License-Identifier: MIT */
/*
 * limit.c - rate limits on their own (see sluice/limit.h): parsing rates, building the
 * sluice_limit call, reading its reply; the blocking limiter and the async check.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"
#include "sluice/limit.h"
#include "sluice/options.h"
#include "sluice/queue.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/status.h"
#include "sluice/url.h"

#define PERIOD_MAX_MS  (366LL * 86400000LL) /* the function's bound (LIMIT_MAX_PERIOD_MS) */
#define WINDOW_BLOCKS  60                   /* default precision: period / 60 */
#define BLOCKS_MAX     1000                 /* the function's bound (LIMIT_MAX_BLOCKS) */
#define SPEC_MAX       80                   /* "window:N:P:PREC" as text */
#define LIM_KEY_MAX    (SLUICE_KEY_MAX + SLUICE_LIMIT_KEY_MAX)
#define WEIGHT_ARG_MAX 24

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

/* ---- the call ---- */

/* Everything one sluice_limit call sends: keys sluice:{NS}:lim:KEY and the specs, in one
 * allocation. */
typedef struct limit_call {
    int n;
    const char *keys[SLUICE_LIMIT_MAX];
    size_t keylens[SLUICE_LIMIT_MAX];
    const char *args[1 + SLUICE_LIMIT_MAX];
    size_t arglens[1 + SLUICE_LIMIT_MAX];
    char weight[WEIGHT_ARG_MAX];
    char keybuf[SLUICE_LIMIT_MAX][LIM_KEY_MAX];
    char specbuf[SLUICE_LIMIT_MAX][SPEC_MAX];
} limit_call;

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

static int call_build(limit_call *c, const char *ns, const sluice_limit *limits, size_t n,
                      long long weight, char *err, size_t errlen) {
    sluice_keys qk;
    if (sluice_keys_init(&qk, ns, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
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
    c->n = (int)n;
    snprintf(c->weight, sizeof(c->weight), "%lld", weight);
    c->args[0] = c->weight;
    c->arglens[0] = strlen(c->weight);
    for (size_t i = 0; i < n; i++) {
        const sluice_limit *l = &limits[i];
        if (check_limit(l, i, err, errlen) != 0) {
            return SLUICE_EINVAL;
        }
        if (key_repeated(limits, i)) {
            snprintf(err, errlen,
                     "limit key '%.*s' is given twice; only window limits of different "
                     "period or precision may share a key",
                     (int)(l->keylen ? l->keylen : strlen(l->key)), l->key);
            return SLUICE_EINVAL;
        }
        size_t kl = l->keylen ? l->keylen : strlen(l->key);
        if (kl == 0 || kl > SLUICE_LIMIT_KEY_MAX ||
            sluice_key_limit(&qk, l->key, kl, c->keybuf[i], sizeof(c->keybuf[i])) != 0) {
            snprintf(err, errlen, "limit %zu: the key is empty or longer than %d bytes", i,
                     SLUICE_LIMIT_KEY_MAX);
            return SLUICE_EINVAL;
        }
        sluice_limit_spec(l, c->specbuf[i], SPEC_MAX);
        c->keys[i] = c->keybuf[i];
        c->keylens[i] = strlen(c->keybuf[i]);
        c->args[1 + i] = c->specbuf[i];
        c->arglens[1 + i] = strlen(c->specbuf[i]);
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

/* {allowed, limited_by (1-based), remaining, retry_after_ms, reset_ms} */
static int call_parse(const redisReply *r, size_t n, sluice_limit_result *res) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
        return SLUICE_EPROTO;
    }
    long long v[5];
    for (int i = 0; i < 5; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER) {
            return SLUICE_EPROTO;
        }
        v[i] = r->element[i]->integer;
    }
    if (v[0] < -1 || v[0] > 1 || v[1] < 0 || v[1] > (long long)n || (v[0] != 1) != (v[1] != 0)) {
        return SLUICE_EPROTO;
    }
    *res = (sluice_limit_result){(int)v[0], (int)v[1] - 1, v[2], v[3], v[4]};
    return 0;
}

/* ---- blocking ---- */

struct sluice_limiter {
    sluice_conn *conn;
    char ns[SLUICE_QUEUE_NAME_MAX + 1];
    int no_scripts;
    char err[512];
};

void sluice_limiter_options_init_sized(sluice_limiter_options *o, size_t size) {
    sluice_limiter_options d;
    memset(&d, 0, sizeof(d));
    sluice__options_give(o, size, &d, sizeof(d));
}

int sluice_limiter_new(const sluice_limiter_options *o, sluice_limiter **out, char *err,
                       size_t errlen) {
    char ebuf[256];
    *out = NULL;
    if (err == NULL) {
        err = ebuf;
        errlen = sizeof(ebuf);
    }
    sluice_limiter_options lo; /* the caller's options as this library lays them out */
    if (o != NULL) {
        sluice_limiter_options_init(&lo);
        sluice__options_take(&lo, sizeof(lo), o);
        o = &lo;
    }
    if (o == NULL || o->ns == NULL) {
        snprintf(err, errlen, "no namespace given");
        return SLUICE_EINVAL;
    }
    char why[160];
    if (sluice_queue_name_check(o->ns, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "namespace '%.64s': %s", o->ns, why);
        return SLUICE_EINVAL;
    }
    sluice_url url;
    sluice_conn_options co;
    if (sluice_client_setup(o->redis_url, o->connect_timeout_ms, o->command_timeout_ms,
                            o->force_eval, "limiter", &url, &co, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    sluice_limiter *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return SLUICE_ENOMEM;
    }
    co.no_load = o->no_scripts; /* a script-less deployment never loads the library */
    if ((l->conn = sluice_conn_new(&url, &co)) == NULL) {
        free(l);
        return SLUICE_ENOMEM;
    }
    snprintf(l->ns, sizeof(l->ns), "%s", o->ns);
    l->no_scripts = o->no_scripts;
    *out = l;
    return 0;
}

void sluice_limiter_free(sluice_limiter *l) {
    if (l != NULL) {
        sluice_conn_free(l->conn);
        free(l);
    }
}

const char *sluice_limiter_errstr(const sluice_limiter *l) {
    return l->err;
}

/* The transport failure of a call that may have reached the server: its outcome is unknown. */
static int call_failed(sluice_limiter *l, int st, int sent, const redisReply *r) {
    if (r != NULL && r->type == REDIS_REPLY_ERROR) {
        snprintf(l->err, sizeof(l->err), "%s", r->str);
        return st;
    }
    if (sent && (st == SLUICE_ECONN || st == SLUICE_ETIMEDOUT)) {
        snprintf(l->err, sizeof(l->err), "%s (%s): the check may or may not have been counted",
                 sluice_conn_errstr(l->conn), sluice_strerror(st));
        return SLUICE_EUNKNOWN;
    }
    snprintf(l->err, sizeof(l->err), "%s", sluice_conn_errstr(l->conn));
    return st;
}

/* MULTI, then per key INCRBY w, PEXPIRE period NX, PTTL; EXEC: a fixed window from the key's
 * first request, without any script. */
static int check_no_scripts(sluice_limiter *l, const limit_call *c, const sluice_limit *limits,
                            sluice_limit_result *res) {
    for (int i = 0; i < c->n; i++) {
        if (limits[i].alg != SLUICE_LIMIT_FIXED) {
            snprintf(l->err, sizeof(l->err),
                     "limit %d: without scripts only the fixed algorithm is available", i);
            return SLUICE_EINVAL;
        }
    }
    long long w = strtoll(c->weight, NULL, 10);
    for (int i = 0; i < c->n; i++) {
        if (w > limits[i].count) { /* never: refused before anything is counted */
            *res = (sluice_limit_result){-1, i, 0, -1, 0};
            return 0;
        }
    }
    /* one round trip: MULTI, per key INCRBY + PEXPIRE NX + PTTL, EXEC. A command refused while
     * queuing (an ACL) makes Redis abort the whole EXEC, so nothing is counted then. */
    const char *multi[] = {"MULTI"}, *exec[] = {"EXEC"};
    char periods[SLUICE_LIMIT_MAX][24];
    int st = sluice_conn_append_command(l->conn, 1, multi, NULL);
    for (int i = 0; st == 0 && i < c->n; i++) {
        snprintf(periods[i], sizeof(periods[i]), "%lld", limits[i].period_ms);
        const char *incr[] = {"INCRBY", c->keys[i], c->weight};
        const char *pexp[] = {"PEXPIRE", c->keys[i], periods[i], "NX"};
        const char *pttl[] = {"PTTL", c->keys[i]};
        if ((st = sluice_conn_append_command(l->conn, 3, incr, NULL)) == 0 &&
            (st = sluice_conn_append_command(l->conn, 4, pexp, NULL)) == 0) {
            st = sluice_conn_append_command(l->conn, 2, pttl, NULL);
        }
    }
    if (st == 0) {
        st = sluice_conn_append_command(l->conn, 1, exec, NULL);
    }
    if (st != 0) { /* nothing was written: the connection was not there */
        snprintf(l->err, sizeof(l->err), "%s", sluice_conn_errstr(l->conn));
        return st;
    }
    redisReply *r = NULL, *refused = NULL; /* EXEC's reply; the first refusal while queuing */
    int refused_st = 0;
    for (int i = 0; i < c->n * 3 + 2; i++) {
        redisReply *x = NULL;
        int s1 = sluice_conn_read_reply(l->conn, &x);
        if (s1 != 0 && (x == NULL || x->type != REDIS_REPLY_ERROR)) { /* I/O: outcome unknown */
            freeReplyObject(refused);
            st = call_failed(l, s1, 1, NULL);
            return st;
        }
        if (i == c->n * 3 + 1) {
            r = x;
        } else if (s1 != 0 && refused == NULL) {
            refused = x, refused_st = s1;
        } else {
            freeReplyObject(x);
        }
    }
    if (refused != NULL || r->type == REDIS_REPLY_ERROR) {
        st = call_failed(l, refused ? refused_st : sluice_reply_error_status(r->str, r->len), 1,
                         refused ? refused : r);
        freeReplyObject(refused);
        freeReplyObject(r);
        return st;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)c->n * 3) {
        freeReplyObject(r);
        snprintf(l->err, sizeof(l->err), "unexpected reply to EXEC");
        return SLUICE_EPROTO;
    }
    *res = (sluice_limit_result){1, -1, -1, 0, 0};
    for (int i = 0; i < c->n; i++) {
        long long count = sluice_reply_ll(r->element[3 * i], -1);
        long long ttl = sluice_reply_ll(r->element[3 * i + 2], -1);
        long long left = limits[i].count - count;
        ttl = ttl < 0 ? limits[i].period_ms : ttl;
        if (count < 0) {
            freeReplyObject(r);
            snprintf(l->err, sizeof(l->err), "%s: %s", c->keys[i],
                     r->element[3 * i]->type == REDIS_REPLY_ERROR ? "not a counter" : "no reply");
            return SLUICE_ECONFIG;
        }
        if (left < 0 && (res->allowed == 1 || ttl > res->retry_after_ms)) {
            res->allowed = 0;
            res->limited_by = i;
            res->retry_after_ms = ttl;
        }
        left = left < 0 ? 0 : left;
        if (res->remaining < 0 || left < res->remaining) {
            res->remaining = left;
        }
        if (ttl > res->reset_ms) {
            res->reset_ms = ttl;
        }
    }
    freeReplyObject(r);
    return 0;
}

int sluice_limiter_check(sluice_limiter *l, const sluice_limit *limits, size_t n, long long weight,
                         sluice_limit_result *res) {
    limit_call *c = malloc(sizeof(*c));
    if (c == NULL) {
        return SLUICE_ENOMEM;
    }
    l->err[0] = '\0';
    int st = call_build(c, l->ns, limits, n, weight, l->err, sizeof(l->err));
    if (st == 0 && l->no_scripts) {
        st = check_no_scripts(l, c, limits, res);
    } else if (st == 0) {
        redisReply *r = NULL;
        int sent = 0;
        st = sluice_conn_fcall(l->conn, SLUICE_FN_LIMIT, c->n, c->keys, c->keylens, c->n + 1,
                               c->args, c->arglens, &r, &sent);
        if (st == 0 && (st = call_parse(r, n, res)) != 0) {
            snprintf(l->err, sizeof(l->err), "unexpected reply to sluice_limit");
        } else if (st != 0) {
            st = call_failed(l, st, sent, r);
        }
        freeReplyObject(r);
    }
    free(c);
    return st;
}

/* ---- async ---- */

typedef struct acheck {
    size_t n;
    sluice_limit_cb cb;
    void *arg;
    limit_call call;
} acheck;

static void on_acheck(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    acheck *a = arg;
    sluice_limit_result res;
    if (status == 0) {
        status = call_parse(r, a->n, &res);
    } else if (sent && (status == SLUICE_ECONN || status == SLUICE_ETIMEDOUT)) {
        status = SLUICE_EUNKNOWN;
    }
    a->cb(status, status == 0 ? &res : NULL, a->arg);
    free(a);
}

int sluice_limit_acheck(struct sluice_aconn *c, const char *ns, const sluice_limit *limits,
                        size_t n, long long weight, int timeout_ms, sluice_limit_cb cb, void *arg) {
    char err[256];
    if (c == NULL || cb == NULL || ns == NULL) {
        return SLUICE_EINVAL;
    }
    acheck *a = malloc(sizeof(*a));
    if (a == NULL) {
        return SLUICE_ENOMEM;
    }
    *a = (acheck){.n = n, .cb = cb, .arg = arg};
    int st = call_build(&a->call, ns, limits, n, weight, err, sizeof(err));
    if (st == 0) {
        limit_call *k = &a->call;
        st = sluice_aconn_fcall(c, SLUICE_FN_LIMIT, k->n, k->keys, k->keylens, k->n + 1, k->args,
                                k->arglens, timeout_ms, on_acheck, a);
    }
    if (st != 0) {
        free(a);
    }
    return st;
}
