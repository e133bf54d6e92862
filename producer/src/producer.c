/* SPDX-License-Identifier: MIT */
/*
 * producer.c - the blocking producer (see producer.h): one connection, one atomic admission call
 * per message or per batch. A lost reply is reported as EUNKNOWN, never as admitted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"
#include "sluice/clock.h"
#include "sluice/figures.h"
#include "sluice/options.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/status.h"
#include "sluice/url.h"

#include "admit.h"
#include "route.h"

/* A partitioned queue (sluice-admin partitions Q P): how often the producer asks Q's meta
 * how many partitions there are. */
#define PARTS_CHECK_MS 1000

struct sluice_producer {
    sluice__admit_cfg cfg;
    sluice_conn *conn;
    sluice_drain drain;
    int fail_open;
    sluice_producer_options o; /* kept to build each partition's cfg */
    char queue[SLUICE_QUEUE_NAME_MAX + 1];
    int parts;               /* partitions (1: not partitioned) */
    uint64_t parts_at_ms;    /* when meta `partitions` was last read */
    sluice__admit_cfg *pcfg; /* per partition, built on first use (index 0 unused: cfg) */
    long long pdepth[SLUICE_PARTITIONS_MAX]; /* each partition's depth in its last reply */
    unsigned rnd;
    char err[512];
};

