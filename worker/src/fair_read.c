/* SPDX-License-Identifier: MIT */
/*
 * fair_read.c - a fair queue's read in two steps: sluice_fair_grant chooses the lanes and how
 * many entries each gives (deficit round robin, the limits, the counts: all in the function),
 * and the worker reads them itself with XREADGROUP, so the entries come back as a command's
 * reply instead of through a function's Lua tables (about 1.4 us of Redis CPU a message less).
 *
 * The lanes granted one count share one command (`XREADGROUP GROUP g c COUNT k STREAMS l1 l2 ...
 * > > ...`); the commands for the other counts are sent with it, pipelined on the reading
 * connection. A lane that gives less than its grant (cleared, trimmed or read by another reader
 * in between), or whose command failed, is given back with sluice_fair_refund (its rates get
 * the units back as far as each safely can; the lane counts stay, see the function). A grant
 * whose reads never happen (the worker dies, the link drops) leaves its entries undelivered and
 * uncounted: the reclaim pass over the lanes (sluice_lane_reclaim) counts them again.
 *
 * It owns the read's state from the grant's reply to the last XREADGROUP reply; the worker
 * (worker.c) owns what comes before (the grant and its waits) and after
 * (sluice__worker_grant_read).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "sluice/keys.h"
#include "sluice/status.h"

#include "worker_internal.h"

typedef struct grant_lane {
    const char *name; /* the tenant (in grant_read.names, copied from the grant's reply) */
    size_t len;       /* 0: the queue's stream */
    char *key;        /* the lane's stream key (owned; NULL for the queue's stream) */
    size_t keylen;
    long long count; /* granted */
    long long got;   /* read */
    int sent;        /* its command was sent */
    int failed;      /* ... and failed (or was never sent): nothing of it was read */
} grant_lane;

typedef struct grant_read {
    sluice_worker *w;
    int outstanding; /* XREADGROUP commands not yet answered */
    int status;      /* the first failure among them, 0 none */
    char detail[256];
    char since[24]; /* the grant's time (Redis's, us), for the refund */
    size_t n;
    grant_lane *lanes;
    char *names; /* the tenants' bytes, one block */
} grant_read;

typedef struct grant_cmd {
    grant_read *g;
    size_t n;
    size_t idx[]; /* the lanes (indexes into g->lanes) this command reads */
} grant_cmd;

static void grant_free(grant_read *g) {
    for (size_t i = 0; i < g->n; i++) {
        free(g->lanes[i].key);
    }
    free(g->lanes);
    free(g->names);
    free(g);
}

static const char *lane_key(const grant_read *g, const grant_lane *l, size_t *len) {
    if (l->key == NULL) {
        *len = strlen(g->w->keys.stream);
        return g->w->keys.stream;
    }
    *len = l->keylen;
    return l->key;
}

static void on_refund(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)sent, (void)r;
    if (status != 0 && status != SLUICE_ECANCELED) {
        sluice__worker_error(arg, "fair_refund_failed", status, sluice_aconn_errstr(c));
    }
}

/* What the lanes whose read failed (failed = 1: "unread", counted again) or came short (failed =
 * 0: "short") gave less than granted goes back: one sluice_fair_refund call, not waited for (the
 * next grant follows it on the same connection). */
static void grant_refund(grant_read *g, int failed) {
    sluice_worker *w = g->w;
    size_t k = 2;
    const char **args = calloc(3 * g->n + 2, sizeof(*args));
    size_t *lens = calloc(3 * g->n + 2, sizeof(*lens));
    char(*num)[2][24] = calloc(g->n, sizeof(*num));
    if (args == NULL || lens == NULL || num == NULL) {
        free(args), free(lens), free(num);
        return; /* the rates keep the units (fewer reads, never more); reclaim recounts lanes */
    }
    args[0] = failed ? "unread" : "short", lens[0] = strlen(args[0]);
    args[1] = g->since, lens[1] = strlen(g->since);
    for (size_t i = 0; i < g->n; i++) {
        grant_lane *l = &g->lanes[i];
        if (l->got < l->count && l->failed == failed) {
            lens[k + 1] = (size_t)snprintf(num[i][0], sizeof(num[i][0]), "%lld", l->count);
            lens[k + 2] = (size_t)snprintf(num[i][1], sizeof(num[i][1]), "%lld", l->count - l->got);
            args[k] = l->name, lens[k] = l->len, args[k + 1] = num[i][0], args[k + 2] = num[i][1];
            k += 3;
        }
    }
    if (k > 2) {
        const char *keys[] = {w->keys.stream, w->keys.meta};
        sluice_aconn_fcall(w->rd, SLUICE_FN_FAIR_REFUND, 2, keys, NULL, (int)k, args, lens, 0,
                           on_refund, w);
    }
    free(args), free(lens), free(num);
}

static void grant_done(grant_read *g) {
    sluice_worker *w = g->w;
    if (g->status != SLUICE_ECANCELED) {
        grant_refund(g, 1);
        grant_refund(g, 0);
    }
    int status = g->status;
    char detail[sizeof(g->detail)];
    memcpy(detail, g->detail, sizeof(detail));
    grant_free(g);
    sluice__worker_grant_read(w, status, detail);
}

