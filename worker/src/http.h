/* SPDX-License-Identifier: MIT */
/*
 * http.h - the small HTTP/1.0-style responder behind sluice-worker's --metrics: one request per
 * connection (at most SW_HTTP_REQ_MAX bytes, within SW_HTTP_READ_TIMEOUT_MS), GET or HEAD only
 * (405 otherwise), 400 for a request line it cannot read, 431 for an oversized request; then
 * the connection is closed. At most SW_HTTP_MAX_CLIENTS connections are open at once; more are
 * closed on accept. Every handle is unref'd: the server never keeps the loop alive on its own.
 * One loop thread.
 */
#ifndef SLUICE_WORKER_HTTP_H
#define SLUICE_WORKER_HTTP_H

#include <stddef.h>

#include <uv.h>

#define SW_HTTP_REQ_MAX         8192  /* bytes of one request */
#define SW_HTTP_MAX_CLIENTS     64    /* connections open at once */
#define SW_HTTP_READ_TIMEOUT_MS 5000  /* to receive the whole request */
#define SW_HTTP_BODY_MAX        65536 /* bytes of one response body */

typedef struct sw_http sw_http;
typedef struct sw_http_req sw_http_req;

/* Called once per complete GET or HEAD request with its path (the query string cut off); it
 * must answer with sw_http_respond before it returns. */
typedef void (*sw_http_handler)(sw_http_req *req, const char *path, void *arg);

/* Answers the request (the body is left out for HEAD) and closes the connection. */
void sw_http_respond(sw_http_req *req, const char *status, const char *type, const char *body,
                     size_t len);

/* Listens on `addr` (sluice_listen_addr_parse forms; `opt` names the flag in messages) and
 * logs the address it got. Returns 0 or -1 with a message; on -1 nothing needs closing. */
int sw_http_start(uv_loop_t *loop, const char *opt, const char *addr, sw_http_handler handler,
                  void *arg, sw_http **out, char *err, size_t errlen);

/* Stops listening and closes every connection; `closed(arg)` runs once libuv closed them all
 * and the memory is freed. */
void sw_http_close(sw_http *s, void (*closed)(void *arg), void *arg);

#endif