int sluice_producer_new(const sluice_producer_options *o, sluice_producer **out, char *err,
                        size_t errlen) {
    char ebuf[256];
    *out = NULL;
    if (err == NULL) {
        err = ebuf;
        errlen = sizeof(ebuf);
    }
    sluice_producer_options d; /* the caller's options as this library lays them out */
    sluice_producer_options_init(&d);
    if (o != NULL) {
        sluice__options_take(&d, sizeof(d), o);
    }
    o = &d;
    sluice_url url;
    sluice_conn_options co;
    if (sluice_client_setup(o->redis_url, o->connect_timeout_ms, o->command_timeout_ms,
                            o->force_eval, "producer", &url, &co, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    co.queue = o->queue;
    sluice__client_tls(&co, o->tls);
    sluice_producer *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return SLUICE_ENOMEM;
    }
    int st = sluice__admit_cfg_init(&p->cfg, o, err, errlen);
    if (st != 0) {
        free(p);
        return st;
    }
    p->conn = sluice_conn_new(&url, &co);
    if (p->conn == NULL) {
        free(p);
        return SLUICE_ENOMEM;
    }
    sluice_drain_init(&p->drain);
    if (o->retry_after_max_s > 0) {
        p->drain.max_s = o->retry_after_max_s;
    }
    p->fail_open = o->fail_open;
    p->o = *o;
    snprintf(p->queue, sizeof(p->queue), "%s", o->queue);
    p->o.queue = p->queue;
    p->o.redis_url = NULL; /* not needed after setup; the caller's string may go */
    p->parts = 1;
    p->rnd = (unsigned)sluice_now_ns();
    *out = p;
    return 0;
}

void sluice_producer_free(sluice_producer *p) {
    if (p == NULL) {
        return;
    }
    sluice_conn_free(p->conn);
    free(p->pcfg);
    free(p);
}

const char *sluice_producer_errstr(const sluice_producer *p) {
    return p->err;
}

/* WAIT after an admission that appended something: short of the replicas asked for, the
 * admitted results become EUNKNOWN (returned; res already holds the outcomes). */
static int wait_replicas(sluice_producer *p, sluice_admit_result *res, size_t n, size_t *admitted) {
    const char *argv[] = {"WAIT", p->cfg.wait_n, p->cfg.wait_ms};
    redisReply *r = NULL;
    long long got = -1;
    if (sluice_conn_command(p->conn, 3, argv, NULL, &r, NULL) == 0 &&
        r->type == REDIS_REPLY_INTEGER) {
        got = r->integer;
    }
    freeReplyObject(r);
    int st = sluice__admit_confirm(&p->cfg, got, res, n, p->err, sizeof(p->err));
    if (st != 0) {
        *admitted = 0;
    }
    return st;
}

/* One admission call of msgs[0..n) into the queue (or partition) of `cfg`; tentative: each of
 * them has another partition to try (sluice__admit_call_tentative). */
static int admit_on(sluice_producer *p, const sluice__admit_cfg *cfg, const sluice_message *msgs,
                    size_t n, int tentative, sluice_admit_result *res, size_t *admitted) {
    sluice__admit_call call;
    *admitted = 0;
    int st = sluice__admit_call_build(&call, cfg, msgs, n, p->err, sizeof(p->err));
    if (st != 0) {
        sluice__admit_fail(res, n, st, 0, 0);
        return st;
    }
    if (tentative) {
        sluice__admit_call_tentative(&call);
    }
    redisReply *r = NULL;
    int sent = 0, filled = 0; /* filled: res[] holds each message's outcome */
    st = sluice_conn_fcall(p->conn, call.fn, call.nkeys, call.keys, call.keylens, call.nargs,
                           call.args, call.arglens, &r, &sent);
    sluice__admit_call_free(&call);
    if (st == 0) {
        st = sluice__admit_parse(r, n, &p->drain, sluice_now_ms(), res, admitted);
        if (st != 0) {
            snprintf(p->err, sizeof(p->err), "unexpected reply to the admission call");
        } else {
            filled = 1;
            if (cfg->wait_replicas > 0 && *admitted > 0) {
                st = wait_replicas(p, res, n, admitted);
            }
        }
    } else {
        if (sent && (st == SLUICE_ECONN || st == SLUICE_ETIMEDOUT)) {
            snprintf(p->err, sizeof(p->err), "%s (%s): the admission may or may not have run",
                     sluice_conn_errstr(p->conn), sluice_strerror(st));
            st = SLUICE_EUNKNOWN;
        } else {
            snprintf(p->err, sizeof(p->err), "%s", sluice_conn_errstr(p->conn));
        }
    }
    freeReplyObject(r);
    if (st != 0 && !filled) {
        sluice__admit_fail(res, n, st, sent, p->fail_open);
    }
    return st;
}

/* The partitions of the queue, read from its meta at most once per PARTS_CHECK_MS. Returns 0,
 * or the status of a Redis that cannot be reached (nothing was admitted: the caller reports it
 * as the admission's failure instead of waiting for a second timeout); any other refusal (an
 * ACL without HGET) keeps what was known. */
static int parts_check(sluice_producer *p) {
    uint64_t now = sluice_now_ms();
    if (p->parts_at_ms != 0 && now - p->parts_at_ms < PARTS_CHECK_MS) {
        return 0;
    }
    p->parts_at_ms = now;
    const char *argv[] = {"HGET", p->cfg.keys.meta, "partitions"};
    redisReply *r = NULL;
    int st = sluice_conn_command(p->conn, 3, argv, NULL, &r, NULL);
    if (st == 0) {
        long long v = sluice_reply_ll(r, 1);
        p->parts = v < 1 ? 1 : v > SLUICE_PARTITIONS_MAX ? SLUICE_PARTITIONS_MAX : (int)v;
    } else if (sluice_status_is_transient(st)) {
        p->parts_at_ms = 0; /* ask again with the next call */
        snprintf(p->err, sizeof(p->err), "%s", sluice_conn_errstr(p->conn));
    }
    freeReplyObject(r);
    return sluice_status_is_transient(st) ? st : 0;
}

/* The admission settings of partition i (built once). NULL when out of memory. */
static const sluice__admit_cfg *part_cfg(sluice_producer *p, int i) {
    if (i == 0) {
        return &p->cfg;
    }
    if (p->pcfg == NULL && (p->pcfg = calloc(SLUICE_PARTITIONS_MAX, sizeof(*p->pcfg))) == NULL) {
        return NULL;
    }
    sluice__admit_cfg *c = &p->pcfg[i];
    if (c->keys.stream[0] == '\0') {
        char name[SLUICE_QUEUE_NAME_MAX + 1];
        sluice_producer_options o = p->o;
        o.queue = name;
        if (sluice_partition_name(p->queue, i, name, sizeof(name)) != 0 ||
            sluice__admit_cfg_init(c, &o, p->err, sizeof(p->err)) != 0) {
            memset(c, 0, sizeof(*c));
            return NULL;
        }
    }
    return c;
}

/* A partitioned queue: each message goes where sluice__route_message says (its tenant's
 * partition, or else the emptier of two picked at random, by the depths of earlier replies); a
 * message without a tenant that finds its partition full tries the other one before it is
 * answered full. Three rounds, one call per partition used in each: the messages with one
 * partition to try, the first try of those with two (tentative: a full one is counted rejected
 * only where its second try ends), and the second tries. */
static int admit_parts(sluice_producer *p, const sluice_message *msgs, size_t n,
                       sluice_admit_result *res, size_t *admitted) {
    int *first = malloc(n * sizeof(int)), *second = malloc(n * sizeof(int));
    size_t *idx = malloc(n * sizeof(size_t));
    sluice_message *sub = malloc(n * sizeof(*sub));
    sluice_admit_result *sres = malloc(n * sizeof(*sres));
    int st = 0;
    if (first == NULL || second == NULL || idx == NULL || sub == NULL || sres == NULL) {
        st = SLUICE_ENOMEM;
        sluice__admit_fail(res, n, st, 0, 0);
    }
    for (size_t i = 0; st == 0 && i < n; i++) {
        sluice__route r = sluice__route_message(&msgs[i], p->parts, p->pdepth, &p->rnd);
        first[i] = r.part;
        second[i] = r.alt;
    }
    /* every message gets its first try (rounds 0 and 1) even after a call failed; the second
     * tries only while nothing failed (else one full on its tentative try is answered full
     * without being counted: the call reports the failure) */
    int ready = st == 0;
    for (int round = 0; ready && round < 3 && (round < 2 || st == 0); round++) {
        for (int part = 0; part < p->parts; part++) {
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                int two = second[i] != first[i];
                if (round == 2 ? two && second[i] == part && res[i].outcome == SLUICE_FULL
                               : first[i] == part && two == round) {
                    idx[k] = i;
                    sub[k++] = msgs[i];
                }
            }
            if (k == 0) {
                continue;
            }
            const sluice__admit_cfg *c = part_cfg(p, part);
            size_t got = 0;
            int s = c == NULL ? SLUICE_ENOMEM : admit_on(p, c, sub, k, round == 1, sres, &got);
            if (c == NULL) {
                sluice__admit_fail(sres, k, s, 0, 0);
            }
            if (s != 0 && st == 0) {
                st = s;
            }
            for (size_t j = 0; j < k; j++) {
                res[idx[j]] = sres[j];
                if (sres[j].depth >= 0) {
                    p->pdepth[part] = sres[j].depth;
                }
            }
            *admitted += got;
        }
    }
    free(first);
    free(second);
    free(idx);
    free(sub);
    free(sres);
    return st;
}

