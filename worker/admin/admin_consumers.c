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

typedef struct consumer {
    char *name;
    long long pending;
    long long idle_ms; /* -1 unknown (list backend) */
} consumer;

typedef struct group_view {
    consumer *cs;
    size_t n;
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
    cs[v->n].name = strdup(name);
    cs[v->n].pending = pending;
    cs[v->n].idle_ms = idle;
    return cs[v->n++].name != NULL ? 0 : -1;
}

/* XINFO CONSUMERS; a queue without stream or group has no consumers (not an error). */
static int read_stream_consumers(admin *a, group_view *v) {
    const char *argv[] = {"XINFO", "CONSUMERS", a->keys.stream, a->group};
    redisReply *r = NULL;
    int st = sluice_conn_command(a->conn, 4, argv, NULL, &r, NULL);
    if (st != 0) {
        int none = r != NULL && r->type == REDIS_REPLY_ERROR &&
                   (strstr(r->str, "NOGROUP") != NULL || strstr(r->str, "no such key") != NULL);
        if (!none) {
            admin_err(a, "XINFO CONSUMERS: %s",
                      r != NULL && r->type == REDIS_REPLY_ERROR ? r->str
                                                                : sluice_conn_errstr(a->conn));
        }
        freeReplyObject(r);
        return none ? 0 : SLUICE_EXIT_REDIS;
    }
    int rc = r->type == REDIS_REPLY_ARRAY ? 0 : SLUICE_EXIT_REDIS;
    for (size_t i = 0; rc == 0 && i < r->elements; i++) {
        const redisReply *c = r->element[i], *name = sluice_reply_field(c, "name");
        if (name == NULL || name->type != REDIS_REPLY_STRING ||
            view_add(v, name->str, sluice_reply_ll(sluice_reply_field(c, "pending"), 0),
                     sluice_reply_ll(sluice_reply_field(c, "idle"), -1)) != 0) {
            rc = SLUICE_EXIT_REDIS;
        }
    }
    if (rc != 0) {
        admin_err(a, "XINFO CONSUMERS: unexpected reply");
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

static void print_view(const admin *a, const group_view *v) {
    char p[32], t[32];
    if (a->json) {
        printf("{\"queue\":\"%s\",\"backend\":\"%s\",\"group\":", a->queue,
               sluice_backend_name(a->backend));
        admin_json_str(stdout, a->group, strlen(a->group));
        printf(",\"consumers\":[");
        for (size_t i = 0; i < v->n; i++) {
            printf("%s{\"name\":", i ? "," : "");
            admin_json_str(stdout, v->cs[i].name, strlen(v->cs[i].name));
            printf(",\"pending\":%lld,\"idle_ms\":", v->cs[i].pending);
            v->cs[i].idle_ms >= 0 ? printf("%lld}", v->cs[i].idle_ms) : printf("null}");
        }
        printf("]}\n");
        return;
    }
    printf("consumers of %s (%s backend%s%s): %zu\n", a->queue, sluice_backend_name(a->backend),
           a->backend == SLUICE_BACKEND_STREAM ? ", group " : "",
           a->backend == SLUICE_BACKEND_STREAM ? a->group : "", v->n);
    if (v->n > 0) {
        printf("  %-40s %10s %10s\n", "NAME", "PENDING", "IDLE");
    }
    for (size_t i = 0; i < v->n; i++) {
        printf("  %-40s %10s %10s\n", v->cs[i].name,
               sluice_fmt_count(p, sizeof(p), (unsigned long long)v->cs[i].pending),
               admin_fmt_ms(t, sizeof(t), v->cs[i].idle_ms));
    }
}

/* ---- pruning ---- */

/* Moves one page of `from`'s pending entries to `to`. *moved counts them; *more: maybe more. */
static int claim_page(admin *a, const char *from, const char *to, long long *moved, int *more) {
    char count[16], idle[24];
    snprintf(count, sizeof(count), "%d", CLAIM_PAGE);
    redisReply *p;
    int rc = admin_call(a, &p, "XPENDING", "XPENDING", a->keys.stream, a->group, "-", "+", count,
                        from, NULL);
    *more = 0;
    for (size_t i = 0; rc == 0 && p->type == REDIS_REPLY_ARRAY && i < p->elements; i++) {
        const redisReply *e = p->element[i]; /* [id, consumer, idle ms, deliveries] */
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) {
            continue;
        }
        snprintf(idle, sizeof(idle), "%lld", e->element[2]->integer);
        redisReply *c;
        rc = admin_call(a, &c, "XCLAIM", "XCLAIM", a->keys.stream, a->group, to, "0",
                        e->element[0]->str, "IDLE", idle, "JUSTID", NULL);
        if (rc == 0) {
            *moved += c->type == REDIS_REPLY_ARRAY ? (long long)c->elements : 0;
            freeReplyObject(c);
        }
    }
    *more = rc == 0 && p->type == REDIS_REPLY_ARRAY && p->elements == CLAIM_PAGE;
    freeReplyObject(p);
    return rc;
}

/* Deletes `name` if (atomically, in sluice_prune) it has no pending entry. *kept = 1 when it
 * had some. */
static int delete_if_empty(admin *a, const char *name, int *kept) {
    const char *keys[] = {a->keys.stream};
    const char *args[] = {a->group, name};
    redisReply *r = NULL;
    int s = sluice_conn_fcall(a->conn, SLUICE_FN_PRUNE, 1, keys, NULL, 2, args, NULL, &r, NULL);
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

static void prune_say(const admin *a, const char *what, const consumer *c, const char *detail) {
    if (a->json) {
        printf("{\"name\":");
        admin_json_str(stdout, c->name, strlen(c->name));
        printf(",\"action\":\"%s\",\"detail\":", what);
        admin_json_str(stdout, detail, strlen(detail));
        printf("}");
    } else {
        printf("%s %s: %s\n", what, c->name, detail);
    }
}

static int prune_one(admin *a, const consumer *c, const consumer *to, prune_tally *t) {
    long long moved = 0;
    int more = c->pending > 0, kept = 0, rc = 0;
    char detail[400];
    if (more && to == NULL) {
        t->kept++;
        snprintf(detail, sizeof(detail), "%lld pending entr%s and no live consumer to take %s",
                 c->pending, c->pending == 1 ? "y" : "ies", c->pending == 1 ? "it" : "them");
        prune_say(a, "kept", c, detail);
        return 0;
    }
    for (int page = 0; rc == 0 && more && page < CLAIM_PAGES; page++) {
        rc = claim_page(a, c->name, to->name, &moved, &more);
    }
    t->moved += moved;
    if (rc != 0 || (rc = delete_if_empty(a, c->name, &kept)) != 0) {
        return rc;
    }
    t->kept += kept;
    t->pruned += !kept;
    snprintf(detail, sizeof(detail), "%s%lld pending entr%s moved to %s",
             kept ? "it has pending entries again (it read meanwhile); " : "", moved,
             moved == 1 ? "y" : "ies", to ? to->name : "-");
    prune_say(a, kept ? "kept" : "pruned", c, moved || kept ? detail : "no pending entries");
    return 0;
}

static int prune(admin *a, const group_view *v) {
    prune_tally t = {0, 0, 0};
    const consumer *to = live_target(a, v);
    int rc = 0, first = 1;
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
        printf("],\"pruned\":%lld,\"kept\":%lld,\"moved\":%lld}\n", t.pruned, t.kept, t.moved);
    } else if (first) {
        printf("no consumer of %s has been idle for %lldms\n", a->queue, a->prune_ms);
    } else {
        printf("pruned %lld, kept %lld, moved %lld pending entries\n", t.pruned, t.kept, t.moved);
    }
    if (rc != 0) {
        return rc;
    }
    return t.pruned > 0 && t.kept == 0 ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}

int admin_consumers(admin *a) {
    group_view v = {NULL, 0};
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
