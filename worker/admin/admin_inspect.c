/* SPDX-License-Identifier: MIT */
/*
 * admin_inspect.c - `sluice-admin inspect QUEUE ID` and `peek QUEUE`: entries of a queue,
 * decoded.
 *
 * An entry is shown with its envelope decoded (tenant, headers, the payload up to --bytes,
 * escaped for the terminal or as JSON), its admission time (the stream id's milliseconds) and its
 * state: waiting, or in flight with the consumer holding it, its idle time and deliveries
 * (XPENDING). Stream queues: the stream, or with --tenant T the fair lane of T (inspect without
 * --tenant also looks in every lane). The list backend: an element's sequence number is its id;
 * inspect finds it in the list (waiting) or in a processing list (in flight: its consumer). The
 * client key is not kept with an entry, so it is not shown. Reads only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/cli_entry.h"
#include "sluice/status.h"

#include "admin.h"

#define LANES_MAX    10000 /* inspect without --tenant: tenant lanes looked in at most */
#define LIST_PAGE    1000  /* list elements per LRANGE */
#define PEEK_MAX     1000  /* peek --count: at most */
#define PEEK_DEFAULT 10

typedef sluice_cli_entry shown;

static void show_json(const admin *a, const shown *e, int first) {
    printf("%s", first ? "" : ",");
    sluice_cli_entry_json(stdout, e, a->backend == SLUICE_BACKEND_STREAM, (size_t)a->bytes);
}

static void show_human(const admin *a, const shown *e) {
    char t[64], who[200], idle[32];
    printf("entry ");
    admin_print_safe(stdout, e->id, e->id_len, 64);
    if (e->lane != NULL) {
        printf(" (lane ");
        admin_print_safe(stdout, e->lane, strlen(e->lane), 200);
        printf(")");
    }
    printf("\n");
    if (a->backend == SLUICE_BACKEND_STREAM) {
        printf("  admitted      %s\n", admin_id_time(e->id, t, sizeof(t)));
    }
    if (!e->in_flight) {
        printf("  state         waiting\n");
    } else {
        printf("  state         in flight: consumer %s",
               e->consumer ? admin_safe(e->consumer, who, sizeof(who)) : "?");
        if (e->idle_ms >= 0) {
            printf(", idle %s", admin_fmt_ms(idle, sizeof(idle), e->idle_ms));
        }
        if (e->deliveries >= 0) {
            printf(", deliveries %lld", e->deliveries);
        }
        printf("\n");
    }
    admin_show_envelope(e->m, e->mlen, (size_t)a->bytes);
}

/* inspect's answer: the one entry found. */
static void show_one(const admin *a, const shown *e) {
    if (a->json) {
        printf("{\"queue\":\"%s\",\"entries\":[", a->queue);
        show_json(a, e, 1);
        printf("]}\n");
    } else {
        show_human(a, e);
    }
}

/* ---- stream backend ---- */

/* The pending entries of `key` from `first` to `last` (XPENDING extended form) into *out; NULL
 * when the group does not exist yet (nothing is in flight). 0 or the exit code, said. */
static int pending_range(admin *a, const char *key, const char *first, const char *last,
                         long long n, redisReply **out) {
    char count[24];
    snprintf(count, sizeof(count), "%lld", n);
    const char *argv[] = {"XPENDING", key, a->group, first, last, count};
    *out = NULL;
    int st = sluice_conn_command(a->conn, 6, argv, NULL, out, NULL);
    if (*out != NULL && (*out)->type == REDIS_REPLY_ERROR && strstr((*out)->str, "NOGROUP")) {
        freeReplyObject(*out);
        *out = NULL;
        return 0;
    }
    if (st != 0 || *out == NULL || (*out)->type != REDIS_REPLY_ARRAY) {
        admin_err(
            a, "reading the pending entries: %s: %s", sluice_strerror(st ? st : SLUICE_EPROTO),
            *out && (*out)->type == REDIS_REPLY_ERROR ? (*out)->str : sluice_conn_errstr(a->conn));
        freeReplyObject(*out);
        *out = NULL;
        return SLUICE_EXIT_REDIS;
    }
    return 0;
}

/* The stream key of lane T ('' or NULL: the queue's stream). */
static void lane_key(const admin *a, const char *t, char *key, size_t len) {
    if (t == NULL || t[0] == '\0') {
        snprintf(key, len, "%s", a->keys.stream);
    } else {
        sluice__key(&a->keys, SLUICE_KEY_LANE, t, strlen(t), key, len);
    }
}

