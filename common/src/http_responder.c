/* SPDX-License-Identifier: MIT */
/*
 * http_responder.c - the HTTP/1.1 server of sluice's binaries (see http_responder.h; limits
 * and their answers in docs/faults.md B15).
 *
 * Requests are served one at a time per connection, in order: when http-parser completes a
 * message it is paused, the handler runs (perhaps answering later, under a hold), and only once
 * the answer is written does parsing go on with the next pipelined request. Input waits in a
 * fixed per-connection buffer; when that is full, reading stops (TCP pushes back on the client).
 *
 * Every limit hit closes only the offending connection, after an answer: malformed -> 400, body
 * too large -> 413, too many or too large headers -> 431, target too long -> 414, too slow -> 408.
 * Before closing, the write side is shut down and input is read and discarded for a moment
 * ("lingering close"), so the client sees the answer rather than a reset.
 *
 * This file is the connection: accepting, reading, serving one request at a time, writing the
 * answers (whole or streamed), timers and closing. Parsing a request and the handler's view of
 * it are http_request.c's; the structures both share are in http_conn.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http_conn.h"
#include "sluice/log.h"

#define WRITE_LIMIT 262144 /* bytes queued for a client that does not read: stop parsing */
#define LINGER_MS   2000   /* after an answer that closes: wait this long for the client's EOF */
#define KEEP_BODY   65536  /* body buffer kept between requests, at most */

typedef struct pending_write {
    uv_write_t req;
    sluice__http_req *c;
    char data[];
} pending_write;

static void process(sluice__http_req *c);
static void update_reading(sluice__http_req *c);
static void fail(sluice__http_req *c, int status, const char *msg);

void sluice__http_options_init(sluice__http_options *o) {
    memset(o, 0, sizeof(*o));
    o->max_body = 1u << 20;
    o->max_header_line = 8192;
    o->max_headers_total = 16384;
    o->max_url = 4096;
    o->max_headers = 64;
    o->max_connections = 1024;
    o->header_timeout_ms = 10000;
    o->body_timeout_ms = 30000;
    o->idle_timeout_ms = 30000;
    o->backlog = 511;
}

const char *sluice__http_reason(int status) {
    switch (status) {
    case 200:
        return "OK";
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 503:
        return "Service Unavailable";
    default:
        return status < 500 ? "Client Error" : "Internal Server Error";
    }
}

static void count_response(sluice__http_server *s, int status) {
    if (s->o.on_response != NULL) {
        s->o.on_response(s->arg, status);
    }
}

