/* SPDX-License-Identifier: MIT */
/*
 * admin_consumers.c - `sluice-admin consumers [--prune IDLE_MS]` and `sluice-admin purge`.
 *
 * Pruning never orphans a pending entry. XGROUP DELCONSUMER drops the consumer's pending
 * entries from the group's PEL: they would stay in the stream (holding capacity) but no worker
 * could ever claim them again. So a consumer idle for at least IDLE_MS is pruned like this:
 *   1. its pending entries are moved to the most recently active other consumer with
 *      XCLAIM ... IDLE <their idle time> JUSTID - ownership changes, nothing else: the delivery
 *      count and idle time stay, so the workers' reclaim pass takes them exactly when it would
 *      have; with no live consumer to take them, the consumer is kept and reported;
 *   2. it is deleted by the function sluice_prune (scripts/lua/40_stream.lua), which checks, in the
 *      same atomic step, that it has no pending entry left (a consumer that read again
 *      meanwhile is kept). A WATCH would not do: XREADGROUP does not touch watched keys.
 *
 * A fair queue's tenant lanes are streams of their own, each with its own group of the same name
 * (listed in the hash sluice:{Q}:lanes): a consumer's count and idle time take in every lane
 * (XINFO CONSUMERS of each, LANES_MAX lanes at most, the listing says when the walk was cut),
 * and pruning handles each lane as the stream: its entries there go to the lane's most recently
 * active other consumer (else the queue's), then sluice_prune deletes it from that lane's group
 * if it holds nothing there. A consumer left holding lane entries is kept and reported.
 *
 * The list backend has processing lists instead of a consumer group: they are listed with their
 * lengths; pruning them is not offered (idle times are not known).
 */
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/status.h"

#include "admin.h"

#define CLAIM_PAGE  100   /* pending entries moved per XPENDING page */
#define CLAIM_PAGES 10000 /* pages per consumer at most: 1,000,000 entries */
#define LANES_MAX   10000 /* tenant lanes looked in at most */

typedef struct consumer {
    char *name;
    long long pending;      /* in the queue's stream (list backend: its processing list) */
    long long lane_pending; /* in a fair queue's tenant lanes */
    long long lanes;        /* the lanes it holds entries in */
    long long idle_ms;      /* the least over the stream and the lanes; -1 unknown (list) */
    long long lane_moved;   /* --prune: lane entries moved to other consumers */
    long long lane_held;    /* --prune: lane entries it still holds, in lane_held_in lanes */
    long long lane_held_in;
} consumer;

typedef struct group_view {
    consumer *cs;
    size_t n;
    long long lanes_seen; /* tenant lanes looked in */
    int lanes_cut;        /* LANES_MAX reached: lanes after it were not looked in */
} group_view;

static void view_free(group_view *v) {
    for (size_t i = 0; i < v->n; i++) {
        free(v->cs[i].name);
    }
    free(v->cs);
    v->cs = NULL;
    v->n = 0;
}

static int view_add(group_view *v, const char *name, long long pending, long long idle) {
    consumer *cs = realloc(v->cs, (v->n + 1) * sizeof(*cs));
    if (cs == NULL) {
        return -1;
    }
    v->cs = cs;
    memset(&cs[v->n], 0, sizeof(cs[v->n]));
    cs[v->n].name = strdup(name);
    cs[v->n].pending = pending;
    cs[v->n].idle_ms = idle;
    return cs[v->n++].name != NULL ? 0 : -1;
}

static consumer *view_find(const group_view *v, const char *name) {
    for (size_t i = 0; i < v->n; i++) {
        if (strcmp(v->cs[i].name, name) == 0) {
            return &v->cs[i];
        }
    }
    return NULL;
}

/* An error reply saying the key or its group does not exist (a lane deleted as it emptied). */
static int group_gone(const redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_ERROR &&
           (strstr(r->str, "NOGROUP") != NULL || strstr(r->str, "no such key") != NULL);
}

/* XINFO CONSUMERS of `key` (the stream or a lane) into *out; *out NULL when the key or the group
 * does not exist (no consumers: not an error). Each element's name is checked. */
