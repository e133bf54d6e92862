/* SPDX-License-Identifier: MIT */
/*
 * gateway_detail.c - what GET /v1/queues/{q} reads besides the queue's figures, on demand and on
 * the console's connection of the queue's slot (gateway_conns.c; never the admission
 * connection), one command after the other:
 * XINFO GROUPS and XINFO CONSUMERS (the consumers with what they hold and their idle time),
 * XREVRANGE of the dead letters (the latest five with their reasons: never payloads, which need
 * the admin token), and the fair lanes (HLEN, then at most LANES_READ lanes with HGETALL, the
 * TOP_LANES holding the most and their weights with HMGET). A step that fails leaves its part
 * empty or null and the answer goes on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"
#include "sluice/buf.h"
#include "sluice/cli.h"
#include "sluice/keys.h"
#include "sluice/reply.h"

#include "gateway.h"

#define DEAD_LATEST   "5"  /* dead letters shown, newest first */
#define CONSUMERS_MAX 100  /* consumers listed */
#define LANES_READ    1000 /* lanes read to find the top ones; more: not listed */
#define TOP_LANES     10

typedef struct lane {
    char *tenant; /* a copy: any bytes */
    size_t len;
    long long depth;
} lane;

typedef struct detail {
    sluice__http_req *c;
    sluice_text b;
    sluice_keys k;
    char group[256];
    char lanes[SLUICE_KEY_MAX], weights[SLUICE_KEY_MAX];
    lane top[TOP_LANES];
    size_t ntop;
} detail;

/* User text (consumer names, reasons) as JSON, by the one writer of user text in JSON. */
static void put_str(sluice_text *b, const char *p, size_t len) {
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    if (f == NULL) {
        b->failed = 1;
        return;
    }
    sluice_cli_json_str(f, p, len);
    if (fclose(f) != 0) {
        b->failed = 1;
    } else {
        sluice_text_printf(b, "%.*s", (int)n, out);
    }
    free(out);
}

static void detail_finish(detail *d) {
    for (size_t i = 0; i < d->ntop; i++) {
        free(d->top[i].tenant);
    }
    sluice_text_printf(&d->b, "}\n");
    if (!sluice__http_release(d->c)) {
        gw_reply_text(d->c, &d->b);
    } else {
        sluice_text_free(&d->b);
    }
    free(d);
}

/* ---- fair lanes: the TOP_LANES tenants holding the most, with their weights. HLEN first:
 * past LANES_READ lanes the list is not read (the work of one call stays bounded). ---- */

static int cmp_lane(const void *x, const void *y) {
    const lane *a = x, *b = y;
    return (a->depth < b->depth) - (a->depth > b->depth);
}

static void on_weights(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    detail *d = arg;
    (void)ac, (void)sent;
    sluice_text_printf(&d->b, ",\"top\":[");
    for (size_t i = 0; i < d->ntop; i++) {
        long long w = status == 0 && r->type == REDIS_REPLY_ARRAY && i < r->elements
                          ? sluice_reply_ll(r->element[i], 1)
                          : -1;
        sluice_text_printf(&d->b, "%s{\"tenant\":", i ? "," : "");
        put_str(&d->b, d->top[i].tenant, d->top[i].len);
        sluice_text_printf(
            &d->b, w < 0 ? ",\"depth\":%lld,\"weight\":null}" : ",\"depth\":%lld,\"weight\":%lld}",
            d->top[i].depth, w < 1 && w >= 0 ? 1 : w);
    }
    sluice_text_printf(&d->b, "]}");
    detail_finish(d);
}

static void on_lanes(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    detail *d = arg;
    (void)sent;
    lane all[LANES_READ];
    size_t n = 0;
    for (size_t i = 0;
         status == 0 && r->type == REDIS_REPLY_ARRAY && i + 1 < r->elements && n < LANES_READ;
         i += 2) {
        all[n++] =
            (lane){r->element[i]->str, r->element[i]->len, sluice_reply_ll(r->element[i + 1], 0)};
    }
    qsort(all, n, sizeof(all[0]), cmp_lane);
    const char *argv[2 + TOP_LANES] = {"HMGET", d->weights};
    size_t lens[2 + TOP_LANES] = {5, strlen(d->weights)};
    for (size_t i = 0; i < n && d->ntop < TOP_LANES; i++) {
        lane *t = &d->top[d->ntop];
        t->tenant = malloc(all[i].len + 1);
        if (t->tenant == NULL) {
            break;
        }
        memcpy(t->tenant, all[i].tenant, all[i].len);
        t->len = all[i].len;
        t->depth = all[i].depth;
        argv[2 + d->ntop] = t->tenant, lens[2 + d->ntop] = t->len;
        d->ntop++;
    }
    if (d->ntop == 0 ||
        sluice_aconn_command(ac, (int)(2 + d->ntop), argv, lens, 0, on_weights, d) != 0) {
        on_weights(NULL, SLUICE_ECONN, 0, NULL, d);
    }
}

