/* SPDX-License-Identifier: MIT */
/*
 * gateway_discover.c - sluice-gateway --discover: the queues of the database it does not serve.
 *
 * Every GW_DISCOVER_EVERY seconds a round of SCAN MATCH sluice:{*}:meta lists the queues that
 * have a meta hash (every queue a producer or sluice-admin configured): on one server on the
 * console's connection; on a Redis Cluster (SCAN is a node's) on every primary in turn, each
 * through the set's connection of a slot it serves, the primaries read from CLUSTER SHARDS
 * (CLUSTER SLOTS before Redis 7) at the start of each round, a read of a key of that slot before
 * the SCAN so that the connection follows the slot to its owner of the moment. Each node's scan
 * is bounded to SCAN_CALLS calls of COUNT SCAN_COUNT and SCAN_MS of time, the list to
 * GW_DISCOVER_MAX queues; a queue no longer seen in a whole round is dropped (not after a round
 * that could not scan a node: that round is made again at the next second, GW_DISCOVER_RETRIES
 * times). Every second
 * each discovered queue's figures are read with the queue-figures commands (sluice/figures.h:
 * one meaning for every reader), pipelined on the connection of its slot (gw_conn_for), into
 * the "discovered" list of GET /v1/queues. Partitions (Q~N) are left out: their queue is
 * listed. Served queues are not repeated.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/buf.h"
#include "sluice/cluster.h"
#include "sluice/reply.h"

#include "gateway.h"

#define SCAN_CALLS 50   /* SCAN calls on one node in a round, at most */
#define SCAN_MS    2000 /* time of one node's scan, at most */
#define SCAN_COUNT "500"

/* "sluice:{NAME}:meta" -> NAME into out; 0, or -1 when not a queue's meta or a partition's. */
static int meta_queue(const char *key, size_t len, char *out, size_t outlen) {
    static const char pre[] = "sluice:{", post[] = "}:meta";
    size_t pl = sizeof(pre) - 1, sl = sizeof(post) - 1;
    if (len <= pl + sl || len - pl - sl >= outlen || memcmp(key, pre, pl) != 0 ||
        memcmp(key + len - sl, post, sl) != 0) {
        return -1;
    }
    size_t n = len - pl - sl;
    memcpy(out, key + pl, n);
    out[n] = '\0';
    const char *tilde = strrchr(out, '~');
    if (tilde != NULL && tilde[1] != '\0' && strspn(tilde + 1, "0123456789") == strlen(tilde + 1)) {
        return -1; /* a partition: its queue is listed */
    }
    return sluice_queue_name_check(out, NULL, 0) == 0 ? 0 : -1;
}

static void found_add(gw_server *s, const char *name) {
    gw_discovery *d = &s->dash.disc;
    size_t nl = strlen(name);
    if (gw_find_queue(s, name, nl) != NULL) {
        return;
    }
    for (int i = 0; i < d->n; i++) {
        if (strcmp(d->q[i].name, name) == 0) {
            d->q[i].seen = 1;
            return;
        }
    }
    if (d->n == GW_DISCOVER_MAX) {
        return;
    }
    gw_found *f = &d->q[d->n];
    memset(f, 0, sizeof(*f));
    if (sluice_keys_init(&f->k, name, NULL, 0) != 0) {
        return;
    }
    memcpy(f->name, name, nl + 1);
    f->seen = 1;
    d->n++;
}

/* The end of a round: queues not seen in it are gone (not while their figures are read), unless
 * a node could not be scanned: then the next round comes at the next tick, a few times. */
static void round_end(gw_server *s) {
    gw_discovery *d = &s->dash.disc;
    d->scanning = 0;
    if (d->incomplete) {
        if (d->retries++ < GW_DISCOVER_RETRIES) {
            d->ticks = 0;
        }
        return;
    }
    d->retries = 0;
    for (int i = 0; i < d->n;) {
        if (!d->q[i].seen && d->q[i].owed == 0) {
            d->q[i] = d->q[--d->n];
        } else {
            i++;
        }
    }
}

/* On a cluster: the name "-N" whose slot's connection scans the round's node d->node. */
static void node_name(const gw_discovery *d, char *name, size_t len) {
    snprintf(name, len, "-%d", d->names[d->node]);
}

/* The connection the round's node d->node is scanned on: on one server the console's; on a
 * cluster the set's connection to that primary. NULL past the last node or once stopped. */
static sluice_aconn *scan_conn(gw_server *s) {
    gw_discovery *d = &s->dash.disc;
    char name[16];
    if (d->node >= d->nnodes) {
        return NULL;
    }
    if (s->dash.by_slot == NULL) {
        return s->dash.console;
    }
    node_name(d, name, sizeof(name));
    return gw_conn_for(s, name);
}