static int xinfo_consumers(admin *a, const char *key, redisReply **out) {
    const char *argv[] = {"XINFO", "CONSUMERS", key, a->group};
    redisReply *r = NULL;
    int st = sluice_conn_command(a->conn, 4, argv, NULL, &r, NULL);
    *out = NULL;
    if (st != 0) {
        int none = group_gone(r);
        if (!none) {
            admin_err(a, "XINFO CONSUMERS: %s",
                      r != NULL && r->type == REDIS_REPLY_ERROR ? r->str
                                                                : sluice_conn_errstr(a->conn));
        }
        freeReplyObject(r);
        return none ? 0 : SLUICE_EXIT_REDIS;
    }
    int ok = r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements; i++) {
        const redisReply *name = sluice_reply_field(r->element[i], "name");
        ok = name != NULL && name->type == REDIS_REPLY_STRING;
    }
    if (!ok) {
        admin_err(a, "XINFO CONSUMERS %s: unexpected reply", key);
        freeReplyObject(r);
        return SLUICE_EXIT_REDIS;
    }
    *out = r;
    return 0;
}

#define FIELD_LL(c, f, dflt) sluice_reply_ll(sluice_reply_field((c), (f)), (dflt))
#define FIELD_STR(c, f)      sluice_reply_field((c), (f))->str

static int read_stream_consumers(admin *a, group_view *v) {
    redisReply *r;
    int rc = xinfo_consumers(a, a->keys.stream, &r);
    for (size_t i = 0; rc == 0 && r != NULL && i < r->elements; i++) {
        const redisReply *c = r->element[i];
        if (view_add(v, FIELD_STR(c, "name"), FIELD_LL(c, "pending", 0), FIELD_LL(c, "idle", -1)) !=
            0) {
            admin_err(a, "out of memory");
            rc = SLUICE_EXIT_REDIS;
        }
    }
    freeReplyObject(r);
    return rc;
}

/* Calls fn on every tenant lane of a fair queue (the hash `lanes`, LANES_MAX lanes at most:
 * v->lanes_cut says the walk was cut). A queue that is not fair has no lanes. */
