/* SPDX-License-Identifier: MIT */
/*
 * gateway_dash.c - the operator console of sluice-gateway: what a person or a script watches.
 *
 *   GET  /v1/queues                       every served queue: figures, rates, wait, history
 *   GET  /v1/events                       the same JSON every second (Server-Sent Events)
 *   GET  /ui/, /ui/app.js, /ui/app.css    the page (with --dashboard), embedded at build time
 *   POST /v1/admin/queues/{q}/{action}    actions, with Authorization: Bearer (--admin-token-file)
 *
 * A sampler reads each queue's figures once a second (one pipelined info call per queue, on the
 * queue's own connection, never on the admission path) into a ring of GW_HISTORY samples, from
 * which the rates per second, the drain rate and the Little's-law wait are derived (what GET
 * /v1/queues/{q} reads on demand besides: gateway_detail.c). The admission hot path (POST
 * .../messages) is not touched by anything here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sluice/client.h"
#include "sluice/buf.h"
#include "sluice/log.h"
#include "sluice/reply.h"

#include "gateway.h"

#define JSON_PAGE_MAX (8u << 20) /* bytes of one /v1/queues answer or event */
#define RATE_WINDOW   5          /* samples the rates per second are measured over */
#define LIST_HISTORY  60         /* samples of history in /v1/queues and each event */
#define ADMIN_BODY    4096       /* bytes of an admin action's body */
#define REPLAY_IDS    100        /* dead letters one replay names, at most */

/* The page, embedded by producer/ui/embed.cmake. */
extern const char gw_ui_index_html[], gw_ui_app_js[], gw_ui_app_css[];
extern const size_t gw_ui_index_html_len, gw_ui_app_js_len, gw_ui_app_css_len;

static const char page_headers[] =
    "Content-Security-Policy: default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
    "Cache-Control: no-cache\r\n";

static void reply_text(sluice__http_req *c, int status, const char *extra, const char *json) {
    sluice__http_respond(c, status, "application/json", extra, json, strlen(json), 0);
}

/* ---------------------------------------------------------------------------------------- */
/* The sampler                                                                              */

static void on_sample(sluice_aproducer *ap, int status, const sluice_queue_info *in, void *arg) {
    gw_queue *q = arg;
    gw_series *h = q->series;
    (void)ap;
    h->busy = 0;
    if (status != 0 || h == NULL) {
        return;
    }
    gw_sample *s = &h->ring[(h->head + h->n) % GW_HISTORY];
    if (h->n == GW_HISTORY) {
        h->head = (h->head + 1) % GW_HISTORY;
        h->n--;
    }
    h->n++;
    *s = (gw_sample){.t_ms = h->now_ms,
                     .depth = in->depth,
                     .capacity = in->capacity,
                     .in_flight = in->pending,
                     .consumers = in->consumers,
                     .dead = in->dead,
                     .drain_rate = in->drain_rate,
                     .c = {in->admitted, in->rejected, in->limited, in->acked}};
    h->last = *in;
    h->have_last = 1;
}

static void broadcast(gw_server *s);

static void on_tick(uv_timer_t *t) {
    gw_server *s = t->data;
    for (size_t i = 0; i < s->nqueues; i++) {
        gw_queue *q = &s->queues[i];
        if (!q->series->busy && sluice_aproducer_info(q->ap, on_sample, q) == 0) {
            q->series->busy = 1;
            q->series->now_ms = uv_now(s->loop);
        }
    }
    gw_conns_tick(s);
    gw_discover_tick(s);
    broadcast(s);
}

