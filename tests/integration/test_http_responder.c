/* SPDX-License-Identifier: MIT */
/*
 * test_http_responder.c - the HTTP responder of sluice's binaries (sluice/http_responder.h) on
 * its own, on loopback (no Redis): pipelined requests answered in order when one of them is
 * answered later under a hold, the client's half-close, Date and Content-Length, HEAD, the
 * body, header line and header timeout limits (413, 431, 408), a handler that forgets to answer
 * (500), one request per connection (close_each), a streamed answer (Server-Sent Events: no
 * Content-Length, pieces until the end, and a stream whose client went away reported by the
 * next write), and the close callback.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "harness.h"
#include "sluice/http_responder.h"

typedef struct later {
    uv_timer_t timer;
    sluice__http_req *req;
} later;

static uv_loop_t loop;
static uv_async_t stop_async;
static sluice__http_server *servers[2];
static int closed_count;

static void later_closed(uv_handle_t *h) {
    free(h->data);
}

static void on_later(uv_timer_t *t) {
    later *l = t->data;
    if (!sluice__http_release(l->req)) {
        sluice__http_respond(l->req, 200, "text/plain", NULL, "later", 5, 0);
    }
    uv_close((uv_handle_t *)t, later_closed);
}

/* /stream: "one" now, "two" 30 ms later, then the end. /stream-gone: a piece every 10 ms until
 * a write reports the client gone (at most 500). */
typedef struct streamer {
    uv_timer_t timer;
    sluice__http_req *req;
    int forever, ticks;
} streamer;

static int streams_gone;

static void on_stream_tick(uv_timer_t *t) {
    streamer *st = t->data;
    int gone = sluice__http_stream_write(st->req, "two\n", 4) != 0;
    if (!st->forever || gone || ++st->ticks == 500) {
        streams_gone += gone;
        sluice__http_stream_end(st->req);
        uv_close((uv_handle_t *)t, later_closed);
    }
}

static void stream(sluice__http_req *r, int forever) {
    streamer *st = calloc(1, sizeof(*st));
    CHECK(st != NULL);
    st->req = r;
    st->forever = forever;
    st->timer.data = st;
    uv_timer_init(&loop, &st->timer);
    sluice__http_stream_begin(r, "text/event-stream", "X-Stream: 1\r\n");
    CHECK_EQ(sluice__http_stream_write(r, "one\n", 4), 0);
    uv_timer_start(&st->timer, on_stream_tick, forever ? 10 : 30, forever ? 10 : 0);
}

static void handler(sluice__http_req *r, void *arg) {
    size_t plen, blen;
    const char *path = sluice__http_path(r, &plen);
    const char *body = sluice__http_body(r, &blen);
    char out[256];
    if (path != NULL && plen == 6 && memcmp(path, "/later", 6) == 0) {
        later *l = calloc(1, sizeof(*l));
        CHECK(l != NULL);
        l->req = r;
        l->timer.data = l;
        uv_timer_init(&loop, &l->timer);
        uv_timer_start(&l->timer, on_later, 30, 0);
        sluice__http_hold(r);
        return;
    }
    if (path != NULL && plen >= 7 && memcmp(path, "/stream", 7) == 0) {
        stream(r, plen > 7);
        return;
    }
    if (path != NULL && plen == 5 && memcmp(path, "/none", 5) == 0) {
        return; /* neither answered nor held: the responder answers 500 */
    }
    int n = snprintf(out, sizeof(out), "%s %.*s %.*s", http_method_str(sluice__http_method(r)),
                     (int)plen, path ? path : "", (int)blen, body ? body : "");
    sluice__http_respond(r, 200, "text/plain", NULL, out, (size_t)n, 0);
}

static void on_closed(void *arg) {
    closed_count++;
}

static void on_stop(uv_async_t *a) {
    sluice__http_close(servers[0], on_closed, NULL);
    sluice__http_close(servers[1], on_closed, NULL);
    uv_close((uv_handle_t *)a, NULL);
}

static void *loop_thread(void *arg) {
    uv_run(&loop, UV_RUN_DEFAULT);
    return NULL;
}

static int start(int close_each) {
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    sluice__http_options o;
    sluice__http_options_init(&o);
    o.max_body = 16;
    o.max_header_line = 64;
    o.header_timeout_ms = 300;
    o.close_each = close_each;
    o.server_name = "test";
    sluice__http_server **s = &servers[close_each];
    CHECK_EQ(sluice__http_listen(&loop, (const struct sockaddr *)&a, &o, handler, NULL, s), 0);
    char host[64];
    int port;
    CHECK_EQ(sluice__http_address(*s, host, sizeof(host), &port), AF_INET);
    CHECK_STREQ(host, "127.0.0.1");
    return port;
}