/* Looks for entry a->args[1] in `key`; 1 found (shown), 0 not there, or -exit code. */
static int inspect_in(admin *a, const char *key, const char *lane) {
    const char *id = a->args[1];
    redisReply *x, *p = NULL;
    if (admin_call(a, &x, "reading the stream", "XRANGE", key, id, id, NULL) != 0) {
        return -SLUICE_EXIT_REDIS;
    }
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 1) {
        freeReplyObject(x);
        return 0;
    }
    int rc = pending_range(a, key, id, id, 1, &p);
    if (rc == 0) {
        shown e;
        sluice_cli_entry_from_stream(&e, x->element[0], p, lane);
        show_one(a, &e);
    }
    freeReplyObject(p);
    freeReplyObject(x);
    return rc != 0 ? -rc : 1;
}

/* Without --tenant: the tenant lanes of a fair queue, LANES_MAX at most. */
static int inspect_lanes(admin *a) {
    char lanes[SLUICE_KEY_MAX], cursor[32] = "0";
    sluice__key(&a->keys, SLUICE_KEY_LANES, NULL, 0, lanes, sizeof(lanes));
    int seen = 0, found = 0;
    do {
        redisReply *r;
        if (admin_call(a, &r, "reading the lanes", "HSCAN", lanes, cursor, "COUNT", "100", NULL) !=
            0) {
            return -SLUICE_EXIT_REDIS;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        const redisReply *kv = r->element[1];
        for (size_t i = 0; found == 0 && i + 1 < kv->elements && seen < LANES_MAX; i += 2, seen++) {
            char key[SLUICE_KEY_MAX];
            lane_key(a, kv->element[i]->str, key, sizeof(key));
            found = inspect_in(a, key, kv->element[i]->str);
        }
        freeReplyObject(r);
    } while (found == 0 && strcmp(cursor, "0") != 0 && seen < LANES_MAX);
    return found;
}

/* ---- list backend ---- */

/* Looks for the element with sequence number a->args[1] in list `key`; 1 found, 0 not, -rc. */
static int list_find(admin *a, const char *key, const char *consumer) {
    const char *seq = a->args[1];
    size_t sl = strlen(seq);
    redisReply *r;
    for (long long at = 0;; at += LIST_PAGE) {
        char from[24], to[24];
        snprintf(from, sizeof(from), "%lld", at);
        snprintf(to, sizeof(to), "%lld", at + LIST_PAGE - 1);
        if (admin_call(a, &r, "reading the list", "LRANGE", key, from, to, NULL) != 0) {
            return -SLUICE_EXIT_REDIS;
        }
        for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
            const redisReply *el = r->element[i];
            shown e;
            if (el->type == REDIS_REPLY_STRING && el->len > sl && memcmp(el->str, seq, sl) == 0 &&
                el->str[sl] == ':' && sluice_cli_entry_from_list(&e, el, consumer) == 0) {
                show_one(a, &e);
                freeReplyObject(r);
                return 1;
            }
        }
        size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
        freeReplyObject(r);
        if (n < LIST_PAGE) {
            return 0;
        }
    }
}

/* The list, then every processing list (in flight: its consumer). */
static int inspect_list(admin *a) {
    int found = list_find(a, a->keys.list, NULL);
    redisReply *procs;
    if (found != 0) {
        return found;
    }
    if (admin_call(a, &procs, "reading the processing lists", "SMEMBERS", a->keys.procs, NULL) !=
        0) {
        return -SLUICE_EXIT_REDIS;
    }
    for (size_t i = 0; found == 0 && procs->type == REDIS_REPLY_ARRAY && i < procs->elements; i++) {
        const char *key = procs->element[i]->str;
        found = list_find(a, key, sluice_key_proc_consumer(&a->keys, key));
    }
    freeReplyObject(procs);
    return found;
}

/* ---- inspect, peek ---- */

int admin_inspect(admin *a) {
    if (a->nargs != 2) {
        admin_err(a, "usage: inspect QUEUE ID (the entry's stream id; list backend: its number)");
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc != 0 || (rc = admin_detect_backend(a)) != 0) {
        return rc;
    }
    const char *id = a->args[1];
    int list = a->backend == SLUICE_BACKEND_LIST;
    if (list ? strspn(id, "0123456789") != strlen(id) || id[0] == '\0' || strlen(id) > 20
             : !sluice_cli_is_stream_id(id)) {
        admin_err(a, "\"%s\" is not an entry id (%s)", id,
                  list ? "the list backend's: a number" : "MS-SEQ, as peek shows");
        return SLUICE_EXIT_USAGE;
    }
    int found;
    if (list) {
        found = inspect_list(a);
    } else {
        char key[SLUICE_KEY_MAX];
        lane_key(a, a->tenant, key, sizeof(key));
        found = inspect_in(a, key, a->tenant != NULL && a->tenant[0] ? a->tenant : NULL);
        if (found == 0 && a->tenant == NULL) {
            found = inspect_lanes(a);
        }
    }
    if (found < 0) {
        return -found;
    }
    if (found == 0) {
        admin_err(a, "no entry %s in queue %s (waiting or in flight: it may have been settled)", id,
                  a->queue);
        return SLUICE_EXIT_REJECTED;
    }
    return SLUICE_EXIT_OK;
}

