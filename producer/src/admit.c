/* SPDX-License-Identifier: MIT */
/* admit.c - building one admission call and reading its reply (see admit.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/options.h"
#include "sluice/reply.h"
#include "sluice/url.h"

#include "admit.h"

void sluice_producer_options_init_sized(sluice_producer_options *o, size_t size) {
    sluice_producer_options d;
    memset(&d, 0, sizeof(d));
    d.backend = SLUICE_BACKEND_STREAM;
    d.capacity = 1000;
    d.max_payload = 1024 * 1024;
    d.max_batch = 1000;
    d.connect_timeout_ms = 2000;
    d.command_timeout_ms = 5000;
    d.idempotency_ttl_ms = 86400000;
    d.retry_after_max_s = 60;
    sluice__options_give(o, size, &d, sizeof(d));
}

int sluice__admit_cfg_init(sluice__admit_cfg *cfg, const sluice_producer_options *o, char *err,
                           size_t errlen) {
    memset(cfg, 0, sizeof(*cfg));
    if (o->queue == NULL) {
        snprintf(err, errlen, "no queue name given");
        return SLUICE_EINVAL;
    }
    if (sluice_keys_init(&cfg->keys, o->queue, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    if (o->capacity < 0 || o->capacity > SLUICE_CAPACITY_MAX) {
        snprintf(err, errlen, "capacity %lld is out of range (1..%lld; 0 means the default)",
                 o->capacity, SLUICE_CAPACITY_MAX);
        return SLUICE_EINVAL;
    }
    if (o->max_payload > SLUICE_ENVELOPE_MAX_BYTES - 1024) {
        snprintf(err, errlen, "max payload %zu is over the hard limit %u", o->max_payload,
                 SLUICE_ENVELOPE_MAX_BYTES - 1024);
        return SLUICE_EINVAL;
    }
    if (o->max_batch > 100000) {
        snprintf(err, errlen, "max batch %zu is over the limit 100000", o->max_batch);
        return SLUICE_EINVAL;
    }
    cfg->backend = o->backend;
    cfg->capacity = o->capacity ? o->capacity : 1000;
    cfg->max_payload = o->max_payload ? o->max_payload : 1024 * 1024;
    cfg->max_batch = o->max_batch ? o->max_batch : 1000;
    cfg->idempotency_ttl_ms = o->idempotency_ttl_ms > 0 ? o->idempotency_ttl_ms : 86400000;
    int timeout = o->command_timeout_ms > 0 ? o->command_timeout_ms : 5000;
    cfg->wait_timeout_ms = o->wait_timeout_ms > 0 ? o->wait_timeout_ms : 1000;
    if (o->wait_replicas < 0 || o->wait_replicas > SLUICE_WAIT_REPLICAS_MAX) {
        snprintf(err, errlen, "wait replicas %d is out of range (0..%d)", o->wait_replicas,
                 SLUICE_WAIT_REPLICAS_MAX);
        return SLUICE_EINVAL;
    }
    if (o->wait_replicas > 0 && (o->wait_timeout_ms < 0 || cfg->wait_timeout_ms > timeout)) {
        snprintf(err, errlen, "wait timeout %d ms is out of range (1..the command timeout, %d ms)",
                 o->wait_timeout_ms, timeout);
        return SLUICE_EINVAL;
    }
    cfg->wait_replicas = o->wait_replicas;
    snprintf(cfg->wait_n, sizeof(cfg->wait_n), "%d", cfg->wait_replicas);
    snprintf(cfg->wait_ms, sizeof(cfg->wait_ms), "%d", cfg->wait_timeout_ms);
    return 0;
}

int sluice__admit_confirm(const sluice__admit_cfg *cfg, long long replicas,
                          sluice_admit_result *res, size_t n, char *err, size_t errlen) {
    size_t admitted = 0;
    for (size_t i = 0; i < n; i++) {
        admitted += res[i].outcome == SLUICE_ADMITTED;
    }
    if (cfg->wait_replicas == 0 || admitted == 0 || replicas >= cfg->wait_replicas) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (res[i].outcome == SLUICE_ADMITTED) {
            res[i].outcome = SLUICE_FAILED;
            res[i].status = SLUICE_EUNKNOWN;
        }
    }
    if (replicas < 0) {
        snprintf(err, errlen,
                 "appended on the primary, but the WAIT for %d replica(s) got no answer: not "
                 "known to be replicated",
                 cfg->wait_replicas);
    } else {
        snprintf(err, errlen,
                 "appended on the primary, but %lld of %d replica(s) confirmed it within %d ms: "
                 "a failover now may lose it",
                 replicas, cfg->wait_replicas, cfg->wait_timeout_ms);
    }
    return SLUICE_EUNKNOWN;
}

int sluice__admit_check_msg(const sluice__admit_cfg *cfg, const sluice_message *m, char *err,
                            size_t errlen) {
    if ((m->payload == NULL && m->len > 0) || (m->headers == NULL && m->nheaders > 0)) {
        snprintf(err, errlen, "NULL payload or headers with a non-zero length");
        return SLUICE_EINVAL;
    }
    if (m->len > cfg->max_payload) {
        snprintf(err, errlen, "payload is %zu bytes; the limit is %zu", m->len, cfg->max_payload);
        return SLUICE_ETOOBIG;
    }
    if (m->idempotency_key != NULL) {
        size_t kl = strlen(m->idempotency_key);
        if (kl == 0 || kl > SLUICE_IDEMPOTENCY_KEY_MAX) {
            snprintf(err, errlen, "idempotency key is %zu bytes; 1..%d allowed", kl,
                     SLUICE_IDEMPOTENCY_KEY_MAX);
            return SLUICE_EINVAL;
        }
        if (cfg->backend != SLUICE_BACKEND_STREAM) {
            snprintf(err, errlen, "idempotency keys need the stream backend");
            return SLUICE_EINVAL;
        }
    }
    sluice_envelope e = {m->payload,  m->len,    m->headers,
                         m->nheaders, m->tenant, m->tenant ? strlen(m->tenant) : 0};
    if (sluice_envelope_size(&e) == 0) {
        snprintf(err, errlen, "message breaks an envelope limit (headers, size)");
        return SLUICE_ETOOBIG;
    }
    return 0;
}

/* ARGV of sluice_admit2: capacity, TTL, the stride, then per message the envelope alone
 * (stride 1: no message of the batch has a tenant or a client key) or tenant, client key and
 * envelope (stride 3). The short form keeps plain batches as small as before limits existed. */
