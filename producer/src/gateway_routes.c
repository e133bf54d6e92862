/* SPDX-License-Identifier: MIT */
/*
 * gateway_routes.c - what a complete request to sluice-gateway means.
 *
 *   POST /v1/queues/{queue}/messages  admit the body: 202 {"id","depth","capacity"};
 *                                     429 + Retry-After when full; 503 + Retry-After when Redis
 *                                     is unavailable or the outcome is unknown (fail-closed)
 *   GET  /v1/queues/{queue}           depth, capacity, pending, consumers, counters, drain rate
 *   GET  /metrics                     Prometheus text format
 *   GET  /healthz                     200 when every queue's Redis connection is up, else 503
 *
 * An unknown queue or path is 404, a wrong method 405 (with Allow). X-Request-Id and
 * Content-Type go into the envelope as headers "request-id" and "content-type";
 * Idempotency-Key becomes the admission's idempotency key. Error bodies never carry Redis
 * addresses or server error text: those go to the log.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/buf.h"
#include "sluice/log.h"

#include "gateway.h"

#define METRICS_MAX (1u << 20) /* bytes of one /metrics answer */
#define JSON_MAX    16384 /* bytes of one JSON body: GET /v1/queues with 16 limits, 64 partitions */

static const double lat_bounds[GW_LAT_BUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};

gw_queue *gw_find_queue(gw_server *s, const char *name, size_t len) {
    for (size_t i = 0; i < s->nqueues; i++) {
        if (strlen(s->queues[i].name) == len && memcmp(s->queues[i].name, name, len) == 0) {
            return &s->queues[i];
        }
    }
    return NULL;
}

/* The gateway a request came to. */
static gw_server *gw_of(const sluice__http_req *c) {
    return sluice__http_arg(c);
}

void gw_count_response(void *arg, int status) {
    gw_server *s = arg;
    if (status >= 100 && status < 600) {
        s->m.by_code[status]++;
    }
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void
reply_json(sluice__http_req *c, int status, const char *extra, const char *fmt, ...) {
    char body[JSON_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(body)) {
        n = snprintf(body, sizeof(body), "{\"error\":\"response too large\"}\n");
        status = 500;
    }
    sluice__http_respond(c, status, "application/json", extra, body, (size_t)n, 0);
}

static void not_found(sluice__http_req *c) {
    reply_json(c, 404, NULL, "{\"error\":\"not found\"}\n");
}

static void not_allowed(sluice__http_req *c, const char *allow) {
    char extra[64];
    snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
    reply_json(c, 405, extra, "{\"error\":\"method not allowed\",\"allow\":\"%s\"}\n", allow);
}

/* ---------------------------------------------------------------------------------------- */
/* POST /v1/queues/{queue}/messages                                                         */

static void observe_latency(gw_server *s, uint64_t started_ns) {
    double secs = (double)(uv_hrtime() - started_ns) / 1e9;
    int b = 0;
    while (b < GW_LAT_BUCKETS - 1 && secs > lat_bounds[b]) {
        b++;
    }
    s->m.lat[b]++;
    s->m.lat_sum += secs;
    s->m.lat_count++;
}

/* Printable ASCII without spaces or quotes: safe in JSON, headers, logs and Redis keys. */
static int visible(const char *v, size_t len, size_t max) {
    if (len == 0 || len > max) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (v[i] <= 0x20 || v[i] >= 0x7f || v[i] == '"' || v[i] == '\\') {
            return 0;
        }
    }
    return 1;
}

/* "X-Request-Id: ...\r\n" echoed back when the client sent a well-formed one. */
static void request_id_header(const sluice__http_req *c, char *out, size_t outlen) {
    size_t len;
    const char *v = sluice__http_header(c, "x-request-id", &len);
    out[0] = '\0';
    if (v != NULL && visible(v, len, 200)) {
        snprintf(out, outlen, "X-Request-Id: %.*s\r\n", (int)len, v);
    }
}

