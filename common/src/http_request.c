/* SPDX-License-Identifier: MIT */
/*
 * http_request.c - the request side of the HTTP/1.1 server (see http_responder.h): http-parser's
 * callbacks, which copy the request target and headers into the connection's arena and the body
 * into its buffer under the server's limits (a limit hit is remembered as its status, 408, 413,
 * 414, 431 or 503, and answered by the connection), and the handler's read-only view of the
 * request being served: method, path, query parameters, headers, body, peer.
 *
 * No socket I/O here but the interim "100 Continue" and the timers, both through http_conn.h;
 * the connection's life (reading, writing, closing) is http_responder.c's.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_conn.h"

/* ---------------------------------------------------------------------------------------- */
/* Parsing                                                                                  */

static int limit(sluice__http_req *c, int status) {
    c->error_status = status;
    return -1;
}

static int on_message_begin(http_parser *p) {
    sluice__http_req *c = p->data;
    c->arena_len = c->url_len = 0;
    c->nhdrs = 0;
    c->in_value = 0;
    c->body_len = 0;
    c->error_status = 0;
    c->method = -1; /* not known before the headers are complete */
    c->phase = HEADERS;
    sluice__http_arm(c, c->srv->o.header_timeout_ms);
    return 0;
}

static int arena_add(sluice__http_req *c, const char *at, size_t len) {
    if (c->arena_len + len > c->srv->o.max_headers_total) {
        return limit(c, 431);
    }
    memcpy(c->arena + c->arena_len, at, len);
    c->arena_len += len;
    return 0;
}

static int on_url(http_parser *p, const char *at, size_t len) {
    sluice__http_req *c = p->data;
    if (c->url_len + len > c->srv->o.max_url) {
        return limit(c, 414);
    }
    c->url_len += len;
    return arena_add(c, at, len);
}

static int on_header_field(http_parser *p, const char *at, size_t len) {
    sluice__http_req *c = p->data;
    const sluice__http_options *o = &c->srv->o;
    if (c->nhdrs == 0 || c->in_value) {
        if (c->nhdrs == o->max_headers) {
            return limit(c, 431);
        }
        c->hdrs[c->nhdrs++] = (hdr){(uint32_t)c->arena_len, 0, 0, 0};
        c->in_value = 0;
    }
    hdr *h = &c->hdrs[c->nhdrs - 1];
    if (h->name_len + len > o->max_header_line) {
        return limit(c, 431);
    }
    h->name_len += (uint32_t)len;
    return arena_add(c, at, len);
}

static int on_header_value(http_parser *p, const char *at, size_t len) {
    sluice__http_req *c = p->data;
    hdr *h = &c->hdrs[c->nhdrs - 1];
    if (!c->in_value) {
        h->value = (uint32_t)c->arena_len;
        c->in_value = 1;
    }
    if (h->name_len + h->value_len + len > c->srv->o.max_header_line) {
        return limit(c, 431);
    }
    h->value_len += (uint32_t)len;
    return arena_add(c, at, len);
}

static int on_headers_complete(http_parser *p) {
    sluice__http_req *c = p->data;
    size_t max = c->srv->o.max_body, len;
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
    const char *expect = sluice__http_header(c, "expect", &len);
    if (expect != NULL && len == 12 && strncasecmp(expect, "100-continue", 12) == 0 &&
        p->http_minor >= 1) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        sluice__http_send(c, cont, sizeof(cont) - 1);
    }
    c->phase = BODY;
    sluice__http_arm(c, c->srv->o.body_timeout_ms);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len) {
    sluice__http_req *c = p->data;
    size_t max = c->srv->o.max_body;
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
    sluice__http_req *c = p->data;
    c->keep_alive = http_should_keep_alive(p) && !p->upgrade; /* no protocol switches here */
    c->phase = BUSY;
    uv_timer_stop(&c->timer);
    http_parser_pause(p, 1); /* one request at a time: go on once it is answered */
    return 0;
}

const http_parser_settings sluice__http_parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

