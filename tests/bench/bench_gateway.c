/* SPDX-License-Identifier: MIT */
/*
 * bench_gateway.c - `sluice-bench gateway`: an HTTP/1.1 keep-alive load generator for
 * sluice-gateway (no wrk needed).
 *
 * One libuv loop drives --connections persistent connections in a closed loop: each sends a
 * request (POST with a --size byte body by default), waits for the whole response, records the
 * latency and sends the next. After --duration seconds it stops sending, waits for the answers
 * still owed (2 s at most) and prints requests per second, the count of each status code and
 * latency percentiles. A connection the server closes (Connection: close, or a reset) is
 * reopened and counted. Only http:// URLs with an IP literal host.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#include "sluice/cli.h"

#include "bench.h"

#define RBUF        65536
#define MAX_SAMPLES (64u << 20)

static const char usage[] =
    "usage: sluice-bench gateway --url http://IP:PORT/PATH [--connections N] [--duration S]\n"
    "                            [--size BYTES] [--get] [--json]\n"
    "  --url URL          e.g. http://127.0.0.1:8080/v1/queues/Q/messages\n"
    "  --connections N    concurrent keep-alive connections, 1..10000 (default 50)\n"
    "  --duration S       seconds of load, 1..3600 (default 10)\n"
    "  --size BYTES       POST body size (default 64)\n"
    "  --get              send GET instead of POST\n";

typedef struct lconn lconn;

typedef struct bench {
    uv_loop_t loop;
    uv_timer_t stop_timer;
    struct sockaddr_in addr;
    char *request;
    size_t request_len;
    lconn *conns;
    long long nconns;
    int stopping;
    uint64_t t0, t1;
    unsigned long long by_code[600];
    unsigned long long errors, reconnects, responses;
    uint64_t *samples; /* latency in ns, one per response (up to MAX_SAMPLES) */
    size_t nsamples, cap;
} bench;

struct lconn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    bench *b;
    char buf[RBUF];
    size_t len;
    uint64_t sent_ns;
    int waiting; /* a request is out */
    int closing; /* uv_close called (and, once stopping, closed for good) */
};

static void send_request(lconn *c);
static void open_conn(lconn *c);

static void record(bench *b, uint64_t ns) {
    if (b->nsamples == b->cap && b->cap < MAX_SAMPLES) {
        size_t cap = b->cap ? b->cap * 2 : 1 << 16;
        uint64_t *p = realloc(b->samples, cap * sizeof(*p));
        if (p != NULL) {
            b->samples = p;
            b->cap = cap;
        }
    }
    if (b->nsamples < b->cap) {
        b->samples[b->nsamples++] = ns;
    }
}

static void on_closed(uv_handle_t *h) {
    lconn *c = h->data;
    bench *b = c->b;
    if (!b->stopping) {
        c->closing = 0;
        b->reconnects++;
        open_conn(c);
    } /* else it stays closed: drop() ignores it */
}

static void drop(lconn *c, int error) {
    if (c->closing) {
        return;
    }
    c->b->errors += error;
    c->closing = 1;
    c->waiting = 0;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
}

