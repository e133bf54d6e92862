/* SPDX-License-Identifier: MIT */
/*
 * gateway_http.c - one client connection of sluice-gateway: reading, HTTP/1.1 parsing under
 * explicit limits, keep-alive and pipelining, timeouts, and writing responses (docs/faults.md B15).
 *
 * Requests are served one at a time per connection, in order: when http-parser completes a
 * message it is paused, the request is routed (perhaps waiting for Redis), and only once its
 * response is written does parsing go on with the next pipelined request. Input waits in a fixed
 * per-connection buffer; when that is full, reading stops (TCP pushes back on the client).
 *
 * Every limit hit closes only the offending connection, after an answer: malformed -> 400, body
 * too large -> 413, too many or too large headers -> 431, target too long -> 414, too slow -> 408.
 * Before closing, the write side is shut down and input is read and discarded for a moment
 * ("lingering close"), so the client sees the answer rather than a reset.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sluice/log.h"

#include "gateway.h"

#define LINGER_MS    2000  /* after an answer that closes: wait this long for the client's EOF */
#define GW_KEEP_BODY 65536 /* body buffer kept between requests, at most */

static char sink[GW_READ_BUF]; /* input of lingering connections goes here (one thread) */

typedef struct gw_write {
    uv_write_t req;
    gw_conn *c;
    char data[];
} gw_write;

static void process(gw_conn *c);
static void update_reading(gw_conn *c);
static void fail(gw_conn *c, int status, const char *msg);

/* ---------------------------------------------------------------------------------------- */
/* Closing                                                                                  */

static void maybe_free(gw_conn *c) {
    if (c->handles == 0 && c->inflight == 0) {
        free(c->arena);
        free(c->hdrs);
        free(c->body);
        free(c);
    }
}

static void on_handle_closed(uv_handle_t *h) {
    gw_conn *c = h->data;
    c->handles--;
    maybe_free(c);
}

void gw_conn_close(gw_conn *c) {
    if (c->closing) {
        return;
    }
    gw_server *s = c->srv;
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

int gw_conn_release(gw_conn *c) {
    c->inflight--;
    if (!c->closing) {
        return 0;
    }
    maybe_free(c);
    return 1;
}

static void on_timer(uv_timer_t *t);

static void arm(gw_conn *c, int ms) {
    uv_timer_start(&c->timer, on_timer, (uint64_t)ms, 0);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    gw_conn *c = req->data;
    if (status < 0) {
        gw_conn_close(c);
    }
}

/* After an answer that ends the connection: shut down writing once the answer is out, drain
 * the input until the client closes (or LINGER_MS), then close. */
static void linger(gw_conn *c) {
    if (c->lingering || c->closing) {
        return;
    }
    c->lingering = 1;
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        gw_conn_close(c);
        return;
    }
    arm(c, LINGER_MS);
    update_reading(c);
}

static void on_timer(uv_timer_t *t) {
    gw_conn *c = t->data;
    if (c->lingering || c->phase == GW_IDLE) {
        gw_conn_close(c); /* idle keep-alive, or an unread answer */
    } else if (c->phase == GW_HEADERS || c->phase == GW_BODY) {
        fail(c, 408,
             c->phase == GW_HEADERS ? "request headers not received in time"
                                    : "request body not received in time");
    }
}