int gw_dash_start(gw_server *s) {
    for (size_t i = 0; i < s->nqueues; i++) {
        s->queues[i].series = calloc(1, sizeof(gw_series));
        if (s->queues[i].series == NULL) {
            return -1;
        }
    }
    uv_timer_init(s->loop, &s->dash.tick);
    s->dash.tick.data = s;
    uv_timer_start(&s->dash.tick, on_tick, 0, 1000);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* JSON                                                                                     */

static const char *const counter_names[GW_COUNTERS] = {"admitted", "rejected", "limited", "acked"};

static const gw_sample *sample_at(const gw_series *h, int i) {
    return &h->ring[(h->head + i) % GW_HISTORY];
}

/* Per second between samples a and b; -1 when unknown (a counter reset reads as 0). */
static double per_s(const gw_sample *a, const gw_sample *b, int k) {
    if (b->t_ms <= a->t_ms) {
        return -1;
    }
    long long d = b->c[k] - a->c[k];
    return d < 0 ? 0 : (double)d * 1000.0 / (double)(b->t_ms - a->t_ms);
}

static void put_num(sluice_text *b, const char *name, double v) {
    if (v < 0) {
        sluice_text_printf(b, ",\"%s\":null", name);
    } else {
        sluice_text_printf(b, ",\"%s\":%.3f", name, v);
    }
}

/* "history":{"interval_ms":1000,"columns":[...],"points":[[...],...]} of the last `want`. */
static void put_history(sluice_text *b, const gw_series *h, int want) {
    sluice_text_printf(b, ",\"history\":{\"interval_ms\":1000,\"columns\":[\"t_ms\",\"depth\","
                          "\"capacity\",\"in_flight\",\"admitted\",\"rejected\",\"limited\","
                          "\"acked\"],\"points\":[");
    int from = h->n > want ? h->n - want : 0;
    for (int i = from + 1; i < h->n; i++) {
        const gw_sample *a = sample_at(h, i - 1), *s = sample_at(h, i);
        sluice_text_printf(b, "%s[%llu,%lld,%lld,%lld", i > from + 1 ? "," : "",
                           (unsigned long long)s->t_ms, s->depth, s->capacity, s->in_flight);
        for (int k = 0; k < GW_COUNTERS; k++) {
            double r = per_s(a, s, k);
            sluice_text_printf(b, r < 0 ? ",null" : ",%.2f", r);
        }
        sluice_text_printf(b, "]");
    }
    sluice_text_printf(b, "]}");
}

static void put_limits(sluice_text *b, const sluice_queue_info *in) {
    sluice_text_printf(b, ",\"limits\":[");
    for (size_t i = 0; i < in->nlimits && i < SLUICE_QUEUE_INFO_LIMITS; i++) {
        const sluice_queue_limit *l = &in->limits[i]; /* plain ASCII, as the library checks */
        sluice_text_printf(b,
                           "%s{\"name\":\"%s\",\"scope\":\"%s\",\"spec\":\"%s\",\"refused\":%lld}",
                           i ? "," : "", l->name, l->scope, l->spec, l->refused);
    }
    sluice_text_printf(b, "],\"limits_total\":%zu,\"partitions\":%d,\"by_partition\":[",
                       in->nlimits, in->partitions);
    for (int i = 0; in->partitions > 1 && i < in->partitions && i < SLUICE_QUEUE_INFO_PARTS; i++) {
        const sluice_queue_part *p = &in->parts[i];
        if (p->status != 0) {
            sluice_text_printf(b, "%s{\"unavailable\":\"%s\"}", i ? "," : "",
                               sluice_strerror(p->status));
        } else {
            sluice_text_printf(b, "%s{\"depth\":%lld,\"capacity\":%lld,\"in_flight\":%lld}",
                               i ? "," : "", p->depth, p->capacity, p->pending);
        }
    }
    sluice_text_printf(b, "]");
}

/* The derived figures of one queue: rates over the last RATE_WINDOW samples, the drain rate
 * (the producer's smoothed estimate, else the acked rate) and the Little's-law wait. */
static void put_rates(sluice_text *b, const gw_queue *q, int with_drain) {
    const gw_series *h = q->series;
    double rate[GW_COUNTERS] = {-1, -1, -1, -1}, drain = -1;
    long long depth = 0;
    if (h != NULL && h->n >= 2) {
        int from = h->n > RATE_WINDOW ? h->n - 1 - RATE_WINDOW : 0;
        for (int k = 0; k < GW_COUNTERS; k++) {
            rate[k] = per_s(sample_at(h, from), sample_at(h, h->n - 1), k);
        }
    }
    if (h != NULL && h->n >= 1) {
        const gw_sample *last = sample_at(h, h->n - 1);
        depth = last->depth;
        drain = last->drain_rate >= 0 ? last->drain_rate : rate[3];
    }
    sluice_text_printf(b, ",\"rates\":{");
    for (int k = 0; k < GW_COUNTERS; k++) {
        sluice_text_printf(b, rate[k] < 0 ? "%s\"%s\":null" : "%s\"%s\":%.3f", k ? "," : "",
                           counter_names[k], rate[k]);
    }
    sluice_text_printf(b, "}");
    if (with_drain) {
        put_num(b, "drain_rate", drain);
    }
    put_num(b, "wait_s", depth == 0 ? 0 : drain > 0 ? (double)depth / drain : -1);
}

void gw_dash_history(sluice_text *b, const gw_queue *q) {
    if (q == NULL) {
        return;
    }
    put_rates(b, q, 0); /* GET /v1/queues/{q} has its own, read just now */
    if (q->series != NULL) {
        put_history(b, q->series, GW_HISTORY);
    }
}

/* One queue of /v1/queues from its last sample. */
static void put_queue(sluice_text *b, const gw_queue *q, uint64_t now) {
    const gw_series *h = q->series;
    sluice_text_printf(b, "{\"queue\":\"%s\",\"ready\":%s", q->name,
                       sluice_aproducer_ready(q->ap) ? "true" : "false");
    if (h == NULL || !h->have_last || h->n == 0) {
        sluice_text_printf(b, ",\"sampled\":false}");
        return;
    }
    const gw_sample *s = sample_at(h, h->n - 1);
    const sluice_queue_info *in = &h->last;
    sluice_text_printf(b,
                       ",\"sampled\":true,\"age_ms\":%llu,\"depth\":%lld,\"capacity\":%lld,"
                       "\"waiting\":%lld,\"in_flight\":%lld,\"consumers\":%lld,\"dead\":%lld,"
                       "\"full\":%s,\"paused\":%s",
                       (unsigned long long)(now - s->t_ms), s->depth, s->capacity,
                       s->depth > s->in_flight ? s->depth - s->in_flight : 0, s->in_flight,
                       s->consumers, s->dead, s->depth >= s->capacity ? "true" : "false",
                       in->paused > 0 ? "true" : "false");
    for (int k = 0; k < GW_COUNTERS; k++) {
        sluice_text_printf(b, ",\"%s\":%lld", counter_names[k], s->c[k]);
    }
    put_rates(b, q, 1);
    put_limits(b, in);
    put_history(b, h, LIST_HISTORY);
    sluice_text_printf(b, "}");
}

static void queues_json(sluice_text *b, gw_server *s) {
    uint64_t now = uv_now(s->loop);
    sluice_text_printf(b, "{\"interval_ms\":1000,\"admin\":%s,\"queues\":[",
                       s->dash.token_len > 0 ? "true" : "false");
    for (size_t i = 0; i < s->nqueues; i++) {
        sluice_text_printf(b, "%s", i ? "," : "");
        put_queue(b, &s->queues[i], now);
    }
    sluice_text_printf(b, "]");
    gw_discover_json(b, s);
    sluice_text_printf(b, "}");
}

void gw_reply_text(sluice__http_req *c, sluice_text *b) {
    if (b->failed) {
        reply_text(c, 500, NULL, "{\"error\":\"response too large\"}\n");
    } else {
        sluice__http_respond(c, 200, "application/json", NULL, b->p, b->len, 0);
    }
    sluice_text_free(b);
}

static void get_queues(sluice__http_req *c, gw_server *s) {
    sluice_text b = {.max = JSON_PAGE_MAX};
    queues_json(&b, s);
    sluice_text_printf(&b, "\n");
    gw_reply_text(c, &b);
}

/* ---------------------------------------------------------------------------------------- */
/* GET /v1/events                                                                           */

static void drop_stream(gw_server *s, int i) {
    sluice__http_stream_end(s->dash.streams[i]);
    s->dash.streams[i] = s->dash.streams[--s->dash.nstreams];
}

static void send_event(gw_server *s, const sluice_text *b) {
    for (int i = 0; i < s->dash.nstreams;) {
        if (sluice__http_stream_write(s->dash.streams[i], b->p, b->len) != 0) {
            drop_stream(s, i); /* gone, or not reading */
        } else {
            i++;
        }
    }
}

static void event_text(sluice_text *b, gw_server *s) {
    sluice_text_printf(b, "event: queues\ndata: ");
    queues_json(b, s);
    sluice_text_printf(b, "\n\n");
}

static void broadcast(gw_server *s) {
    if (s->dash.nstreams == 0) {
        return;
    }
    sluice_text b = {.max = JSON_PAGE_MAX};
    event_text(&b, s);
    if (!b.failed) {
        send_event(s, &b);
    }
    sluice_text_free(&b);
}

static void get_events(sluice__http_req *c, gw_server *s) {
    if (s->stopping || s->dash.nstreams == GW_MAX_STREAMS) {
        reply_text(c, 503, "Retry-After: 5\r\n", "{\"error\":\"too many event streams\"}\n");
        return;
    }
    sluice__http_stream_begin(c, "text/event-stream", "X-Content-Type-Options: nosniff\r\n");
    s->dash.streams[s->dash.nstreams++] = c;
    sluice_text b = {.max = JSON_PAGE_MAX};
    sluice_text_printf(&b, "retry: 2000\n\n");
    event_text(&b, s);
    if (!b.failed) {
        send_event(s, &b);
    }
    sluice_text_free(&b);
}

void gw_dash_stop(gw_server *s) {
    while (s->dash.nstreams > 0) {
        drop_stream(s, s->dash.nstreams - 1);
    }
    if (s->dash.tick.data != NULL && !uv_is_closing((uv_handle_t *)&s->dash.tick)) {
        uv_close((uv_handle_t *)&s->dash.tick, NULL);
    }
    gw_conns_close(s);
}

void gw_dash_free(gw_server *s) {
    for (size_t i = 0; i < s->nqueues; i++) {
        free(s->queues[i].series);
        s->queues[i].series = NULL;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* The page                                                                                 */

static int get_page(sluice__http_req *c, const char *path, size_t len) {
    const char *body, *ctype;
    size_t n;
    if (sluice__http_path_is(path, len, "/ui/") ||
        sluice__http_path_is(path, len, "/ui/index.html")) {
        body = gw_ui_index_html, n = gw_ui_index_html_len, ctype = "text/html; charset=utf-8";
    } else if (sluice__http_path_is(path, len, "/ui/app.js")) {
        body = gw_ui_app_js, n = gw_ui_app_js_len, ctype = "text/javascript; charset=utf-8";
    } else if (sluice__http_path_is(path, len, "/ui/app.css")) {
        body = gw_ui_app_css, n = gw_ui_app_css_len, ctype = "text/css; charset=utf-8";
    } else if (sluice__http_path_is(path, len, "/ui")) {
        sluice__http_respond(c, 301, "text/plain", "Location: /ui/\r\n", "", 0, 0);
        return 1;
    } else {
        return 0;
    }
    sluice__http_respond(c, 200, ctype, page_headers, body, n, 0);
    return 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Admin actions                                                                            */

int gw_dash_read_token(gw_server *s, const char *file, char *err, size_t n) {
    int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        snprintf(err, n, "--admin-token-file: \"%s\": %s", file, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) != 0) {
        snprintf(err, n,
                 "--admin-token-file: \"%s\": must be a regular file readable by its owner only "
                 "(mode %04o; chmod 600)",
                 file, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    ssize_t got = read(fd, s->dash.token, sizeof(s->dash.token));
    close(fd);
    while (got > 0 && (s->dash.token[got - 1] == '\n' || s->dash.token[got - 1] == '\r')) {
        got--;
    }
    if (got < 16 || (size_t)got >= sizeof(s->dash.token)) {
        snprintf(err, n, "--admin-token-file: \"%s\": the token must be 16..%zu bytes", file,
                 sizeof(s->dash.token) - 1);
        memset(s->dash.token, 0, sizeof(s->dash.token));
        return -1;
    }
    for (ssize_t i = 0; i < got; i++) {
        if (s->dash.token[i] <= 0x20 || s->dash.token[i] >= 0x7f) {
            snprintf(err, n, "--admin-token-file: \"%s\": byte %zd is not visible ASCII", file,
                     i + 1);
            memset(s->dash.token, 0, sizeof(s->dash.token));
            return -1;
        }
    }
    s->dash.token_len = (size_t)got;
    return 0;
}

int gw_dash_authorized(sluice__http_req *c, const gw_server *s) {
    static const char scheme[] = "Bearer ";
    if (s->dash.token_len == 0) {
        reply_text(c, 403, NULL,
                   "{\"error\":\"admin actions are disabled: start with --admin-token-file\"}\n");
        return -1;
    }
    size_t len;
    const char *v = sluice__http_header(c, "authorization", &len);
    unsigned diff = 1;
    if (v != NULL && len == sizeof(scheme) - 1 + s->dash.token_len &&
        strncasecmp(v, scheme, sizeof(scheme) - 1) == 0) {
        diff = 0;
        for (size_t i = 0; i < s->dash.token_len; i++) {
            diff |= (unsigned char)(v[sizeof(scheme) - 1 + i] ^ s->dash.token[i]);
        }
    }
    if (diff != 0) {
        reply_text(c, 401, "WWW-Authenticate: Bearer realm=\"sluice\"\r\n",
                   "{\"error\":\"missing or wrong bearer token\"}\n");
        return -1;
    }
    return 0;
}

/* {"capacity":N} (whitespace allowed, nothing else): N, or -1. */
static long long parse_capacity_body(const char *p, size_t len) {
    char buf[ADMIN_BODY + 1], key[16];
    long long v;
    int end = 0;
    memcpy(buf, p, len);
    buf[len] = '\0';
    if (strlen(buf) != len || sscanf(buf, " { \"%15[a-z]\" : %lld } %n", key, &v, &end) != 2 ||
        (size_t)end != len || strcmp(key, "capacity") != 0 || v < 0 || v > SLUICE_CAPACITY_MAX) {
        return -1;
    }
    /* sscanf accepts a sign and leading spaces inside the number: refuse a '+' or "- 1" */
    const char *colon = strchr(buf, ':');
    while (*++colon == ' ' || *colon == '\t' || *colon == '\n' || *colon == '\r') {
    }
    return (*colon >= '0' && *colon <= '9') ? v : -1;
}

static void on_capacity_set(sluice_aconn *ac, int status, int sent, struct redisReply *r,
                            void *arg) {
    sluice__http_req *c = arg;
    (void)ac, (void)sent, (void)r;
    if (sluice__http_release(c)) {
        return;
    }
    if (status != 0) {
        reply_text(c, 503, "Retry-After: 1\r\n", "{\"error\":\"redis unavailable\"}\n");
        return;
    }
    reply_text(c, 200, NULL, "{\"ok\":true}\n");
}

static void set_capacity(sluice__http_req *c, gw_server *s, gw_queue *q) {
    size_t len;
    const char *body = sluice__http_body(c, &len);
    long long cap = len <= ADMIN_BODY ? parse_capacity_body(body ? body : "", len) : -1;
    if (cap < 0) {
        reply_text(c, 400, NULL,
                   "{\"error\":\"the body must be {\\\"capacity\\\":N}, N from 0 to the most a "
                   "capacity can be\"}\n");
        return;
    }
    if (q->series->have_last && q->series->last.partitions > 1) {
        reply_text(c, 409, NULL,
                   "{\"error\":\"a partitioned queue: set its capacity with sluice-admin "
                   "capacity\"}\n");
        return;
    }
    sluice_keys k;
    char value[32];
    snprintf(value, sizeof(value), "%lld", cap);
    const char *argv[] = {"HSET", k.meta, "capacity", value};
    if (sluice_keys_init(&k, q->name, NULL, 0) != 0 ||
        sluice_aconn_command(gw_conn_for(s, q->name), 4, argv, NULL, 0, on_capacity_set, c) != 0) {
        reply_text(c, 503, "Retry-After: 1\r\n", "{\"error\":\"redis unavailable\"}\n");
        return;
    }
    sluice__http_hold(c);
}

/* {"ids":["ID",...]} with 1..REPLAY_IDS stream ids (MS-SEQ): writes them NUL-terminated into
 * buf (ids[i] pointing in it); returns how many, or -1. */
static int parse_ids_body(const char *p, size_t len, char *buf, const char **ids) {
    const char *end = p + len;
    int n = 0;
    char *out = buf;
#define SKIP_WS()                                                                                  \
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {                     \
        p++;                                                                                       \
    }
#define EXPECT(lit)                                                                                \
    SKIP_WS();                                                                                     \
    if ((size_t)(end - p) < sizeof(lit) - 1 || memcmp(p, lit, sizeof(lit) - 1) != 0) {             \
        return -1;                                                                                 \
    }                                                                                              \
    p += sizeof(lit) - 1;
    EXPECT("{");
    EXPECT("\"ids\"");
    EXPECT(":");
    EXPECT("[");
    for (;;) {
        EXPECT("\"");
        const char *q = memchr(p, '"', (size_t)(end - p));
        size_t il = q ? (size_t)(q - p) : 0, digits = strspn(p, "0123456789");
        if (q == NULL || il == 0 || il >= SLUICE_STREAM_ID_MAX || n == REPLAY_IDS || digits == 0 ||
            (digits < il && (p[digits] != '-' || digits + 1 == il ||
                             strspn(p + digits + 1, "0123456789") != il - digits - 1))) {
            return -1;
        }
        memcpy(out, p, il);
        out[il] = '\0';
        ids[n++] = out;
        out += il + 1;
        p = q + 1;
        SKIP_WS();
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        break;
    }
    EXPECT("]");
    EXPECT("}");
    SKIP_WS();
#undef EXPECT
#undef SKIP_WS
    return p == end ? n : -1;
}

/* The ids of the request's {"ids":[...]} body (parse_ids_body), or -1 having answered 400. */
static int body_ids(sluice__http_req *c, char *buf, const char **ids) {
    size_t len;
    const char *body = sluice__http_body(c, &len);
    int n = len <= ADMIN_BODY ? parse_ids_body(body ? body : "", len, buf, ids) : -1;
    if (n <= 0) {
        reply_text(c, 400, NULL,
                   "{\"error\":\"the body must be {\\\"ids\\\":[\\\"ID\\\",...]}: 1 to 100 dead "
                   "letter ids (MS-SEQ), as sluice-admin dead list shows them\"}\n");
        return -1;
    }
    return n;
}

static void on_replayed(sluice_aconn *ac, int status, int sent, struct redisReply *r, void *arg) {
    sluice__http_req *c = arg;
    (void)ac, (void)sent;
    if (sluice__http_release(c)) {
        return;
    }
    if (status != 0 || r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 7 ||
        !sluice_reply_replay_ok(r, r->element[6]->elements)) {
        reply_text(c, 503, "Retry-After: 1\r\n", "{\"error\":\"redis unavailable\"}\n");
        return;
    }
    char body[256];
    snprintf(body, sizeof(body),
             "{\"replayed\":%lld,\"not_fitted\":%lld,\"skipped_no_body\":%lld,"
             "\"not_found\":%lld,\"depth\":%lld,\"capacity\":%lld}\n",
             r->element[0]->integer, r->element[1]->integer, r->element[2]->integer,
             r->element[3]->integer, r->element[4]->integer, r->element[5]->integer);
    reply_text(c, 200, NULL, body);
}

/* The named dead letters back into the queue, in one atomic step (sluice_replay, as
 * `sluice-admin dead replay Q ID...`): those that fit, in the order named. */
static void replay_dead(sluice__http_req *c, gw_server *s, gw_queue *q) {
    char buf[ADMIN_BODY + REPLAY_IDS], cap[24];
    const char *args[1 + REPLAY_IDS];
    int n = body_ids(c, buf, args + 1);
    if (n <= 0) {
        return;
    }
    sluice_keys k;
    snprintf(cap, sizeof(cap), "%lld", q->capacity); /* used while the meta has none */
    args[0] = cap;
    const char *keys[] = {k.stream, k.meta, k.stats, k.dead};
    if (sluice_keys_init(&k, q->name, NULL, 0) != 0 ||
        sluice_aconn_fcall(gw_conn_for(s, q->name), SLUICE_FN_REPLAY, 4, keys, NULL, 1 + n, args,
                           NULL, 0, on_replayed, c) != 0) {
        reply_text(c, 503, "Retry-After: 1\r\n", "{\"error\":\"redis unavailable\"}\n");
        return;
    }
    sluice__http_hold(c);
}

typedef struct dead_deletion {
    sluice__http_req *c;
    long long n; /* ids named */
} dead_deletion;

static void on_dead_deleted(sluice_aconn *ac, int status, int sent, struct redisReply *r,
                            void *arg) {
    dead_deletion *d = arg;
    sluice__http_req *c = d->c;
    long long asked = d->n;
    (void)ac, (void)sent;
    free(d);
    if (sluice__http_release(c)) {
        return;
    }
    if (status != 0 || r == NULL || r->type != REDIS_REPLY_INTEGER) {
        reply_text(c, 503, "Retry-After: 1\r\n", "{\"error\":\"redis unavailable\"}\n");
        return;
    }
    char body[96];
    snprintf(body, sizeof(body), "{\"deleted\":%lld,\"not_found\":%lld}\n", r->integer,
             asked - r->integer);
    reply_text(c, 200, NULL, body);
}

/* The named dead letters deleted (XDEL, as `sluice-admin dead delete Q ID...`). */
static void delete_dead(sluice__http_req *c, gw_server *s, gw_queue *q) {
    char buf[ADMIN_BODY + REPLAY_IDS];
    const char *argv[2 + REPLAY_IDS];
    int n = body_ids(c, buf, argv + 2);
    if (n <= 0) {
        return;
    }
    sluice_keys k;
    dead_deletion *d = malloc(sizeof(*d));
    argv[0] = "XDEL", argv[1] = k.dead;
    if (d != NULL) {
        d->c = c, d->n = n;
    }
    if (d == NULL || sluice_keys_init(&k, q->name, NULL, 0) != 0 ||
        sluice_aconn_command(gw_conn_for(s, q->name), 2 + n, argv, NULL, 0, on_dead_deleted, d) !=
            0) {
        free(d);
        reply_text(c, 503, "Retry-After: 1\r\n", "{\"error\":\"redis unavailable\"}\n");
        return;
    }
    sluice__http_hold(c);
}

/* {"confirm":true} (whitespace allowed, nothing else): 1, else 0. */
static int confirmed(sluice__http_req *c) {
    size_t len;
    const char *p = sluice__http_body(c, &len);
    char buf[ADMIN_BODY + 1], key[16], val[8];
    int end = 0;
    if (p == NULL || len > ADMIN_BODY) {
        return 0;
    }
    memcpy(buf, p, len);
    buf[len] = '\0';
    return strlen(buf) == len &&
           sscanf(buf, " { \"%15[a-z]\" : %7[a-z] } %n", key, val, &end) == 2 &&
           (size_t)end == len && strcmp(key, "confirm") == 0 && strcmp(val, "true") == 0;
}

/* POST /v1/admin/queues/{q}/{action}; rest = what follows "/v1/admin/queues/". */
static void route_admin(sluice__http_req *c, gw_server *s, const char *rest, size_t len) {
    size_t blen;
    if (gw_dash_authorized(c, s) != 0) {
        return;
    }
    if (sluice__http_body(c, &blen) != NULL && blen > ADMIN_BODY) {
        reply_text(c, 413, NULL, "{\"error\":\"an admin action's body is at most 4096 bytes\"}\n");
        return;
    }
    const char *slash = memchr(rest, '/', len);
    size_t nl = slash ? (size_t)(slash - rest) : len;
    gw_queue *q = gw_find_queue(s, rest, nl);
    if (q == NULL || slash == NULL) {
        reply_text(c, 404, NULL, "{\"error\":\"not found\"}\n");
        return;
    }
    size_t al = len - nl;
    if (sluice__http_method(c) != HTTP_POST) {
        reply_text(c, 405, "Allow: POST\r\n", "{\"error\":\"method not allowed\"}\n");
    } else if (sluice__http_path_is(slash, al, "/capacity")) {
        set_capacity(c, s, q);
    } else if (sluice__http_path_is(slash, al, "/dead/replay")) {
        replay_dead(c, s, q);
    } else if (sluice__http_path_is(slash, al, "/dead/delete")) {
        delete_dead(c, s, q);
    } else if (sluice__http_path_is(slash, al, "/pause")) {
        gw_verb_start(c, s, q, GW_VERB_PAUSE);
    } else if (sluice__http_path_is(slash, al, "/resume")) {
        gw_verb_start(c, s, q, GW_VERB_RESUME);
    } else if (!sluice__http_path_is(slash, al, "/clear")) {
        reply_text(c, 404, NULL, "{\"error\":\"not found\"}\n");
    } else if (!confirmed(c)) {
        reply_text(c, 400, NULL,
                   "{\"error\":\"clear deletes every waiting entry: the body must be "
                   "{\\\"confirm\\\":true}\"}\n");
    } else {
        gw_verb_start(c, s, q, GW_VERB_CLEAR);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Routing                                                                                  */

int gw_dash_route(sluice__http_req *c, const char *path, size_t len) {
    static const char admin[] = "/v1/admin/queues/";
    gw_server *s = sluice__http_arg(c);
    int get = sluice__http_method(c) == HTTP_GET || sluice__http_method(c) == HTTP_HEAD;
    if (len > sizeof(admin) - 1 && memcmp(path, admin, sizeof(admin) - 1) == 0) {
        route_admin(c, s, path + sizeof(admin) - 1, len - (sizeof(admin) - 1));
        return 1;
    }
    int queues = sluice__http_path_is(path, len, "/v1/queues");
    int events = sluice__http_path_is(path, len, "/v1/events");
    if (queues || events) {
        if (events && sluice__http_method(c) != HTTP_GET) {
            reply_text(c, 405, "Allow: GET\r\n", "{\"error\":\"method not allowed\"}\n");
        } else if (!get) {
            reply_text(c, 405, "Allow: GET, HEAD\r\n", "{\"error\":\"method not allowed\"}\n");
        } else if (queues) {
            get_queues(c, s);
        } else {
            get_events(c, s);
        }
        return 1;
    }
    if (s->dash.ui && len >= 3 && memcmp(path, "/ui", 3) == 0) {
        if (!get) {
            reply_text(c, 405, "Allow: GET, HEAD\r\n", "{\"error\":\"method not allowed\"}\n");
            return 1;
        }
        return get_page(c, path, len);
    }
    return 0;
}
