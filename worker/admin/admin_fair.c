/* SPDX-License-Identifier: MIT */
/*
 * admin_fair.c - `sluice-admin fair`: a queue whose tenants cannot starve each other.
 *
 *   fair QUEUE [show]                 on or off, and the lanes: waiting, in flight, served,
 *                                     weight (the busiest first, --limit N of them)
 *   fair QUEUE on|off [--weight TENANT=W ...]
 *
 * Everything is written by the function sluice_fair_config (the switch counts what waits in the
 * stream as its first lane in the same step); this file parses and prints.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/status.h"

#include "admin.h"

int admin_fair_config(admin *a, const sluice_keys *k, int nargs, const char **args,
                      redisReply **out) {
    const char *keys[] = {k->stream, k->meta};
    redisReply *r = NULL;
    int st = sluice_conn_fcall(a->conn, SLUICE_FN_FAIR_CONFIG, 2, keys, NULL, nargs, args, NULL, &r,
                               NULL);
    if (st != 0) {
        admin_err(a, "%s",
                  r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : sluice_conn_errstr(a->conn));
        freeReplyObject(r);
        return st == SLUICE_ECONFIG ? SLUICE_EXIT_USAGE : SLUICE_EXIT_REDIS;
    }
    if (out != NULL) {
        *out = r;
    } else {
        freeReplyObject(r);
    }
    return 0;
}

/* "TENANT=W" checked before anything is sent: W 1..1000, TENANT not empty. */
static int check_weights(admin *a) {
    char err[300];
    for (int i = 0; i < a->nweights; i++) {
        const char *eq = strrchr(a->weights[i], '=');
        long long w;
        if (eq == NULL || eq == a->weights[i]) {
            admin_err(a, "--weight \"%s\": expected TENANT=W", a->weights[i]);
            return SLUICE_EXIT_USAGE;
        }
        if (sluice_parse_ll("--weight", eq + 1, 1, SLUICE_FAIR_WEIGHT_MAX, &w, err, sizeof(err)) !=
            0) {
            admin_err(a, "%s (in \"%s\")", err, a->weights[i]);
            return SLUICE_EXIT_USAGE;
        }
    }
    return 0;
}

/* The same call on every partition (one: a queue not partitioned); *out is partition 0's reply,
 * *holding (may be NULL) adds up each partition's lanes holding entries. */
static int fair_all(admin *a, int nargs, const char **args, long long *holding) {
    long long parts;
    int rc = admin_parts_count(a, &parts);
    for (long long i = 0; rc == 0 && i < parts; i++) {
        sluice_keys k;
        redisReply *r = NULL;
        if ((rc = admin_part_keys(a, i, &k)) == 0 &&
            (rc = admin_fair_config(a, &k, nargs, args, &r)) == 0) {
            if (holding != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3) {
                *holding += sluice_reply_ll(r->element[1], 0);
            }
            freeReplyObject(r);
        } else {
            admin_parts_stopped(a, i, parts);
        }
    }
    return rc;
}