static void answer_failure(sluice__http_req *c, const sluice_admit_result *res, const char *extra) {
    char hdrs[320];
    snprintf(hdrs, sizeof(hdrs), "Retry-After: 1\r\n%s", extra);
    if (res->status == SLUICE_EUNKNOWN) {
        reply_json(c, 503, hdrs,
                   "{\"error\":\"outcome unknown\",\"detail\":\"the reply from redis was lost, "
                   "or fewer replicas than --wait-replicas confirmed it: the message may or may "
                   "not have been admitted (or kept after a failover); retry with the same "
                   "Idempotency-Key\"}\n");
    } else if (sluice_status_is_transient(res->status) || res->status == SLUICE_ECANCELED) {
        reply_json(c, 503, hdrs, "{\"error\":\"redis unavailable\",\"detail\":\"%s\"}\n",
                   sluice_strerror(res->status));
    } else {
        reply_json(c, 500, extra, "{\"error\":\"%s\"}\n", sluice_strerror(res->status));
    }
}

/* One more 429 of queue `q` by limit `name` (the last slot collects the names beyond). */
static void count_limited(gw_queue *q, const char *name) {
    int i = 0;
    while (i < q->nlimited && strcmp(q->limited[i].name, name) != 0) {
        i++;
    }
    if (i == q->nlimited) {
        if (q->nlimited == GW_LIMIT_NAMES) {
            i = GW_LIMIT_NAMES - 1;
            snprintf(q->limited[i].name, sizeof(q->limited[i].name), "other");
        } else {
            snprintf(q->limited[i].name, sizeof(q->limited[i].name), "%s", name);
            q->nlimited++;
        }
    }
    q->limited[i].n++;
}

/* A limit of count per period_ms as RateLimit-Policy's quota q per w whole seconds: the
 * same rate over the shortest whole number of seconds that holds whole periods (5/500ms is
 * q=10;w=1, 3/1500ms q=6;w=3); past a day of them, w rounded up and q the units of the whole
 * periods in it. */
static void policy_window(long long count, long long period_ms, long long *q, long long *w) {
    long long a = period_ms > 0 ? period_ms : 1, b = 1000;
    while (b != 0) {
        long long r = a % b;
        a = b;
        b = r;
    }
    long long p = period_ms > 0 ? period_ms : 1, secs = p / a; /* lcm(p, 1000) / 1000 */
    if (secs <= 86400) {
        *w = secs;
        *q = count * (secs * 1000 / p);
        return;
    }
    *w = (p + 999) / 1000;
    *q = count * (*w * 1000 / p); /* w * 1000 >= p: at least count */
}

static void on_admitted(sluice_aproducer *ap, const sluice_admit_result *res, void *arg) {
    sluice__http_req *c = arg;
    gw_server *s = gw_of(c);
    observe_latency(s, sluice__http_started_ns(c));
    if (res->outcome == SLUICE_LIMITED) {
        const char *qn = sluice_aproducer_queue(ap);
        gw_queue *q = gw_find_queue(s, qn, strlen(qn));
        if (q != NULL) {
            count_limited(q, res->limit);
        }
    }
    if (res->outcome == SLUICE_FAILED || res->outcome == SLUICE_OPEN) {
        char q[600];
        SLUICE_LOG(SLUICE_LOG_DEBUG, "event=admit_failed queue=%s status=%s detail=%s",
                   sluice_aproducer_queue(ap), sluice_err_name(res->status),
                   sluice_log_q(sluice_aproducer_errstr(ap), q, sizeof(q)));
    }
    if (sluice__http_release(c)) {
        return;
    }
    char extra[300], hdrs[600];
    request_id_header(c, extra, sizeof(extra));
    switch (res->outcome) {
    case SLUICE_ADMITTED:
    case SLUICE_DUPLICATE:
        reply_json(c, 202, extra, "{\"id\":\"%s\",\"depth\":%lld,\"capacity\":%lld%s}\n", res->id,
                   res->depth, res->capacity,
                   res->outcome == SLUICE_DUPLICATE ? ",\"duplicate\":true" : "");
        break;
    case SLUICE_LIMITED: {
        /* draft-ietf-httpapi-ratelimit-headers: the policy (quota q per window w seconds) and
         * what is left of it now (r units, t seconds until the next one is allowed) */
        long long t = (res->retry_after_ms + 999) / 1000, q, w;
        policy_window(res->limit_count, res->limit_period_ms, &q, &w);
        snprintf(hdrs, sizeof(hdrs),
                 "Retry-After: %lld\r\nRateLimit-Policy: \"%s\";q=%lld;w=%lld\r\n"
                 "RateLimit: \"%s\";r=0;t=%lld\r\n%s",
                 t, res->limit, q, w, res->limit, t, extra);
        reply_json(c, 429, hdrs,
                   "{\"error\":\"rate limited\",\"limit\":\"%s\",\"retry_after_ms\":%lld,"
                   "\"retry_after\":%lld}\n",
                   res->limit, res->retry_after_ms, t);
        break;
    }
    case SLUICE_FULL:
        snprintf(hdrs, sizeof(hdrs), "Retry-After: %u\r\n%s", res->retry_after_s, extra);
        reply_json(c, 429, hdrs,
                   "{\"error\":\"queue full\",\"depth\":%lld,\"capacity\":%lld,"
                   "\"retry_after\":%u}\n",
                   res->depth, res->capacity, res->retry_after_s);
        break;
    default:
        answer_failure(c, res, extra);
        break;
    }
}

