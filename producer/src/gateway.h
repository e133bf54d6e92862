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
#include "sluice/http_responder.h"

#define GW_MAX_QUEUES  64
#define GW_LAT_BUCKETS 14

#define GW_LIMIT_NAMES 32 /* rate limits counted by name per queue; others count as "other" */

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
    int stopping; /* 1: draining after the first signal; 2: after the second / grace */
    int grace_ms;
    gw_metrics m;
    char client_header[64]; /* lower case; "" = the peer address is the client key */
    int trusted_proxies;    /* the client key is this entry of the header's list from the
                               right (1 = the rightmost); default 1 */
    int require_client;     /* 1: a request without the client header is answered 400 */
    char tenant_header[64]; /* lower case; "" = messages carry no tenant */
} gw_server;

/* ---- gateway_routes.c ---- */

/* The served queue called name[0..len), or NULL. */
gw_queue *gw_find_queue(gw_server *s, const char *name, size_t len);

/* The responder's handler (arg: the gw_server): serves a complete request, answering once, now
 * or from a producer callback. */
void gw_route(sluice__http_req *r, void *arg);

/* The responder's on_response (arg: the gw_server): counts a response for /metrics. */
void gw_count_response(void *arg, int status);

#endif
