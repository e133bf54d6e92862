/* SPDX-License-Identifier: MIT */
/*
 * gateway.h - what the two parts of sluice-gateway share.
 *
 * Three layers, each calling only the one below: gateway.c (on top) owns the process: options,
 * one async producer per served queue, signals and the graceful stop. gateway_routes.c owns what
 * a complete request means: the routes, their JSON bodies, the status codes, and the Prometheus
 * metrics. The HTTP server under both (accepting, HTTP/1.1 parsing under explicit limits,
 * keep-alive and pipelining, timeouts, writing responses) is the responder of sluice's binaries,
 * sluice/http_responder.h. Everything runs on one libuv loop thread.
 */
#ifndef SLUICE_GATEWAY_H
#define SLUICE_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "sluice/aproducer.h"
#include "sluice/cluster.h"
#include "sluice/figures.h"
#include "sluice/http_responder.h"
#include "sluice/redis.h"
#include "sluice/url.h"

#define GW_MAX_QUEUES  64
#define GW_LAT_BUCKETS 14

#define GW_LIMIT_NAMES 32 /* rate limits counted by name per queue; others count as "other" */

#define GW_HISTORY     300 /* samples kept per queue, one a second: 5 minutes */
#define GW_COUNTERS    4   /* admitted, rejected, limited, acked */
#define GW_MAX_STREAMS 64  /* open GET /v1/events streams; beyond: 503 */

/* One reading of a queue's figures by the dashboard's sampler. */
typedef struct gw_sample {
    uint64_t t_ms; /* loop time when the reading was asked for */
    long long depth, capacity, in_flight, consumers, dead;
    double drain_rate;        /* the producer's smoothed acks/s; < 0 unknown */
    long long c[GW_COUNTERS]; /* the monotonic counters */
} gw_sample;

/* The samples of one queue (a ring) and its last full reading. */
typedef struct gw_series {
    gw_sample ring[GW_HISTORY];
    int head, n;
    int busy;        /* a reading is on its way */
    uint64_t now_ms; /* when it was asked for */
    int have_last;
    sluice_queue_info last;
} gw_series;

#define GW_DISCOVER_MAX     256 /* queues --discover lists besides the served ones */
#define GW_DISCOVER_EVERY   10  /* seconds between two rounds of SCAN */
#define GW_DISCOVER_RETRIES 5   /* rounds again a second after one that missed a node */

struct gw_found;
/* One figures command owed for a discovered queue: its index among the commands. */
typedef struct gw_found_cmd {
    struct gw_found *f;
    size_t i;
} gw_found_cmd;

/* A queue found by --discover (gateway_discover.c). */
typedef struct gw_found {
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    sluice_keys k;
    sluice_backend backend;
    int backend_known;
    int seen;               /* seen in the current round of SCAN */
    int owed;               /* replies still to come */
    int failed;             /* the reading under way failed */
    int have;               /* fig holds a whole reading */
    sluice_figures fig;     /* the last whole reading */
    sluice_figures reading; /* the one being read */
    gw_found_cmd cmds[SLUICE_FIGURES_MAX_CMDS];
} gw_found;

typedef struct gw_discovery {
    int on; /* --discover */
    gw_found q[GW_DISCOVER_MAX];
    int n;
    int scanning, calls;
    unsigned ticks;
    uint64_t started_ms;
    char cursor[32];
    /* on a cluster: the name "-N" (N here) of a queue whose slot's connection scans each
       primary of the round (gw_conns_primaries), the one being scanned, and whether a node
       could not be scanned whole (unseen queues are then kept, and the next round comes a
       second later, GW_DISCOVER_RETRIES times) */
    int names[SLUICE_CLUSTER_NODES_MAX];
    int nnodes, node;
    int incomplete, retries;
    int map_slots; /* the cluster answered CLUSTER SHARDS with an error: CLUSTER SLOTS */
} gw_discovery;

/* One served queue. */
typedef struct gw_queue {
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    long long capacity; /* the default passed to the admission; meta overrides */
    sluice_aproducer *ap;
    struct {
        char name[SLUICE_LIMIT_NAME_MAX + 1];
        unsigned long long n;
    } limited[GW_LIMIT_NAMES]; /* 429s by the refusing limit, for /metrics */
    int nlimited;
    gw_series *series; /* the dashboard's samples (gateway_dash.c) */
} gw_queue;

/* Counters behind GET /metrics (the connections' come from the responder). */
typedef struct gw_metrics {
    unsigned long long by_code[600];        /* responses by HTTP status */
    unsigned long long lat[GW_LAT_BUCKETS]; /* admission latency histogram (non-cumulative) */
    double lat_sum;                         /* seconds */
    unsigned long long lat_count;
} gw_metrics;