static int walk_lanes(admin *a, group_view *v,
                      int (*fn)(admin *a, group_view *v, const char *key)) {
    char lanes[SLUICE_KEY_MAX], cursor[32] = "0";
    sluice__key(&a->keys, SLUICE_KEY_LANES, NULL, 0, lanes, sizeof(lanes));
    v->lanes_seen = 0;
    v->lanes_cut = 0;
    for (long pages = 0;; pages++) {
        redisReply *r;
        if (pages == LANES_MAX) { /* HSCAN pages may come empty: bounded all the same */
            v->lanes_cut = 1;
            return 0;
        }
        int rc =
            admin_call(a, &r, "reading the lanes", "HSCAN", lanes, cursor, "COUNT", "100", NULL);
        if (rc != 0) {
            return rc;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            admin_err(a, "HSCAN %s: unexpected reply", lanes);
            return SLUICE_EXIT_REDIS;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        const redisReply *kv = r->element[1];
        for (size_t i = 0; rc == 0 && i + 1 < kv->elements; i += 2) {
            char key[SLUICE_KEY_MAX];
            const redisReply *t = kv->element[i];
            if (t->type != REDIS_REPLY_STRING || t->len == 0 || /* '': the queue's stream */
                sluice__key(&a->keys, SLUICE_KEY_LANE, t->str, t->len, key, sizeof(key)) != 0) {
                continue;
            }
            if (v->lanes_seen == LANES_MAX) {
                v->lanes_cut = 1;
                break;
            }
            v->lanes_seen++;
            rc = fn(a, v, key);
        }
        freeReplyObject(r);
        if (rc != 0 || v->lanes_cut || strcmp(cursor, "0") == 0) {
            return rc;
        }
    }
}

/* Adds a lane's consumers to the view: their entries there, and their idle time there when less
 * (a worker reading lanes only leaves the stream's idle time growing). A consumer not in the
 * stream's group is added when it holds entries in the lane. */
static int merge_lane(admin *a, group_view *v, const char *key) {
    redisReply *r;
    int rc = xinfo_consumers(a, key, &r);
    for (size_t i = 0; rc == 0 && r != NULL && i < r->elements; i++) {
        const redisReply *c = r->element[i];
        long long pending = FIELD_LL(c, "pending", 0), idle = FIELD_LL(c, "idle", -1);
        consumer *x = view_find(v, FIELD_STR(c, "name"));
        if (x == NULL && pending > 0) {
            if (view_add(v, FIELD_STR(c, "name"), 0, idle) != 0) {
                admin_err(a, "out of memory");
                rc = SLUICE_EXIT_REDIS;
                break;
            }
            x = &v->cs[v->n - 1];
        }
        if (x != NULL) {
            x->lane_pending += pending;
            x->lanes += pending > 0;
            x->idle_ms = idle >= 0 && (x->idle_ms < 0 || idle < x->idle_ms) ? idle : x->idle_ms;
        }
    }
    freeReplyObject(r);
    return rc;
}

/* The processing lists in the procs set, with their lengths. */
static int read_list_consumers(admin *a, group_view *v) {
    redisReply *r, *l;
    int rc = admin_call(a, &r, "SMEMBERS", "SMEMBERS", a->keys.procs, NULL);
    for (size_t i = 0; rc == 0 && i < r->elements; i++) {
        const char *key = r->element[i]->str;
        if ((rc = admin_call(a, &l, "LLEN", "LLEN", key, NULL)) != 0) {
            break;
        }
        const char *name = sluice_key_proc_consumer(&a->keys, key);
        if (view_add(v, name, sluice_reply_ll(l, 0), -1) != 0) {
            admin_err(a, "out of memory");
            rc = SLUICE_EXIT_REDIS;
        }
        freeReplyObject(l);
    }
    freeReplyObject(r);
    return rc;
}

/* Text output: the lanes not looked in, if any. */
static void lanes_note(const group_view *v) {
    if (v->lanes_cut) {
        printf("note: only the first %d tenant lanes were looked in; entries held in the others "
               "are not counted (or moved)\n",
               LANES_MAX);
    }
}

static void print_view(const admin *a, const group_view *v) {
    char p[32], l[32], t[32];
    if (a->json) {
        printf("{\"queue\":\"%s\",\"backend\":\"%s\",\"group\":", a->queue,
               sluice_backend_name(a->backend));
        admin_json_str(stdout, a->group, strlen(a->group));
        printf(",\"consumers\":[");
        for (size_t i = 0; i < v->n; i++) {
            printf("%s{\"name\":", i ? "," : "");
            admin_json_str(stdout, v->cs[i].name, strlen(v->cs[i].name));
            printf(",\"pending\":%lld,\"stream_pending\":%lld,\"lane_pending\":%lld,"
                   "\"lanes\":%lld,\"idle_ms\":",
                   v->cs[i].pending + v->cs[i].lane_pending, v->cs[i].pending,
                   v->cs[i].lane_pending, v->cs[i].lanes);
            v->cs[i].idle_ms >= 0 ? printf("%lld}", v->cs[i].idle_ms) : printf("null}");
        }
        printf("],\"lanes_walked\":%lld,\"lanes_cut\":%s}\n", v->lanes_seen,
               v->lanes_cut ? "true" : "false");
        return;
    }
    printf("consumers of %s (%s backend%s%s): %zu\n", a->queue, sluice_backend_name(a->backend),
           a->backend == SLUICE_BACKEND_STREAM ? ", group " : "",
           a->backend == SLUICE_BACKEND_STREAM ? a->group : "", v->n);
    if (v->n > 0) {
        printf("  %-40s %10s %10s %10s\n", "NAME", "PENDING", "IN LANES", "IDLE");
    }
    for (size_t i = 0; i < v->n; i++) {
        printf("  %-40s %10s %10s %10s\n", v->cs[i].name,
               sluice_fmt_count(p, sizeof(p),
                                (unsigned long long)(v->cs[i].pending + v->cs[i].lane_pending)),
               sluice_fmt_count(l, sizeof(l), (unsigned long long)v->cs[i].lane_pending),
               admin_fmt_ms(t, sizeof(t), v->cs[i].idle_ms));
    }
    lanes_note(v);
}

/* ---- pruning ---- */

/* Moves one page of `from`'s pending entries to `to`. *moved counts them; *more: maybe more. */
static int claim_page(admin *a, const char *key, const char *from, const char *to, long long *moved,
                      int *more) {
    char count[16], idle[24];
    snprintf(count, sizeof(count), "%d", CLAIM_PAGE);
    const char *argv[] = {"XPENDING", key, a->group, "-", "+", count, from};
    redisReply *p = NULL;
    int rc = sluice_conn_command(a->conn, 7, argv, NULL, &p, NULL) == 0 ? 0 : SLUICE_EXIT_REDIS;
    *more = 0;
    if (rc != 0) {
        int gone = group_gone(p); /* nothing left to move */
        if (!gone) {
            admin_err(a, "XPENDING %s: %s", key,
                      p != NULL && p->type == REDIS_REPLY_ERROR ? p->str
                                                                : sluice_conn_errstr(a->conn));
        }
        freeReplyObject(p);
        return gone ? 0 : rc;
    }
    for (size_t i = 0; rc == 0 && p->type == REDIS_REPLY_ARRAY && i < p->elements; i++) {
        const redisReply *e = p->element[i]; /* [id, consumer, idle ms, deliveries] */
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) {
            continue;
        }
        snprintf(idle, sizeof(idle), "%lld", e->element[2]->integer);
        redisReply *c;
        rc = admin_call(a, &c, "XCLAIM", "XCLAIM", key, a->group, to, "0", e->element[0]->str,
                        "IDLE", idle, "JUSTID", NULL);
        if (rc == 0) {
            *moved += c->type == REDIS_REPLY_ARRAY ? (long long)c->elements : 0;
            freeReplyObject(c);
        }
    }
    *more = rc == 0 && p->type == REDIS_REPLY_ARRAY && p->elements == CLAIM_PAGE;
    freeReplyObject(p);
    return rc;
}