/* The entry of the client header that names the caller. HTTP joins the lines of a header into
 * one comma-separated list, and every proxy appends the address it was connected from, so the
 * entry trusted_proxies places from the right is the last one a proxy of ours wrote: what the
 * caller put to its left never counts. A shorter list gives its leftmost entry (each entry then
 * came from a proxy of ours). Empty entries are skipped, spaces around an entry dropped.
 * Returns 1 with *v and *vl set, 0 when the request has no such header, -1 when it has one
 * without any entry. */
static int client_hop(const sluice__http_req *c, const char **v, size_t *vl) {
    const gw_server *gw = gw_of(c);
    int want = gw->trusted_proxies, found = 0;
    size_t len;
    const char *s;
    *v = NULL;
    for (int line = 0; (s = sluice__http_header_from_end(c, gw->client_header, line, &len)) != NULL;
         line++) {
        found = 1;
        for (size_t end = len;;) {
            size_t start = end, a, b;
            while (start > 0 && s[start - 1] != ',') {
                start--;
            }
            for (a = start; a < end && (s[a] == ' ' || s[a] == '\t'); a++) {
            }
            for (b = end; b > a && (s[b - 1] == ' ' || s[b - 1] == '\t'); b--) {
            }
            if (b > a) {
                *v = s + a;
                *vl = b - a;
                if (--want == 0) {
                    return 1;
                }
            }
            if (start == 0) {
                break;
            }
            end = start - 1;
        }
    }
    return *v != NULL ? 1 : found ? -1 : 0;
}

/* The caller's key for `client` limits, from one of two spaces that never meet: "h:" and the
 * client header's entry (client_hop), or "ip:" and the peer's address when the request has no
 * such header (or no --client-header is set). Returns 0; -1 when the header's entry is not
 * 1..SLUICE_IDEMPOTENCY_KEY_MAX visible ASCII characters (or there is none); -2 when the header
 * is missing and --require-client-header is set. */
static int client_key(sluice__http_req *c, char *out, size_t len) {
    const gw_server *gw = gw_of(c);
    size_t vl = 0;
    const char *v = NULL;
    int hop = gw->client_header[0] ? client_hop(c, &v, &vl) : 0;
    if (hop < 0 || (hop > 0 && !visible(v, vl, SLUICE_IDEMPOTENCY_KEY_MAX))) {
        return -1;
    }
    if (hop > 0) {
        snprintf(out, len, "h:%.*s", (int)vl, v);
        return 0;
    }
    if (gw->client_header[0] && gw->require_client) {
        return -2;
    }
    char addr[64];
    sluice__http_peer(c, addr, sizeof(addr));
    snprintf(out, len, "ip:%s", addr);
    return 0;
}