static void on_lanes_len(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    detail *d = arg;
    (void)sent;
    long long n = status == 0 ? sluice_reply_ll(r, -1) : -1;
    sluice_text_printf(&d->b,
                       n < 0 ? ",\"lanes\":{\"holding\":null" : ",\"lanes\":{\"holding\":%lld", n);
    const char *argv[] = {"HGETALL", d->lanes};
    if (n <= 0 || n > LANES_READ || sluice_aconn_command(ac, 2, argv, NULL, 0, on_lanes, d) != 0) {
        sluice_text_printf(&d->b, n > LANES_READ ? ",\"top\":null}" : ",\"top\":[]}");
        detail_finish(d);
    }
}

static void read_lanes(detail *d, sluice_aconn *ac) {
    const char *argv[] = {"HLEN", d->lanes};
    if (ac == NULL || sluice_aconn_command(ac, 2, argv, NULL, 0, on_lanes_len, d) != 0) {
        detail_finish(d);
    }
}

static void on_dead(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    detail *d = arg;
    (void)ac, (void)sent;
    sluice_text_printf(&d->b, ",\"dead_latest\":[");
    for (size_t i = 0; status == 0 && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *e = r->element[i], *v;
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) {
            continue;
        }
        sluice_text_printf(&d->b, "%s{\"dead_id\":", i ? "," : "");
        put_str(&d->b, e->element[0]->str, e->element[0]->len);
        static const char *const fields[] = {"id", "reason", "consumer"};
        for (int j = 0; j < 3; j++) {
            v = sluice_reply_entry_field(e, fields[j]);
            sluice_text_printf(&d->b, ",\"%s\":", fields[j]);
            put_str(&d->b, v ? v->str : "", v ? v->len : 0);
        }
        sluice_text_printf(&d->b, ",\"deliveries\":%lld}",
                           sluice_reply_ll(sluice_reply_entry_field(e, "deliveries"), 0));
    }
    sluice_text_printf(&d->b, "]");
    read_lanes(d, status == SLUICE_ECANCELED ? NULL : ac);
}

static void read_dead(detail *d, sluice_aconn *ac) {
    const char *argv[] = {"XREVRANGE", d->k.dead, "+", "-", "COUNT", DEAD_LATEST};
    if (ac == NULL || sluice_aconn_command(ac, 6, argv, NULL, 0, on_dead, d) != 0) {
        detail_finish(d);
    }
}

static void on_consumers(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    detail *d = arg;
    (void)sent;
    sluice_text_printf(&d->b, ",\"group\":");
    put_str(&d->b, d->group, strlen(d->group));
    sluice_text_printf(&d->b, ",\"consumer_list\":[");
    for (size_t i = 0; status == 0 && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *name = sluice_reply_field(r->element[i], "name");
        if (i == CONSUMERS_MAX || name == NULL || name->type != REDIS_REPLY_STRING) {
            break;
        }
        sluice_text_printf(&d->b, "%s{\"name\":", i ? "," : "");
        put_str(&d->b, name->str, name->len);
        sluice_text_printf(&d->b, ",\"pending\":%lld,\"idle_ms\":%lld}",
                           sluice_reply_ll(sluice_reply_field(r->element[i], "pending"), 0),
                           sluice_reply_ll(sluice_reply_field(r->element[i], "idle"), 0));
    }
    sluice_text_printf(&d->b, "]");
    read_dead(d, ac);
}

static void on_groups(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    detail *d = arg;
    (void)sent;
    /* sluice keeps one group a queue; a queue without stream or group has no consumers */
    const redisReply *g = status == 0 && r->type == REDIS_REPLY_ARRAY && r->elements > 0
                              ? sluice_reply_field(r->element[0], "name")
                              : NULL;
    if (g == NULL || g->type != REDIS_REPLY_STRING || g->len >= sizeof(d->group)) {
        sluice_text_printf(&d->b, ",\"group\":null,\"consumer_list\":[]");
        read_dead(d, status == SLUICE_ECANCELED ? NULL : ac);
        return;
    }
    memcpy(d->group, g->str, g->len + 1);
    const char *argv[] = {"XINFO", "CONSUMERS", d->k.stream, d->group};
    if (sluice_aconn_command(ac, 4, argv, NULL, 0, on_consumers, d) != 0) {
        sluice_text_printf(&d->b, ",\"group\":null,\"consumer_list\":[]");
        read_dead(d, NULL);
    }
}

void gw_dash_answer_detail(sluice__http_req *c, const gw_queue *q, sluice_text *b) {
    gw_server *s = sluice__http_arg(c);
    gw_dash_history(b, q);
    detail *d = calloc(1, sizeof(*d));
    if (d == NULL || q == NULL || sluice_keys_init(&d->k, q->name, NULL, 0) != 0 ||
        sluice__key(&d->k, SLUICE_KEY_LANES, NULL, 0, d->lanes, sizeof(d->lanes)) != 0 ||
        sluice__key(&d->k, SLUICE_KEY_WEIGHTS, NULL, 0, d->weights, sizeof(d->weights)) != 0) {
        free(d);
        sluice_text_printf(b, "}\n");
        gw_reply_text(c, b);
        return;
    }
    d->c = c;
    d->b = *b;
    sluice__http_hold(c);
    const char *argv[] = {"XINFO", "GROUPS", d->k.stream};
    sluice_aconn *ac = gw_conn_for(s, q->name);
    if (ac == NULL || sluice_aconn_command(ac, 3, argv, NULL, 0, on_groups, d) != 0) {
        detail_finish(d); /* the console's connection is not up: the figures alone */
    }
}
