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

int admin_parts_count(admin *a, long long *parts) {
    long long total;
    *parts = 1;
    return strchr(a->queue, '~') != NULL ? 0 : read_parts(a, parts, &total);
}

int admin_part_keys(admin *a, long long i, sluice_keys *k) {
    if (sluice__partition_keys(a->queue, (int)i, k) != 0) {
        admin_err(a, "partition %lld of %s: the name would be longer than %d characters", i,
                  a->queue, SLUICE_QUEUE_NAME_MAX);
        return SLUICE_EXIT_USAGE;
    }
    return 0;
}

int admin_parts_check(admin *a, long long parts, const char *stream_only) {
    for (long long i = 0; i < parts; i++) {
        sluice_keys k;
        char name[SLUICE_QUEUE_NAME_MAX + 1], what[SLUICE_QUEUE_NAME_MAX + 64];
        redisReply *r;
        int rc = admin_part_keys(a, i, &k);
        if (rc != 0) {
            return rc;
        }
        sluice_partition_name(a->queue, (int)i, name, sizeof(name));
        snprintf(what, sizeof(what), "partition %s (nothing was written)", name);
        if ((rc = admin_call(a, &r, what, "HGET", k.meta, "backend", NULL)) != 0) {
            return rc;
        }
        int list = r->type == REDIS_REPLY_STRING && strcmp(r->str, "list") == 0;
        freeReplyObject(r);
        if (list && stream_only != NULL) {
            admin_err(a,
                      "partition %s is a list queue: %s needs the stream backend (nothing was "
                      "written)",
                      name, stream_only);
            return SLUICE_EXIT_USAGE;
        }
    }
    return 0;
}

void admin_parts_stopped(admin *a, long long i, long long parts) {
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    if (parts <= 1 || sluice_partition_name(a->queue, (int)i, name, sizeof(name)) != 0) {
        return;
    }
    if (i == 0) {
        admin_err(a, "stopped at partition %s: no partition was written", name);
    } else if (i == 1) {
        admin_err(a, "stopped at partition %s: partition %s was written, %s to %s~%lld were not",
                  name, a->queue, name, a->queue, parts - 1);
    } else {
        admin_err(a,
                  "stopped at partition %s: partitions %s to %s~%lld were written, %s to "
                  "%s~%lld were not",
                  name, a->queue, a->queue, i - 1, name, a->queue, parts - 1);
    }
}

int admin_scope_split(const char *scope) {
    return strcmp(scope, "queue") == 0 || strcmp(scope, "client") == 0 ||
           strcmp(scope, "drain") == 0 || strcmp(scope, "inflight") == 0;
}

void admin_spec_split(const char *spec, long long parts, char *out, size_t len) {
    char alg[16];
    long long n;
    int used = 0;
    if (parts > 1 && sscanf(spec, "%15[a-z]:%lld%n", alg, &n, &used) == 2 &&
        strcmp(alg, "gate") != 0 && n > 0) {
        snprintf(out, len, "%s:%lld%s", alg, (n + parts - 1) / parts, spec + used);
    } else if (parts > 1 && sscanf(spec, "%lld%n", &n, &used) == 1 && spec[used] == '\0' && n > 0) {
        snprintf(out, len, "%lld", (n + parts - 1) / parts); /* inflight N */
    } else {
        snprintf(out, len, "%s", spec);
    }
}

/* Writes capacity ceil(total / parts) into each partition's meta, then the totals. Every
 * partition's name is checked first: a name that does not fit changes nothing. */