/* Deletes `name` from the group of `key` (the stream or a lane) if (atomically, in sluice_prune)
 * it has no pending entry there. *kept = 1 when it had some. */
static int delete_if_empty(admin *a, const char *key, const char *name, int *kept) {
    const char *keys[] = {key};
    const char *args[] = {a->group, name};
    redisReply *r = NULL;
    int s = sluice_conn_fcall(a->conn, SLUICE_FN_PRUNE, 1, keys, NULL, 2, args, NULL, &r, NULL);
    if (group_gone(r)) { /* so is the consumer */
        freeReplyObject(r);
        *kept = 0;
        return 0;
    }
    if (s != 0 || r->type != REDIS_REPLY_INTEGER) {
        admin_err(a, "deleting a consumer: %s: %s", sluice_strerror(s ? s : SLUICE_EPROTO),
                  r && r->type == REDIS_REPLY_ERROR ? r->str : sluice_conn_errstr(a->conn));
        freeReplyObject(r);
        return SLUICE_EXIT_REDIS;
    }
    *kept = r->integer == 0;
    freeReplyObject(r);
    return 0;
}

/* The consumer active most recently among those not being pruned, or NULL. */
static const consumer *live_target(const admin *a, const group_view *v) {
    const consumer *best = NULL;
    for (size_t i = 0; i < v->n; i++) {
        if (v->cs[i].idle_ms < a->prune_ms && (best == NULL || v->cs[i].idle_ms < best->idle_ms)) {
            best = &v->cs[i];
        }
    }
    return best;
}

typedef struct prune_tally {
    long long pruned, kept, moved;
} prune_tally;

/* Moves `from`'s pending entries of `key` to `to` (CLAIM_PAGES pages at most); *moved counts. */
static int move_all(admin *a, const char *key, const char *from, const char *to, long long *moved) {
    int more = 1, rc = 0;
    for (int page = 0; rc == 0 && more && page < CLAIM_PAGES; page++) {
        rc = claim_page(a, key, from, to, moved, &more);
    }
    return rc;
}

/* One lane: each consumer being pruned gives its entries there to the lane's most recently
 * active consumer not being pruned (else the queue's) and leaves the lane's group if it holds
 * nothing there any more; what it still holds is counted in lane_held. */
static int prune_lane(admin *a, group_view *v, const char *key) {
    redisReply *r;
    int rc = xinfo_consumers(a, key, &r);
    const char *to = NULL;
    long long best = 0;
    for (size_t i = 0; rc == 0 && r != NULL && i < r->elements; i++) {
        const char *name = FIELD_STR(r->element[i], "name");
        long long idle = FIELD_LL(r->element[i], "idle", -1);
        const consumer *x = view_find(v, name);
        if (idle >= 0 && idle < a->prune_ms && (x == NULL || x->idle_ms < a->prune_ms) &&
            (to == NULL || idle < best)) {
            to = name, best = idle;
        }
    }
    const consumer *live = to == NULL ? live_target(a, v) : NULL;
    to = live != NULL ? live->name : to;
    for (size_t i = 0; rc == 0 && r != NULL && i < r->elements; i++) {
        const char *name = FIELD_STR(r->element[i], "name");
        long long pending = FIELD_LL(r->element[i], "pending", 0), moved = 0;
        consumer *x = view_find(v, name);
        int kept = pending > 0 && to == NULL;
        if (x == NULL || x->idle_ms < a->prune_ms) {
            continue;
        }
        if (pending > 0 && to != NULL) {
            rc = move_all(a, key, name, to, &moved);
        }
        if (rc == 0 && !kept) {
            rc = delete_if_empty(a, key, name, &kept);
        }
        x->lane_moved += moved;
        if (rc == 0 && kept) {
            x->lane_held += pending > moved ? pending - moved : 1;
            x->lane_held_in++;
        }
    }
    freeReplyObject(r);
    return rc;
}

