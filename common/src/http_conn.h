/* SPDX-License-Identifier: MIT */
/*
 * http_conn.h - what the two halves of the HTTP/1.1 server share, internal to sluice_http: the
 * server and connection structures, the phases of a connection, and the few calls each half
 * makes into the other. http_responder.c owns the connection (accepting, reading, writing,
 * timers, closing); http_request.c parses a request into it and gives the handler its view of
 * the request. Nothing here is part of http_responder.h's interface.
 */
#ifndef SLUICE_HTTP_CONN_H
#define SLUICE_HTTP_CONN_H

#include "sluice/http_responder.h"

#define READ_BUF 16384 /* bytes per connection for unparsed input */

enum { IDLE = 0, HEADERS, BODY, BUSY, STREAM };

struct sluice__http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    sluice__http_options o;
    sluice__http_handler handler;
    void *arg;
    sluice__http_req *conns; /* open connections (a list) */
    size_t nconns;
    size_t nrefusing; /* refused connections still being closed */
    size_t nalive;    /* connections whose memory is not freed yet (closing, or held) */
    unsigned long long accepted, refused;
    int listener_open; /* the listener's handle is not closed yet */
    int stopping;      /* sluice__http_stop or _close was called */
    int closing;       /* sluice__http_close was called */
    void (*closed)(void *arg);
    void *closed_arg;
    char date[64]; /* "Date: ...\r\n", refreshed once per second */
    uint64_t date_s;
    char sink[READ_BUF]; /* input of lingering connections goes here */
};

/* One parsed request header: offsets into the connection's header arena. */
typedef struct hdr {
    uint32_t name, name_len, value, value_len;
} hdr;

struct sluice__http_req {
    uv_tcp_t tcp;
    uv_timer_t timer;   /* header, body or idle timeout; linger after an error */
    uv_shutdown_t shut; /* the write side, before a lingering close */
    sluice__http_server *srv;
    sluice__http_req *prev, *next;
    http_parser parser;
    char rbuf[READ_BUF]; /* unparsed input (pipelined requests wait here) */
    size_t roff, rlen;
    /* the request being read or served */
    char *arena; /* URL, then header names and values; max_headers_total bytes */
    size_t arena_len;
    size_t url_len;
    hdr *hdrs; /* max_headers entries */
    int nhdrs;
    int in_value; /* the last header callback was a value */
    char *body;   /* the body (grows up to max_body) */
    size_t body_len, body_cap;
    int error_status; /* a limit a parser callback hit: 408, 413, 414, 431 */
    int method;
    int keep_alive;
    int phase;           /* IDLE, HEADERS, BODY, BUSY, STREAM (a streamed answer) */
    int eof;             /* the client closed its side: close after the response */
    int wblocked;        /* stopped parsing until the client reads its responses */
    int closing;         /* uv_close called */
    int reading;         /* uv_read_start in effect */
    int in_process;      /* inside the parse loop: responses do not re-enter it */
    int lingering;       /* error response sent; reading and discarding until EOF/timer */
    int handles;         /* handles not yet closed */
    int holds;           /* callbacks that will still answer (or release) this request */
    uint64_t started_ns; /* when the request being served was complete */
};

/* http-parser's callbacks (http_request.c): they fill the connection's request and pause the
 * parser once a message is complete. */
extern const http_parser_settings sluice__http_parser_settings;

/* The error text of a limit a parser callback hit (its status: 413, 414, 431, 503), else that of
 * a malformed request. */
const char *sluice__http_limit_text(int status);

/* (Re)starts the connection's timer: header, body or idle timeout, or the linger. */
void sluice__http_arm(sluice__http_req *c, int ms);

/* Writes bytes to the client: at once what the socket takes, the rest queued (copied). */
void sluice__http_send(sluice__http_req *c, const char *data, size_t len);

#endif
