/* SPDX-License-Identifier: MIT */
/*
 * verbs.c - the commands of pause / resume and clear, and the reading of their replies
 * (sluice/verbs.h), shared by sluice-admin and the gateway's admin actions.
 */
#include <stdio.h>

#include "sluice/reply.h"
#include "sluice/verbs.h"

int sluice__pause_command(const sluice_keys *k, int on, const char *argv[4]) {
    if (on) {
        argv[0] = "HSET", argv[1] = k->meta, argv[2] = "paused", argv[3] = "1";
        return 4;
    }
    argv[0] = "HDEL", argv[1] = k->meta, argv[2] = "paused";
    return 3;
}

int sluice__pause_unchanged(const redisReply *r) {
    return sluice_reply_ll(r, 0) == 0; /* HSET 0: it was set; HDEL 0: it was not */
}

void sluice__clear_call_init(sluice__clear_call *c, const sluice_keys *k, sluice_backend b,
                             const char *group) {
    int list = b == SLUICE_BACKEND_LIST;
    snprintf(c->batch, sizeof(c->batch), "%d", SLUICE_CLEAR_BATCH);
    c->fn = list ? SLUICE_FN_LIST_CLEAR : SLUICE_FN_CLEAR;
    c->nkeys = 2;
    c->keys[0] = list ? k->list : k->stream;
    c->keys[1] = k->meta;
    if (list) {
        c->nargs = 1;
        c->args[0] = c->batch;
        c->args[1] = NULL;
    } else {
        c->nargs = 2;
        c->args[0] = group;
        c->args[1] = c->batch;
    }
}

int sluice__clear_reply(const redisReply *r, long long *cleared) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 3) {
        return -1;
    }
    long long d = sluice_reply_ll(r->element[0], 0), more = sluice_reply_ll(r->element[1], 0),
              lanes = sluice_reply_ll(r->element[2], 0);
    *cleared += d;
    return more == 1 && (d > 0 || lanes > 0) ? 1 : 0;
}