static int peek_stream(admin *a, long long n, int *count) {
    char key[SLUICE_KEY_MAX], nn[24];
    const char *lane = a->tenant != NULL && a->tenant[0] ? a->tenant : NULL;
    lane_key(a, a->tenant, key, sizeof(key));
    snprintf(nn, sizeof(nn), "%lld", n);
    redisReply *x, *p = NULL;
    int rc = admin_call(a, &x, "reading the stream", "XRANGE", key, "-", "+", "COUNT", nn, NULL);
    if (rc != 0) {
        return rc;
    }
    if (x->type == REDIS_REPLY_ARRAY && x->elements > 0) {
        rc = pending_range(a, key, x->element[0]->element[0]->str,
                           x->element[x->elements - 1]->element[0]->str, n, &p);
    }
    for (size_t i = 0; rc == 0 && x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
        shown e;
        sluice_cli_entry_from_stream(&e, x->element[i], p, lane);
        a->json ? show_json(a, &e, i == 0) : show_human(a, &e);
        (*count)++;
    }
    freeReplyObject(p);
    freeReplyObject(x);
    return rc;
}

static int peek_list(admin *a, long long n, int *count) {
    char from[24];
    snprintf(from, sizeof(from), "%lld", -n);
    redisReply *r;
    int rc = admin_call(a, &r, "reading the list", "LRANGE", a->keys.list, from, "-1", NULL);
    if (rc != 0) {
        return rc;
    }
    /* admission pushes on the left, workers take from the right: the oldest is the last */
    for (size_t i = r->type == REDIS_REPLY_ARRAY ? r->elements : 0; i-- > 0;) {
        shown e;
        if (sluice_cli_entry_from_list(&e, r->element[i], NULL) != 0) {
            continue; /* not pushed by sluice */
        }
        a->json ? show_json(a, &e, *count == 0) : show_human(a, &e);
        (*count)++;
    }
    freeReplyObject(r);
    return 0;
}

int admin_peek(admin *a) {
    long long n = a->count > 0 ? a->count : PEEK_DEFAULT;
    int count = 0;
    if (a->nargs != 1) {
        admin_err(a, "unexpected argument '%s'", a->args[1]);
        return SLUICE_EXIT_USAGE;
    }
    if (n > PEEK_MAX) {
        admin_err(a, "--count: %lld is out of range 1..%d", n, PEEK_MAX);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc != 0 || (rc = admin_detect_backend(a)) != 0) {
        return rc;
    }
    if (a->tenant != NULL && a->backend == SLUICE_BACKEND_LIST) {
        admin_err(a, "--tenant: the list backend has no tenant lanes");
        return SLUICE_EXIT_USAGE;
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"entries\":[", a->queue);
    }
    rc = a->backend == SLUICE_BACKEND_LIST ? peek_list(a, n, &count) : peek_stream(a, n, &count);
    long long lanes = 0;
    if (rc == 0 && a->backend == SLUICE_BACKEND_STREAM && a->tenant == NULL) {
        char key[SLUICE_KEY_MAX];
        redisReply *r;
        sluice__key(&a->keys, SLUICE_KEY_LANES, NULL, 0, key, sizeof(key));
        if ((rc = admin_call(a, &r, "reading the lanes", "HLEN", key, NULL)) == 0) {
            lanes = sluice_reply_ll(r, 0);
            freeReplyObject(r);
        }
    }
    if (a->json) {
        printf("],\"tenant_lanes\":%lld}\n", lanes);
    } else if (lanes > 0) {
        printf("(a fair queue: %lld tenant lane%s entries besides; peek --tenant T shows "
               "one, sluice-admin fair %s lists them)\n",
               lanes, lanes == 1 ? " holds" : "s hold", a->queue);
    }
    if (!a->json && rc == 0 && count == 0) {
        char t[200];
        printf("queue %s%s%s holds no entries\n", a->queue, a->tenant ? ", lane " : "",
               a->tenant ? admin_safe(a->tenant, t, sizeof(t)) : "");
    }
    return rc != 0 ? rc : count > 0 ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}
