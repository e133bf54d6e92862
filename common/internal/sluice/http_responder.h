/* SPDX-License-Identifier: MIT */
/*
 * http_responder.h - a small HTTP/1.1 server on a libuv loop, for sluice's own binaries (the
 * gateway, the worker's /metrics). Not installed; built as the static library sluice_http.
 *
 * It owns the listener and the client connections: accepting (with a connection cap), parsing
 * with Debian's http-parser under explicit limits (header line, header total, request target,
 * body size, header/body/idle timeouts), keep-alive and pipelining (requests on one connection
 * are served one at a time, in order), the client's half-close (every complete request is still
 * answered), responses with Date and Content-Length (or streamed until the close, for
 * Server-Sent Events), and the graceful and the hard stop. It
 * knows nothing of what a request means: for each complete request it calls the user's handler,
 * which answers with sluice__http_respond, at once or later. A limit hit closes only the
 * offending connection, after an answer (400, 408, 413, 414, 431) and a lingering close.
 *
 * Thread affinity: a server and its requests belong to the loop thread they were started on.
 */
#ifndef SLUICE_HTTP_RESPONDER_H
#define SLUICE_HTTP_RESPONDER_H

#include <stddef.h>
#include <stdint.h>

#include <http_parser.h>
#include <uv.h>

typedef struct sluice__http_server sluice__http_server;
/* One client connection, seen by the handler as the request it is serving. */
typedef struct sluice__http_req sluice__http_req;

/* Called once per complete request. It answers with sluice__http_respond before it returns, or
 * takes a hold (sluice__http_hold) and answers later; returning with neither answers 500. */
typedef void (*sluice__http_handler)(sluice__http_req *req, void *arg);

typedef struct sluice__http_options {
    size_t max_body;          /* bytes of one request body (413 beyond); default 1 MiB */
    size_t max_header_line;   /* bytes of one header, name + value (431); default 8192 */
    size_t max_headers_total; /* bytes of the request target and all headers (431); 16384 */
    size_t max_url;           /* bytes of the request target (414); default 4096 */
    int max_headers;          /* headers per request (431); default 64 */
    int max_connections;      /* open connections; default 1024 */
    int header_timeout_ms;    /* first byte (or accept) to the end of the headers; 10000 */
    int body_timeout_ms;      /* end of the headers to the end of the body (408); 30000 */
    int idle_timeout_ms;      /* a keep-alive connection waiting for its next request; 30000 */
    int backlog;              /* listen backlog; default 511 */
    int close_each;           /* 1: one request per connection (Connection: close); default 0 */
    int silent_refuse;        /* 1: over the cap, close without answering; default 0: 503 */
    int unref;                /* 1: the server never keeps the loop alive on its own */
    const char *server_name;  /* the Server header's value (kept, not copied); NULL: none */
    /* Called for every status answered, refusals (503) included; NULL: not called. */
    void (*on_response)(void *arg, int status);
} sluice__http_options;

typedef struct sluice__http_stats {
    size_t open;                 /* client connections open now */
    unsigned long long accepted; /* connections accepted */
    unsigned long long refused;  /* connections refused over the cap */
} sluice__http_stats;

/* Writes the defaults above. */
void sluice__http_options_init(sluice__http_options *o);

/* Listens on `addr` with `o` (copied) and serves each request with handler(req, arg). Returns 0,
 * or a libuv error (nothing to close then). */
int sluice__http_listen(uv_loop_t *loop, const struct sockaddr *addr, const sluice__http_options *o,
                        sluice__http_handler handler, void *arg, sluice__http_server **out);

/* The bound address: writes the host and the port; returns AF_INET or AF_INET6, -1 on error. */
int sluice__http_address(const sluice__http_server *s, char *host, size_t len, int *port);

void sluice__http_get_stats(const sluice__http_server *s, sluice__http_stats *st);

/* The graceful stop: stops listening, closes connections waiting for a request; the busy ones
 * close after their answer (Connection: close). */
void sluice__http_stop(sluice__http_server *s);

/* Closes every connection now (answers still owed are dropped) and the listener; `closed(arg)`
 * runs once the last connection (and every hold) is gone and the memory is freed. NULL: no-op. */
void sluice__http_close(sluice__http_server *s, void (*closed)(void *arg), void *arg);

/* ---- the request being served (valid in the handler, and until its answer under a hold) ---- */

void *sluice__http_arg(const sluice__http_req *r);  /* the handler's arg */
int sluice__http_method(const sluice__http_req *r); /* HTTP_GET, HTTP_POST ... */
/* The path of the target, or NULL when the target cannot be parsed; *len is set. */
const char *sluice__http_path(const sluice__http_req *r, size_t *len);
/* The query of the target (after '?', not decoded), or NULL when it has none; *len is set. */
const char *sluice__http_query(const sluice__http_req *r, size_t *len);
/* The value of the first `name=value` of query q[0..qlen), percent-decoded ('+' a space) into
 * out (NUL-terminated; it may hold NUL bytes): its length, -1 when the query has no `name`, -2
 * when a %XX is malformed or the value does not fit in cap - 1 bytes. Pure. */
long sluice__http_query_param(const char *q, size_t qlen, const char *name, char *out, size_t cap);
/* 1 when the `len` bytes at `p` (a path, or part of one) are exactly `want`. */
int sluice__http_path_is(const char *p, size_t len, const char *want);
/* The value of header `name` (lower case), or NULL; *len is set. */
const char *sluice__http_header(const sluice__http_req *r, const char *name, size_t *len);
/* The value of the nth line (0 = the last) of header `name` (lower case) counted from the end
 * of the request, or NULL when it has fewer lines; *len is set. */
const char *sluice__http_header_from_end(const sluice__http_req *r, const char *name, int nth,
                                         size_t *len);
const char *sluice__http_body(const sluice__http_req *r, size_t *len);
/* The peer's address ("" when unknown) written to out. */
void sluice__http_peer(const sluice__http_req *r, char *out, size_t len);
/* uv_hrtime() when the request was complete. */
uint64_t sluice__http_started_ns(const sluice__http_req *r);

/* Keeps the request's memory for an answer given later (one hold per pending callback). */
void sluice__http_hold(sluice__http_req *r);
/* Drops a hold, first thing in the callback. Returns 1 when the connection closed meanwhile
 * (the request must not be touched any more), else 0. */
int sluice__http_release(sluice__http_req *r);

/*
 * Answers the request being served and goes on with the connection: the next pipelined
 * request, the idle timeout, or a close. `extra` holds complete header lines (each ending in
 * \r\n) or is NULL. `close_after` forces Connection: close. HEAD gets no body.
 */
void sluice__http_respond(sluice__http_req *r, int status, const char *ctype, const char *extra,
                          const char *body, size_t len, int close_after);

/*
 * A streamed answer (Server-Sent Events): instead of sluice__http_respond, the handler calls
 * stream_begin, which sends a 200 with `ctype`, `extra` header lines and Connection: close, and
 * takes a hold for the streamer. Each stream_write sends `len` bytes; it returns -1 (nothing
 * sent) once the connection is closed or the client has not read WRITE_LIMIT bytes of it, else
 * 0. stream_end, called exactly once (also after a -1), closes the connection gracefully if it
 * is open and drops the hold: the request must not be touched after it.
 */
void sluice__http_stream_begin(sluice__http_req *r, const char *ctype, const char *extra);
int sluice__http_stream_write(sluice__http_req *r, const char *data, size_t len);
void sluice__http_stream_end(sluice__http_req *r);

/* The reason phrase of a status code. */
const char *sluice__http_reason(int status);

#endif