/* One complete response at the start of c->buf? Returns its length, 0 if incomplete, -1 bad. */
static long parse_response(lconn *c, int *status, int *closes) {
    c->buf[c->len < RBUF ? c->len : RBUF - 1] = '\0';
    char *end = strstr(c->buf, "\r\n\r\n");
    if (end == NULL) {
        return c->len >= RBUF - 1 ? -1 : 0;
    }
    if (strncmp(c->buf, "HTTP/1.", 7) != 0 || c->len < 12) {
        return -1;
    }
    *status = atoi(c->buf + 9);
    *end = '\0'; /* search the headers only */
    const char *cl = strcasestr(c->buf, "\r\ncontent-length:");
    long body = cl ? atol(cl + 17) : 0;
    *closes = strcasestr(c->buf, "\r\nconnection: close") != NULL;
    *end = '\r';
    long total = (long)(end + 4 - c->buf) + body;
    return (size_t)total <= c->len ? total : (total >= RBUF ? -1 : 0);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    lconn *c = h->data;
    *buf = uv_buf_init(c->buf + c->len, (unsigned)(RBUF - 1 - c->len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    lconn *c = s->data;
    bench *b = c->b;
    if (nread < 0) {
        drop(c, c->waiting);
        return;
    }
    c->len += (size_t)nread;
    int status = 0, closes = 0;
    long n = parse_response(c, &status, &closes);
    if (n < 0) {
        drop(c, 1);
        return;
    }
    if (n == 0 || !c->waiting) {
        return;
    }
    uint64_t now = uv_hrtime();
    record(b, now - c->sent_ns);
    b->responses++;
    b->by_code[status > 0 && status < 600 ? status : 0]++;
    memmove(c->buf, c->buf + n, c->len - (size_t)n);
    c->len -= (size_t)n;
    c->waiting = 0;
    if (closes) {
        drop(c, 0);
    } else if (!b->stopping) {
        send_request(c);
    }
}

static void on_written(uv_write_t *w, int status) {
    if (status < 0) {
        drop(w->data, 1);
    }
}

static void send_request(lconn *c) {
    bench *b = c->b;
    uv_buf_t buf = uv_buf_init(b->request, (unsigned)b->request_len);
    c->sent_ns = uv_hrtime();
    c->waiting = 1;
    int n = uv_try_write((uv_stream_t *)&c->tcp, &buf, 1);
    if (n == (int)b->request_len) {
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        drop(c, 1);
        return;
    }
    buf = uv_buf_init(b->request + (n > 0 ? n : 0), (unsigned)(b->request_len - (n > 0 ? n : 0)));
    c->write.data = c;
    if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0) {
        drop(c, 1);
    }
}

static void on_connect(uv_connect_t *req, int status) {
    lconn *c = req->data;
    if (status < 0) {
        drop(c, 1);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (!c->b->stopping) {
        send_request(c);
    }
}

static void open_conn(lconn *c) {
    c->len = 0;
    c->waiting = 0;
    uv_tcp_init(&c->b->loop, &c->tcp);
    c->tcp.data = c;
    c->connect.data = c;
    if (c->b->errors > 1000 && c->b->responses == 0) {
        c->b->stopping = 1; /* nothing answers: give up rather than spin */
    }
    if (uv_tcp_connect(&c->connect, &c->tcp, (struct sockaddr *)&c->b->addr, on_connect) != 0) {
        drop(c, 1);
    }
}

/* First tick: the load is over; later ticks: close once every owed answer is in (or 2 s). */
static void on_stop(uv_timer_t *t) {
    bench *b = t->data;
    if (!b->stopping) {
        b->stopping = 1;
        b->t1 = uv_hrtime();
        uv_timer_start(t, on_stop, 10, 10);
        return;
    }
    int owed = 0;
    for (long long i = 0; i < b->nconns; i++) {
        owed += b->conns[i].waiting;
    }
    if (owed == 0 || uv_hrtime() - b->t1 > 2000000000ull) {
        for (long long i = 0; i < b->nconns; i++) {
            if (!b->conns[i].closing) {
                drop(&b->conns[i], b->conns[i].waiting);
            }
        }
        uv_close((uv_handle_t *)t, NULL);
    }
}

/* "http://IP:PORT/PATH" -> addr, path. */
static int parse_url(bench *b, const char *url, const char **path, char *err, size_t n) {
    char host[64];
    long long port = 80;
    if (strncmp(url, "http://", 7) != 0) {
        snprintf(err, n, "--url: \"%s\" does not start with http://", url);
        return -1;
    }
    const char *h = url + 7, *slash = strchr(h, '/'), *colon = strchr(h, ':');
    *path = slash ? slash : "/";
    size_t hl = (colon && (!slash || colon < slash) ? colon : slash ? slash : h + strlen(h)) - h;
    if (hl == 0 || hl >= sizeof(host)) {
        snprintf(err, n, "--url: no host in \"%s\"", url);
        return -1;
    }
    snprintf(host, sizeof(host), "%.*s", (int)hl, h);
    if (colon && (!slash || colon < slash)) {
        char p[16];
        snprintf(p, sizeof(p), "%.*s", (int)((slash ? slash : h + strlen(h)) - colon - 1),
                 colon + 1);
        if (sluice_parse_ll("--url port", p, 1, 65535, &port, err, n) != 0) {
            return -1;
        }
    }
    if (uv_ip4_addr(host, (int)port, &b->addr) != 0) {
        snprintf(err, n, "--url: \"%s\" is not an IPv4 address", host);
        return -1;
    }
    return 0;
}

static int build_request(bench *b, const char *url, long long size, int get, char *err, size_t n) {
    const char *path;
    if (parse_url(b, url, &path, err, n) != 0) {
        return -1;
    }
    char host[80];
    uv_ip4_name(&b->addr, host, sizeof(host));
    size_t cap = strlen(path) + 256 + (size_t)size;
    b->request = malloc(cap);
    int len = snprintf(b->request, cap,
                       get ? "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n"
                           : "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: "
                             "application/octet-stream\r\nContent-Length: %lld\r\n\r\n",
                       path, host, ntohs(b->addr.sin_port), size);
    b->request_len = (size_t)len;
    if (!get) {
        memset(b->request + len, 'x', (size_t)size);
        b->request_len += (size_t)size;
    }
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(const bench *b, double p) {
    if (b->nsamples == 0) {
        return 0;
    }
    size_t i = (size_t)(p / 100.0 * (double)(b->nsamples - 1) + 0.5);
    return (double)b->samples[i] / 1e6;
}

static void report(bench *b, int json) {
    qsort(b->samples, b->nsamples, sizeof(*b->samples), cmp_u64);
    double secs = (double)(b->t1 - b->t0) / 1e9;
    double rate = (double)b->responses / secs;
    double mx = b->nsamples ? (double)b->samples[b->nsamples - 1] / 1e6 : 0;
    char codes[1024] = "", a[32];
    size_t off = 0;
    for (int code = 0; code < 600 && off < sizeof(codes) - 40; code++) {
        if (b->by_code[code] > 0) {
            off += (size_t)snprintf(codes + off, sizeof(codes) - off,
                                    json ? "%s\"%d\":%llu" : "%s%d=%llu",
                                    off ? json ? "," : " " : "", code, b->by_code[code]);
        }
    }
    if (json) {
        printf("{\"bench\":\"gateway\",\"requests_per_s\":%.0f,\"responses\":%llu,\"seconds\":%.3f,"
               "\"connections\":%lld,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,"
               "\"max_ms\":%.3f,\"codes\":{%s},\"errors\":%llu,\"reconnects\":%llu}\n",
               rate, b->responses, secs, b->nconns, pct_ms(b, 50), pct_ms(b, 99), pct_ms(b, 99.9),
               mx, codes, b->errors, b->reconnects);
        return;
    }
    printf("gateway: %s requests/s over %lld keep-alive connections (%llu in %.2f s)\n",
           sluice_fmt_count(a, sizeof(a), (unsigned long long)rate), b->nconns, b->responses, secs);
    printf("  latency p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\n", pct_ms(b, 50),
           pct_ms(b, 99), pct_ms(b, 99.9), mx);
    printf("  status codes: %s; errors %llu, reconnects %llu\n", codes[0] ? codes : "none",
           b->errors, b->reconnects);
}

typedef struct args {
    const char *url;
    long long conns, duration, size;
    int get, json;
} args;

/* Returns 0, -1 after --help, or the exit code of a usage error. */
static int parse_args(int argc, char **argv, args *a) {
    static const struct option opts[] = {{"url", 1, NULL, 'u'},      {"connections", 1, NULL, 'c'},
                                         {"duration", 1, NULL, 'd'}, {"size", 1, NULL, 's'},
                                         {"get", 0, NULL, 'g'},      {"json", 0, NULL, 'j'},
                                         {"help", 0, NULL, 'h'},     {NULL, 0, NULL, 0}};
    char err[256];
    int ch, rc = 0;
    *a = (args){NULL, 50, 10, 64, 0, 0};
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            a->url = optarg;
            break;
        case 'c':
            rc = sluice_parse_ll("--connections", optarg, 1, 10000, &a->conns, err, sizeof(err));
            break;
        case 'd':
            rc = sluice_parse_ll("--duration", optarg, 1, 3600, &a->duration, err, sizeof(err));
            break;
        case 's':
            rc = sluice_parse_ll("--size", optarg, 0, 1 << 20, &a->size, err, sizeof(err));
            break;
        case 'g':
        case 'j':
            *(ch == 'g' ? &a->get : &a->json) = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return -1;
        default:
            fputs(usage, stderr);
            return SLUICE_EXIT_USAGE;
        }
        if (rc != 0) {
            fprintf(stderr, "sluice-bench gateway: %s\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    if (a->url == NULL) {
        fprintf(stderr, "sluice-bench gateway: --url is required\n%s", usage);
        return SLUICE_EXIT_USAGE;
    }
    return 0;
}

int bench_gateway(int argc, char **argv) {
    static bench b;
    args a;
    char err[256];
    int rc = parse_args(argc, argv, &a);
    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    if (build_request(&b, a.url, a.size, a.get, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench gateway: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    uv_loop_init(&b.loop);
    b.nconns = a.conns;
    b.conns = calloc((size_t)a.conns, sizeof(*b.conns));
    uv_timer_init(&b.loop, &b.stop_timer);
    b.stop_timer.data = &b;
    uv_timer_start(&b.stop_timer, on_stop, (uint64_t)a.duration * 1000, 0);
    b.t0 = uv_hrtime();
    for (long long i = 0; i < a.conns; i++) {
        b.conns[i].b = &b;
        open_conn(&b.conns[i]);
    }
    uv_run(&b.loop, UV_RUN_DEFAULT);
    if (b.t1 == 0) {
        b.t1 = uv_hrtime();
    }
    report(&b, a.json);
    if (b.responses == 0) {
        fprintf(stderr, "sluice-bench gateway: no response from %s\n", a.url);
    }
    uv_loop_close(&b.loop);
    free(b.conns);
    free(b.samples);
    free(b.request);
    return b.responses == 0 ? SLUICE_EXIT_REDIS : 0;
}
