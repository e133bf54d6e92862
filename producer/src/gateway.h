/* SPDX-License-Identifier: MIT */
/*
 * gateway.h - what the three parts of sluice-gateway share.
 *
 * gateway.c owns the process: options, the listener, the connection cap, signals and the
 * graceful stop, and one async producer per served queue. gateway_http.c owns a client
 * connection: reading, HTTP/1.1 parsing with Debian's http-parser under explicit limits (header
 * count and sizes, body size, read timeouts), keep-alive and pipelining, and writing responses.
 * gateway_routes.c owns what a complete request means: the routes, their JSON bodies, the status
 * codes, and the Prometheus metrics. Everything runs on one libuv loop thread.
 */
#ifndef SLUICE_GATEWAY_H
#define SLUICE_GATEWAY_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>
#include <uv.h>

#include <uv.h>

#include "sluice/aproducer.h"

#define GW_MAX_QUEUES  64
#define GW_READ_BUF    16384  /* bytes per connection for unparsed input */
#define GW_MAX_URL     4096   /* bytes of the request target (beyond it: 414) */
#define GW_WRITE_LIMIT 262144 /* bytes queued for a client that does not read: stop parsing */
#define GW_LAT_BUCKETS 14

/* Limits of the HTTP server; each has a command-line flag. */
typedef struct gw_limits {
    size_t max_body;          /* bytes of one request body (413 beyond) */
    size_t max_header_line;   /* bytes of one header, name + value (431 beyond) */
    size_t max_headers_total; /* bytes of the request line's target and all headers (431) */
    int max_headers;          /* headers per request (431 beyond) */
    int max_connections;      /* open client connections; more are answered 503 and closed */
    int header_timeout_ms;    /* from a request's first byte to the end of its headers (408) */
    int body_timeout_ms;      /* from the end of the headers to the end of the body (408) */
    int idle_timeout_ms;      /* a keep-alive connection waiting for its next request */
} gw_limits;

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

typedef struct gw_conn gw_conn;

/* Counters behind GET /metrics. */
typedef struct gw_metrics {
    unsigned long long by_code[600];        /* responses by HTTP status */
    unsigned long long accepted, refused;   /* connections; refused = over the cap */
    unsigned long long lat[GW_LAT_BUCKETS]; /* admission latency histogram (non-cumulative) */
    double lat_sum;                         /* seconds */
    unsigned long long lat_count;
} gw_metrics;

typedef struct gw_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_signal_t sigterm, sigint;
    uv_timer_t grace_timer;
    gw_limits lim;
    gw_queue queues[GW_MAX_QUEUES];
    size_t nqueues;
    gw_conn *conns; /* open connections (a list) */
    size_t nconns;
    size_t nrefusing; /* refused connections still being closed */
    int stopping;     /* 1: draining after the first signal; 2: after the second / grace */
    int grace_ms;
    gw_metrics m;
    char client_header[64]; /* lower case; "" = the peer address is the client key */
    int trusted_proxies;    /* the client key is this entry of the header's list from the
                               right (1 = the rightmost); default 1 */
    int require_client;     /* 1: a request without the client header is answered 400 */
    char tenant_header[64]; /* lower case; "" = messages carry no tenant */
    char date[64];          /* "Date: ...\r\n", refreshed once per second */
    uint64_t date_s;
} gw_server;

/* One parsed request header: offsets into the connection's header arena. */
typedef struct gw_hdr {
    uint32_t name, name_len, value, value_len;
} gw_hdr;

struct gw_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;   /* header, body or idle timeout; linger after an error */
    uv_shutdown_t shut; /* the write side, before a lingering close */
    gw_server *srv;
    gw_conn *prev, *next;
    http_parser parser;
    char rbuf[GW_READ_BUF]; /* unparsed input (pipelined requests wait here) */
    size_t roff, rlen;
    /* the request being read or served */
    char *arena; /* URL, then header names and values; max_headers_total bytes */
    size_t arena_len;
    size_t url_len;
    gw_hdr *hdrs; /* max_headers entries */
    int nhdrs;
    int in_value; /* the last header callback was a value */
    char *body;   /* the body (grows up to max_body) */
    size_t body_len, body_cap;
    int error_status; /* a limit a parser callback hit: 408, 413, 414, 431 */
    int method;
    int keep_alive;
    int phase;           /* GW_IDLE, GW_HEADERS, GW_BODY, GW_BUSY */
    int eof;             /* the client closed its side: close after the response */
    int wblocked;        /* stopped parsing until the client reads its responses */
    int closing;         /* uv_close called */
    int reading;         /* uv_read_start in effect */
    int in_process;      /* inside the parse loop: responses do not re-enter it */
    int lingering;       /* error response sent; reading and discarding until EOF/timer */
    int handles;         /* handles not yet closed */
    int inflight;        /* producer callbacks that still point at this connection */
    uint64_t started_ns; /* when the request being served was complete */
};

enum { GW_IDLE = 0, GW_HEADERS, GW_BODY, GW_BUSY };

/* ---- gateway.c ---- */

/* The served queue called name[0..len), or NULL. */
gw_queue *gw_find_queue(gw_server *s, const char *name, size_t len);

/* ---- gateway_http.c ---- */

/* Accepts one pending connection from the listener (or refuses it when over the cap). */
void gw_accept(gw_server *s);

/* Closes a connection now (its pending producer callbacks are then ignored). */
void gw_conn_close(gw_conn *c);

/* Called first by every producer callback that carries a connection: drops the reference
 * taken when the request was routed. Returns 1 when the connection was closed meanwhile (the
 * callback must not touch it any more), else 0. */
int gw_conn_release(gw_conn *c);

/* The value of request header `name` (lower case), or NULL; *len is set. */
const char *gw_header(const gw_conn *c, const char *name, size_t *len);

/* The value of the nth line (0 = the last) of request header `name` (lower case) counted from
 * the end of the request, or NULL when it has fewer lines; *len is set. */
const char *gw_header_from_end(const gw_conn *c, const char *name, int nth, size_t *len);

/* The request target (not NUL-terminated); *len is set. */
const char *gw_url(const gw_conn *c, size_t *len);

/*
 * Writes the response to the request being served and goes on with the connection: the next
 * pipelined request, the idle timeout, or a close. `extra` holds complete header lines (each
 * ending in \r\n) or is NULL. `close_after` forces Connection: close. HEAD gets no body.
 */
void gw_respond(gw_conn *c, int status, const char *ctype, const char *extra, const char *body,
                size_t len, int close_after);

/* Stops a connection that waits for its next request (graceful stop); busy ones close after
 * their response. */
void gw_conn_stop_idle(gw_conn *c);

/* ---- gateway_routes.c ---- */

/* Serves a complete request (c->method, gw_url, gw_header, c->body). Calls gw_respond once,
 * now or from a producer callback. */
void gw_route(gw_conn *c);

/* Counts a response for /metrics. */
void gw_count_response(gw_server *s, int status);

/* The reason phrase of a status code. */
const char *gw_reason(int status);

#endif