static void init_handle(sluice__http_server *s, uv_handle_t *h, void *data) {
    h->data = data;
    if (s->o.unref) {
        uv_unref(h);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Closing                                                                                  */

static void maybe_done(sluice__http_server *s) {
    if (s->closing && !s->listener_open && s->nalive == 0 && s->nrefusing == 0) {
        void (*closed)(void *) = s->closed;
        void *arg = s->closed_arg;
        free(s);
        if (closed != NULL) {
            closed(arg);
        }
    }
}

static void maybe_free(sluice__http_req *c) {
    if (c->handles == 0 && c->holds == 0) {
        sluice__http_server *s = c->srv;
        free(c->arena);
        free(c->hdrs);
        free(c->body);
        free(c);
        s->nalive--;
        maybe_done(s);
    }
}

static void on_handle_closed(uv_handle_t *h) {
    sluice__http_req *c = h->data;
    c->handles--;
    maybe_free(c);
}

/* Closes a connection now (its holders are told by sluice__http_release). */
static void conn_close(sluice__http_req *c) {
    if (c->closing) {
        return;
    }
    sluice__http_server *s = c->srv;
    c->closing = 1;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    s->nconns--;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

void sluice__http_hold(sluice__http_req *c) {
    c->holds++;
}

int sluice__http_release(sluice__http_req *c) {
    c->holds--;
    if (!c->closing) {
        return 0;
    }
    maybe_free(c);
    return 1;
}

static void on_timer(uv_timer_t *t);

void sluice__http_arm(sluice__http_req *c, int ms) {
    uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    sluice__http_req *c = req->data;
    if (status < 0) {
        conn_close(c);
    }
}

/* After an answer that ends the connection: shut down writing once the answer is out, drain
 * the input until the client closes (or LINGER_MS), then close. */
static void linger(sluice__http_req *c) {
    if (c->lingering || c->closing) {
        return;
    }
    c->lingering = 1;
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        conn_close(c);
        return;
    }
    sluice__http_arm(c, LINGER_MS);
    update_reading(c);
}

static void on_timer(uv_timer_t *t) {
    sluice__http_req *c = t->data;
    if (c->lingering || c->phase == IDLE) {
        conn_close(c); /* idle keep-alive, or an unread answer */
    } else if (c->phase == HEADERS || c->phase == BODY) {
        fail(c, 408,
             c->phase == HEADERS ? "request headers not received in time"
                                 : "request body not received in time");
    }
}

static void on_listener_closed(uv_handle_t *h) {
    sluice__http_server *s = h->data;
    s->listener_open = 0;
    maybe_done(s);
}

static void close_listener(sluice__http_server *s) {
    if (!uv_is_closing((uv_handle_t *)&s->listener)) {
        uv_close((uv_handle_t *)&s->listener, on_listener_closed);
    }
}

void sluice__http_stop(sluice__http_server *s) {
    if (s->stopping) {
        return;
    }
    s->stopping = 1;
    close_listener(s);
    for (sluice__http_req *c = s->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->phase == IDLE && !c->lingering) {
            conn_close(c);
        }
    }
}

void sluice__http_close(sluice__http_server *s, void (*closed)(void *arg), void *arg) {
    if (s == NULL || s->closing) {
        return;
    }
    s->stopping = s->closing = 1;
    s->closed = closed;
    s->closed_arg = arg;
    close_listener(s);
    while (s->conns != NULL) {
        conn_close(s->conns);
    }
    maybe_done(s);
}

void sluice__http_get_stats(const sluice__http_server *s, sluice__http_stats *st) {
    st->open = s->nconns;
    st->accepted = s->accepted;
    st->refused = s->refused;
}

/* ---------------------------------------------------------------------------------------- */
/* Writing                                                                                  */

static void on_written(uv_write_t *req, int status) {
    pending_write *w = (pending_write *)req;
    sluice__http_req *c = w->c;
    free(w);
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->wblocked && !c->closing &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < WRITE_LIMIT / 2) {
        c->wblocked = 0;
        process(c);
    }
}

/* Writes at once what the socket takes; queues the rest (copied). */
void sluice__http_send(sluice__http_req *c, const char *data, size_t len) {
    uv_stream_t *st = (uv_stream_t *)&c->tcp;
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    int n = 0;
    if (uv_stream_get_write_queue_size(st) == 0) {
        n = uv_try_write(st, &b, 1);
        if (n == UV_EAGAIN) {
            n = 0;
        } else if (n < 0) {
            conn_close(c);
            return;
        }
    }
    if ((size_t)n == len) {
        return;
    }
    pending_write *w = malloc(sizeof(*w) + len - (size_t)n);
    if (w == NULL) {
        conn_close(c);
        return;
    }
    memcpy(w->data, data + n, len - (size_t)n);
    w->c = c;
    b = uv_buf_init(w->data, (unsigned)(len - (size_t)n));
    if (uv_write(&w->req, st, &b, 1, on_written) != 0) {
        free(w);
        conn_close(c);
    }
}

