/* SPDX-License-Identifier: MIT */
/*
 * gateway_entries.c - the payload reads of the operator console, behind the admin token:
 *
 *   GET /v1/queues/{q}/messages?count=N[&tenant=T][&bytes=B]   peek: the oldest N entries
 *   GET /v1/queues/{q}/messages/{id}[?tenant=T][&bytes=B]      inspect: one entry
 *   GET /v1/queues/{q}/dead?count=N[&bytes=B]                  the latest N dead letters
 *
 * Each entry decoded as `sluice-admin peek | inspect | dead list --json` shows it (the one
 * writer: sluice/cli_entry.h), with its state from XPENDING. A chain of callbacks on the console's
 * connection of the queue's slot (gateway_conns.c) holding the request: the queue's backend; for a
 * stream the entries' ids (peek), their pending state, then the entries themselves (a reply lives
 * for its callback only, so the pending state is copied and the entries read last); for a list
 * the oldest N of the list (peek) or, to inspect element SEQ, the list and then each processing
 * list, a page a call. Reads only; a partitioned queue is read in its partition 0 (its own
 * name), the others by their names ("Q~1") with sluice-admin.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/cli_entry.h"
#include "sluice/keys.h"
#include "sluice/reply.h"

#include "gateway.h"

#define PEEK_MAX      100   /* count: at most */
#define PEEK_DEFAULT  10    /* count: when not given */
#define BYTES_MAX     16384 /* bytes of a payload shown: at most */
#define BYTES_DEFAULT 200   /* ... when not given (as sluice-admin --bytes) */
#define TENANT_MAX    256   /* bytes of a tenant named in the query */
#define LIST_PAGE     200   /* inspect, list backend: elements a call reads */
#define LIST_LOOK_MAX                                                                              \
    100000             /* ... elements looked at, at most, over the list and processing lists */
#define PROCS_MAX 1000 /* ... processing lists looked in, at most */

typedef enum { READ_PEEK, READ_INSPECT, READ_DEAD } read_kind;
typedef enum { AT_BACKEND, AT_BOUNDS, AT_PENDING, AT_ENTRIES, AT_LIST_FIND, AT_PROCS } read_step;

typedef struct pending {
    char id[SLUICE_STREAM_ID_MAX];
    char *consumer; /* a copy */
    long long idle_ms, deliveries;
} pending;

typedef struct reading {
    sluice__http_req *c;
    gw_server *s;
    read_kind kind;
    read_step at;
    int list;
    long long count, bytes;
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    sluice_keys k;
    char key[SLUICE_KEY_MAX]; /* the stream or lane read; inspect, list: the list or a processing
                                 list */
    char tenant[TENANT_MAX];
    long tenant_len; /* -1: none */
    char first[SLUICE_STREAM_ID_MAX], last[SLUICE_STREAM_ID_MAX];
    pending *p;
    size_t np;
    long long from, looked; /* inspect, list: the next element to read, the elements looked at */
    char **procs;           /* ... the processing lists (copies; NULL: not read yet) */
    size_t nprocs, proc;    /* ... how many, the next to look in */
} reading;

static void on_read(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg);

static void reading_free(reading *d) {
    for (size_t i = 0; i < d->np; i++) {
        free(d->p[i].consumer);
    }
    free(d->p);
    for (size_t i = 0; i < d->nprocs; i++) {
        free(d->procs[i]);
    }
    free(d->procs);
    free(d);
}

static void answer(reading *d, int status, const char *json) {
    sluice__http_respond(d->c, status, "application/json",
                         status == 503 ? "Retry-After: 1\r\n" : NULL, json, strlen(json), 0);
    reading_free(d);
}