const char *sluice__http_limit_text(int status) {
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

/* ---------------------------------------------------------------------------------------- */
/* The request                                                                              */

void *sluice__http_arg(const sluice__http_req *c) {
    return c->srv->arg;
}

int sluice__http_method(const sluice__http_req *c) {
    return c->method;
}

int sluice__http_path_is(const char *p, size_t len, const char *want) {
    return p != NULL && len == strlen(want) && memcmp(p, want, len) == 0;
}

/* Field `f` of the request target, or NULL (no such field, or a target that does not parse). */
static const char *target_field(const sluice__http_req *c, enum http_parser_url_fields f,
                                size_t *len) {
    struct http_parser_url u;
    http_parser_url_init(&u);
    *len = 0;
    if (c->url_len == 0 || http_parser_parse_url(c->arena, c->url_len, 0, &u) != 0 ||
        !(u.field_set & (1 << UF_PATH)) || !(u.field_set & (1 << f))) {
        return NULL;
    }
    *len = u.field_data[f].len;
    return c->arena + u.field_data[f].off;
}

const char *sluice__http_path(const sluice__http_req *c, size_t *len) {
    return target_field(c, UF_PATH, len);
}

const char *sluice__http_query(const sluice__http_req *c, size_t *len) {
    return target_field(c, UF_QUERY, len);
}

static int hex_digit(char ch) {
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

long sluice__http_query_param(const char *q, size_t qlen, const char *name, char *out, size_t cap) {
    size_t nl = strlen(name);
    for (size_t at = 0; q != NULL && at < qlen;) {
        const char *amp = memchr(q + at, '&', qlen - at);
        size_t end = amp ? (size_t)(amp - q) : qlen;
        if (end - at > nl && memcmp(q + at, name, nl) == 0 && q[at + nl] == '=') {
            size_t n = 0;
            for (size_t i = at + nl + 1; i < end; i++) {
                int ch = (unsigned char)q[i];
                if (ch == '%') {
                    int hi = i + 2 < end ? hex_digit(q[i + 1]) : -1;
                    int lo = hi >= 0 ? hex_digit(q[i + 2]) : -1;
                    if (lo < 0) {
                        return -2;
                    }
                    ch = hi * 16 + lo;
                    i += 2;
                } else if (ch == '+') {
                    ch = ' ';
                }
                if (n + 1 >= cap) {
                    return -2;
                }
                out[n++] = (char)ch;
            }
            out[n] = '\0';
            return (long)n;
        }
        at = end + 1;
    }
    return -1;
}

/* The nth line of header `name` from the end of the request; nth < 0: the first line. */
static const char *find_header(const sluice__http_req *c, const char *name, int nth, size_t *len) {
    size_t nl = strlen(name);
    for (int k = 0; k < c->nhdrs; k++) {
        const hdr *h = &c->hdrs[nth < 0 ? k : c->nhdrs - 1 - k];
        if (h->name_len == nl && strncasecmp(c->arena + h->name, name, nl) == 0 &&
            (nth < 0 || nth-- == 0)) {
            *len = h->value_len;
            return h->value_len > 0 ? c->arena + h->value : "";
        }
    }
    *len = 0;
    return NULL;
}

const char *sluice__http_header(const sluice__http_req *c, const char *name, size_t *len) {
    return find_header(c, name, -1, len);
}

const char *sluice__http_header_from_end(const sluice__http_req *c, const char *name, int nth,
                                         size_t *len) {
    return find_header(c, name, nth < 0 ? 0 : nth, len);
}

const char *sluice__http_body(const sluice__http_req *c, size_t *len) {
    *len = c->body_len;
    return c->body;
}

void sluice__http_peer(const sluice__http_req *c, char *out, size_t len) {
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    out[0] = '\0';
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET6) {
            uv_ip6_name((const struct sockaddr_in6 *)&ss, out, len);
        } else {
            uv_ip4_name((const struct sockaddr_in *)&ss, out, len);
        }
    }
}

uint64_t sluice__http_started_ns(const sluice__http_req *c) {
    return c->started_ns;
}