static void post_message(sluice__http_req *c, gw_queue *q) {
    /* request headers that go into the envelope, where text must be UTF-8 */
    static const struct {
        const char *http, *name, *display;
    } carried[] = {{"x-request-id", "request-id", "X-Request-Id"},
                   {"content-type", "content-type", "Content-Type"}};
    gw_server *gw = gw_of(c);
    sluice_header h[2];
    size_t n = 0, len;
    char key[SLUICE_IDEMPOTENCY_KEY_MAX + 1];
    const char *v;
    for (size_t i = 0; i < sizeof(carried) / sizeof(carried[0]); i++) {
        if ((v = sluice__http_header(c, carried[i].http, &len)) == NULL) {
            continue;
        }
        if (!sluice_utf8_valid(v, len)) {
            reply_json(c, 400, NULL, "{\"error\":\"header %s is not valid UTF-8\"}\n",
                       carried[i].display);
            return;
        }
        h[n++] = (sluice_header){carried[i].name, strlen(carried[i].name), v, len};
    }
    const char *idem = NULL;
    if ((v = sluice__http_header(c, "idempotency-key", &len)) != NULL) {
        if (!visible(v, len, SLUICE_IDEMPOTENCY_KEY_MAX)) {
            reply_json(c, 400, NULL,
                       "{\"error\":\"Idempotency-Key must be 1-%d visible ASCII characters\"}\n",
                       SLUICE_IDEMPOTENCY_KEY_MAX);
            return;
        }
        memcpy(key, v, len);
        key[len] = '\0';
        idem = key;
    }
    char client[SLUICE_IDEMPOTENCY_KEY_MAX + 3];
    int ck = client_key(c, client, sizeof(client));
    if (ck == -2) {
        reply_json(c, 400, NULL, "{\"error\":\"header %s is required\"}\n", gw->client_header);
        return;
    }
    if (ck != 0) {
        reply_json(
            c, 400, NULL,
            "{\"error\":\"%s must be a list of entries of 1-%d visible ASCII characters\"}\n",
            gw->client_header, SLUICE_IDEMPOTENCY_KEY_MAX);
        return;
    }
    char tenant[SLUICE_IDEMPOTENCY_KEY_MAX + 1];
    const char *t = NULL;
    if (gw->tenant_header[0] && (v = sluice__http_header(c, gw->tenant_header, &len)) != NULL) {
        if (!visible(v, len, SLUICE_IDEMPOTENCY_KEY_MAX)) {
            reply_json(c, 400, NULL, "{\"error\":\"%s must be 1-%d visible ASCII characters\"}\n",
                       gw->tenant_header, SLUICE_IDEMPOTENCY_KEY_MAX);
            return;
        }
        memcpy(tenant, v, len);
        tenant[len] = '\0';
        t = tenant;
    }
    size_t blen;
    const char *body = sluice__http_body(c, &blen);
    sluice_message m = {body, blen, n > 0 ? h : NULL, n, t, idem, client};
    int st = sluice_aproducer_admit(q->ap, &m, on_admitted, c);
    if (st == 0) {
        sluice__http_hold(c);
        return;
    }
    sluice_admit_result res = {.outcome = SLUICE_FAILED, .status = st, .depth = -1, .capacity = -1};
    if (st == SLUICE_ETOOBIG || st == SLUICE_ENOMEM) { /* too many admissions waiting */
        res.status = SLUICE_EBUSY;
    }
    observe_latency(gw, sluice__http_started_ns(c));
    answer_failure(c, &res, "");
}

/* ---------------------------------------------------------------------------------------- */
/* GET /v1/queues/{queue}, /healthz                                                         */