/* Sends the command of step d->at; 0, or -1. */
static int send_step(reading *d) {
    char n[24], from[24], to[24];
    const char *argv[7];
    int argc = 0;
    snprintf(n, sizeof(n), "%lld", d->count);
    if (d->at == AT_BACKEND) {
        argv[0] = "HGET", argv[1] = d->k.meta, argv[2] = "backend", argc = 3;
    } else if (d->at == AT_LIST_FIND) { /* a page of the list or a processing list */
        snprintf(from, sizeof(from), "%lld", d->from);
        snprintf(to, sizeof(to), "%lld", d->from + LIST_PAGE - 1);
        argv[0] = "LRANGE", argv[1] = d->key, argv[2] = from, argv[3] = to, argc = 4;
    } else if (d->at == AT_PROCS) {
        argv[0] = "SMEMBERS", argv[1] = d->k.procs, argc = 2;
    } else if (d->at == AT_BOUNDS) { /* peek: the ids of the oldest N */
        argv[0] = "XRANGE", argv[1] = d->key, argv[2] = "-", argv[3] = "+", argv[4] = "COUNT";
        argv[5] = n, argc = 6;
    } else if (d->at == AT_PENDING) {
        argv[0] = "XPENDING", argv[1] = d->key, argv[2] = SLUICE_DEFAULT_GROUP;
        argv[3] = d->first, argv[4] = d->last, argv[5] = n, argc = 6;
    } else if (d->kind == READ_DEAD) { /* the latest first */
        argv[0] = "XREVRANGE", argv[1] = d->k.dead, argv[2] = "+", argv[3] = "-";
        argv[4] = "COUNT", argv[5] = n, argc = 6;
    } else if (d->list) { /* the oldest N: workers take from the right */
        snprintf(from, sizeof(from), "%lld", -d->count);
        argv[0] = "LRANGE", argv[1] = d->k.list, argv[2] = from, argv[3] = "-1", argc = 4;
        return sluice_aconn_command(gw_conn_for(d->s, d->name), argc, argv, NULL, 0, on_read, d) ==
                       0
                   ? (sluice__http_hold(d->c), 0)
                   : -1;
    } else {
        argv[0] = "XRANGE", argv[1] = d->key, argv[2] = d->first, argv[3] = d->last;
        argv[4] = "COUNT", argv[5] = n, argc = 6;
    }
    if (sluice_aconn_command(gw_conn_for(d->s, d->name), argc, argv, NULL, 0, on_read, d) != 0) {
        return -1;
    }
    sluice__http_hold(d->c);
    return 0;
}

/* Copies the XPENDING reply (the extended form; an error NOGROUP: nothing in flight). */
static int keep_pending(reading *d, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY) {
        return r->type == REDIS_REPLY_ERROR && strstr(r->str, "NOGROUP") != NULL ? 0 : -1;
    }
    d->p = calloc(r->elements ? r->elements : 1, sizeof(*d->p));
    if (d->p == NULL) {
        return -1;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 4 ||
            e->element[0]->type != REDIS_REPLY_STRING ||
            e->element[0]->len >= SLUICE_STREAM_ID_MAX) {
            continue;
        }
        pending *p = &d->p[d->np++];
        memcpy(p->id, e->element[0]->str, e->element[0]->len + 1);
        p->consumer = e->element[1]->type == REDIS_REPLY_STRING ? strdup(e->element[1]->str) : NULL;
        p->idle_ms = sluice_reply_ll(e->element[2], -1);
        p->deliveries = sluice_reply_ll(e->element[3], -1);
    }
    return 0;
}

/* The state of stream entry e from the pending entries copied. */
static void set_state(const reading *d, sluice_cli_entry *e) {
    for (size_t i = 0; i < d->np; i++) {
        if (strcmp(d->p[i].id, e->id) == 0) {
            e->in_flight = 1, e->consumer = d->p[i].consumer;
            e->idle_ms = d->p[i].idle_ms, e->deliveries = d->p[i].deliveries;
        }
    }
}

/* The answer: {"queue":Q,"entries":[...]} (dead: "dead_letters"), the entries of reply r, or
 * (r NULL) the one entry found (NULL: none). */
static void answer_entries(reading *d, const redisReply *r, const sluice_cli_entry *found) {
    char *out = NULL;
    size_t len = 0, n = r != NULL && r->type == REDIS_REPLY_ARRAY ? r->elements : 0, shown = 0;
    FILE *f = open_memstream(&out, &len);
    if (f == NULL) {
        answer(d, 500, "{\"error\":\"out of memory\"}\n");
        return;
    }
    fprintf(f, "{\"queue\":\"%s\",\"%s\":[", d->name,
            d->kind == READ_DEAD ? "dead_letters" : "entries");
    if (found != NULL) {
        sluice_cli_entry_json(f, found, 0, (size_t)d->bytes);
        shown++;
    }
    for (size_t i = 0; i < n; i++) {
        /* the list: the oldest is the last element */
        const redisReply *x = r->element[d->list && d->kind != READ_DEAD ? n - 1 - i : i];
        sluice_cli_entry e;
        if (d->kind == READ_DEAD) {
            fprintf(f, "%s", shown++ ? "," : "");
            sluice_cli_dead_json(f, x, (size_t)d->bytes);
            continue;
        }
        if (d->list ? sluice_cli_entry_from_list(&e, x, NULL) != 0
                    : x->type != REDIS_REPLY_ARRAY || x->elements != 2) {
            continue;
        }
        if (!d->list) {
            sluice_cli_entry_from_stream(&e, x, NULL, d->tenant_len >= 0 ? d->tenant : NULL);
            set_state(d, &e);
        }
        fprintf(f, "%s", shown++ ? "," : "");
        sluice_cli_entry_json(f, &e, !d->list, (size_t)d->bytes);
    }
    fprintf(f, "]}\n");
    if (fclose(f) != 0) {
        free(out);
        answer(d, 500, "{\"error\":\"out of memory\"}\n");
        return;
    }
    if (d->kind == READ_INSPECT && shown == 0) {
        free(out);
        answer(d, 404,
               "{\"error\":\"no such entry (waiting or in flight): it may have been "
               "settled\"}\n");
        return;
    }
    sluice__http_respond(d->c, 200, "application/json", NULL, out, len, 0);
    free(out);
    reading_free(d);
}