#define ARG_FIRST          3
#define ARG_ENVELOPE(c, i) (ARG_FIRST + (c)->stride * (int)(i) + (c)->stride - 1)

/* Encodes every message into one arena; fills args[2..] with pointers into it. */
static int encode_all(sluice__admit_call *call, const sluice_message *msgs, size_t n, char *err,
                      size_t errlen) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        sluice_envelope e = {msgs[i].payload, msgs[i].len,
                             msgs[i].headers, msgs[i].nheaders,
                             msgs[i].tenant,  msgs[i].tenant ? strlen(msgs[i].tenant) : 0};
        size_t sz = sluice_envelope_size(&e);
        if (sz == 0) {
            snprintf(err, errlen, "message %zu breaks an envelope limit (headers, size)", i);
            return SLUICE_ETOOBIG;
        }
        call->arglens[ARG_ENVELOPE(call, i)] = sz;
        total += sz;
    }
    call->arena = malloc(total ? total : 1);
    if (call->arena == NULL) {
        return SLUICE_ENOMEM;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        sluice_envelope e = {msgs[i].payload, msgs[i].len,
                             msgs[i].headers, msgs[i].nheaders,
                             msgs[i].tenant,  msgs[i].tenant ? strlen(msgs[i].tenant) : 0};
        size_t len = 0;
        int st = sluice_envelope_encode(&e, call->arena + off, total - off, &len);
        if (st != 0) {
            snprintf(err, errlen, "message %zu: cannot encode: %s", i, sluice_strerror(st));
            return st;
        }
        call->args[ARG_ENVELOPE(call, i)] = (const char *)call->arena + off;
        off += len;
    }
    call->arena_len = off;
    return 0;
}