static void on_info(sluice_aproducer *ap, int status, const sluice_queue_info *in, void *arg) {
    sluice__http_req *c = arg;
    if (sluice__http_release(c)) {
        return;
    }
    if (status != 0) {
        reply_json(c, 503, "Retry-After: 1\r\n",
                   "{\"error\":\"redis unavailable\",\"detail\":\"%s\"}\n",
                   sluice_strerror(status));
        return;
    }
    char rate[32];
    if (in->drain_rate >= 0) {
        snprintf(rate, sizeof(rate), "%.3f", in->drain_rate);
    } else {
        snprintf(rate, sizeof(rate), "null");
    }
    long long depth = in->depth, cap = in->capacity;
    char limits[SLUICE_QUEUE_INFO_LIMITS * 240 + 2] = "[", *p = limits + 1;
    for (size_t i = 0; i < in->nlimits && i < SLUICE_QUEUE_INFO_LIMITS; i++) {
        const sluice_queue_limit *l = &in->limits[i]; /* names, scopes, specs: plain ASCII */
        p += snprintf(p, sizeof(limits) - (size_t)(p - limits) - 1,
                      "%s{\"name\":\"%s\",\"scope\":\"%s\",\"spec\":\"%s\",\"refused\":%lld}",
                      i ? "," : "", l->name, l->scope, l->spec, l->refused);
    }
    snprintf(p, sizeof(limits) - (size_t)(p - limits), "]");
    /* a partitioned queue: the figures above are the totals of the partitions that could be
     * read, and each partition's follow, an unreadable one marked with why */
    char parts[SLUICE_QUEUE_INFO_PARTS * 120 + 48] = "", *pp = parts;
    for (int i = 0; in->partitions > 1 && i < in->partitions && i < SLUICE_QUEUE_INFO_PARTS; i++) {
        const sluice_queue_part *qp = &in->parts[i];
        const char *sep = i ? "," : ",\"by_partition\":[";
        size_t room = sizeof(parts) - (size_t)(pp - parts) - 32;
        pp += qp->status != 0
                  ? snprintf(pp, room,
                             "%s{\"depth\":null,\"capacity\":null,\"pending\":null,"
                             "\"unavailable\":\"%s\"}",
                             sep, sluice_strerror(qp->status))
                  : snprintf(pp, room, "%s{\"depth\":%lld,\"capacity\":%lld,\"pending\":%lld}", sep,
                             qp->depth, qp->capacity, qp->pending);
    }
    if (pp != parts) {
        snprintf(pp, sizeof(parts) - (size_t)(pp - parts), "],\"unavailable\":%d", in->unavailable);
    }
    sluice_text b = {.max = 1u << 20};
    sluice_text_printf(&b,
                       "{\"queue\":\"%s\",\"depth\":%lld,\"capacity\":%lld,\"pending\":%lld,"
                       "\"consumers\":%lld,\"admitted\":%lld,\"rejected\":%lld,\"acked\":%lld,"
                       "\"retried\":%lld,\"dead\":%lld,\"drain_rate\":%s,\"full\":%s,"
                       "\"retry_after\":%u,\"limited\":%lld,\"limits_total\":%zu,\"limits\":%s,"
                       "\"paused\":%s,\"partitions\":%d%s,\"waiting\":%lld,\"in_flight\":%lld",
                       sluice_aproducer_queue(ap), depth, cap, in->pending, in->consumers,
                       in->admitted, in->rejected, in->acked, in->retried, in->dead, rate,
                       depth >= cap ? "true" : "false",
                       depth >= cap ? sluice_aproducer_retry_after(ap, depth, cap) : 0, in->limited,
                       in->nlimits, limits, in->paused > 0 ? "true" : "false", in->partitions,
                       parts, depth > in->pending ? depth - in->pending : 0, in->pending);
    const char *qn = sluice_aproducer_queue(ap);
    gw_dash_answer_detail(c, gw_find_queue(gw_of(c), qn, strlen(qn)), &b);
}

static void get_queue(sluice__http_req *c, gw_queue *q) {
    int st = sluice_aproducer_info(q->ap, on_info, c);
    if (st == 0) {
        sluice__http_hold(c);
        return;
    }
    reply_json(c, 503, "Retry-After: 1\r\n",
               "{\"error\":\"redis unavailable\",\"detail\":\"%s\"}\n", sluice_strerror(st));
}