static void refresh_date(sluice__http_server *s) {
    uint64_t now_s = uv_now(s->loop) / 1000;
    if (now_s == s->date_s && s->date[0] != '\0') {
        return;
    }
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(s->date, sizeof(s->date), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
    s->date_s = now_s;
}

/* The status line and the headers into buf; returns their length, or -1 when they do not fit
 * (buf then holds a bare 500 of length *n). */
static int head(sluice__http_server *s, char *buf, size_t size, int status, const char *ctype,
                const char *extra, size_t len, int closing) {
    refresh_date(s);
    const char *sn = s->o.server_name;
    int n = snprintf(buf, size,
                     "HTTP/1.1 %d %s\r\n%s%s%s%sContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n%s%s\r\n",
                     status, sluice__http_reason(status), sn ? "Server: " : "", sn ? sn : "",
                     sn ? "\r\n" : "", s->date, ctype, len, closing ? "Connection: close\r\n" : "",
                     extra ? extra : "");
    return n < 0 || (size_t)n >= size ? -1 : n;
}

void sluice__http_respond(sluice__http_req *c, int status, const char *ctype, const char *extra,
                          const char *body, size_t len, int close_after) {
    sluice__http_server *s = c->srv;
    count_response(s, status);
    if (status >= 400 && status < 500) { /* the client's mistake: counted, logged only at debug */
        SLUICE_LOG(SLUICE_LOG_DEBUG, "event=client_error status=%d", status);
    }
    if (c->closing || c->lingering) {
        return;
    }
    /* after the client's half-close, answer every complete request it sent, then close */
    int closing =
        close_after || !c->keep_alive || (c->eof && c->rlen == 0) || s->stopping || s->o.close_each;
    char buf[4096];
    int n = head(s, buf, sizeof(buf), status, ctype, extra, len, closing);
    if (n < 0) {
        n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 500 Internal Server Error\r\nContent-Length: "
                     "0\r\nConnection: close\r\n\r\n");
        closing = 1;
        len = 0;
    }
    if (c->method == HTTP_HEAD) {
        len = 0;
    }
    if ((size_t)n + len <= sizeof(buf)) {
        memcpy(buf + n, body, len);
        sluice__http_send(c, buf, (size_t)n + len);
    } else {
        sluice__http_send(c, buf, (size_t)n);
        if (!c->closing) {
            sluice__http_send(c, body, len);
        }
    }
    c->phase = IDLE;
    if (c->body_cap > KEEP_BODY) { /* idle connections do not hold large buffers */
        free(c->body);
        c->body = NULL;
        c->body_cap = 0;
    }
    if (c->closing) {
        return;
    }
    if (closing) {
        linger(c);
        return;
    }
    sluice__http_arm(c, s->o.idle_timeout_ms);
    if (!c->in_process) {
        process(c);
    }
}

/* A response whose body follows in pieces until the connection closes (no Content-Length,
 * Connection: close): Server-Sent Events. The request stays held by the streamer. */
void sluice__http_stream_begin(sluice__http_req *c, const char *ctype, const char *extra) {
    sluice__http_server *s = c->srv;
    count_response(s, 200);
    c->holds++;
    c->phase = STREAM;
    uv_timer_stop(&c->timer);
    if (c->closing || c->lingering) {
        return;
    }
    refresh_date(s);
    const char *sn = s->o.server_name;
    char buf[4096];
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 200 OK\r\n%s%s%s%sContent-Type: %s\r\nCache-Control: no-store\r\n"
                     "Connection: close\r\n%s\r\n",
                     sn ? "Server: " : "", sn ? sn : "", sn ? "\r\n" : "", s->date, ctype,
                     extra ? extra : "");
    if (n < 0 || (size_t)n >= sizeof(buf)) {
        conn_close(c);
        return;
    }
    sluice__http_send(c, buf, (size_t)n);
}

int sluice__http_stream_write(sluice__http_req *c, const char *data, size_t len) {
    if (c->closing || c->lingering || c->phase != STREAM ||
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > WRITE_LIMIT) {
        return -1; /* gone, ended, or a client that does not read */
    }
    sluice__http_send(c, data, len);
    return c->closing ? -1 : 0;
}

void sluice__http_stream_end(sluice__http_req *c) {
    if (c->phase == STREAM) {
        c->phase = IDLE;
        if (!c->closing) {
            linger(c);
        }
    }
    c->holds--;
    maybe_free(c);
}

/* Answers an error with a JSON body and ends the connection. */
static void fail(sluice__http_req *c, int status, const char *msg) {
    char body[256];
    int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
    c->phase = BUSY;
    uv_timer_stop(&c->timer);
    sluice__http_respond(c, status, "application/json", NULL, body, (size_t)n, 1);
}

/* Runs the handler on a complete request; a handler that neither answered nor took a hold
 * gets a 500 for it, so the client is not left hanging. */