/* Sends `req` on a new connection (then half-closes when asked) and returns all that comes back
 * until the server closes (at most 5 s). */
static char *exchange(int port, const char *req, int half_close) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    CHECK(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    CHECK_EQ(write(fd, req, strlen(req)), (long long)strlen(req));
    if (half_close) {
        shutdown(fd, SHUT_WR);
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    CHECK(buf != NULL);
    ssize_t n;
    while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) > 0) {
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

static int count(const char *s, const char *what) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)) != NULL; p += strlen(what)) {
        n++;
    }
    return n;
}

static void check_has(const char *got, const char *want) {
    if (strstr(got, want) == NULL) {
        fprintf(stderr, "no \"%s\" in:\n%s\n", want, got);
        exit(1);
    }
}

int main(void) {
    CHECK_EQ(uv_loop_init(&loop), 0);
    CHECK_EQ(uv_async_init(&loop, &stop_async, on_stop), 0);
    int port = start(0), port1 = start(1);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, loop_thread, NULL), 0);

    /* pipelined, the first answered later: answers in order; then the half-close closes */
    char *r = exchange(port,
                       "GET /later HTTP/1.1\r\nHost: x\r\n\r\n"
                       "POST /echo?q=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
                       1);
    CHECK_EQ(count(r, "HTTP/1.1 200 OK\r\n"), 2);
    CHECK_EQ(count(r, "\r\nDate: "), 2);
    CHECK_EQ(count(r, "\r\nServer: test\r\n"), 2);
    check_has(r, "Content-Length: 5\r\n\r\nlater");
    char *later_at = strstr(r, "later"), *echo_at = strstr(r, "POST /echo abc");
    CHECK(later_at != NULL && echo_at != NULL && later_at < echo_at);
    check_has(r, "Connection: close\r\n");
    free(r);

    /* HEAD: headers with the length, no body */
    r = exchange(port, "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n", 1);
    check_has(r, "Content-Length: 11\r\n"); /* "HEAD /echo " */
    CHECK(strstr(r, "HEAD /echo") == NULL);
    free(r);

    /* the limits: body, header line, header timeout; a handler that does not answer */
    r = exchange(port, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n", 1);
    check_has(r, "HTTP/1.1 413 ");
    free(r);
    r = exchange(port,
                 "GET /echo HTTP/1.1\r\nX-Long: "
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
                 1);
    check_has(r, "HTTP/1.1 431 ");
    free(r);
    r = exchange(port, "GET /echo HTTP/1.1\r\nHost: x\r\n", 0);
    check_has(r, "HTTP/1.1 408 ");
    free(r);
    r = exchange(port, "GET /none HTTP/1.1\r\nHost: x\r\n\r\n", 1);
    check_has(r, "HTTP/1.1 500 ");
    free(r);

    /* a streamed answer: no length, the pieces in order, then the server closes */
    r = exchange(port, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", 0);
    check_has(r, "HTTP/1.1 200 OK\r\n");
    check_has(r, "Content-Type: text/event-stream\r\n");
    check_has(r, "Connection: close\r\nX-Stream: 1\r\n\r\none\ntwo\n");
    CHECK(strstr(r, "Content-Length") == NULL);
    free(r);
    /* a client that goes away: a later write says so, and the streamer ends it */
    {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        static const char req[] = "GET /stream-gone HTTP/1.1\r\nHost: x\r\n\r\n";
        char buf[256];
        CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        CHECK_EQ(write(fd, req, sizeof(req) - 1), (long long)sizeof(req) - 1);
        CHECK(read(fd, buf, sizeof(buf)) > 0);
        close(fd);
    }

    /* close_each: one answer, Connection: close, then the server closes (no half-close) */
    r = exchange(port1, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\n\r\n", 0);
    CHECK_EQ(count(r, "HTTP/1.1 200 OK\r\n"), 1);
    check_has(r, "Connection: close\r\n");
    free(r);

    uv_async_send(&stop_async);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(closed_count, 2);
    CHECK_EQ(streams_gone, 1);
    CHECK_EQ(uv_loop_close(&loop), 0);
    printf("test_http_responder: ok\n");
    return 0;
}
