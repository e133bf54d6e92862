/* SPDX-License-Identifier: MIT */
/*
 * admin_dead.c - `sluice-admin dead list | show | replay | delete | purge`: the dead-letter stream.
 *
 * Each dead letter (sluice:{Q}:dead) has the fields id (the original entry id), m (the
 * envelope), deliveries, consumer and reason; both backends share it.
 *
 * Replay is one server-side function per page of letters (sluice_replay, or sluice_list_replay
 * for the list backend): it reads each letter, appends its body to the queue while depth is
 * below capacity (exactly as producers are admitted, but never counted as a rejection), deletes
 * exactly the replayed letters from the dead stream and counts them admitted - in one atomic
 * step, so a letter is never both queued and dead. Letters are replayed oldest first (or in the
 * order named): once one did not fit, the ones after it are only counted, not replayed, even if
 * room appears meanwhile. Whatever did not fit stays and is reported (exit 1).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/cli_entry.h"
#include "sluice/envelope.h"
#include "sluice/status.h"

#include "admin.h"

#define PAGE     100 /* dead letters per XRANGE / replay call */
#define KEPT_MAX 20  /* ids of kept letters listed in the report */

/* ---- reading entries ---- */

static const char *entry_str(const redisReply *e, const char *name) {
    const redisReply *v = sluice_reply_entry_field(e, name);
    return v != NULL ? v->str : "";
}

static int check_ids(admin *a, int from) {
    for (int i = from; i < a->nargs; i++) {
        if (!sluice_cli_is_stream_id(a->args[i])) {
            admin_err(a, "\"%s\" is not a dead-letter id (MS-SEQ, as `dead list` shows)",
                      a->args[i]);
            return SLUICE_EXIT_USAGE;
        }
    }
    return 0;
}

/* One page of dead letters after `after` ("-" = from the start). */
static int read_page(admin *a, const char *after, long long count, redisReply **out) {
    char start[64], n[24];
    snprintf(start, sizeof(start), "%s%s", strcmp(after, "-") == 0 ? "" : "(", after);
    snprintf(n, sizeof(n), "%lld", count);
    int rc = admin_call(a, out, "reading the dead stream", "XRANGE", a->keys.dead, start, "+",
                        "COUNT", n, NULL);
    if (rc == 0 && (*out)->type != REDIS_REPLY_ARRAY) {
        admin_err(a, "XRANGE: unexpected reply");
        freeReplyObject(*out);
        return SLUICE_EXIT_REDIS;
    }
    return rc;
}

static long long dead_len(admin *a, int *rc) {
    redisReply *r;
    *rc = admin_call(a, &r, "XLEN", "XLEN", a->keys.dead, NULL);
    long long n = *rc == 0 ? sluice_reply_ll(r, 0) : 0;
    freeReplyObject(r);
    return n;
}

/* ---- list, show ---- */

static void list_row(const admin *a, const redisReply *e, int first) {
    const redisReply *m = sluice_reply_entry_field(e, "m");
    sluice_envelope env;
    sluice_header h[SLUICE_ENVELOPE_MAX_HEADERS];
    int ok = m != NULL && sluice_envelope_decode((const unsigned char *)m->str, m->len, 0, &env, h,
                                                 SLUICE_ENVELOPE_MAX_HEADERS, NULL, 0) == 0;
    const char *reason = entry_str(e, "reason");
    if (a->json) {
        printf("%s", first ? "" : ",");
        sluice_cli_dead_json(stdout, e, SIZE_MAX);
        return;
    }
    char consumer[32], why[40], id[SLUICE_STREAM_ID_MAX];
    printf("%-22s %-22s %5lld  %-20.20s %-30.30s ", e->element[0]->str,
           admin_safe(entry_str(e, "id"), id, sizeof(id)),
           sluice_reply_ll(sluice_reply_entry_field(e, "deliveries"), 0),
           admin_safe(entry_str(e, "consumer"), consumer, sizeof(consumer)),
           admin_safe(reason, why, sizeof(why)));
    if (ok) {
        admin_print_safe(stdout, (const char *)env.payload, env.payload_len, 40);
    } else {
        printf("(%s)", m == NULL || m->len == 0 ? "no body" : "undecodable envelope");
    }
    printf("\n");
}