int sluice__admit_call_build(sluice__admit_call *call, const sluice__admit_cfg *cfg,
                             const sluice_message *msgs, size_t n, char *err, size_t errlen) {
    memset(call, 0, sizeof(*call));
    if (n == 0 || n > cfg->max_batch) {
        snprintf(err, errlen, "batch of %zu messages; 1..%zu allowed", n, cfg->max_batch);
        return n == 0 ? SLUICE_EINVAL : SLUICE_ETOOBIG;
    }
    char why[200];
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].idempotency_key != NULL && n != 1) {
            snprintf(err, errlen, "idempotency keys are for single admissions, not batches");
            return SLUICE_EINVAL;
        }
        int st = sluice__admit_check_msg(cfg, &msgs[i], why, sizeof(why));
        if (st != 0) {
            snprintf(err, errlen, "message %zu: %s", i, why);
            return st;
        }
    }
    int stream = cfg->backend == SLUICE_BACKEND_STREAM;
    call->fn = stream ? SLUICE_FN_ADMIT2 : SLUICE_FN_LIST_ADMIT2;
    call->keys[0] = stream ? cfg->keys.stream : cfg->keys.list;
    call->keys[1] = cfg->keys.meta;
    call->keys[2] = cfg->keys.stats;
    call->nkeys = 3;
    if (msgs[0].idempotency_key != NULL) {
        const char *ik = msgs[0].idempotency_key;
        if (sluice_key_idem(&cfg->keys, ik, strlen(ik), call->idem_key, sizeof(call->idem_key)) !=
            0) {
            snprintf(err, errlen, "idempotency key too long");
            return SLUICE_EINVAL;
        }
        call->keys[3] = call->idem_key;
        call->nkeys = 4;
    }
    for (int i = 0; i < call->nkeys; i++) {
        call->keylens[i] = strlen(call->keys[i]);
    }
    call->stride = 1;
    for (size_t i = 0; i < n; i++) {
        if (msgs[i].tenant != NULL || msgs[i].client != NULL) {
            call->stride = 3;
        }
    }
    call->nargs = ARG_ENVELOPE(call, n - 1) + 1;
    call->args = calloc((size_t)call->nargs, sizeof(*call->args));
    call->arglens = calloc((size_t)call->nargs, sizeof(*call->arglens));
    if (call->args == NULL || call->arglens == NULL) {
        sluice__admit_call_free(call);
        return SLUICE_ENOMEM;
    }
    snprintf(call->cap_arg, sizeof(call->cap_arg), "%lld", cfg->capacity);
    snprintf(call->ttl_arg, sizeof(call->ttl_arg), "%d", cfg->idempotency_ttl_ms);
    call->args[0] = call->cap_arg;
    call->arglens[0] = strlen(call->cap_arg);
    call->args[1] = call->ttl_arg;
    call->arglens[1] = strlen(call->ttl_arg);
    call->args[2] = call->stride == 3 ? "3" : "1";
    call->arglens[2] = 1;
    for (size_t i = 0; call->stride == 3 && i < n; i++) {
        const char *t = msgs[i].tenant ? msgs[i].tenant : "";
        const char *c = msgs[i].client ? msgs[i].client : "";
        call->args[ARG_ENVELOPE(call, i) - 2] = t;
        call->arglens[ARG_ENVELOPE(call, i) - 2] = strlen(t);
        call->args[ARG_ENVELOPE(call, i) - 1] = c;
        call->arglens[ARG_ENVELOPE(call, i) - 1] = strlen(c);
    }
    int st = encode_all(call, msgs, n, err, errlen);
    if (st != 0) {
        sluice__admit_call_free(call);
    }
    return st;
}