/* ---- inspect, list backend: element SEQ ("SEQ:envelope") in the list (waiting), else in each
 * processing list (in flight: its consumer), as sluice-admin inspect looks; LIST_PAGE elements a
 * call, LIST_LOOK_MAX at most in all. ---- */

/* The next list to look in, or the answer that the entry is not there. */
static int next_list(reading *d) {
    if (d->looked >= LIST_LOOK_MAX) {
        answer(d, 404,
               "{\"error\":\"not among the first 100000 elements of the list and processing "
               "lists: sluice-admin inspect looks further\"}\n");
        return 0;
    }
    if (d->procs == NULL) {
        d->at = AT_PROCS;
        return send_step(d);
    }
    if (d->proc == d->nprocs) {
        answer_entries(d, NULL, NULL); /* 404 */
        return 0;
    }
    snprintf(d->key, sizeof(d->key), "%s", d->procs[d->proc++]);
    d->from = 0;
    d->at = AT_LIST_FIND;
    return send_step(d);
}

/* A page of d->key: the entry answered when it is there, else the next page or list. */
static int list_page(reading *d, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY) {
        return -1;
    }
    size_t sl = strlen(d->first);
    const char *consumer = d->procs != NULL ? sluice_key_proc_consumer(&d->k, d->key) : NULL;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *el = r->element[i];
        sluice_cli_entry e;
        if (el->type == REDIS_REPLY_STRING && el->len > sl && memcmp(el->str, d->first, sl) == 0 &&
            el->str[sl] == ':' && sluice_cli_entry_from_list(&e, el, consumer) == 0) {
            answer_entries(d, NULL, &e);
            return 0;
        }
    }
    d->looked += (long long)r->elements;
    if (r->elements == LIST_PAGE && d->looked < LIST_LOOK_MAX) {
        d->from += LIST_PAGE;
        return send_step(d);
    }
    return next_list(d);
}

/* The processing lists' keys (SMEMBERS), copied: the reply lives for its callback only. */
static int keep_procs(reading *d, const redisReply *r) {
    size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    d->procs = calloc(n ? n : 1, sizeof(*d->procs));
    if (r->type != REDIS_REPLY_ARRAY || d->procs == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n && d->nprocs < PROCS_MAX; i++) {
        if (r->element[i]->type == REDIS_REPLY_STRING && r->element[i]->len < SLUICE_KEY_MAX &&
            (d->procs[d->nprocs] = strdup(r->element[i]->str)) != NULL) {
            d->nprocs++;
        }
    }
    return next_list(d);
}

/* The reply of the step under way: 0 the next step was sent or the answer given, -1 failed. */
static int took(reading *d, const redisReply *r) {
    switch (d->at) {
    case AT_BACKEND:
        d->list = r->type == REDIS_REPLY_STRING && strcmp(r->str, "list") == 0;
        if (d->list && d->tenant_len >= 0) {
            answer(d, 400, "{\"error\":\"tenant: a list queue has no tenant lanes\"}\n");
            return 0;
        }
        if (d->list && d->kind == READ_INSPECT) {
            if (strchr(d->first, '-') != NULL) {
                answer(d, 400,
                       "{\"error\":\"not an entry id of a list queue: its entries are "
                       "numbered (as peek shows)\"}\n");
                return 0;
            }
            snprintf(d->key, sizeof(d->key), "%s", d->k.list);
            d->at = AT_LIST_FIND;
            return send_step(d);
        }
        d->at = d->list || d->kind == READ_DEAD ? AT_ENTRIES
                : d->kind == READ_PEEK          ? AT_BOUNDS
                                                : AT_PENDING;
        return send_step(d);
    case AT_BOUNDS:
        if (r->type != REDIS_REPLY_ARRAY) {
            return -1;
        }
        if (r->elements == 0) {
            answer_entries(d, r, NULL);
            return 0;
        }
        snprintf(d->first, sizeof(d->first), "%s", r->element[0]->element[0]->str);
        snprintf(d->last, sizeof(d->last), "%s", r->element[r->elements - 1]->element[0]->str);
        d->at = AT_PENDING;
        return send_step(d);
    case AT_PENDING:
        if (keep_pending(d, r) != 0) {
            return -1;
        }
        d->at = AT_ENTRIES;
        return send_step(d);
    case AT_ENTRIES:
        if (r->type != REDIS_REPLY_ARRAY) {
            return -1;
        }
        answer_entries(d, r, NULL);
        return 0;
    case AT_LIST_FIND:
        return list_page(d, r);
    case AT_PROCS:
        return keep_procs(d, r);
    }
    return -1;
}

