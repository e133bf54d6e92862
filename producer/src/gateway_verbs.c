/* SPDX-License-Identifier: MIT */
/*
 * gateway_verbs.c - the admin actions that walk a queue's partitions: POST
 * /v1/admin/queues/{q}/pause, /resume and /clear, each partition on the console's connection of
 * its slot (gateway_conns.c).
 *
 * Each is a chain of callbacks holding the request: the queue's meta `partitions` first, then
 * every partition in turn (pause/resume: one HSET/HDEL of meta `paused`; clear: its backend, then
 * sluice_clear or sluice_list_clear a batch a call until no waiting entry is left). The commands
 * and the reading of their replies are sluice-admin's (sluice/verbs.h), so both do the same.
 * Not atomic across partitions, as in sluice-admin: a failure names how far it got.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/keys.h"
#include "sluice/reply.h"
#include "sluice/verbs.h"

#include "gateway.h"

typedef enum { STEP_PARTS, STEP_PAUSE, STEP_BACKEND, STEP_CLEAR } step;

typedef struct verb {
    sluice__http_req *c;
    gw_server *s;
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    int verb; /* GW_VERB_* */
    step at;
    long long parts, i, unchanged, cleared, calls;
    sluice_aconn *ac;         /* of partition i's slot */
    sluice_keys k;            /* of partition i */
    sluice__clear_call clear; /* of partition i */
} verb;

static void on_reply(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg);

static void answer(verb *v, int status, const char *json) {
    sluice__http_respond(v->c, status, "application/json",
                         status == 503 ? "Retry-After: 1\r\n" : NULL, json, strlen(json), 0);
    free(v);
}

static void answer_done(verb *v) {
    char body[SLUICE_QUEUE_NAME_MAX + 256];
    if (v->verb == GW_VERB_CLEAR) {
        snprintf(body, sizeof(body), "{\"queue\":\"%s\",\"cleared\":%lld,\"partitions\":%lld}\n",
                 v->name, v->cleared, v->parts);
    } else {
        snprintf(body, sizeof(body),
                 "{\"queue\":\"%s\",\"paused\":%s,\"changed\":%s,\"partitions\":%lld}\n", v->name,
                 v->verb == GW_VERB_PAUSE ? "true" : "false",
                 v->unchanged == v->parts ? "false" : "true", v->parts);
    }
    answer(v, 200, body);
}

/* Sends the next command of the chain; 0, or -1 when it could not be sent. */
static int send_step(verb *v) {
    int rc;
    if (v->at == STEP_PARTS) {
        const char *argv[] = {"HGET", v->k.meta, "partitions"};
        rc = sluice_aconn_command(v->ac, 3, argv, NULL, 0, on_reply, v);
    } else if (v->at == STEP_PAUSE) {
        const char *argv[4];
        int argc = sluice__pause_command(&v->k, v->verb == GW_VERB_PAUSE, argv);
        rc = sluice_aconn_command(v->ac, argc, argv, NULL, 0, on_reply, v);
    } else if (v->at == STEP_BACKEND) {
        const char *argv[] = {"HGET", v->k.meta, "backend"};
        rc = sluice_aconn_command(v->ac, 3, argv, NULL, 0, on_reply, v);
    } else {
        sluice__clear_call *cc = &v->clear;
        rc = sluice_aconn_fcall(v->ac, cc->fn, cc->nkeys, cc->keys, NULL, cc->nargs, cc->args, NULL,
                                0, on_reply, v);
    }
    if (rc != 0) {
        return -1;
    }
    sluice__http_hold(v->c);
    return 0;
}

/* Partition i: its keys and its first step; past the last, the answer. */
static int next_part(verb *v) {
    if (v->i >= v->parts) {
        answer_done(v);
        return 0;
    }
    char part[SLUICE_QUEUE_NAME_MAX + 1];
    if (sluice_partition_name(v->name, (int)v->i, part, sizeof(part)) != 0 ||
        sluice_keys_init(&v->k, part, NULL, 0) != 0) {
        return -1;
    }
    v->ac = gw_conn_for(v->s, part);
    v->at = v->verb == GW_VERB_CLEAR ? STEP_BACKEND : STEP_PAUSE;
    return send_step(v);
}

/* The reply of the step under way: 1 go on with the next partition, 0 the step was re-sent, -1
 * failed. */
static int took(verb *v, const redisReply *r) {
    switch (v->at) {
    case STEP_PARTS:
        v->parts = sluice_reply_ll(r, 1);
        v->parts = v->parts < 1 ? 1 : v->parts > SLUICE_PARTITIONS_MAX ? 1 : v->parts;
        return 1;
    case STEP_PAUSE:
        if (r->type != REDIS_REPLY_INTEGER) {
            return -1;
        }
        v->unchanged += sluice__pause_unchanged(r);
        v->i++;
        return 1;
    case STEP_BACKEND: {
        int list = r->type == REDIS_REPLY_STRING && strcmp(r->str, "list") == 0;
        sluice__clear_call_init(&v->clear, &v->k,
                                list ? SLUICE_BACKEND_LIST : SLUICE_BACKEND_STREAM,
                                SLUICE_DEFAULT_GROUP);
        v->at = STEP_CLEAR;
        return send_step(v);
    }
    case STEP_CLEAR: {
        int more = sluice__clear_reply(r, &v->cleared);
        if (more < 0) {
            return -1;
        }
        if (more == 1 && ++v->calls < SLUICE_CLEAR_MAX_CALLS) {
            return send_step(v);
        }
        v->i++;
        return 1;
    }
    }
    return -1;
}

static void on_reply(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    verb *v = arg;
    (void)ac, (void)sent;
    if (sluice__http_release(v->c)) {
        free(v); /* the client left: the partitions done so far stay done */
        return;
    }
    int rc = status == 0 && r != NULL && r->type != REDIS_REPLY_ERROR ? took(v, r) : -1;
    if (rc == 1) {
        rc = next_part(v);
    }
    if (rc < 0) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"error\":\"redis unavailable\",\"partitions_done\":%lld,\"partitions\":%lld}\n",
                 v->i, v->parts);
        answer(v, 503, body);
    }
}

void gw_verb_start(sluice__http_req *c, gw_server *s, const gw_queue *q, int which) {
    verb *v = calloc(1, sizeof(*v));
    if (v == NULL) {
        static const char oom[] = "{\"error\":\"out of memory\"}\n";
        sluice__http_respond(c, 500, "application/json", NULL, oom, sizeof(oom) - 1, 0);
        return;
    }
    v->c = c, v->s = s, v->verb = which, v->parts = 1, v->at = STEP_PARTS;
    snprintf(v->name, sizeof(v->name), "%s", q->name);
    /* a partition served by its own name ("Q~1") is one queue, as sluice-admin takes it */
    v->ac = gw_conn_for(s, v->name);
    int rc = sluice_keys_init(&v->k, v->name, NULL, 0) != 0 ? -1
             : strchr(v->name, '~') != NULL                 ? next_part(v)
                                                            : send_step(v);
    if (rc != 0) {
        answer(v, 503, "{\"error\":\"redis unavailable\"}\n");
    }
}
