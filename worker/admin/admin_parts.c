/* SPDX-License-Identifier: MIT */
/*
 * admin_parts.c - `sluice-admin partitions`: one queue spread over P partitions.
 *
 *   partitions QUEUE            the partitions, their capacity and depth
 *   partitions QUEUE P          spread QUEUE over P partitions (1..64; only more than today)
 *
 * Partition 0 is QUEUE itself, partition i is the queue "QUEUE~i" with its own hash tag (on a
 * Redis Cluster the partitions land on different slots, so on different primaries). QUEUE's
 * meta holds `partitions` = P and `capacity_total` = N; each partition's meta holds capacity
 * ceil(N / P), so together they never hold more than about N (at most P - 1 over it). These
 * writes are one per partition, not one atomic step: nothing spans two slots.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/status.h"

#include "admin.h"

/* QUEUE's partitions and total capacity (meta), -1 for the total when none is set. */
static int read_parts(admin *a, long long *parts, long long *total) {
    redisReply *r;
    int rc = admin_call(a, &r, "reading meta", "HMGET", a->keys.meta, "partitions",
                        "capacity_total", "capacity", NULL);
    if (rc != 0) {
        return rc;
    }
    *parts = sluice_reply_ll(r->element[0], 1);
    if (*parts < 1) {
        *parts = 1;
    }
    *total = r->element[1]->type == REDIS_REPLY_STRING ? sluice_reply_ll(r->element[1], -1)
                                                       : admin_capacity_value(r->element[2]);
    freeReplyObject(r);
    return 0;
}

/* Writes capacity ceil(total / parts) into each partition's meta, then the totals. */
static int write_parts(admin *a, long long parts, long long total) {
    char per[24], p[24], t[24];
    snprintf(per, sizeof(per), "%lld", (total + parts - 1) / parts);
    snprintf(p, sizeof(p), "%lld", parts);
    snprintf(t, sizeof(t), "%lld", total);
    for (long long i = 0; i < parts; i++) {
        char name[SLUICE_QUEUE_NAME_MAX + 1], err[200];
        sluice_keys k;
        if (sluice_partition_name(a->queue, (int)i, name, sizeof(name)) != 0 ||
            sluice_keys_init(&k, name, err, sizeof(err)) != 0) {
            admin_err(a, "partition %lld of %s: the name would be longer than %d characters", i,
                      a->queue, SLUICE_QUEUE_NAME_MAX);
            return SLUICE_EXIT_USAGE;
        }
        redisReply *r;
        int rc = admin_call(a, &r, "setting a partition's capacity", "HSET", k.meta, "capacity",
                            per, NULL);
        if (rc != 0) {
            return rc;
        }
        freeReplyObject(r);
    }
    redisReply *r;
    int rc = admin_call(a, &r, "recording the partitions", "HSET", a->keys.meta, "partitions", p,
                        "capacity_total", t, NULL);
    if (rc == 0) {
        freeReplyObject(r);
    }
    return rc;
}

int admin_partitioned_capacity(admin *a, long long total, int *handled) {
    long long parts, old;
    *handled = 0;
    int rc = read_parts(a, &parts, &old);
    if (rc != 0 || parts <= 1) {
        return rc;
    }
    *handled = 1;
    if ((rc = write_parts(a, parts, total)) == 0) {
        printf("capacity of %s: %lld in all, %lld in each of its %lld partitions\n", a->queue,
               total, (total + parts - 1) / parts, parts);
    }
    return rc;
}

static int show(admin *a) {
    long long parts, total;
    int rc = read_parts(a, &parts, &total);
    if (rc != 0) {
        return rc;
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"partitions\":%lld,\"capacity_total\":", a->queue, parts);
        total >= 0 ? printf("%lld", total) : printf("null");
        printf(",\"depths\":[");
    } else {
        printf("queue %s: %lld partition%s", a->queue, parts, parts == 1 ? "" : "s");
        if (total >= 0) {
            printf(", capacity %lld in all", total);
        }
        printf("\n");
    }
    for (long long i = 0; i < parts; i++) {
        char name[SLUICE_QUEUE_NAME_MAX + 1];
        sluice_keys k;
        if (sluice_partition_name(a->queue, (int)i, name, sizeof(name)) != 0 ||
            sluice_keys_init(&k, name, NULL, 0) != 0) {
            return SLUICE_EXIT_USAGE;
        }
        redisReply *d, *c;
        if ((rc = admin_call(a, &d, "XLEN", "XLEN", k.stream, NULL)) != 0) {
            return rc;
        }
        if ((rc = admin_call(a, &c, "HGET", "HGET", k.meta, "capacity", NULL)) != 0) {
            freeReplyObject(d);
            return rc;
        }
        long long cap = admin_capacity_value(c);
        if (a->json) {
            printf("%s%lld", i ? "," : "", d->integer);
        } else {
            printf("  %-40s depth %lld / %s\n", name, d->integer,
                   cap >= 0 ? c->str : "(not set: producers' default)");
        }
        freeReplyObject(d);
        freeReplyObject(c);
    }
    if (a->json) {
        printf("]}\n");
    }
    return 0;
}

int admin_partitions(admin *a) {
    char err[200];
    long long want, parts, total;
    if (strchr(a->queue, '~') != NULL) {
        admin_err(a, "%s is a partition; name the queue (the part before '~')", a->queue);
        return SLUICE_EXIT_USAGE;
    }
    if (a->nargs > 2) {
        admin_err(a, "usage: partitions QUEUE [P]");
        return SLUICE_EXIT_USAGE;
    }
    if (a->nargs == 2 && sluice_parse_ll("partitions", a->args[1], 1, SLUICE_PARTITIONS_MAX, &want,
                                         err, sizeof(err)) != 0) {
        admin_err(a, "%s", err);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc != 0 || a->nargs == 1) {
        return rc != 0 ? rc : show(a);
    }
    if ((rc = read_parts(a, &parts, &total)) != 0) {
        return rc;
    }
    if (want < parts) {
        admin_err(a,
                  "%s has %lld partitions; fewer would strand what waits in the others "
                  "(only more are allowed)",
                  a->queue, parts);
        return SLUICE_EXIT_USAGE;
    }
    if (total < 0) {
        total = 1000; /* the producers' default: a queue that never had a capacity set */
    }
    if ((rc = write_parts(a, want, total)) != 0) {
        return rc;
    }
    printf("partitions of %s: %lld (capacity %lld in all, %lld each); producers and workers "
           "follow within about a second\n",
           a->queue, want, total, (total + want - 1) / want);
    return 0;
}