static void prune_say(const admin *a, const char *what, const consumer *c, const char *detail) {
    if (a->json) {
        printf("{\"name\":");
        admin_json_str(stdout, c->name, strlen(c->name));
        printf(",\"action\":\"%s\",\"lane_moved\":%lld,\"lane_held\":%lld,\"detail\":", what,
               c->lane_moved, c->lane_held);
        admin_json_str(stdout, detail, strlen(detail));
        printf("}");
    } else {
        printf("%s %s: %s\n", what, c->name, detail);
    }
}

/* After its lanes (prune_lane): a consumer still holding lane entries is kept as it is; else its
 * stream entries go to `to` and it leaves the stream's group if it holds nothing there. */
static int prune_one(admin *a, const consumer *c, const consumer *to, prune_tally *t) {
    long long moved = 0;
    int kept = 0, rc = 0;
    char detail[400], sd[200] = "", ld[200] = "";
    t->moved += c->lane_moved;
    if (c->lane_held_in > 0 || (c->pending > 0 && to == NULL)) {
        t->kept++;
        if (c->lane_held_in > 0) {
            snprintf(detail, sizeof(detail), "holds %lld entr%s in %lld lane%s; not pruned",
                     c->lane_held, c->lane_held == 1 ? "y" : "ies", c->lane_held_in,
                     c->lane_held_in == 1 ? "" : "s");
        } else {
            snprintf(detail, sizeof(detail), "%lld pending entr%s and no live consumer to take %s",
                     c->pending, c->pending == 1 ? "y" : "ies", c->pending == 1 ? "it" : "them");
        }
        prune_say(a, "kept", c, detail);
        return 0;
    }
    if (c->pending > 0) {
        rc = move_all(a, a->keys.stream, c->name, to->name, &moved);
    }
    t->moved += moved;
    if (rc != 0 || (rc = delete_if_empty(a, a->keys.stream, c->name, &kept)) != 0) {
        return rc;
    }
    t->kept += kept;
    t->pruned += !kept;
    if (moved || kept) {
        snprintf(sd, sizeof(sd), "%s%lld pending entr%s moved to %s",
                 kept ? "it has pending entries again (it read meanwhile); " : "", moved,
                 moved == 1 ? "y" : "ies", to ? to->name : "-");
    }
    if (c->lane_moved > 0) {
        snprintf(ld, sizeof(ld), "%lld entr%s in lanes moved to live consumers", c->lane_moved,
                 c->lane_moved == 1 ? "y" : "ies");
    }
    snprintf(detail, sizeof(detail), "%s%s%s", sd, sd[0] && ld[0] ? "; " : "", ld);
    prune_say(a, kept ? "kept" : "pruned", c, detail[0] ? detail : "no pending entries");
    return 0;
}

static int prune(admin *a, group_view *v) {
    prune_tally t = {0, 0, 0};
    const consumer *to = live_target(a, v);
    int rc = 0, first = 1, any = 0;
    for (size_t i = 0; i < v->n; i++) {
        any |= v->cs[i].idle_ms >= a->prune_ms;
    }
    if (any) { /* the lanes first: a consumer left holding lane entries is kept whole */
        rc = walk_lanes(a, v, prune_lane);
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"prune_idle_ms\":%lld,\"results\":[", a->queue, a->prune_ms);
    }
    for (size_t i = 0; rc == 0 && i < v->n; i++) {
        if (v->cs[i].idle_ms >= a->prune_ms) {
            if (a->json && !first) {
                printf(",");
            }
            first = 0;
            rc = prune_one(a, &v->cs[i], to, &t);
        }
    }
    if (a->json) {
        printf("],\"pruned\":%lld,\"kept\":%lld,\"moved\":%lld,\"lanes_cut\":%s}\n", t.pruned,
               t.kept, t.moved, v->lanes_cut ? "true" : "false");
    } else if (first) {
        printf("no consumer of %s has been idle for %lldms\n", a->queue, a->prune_ms);
    } else {
        printf("pruned %lld, kept %lld, moved %lld pending entries\n", t.pruned, t.kept, t.moved);
        lanes_note(v);
    }
    if (rc != 0) {
        return rc;
    }
    return t.pruned > 0 && t.kept == 0 ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}

