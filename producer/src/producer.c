/* SPDX-License-Identifier: MIT */
/*
 * producer.c - the blocking producer (see producer.h): one connection, one atomic admission call
 * per message or per batch. A lost reply is reported as EUNKNOWN, never as admitted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/client.h"
#include "sluice/redis.h"
#include "sluice/url.h"

#include "admit.h"

struct sluice_producer {
    sluice__admit_cfg cfg;
    sluice_conn *conn;
    sluice_drain drain;
    int fail_open;
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
    sluice_producer_options d;
    if (o == NULL) {
        sluice_producer_options_init(&d);
        o = &d;
    }
    sluice_url url;
    sluice_conn_options co;
    if (sluice_client_setup(o->redis_url, o->connect_timeout_ms, o->command_timeout_ms,
                            o->force_eval, "producer", &url, &co, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    co.queue = o->queue;
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
    *out = p;
    return 0;
}

void sluice_producer_free(sluice_producer *p) {
    if (p == NULL) {
        return;
    }
    sluice_conn_free(p->conn);
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

int sluice_producer_admit_batch(sluice_producer *p, const sluice_message *msgs, size_t n,
                                sluice_admit_result *res, size_t *admitted) {
    sluice__admit_call call;
    size_t dummy;
    if (admitted == NULL) {
        admitted = &dummy;
    }
    *admitted = 0;
    p->err[0] = '\0';
    int st = sluice__admit_call_build(&call, &p->cfg, msgs, n, p->err, sizeof(p->err));
    if (st != 0) {
        sluice__admit_fail(res, n, st, 0, 0);
        return st;
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
            if (p->cfg.wait_replicas > 0 && *admitted > 0) {
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

int sluice_producer_admit_msg(sluice_producer *p, const sluice_message *m,
                              sluice_admit_result *res) {
    return sluice_producer_admit_batch(p, m, 1, res, NULL);
}

int sluice_producer_admit(sluice_producer *p, const void *payload, size_t len,
                          sluice_admit_result *res) {
    sluice_message m = {payload, len, NULL, 0, NULL, NULL, NULL};
    return sluice_producer_admit_batch(p, &m, 1, res, NULL);
}