static void scan_next(gw_server *s);
static void node_failed(gw_server *s);

/* A reply of the round's says the gateway stops: the round ends (1). */
static int stopping(gw_server *s, int status) {
    if (status != SLUICE_ECANCELED && s->dash.console != NULL) {
        return 0;
    }
    s->dash.disc.incomplete = 1;
    round_end(s);
    return 1;
}

static void on_probe(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    gw_server *s = arg;
    (void)ac, (void)sent, (void)r;
    if (stopping(s, status)) {
        return;
    }
    if (status != 0) {
        node_failed(s);
    } else {
        scan_next(s);
    }
}

/*
 * On a cluster a connection stays on the node it found its slot on until a call naming a key
 * hears MOVED, and SCAN names none: after the slot moved (a migration, a failover it has not
 * heard of) it would scan the old node again and never the new owner. A read of a key of its
 * slot goes first and makes it follow the slot, so the SCAN goes to the node the map names.
 * 0, or -1 when it could not be sent.
 */
static int probe(gw_server *s) {
    sluice_keys k;
    char name[16];
    node_name(&s->dash.disc, name, sizeof(name));
    if (sluice_keys_init(&k, name, NULL, 0) != 0) {
        return -1;
    }
    const char *argv[] = {"EXISTS", k.meta};
    return sluice_aconn_command(scan_conn(s), 2, argv, NULL, 0, on_probe, s) == 0 ? 0 : -1;
}

/* Scans node d->node from cursor 0, or the next one that is up; ends the round after the last.
 * The bounds (SCAN_CALLS, SCAN_MS) are each node's. */
static void node_start(gw_server *s) {
    gw_discovery *d = &s->dash.disc;
    for (; d->node < d->nnodes; d->node++) {
        if (sluice_aconn_ready(scan_conn(s))) {
            d->calls = 0;
            d->started_ms = uv_now(s->loop);
            snprintf(d->cursor, sizeof(d->cursor), "0");
            if (s->dash.by_slot == NULL) {
                scan_next(s);
            } else if (probe(s) != 0) {
                node_failed(s);
            }
            return;
        }
        d->incomplete = 1;
    }
    round_end(s);
}

/* The node's scan failed: the next node. */
static void node_failed(gw_server *s) {
    s->dash.disc.incomplete = 1;
    s->dash.disc.node++;
    node_start(s);
}

static void on_scan(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    gw_server *s = arg;
    gw_discovery *d = &s->dash.disc;
    (void)ac, (void)sent;
    if (stopping(s, status)) {
        return;
    }
    if (status != 0 || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY ||
        r->element[0]->len >= sizeof(d->cursor)) {
        node_failed(s);
        return;
    }
    for (size_t i = 0; i < r->element[1]->elements; i++) {
        const redisReply *k = r->element[1]->element[i];
        char name[SLUICE_QUEUE_NAME_MAX + 1];
        if (k->type == REDIS_REPLY_STRING && meta_queue(k->str, k->len, name, sizeof(name)) == 0) {
            found_add(s, name);
        }
    }
    memcpy(d->cursor, r->element[0]->str, r->element[0]->len + 1);
    if (strcmp(d->cursor, "0") == 0 || ++d->calls >= SCAN_CALLS ||
        uv_now(s->loop) - d->started_ms >= SCAN_MS) {
        d->node++;
        node_start(s);
        return;
    }
    scan_next(s);
}

static void scan_next(gw_server *s) {
    gw_discovery *d = &s->dash.disc;
    const char *argv[] = {"SCAN", d->cursor, "MATCH", "sluice:{*}:meta", "COUNT", SCAN_COUNT};
    if (sluice_aconn_command(scan_conn(s), 6, argv, NULL, 0, on_scan, s) != 0) {
        node_failed(s);
    }
}

/* ---- on a cluster: the primaries, from the slot map ---- */

static int ask_map(gw_server *s);

static void on_map(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    gw_server *s = arg;
    gw_discovery *d = &s->dash.disc;
    (void)ac, (void)sent;
    if (r != NULL && r->type == REDIS_REPLY_ERROR && !d->map_slots && status != SLUICE_ECANCELED) {
        d->map_slots = 1; /* before Redis 7: CLUSTER SLOTS */
        if (ask_map(s) == 0) {
            return;
        }
    }
    sluice_cluster_map *m = status == 0 ? malloc(sizeof(*m)) : NULL;
    char why[256];
    if (m == NULL || s->dash.by_slot == NULL ||
        (d->map_slots ? sluice__cluster_parse_slots(r, "", m, why, sizeof(why))
                      : sluice__cluster_parse_shards(r, "", m, why, sizeof(why))) != 0) {
        free(m);
        d->incomplete = 1;
        round_end(s);
        return;
    }
    d->nnodes = gw_conns_primaries(s, m, d->names);
    d->incomplete = d->nnodes < m->nnodes;
    free(m);
    node_start(s);
}

