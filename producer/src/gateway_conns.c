/* SPDX-License-Identifier: MIT */
/*
 * gateway_conns.c - the console's Redis connections: the one set that the on-demand reads of
 * GET /v1/queues/{q} (gateway_detail.c), the payload reads (gateway_entries.c), the admin
 * actions (gateway_dash.c, gateway_verbs.c) and --discover (gateway_discover.c) share. Never the
 * admission connections (the producers') and never the sampler's (it asks the producers).
 *
 * On one server (or through Sentinel) that is one connection, for every queue. On a Redis
 * Cluster an async connection serves one queue's slot (a call naming a key of another slot fails
 * at once), so there it is one connection per slot: opened at start for the served queues'
 * slots, and for a partition's ("Q~1") the first time the sampler sees the queue partitioned or
 * an action names it; a connection answers ECONN until it is up (the callers' 503 with
 * Retry-After). Besides, on a cluster, `console` serves the slot of no queue (it asks for the
 * slot map), and --discover's SCAN runs on one connection per primary: the set's connection of
 * a slot that primary serves (gw_conns_primaries, again at each round from the map of the
 * moment). With --admin-token-file the connections load the sluice library (clear and
 * replay call its functions); without, they send plain commands only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"
#include "sluice/cluster.h"
#include "sluice/keys.h"

#include "gateway.h"

static sluice_aconn *open_conn(gw_server *s, const sluice_url *u, const char *queue) {
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    sluice__client_tls(&o, &s->tls);
    o.name = "console";
    o.no_load = s->dash.token_len == 0; /* no actions: plain commands only */
    o.queue = queue;
    return sluice_aconn_new(s->loop, u, &o, NULL, NULL);
}

int gw_conns_open(gw_server *s, const sluice_url *u) {
    s->dash.console = open_conn(s, u, NULL);
    if (s->dash.console == NULL) {
        return -1;
    }
    if (!u->is_cluster) {
        return 0;
    }
    s->dash.url = malloc(sizeof(*s->dash.url));
    s->dash.by_slot = calloc(SLUICE_CLUSTER_SLOTS, sizeof(*s->dash.by_slot));
    if (s->dash.url == NULL || s->dash.by_slot == NULL) {
        return -1;
    }
    *s->dash.url = *u;
    for (size_t i = 0; i < s->nqueues; i++) {
        if (gw_conn_for(s, s->queues[i].name) == NULL) {
            return -1;
        }
    }
    return 0;
}

static int queue_slot(const char *queue) {
    sluice_keys k; /* every key of a queue is in its slot */
    sluice__keys_fill(&k, queue);
    return sluice__cluster_key_slot(k.prefix, strlen(k.prefix));
}

sluice_aconn *gw_conn_for(gw_server *s, const char *queue) {
    if (s->dash.by_slot == NULL) {
        return s->dash.console; /* one server: one connection; or stopped: NULL */
    }
    int slot = queue_slot(queue);
    if (s->dash.by_slot[slot] == NULL) {
        s->dash.by_slot[slot] = open_conn(s, s->dash.url, queue);
    }
    return s->dash.by_slot[slot];
}

/* Names "-0", "-1", ... are tried (at most this many) for a slot of each primary. */
#define PRIMARY_NAME_TRIES 100000

int gw_conns_primaries(gw_server *s, const sluice_cluster_map *m, int *names) {
    int picked[SLUICE_CLUSTER_NODES_MAX] = {0};
    int n = 0;
    char name[16];
    for (int i = 0; s->dash.by_slot != NULL && i < PRIMARY_NAME_TRIES && n < m->nnodes; i++) {
        snprintf(name, sizeof(name), "-%d", i);
        int slot = queue_slot(name);
        int node = m->slot_node[slot];
        if (node < 0 || node >= m->nnodes || picked[node]) {
            continue;
        }
        picked[node] = 1;
        if (gw_conn_for(s, name) != NULL) {
            names[n++] = i;
        }
    }
    return n;
}

void gw_conns_tick(gw_server *s) {
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    for (size_t i = 0; s->dash.by_slot != NULL && i < s->nqueues; i++) {
        const gw_queue *q = &s->queues[i];
        int parts = q->series->have_last ? (int)q->series->last.partitions : 1;
        for (int p = 1; p < parts && p < SLUICE_PARTITIONS_MAX; p++) {
            if (sluice_partition_name(q->name, p, name, sizeof(name)) == 0) {
                gw_conn_for(s, name);
            }
        }
    }
}

void gw_conns_close(gw_server *s) {
    if (s->dash.console != NULL) {
        sluice_aconn_close(s->dash.console, NULL, NULL);
        s->dash.console = NULL;
    }
    for (int i = 0; s->dash.by_slot != NULL && i < SLUICE_CLUSTER_SLOTS; i++) {
        if (s->dash.by_slot[i] != NULL) {
            sluice_aconn_close(s->dash.by_slot[i], NULL, NULL);
        }
    }
    free(s->dash.by_slot);
    s->dash.by_slot = NULL;
    if (s->dash.url != NULL) {
        memset(s->dash.url, 0, sizeof(*s->dash.url)); /* the password */
        free(s->dash.url);
        s->dash.url = NULL;
    }
}