static int dead_list(admin *a) {
    int rc;
    if (a->nargs > 2) {
        admin_err(a, "unexpected argument '%s'", a->args[2]);
        return SLUICE_EXIT_USAGE;
    }
    if ((rc = admin_connect(a)) != 0) {
        return rc;
    }
    long long total = dead_len(a, &rc), limit = a->limit > 0 ? a->limit : 50;
    redisReply *r;
    if (rc != 0 || (rc = read_page(a, "-", limit, &r)) != 0) {
        return rc;
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"dead\":%lld,\"entries\":[", a->queue, total);
    } else {
        printf("dead letters of %s: %lld (showing %zu, oldest first)\n", a->queue, total,
               r->elements);
        if (r->elements > 0) {
            printf("%-22s %-22s %5s  %-20s %-30s %s\n", "DEAD_ID", "ORIGINAL_ID", "DELIV",
                   "CONSUMER", "REASON", "PAYLOAD");
        }
    }
    for (size_t i = 0; i < r->elements; i++) {
        list_row(a, r->element[i], i == 0);
    }
    if (a->json) {
        printf("]}\n");
    }
    freeReplyObject(r);
    return 0;
}

static int dead_show(admin *a) {
    if (a->nargs != 3) {
        admin_err(a, "usage: dead show QUEUE DEAD_ID");
        return SLUICE_EXIT_USAGE;
    }
    int rc = check_ids(a, 2);
    redisReply *r;
    if (rc != 0 || (rc = admin_connect(a)) != 0 ||
        (rc = admin_call(a, &r, "reading the dead stream", "XRANGE", a->keys.dead, a->args[2],
                         a->args[2], NULL)) != 0) {
        return rc;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) {
        admin_err(a, "no dead letter %s in queue %s", a->args[2], a->queue);
        freeReplyObject(r);
        return SLUICE_EXIT_REJECTED;
    }
    const redisReply *e = r->element[0];
    if (a->json) {
        printf("{\"queue\":\"%s\",\"entries\":[", a->queue);
        list_row(a, e, 1);
        printf("]}\n");
    } else {
        char t1[64], t2[64];
        printf("dead letter %s of %s\n", e->element[0]->str, a->queue);
        printf("  dead-lettered %s\n", admin_id_time(e->element[0]->str, t1, sizeof(t1)));
        char oid[64];
        printf("  original id   %s (admitted %s)\n",
               admin_safe(entry_str(e, "id"), oid, sizeof(oid)),
               admin_id_time(entry_str(e, "id"), t2, sizeof(t2)));
        char consumer[200], why[600];
        printf("  deliveries    %s\n  consumer      %s\n  reason        %s\n",
               entry_str(e, "deliveries"), admin_safe(entry_str(e, "consumer"), consumer, 200),
               admin_safe(entry_str(e, "reason"), why, sizeof(why)));
        const redisReply *m = sluice_reply_entry_field(e, "m");
        if (m == NULL || m->len == 0) {
            printf("  envelope      (no body: the entry was gone when it was dead-lettered)\n");
        } else {
            admin_show_envelope(m->str, m->len, 4096);
        }
    }
    freeReplyObject(r);
    return 0;
}

/* ---- replay ---- */

typedef struct replay {
    long long replayed, not_fit, skipped, missing, seen;
    long long depth, capacity;
    int full;     /* stop replaying: something did not fit (the rest are only counted) */
    size_t nkept; /* ids listed in kept[] */
    char kept[KEPT_MAX][SLUICE_STREAM_ID_MAX];
} replay;

static void keep(replay *st, const char *id) {
    if (st->nkept < KEPT_MAX) {
        snprintf(st->kept[st->nkept++], sizeof(st->kept[0]), "%s", id);
    }
}

/* FCALL sluice_replay (sluice_list_replay) with ids[0..n): replays them in one atomic step. */
static int replay_call(admin *a, replay *st, const char **ids, size_t n) {
    int list = a->backend == SLUICE_BACKEND_LIST;
    const char *keys[] = {list ? a->keys.list : a->keys.stream, a->keys.meta, a->keys.stats,
                          a->keys.dead};
    const char *args[1 + PAGE];
    char cap[24];
    snprintf(cap, sizeof(cap), "%lld", a->default_cap);
    args[0] = cap;
    memcpy(args + 1, ids, n * sizeof(*ids));
    redisReply *r = NULL;
    int s = sluice_conn_fcall(a->conn, list ? SLUICE_FN_LIST_REPLAY : SLUICE_FN_REPLAY, 4, keys,
                              NULL, (int)(1 + n), args, NULL, &r, NULL);
    if (s != 0 || !sluice_reply_replay_ok(r, n)) {
        admin_err(a, "replaying: %s: %s", sluice_strerror(s ? s : SLUICE_EPROTO),
                  r && r->type == REDIS_REPLY_ERROR ? r->str : sluice_conn_errstr(a->conn));
        freeReplyObject(r);
        return SLUICE_EXIT_REDIS;
    }
    st->replayed += r->element[0]->integer;
    st->not_fit += r->element[1]->integer;
    st->skipped += r->element[2]->integer;
    st->missing += r->element[3]->integer;
    st->seen += r->element[0]->integer + r->element[1]->integer + r->element[2]->integer;
    st->depth = r->element[4]->integer;
    st->capacity = r->element[5]->integer;
    st->full = r->element[1]->integer > 0;
    for (size_t i = 0; i < n; i++) {
        long long o = r->element[6]->element[i]->integer;
        if (o == 1 || o == 2) {
            keep(st, ids[i]);
        } else if (o == 3) {
            admin_err(a, "no dead letter %s in queue %s", ids[i], a->queue);
        }
    }
    freeReplyObject(r);
    return 0;
}

