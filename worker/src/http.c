/* SPDX-License-Identifier: MIT */
/* http.c - the small HTTP/1.0-style responder of sluice-worker (see http.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/buf.h"
#include "sluice/cli.h"
#include "sluice/log.h"

#include "http.h"

#define RESP_HEAD_MAX 512 /* the status line and headers of a response */

struct sw_http {
    uv_loop_t *loop;
    uv_tcp_t server;
    sw_http_handler handler;
    void *arg;
    sw_http_req *clients;
    int nclients;
    int server_open; /* the listener is not closed yet */
    int closing;
    void (*closed)(void *arg);
    void *closed_arg;
};

struct sw_http_req {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    sw_http *s;
    sw_http_req *prev, *next;
    int open; /* handles not yet closed */
    int answered;
    int head; /* a HEAD request: no body */
    size_t len;
    char *resp;
    char req[SW_HTTP_REQ_MAX];
};

static void maybe_done(sw_http *s) {
    if (s->closing && !s->server_open && s->nclients == 0) {
        void (*closed)(void *) = s->closed;
        void *arg = s->closed_arg;
        free(s);
        if (closed != NULL) {
            closed(arg);
        }
    }
}

static void client_closed(uv_handle_t *h) {
    sw_http_req *c = h->data;
    if (--c->open > 0) {
        return;
    }
    sw_http *s = c->s;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->clients = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    s->nclients--;
    free(c->resp);
    free(c);
    maybe_done(s);
}

static void client_close(sw_http_req *c) {
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, client_closed);
        uv_close((uv_handle_t *)&c->timer, client_closed);
    }
}

static void written(uv_write_t *req, int status) {
    (void)status;
    client_close(req->data);
}

void sw_http_respond(sw_http_req *c, const char *status, const char *type, const char *body,
                     size_t len) {
    sluice_text r = {.max = SW_HTTP_BODY_MAX + RESP_HEAD_MAX};
    c->answered = 1;
    uv_read_stop((uv_stream_t *)&c->tcp);
    sluice_text_printf(&r,
                       "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                       "Connection: close\r\n\r\n",
                       status, type, len);
    if (!c->head && len > 0) {
        sluice_text_printf(&r, "%.*s", (int)len, body);
    }
    if (r.failed) {
        sluice_text_free(&r);
        client_close(c);
        return;
    }
    c->resp = r.p;
    uv_buf_t b = uv_buf_init(r.p, (unsigned)r.len);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, written) != 0) {
        client_close(c);
    }
}

static void respond_text(sw_http_req *c, const char *status, const char *msg) {
    sw_http_respond(c, status, "text/plain; charset=utf-8", msg, strlen(msg));
}

/* Answers once the request head is complete: "METHOD PATH VERSION\r\n...\r\n\r\n". */
static void handle_request(sw_http_req *c) {
    char method[16] = "", path[256] = "";
    if (sscanf(c->req, "%15s %255s", method, path) != 2) {
        respond_text(c, "400 Bad Request", "bad request\n");
        return;
    }
    c->head = strcmp(method, "HEAD") == 0;
    if (strcmp(method, "GET") != 0 && !c->head) {
        respond_text(c, "405 Method Not Allowed", "method not allowed\n");
        return;
    }
    path[strcspn(path, "?")] = '\0';
    c->s->handler(c, path, c->s->arg);
    if (!c->answered) { /* a handler that forgot to answer: the client is not left hanging */
        respond_text(c, "500 Internal Server Error", "no answer\n");
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
    (void)suggested;
    sw_http_req *c = h->data;
    *b = uv_buf_init(c->req + c->len, (unsigned)(SW_HTTP_REQ_MAX - 1 - c->len));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b) {
    (void)b;
    sw_http_req *c = st->data;
    if (n < 0) {
        client_close(c); /* EOF before a complete request, or an error */
        return;
    }
    c->len += (size_t)n;
    c->req[c->len] = '\0';
    if (strstr(c->req, "\r\n\r\n") != NULL || strstr(c->req, "\n\n") != NULL) {
        handle_request(c);
    } else if (c->len >= SW_HTTP_REQ_MAX - 1) {
        respond_text(c, "431 Request Header Fields Too Large", "request too large\n");
    }
}

static void on_read_timeout(uv_timer_t *t) {
    sw_http_req *c = t->data;
    if (!c->answered) {
        client_close(c);
    }
}

static void on_connection(uv_stream_t *server, int status) {
    sw_http *s = server->data;
    sw_http_req *c = status == 0 && !s->closing ? calloc(1, sizeof(*c)) : NULL;
    if (c == NULL) {
        return;
    }
    c->s = s;
    c->tcp.data = c->timer.data = c;
    uv_tcp_init(s->loop, &c->tcp);
    uv_timer_init(s->loop, &c->timer);
    uv_unref((uv_handle_t *)&c->tcp);
    uv_unref((uv_handle_t *)&c->timer);
    c->open = 2;
    c->next = s->clients;
    if (s->clients != NULL) {
        s->clients->prev = c;
    }
    s->clients = c;
    s->nclients++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || s->nclients > SW_HTTP_MAX_CLIENTS) {
        client_close(c); /* over the limit: the client sees the connection closed */
        return;
    }
    uv_timer_start(&c->timer, on_read_timeout, SW_HTTP_READ_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void server_closed(uv_handle_t *h) {
    sw_http *s = h->data;
    s->server_open = 0;
    maybe_done(s);
}

static void log_address(sw_http *s) {
    struct sockaddr_storage got;
    int len = sizeof(got);
    char ip[64] = "?";
    int port = 0;
    if (uv_tcp_getsockname(&s->server, (struct sockaddr *)&got, &len) == 0) {
        if (got.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&got, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
        } else {
            uv_ip4_name((struct sockaddr_in *)&got, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in *)&got)->sin_port);
        }
    }
    SLUICE_LOG(SLUICE_LOG_INFO, "event=metrics_listening addr=%s port=%d path=/metrics", ip, port);
}

int sw_http_start(uv_loop_t *loop, const char *opt, const char *addr, sw_http_handler handler,
                  void *arg, sw_http **out, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    *out = NULL;
    if (sluice_listen_addr_parse(opt, addr, &ss, err, errlen) != 0) {
        return -1;
    }
    sw_http *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "%s: out of memory", opt);
        return -1;
    }
    s->loop = loop;
    s->handler = handler;
    s->arg = arg;
    uv_tcp_init(loop, &s->server);
    s->server.data = s;
    s->server_open = 1;
    uv_unref((uv_handle_t *)&s->server);
    int rc = uv_tcp_bind(&s->server, (const struct sockaddr *)&ss, 0);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&s->server, 128, on_connection);
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: cannot listen on %s: %s", opt, addr, uv_strerror(rc));
        sw_http_close(s, NULL, NULL);
        return -1;
    }
    log_address(s);
    *out = s;
    return 0;
}

void sw_http_close(sw_http *s, void (*closed)(void *arg), void *arg) {
    if (s == NULL || s->closing) {
        return;
    }
    s->closing = 1;
    s->closed = closed;
    s->closed_arg = arg;
    uv_close((uv_handle_t *)&s->server, server_closed);
    for (sw_http_req *c = s->clients; c != NULL; c = c->next) {
        client_close(c);
    }
}
