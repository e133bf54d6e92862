/* SPDX-License-Identifier: MIT */
/*
 * libuv_server.c - embedding the async producer in a libuv server (the example of docs/gateway.md).
 *
 * A line-based TCP server: every line a client sends is admitted into a sluice queue, and the
 * server answers one line per request, tagged with the request's line number:
 *
 *     3 OK 1712345678901-0 depth=17 capacity=1000
 *     4 FULL retry-after=2
 *     5 ERR redis unavailable
 *
 * Build: part of the sluice build (producer/CMakeLists.txt), or
 *     cc libuv_server.c $(pkg-config --cflags --libs sluice)
 * Run:   ./libuv_server 7000 jobs redis://127.0.0.1:6379
 *        printf 'hello\nworld\n' | nc -q1 127.0.0.1 7000
 *
 * The pattern to copy: the request's context (here the connection and the line number) is the
 * callback's `arg`; the connection stays allocated while callbacks that point at it are owed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/aproducer.h"

#define LINE_MAX_BYTES 4096

static sluice_aproducer *producer;
static uv_tcp_t listener;
static uv_signal_t sigint;

typedef struct client {
    uv_tcp_t tcp;
    char line[LINE_MAX_BYTES];
    size_t len;
    unsigned long seq; /* line number of the next request */
    unsigned owed;     /* admissions whose callback has not run yet */
    int closed;        /* the socket is closed (or closing) */
} client;

typedef struct request {
    client *c;
    unsigned long seq;
} request;

static void maybe_free(client *c) {
    if (c->closed == 2 && c->owed == 0) {
        free(c);
    }
}

static void on_client_closed(uv_handle_t *h) {
    client *c = h->data;
    c->closed = 2;
    maybe_free(c);
}

static void close_client(client *c) {
    if (!c->closed) {
        c->closed = 1;
        uv_close((uv_handle_t *)&c->tcp, on_client_closed);
    }
}

static void on_written(uv_write_t *w, int status) {
    free(w); /* the text follows the request in the same allocation */
}

static void reply(client *c, const char *text) {
    size_t len = strlen(text);
    uv_write_t *w = malloc(sizeof(*w) + len);
    if (w == NULL) {
        close_client(c);
        return;
    }
    memcpy(w + 1, text, len);
    uv_buf_t buf = uv_buf_init((char *)(w + 1), (unsigned)len);
    if (uv_write(w, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0) {
        free(w);
        close_client(c);
    }
}

/* Runs exactly once per accepted admission, on the loop thread. */
static void on_admitted(sluice_aproducer *ap, const sluice_admit_result *res, void *arg) {
    request *r = arg;
    client *c = r->c;
    char text[160];
    c->owed--;
    if (!c->closed) {
        switch (res->outcome) {
        case SLUICE_ADMITTED:
        case SLUICE_DUPLICATE:
            snprintf(text, sizeof(text), "%lu OK %s depth=%lld capacity=%lld\n", r->seq, res->id,
                     res->depth, res->capacity);
            break;
        case SLUICE_FULL:
            snprintf(text, sizeof(text), "%lu FULL retry-after=%u\n", r->seq, res->retry_after_s);
            break;
        default: /* FAILED (EUNKNOWN: may or may not have been admitted) */
            snprintf(text, sizeof(text), "%lu ERR %s\n", r->seq, sluice_strerror(res->status));
            break;
        }
        reply(c, text);
    }
    free(r);
    maybe_free(c);
}

static void admit_line(client *c) {
    request *r = malloc(sizeof(*r));
    char text[160];
    if (r == NULL) {
        close_client(c);
        return;
    }
    r->c = c;
    r->seq = ++c->seq;
    sluice_message m = {c->line, c->len, NULL, 0, NULL, NULL, NULL}; /* copied by the producer */
    int st = sluice_aproducer_admit(producer, &m, on_admitted, r);
    if (st != 0) { /* refused at once: no callback will come */
        snprintf(text, sizeof(text), "%lu ERR %s\n", r->seq, sluice_strerror(st));
        reply(c, text);
        free(r);
        return;
    }
    c->owed++;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    static char chunk[65536]; /* one loop thread: reused by every read */
    *buf = uv_buf_init(chunk, sizeof(chunk));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    client *c = s->data;
    if (nread < 0) {
        close_client(c);
        return;
    }
    for (ssize_t i = 0; i < nread && !c->closed; i++) {
        if (buf->base[i] == '\n') {
            admit_line(c);
            c->len = 0;
        } else if (c->len < sizeof(c->line)) {
            c->line[c->len++] = buf->base[i];
        } else {
            reply(c, "0 ERR line too long\n");
            close_client(c);
        }
    }
}

static void on_connection(uv_stream_t *l, int status) {
    client *c = calloc(1, sizeof(*c));
    if (status < 0 || c == NULL) {
        free(c);
        return;
    }
    uv_tcp_init(l->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        close_client(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void close_walk(uv_handle_t *h, void *arg) {
    if (h->type == UV_TCP && h != (uv_handle_t *)&listener && !uv_is_closing(h)) {
        close_client(h->data);
    }
}

/* Ctrl-C: stop accepting, cancel what is owed (callbacks get ECANCELED), let the loop end. */
static void on_sigint(uv_signal_t *s, int signum) {
    uv_close((uv_handle_t *)&listener, NULL);
    uv_close((uv_handle_t *)s, NULL);
    uv_walk(s->loop, close_walk, NULL);
    sluice_aproducer_close(producer, NULL, NULL);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PORT QUEUE [REDIS_URL]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    uv_loop_t *loop = uv_default_loop();
    sluice_producer_options o;
    sluice_producer_options_init(&o);
    o.queue = argv[2];
    o.redis_url = argc > 3 ? argv[3] : NULL; /* NULL: $SLUICE_REDIS_URL or the default */
    o.capacity = 1000;
    o.command_timeout_ms = 1000;
    char err[256];
    if (sluice_aproducer_new(loop, &o, NULL, &producer, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], err);
        return 2;
    }
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", atoi(argv[1]), &addr);
    uv_tcp_init(loop, &listener);
    int rc = uv_tcp_bind(&listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&listener, 128, on_connection);
    }
    if (rc != 0) {
        fprintf(stderr, "%s: cannot listen on port %s: %s\n", argv[0], argv[1], uv_strerror(rc));
        return 2;
    }
    uv_signal_init(loop, &sigint);
    uv_signal_start(&sigint, on_sigint, SIGINT);
    fprintf(stderr, "admitting lines from 127.0.0.1:%s into queue %s\n", argv[1], argv[2]);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    return 0;
}