static int write_parts(admin *a, long long parts, long long total) {
    char per[24], p[24], t[24];
    for (long long i = 0; i < parts; i++) {
        sluice_keys k;
        int rc = admin_part_keys(a, i, &k);
        if (rc != 0) {
            return rc;
        }
    }
    int rc = admin_parts_check(a, parts, NULL);
    if (rc != 0) {
        return rc;
    }
    snprintf(per, sizeof(per), "%lld", (total + parts - 1) / parts);
    snprintf(p, sizeof(p), "%lld", parts);
    snprintf(t, sizeof(t), "%lld", total);
    for (long long i = 0; i < parts; i++) {
        sluice_keys k;
        redisReply *r;
        if ((rc = admin_part_keys(a, i, &k)) != 0 ||
            (rc = admin_call(a, &r, "setting a partition's capacity", "HSET", k.meta, "capacity",
                             per, NULL)) != 0) {
            admin_parts_stopped(a, i, parts);
            return rc;
        }
        freeReplyObject(r);
    }
    redisReply *r;
    rc = admin_call(a, &r, "recording the partitions", "HSET", a->keys.meta, "partitions", p,
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
    if (a->per_tenant > total) {
        admin_err(a, "--per-tenant %lld is more than the capacity %lld", a->per_tenant, total);
        return SLUICE_EXIT_USAGE;
    }
    if ((rc = write_parts(a, parts, total)) != 0) {
        return rc;
    }
    printf("capacity of %s: %lld in all, %lld in each of its %lld partitions\n", a->queue, total,
           (total + parts - 1) / parts, parts);
    if (a->per_tenant < 0) {
        return 0;
    }
    char share[24]; /* a tenant lives in one partition: its share there is the whole share */
    snprintf(share, sizeof(share), "%lld", a->per_tenant);
    for (long long i = 0; i < parts; i++) {
        sluice_keys k;
        redisReply *r;
        if ((rc = admin_part_keys(a, i, &k)) != 0 ||
            (rc = a->per_tenant > 0 ? admin_call(a, &r, "setting the per-tenant share", "HSET",
                                                 k.meta, "per_tenant", share, NULL)
                                    : admin_call(a, &r, "switching the per-tenant share off",
                                                 "HDEL", k.meta, "per_tenant", NULL)) != 0) {
            admin_parts_stopped(a, i, parts);
            return rc;
        }
        freeReplyObject(r);
    }
    if (a->per_tenant > 0) {
        printf("per-tenant share: no tenant holds more than %lld entries (waiting + in flight)\n",
               a->per_tenant);
    } else {
        printf("per-tenant share: off\n");
    }
    return 0;
}

/* A field of a flat HGETALL/HMGET-style reply, NULL when absent. */
static const redisReply *hfield(const redisReply *h, const char *name) {
    for (size_t i = 0; h->type == REDIS_REPLY_ARRAY && i + 1 < h->elements; i += 2) {
        if (h->element[i]->type == REDIS_REPLY_STRING && strcmp(h->element[i]->str, name) == 0) {
            return h->element[i + 1];
        }
    }
    return NULL;
}

/* Growth from `from` to `to` partitions: the new ones get partition 0's configuration (limits,
 * fair mode and weights, per-tenant share), and every partition the new share of whole-queue
 * limits. */
static int copy_config(admin *a, long long from, long long to) {
    sluice_keys k0;
    redisReply *lim = NULL, *meta = NULL, *w = NULL;
    char wkey[SLUICE_KEY_MAX];
    int rc = admin_part_keys(a, 0, &k0);
    sluice__key(&k0, SLUICE_KEY_WEIGHTS, NULL, 0, wkey, sizeof(wkey));
    if (rc == 0) {
        rc = admin_call(a, &lim, "reading the limits", "HGETALL", k0.limits, NULL);
    }
    if (rc == 0) {
        rc = admin_call(a, &meta, "reading meta", "HGETALL", k0.meta, NULL);
    }
    if (rc == 0) {
        rc = admin_call(a, &w, "reading the fair weights", "HGETALL", wkey, NULL);
    }
    for (size_t j = 0; rc == 0 && j + 1 < lim->elements; j += 2) {
        const char *name = lim->element[j]->str;
        char scope[24], spec[96], field[128], whole[128];
        if (sscanf(lim->element[j + 1]->str, "%23s %95s", scope, spec) != 2) {
            continue;
        }
        int split = admin_scope_split(scope);
        snprintf(field, sizeof(field), "limit_whole:%s", name);
        const redisReply *wh = hfield(meta, field);
        char wscope[24], wspec[96];
        if (split && wh != NULL && sscanf(wh->str, "%23s %95s", wscope, wspec) == 2) {
            snprintf(spec, sizeof(spec), "%s", wspec); /* the whole, kept at the last split */
        }
        for (long long i = split ? 0 : from; rc == 0 && i < to; i++) {
            sluice_keys k;
            char share[96];
            admin_spec_split(spec, split ? to : 1, share, sizeof(share));
            const char *args[] = {"set", name, scope, share};
            if ((rc = admin_part_keys(a, i, &k)) == 0) {
                rc = admin_limits_config(a, &k, 4, args);
            }
        }
        redisReply *r;
        snprintf(whole, sizeof(whole), "%s %s", scope, spec);
        if (rc == 0 && split &&
            (rc = admin_call(a, &r, "recording the whole limit", "HSET", k0.meta, field, whole,
                             NULL)) == 0) {
            freeReplyObject(r);
        }
    }
    const redisReply *fair = rc == 0 ? hfield(meta, "fair") : NULL;
    const redisReply *share = rc == 0 ? hfield(meta, "per_tenant") : NULL;
    for (long long i = from; rc == 0 && i < to; i++) {
        sluice_keys k;
        redisReply *r;
        if ((rc = admin_part_keys(a, i, &k)) != 0) {
            break;
        }
        for (size_t j = 0; rc == 0 && j + 1 < w->elements; j += 2) {
            const char *args[] = {"weight", w->element[j]->str, w->element[j + 1]->str};
            rc = admin_fair_config(a, &k, 3, args, NULL);
        }
        if (rc == 0 && fair != NULL && sluice_reply_ll(fair, 0) == 1) {
            const char *args[] = {"on"};
            rc = admin_fair_config(a, &k, 1, args, NULL);
        }
        if (rc == 0 && share != NULL &&
            (rc = admin_call(a, &r, "copying the per-tenant share", "HSET", k.meta, "per_tenant",
                             share->str, NULL)) == 0) {
            freeReplyObject(r);
        }
    }
    freeReplyObject(lim);
    freeReplyObject(meta);
    freeReplyObject(w);
    return rc;
}

/* Each partition's depth and capacity, and their sums: the figures stats reads (depth counts a
 * fair queue's lanes, a list queue's list_depth). A partition that cannot be read (its primary
 * down) is marked and left out of the sums; the others are still shown (exit 3). */
static int show(admin *a) {
    long long parts, total;
    sluice_figures all;
    memset(&all, 0, sizeof(all)); /* the sum of none: sluice_figures_add */
    int rc = read_parts(a, &parts, &total), unavailable = 0;
    if (rc != 0 || (rc = admin_detect_backend(a)) != 0) {
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
        sluice_figures f;
        if (admin_part_figures(a, &k, &f) != 0) {
            unavailable++;
            if (a->json) {
                printf("%snull", i ? "," : "");
            } else {
                printf("  %-40s UNAVAILABLE (see above; not in the sums)\n", name);
            }
            continue;
        }
        sluice_figures_add(&all, &f);
        if (a->json) {
            printf("%s%lld", i ? "," : "", f.depth);
        } else if (f.capacity >= 0) {
            printf("  %-40s depth %lld / %lld\n", name, f.depth, f.capacity);
        } else {
            printf("  %-40s depth %lld / (not set: producers' default)\n", name, f.depth);
        }
    }
    if (a->json) {
        printf("],\"depth\":%lld,\"capacity\":", all.depth);
        all.capacity >= 0 ? printf("%lld", all.capacity) : printf("null");
        printf(",\"unavailable\":%d}\n", unavailable);
    } else if (parts > 1) {
        printf("  %-40s depth %lld / ", "all together", all.depth);
        all.capacity >= 0 ? printf("%lld", all.capacity) : printf("(not set in every partition)");
        printf("%s\n", unavailable > 0 ? " (UNAVAILABLE partitions left out)" : "");
    }
    return unavailable > 0 ? SLUICE_EXIT_REDIS : 0;
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
    if (want == 1) { /* and so parts == 1: nothing to split, and no capacity to pin */
        printf("partitions of %s: 1 (not partitioned); nothing changed\n", a->queue);
        return 0;
    }
    int unset = total < 0;
    if (unset) {
        total = 1000; /* the producers' default: a queue that never had a capacity set */
    }
    if ((rc = write_parts(a, want, total)) != 0 || (rc = copy_config(a, parts, want)) != 0) {
        return rc;
    }
    printf("partitions of %s: %lld (capacity %lld in all, %lld each%s); producers and workers "
           "follow within about a second\n",
           a->queue, want, total, (total + want - 1) / want,
           unset ? "; it had no capacity set, 1000 is now its capacity: change it with "
                   "sluice-admin capacity"
                 : "");
    return 0;
}