/* [[key, [[id, [field, value, ...]], ...]], ...] (a lane that gave nothing is left out), or nil */
static void on_lane_read(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)sent;
    grant_cmd *cmd = arg;
    grant_read *g = cmd->g;
    if (status != 0 && g->status == 0) {
        g->status = status;
        snprintf(g->detail, sizeof(g->detail), "%s", sluice_aconn_errstr(c));
    }
    for (size_t j = 0; status != 0 && j < cmd->n; j++) {
        g->lanes[cmd->idx[j]].failed = 1;
    }
    for (size_t i = 0; status == 0 && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *s = r->element[i];
        if (s->type != REDIS_REPLY_ARRAY || s->elements != 2 ||
            s->element[0]->type != REDIS_REPLY_STRING) {
            continue;
        }
        for (size_t j = 0; j < cmd->n; j++) {
            grant_lane *l = &g->lanes[cmd->idx[j]];
            size_t klen;
            const char *key = lane_key(g, l, &klen);
            if (klen == s->element[0]->len && memcmp(key, s->element[0]->str, klen) == 0) {
                redisReply *list = s->element[1];
                l->got += list->type == REDIS_REPLY_ARRAY ? (long long)list->elements : 0;
                sluice__worker_entries(g->w, list, l->len > 0 ? l->name : NULL, l->len);
                break;
            }
        }
    }
    free(cmd);
    if (--g->outstanding == 0) {
        grant_done(g);
    }
}

/* Sends the XREADGROUP of the lanes not yet sent that were granted lane `first`'s count. */
static int send_count(grant_read *g, size_t first) {
    sluice_worker *w = g->w;
    size_t m = 0;
    for (size_t i = first; i < g->n; i++) {
        m += !g->lanes[i].sent && g->lanes[i].count == g->lanes[first].count;
    }
    grant_cmd *cmd = malloc(sizeof(*cmd) + m * sizeof(size_t));
    const char **argv = calloc(7 + 2 * m, sizeof(*argv));
    size_t *lens = calloc(7 + 2 * m, sizeof(*lens));
    if (cmd == NULL || argv == NULL || lens == NULL) {
        free(cmd), free(argv), free(lens);
        return SLUICE_ENOMEM;
    }
    char count[24];
    snprintf(count, sizeof(count), "%lld", g->lanes[first].count);
    const char *head[] = {"XREADGROUP", "GROUP", w->group, w->consumer, "COUNT", count, "STREAMS"};
    for (int i = 0; i < 7; i++) {
        argv[i] = head[i], lens[i] = strlen(head[i]);
    }
    cmd->g = g, cmd->n = 0;
    for (size_t i = first; i < g->n; i++) {
        grant_lane *l = &g->lanes[i];
        if (!l->sent && l->count == g->lanes[first].count) {
            argv[7 + cmd->n] = lane_key(g, l, &lens[7 + cmd->n]);
            argv[7 + m + cmd->n] = ">", lens[7 + m + cmd->n] = 1;
            cmd->idx[cmd->n++] = i;
        }
    }
    int rc = sluice_aconn_command(w->rd, (int)(7 + 2 * m), argv, lens, 0, on_lane_read, cmd);
    free(argv), free(lens);
    if (rc != 0) {
        free(cmd);
        return rc;
    }
    for (size_t j = 0; j < cmd->n; j++) {
        g->lanes[cmd->idx[j]].sent = 1;
    }
    g->outstanding++;
    return 0;
}

/* The grant's {lane, count, ...} into g (names and keys copied); 0 or SLUICE_ENOMEM/EPROTO. */
static int grant_parse(grant_read *g, const redisReply *lanes) {
    size_t bytes = 0, n = lanes->elements / 2;
    for (size_t i = 0; i < n; i++) {
        const redisReply *t = lanes->element[2 * i], *c = lanes->element[2 * i + 1];
        if (t->type != REDIS_REPLY_STRING || c->type != REDIS_REPLY_INTEGER || c->integer < 1) {
            return SLUICE_EPROTO;
        }
        bytes += t->len + 1;
    }
    g->lanes = calloc(n > 0 ? n : 1, sizeof(*g->lanes));
    g->names = malloc(bytes + 1);
    if (g->lanes == NULL || g->names == NULL) {
        return SLUICE_ENOMEM;
    }
    g->n = n;
    char *p = g->names;
    for (size_t i = 0; i < g->n; i++) {
        const redisReply *t = lanes->element[2 * i];
        grant_lane *l = &g->lanes[i];
        memcpy(p, t->str, t->len);
        p[t->len] = '\0';
        l->name = p, l->len = t->len, l->count = lanes->element[2 * i + 1]->integer;
        p += t->len + 1;
        if (l->len > 0 && (l->key = sluice__key_new(&g->w->keys, SLUICE_KEY_LANE, l->name, l->len,
                                                    &l->keylen)) == NULL) {
            return SLUICE_ENOMEM;
        }
    }
    return 0;
}

int sluice__fair_read_grant(sluice_worker *w, const redisReply *lanes, const char *since) {
    grant_read *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return SLUICE_ENOMEM;
    }
    g->w = w;
    snprintf(g->since, sizeof(g->since), "%s", since);
    int rc = grant_parse(g, lanes);
    for (size_t i = 0; rc == 0 && i < g->n; i++) {
        if (!g->lanes[i].sent) {
            rc = send_count(g, i);
        }
    }
    if (rc != 0) {
        g->status = rc;
        snprintf(g->detail, sizeof(g->detail), "the lanes of a grant could not be read");
    }
    for (size_t i = 0; i < g->n; i++) {
        g->lanes[i].failed = !g->lanes[i].sent;
    }
    if (g->outstanding == 0) { /* nothing sent (or nothing granted): what was granted goes back */
        grant_refund(g, 1);
        grant_free(g);
        return rc != 0 ? rc : SLUICE_EPROTO;
    }
    return 0; /* the commands sent end it; what was not sent is refunded with them */
}