void sluice__admit_call_tentative(sluice__admit_call *call) {
    call->args[2] = call->stride == 3 ? "3t" : "1t";
    call->arglens[2] = 2;
}

void sluice__admit_call_free(sluice__admit_call *call) {
    free(call->args);
    free(call->arglens);
    free(call->arena);
    call->args = NULL;
    call->arglens = NULL;
    call->arena = NULL;
}

/* Outcome i of a sluice_admit2 reply: an id, 0 (full) or {limit, retry_after_ms, COUNT, PERIOD}. */
static int parse_outcome(const redisReply *o, sluice_drain *drain, long long depth, long long cap,
                         sluice_admit_result *res) {
    if (o->type == REDIS_REPLY_STRING) {
        res->outcome = SLUICE_ADMITTED;
        snprintf(res->id, sizeof(res->id), "%s", o->str);
    } else if (o->type == REDIS_REPLY_INTEGER && o->integer == 0) {
        res->outcome = SLUICE_FULL;
        res->retry_after_s = sluice_drain_retry_after(drain, depth, cap);
        res->retry_after_ms = (long long)res->retry_after_s * 1000;
    } else if (o->type == REDIS_REPLY_ARRAY && o->elements == 4 &&
               o->element[0]->type == REDIS_REPLY_STRING) {
        res->outcome = SLUICE_LIMITED;
        snprintf(res->limit, sizeof(res->limit), "%s", o->element[0]->str);
        res->retry_after_ms = sluice_reply_ll(o->element[1], 0);
        res->retry_after_s = (unsigned)((res->retry_after_ms + 999) / 1000);
        res->limit_count = sluice_reply_ll(o->element[2], -1);
        res->limit_period_ms = sluice_reply_ll(o->element[3], -1);
    } else {
        return SLUICE_EPROTO;
    }
    return 0;
}

int sluice__admit_parse(const redisReply *r, size_t n, sluice_drain *drain, uint64_t now_ms,
                        sluice_admit_result *res, size_t *admitted) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 6) {
        return SLUICE_EPROTO;
    }
    long long take = sluice_reply_ll(r->element[0], -1), depth = sluice_reply_ll(r->element[1], -1);
    long long cap = sluice_reply_ll(r->element[2], -1), dup = sluice_reply_ll(r->element[3], -1);
    long long acked = sluice_reply_ll(r->element[4], -1);
    if (take < 0 || (size_t)take > n || r->elements != 5 + (dup == 1 ? 1 : n)) {
        return SLUICE_EPROTO;
    }
    if (acked >= 0) {
        sluice_drain_sample(drain, now_ms, acked);
    }
    for (size_t i = 0; i < n; i++) {
        memset(&res[i], 0, sizeof(res[i]));
        res[i].depth = depth;
        res[i].capacity = cap;
        if (parse_outcome(r->element[5 + i], drain, depth, cap, &res[i]) != 0) {
            return SLUICE_EPROTO;
        }
        if (dup == 1) {
            res[i].outcome = SLUICE_DUPLICATE;
        }
    }
    if (admitted != NULL) {
        *admitted = (size_t)take;
    }
    return 0;
}

void sluice__admit_fail(sluice_admit_result *res, size_t n, int status, int sent, int fail_open) {
    int unreachable = status == SLUICE_ECONN || status == SLUICE_ETIMEDOUT ||
                      status == SLUICE_ELOADING || status == SLUICE_EAUTH;
    for (size_t i = 0; i < n; i++) {
        memset(&res[i], 0, sizeof(res[i]));
        res[i].depth = -1;
        res[i].capacity = -1;
        res[i].status = status;
        res[i].outcome = (fail_open && unreachable && !sent) ? SLUICE_OPEN : SLUICE_FAILED;
    }
}