typedef struct gw_server {
    uv_loop_t *loop;
    sluice__http_server *http; /* NULL once closed */
    sluice__http_options lim;  /* the HTTP limits; each has a command-line flag */
    uv_signal_t sigterm, sigint;
    gw_queue queues[GW_MAX_QUEUES];
    size_t nqueues;
    int stopping;  /* 1: draining after the first signal; 2: after the second / grace */
    int exit_code; /* SLUICE_EXIT_REDIS after a refusal no retry heals (a TLS check), else 0 */
    sluice_conn_options tls; /* rediss://: the SLUICE_TLS_* options (strings from the env) */
    int grace_ms;
    gw_metrics m;
    char client_header[64]; /* lower case; "" = the peer address is the client key */
    int trusted_proxies;    /* the client key is this entry of the header's list from the
                               right (1 = the rightmost); default 1 */
    int require_client;     /* 1: a request without the client header is answered 400 */
    char tenant_header[64]; /* lower case; "" = messages carry no tenant */
    struct {
        uv_timer_t tick;                           /* the sampler, every second */
        int ui;                                    /* --dashboard: serve /ui/ */
        sluice__http_req *streams[GW_MAX_STREAMS]; /* GET /v1/events */
        int nstreams;
        char token[4097]; /* --admin-token-file's token; token_len 0: actions answer 403 */
        size_t token_len;
        sluice_aconn *console;  /* the console's connection (gateway_conns.c): every queue's on
                                   one server; on a cluster the slot of none (--discover) */
        sluice_aconn **by_slot; /* on a cluster: a connection per slot, NULL where none */
        sluice_url *url;        /* on a cluster: for the connections opened later; wiped at stop */
        gw_discovery disc;
    } dash;
} gw_server;

/* ---- gateway_routes.c ---- */

/* The served queue called name[0..len), or NULL. */
gw_queue *gw_find_queue(gw_server *s, const char *name, size_t len);

/* The responder's handler (arg: the gw_server): serves a complete request, answering once, now
 * or from a producer callback. */
void gw_route(sluice__http_req *r, void *arg);

/* The responder's on_response (arg: the gw_server): counts a response for /metrics. */
void gw_count_response(void *arg, int status);

/* ---- gateway_dash.c ---- */

struct sluice_text;
/* Starts the sampler (every served queue, every second). -1: out of memory. */
int gw_dash_start(gw_server *s);
/* Ends the event streams, stops the sampler, closes the console's connections (idempotent). */
void gw_dash_stop(gw_server *s);
/* Frees the samples, once the producers are closed. */
void gw_dash_free(gw_server *s);
/* Reads and checks --admin-token-file (owner-only regular file, 16..4096 visible bytes). */
int gw_dash_read_token(gw_server *s, const char *file, char *err, size_t n);
/* Serves /v1/queues, /v1/events, /ui/... and /v1/admin/...: 1 when it answered, else 0. */
int gw_dash_route(sluice__http_req *c, const char *path, size_t len);
/* 0 when the request carries "Authorization: Bearer TOKEN"; the comparison takes the same time
 * wherever the first difference is. Else answers 403 (no token file) or 401, returns -1. */
int gw_dash_authorized(sluice__http_req *c, const gw_server *s);
/* Appends ",\"rates\":{...},\"wait_s\":...,\"history\":{...}" (300 samples) of one queue. */
void gw_dash_history(struct sluice_text *b, const gw_queue *q);
/* ---- gateway_verbs.c ---- */

enum { GW_VERB_PAUSE = 1, GW_VERB_RESUME, GW_VERB_CLEAR };
/* Serves POST /v1/admin/queues/{q}/pause, /resume or /clear (which: GW_VERB_*) on every
 * partition of q, answering once, later, with what was done. */
void gw_verb_start(sluice__http_req *c, gw_server *s, const gw_queue *q, int which);

/* ---- gateway_entries.c ---- */

/* Serves GET /v1/queues/{q}/messages, /messages/{id} and /dead (sub: that part of the path),
 * once authorized: the entries decoded, answered later. */
void gw_entries_read(sluice__http_req *c, gw_server *s, const gw_queue *q, const char *sub,
                     size_t len);

/* ---- gateway_detail.c ---- */

/* Completes GET /v1/queues/{q} (b: its figures so far, taken over): appends the rates, the
 * wait, the 5-minute history, the consumers, the latest dead letters and the top fair lanes,
 * then answers. */
void gw_dash_answer_detail(sluice__http_req *c, const gw_queue *q, struct sluice_text *b);

/* ---- gateway_conns.c ---- */

/* Opens the console's connection; on a Redis Cluster besides, one in the slot of each served
 * queue. They load the sluice library when a token was given. -1: out of memory. */
int gw_conns_open(gw_server *s, const sluice_url *u);
/* The connection for the keys of queue (or of a partition, "Q~1"): on one server the console's;
 * on a cluster the one of its slot, opened now when there was none (ECONN until it is up). NULL
 * when out of memory or stopped. */
sluice_aconn *gw_conn_for(gw_server *s, const char *queue);
/* On a cluster: a connection to each primary of m (the set's connection of a slot it serves,
 * opened now when there was none): N of the name "-N" whose slot it is in names. Returns how
 * many. */
int gw_conns_primaries(gw_server *s, const sluice_cluster_map *m, int *names);
/* Once a second: on a cluster, the connections of the partitions the sampler has seen. */
void gw_conns_tick(gw_server *s);
/* Closes them all and wipes the URL kept (idempotent). */
void gw_conns_close(gw_server *s);

/* ---- gateway_discover.c ---- */

/* Once a second: a round of SCAN every GW_DISCOVER_EVERY s, the discovered queues' figures. */
void gw_discover_tick(gw_server *s);
/* Appends ",\"discovered\":[...]" with --discover. */
void gw_discover_json(struct sluice_text *b, const gw_server *s);

/* Answers 200 with the JSON in b (500 when it could not be built whole) and frees b. */
void gw_reply_text(sluice__http_req *c, struct sluice_text *b);

#endif