int sluice_producer_admit_batch(sluice_producer *p, const sluice_message *msgs, size_t n,
                                sluice_admit_result *res, size_t *admitted) {
    size_t dummy;
    if (admitted == NULL) {
        admitted = &dummy;
    }
    *admitted = 0;
    p->err[0] = '\0';
    int st = parts_check(p);
    if (st != 0) { /* a read that failed: nothing was sent for admission */
        sluice__admit_fail(res, n, st, 0, p->fail_open);
        return st;
    }
    size_t plain = 0; /* the messages before the first one with an idempotency key */
    while (plain < n && msgs[plain].idempotency_key == NULL) {
        plain++;
    }
    /* a batch holding a key goes whole to partition 0, the key's place, where more than one
     * message is refused as on a queue of one partition */
    if (p->parts > 1 && n > 0 && plain == n) {
        return admit_parts(p, msgs, n, res, admitted);
    }
    return admit_on(p, &p->cfg, msgs, n, 0, res, admitted);
}

int sluice_producer_admit_msg(sluice_producer *p, const sluice_message *m,
                              sluice_admit_result *res) {
    return sluice_producer_admit_batch(p, m, 1, res, NULL);
}

int sluice_producer_admit(sluice_producer *p, const void *payload, size_t len,
                          sluice_admit_result *res) {
    sluice_message m = {payload, len, NULL, 0, NULL, NULL, NULL};
    return sluice_producer_admit_batch(p, &m, 1, res, NULL);
}

int sluice_producer_partitions(const sluice_producer *p) {
    return p->parts;
}

/* One partition's figures (the queue-figures commands, one round trip each). */
static int part_figures(sluice_producer *p, const sluice__admit_cfg *c, sluice_figures *f) {
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS];
    size_t n = sluice_figures_commands(&c->keys, c->backend, cmds);
    sluice_figures_init(f);
    for (size_t i = 0; i < n; i++) {
        redisReply *r = NULL;
        int st = sluice_conn_command(p->conn, cmds[i].argc, cmds[i].argv, NULL, &r, NULL);
        if (r != NULL && (st == 0 || r->type == REDIS_REPLY_ERROR)) {
            st = sluice_figures_parse(f, c->backend, NULL, i, r); /* a missing stream is 0 */
        }
        if (st != 0) {
            snprintf(p->err, sizeof(p->err), "%s: %s",
                     r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : sluice_strerror(st),
                     r != NULL && r->type == REDIS_REPLY_ERROR ? c->keys.prefix
                                                               : sluice_conn_errstr(p->conn));
            freeReplyObject(r);
            return st;
        }
        freeReplyObject(r);
    }
    sluice_figures_finish(f, c->backend);
    return 0;
}

int sluice_producer_queue_figures(sluice_producer *p, long long *depth, long long *capacity) {
    long long d = 0, cap = 0;
    int st = 0;
    *depth = *capacity = -1;
    for (int i = 0; st == 0 && i < p->parts; i++) {
        const sluice__admit_cfg *c = part_cfg(p, i);
        sluice_figures f;
        if (c == NULL) {
            st = SLUICE_ENOMEM;
        } else if ((st = part_figures(p, c, &f)) == 0) {
            d += f.depth;
            cap += f.capacity >= 0 ? f.capacity : c->capacity;
        }
    }
    if (st == 0) {
        *depth = d;
        *capacity = cap;
    }
    return st;
}