static void on_read(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    reading *d = arg;
    (void)ac, (void)sent;
    if (sluice__http_release(d->c)) {
        reading_free(d);
        return;
    }
    /* XPENDING on a stream without the group answers an error reply that means "none" */
    int usable =
        r != NULL && (status == 0 || (d->at == AT_PENDING && r->type == REDIS_REPLY_ERROR));
    if (!usable || (r->type == REDIS_REPLY_ERROR && d->at != AT_PENDING) || took(d, r) != 0) {
        answer(d, 503, "{\"error\":\"redis unavailable\"}\n");
    }
}

/* count, tenant and bytes from the query; 0, or -1 having answered 400. */
static int read_query(reading *d) {
    size_t ql;
    const char *q = sluice__http_query(d->c, &ql);
    char v[32];
    long n = sluice__http_query_param(q, ql, "count", v, sizeof(v));
    if (n == -2 || (n >= 0 && sluice_parse_ll("count", v, 1, PEEK_MAX, &d->count, NULL, 0) != 0)) {
        answer(d, 400, "{\"error\":\"count: a number from 1 to 100\"}\n");
        return -1;
    }
    n = sluice__http_query_param(q, ql, "bytes", v, sizeof(v));
    if (n == -2 || (n >= 0 && sluice_parse_ll("bytes", v, 0, BYTES_MAX, &d->bytes, NULL, 0) != 0)) {
        answer(d, 400, "{\"error\":\"bytes: a number from 0 to 16384\"}\n");
        return -1;
    }
    d->tenant_len = sluice__http_query_param(q, ql, "tenant", d->tenant, sizeof(d->tenant));
    if (d->tenant_len == -2) {
        answer(d, 400, "{\"error\":\"a malformed or too long query parameter\"}\n");
        return -1;
    }
    if (d->tenant_len > 0 && d->kind != READ_DEAD) { /* tenant= (empty): the queue's stream */
        if (sluice__key(&d->k, SLUICE_KEY_LANE, d->tenant, (size_t)d->tenant_len, d->key,
                        sizeof(d->key)) != 0) {
            answer(d, 400, "{\"error\":\"tenant: not a tenant of a lane\"}\n");
            return -1;
        }
    } else {
        d->tenant_len = -1;
    }
    return 0;
}

void gw_entries_read(sluice__http_req *c, gw_server *s, const gw_queue *q, const char *sub,
                     size_t len) {
    static const char entry[] = "/messages/";
    reading *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        static const char oom[] = "{\"error\":\"out of memory\"}\n";
        sluice__http_respond(c, 500, "application/json", NULL, oom, sizeof(oom) - 1, 0);
        return;
    }
    d->c = c, d->s = s, d->count = PEEK_DEFAULT, d->bytes = BYTES_DEFAULT, d->at = AT_BACKEND;
    snprintf(d->name, sizeof(d->name), "%s", q->name);
    if (sluice_keys_init(&d->k, d->name, NULL, 0) != 0) {
        answer(d, 503, "{\"error\":\"redis unavailable\"}\n");
        return;
    }
    snprintf(d->key, sizeof(d->key), "%s", d->k.stream);
    if (sluice__http_path_is(sub, len, "/dead")) {
        d->kind = READ_DEAD;
    } else if (sluice__http_path_is(sub, len, "/messages")) {
        d->kind = READ_PEEK;
    } else {
        size_t il = len - (sizeof(entry) - 1);
        d->kind = READ_INSPECT, d->count = 1;
        if (il == 0 || il >= sizeof(d->first)) {
            answer(d, 400, "{\"error\":\"not an entry id (MS-SEQ, as peek shows)\"}\n");
            return;
        }
        memcpy(d->first, sub + sizeof(entry) - 1, il);
        d->first[il] = '\0';
        memcpy(d->last, d->first, il + 1);
        if (!sluice_cli_is_stream_id(d->first)) {
            answer(d, 400, "{\"error\":\"not an entry id (MS-SEQ, as peek shows)\"}\n");
            return;
        }
    }
    if (read_query(d) != 0) {
        return;
    }
    if (send_step(d) != 0) {
        answer(d, 503, "{\"error\":\"redis unavailable\"}\n");
    }
}