void gw_conn_stop_idle(gw_conn *c) {
    if (c->phase == GW_IDLE && !c->lingering) {
        gw_conn_close(c);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Writing                                                                                  */

static void on_written(uv_write_t *req, int status) {
    gw_write *w = (gw_write *)req;
    gw_conn *c = w->c;
    free(w);
    if (status < 0) {
        gw_conn_close(c);
        return;
    }
    if (c->wblocked && !c->closing &&
        uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) < GW_WRITE_LIMIT / 2) {
        c->wblocked = 0;
        process(c);
    }
}

/* Writes at once what the socket takes; queues the rest (copied). */
static void send_bytes(gw_conn *c, const char *data, size_t len) {
    uv_stream_t *st = (uv_stream_t *)&c->tcp;
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    int n = 0;
    if (uv_stream_get_write_queue_size(st) == 0) {
        n = uv_try_write(st, &b, 1);
        if (n == UV_EAGAIN) {
            n = 0;
        } else if (n < 0) {
            gw_conn_close(c);
            return;
        }
    }
    if ((size_t)n == len) {
        return;
    }
    gw_write *w = malloc(sizeof(*w) + len - (size_t)n);
    if (w == NULL) {
        gw_conn_close(c);
        return;
    }
    memcpy(w->data, data + n, len - (size_t)n);
    w->c = c;
    b = uv_buf_init(w->data, (unsigned)(len - (size_t)n));
    if (uv_write(&w->req, st, &b, 1, on_written) != 0) {
        free(w);
        gw_conn_close(c);
    }
}

static void refresh_date(gw_server *s) {
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

void gw_respond(gw_conn *c, int status, const char *ctype, const char *extra, const char *body,
                size_t len, int close_after) {
    gw_server *s = c->srv;
    gw_count_response(s, status);
    if (status >= 400 && status < 500) { /* the client's mistake: counted, logged only at debug */
        SLUICE_LOG(SLUICE_LOG_DEBUG, "event=client_error status=%d", status);
    }
    if (c->closing || c->lingering) {
        return;
    }
    /* after the client's half-close, answer every complete request it sent, then close */
    int closing = close_after || !c->keep_alive || (c->eof && c->rlen == 0) || s->stopping;
    char buf[4096];
    refresh_date(s);
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d %s\r\nServer: sluice-gateway\r\n%sContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n%s%s\r\n",
                     status, gw_reason(status), s->date, ctype, len,
                     closing ? "Connection: close\r\n" : "", extra ? extra : "");
    if (n < 0 || (size_t)n >= sizeof(buf)) {
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
        send_bytes(c, buf, (size_t)n + len);
    } else {
        send_bytes(c, buf, (size_t)n);
        if (!c->closing) {
            send_bytes(c, body, len);
        }
    }
    c->phase = GW_IDLE;
    if (c->body_cap > GW_KEEP_BODY) { /* idle connections do not hold large buffers */
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
    arm(c, s->lim.idle_timeout_ms);
    if (!c->in_process) {
        process(c);
    }
}

/* Answers an error with a JSON body and ends the connection. */
static void fail(gw_conn *c, int status, const char *msg) {
    char body[256];
    int n = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
    c->phase = GW_BUSY;
    uv_timer_stop(&c->timer);
    gw_respond(c, status, "application/json", NULL, body, (size_t)n, 1);
}

/* ---------------------------------------------------------------------------------------- */
/* Parsing                                                                                  */

static int limit(gw_conn *c, int status) {
    c->error_status = status;
    return -1;
}

static int on_message_begin(http_parser *p) {
    gw_conn *c = p->data;
    c->arena_len = c->url_len = 0;
    c->nhdrs = 0;
    c->in_value = 0;
    c->body_len = 0;
    c->error_status = 0;
    c->method = -1; /* not known before the headers are complete */
    c->phase = GW_HEADERS;
    arm(c, c->srv->lim.header_timeout_ms);
    return 0;
}

static int arena_add(gw_conn *c, const char *at, size_t len) {
    if (c->arena_len + len > c->srv->lim.max_headers_total) {
        return limit(c, 431);
    }
    memcpy(c->arena + c->arena_len, at, len);
    c->arena_len += len;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
    gw_conn *c = p->data;
    if (c->url_len + len > GW_MAX_URL) {
        return limit(c, 414);
    }
    c->url_len += len;
    return arena_add(c, at, len);
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
    gw_conn *c = p->data;
    const gw_limits *lim = &c->srv->lim;
    if (c->nhdrs == 0 || c->in_value) {
        if (c->nhdrs == lim->max_headers) {
            return limit(c, 431);
        }
        c->hdrs[c->nhdrs++] = (gw_hdr){(uint32_t)c->arena_len, 0, 0, 0};
        c->in_value = 0;
    }
    gw_hdr *h = &c->hdrs[c->nhdrs - 1];
    if (h->name_len + len > lim->max_header_line) {
        return limit(c, 431);
    }
    h->name_len += (uint32_t)len;
    return arena_add(c, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
    gw_conn *c = p->data;
    gw_hdr *h = &c->hdrs[c->nhdrs - 1];
    if (!c->in_value) {
        h->value = (uint32_t)c->arena_len;
        c->in_value = 1;
    }
    if (h->name_len + h->value_len + len > c->srv->lim.max_header_line) {
        return limit(c, 431);
    }
    h->value_len += (uint32_t)len;
    return arena_add(c, at, len);
}

static int on_headers_complete(http_parser *p) {
    gw_conn *c = p->data;
    size_t max = c->srv->lim.max_body, len;
    c->method = p->method;
    if (p->content_length != ULLONG_MAX && p->content_length > max) {
        return limit(c, 413);
    }
    if (p->content_length != ULLONG_MAX && p->content_length > c->body_cap) {
        char *b = realloc(c->body, (size_t)p->content_length);
        if (b == NULL) {
            return limit(c, 503);
        }
        c->body = b;
        c->body_cap = (size_t)p->content_length;
    }
    const char *expect = gw_header(c, "expect", &len);
    if (expect != NULL && len == 12 && strncasecmp(expect, "100-continue", 12) == 0 &&
        p->http_minor >= 1) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        send_bytes(c, cont, sizeof(cont) - 1);
    }
    c->phase = GW_BODY;
    arm(c, c->srv->lim.body_timeout_ms);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
    gw_conn *c = p->data;
    size_t max = c->srv->lim.max_body;
    if (c->body_len + len > max) {
        return limit(c, 413);
    }
    if (c->body_len + len > c->body_cap) {
        size_t cap = c->body_cap ? c->body_cap * 2 : 4096;
        cap = cap < c->body_len + len ? c->body_len + len : cap > max ? max : cap;
        char *b = realloc(c->body, cap);
        if (b == NULL) {
            return limit(c, 503);
        }
        c->body = b;
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, at, len);
    c->body_len += len;
    return 0;
}

static int on_message_complete(http_parser *p) {
    gw_conn *c = p->data;
    c->keep_alive = http_should_keep_alive(p) && !p->upgrade; /* no protocol switches here */
    c->phase = GW_BUSY;
    uv_timer_stop(&c->timer);
    http_parser_pause(p, 1); /* one request at a time: go on once it is answered */
    return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static const char *status_text(int status) {
    switch (status) {
    case 413:
        return "request body too large";
    case 414:
        return "request target too long";
    case 431:
        return "too many or too large request headers";
    case 503:
        return "out of memory";
    default:
        return "malformed HTTP request";
    }
}

/* Parses what is buffered, serving complete requests one by one. */
static void process(gw_conn *c) {
    c->in_process = 1;
    while (!c->closing && !c->lingering && c->phase != GW_BUSY && !c->wblocked && c->rlen > 0) {
        size_t n = http_parser_execute(&c->parser, &settings, c->rbuf + c->roff, c->rlen);
        c->roff += n;
        c->rlen -= n;
        enum http_errno e = HTTP_PARSER_ERRNO(&c->parser);
        if (e == HPE_PAUSED) {
            http_parser_pause(&c->parser, 0);
            c->started_ns = uv_hrtime();
            gw_route(c);
            if (!c->closing &&
                uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > GW_WRITE_LIMIT) {
                c->wblocked = 1; /* the client does not read its answers */
            }
        } else if (e != HPE_OK || n == 0) { /* n == 0: the parser is stuck (upgrade) */
            fail(c, c->error_status ? c->error_status : 400, status_text(c->error_status));
        }
    }
    if (c->rlen == 0) {
        c->roff = 0;
    }
    c->in_process = 0;
    if (!c->closing) {
        if (c->eof && c->phase == GW_IDLE && !c->lingering) {
            gw_conn_close(c);
            return;
        }
        update_reading(c);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Reading                                                                                  */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    gw_conn *c = h->data;
    if (c->lingering) {
        *buf = uv_buf_init(sink, sizeof(sink));
        return;
    }
    if (c->roff > 0) {
        memmove(c->rbuf, c->rbuf + c->roff, c->rlen);
        c->roff = 0;
    }
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(GW_READ_BUF - c->rlen));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    gw_conn *c = st->data;
    if (nread == 0 || c->closing) {
        return;
    }
    if (c->lingering) {
        if (nread < 0) {
            gw_conn_close(c);
        }
        return;
    }
    if (nread == UV_ENOBUFS) {
        update_reading(c);
        return;
    }
    if (nread < 0) {
        if (nread == UV_EOF && c->phase == GW_BUSY) {
            c->eof = 1; /* answer what was asked, then close */
            update_reading(c);
        } else {
            gw_conn_close(c);
        }
        return;
    }
    c->rlen += (size_t)nread;
    process(c);
}

/* Reads while there is room for input and a reason to read. */
static void update_reading(gw_conn *c) {
    int want = !c->closing &&
               (c->lingering || (!c->eof && !c->wblocked && c->roff + c->rlen < GW_READ_BUF));
    if (want && !c->reading) {
        c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = 0;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Accepting                                                                                */

/* A connection over the cap: answered 503, then closed the way linger() does it, so that the
 * client reads the answer rather than a reset. At most max_connections of them at a time;
 * beyond that (a flood) they are closed at once. */
typedef struct refused {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shut;
    gw_server *srv;
    int handles;
} refused;

static void on_refused_closed(uv_handle_t *h) {
    refused *r = h->data;
    if (--r->handles == 0) {
        r->srv->nrefusing--;
        free(r);
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
    *buf = uv_buf_init(sink, sizeof(sink));
}

static void on_refused_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
    if (nread < 0) {
        refused_close(st->data);
    }
}

static void refuse(gw_server *s) {
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
    r->tcp.data = r->timer.data = r->shut.data = r;
    if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&r->tcp) != 0) {
        refused_close(r);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)msg, sizeof(msg) - 1);
    s->m.refused++;
    gw_count_response(s, 503);
    SLUICE_LOG(SLUICE_LOG_WARN, "event=connection_refused reason=max_connections limit=%d",
               s->lim.max_connections);
    if (s->nrefusing > (size_t)s->lim.max_connections ||
        uv_try_write((uv_stream_t *)&r->tcp, &b, 1) != (int)b.len ||
        uv_shutdown(&r->shut, (uv_stream_t *)&r->tcp, on_refused_shutdown) != 0 ||
        uv_read_start((uv_stream_t *)&r->tcp, on_refused_alloc, on_refused_read) != 0) {
        refused_close(r);
        return;
    }
    uv_timer_start(&r->timer, on_refused_timer, 1000, 0);
}

static gw_conn *conn_new(gw_server *s) {
    gw_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->arena = malloc(s->lim.max_headers_total + 1);
    c->hdrs = calloc((size_t)s->lim.max_headers, sizeof(*c->hdrs));
    if (c->arena == NULL || c->hdrs == NULL) {
        free(c->arena);
        free(c->hdrs);
        free(c);
        return NULL;
    }
    c->srv = s;
    return c;
}

void gw_accept(gw_server *s) {
    if (s->nconns >= (size_t)s->lim.max_connections || s->stopping) {
        refuse(s);
        return;
    }
    gw_conn *c = conn_new(s);
    if (c == NULL) {
        refuse(s);
        return;
    }
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    s->nconns++;
    if (uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&c->tcp) != 0) {
        gw_conn_close(c);
        return;
    }
    s->m.accepted++;
    uv_tcp_nodelay(&c->tcp, 1);
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->phase = GW_IDLE;
    arm(c, s->lim.header_timeout_ms); /* the first request must start soon */
    update_reading(c);
}

/* ---------------------------------------------------------------------------------------- */
/* Request accessors                                                                        */

const char *gw_header(const gw_conn *c, const char *name, size_t *len) {
    size_t nl = strlen(name);
    for (int i = 0; i < c->nhdrs; i++) {
        const gw_hdr *h = &c->hdrs[i];
        if (h->name_len == nl && strncasecmp(c->arena + h->name, name, nl) == 0) {
            *len = h->value_len;
            return h->value_len > 0 ? c->arena + h->value : "";
        }
    }
    *len = 0;
    return NULL;
}

const char *gw_header_from_end(const gw_conn *c, const char *name, int nth, size_t *len) {
    size_t nl = strlen(name);
    for (int i = c->nhdrs - 1; i >= 0; i--) {
        const gw_hdr *h = &c->hdrs[i];
        if (h->name_len == nl && strncasecmp(c->arena + h->name, name, nl) == 0 && nth-- == 0) {
            *len = h->value_len;
            return h->value_len > 0 ? c->arena + h->value : "";
        }
    }
    *len = 0;
    return NULL;
}

const char *gw_url(const gw_conn *c, size_t *len) {
    *len = c->url_len;
    return c->arena;
}