/* Counts a letter that stays because an earlier one did not fit (or it has no body). */
static void count_kept(replay *st, const redisReply *e) {
    const redisReply *m = sluice_reply_entry_field(e, "m");
    st->seen++;
    if (m == NULL || m->len == 0) {
        st->skipped++; /* nothing to replay: the entry was gone when it died */
    } else {
        st->not_fit++;
    }
    keep(st, e->element[0]->str);
}

/* After something did not fit: reads the named letters ids[0..n) only to count them. */
static int count_named(admin *a, replay *st, const char **ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        redisReply *r;
        int rc = admin_call(a, &r, "reading the dead stream", "XRANGE", a->keys.dead, ids[i],
                            ids[i], NULL);
        if (rc != 0) {
            return rc;
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
            count_kept(st, r->element[0]);
        } else {
            admin_err(a, "no dead letter %s in queue %s", ids[i], a->queue);
            st->missing++;
        }
        freeReplyObject(r);
    }
    return 0;
}

/* 1 when args[j] was named before it (a letter named twice is replayed once). */
static int named_before(const admin *a, int j) {
    for (int k = 2; k < j; k++) {
        if (strcmp(a->args[k], a->args[j]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Replays the named letters (args[2..]), a page per call. */
static int replay_named(admin *a, replay *st) {
    int rc = 0;
    for (int i = 2; rc == 0 && i < a->nargs; i += PAGE) {
        const char *ids[PAGE];
        size_t n = 0;
        for (int j = i; j < a->nargs && j < i + PAGE; j++) {
            if (!named_before(a, j)) {
                ids[n++] = a->args[j];
            }
        }
        if (n > 0) {
            rc = st->full ? count_named(a, st, ids, n) : replay_call(a, st, ids, n);
        }
    }
    return rc;
}

/* Replays from the oldest on, at most `limit` letters (bounded by the length at the start). */
static int replay_all(admin *a, replay *st) {
    int rc;
    long long limit = dead_len(a, &rc), read = 0;
    if (a->limit > 0 && a->limit < limit) {
        limit = a->limit;
    }
    char after[SLUICE_STREAM_ID_MAX] = "-";
    while (rc == 0 && read < limit) {
        redisReply *r;
        const char *ids[PAGE];
        long long want = limit - read < PAGE ? limit - read : PAGE;
        if ((rc = read_page(a, after, want, &r)) != 0) {
            break;
        }
        if (r->elements == 0) {
            freeReplyObject(r);
            break;
        }
        read += (long long)r->elements;
        snprintf(after, sizeof(after), "%s", r->element[r->elements - 1]->element[0]->str);
        for (size_t i = 0; i < r->elements; i++) {
            ids[i] = r->element[i]->element[0]->str;
            if (st->full) {
                count_kept(st, r->element[i]);
            }
        }
        if (!st->full) {
            rc = replay_call(a, st, ids, r->elements);
        }
        freeReplyObject(r);
    }
    return rc;
}

static void replay_report(const admin *a, const replay *st) {
    if (a->json) {
        printf("{\"queue\":\"%s\",\"replayed\":%lld,\"not_fitted\":%lld,\"skipped_no_body\":%lld,"
               "\"not_found\":%lld,\"depth\":%lld,\"capacity\":%lld,\"kept\":[",
               a->queue, st->replayed, st->not_fit, st->skipped, st->missing, st->depth,
               st->capacity);
        for (size_t i = 0; i < st->nkept; i++) {
            printf("%s\"%s\"", i ? "," : "", st->kept[i]);
        }
        printf("]}\n");
        return;
    }
    printf("replayed %lld dead letter%s into %s", st->replayed, st->replayed == 1 ? "" : "s",
           a->queue);
    if (st->depth >= 0) {
        printf(" (depth %lld / capacity %lld)", st->depth, st->capacity);
    }
    printf("\n");
    if (st->not_fit > 0) {
        printf("%lld did not fit (the queue is full) and stay in the dead stream\n", st->not_fit);
    }
    if (st->skipped > 0) {
        printf("%lld have no body (nothing to replay) and stay in the dead stream\n", st->skipped);
    }
    for (size_t i = 0; i < st->nkept; i++) {
        printf("  kept %s\n", st->kept[i]);
    }
}

static int dead_replay(admin *a) {
    static replay st;
    int rc = check_ids(a, 2);
    if (rc != 0 || (rc = admin_connect(a)) != 0 || (rc = admin_detect_backend(a)) != 0) {
        return rc;
    }
    st.depth = st.capacity = -1;
    rc = a->nargs > 2 ? replay_named(a, &st) : replay_all(a, &st);
    if (rc != 0) {
        return rc;
    }
    if (st.seen == 0 && st.missing == 0) {
        a->json ? printf("{\"queue\":\"%s\",\"replayed\":0,\"not_fitted\":0,"
                         "\"skipped_no_body\":0,\"not_found\":0,\"kept\":[]}\n",
                         a->queue)
                : printf("nothing to replay: queue %s has no dead letters\n", a->queue);
        return SLUICE_EXIT_REJECTED;
    }
    replay_report(a, &st);
    return (st.not_fit || st.skipped || st.missing) ? SLUICE_EXIT_REJECTED : SLUICE_EXIT_OK;
}

/* ---- purge ---- */

/* XDEL of the named letters (args[2..]); reports how many were found (and so deleted). */
static int purge_named(admin *a) {
    const char **argv = calloc((size_t)a->nargs, sizeof(*argv));
    if (argv == NULL) {
        admin_err(a, "out of memory");
        return SLUICE_EXIT_REDIS;
    }
    argv[0] = "XDEL", argv[1] = a->keys.dead;
    for (int i = 2; i < a->nargs; i++) {
        argv[i] = a->args[i];
    }
    redisReply *r;
    int rc = admin_callv(a, &r, "deleting dead letters", a->nargs, argv, NULL);
    free(argv);
    if (rc != 0) {
        return rc;
    }
    long long n = sluice_reply_ll(r, 0), asked = a->nargs - 2;
    freeReplyObject(r);
    if (a->json) {
        printf("{\"queue\":\"%s\",\"deleted\":%lld,\"not_found\":%lld}\n", a->queue, n, asked - n);
    } else {
        printf("deleted %lld of %lld dead letters of %s", n, asked, a->queue);
        if (n < asked) {
            printf(" (%lld not found)", asked - n);
        }
        printf("\n");
    }
    return n == asked ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}

static int purge_all(admin *a) {
    redisReply *r;
    int rc = admin_call(a, &r, "MULTI", "MULTI", NULL);
    freeReplyObject(r);
    if (rc != 0 || (rc = admin_call(a, &r, "XLEN", "XLEN", a->keys.dead, NULL)) != 0) {
        return rc;
    }
    freeReplyObject(r);
    if ((rc = admin_call(a, &r, "DEL", "DEL", a->keys.dead, NULL)) != 0) {
        return rc;
    }
    freeReplyObject(r);
    if ((rc = admin_call(a, &r, "deleting the dead stream", "EXEC", NULL)) != 0) {
        return rc;
    }
    long long n =
        r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? sluice_reply_ll(r->element[0], 0) : 0;
    freeReplyObject(r);
    if (a->json) {
        printf("{\"queue\":\"%s\",\"deleted\":%lld,\"not_found\":0}\n", a->queue, n);
    } else {
        printf("deleted %lld dead letters of %s\n", n, a->queue);
    }
    return n > 0 ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}

static int dead_purge(admin *a) {
    int rc = check_ids(a, 2);
    if (rc != 0 || (rc = admin_connect(a)) != 0) {
        return rc;
    }
    if (!a->yes) {
        long long n = a->nargs > 2 ? a->nargs - 2 : dead_len(a, &rc);
        if (rc == 0) {
            admin_err(a, "would delete %lld dead letter%s of %s: add --yes to do it", n,
                      n == 1 ? "" : "s", a->queue);
        }
        return rc != 0 ? rc : SLUICE_EXIT_USAGE;
    }
    return a->nargs > 2 ? purge_named(a) : purge_all(a);
}

/* dead delete QUEUE DEAD_ID...: the named letters, no --yes (each one is named). */
static int dead_delete(admin *a) {
    if (a->nargs < 3) {
        admin_err(a, "usage: dead delete QUEUE DEAD_ID... (the ids `dead list` shows)");
        return SLUICE_EXIT_USAGE;
    }
    int rc = check_ids(a, 2);
    if (rc != 0 || (rc = admin_connect(a)) != 0) {
        return rc;
    }
    return purge_named(a);
}

int admin_dead(admin *a) {
    const char *act = a->args[0];
    if (strcmp(act, "list") == 0) {
        return dead_list(a);
    }
    if (strcmp(act, "show") == 0) {
        return dead_show(a);
    }
    if (strcmp(act, "replay") == 0) {
        return dead_replay(a);
    }
    if (strcmp(act, "purge") == 0) {
        return dead_purge(a);
    }
    if (strcmp(act, "delete") == 0) {
        return dead_delete(a);
    }
    admin_err(a, "unknown action '%s': use list, show, replay, delete or purge", act);
    return SLUICE_EXIT_USAGE;
}