static int set_weights(admin *a) {
    for (int i = 0; i < a->nweights; i++) {
        const char *eq = strrchr(a->weights[i], '=');
        size_t len = (size_t)(eq - a->weights[i]);
        char *tenant = malloc(len + 1); /* a tenant name of any length, whole */
        if (tenant == NULL) {
            admin_err(a, "out of memory");
            return SLUICE_EXIT_REDIS;
        }
        memcpy(tenant, a->weights[i], len);
        tenant[len] = '\0';
        const char *args[] = {"weight", tenant, eq + 1};
        int rc = fair_all(a, 3, args, NULL);
        if (rc == 0) {
            printf("weight of %s on %s: %s\n", tenant, a->queue, eq + 1);
        }
        free(tenant);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

typedef struct lane_row {
    const char *tenant;
    size_t len;
    long long depth, waiting, served, weight;
} lane_row;

static int cmp_row(const void *x, const void *y) {
    const lane_row *a = x, *b = y;
    if (a->depth != b->depth) {
        return a->depth < b->depth ? 1 : -1;
    }
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->tenant, b->tenant, n);
    return c != 0 ? c : (a->len > b->len) - (a->len < b->len);
}

/* HMGET `key` "" followed by the lanes' tenants of `lanes` (an HGETALL reply): the values in the
 * same order, so the listing is one pass whatever the number of lanes. */
static int lanes_hmget(admin *a, const char *key, const redisReply *lanes, redisReply **out) {
    size_t n = 3 + lanes->elements / 2;
    const char **argv = malloc(n * sizeof(*argv));
    size_t *lens = malloc(n * sizeof(*lens));
    int rc = SLUICE_EXIT_REDIS;
    if (argv == NULL || lens == NULL) {
        admin_err(a, "out of memory");
    } else {
        argv[0] = "HMGET", lens[0] = 5;
        argv[1] = key, lens[1] = strlen(key);
        argv[2] = "", lens[2] = 0;
        for (size_t i = 0; i + 1 < lanes->elements; i += 2) {
            argv[3 + i / 2] = lanes->element[i]->str, lens[3 + i / 2] = lanes->element[i]->len;
        }
        rc = admin_callv(a, out, "reading the lanes", (int)n, argv, lens);
        if (rc == 0 && ((*out)->type != REDIS_REPLY_ARRAY || (*out)->elements != n - 2)) {
            admin_err(a, "reading the lanes: unexpected reply to HMGET %s", key);
            rc = SLUICE_EXIT_REDIS;
        }
    }
    free(argv);
    free(lens);
    return rc;
}

static int fair_show(admin *a) {
    char key[4][SLUICE_KEY_MAX];
    const sluice_key_kind kinds[] = {SLUICE_KEY_LANES, SLUICE_KEY_LWAIT, SLUICE_KEY_SERVED,
                                     SLUICE_KEY_WEIGHTS};
    for (int i = 0; i < 4; i++) {
        sluice__key(&a->keys, kinds[i], NULL, 0, key[i], sizeof(key[i]));
    }
    /* h[0]: HGETALL lanes; h[1..3]: lwait, served and weights of "" then of each lane */
    redisReply *h[4] = {NULL}, *meta = NULL;
    sluice_figures f; /* lane '' is the queue's stream: its part of the figures */
    int rc = admin_connect(a);
    if (rc == 0) {
        rc = admin_call(a, &h[0], "reading the lanes", "HGETALL", key[0], NULL);
    }
    for (int i = 1; rc == 0 && i < 4; i++) {
        rc = lanes_hmget(a, key[i], h[0], &h[i]);
    }
    if (rc == 0) {
        rc = admin_call(a, &meta, "reading meta", "HMGET", a->keys.meta, "fair", "lane_depth",
                        "lane_wait", NULL);
    }
    if (rc == 0) {
        rc = admin_part_figures(a, &a->keys, &f);
    }
    size_t n = rc == 0 ? 1 + h[0]->elements / 2 : 0;
    lane_row *rows = rc == 0 ? calloc(n, sizeof(*rows)) : NULL;
    if (rc == 0 && rows == NULL) {
        admin_err(a, "out of memory");
        rc = SLUICE_EXIT_REDIS;
    }
    if (rc == 0) {
        int fair = sluice_reply_ll(meta->element[0], 0) == 1;
        rows[0] = (lane_row){"",
                             0,
                             0,
                             0,
                             sluice_reply_ll(h[2]->element[0], -1),
                             sluice_reply_ll(h[3]->element[0], -1)};
        sluice_figures_stream_lane(&f, &rows[0].depth, &rows[0].waiting);
        for (size_t i = 1; i < n; i++) {
            lane_row *r = &rows[i];
            r->tenant = h[0]->element[2 * (i - 1)]->str;
            r->len = h[0]->element[2 * (i - 1)]->len;
            r->depth = sluice_reply_ll(h[0]->element[2 * (i - 1) + 1], 0);
            r->waiting = sluice_reply_ll(h[1]->element[i], -1);
            r->served = sluice_reply_ll(h[2]->element[i], -1);
            r->weight = sluice_reply_ll(h[3]->element[i], -1);
        }
        qsort(rows + 1, n - 1, sizeof(*rows), cmp_row);
        long long shown = (long long)n < a->limit ? (long long)n : a->limit;
        if (a->json) {
            printf("{\"queue\":\"%s\",\"fair\":%s,\"lanes_holding\":%zu,\"lanes\":[", a->queue,
                   fair ? "true" : "false", n - 1);
        } else {
            printf("queue %s: fair %s, %zu tenant lane%s holding entries\n", a->queue,
                   fair ? "on" : "off", n - 1, n - 1 == 1 ? "" : "s");
            printf("%-32s %10s %10s %12s %7s\n", "LANE", "WAITING", "IN FLIGHT", "SERVED",
                   "WEIGHT");
        }
        for (long long i = 0; i < shown; i++) {
            lane_row *r = &rows[i];
            long long waiting = r->waiting < 0 ? 0 : r->waiting;
            long long weight = r->weight < 1 ? 1 : r->weight;
            long long served = r->served < 0 ? 0 : r->served;
            if (a->json) {
                printf("%s{\"tenant\":", i ? "," : "");
                admin_json_str(stdout, r->tenant, r->len);
                printf(",\"depth\":%lld,\"waiting\":%lld,\"in_flight\":%lld,\"served\":%lld,"
                       "\"weight\":%lld}",
                       r->depth, waiting, r->depth - waiting, served, weight);
            } else {
                char name[40];
                if (r->len == 0 && i == 0) {
                    snprintf(name, sizeof(name), "(no tenant: the stream)");
                } else {
                    admin_safe(r->tenant, name, sizeof(name));
                }
                printf("%-32s %10lld %10lld %12lld %7lld\n", name, waiting, r->depth - waiting,
                       served, weight);
            }
        }
        if (a->json) {
            printf("]}\n");
        } else if (shown < (long long)n) {
            printf("(%lld more; --limit N shows more)\n", (long long)n - shown);
        }
    }
    free(rows);
    for (int i = 0; i < 4; i++) {
        freeReplyObject(h[i]);
    }
    freeReplyObject(meta);
    return rc;
}

int admin_fair(admin *a) {
    const char *act = a->nargs >= 2 ? a->args[1] : "show";
    int rc = check_weights(a);
    if (rc != 0) {
        return rc;
    }
    if (a->nargs > 2 ||
        (strcmp(act, "on") != 0 && strcmp(act, "off") != 0 && strcmp(act, "show") != 0)) {
        admin_err(a, "usage: fair QUEUE [on|off|show] [--weight TENANT=W ...]");
        return SLUICE_EXIT_USAGE;
    }
    if (a->limit == 0) {
        a->limit = 50;
    }
    if (strcmp(act, "show") == 0 && a->nweights == 0) {
        return fair_show(a);
    }
    long long parts;
    if ((rc = admin_connect(a)) != 0 || (rc = admin_parts_count(a, &parts)) != 0 ||
        (parts > 1 && (rc = admin_parts_check(a, parts, "fair mode")) != 0) ||
        (rc = set_weights(a)) != 0 || strcmp(act, "show") == 0) {
        return rc;
    }
    const char *args[] = {act};
    long long holding = 0;
    if ((rc = fair_all(a, 1, args, &holding)) != 0) {
        return rc;
    }
    if (strcmp(act, "on") == 0) {
        printf("fair %s: on (workers serve the tenants' lanes in turn within about a second)\n",
               a->queue);
    } else {
        printf("fair %s: off (%lld tenant lane%s still holding entries drain first-come)\n",
               a->queue, holding, holding == 1 ? "" : "s");
    }
    return 0;
}