static void serve(sluice__http_req *c) {
    c->started_ns = uv_hrtime();
    c->srv->handler(c, c->srv->arg);
    if (!c->closing && c->phase == BUSY && c->holds == 0) {
        static const char msg[] = "{\"error\":\"no answer\"}\n";
        sluice__http_respond(c, 500, "application/json", NULL, msg, sizeof(msg) - 1, 0);
    }
}

/* Parses what is buffered, serving complete requests one by one. */
static void process(sluice__http_req *c) {
    c->in_process = 1;
    while (!c->closing && !c->lingering && c->phase < BUSY && !c->wblocked && c->rlen > 0) {
        size_t n = http_parser_execute(&c->parser, &sluice__http_parser_settings, c->rbuf + c->roff,
                                       c->rlen);
        c->roff += n;
        c->rlen -= n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            serve(c);
            if (!c->closing &&
                uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > WRITE_LIMIT) {
                c->wblocked = 1; /* the client does not read its answers */
            }
        } else if (e != HPE_OK || n == 0) { /* n == 0: the parser is stuck (upgrade) */
            fail(c, c->error_status ? c->error_status : 400,
                 sluice__http_limit_text(c->error_status));
        }
    }
    if (c->rlen == 0) {
        c->roff = 0;
    }
    c->in_process = 0;
    if (!c->closing) {
        if (c->eof && c->phase == IDLE && !c->lingering) {
            conn_close(c);
            return;
        }
        update_reading(c);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Reading                                                                                  */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    sluice__http_req *c = h->data;
    if (c->lingering) {
        *buf = uv_buf_init(c->srv->sink, sizeof(c->srv->sink));
        return;
    }
    if (c->roff > 0) {
        memmove(c->rbuf, c->rbuf + c->roff, c->rlen);
        c->roff = 0;
    }
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(READ_BUF - c->rlen));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    sluice__http_req *c = st->data;
    if (nread == 0 || c->closing) {
        return;
    }
    if (c->lingering) {
        if (nread < 0) {
            conn_close(c);
        }
        return;
    }
    if (nread == UV_ENOBUFS) {
        update_reading(c);
        return;
    }
    if (nread < 0) {
        if (nread == UV_EOF && c->phase == BUSY) {
            c->eof = 1; /* answer what was asked, then close */
            update_reading(c);
        } else {
            conn_close(c);
        }
        return;
    }
    c->rlen += (size_t)nread;
    process(c);
}

/* Reads while there is room for input and a reason to read. */
static void update_reading(sluice__http_req *c) {
    int want =
        !c->closing && (c->lingering || (!c->eof && !c->wblocked && c->roff + c->rlen < READ_BUF));
    if (want && !c->reading) {
        c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Accepting                                                                                */

/* A connection over the cap: answered 503 (unless silent_refuse), then closed the way linger()
 * does it, so that the client reads the answer rather than a reset. At most max_connections of
 * them at a time; beyond that (a flood) they are closed at once. */
typedef struct refused {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shut;
    sluice__http_server *srv;
    int handles;
} refused;

static void on_refused_closed(uv_handle_t *h) {
    refused *r = h->data;
    if (--r->handles == 0) {
        sluice__http_server *s = r->srv;
        s->nrefusing--;
        free(r);
        maybe_done(s);
    }
}

static void refused_close(refused *r) {
    if (!uv_is_closing((uv_handle_t *)&r->tcp)) {
        uv_close((uv_handle_t *)&r->tcp, on_refused_closed);
        uv_close((uv_handle_t *)&r->timer, on_refused_closed);
    }
}

static void on_refused_timer(uv_timer_t *t) {
    refused_close(t->data);
}

static void on_refused_shutdown(uv_shutdown_t *req, int status) {
    if (status < 0) {
        refused_close(req->data);
    }
}

static void on_refused_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    refused *r = h->data;
    *buf = uv_buf_init(r->srv->sink, sizeof(r->srv->sink));
}

static void on_refused_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    if (nread < 0) {
        refused_close(st->data);
    }
}

