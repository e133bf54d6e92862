/* SPDX-License-Identifier: MIT */
/*
 * limit.c - the limiter (see sluice/limit.h): building the sluice_limit call from limits that
 * limit_spec.c parsed and checked, reading its reply; the blocking limiter (with its script-less
 * MULTI check) and the async check. Rates as text and every check made before a call are in
 * limit_spec.c, which does no I/O.
 */
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

#include "limit_spec.h"

#define LIM_KEY_MAX    (SLUICE_KEY_MAX + SLUICE_LIMIT_KEY_MAX)
#define WEIGHT_ARG_MAX 24

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
    char specbuf[SLUICE_LIMIT_MAX][SLUICE__LIMIT_SPEC_MAX];
} limit_call;

static int call_build(limit_call *c, const char *ns, const sluice_limit *limits, size_t n,
                      long long weight, char *err, size_t errlen) {
    sluice_keys qk;
    if (sluice_keys_init(&qk, ns, err, errlen) != 0 ||
        sluice__limit_set_check(limits, n, weight, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    c->n = (int)n;
    snprintf(c->weight, sizeof(c->weight), "%lld", weight);
    c->args[0] = c->weight;
    c->arglens[0] = strlen(c->weight);
    for (size_t i = 0; i < n; i++) {
        const sluice_limit *l = &limits[i];
        size_t kl = l->keylen ? l->keylen : strlen(l->key);
        if (sluice_key_limit(&qk, l->key, kl, c->keybuf[i], sizeof(c->keybuf[i])) != 0 ||
            sluice_limit_spec(l, c->specbuf[i], sizeof(c->specbuf[i])) != 0) {
            snprintf(err, errlen, "limit %zu: no room for its key or spec", i); /* checked above */
            return SLUICE_EINVAL;
        }
        c->keys[i] = c->keybuf[i];
        c->keylens[i] = strlen(c->keybuf[i]);
        c->args[1 + i] = c->specbuf[i];
        c->arglens[1 + i] = strlen(c->specbuf[i]);
    }
    return 0;
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
    sluice__client_tls(&co, o->tls);
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
