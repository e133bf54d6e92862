/* SPDX-License-Identifier: MIT */
/*
 * admin_queue.c - `sluice-admin pause | resume | clear`: the verbs on a queue's waiting entries.
 *
 * pause sets meta `paused` = 1 in the queue (every partition of a partitioned one); resume
 * deletes it. The workers read the field with their pacing check (at most once a second) and the
 * read functions (sluice_take, sluice_fair_take) on every read: a paused worker takes no new
 * entry, finishes the ones it holds and still reclaims a crashed worker's entries. Admission is
 * not paused: producers admit until the bucket is full (docs/operations.md, Pausing a queue).
 *
 * clear deletes the waiting entries (not those in flight) with the function sluice_clear
 * (sluice_list_clear), CLEAR_BATCH a call: each call is atomic and leaves every derived count
 * right (depth, a tenant's share, the fair lanes); settings, limits and counters stay.
 */
#include <stdio.h>
#include <string.h>

#include "sluice/status.h"
#include "sluice/verbs.h"

#include "sluice/cli.h"

#include "admin.h"

/* Writes (or deletes) meta `paused` in every partition; *was counts those already so. */
static int set_paused(admin *a, int on, long long parts, long long *was) {
    *was = 0;
    for (long long i = 0; i < parts; i++) {
        sluice_keys k;
        redisReply *r;
        int rc = admin_part_keys(a, i, &k);
        if (rc == 0) {
            const char *argv[4];
            int argc = sluice__pause_command(&k, on, argv);
            rc = admin_callv(a, &r, on ? "pausing" : "resuming", argc, argv, NULL);
        }
        if (rc != 0) {
            admin_parts_stopped(a, i, parts);
            return rc;
        }
        *was += sluice__pause_unchanged(r);
        freeReplyObject(r);
    }
    return 0;
}

/* The start of every verb here: QUEUE alone, connected, its backend and partitions known. */
static int verb_start(admin *a, long long *parts) {
    *parts = 1;
    if (a->nargs > 1) {
        admin_err(a, "unexpected argument '%s'", a->args[1]);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc == 0 && (rc = admin_detect_backend(a)) == 0) {
        rc = admin_parts_count(a, parts);
    }
    return rc;
}

/* The figures of every partition added up (one queue: its own). */
static int all_figures(admin *a, long long parts, sluice_figures *sum) {
    memset(sum, 0, sizeof(*sum));
    for (long long i = 0; i < parts; i++) {
        sluice_keys k;
        sluice_figures f;
        int rc = admin_part_keys(a, i, &k);
        if (rc != 0 || (rc = admin_part_figures(a, &k, &f)) != 0) {
            return rc;
        }
        sluice_figures_add(sum, &f);
    }
    return 0;
}

/* pause QUEUE / resume QUEUE */
static int pause_or_resume(admin *a, int on) {
    long long parts = 1, unchanged = 0;
    sluice_figures f;
    int rc = verb_start(a, &parts);
    if (rc == 0) {
        rc = set_paused(a, on, parts, &unchanged);
    }
    if (rc == 0) {
        rc = all_figures(a, parts, &f);
    }
    if (rc != 0) {
        return rc;
    }
    int already = unchanged == parts; /* every partition was so */
    if (a->json) {
        printf("{\"queue\":\"%s\",\"paused\":%s,\"changed\":%s,\"partitions\":%lld,"
               "\"depth\":%lld,\"capacity\":",
               a->queue, on ? "true" : "false", already ? "false" : "true", parts, f.depth);
        f.capacity >= 0 ? printf("%lld}\n", f.capacity) : printf("null}\n");
        return SLUICE_EXIT_OK;
    }
    const char *part = parts > 1 ? " (every partition)" : "";
    if (on) {
        printf("%s queue %s%s: workers take no new entries within about a second; entries in "
               "flight finish; producers still admit until the bucket is full",
               already ? "already paused:" : "paused", a->queue, part);
    } else {
        printf("%s queue %s%s: workers take entries again within about a second",
               already ? "not paused:" : "resumed", a->queue, part);
    }
    printf(" (depth %lld", f.depth);
    if (f.capacity >= 0) {
        printf(" / capacity %lld", f.capacity);
    }
    printf(")\n");
    return SLUICE_EXIT_OK;
}

int admin_pause(admin *a) {
    return pause_or_resume(a, 1);
}

int admin_resume(admin *a) {
    return pause_or_resume(a, 0);
}

/* ---- clear ---- */

/* Clears the waiting entries of the queue of keys `k`, a batch a call; adds them to *cleared. */
static int clear_part(admin *a, const sluice_keys *k, long long *cleared) {
    sluice__clear_call call;
    sluice__clear_call_init(&call, k, a->backend, a->group);
    for (long long calls = 0; calls < SLUICE_CLEAR_MAX_CALLS; calls++) {
        redisReply *r = NULL;
        int s = sluice_conn_fcall(a->conn, call.fn, call.nkeys, call.keys, NULL, call.nargs,
                                  call.args, NULL, &r, NULL);
        int more = s == 0 ? sluice__clear_reply(r, cleared) : -1;
        if (more < 0) {
            admin_err(a, "clearing %s: %s: %s", k->meta, sluice_strerror(s ? s : SLUICE_EPROTO),
                      r && r->type == REDIS_REPLY_ERROR ? r->str : sluice_conn_errstr(a->conn));
            freeReplyObject(r);
            return SLUICE_EXIT_REDIS;
        }
        freeReplyObject(r);
        if (more == 0) {
            return 0;
        }
    }
    return 0;
}

/* clear QUEUE [--yes] */
int admin_clear(admin *a) {
    long long parts = 1, cleared = 0;
    sluice_figures f;
    int rc = verb_start(a, &parts);
    if (rc == 0) {
        rc = all_figures(a, parts, &f);
    }
    if (rc != 0) {
        return rc;
    }
    if (!a->yes) {
        admin_err(a,
                  "would delete the %lld waiting entr%s of %s (the %lld in flight stay; settings, "
                  "limits and counters are kept): add --yes to do it",
                  f.waiting, f.waiting == 1 ? "y" : "ies", a->queue, f.in_flight);
        return SLUICE_EXIT_USAGE;
    }
    for (long long i = 0; i < parts; i++) {
        sluice_keys k;
        if ((rc = admin_part_keys(a, i, &k)) != 0 || (rc = clear_part(a, &k, &cleared)) != 0) {
            admin_parts_stopped(a, i, parts);
            return rc;
        }
    }
    if ((rc = all_figures(a, parts, &f)) != 0) {
        return rc;
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"cleared\":%lld,\"depth\":%lld,\"waiting\":%lld,"
               "\"in_flight\":%lld,\"partitions\":%lld}\n",
               a->queue, cleared, f.depth, f.waiting, f.in_flight, parts);
    } else {
        printf("cleared %lld waiting entr%s of %s: depth now %lld (%lld in flight, %lld waiting)\n",
               cleared, cleared == 1 ? "y" : "ies", a->queue, f.depth, f.in_flight, f.waiting);
    }
    return cleared > 0 ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}