static void refuse(sluice__http_server *s) {
    static const char msg[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                              "Retry-After: 1\r\nConnection: close\r\n\r\n";
    refused *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return;
    }
    r->srv = s;
    r->handles = 2;
    s->nrefusing++;
    uv_tcp_init(s->loop, &r->tcp);
    uv_timer_init(s->loop, &r->timer);
    init_handle(s, (uv_handle_t *)&r->tcp, r);
    init_handle(s, (uv_handle_t *)&r->timer, r);
    r->shut.data = r;
    if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&r->tcp) != 0) {
        refused_close(r);
        return;
    }
    s->refused++;
    SLUICE_LOG(SLUICE_LOG_WARN, "event=connection_refused reason=max_connections limit=%d",
               s->o.max_connections);
    if (s->o.silent_refuse) { /* the client sees the connection closed */
        refused_close(r);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)msg, sizeof(msg) - 1);
    count_response(s, 503);
    if (s->nrefusing > (size_t)s->o.max_connections ||
        uv_try_write((uv_stream_t *)&r->tcp, &b, 1) != (int)b.len ||
        uv_shutdown(&r->shut, (uv_stream_t *)&r->tcp, on_refused_shutdown) != 0 ||
        uv_read_start((uv_stream_t *)&r->tcp, on_refused_alloc, on_refused_read) != 0) {
        refused_close(r);
        return;
    }
    uv_timer_start(&r->timer, on_refused_timer, 1000, 0);
}

static sluice__http_req *conn_new(sluice__http_server *s) {
    sluice__http_req *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->arena = malloc(s->o.max_headers_total + 1);
    c->hdrs = calloc((size_t)s->o.max_headers, sizeof(*c->hdrs));
    if (c->arena == NULL || c->hdrs == NULL) {
        free(c->arena);
        free(c->hdrs);
        free(c);
        return NULL;
    }
    c->srv = s;
    return c;
}

/* Accepts one pending connection (or refuses it when over the cap). */
static void accept_one(sluice__http_server *s) {
    sluice__http_req *c = NULL;
    if (s->nconns >= (size_t)s->o.max_connections || s->stopping || (c = conn_new(s)) == NULL) {
        refuse(s);
        return;
    }
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    init_handle(s, (uv_handle_t *)&c->tcp, c);
    init_handle(s, (uv_handle_t *)&c->timer, c);
    c->handles = 2;
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    s->nconns++;
    s->nalive++;
    if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    s->accepted++;
    uv_tcp_nodelay(&c->tcp, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->phase = IDLE;
    sluice__http_arm(c, s->o.header_timeout_ms); /* the first request must start soon */
    update_reading(c);
}

static void on_connection(uv_stream_t *l, int status) {
    sluice__http_server *s = l->data;
    if (status < 0) {
        SLUICE_LOG(SLUICE_LOG_WARN, "event=accept_failed error=%s", uv_strerror(status));
        return;
    }
    accept_one(s);
}

int sluice__http_listen(uv_loop_t *loop, const struct sockaddr *addr, const sluice__http_options *o,
                        sluice__http_handler handler, void *arg, sluice__http_server **out) {
    *out = NULL;
    sluice__http_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return UV_ENOMEM;
    }
    s->loop = loop;
    s->o = *o;
    s->handler = handler;
    s->arg = arg;
    uv_tcp_init(loop, &s->listener);
    init_handle(s, (uv_handle_t *)&s->listener, s);
    s->listener_open = 1;
    int rc = uv_tcp_bind(&s->listener, addr, 0);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&s->listener, o->backlog, on_connection);
    }
    if (rc != 0) {
        sluice__http_close(s, NULL, NULL);
        return rc;
    }
    *out = s;
    return 0;
}

int sluice__http_address(const sluice__http_server *s, char *host, size_t len, int *port) {
    struct sockaddr_storage got;
    int sl = sizeof(got);
    snprintf(host, len, "?");
    *port = 0;
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&got, &sl) != 0) {
        return -1;
    }
    if (got.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&got, host, len);
        *port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
    } else {
        uv_ip4_name((struct sockaddr_in *)&got, host, len);
        *port = ntohs(((struct sockaddr_in *)&got)->sin_port);
    }
    return got.ss_family;
}