static void healthz(sluice__http_req *c) {
    gw_server *s = gw_of(c);
    char body[JSON_MAX];
    size_t len = 0;
    int up = 1;
    len += (size_t)snprintf(body, sizeof(body), "{\"queues\":{");
    for (size_t i = 0; i < s->nqueues && len < sizeof(body) - 128; i++) {
        int ready = sluice_aproducer_ready(s->queues[i].ap);
        up &= ready;
        len += (size_t)snprintf(body + len, sizeof(body) - len, "%s\"%s\":\"%s\"", i ? "," : "",
                                s->queues[i].name, ready ? "up" : "down");
    }
    len += (size_t)snprintf(body + len, sizeof(body) - len, "},\"status\":\"%s\"}\n",
                            up ? "ok" : "redis unavailable");
    sluice__http_respond(c, up ? 200 : 503, "application/json", up ? NULL : "Retry-After: 1\r\n",
                         body, len, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* GET /metrics                                                                             */

static void metrics_http(sluice_text *b, const gw_server *s) {
    sluice__http_stats st;
    sluice__http_get_stats(s->http, &st);
    sluice_text_printf(b,
                       "# HELP sluice_gateway_http_responses_total HTTP responses by status code.\n"
                       "# TYPE sluice_gateway_http_responses_total counter\n");
    for (int code = 100; code < 600; code++) {
        if (s->m.by_code[code] > 0) {
            sluice_text_printf(b, "sluice_gateway_http_responses_total{code=\"%d\"} %llu\n", code,
                               s->m.by_code[code]);
        }
    }
    sluice_text_printf(b,
                       "# HELP sluice_gateway_connections Open client connections.\n"
                       "# TYPE sluice_gateway_connections gauge\nsluice_gateway_connections %zu\n"
                       "# HELP sluice_gateway_connections_total Client connections accepted.\n"
                       "# TYPE sluice_gateway_connections_total counter\n"
                       "sluice_gateway_connections_total %llu\n"
                       "# HELP sluice_gateway_connections_refused_total Connections refused over "
                       "--max-connections.\n"
                       "# TYPE sluice_gateway_connections_refused_total counter\n"
                       "sluice_gateway_connections_refused_total %llu\n",
                       st.open, st.accepted, st.refused);
    sluice_text_printf(
        b, "# HELP sluice_gateway_admission_duration_seconds From a complete POST to its "
           "answer.\n# TYPE sluice_gateway_admission_duration_seconds histogram\n");
    unsigned long long cum = 0;
    for (int i = 0; i < GW_LAT_BUCKETS; i++) {
        cum += s->m.lat[i];
        if (i < GW_LAT_BUCKETS - 1) {
            sluice_text_printf(b,
                               "sluice_gateway_admission_duration_seconds_bucket{le=\"%g\"} %llu\n",
                               lat_bounds[i], cum);
        } else {
            sluice_text_printf(
                b, "sluice_gateway_admission_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
        }
    }
    sluice_text_printf(b,
                       "sluice_gateway_admission_duration_seconds_sum %.6f\n"
                       "sluice_gateway_admission_duration_seconds_count %llu\n",
                       s->m.lat_sum, s->m.lat_count);
}

static void metrics_queues(sluice_text *b, const gw_server *s) {
    static const char *const names[] = {"admitted", "duplicate", "full",
                                        "limited",  "failed",    "unknown"};
    sluice_text_printf(b, "# HELP sluice_gateway_admissions_total Admission outcomes by queue "
                          "(unknown: reply lost, counted in failed too).\n"
                          "# TYPE sluice_gateway_admissions_total counter\n");
    for (size_t i = 0; i < s->nqueues; i++) {
        sluice_aproducer_counters k;
        sluice_aproducer_get_counters(s->queues[i].ap, &k);
        unsigned long long v[] = {k.admitted, k.duplicate, k.full, k.limited, k.failed, k.unknown};
        for (int j = 0; j < 6; j++) {
            sluice_text_printf(
                b, "sluice_gateway_admissions_total{queue=\"%s\",outcome=\"%s\"} %llu\n",
                s->queues[i].name, names[j], v[j]);
        }
    }
    sluice_text_printf(b,
                       "# HELP sluice_gateway_limited_total Admissions refused by a rate limit, by "
                       "limit name (sluice-admin limit).\n"
                       "# TYPE sluice_gateway_limited_total counter\n");
    for (size_t i = 0; i < s->nqueues; i++) {
        for (int j = 0; j < s->queues[i].nlimited; j++) {
            sluice_text_printf(b, "sluice_gateway_limited_total{queue=\"%s\",limit=\"%s\"} %llu\n",
                               s->queues[i].name, s->queues[i].limited[j].name,
                               s->queues[i].limited[j].n);
        }
    }
    sluice_text_printf(b,
                       "# HELP sluice_gateway_redis_calls_total Admission calls written to Redis "
                       "(each carries one or more admissions).\n"
                       "# TYPE sluice_gateway_redis_calls_total counter\n");
    for (size_t i = 0; i < s->nqueues; i++) {
        sluice_aproducer_counters k;
        sluice_aproducer_get_counters(s->queues[i].ap, &k);
        sluice_text_printf(b, "sluice_gateway_redis_calls_total{queue=\"%s\"} %llu\n",
                           s->queues[i].name, k.calls);
    }
    sluice_text_printf(
        b, "# HELP sluice_gateway_redis_up 1 when the queue's Redis connection is ready.\n"
           "# TYPE sluice_gateway_redis_up gauge\n");
    for (size_t i = 0; i < s->nqueues; i++) {
        sluice_text_printf(b, "sluice_gateway_redis_up{queue=\"%s\"} %d\n", s->queues[i].name,
                           sluice_aproducer_ready(s->queues[i].ap));
    }
    sluice_text_printf(b,
                       "# HELP sluice_gateway_drain_rate Smoothed acks per second (-1: unknown).\n"
                       "# TYPE sluice_gateway_drain_rate gauge\n");
    for (size_t i = 0; i < s->nqueues; i++) {
        double r = sluice_aproducer_drain_rate(s->queues[i].ap);
        sluice_text_printf(b, "sluice_gateway_drain_rate{queue=\"%s\"} %.3f\n", s->queues[i].name,
                           r < 0 ? -1.0 : r);
    }
}

static void metrics(sluice__http_req *c) {
    sluice_text b = {.max = METRICS_MAX}; /* a whole page or a 500 */
    gw_server *s = gw_of(c);
    metrics_http(&b, s);
    metrics_queues(&b, s);
    if (b.failed) {
        reply_json(c, 500, NULL, "{\"error\":\"metrics too large\"}\n");
    } else {
        sluice__http_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.p, b.len,
                             0);
    }
    sluice_text_free(&b);
}

/* ---------------------------------------------------------------------------------------- */
/* Routing                                                                                  */

static int is_get(const sluice__http_req *c) {
    return sluice__http_method(c) == HTTP_GET || sluice__http_method(c) == HTTP_HEAD;
}

/* GET .../messages, .../messages/{id}, .../dead: the payloads, behind the admin token. */
static void read_entries(sluice__http_req *c, gw_queue *q, const char *sub, size_t len) {
    gw_server *s = gw_of(c);
    if (gw_dash_authorized(c, s) == 0) {
        gw_entries_read(c, s, q, sub, len);
    }
}

/* /v1/queues/{queue} and /v1/queues/{queue}/messages; rest = what follows "/v1/queues/". */
static void route_queue(sluice__http_req *c, const char *rest, size_t len) {
    const char *slash = memchr(rest, '/', len);
    size_t nl = slash ? (size_t)(slash - rest) : len;
    gw_queue *q = gw_find_queue(gw_of(c), rest, nl);
    if (q == NULL) {
        not_found(c);
    } else if (slash == NULL) {
        if (is_get(c)) {
            get_queue(c, q);
        } else {
            not_allowed(c, "GET, HEAD");
        }
    } else if (sluice__http_path_is(slash, len - nl, "/messages")) {
        if (sluice__http_method(c) == HTTP_POST) {
            post_message(c, q);
        } else if (is_get(c)) {
            read_entries(c, q, slash, len - nl);
        } else {
            not_allowed(c, "GET, HEAD, POST");
        }
    } else if (sluice__http_path_is(slash, len - nl, "/dead") ||
               (len - nl > 10 && memcmp(slash, "/messages/", 10) == 0)) {
        if (is_get(c)) {
            read_entries(c, q, slash, len - nl);
        } else {
            not_allowed(c, "GET, HEAD");
        }
    } else {
        not_found(c);
    }
}

void gw_route(sluice__http_req *c, void *arg) {
    size_t plen;
    const char *path = sluice__http_path(c, &plen);
    if (path == NULL) {
        reply_json(c, 400, NULL, "{\"error\":\"malformed request target\"}\n");
        return;
    }
    static const char prefix[] = "/v1/queues/";
    if (sluice__http_path_is(path, plen, "/healthz") ||
        sluice__http_path_is(path, plen, "/metrics")) {
        if (!is_get(c)) {
            not_allowed(c, "GET, HEAD");
        } else if (path[1] == 'h') {
            healthz(c);
        } else {
            metrics(c);
        }
    } else if (plen > sizeof(prefix) - 1 && memcmp(path, prefix, sizeof(prefix) - 1) == 0) {
        route_queue(c, path + sizeof(prefix) - 1, plen - (sizeof(prefix) - 1));
    } else if (!gw_dash_route(c, path, plen)) {
        not_found(c);
    }
}