int admin_consumers(admin *a) {
    group_view v = {NULL, 0, 0, 0};
    if (a->nargs > 1) {
        admin_err(a, "unexpected argument '%s'", a->args[1]);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc != 0 || (rc = admin_detect_backend(a)) != 0) {
        return rc;
    }
    if (a->prune_ms >= 0 && a->backend == SLUICE_BACKEND_LIST) {
        admin_err(a, "--prune: the list backend has no consumer group (processing lists have "
                     "no idle time to judge by)");
        return SLUICE_EXIT_USAGE;
    }
    rc = a->backend == SLUICE_BACKEND_LIST ? read_list_consumers(a, &v)
                                           : read_stream_consumers(a, &v);
    if (rc == 0 && a->backend == SLUICE_BACKEND_STREAM) {
        rc = walk_lanes(a, &v, merge_lane);
    }
    if (rc == 0) {
        rc = a->prune_ms >= 0 ? prune(a, &v) : (print_view(a, &v), 0);
    }
    view_free(&v);
    return rc;
}

/* ---- purge ---- */

typedef struct keylist {
    char **keys;
    size_t n, cap;
} keylist;

static void keylist_free(keylist *k) {
    for (size_t i = 0; i < k->n; i++) {
        free(k->keys[i]);
    }
    free(k->keys);
}

static int keylist_add(keylist *k, const char *key) {
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 16;
        char **keys = realloc(k->keys, cap * sizeof(*keys));
        if (keys == NULL) {
            return -1;
        }
        k->keys = keys, k->cap = cap;
    }
    return (k->keys[k->n++] = strdup(key)) != NULL ? 0 : -1;
}

/* Every key of the queue: SCAN MATCH sluice:{Q}:* (names have no glob characters). */
static int scan_keys(admin *a, keylist *k) {
    char pattern[SLUICE_KEY_MAX + 2], cursor[32] = "0";
    snprintf(pattern, sizeof(pattern), "%s*", a->keys.prefix);
    for (long rounds = 0; rounds < 10000000; rounds++) {
        redisReply *r;
        int rc = admin_call(a, &r, "SCAN", "SCAN", cursor, "MATCH", pattern, "COUNT", "1000", NULL);
        if (rc != 0) {
            return rc;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            freeReplyObject(r);
            admin_err(a, "SCAN: unexpected reply");
            return SLUICE_EXIT_REDIS;
        }
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            if (keylist_add(k, r->element[1]->element[i]->str) != 0) {
                freeReplyObject(r);
                admin_err(a, "out of memory");
                return SLUICE_EXIT_REDIS;
            }
        }
        freeReplyObject(r);
        if (strcmp(cursor, "0") == 0) {
            return 0;
        }
    }
    admin_err(a, "SCAN did not finish");
    return SLUICE_EXIT_REDIS;
}

static int unlink_keys(admin *a, const keylist *k, long long *deleted) {
    const char *argv[1 + 500];
    argv[0] = "UNLINK"; /* SCAN may report a key twice: count what UNLINK removed */
    for (size_t i = 0; i < k->n; i += 500) {
        size_t n = k->n - i < 500 ? k->n - i : 500;
        memcpy(argv + 1, (const char **)k->keys + i, n * sizeof(char *));
        redisReply *r;
        int rc = admin_callv(a, &r, "deleting keys", (int)(1 + n), argv, NULL);
        if (rc != 0) {
            return rc;
        }
        *deleted += sluice_reply_ll(r, 0);
        freeReplyObject(r);
    }
    return 0;
}

int admin_purge(admin *a) {
    keylist k = {NULL, 0, 0};
    long long deleted = 0;
    if (a->nargs > 1) {
        admin_err(a, "unexpected argument '%s'", a->args[1]);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc == 0 && (rc = scan_keys(a, &k)) == 0 && !a->yes) {
        admin_err(a,
                  "would delete %zu key%s of queue %s (stream, dead letters, settings, "
                  "counters, processing lists, idempotency keys): add --yes to do it",
                  k.n, k.n == 1 ? "" : "s", a->queue);
        rc = SLUICE_EXIT_USAGE;
    } else if (rc == 0) {
        rc = unlink_keys(a, &k, &deleted);
    }
    keylist_free(&k);
    if (rc != 0 || !a->yes) {
        return rc;
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"deleted\":%lld}\n", a->queue, deleted);
    } else {
        printf("deleted %lld key%s of queue %s\n", deleted, deleted == 1 ? "" : "s", a->queue);
    }
    return deleted > 0 ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}
