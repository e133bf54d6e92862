/* SPDX-License-Identifier: MIT */
/*
 * admin_queue.c - `sluice-admin pause | resume`: the verbs on a queue's reads.
 *
 * pause sets meta `paused` = 1 in the queue (every partition of a partitioned one); resume
 * deletes it. The workers read the field with their pacing check (at most once a second) and the
 * read functions (sluice_take, sluice_fair_take) on every read: a paused worker takes no new
 * entry, finishes the ones it holds and still reclaims a crashed worker's entries. Admission is
 * not paused: producers admit until the bucket is full (docs/operations.md, Pausing a queue).
 */
#include <stdio.h>
#include <string.h>

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
            rc = on ? admin_call(a, &r, "pausing", "HSET", k.meta, "paused", "1", NULL)
                    : admin_call(a, &r, "resuming", "HDEL", k.meta, "paused", NULL);
        }
        if (rc != 0) {
            admin_parts_stopped(a, i, parts);
            return rc;
        }
        *was += sluice_reply_ll(r, 0) == 0; /* HSET 0: it was set; HDEL 0: it was not */
        freeReplyObject(r);
    }
    return 0;
}

/* pause QUEUE / resume QUEUE */
static int pause_or_resume(admin *a, int on) {
    long long parts = 1, unchanged = 0;
    sluice_figures f;
    if (a->nargs > 1) {
        admin_err(a, "unexpected argument '%s'", a->args[1]);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc == 0) {
        rc = admin_parts_count(a, &parts);
    }
    if (rc == 0) {
        rc = set_paused(a, on, parts, &unchanged);
    }
    if (rc == 0) {
        rc = admin_detect_backend(a);
    }
    if (rc == 0) {
        rc = admin_part_figures(a, &a->keys, &f);
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
    printf("%s)\n", parts > 1 ? " in partition 0" : "");
    return SLUICE_EXIT_OK;
}

int admin_pause(admin *a) {
    return pause_or_resume(a, 1);
}

int admin_resume(admin *a) {
    return pause_or_resume(a, 0);
}