static int ask_map(gw_server *s) {
    const char *argv[] = {"CLUSTER", s->dash.disc.map_slots ? "SLOTS" : "SHARDS"};
    return sluice_aconn_command(s->dash.console, 2, argv, NULL, 0, on_map, s);
}

/* ---- the figures of each discovered queue ---- */

static void on_figure(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    gw_found_cmd *fc = arg;
    gw_found *f = fc->f;
    (void)ac, (void)sent;
    if (status != 0 && r == NULL) {
        f->failed = 1;
    } else if (sluice_figures_parse(&f->reading, f->backend, NULL, fc->i, r) != 0) {
        f->failed = 1;
    }
    if (--f->owed == 0 && !f->failed) {
        sluice_figures_finish(&f->reading, f->backend);
        f->fig = f->reading;
        f->have = 1;
    }
}

static void on_backend(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    gw_found *f = arg;
    (void)ac, (void)sent;
    f->owed--;
    if (status == 0) {
        f->backend = sluice_reply_ll(r, 0) == 1 ? SLUICE_BACKEND_LIST : SLUICE_BACKEND_STREAM;
        f->backend_known = 1;
    }
}

static void read_figures(gw_server *s, gw_found *f) {
    sluice_aconn *ac = gw_conn_for(s, f->name); /* on a cluster: its slot's */
    if (f->owed > 0 || !sluice_aconn_ready(ac)) {
        return; /* the last reading is still on its way, or the connection is not up yet */
    }
    if (!f->backend_known) { /* a list queue keeps list_depth in its meta (the functions do) */
        const char *argv[] = {"HEXISTS", f->k.meta, "list_depth"};
        f->owed += sluice_aconn_command(ac, 3, argv, NULL, 0, on_backend, f) == 0;
        return;
    }
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS];
    size_t n = sluice_figures_commands(&f->k, f->backend, cmds);
    sluice_figures_init(&f->reading);
    f->failed = 0;
    for (size_t i = 0; i < n; i++) {
        f->cmds[i] = (gw_found_cmd){f, i};
        if (sluice_aconn_command(ac, cmds[i].argc, cmds[i].argv, NULL, 0, on_figure, &f->cmds[i]) !=
            0) {
            f->failed = 1;
            break;
        }
        f->owed++;
    }
}

void gw_discover_tick(gw_server *s) {
    gw_discovery *d = &s->dash.disc;
    if (!d->on || s->dash.console == NULL || !sluice_aconn_ready(s->dash.console)) {
        return;
    }
    if (!d->scanning && (d->ticks++ % GW_DISCOVER_EVERY) == 0) {
        d->scanning = 1;
        d->incomplete = 0;
        d->node = 0;
        d->nnodes = 1; /* one server: the console's node */
        for (int i = 0; i < d->n; i++) {
            d->q[i].seen = 0;
        }
        if (s->dash.by_slot == NULL) {
            node_start(s);
        } else if (ask_map(s) != 0) {
            d->incomplete = 1;
            round_end(s);
        }
    }
    for (int i = 0; i < d->n; i++) {
        read_figures(s, &d->q[i]);
    }
}

void gw_discover_json(sluice_text *b, const gw_server *s) {
    const gw_discovery *d = &s->dash.disc;
    if (!d->on) {
        return;
    }
    sluice_text_printf(b, ",\"discovered\":[");
    for (int i = 0, first = 1; i < d->n; i++) {
        const gw_found *f = &d->q[i];
        if (!f->have) {
            continue;
        }
        const sluice_figures *g = &f->fig;
        sluice_text_printf(b, "%s{\"queue\":\"%s\",\"backend\":\"%s\",\"depth\":%lld,\"capacity\":",
                           first ? "" : ",", f->name, sluice_backend_name(f->backend), g->depth);
        sluice_text_printf(b, g->capacity >= 0 ? "%lld" : "null", g->capacity);
        sluice_text_printf(b,
                           ",\"waiting\":%lld,\"in_flight\":%lld,\"consumers\":%lld,\"dead\":%lld,"
                           "\"paused\":%s",
                           g->waiting, g->in_flight, g->consumers, g->dead,
                           g->paused > 0 ? "true" : "false");
        for (int k = 0; k < SLUICE_COUNTER_COUNT_; k++) {
            sluice_text_printf(b, "%s\"%s\":%lld", k ? "," : ",\"counters\":{",
                               sluice_counter_name((sluice_counter)k), g->counters[k]);
        }
        sluice_text_printf(b, "}}");
        first = 0;
    }
    sluice_text_printf(b, "]");
}
