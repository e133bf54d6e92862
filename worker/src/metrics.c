/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - sluice-worker's Prometheus endpoint (see metrics.h).
 *
 * Three parts: the HTTP responder (sluice/http_responder.h, one request per connection, at most
 * HTTP_MAX_CLIENTS connections, HTTP_REQ_MAX bytes of request head within HTTP_TIMEOUT_MS)
 * answers GET or HEAD /metrics with the text exposition format 0.0.4 written here, /healthz, 404
 * for any other path, 405 for another method; the poller reads the
 * queue figures (sluice/figures.h) on a connection of its own; the life cycle follows the
 * worker's.
 *
 * Exposed: the worker's counters (processed, failed, retried, dead, reclaimed, read, redis
 * errors), in flight, the handler latency histogram (buckets sluice_worker_latency_bounds), and
 * what an autoscaler needs about the queue: depth, lag (waiting: not yet delivered to any
 * worker), pending (in flight) and dead, with the meanings of sluice/figures.h. They come from
 * a query every QUERY_MS and are left out when the last answer is older than STALE_MS, so a
 * scaler never acts on a stale number.
 *
 * The workers are a pool's (sluice_worker_pool): on a partitioned queue they run on threads of
 * their own, their counters come as the pool's sum, the queue figures are read from every
 * partition (a connection each: on a Redis Cluster they sit on different nodes) and exposed as
 * the queue's totals plus one series per partition (sluice_queue_partition_depth, _lag,
 * _pending).
 *
 * Life cycle: every handle here is unref'd (they never keep the loop alive on their own), and
 * the module closes itself as soon as the pool starts closing (checked every loop iteration
 * and every QUERY_MS), because its Redis connection's handles are ref'd and would otherwise keep
 * sluice_worker_pool_run() from returning. sw_metrics_stop() frees it once libuv closed all.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/buf.h"
#include "sluice/cli.h"
#include "sluice/client.h"
#include "sluice/figures.h"
#include "sluice/http_responder.h"
#include "sluice/log.h"
#include "sluice/redis.h"

#include "metrics.h"

#define QUERY_MS 1000 /* queue figures refresh */
#define STALE_MS 5000 /* older queue figures are not exposed */

#define HTTP_REQ_MAX     8192  /* bytes of one request's head (431 beyond) */
#define HTTP_MAX_CLIENTS 64    /* connections open at once; more are closed on accept */
#define HTTP_TIMEOUT_MS  5000  /* to receive a whole request */
#define HTTP_BODY_MAX    65536 /* bytes of one response body */

/* One queue whose figures are read: the worker's, or one partition of a partitioned queue. */
typedef struct mqueue {
    sluice_keys keys;
    sluice_aconn *conn;   /* its queries */
    sluice_figures round; /* the figures of the current round */
    sluice_figures q;     /* the last complete round's */
    struct query_part {
        sluice_metrics *m;
        struct mqueue *mq;
        size_t i;
    } parts[SLUICE_FIGURES_MAX_CMDS];
} mqueue;

struct sluice_metrics {
    uv_loop_t *loop;
    sluice_worker_pool *pool;         /* the workers; its closing closes the module */
    const sluice_url *url;            /* the workers' Redis */
    const sluice_conn_options *tls;   /* its TLS options (borrowed: the worker's), or NULL */
    sluice_worker_info info;          /* of the pool (partition 0) */
    mqueue mq[SLUICE_PARTITIONS_MAX]; /* [0, nq) */
    int nq;                           /* queues read: 1, or the partitions */
    sluice__http_server *http;        /* GET /metrics, /healthz */
    uv_timer_t tick;                  /* queue query + shutdown check */
    uv_check_t watch;                 /* notices the worker closing */
    int handles; /* our own handles, the HTTP server and the connections, not yet closed */
    int closing, stop_called;
    int querying;     /* replies still to come in the current query round */
    int round_failed; /* one of them failed */
    sluice_figures q; /* the last complete round's totals */
    uint64_t q_at_ms; /* when the last complete answer came (0 = never) */
    unsigned long long q_errors;
    char label_consumer[300]; /* escaped label value */
    char label_group[300];    /* escaped label value */
};

/* ---- exposition ---- */

/* A label value with \, " and newline escaped. */
static void escape_label(char *out, size_t len, const char *s) {
    size_t n = 0;
    for (; *s != '\0' && n + 3 < len; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            out[n++] = '\\';
            out[n++] = *s == '\n' ? 'n' : *s;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
}

/* The workers' counters, summed over the partitions. */
static void worker_stats(const sluice_metrics *m, sluice_worker_stats *s) {
    sluice_worker_pool_get_stats(m->pool, s);
}

static void counter(sluice_text *b, const sluice_metrics *m, const char *name, const char *help,
                    unsigned long long v) {
    sluice_text_printf(b, "# HELP sluice_worker_%s %s\n# TYPE sluice_worker_%s counter\n", name,
                       help, name);
    sluice_text_printf(b, "sluice_worker_%s{queue=\"%s\",consumer=\"%s\"} %llu\n", name,
                       m->info.queue, m->label_consumer, v);
}

static void histogram(sluice_text *b, const sluice_metrics *m, const sluice_worker_stats *s) {
    const char *l = "sluice_worker_handler_seconds";
    unsigned long long cum = 0;
    sluice_text_printf(b, "# HELP %s Time from handing a message to the handler to its verdict.\n",
                       l);
    sluice_text_printf(b, "# TYPE %s histogram\n", l);
    for (int i = 0; i < SLUICE_WORKER_LATENCY_BUCKETS; i++) {
        char le[32];
        cum += s->latency_buckets[i];
        if (i < SLUICE_WORKER_LATENCY_BUCKETS - 1) {
            snprintf(le, sizeof(le), "%g", sluice_worker_latency_bounds[i]);
        } else {
            snprintf(le, sizeof(le), "+Inf");
        }
        sluice_text_printf(b, "%s_bucket{queue=\"%s\",consumer=\"%s\",le=\"%s\"} %llu\n", l,
                           m->info.queue, m->label_consumer, le, cum);
    }
    sluice_text_printf(b, "%s_sum{queue=\"%s\",consumer=\"%s\"} %.6f\n", l, m->info.queue,
                       m->label_consumer, s->latency_sum_s);
    sluice_text_printf(b, "%s_count{queue=\"%s\",consumer=\"%s\"} %llu\n", l, m->info.queue,
                       m->label_consumer, cum);
}

static void queue_gauge(sluice_text *b, const sluice_metrics *m, const char *name, const char *help,
                        long long v) {
    sluice_text_printf(b, "# HELP sluice_queue_%s %s\n# TYPE sluice_queue_%s gauge\n", name, help,
                       name);
    sluice_text_printf(b, "sluice_queue_%s{queue=\"%s\",group=\"%s\"} %lld\n", name, m->info.queue,
                       m->label_group, v);
}

/* The queue's own counters (its stats hash, every producer and worker of it), as counters. */
static void queue_counters(sluice_text *b, const sluice_metrics *m) {
    static const char *const help[SLUICE_COUNTER_COUNT_] = {
        [SLUICE_COUNTER_ADMITTED] = "Messages admitted into the bucket, by every producer.",
        [SLUICE_COUNTER_REJECTED] = "Admissions refused because the bucket was full.",
        [SLUICE_COUNTER_ACKED] = "Messages acknowledged, by every worker.",
        [SLUICE_COUNTER_RETRIED] = "Messages given back for a retry.",
        [SLUICE_COUNTER_DEAD] = "Messages moved to the dead stream.",
        [SLUICE_COUNTER_RECLAIMED] = "Entries claimed from other consumers.",
        [SLUICE_COUNTER_LIMITED] = ("Admissions refused by a rate limit (all limits; by name: "
                                    "sluice-admin limit QUEUE list, the gateway's /metrics)."),
    };
    for (int c = 0; c < SLUICE_COUNTER_COUNT_; c++) {
        const char *name = sluice_counter_name((sluice_counter)c);
        sluice_text_printf(b,
                           "# HELP sluice_queue_%s_total %s\n# TYPE sluice_queue_%s_total counter\n"
                           "sluice_queue_%s_total{queue=\"%s\",group=\"%s\"} %lld\n",
                           name, help[c], name, name, m->info.queue, m->label_group,
                           m->q.counters[c]);
    }
}

static void queue_metrics(sluice_text *b, const sluice_metrics *m) {
    int fresh = m->q_at_ms != 0 && sluice_now_ms() - m->q_at_ms <= STALE_MS;
    sluice_text_printf(b,
                       "# HELP sluice_worker_queue_query_errors_total Failed depth/lag queries.\n");
    sluice_text_printf(b, "# TYPE sluice_worker_queue_query_errors_total counter\n");
    sluice_text_printf(
        b, "sluice_worker_queue_query_errors_total{queue=\"%s\",consumer=\"%s\"} %llu\n",
        m->info.queue, m->label_consumer, m->q_errors);
    if (!fresh) {
        return; /* absent rather than stale */
    }
    queue_gauge(b, m, "depth", "Entries in the bucket: waiting + in flight.", m->q.depth);
    queue_gauge(b, m, "lag", "Entries waiting: not yet delivered to any worker.", m->q.waiting);
    queue_gauge(b, m, "pending", "Entries in flight: delivered, not yet acknowledged.",
                m->q.in_flight);
    queue_gauge(b, m, "dead", "Dead letters held.", m->q.dead);
    queue_gauge(b, m, "paused",
                "1 while the queue is paused (sluice-admin pause: workers take no new entries).",
                m->q.paused > 0);
    queue_gauge(b, m, "lane_depth",
                "Of depth, entries in the tenant lanes of a fair queue (per tenant: sluice-admin "
                "fair QUEUE).",
                m->q.lanes_depth);
    queue_gauge(b, m, "lane_pending", "Of pending, entries delivered from the tenant lanes.",
                m->q.lanes_in_flight);
    if (m->q.capacity >= 0) { /* absent while no capacity is set */
        queue_gauge(b, m, "capacity", "The bucket's capacity (sluice-admin capacity).",
                    m->q.capacity);
    }
    queue_gauge(b, m, "consumers", "Consumers of the queue's group (list: processing lists).",
                m->q.consumers);
    queue_counters(b, m);
    if (m->nq > 1) {
        static const struct {
            const char *name, *help;
        } per[] = {{"depth", "One partition's depth (sluice_queue_depth is their sum)."},
                   {"lag", "One partition's waiting entries."},
                   {"pending", "One partition's entries in flight."}};
        for (size_t k = 0; k < sizeof(per) / sizeof(per[0]); k++) {
            sluice_text_printf(b,
                               "# HELP sluice_queue_partition_%s %s\n"
                               "# TYPE sluice_queue_partition_%s gauge\n",
                               per[k].name, per[k].help, per[k].name);
            for (int i = 0; i < m->nq; i++) {
                const sluice_figures *f = &m->mq[i].q;
                long long v = k == 0 ? f->depth : k == 1 ? f->waiting : f->in_flight;
                sluice_text_printf(
                    b,
                    "sluice_queue_partition_%s{queue=\"%s\",group=\"%s\",partition=\"%d\"} %lld\n",
                    per[k].name, m->info.queue, m->label_group, i, v);
            }
        }
    }
    sluice_text_printf(b,
                       "# HELP sluice_queue_age_seconds Age of the depth/lag/pending figures.\n");
    sluice_text_printf(b, "# TYPE sluice_queue_age_seconds gauge\n");
    sluice_text_printf(b, "sluice_queue_age_seconds{queue=\"%s\",group=\"%s\"} %.3f\n",
                       m->info.queue, m->label_group,
                       (double)(sluice_now_ms() - m->q_at_ms) / 1000.0);
}

static const sluice_http *http_target;

void sw_metrics_http(const sluice_http *h) {
    http_target = h;
}

/* The HTTP handler's deliveries by answer (docs/delivery.md's verdict table) and its holds. */
static void http_metrics(sluice_text *b, const sluice_metrics *m) {
    if (http_target == NULL) {
        return;
    }
    sluice_http_stats h;
    sluice_http_get_stats(http_target, &h);
    const struct {
        const char *result;
        unsigned long long v;
    } rows[] = {{"ok", h.ok},
                {"throttled", h.throttled},
                {"server_error", h.server_error},
                {"rejected", h.rejected},
                {"redirect", h.redirect},
                {"connect_error", h.connect_error},
                {"tls_error", h.tls_error},
                {"timeout", h.timeout}};
    const char *l = "sluice_worker_http_deliveries_total";
    sluice_text_printf(b,
                       "# HELP %s HTTP deliveries by answer: ok done; throttled, server_error, "
                       "connect_error, tls_error, timeout retried; rejected, redirect dead.\n"
                       "# TYPE %s counter\n",
                       l, l);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        sluice_text_printf(b, "%s{queue=\"%s\",consumer=\"%s\",result=\"%s\"} %llu\n", l,
                           m->info.queue, m->label_consumer, rows[i].result, rows[i].v);
    }
    counter(b, m, "http_holds_total",
            "Answers with Retry-After that held the queue's deliveries to the target.", h.holds);
    sluice_text_printf(
        b,
        "# HELP sluice_worker_http_held_seconds_total Time reads and requests waited for a "
        "Retry-After hold or an unreachable target.\n# TYPE sluice_worker_http_held_seconds_total "
        "counter\n"
        "sluice_worker_http_held_seconds_total{queue=\"%s\",consumer=\"%s\"} %.3f\n",
        m->info.queue, m->label_consumer, (double)h.held_ms / 1000.0);
}

/* The limit of in-flight messages (fixed or adaptive): the sum over the pool's workers (one, or
 * one per partition, each adapting on its own). */
static void concurrency_limit(sluice_text *b, const sluice_metrics *m) {
    sluice_text_printf(b,
                       "# HELP sluice_worker_concurrency_limit Messages let into the handler at "
                       "once (--concurrency, or its adaptive limit).\n"
                       "# TYPE sluice_worker_concurrency_limit gauge\n"
                       "sluice_worker_concurrency_limit{queue=\"%s\",consumer=\"%s\"} %d\n",
                       m->info.queue, m->label_consumer,
                       sluice_worker_pool_concurrency_limit(m->pool));
}

static void render(sluice_text *b, const sluice_metrics *m) {
    sluice_worker_stats s;
    worker_stats(m, &s);
    counter(b, m, "processed_total", "Messages processed (DONE) and acknowledged.", s.processed);
    counter(b, m, "failed_total", "FAIL verdicts.", s.failed);
    counter(b, m, "retried_total", "RETRY verdicts.", s.retried);
    counter(b, m, "dead_total", "Entries this worker moved to the dead stream.", s.dead);
    counter(b, m, "reclaimed_total", "Entries claimed from other consumers.", s.reclaimed);
    counter(b, m, "read_total", "Entries read.", s.read);
    counter(b, m, "redis_errors_total", "Failed Redis calls.", s.redis_errors);
    sluice_text_printf(
        b,
        "# HELP sluice_worker_paced_wait_seconds_total Time reads waited for a drain "
        "limit's next allowance.\n# TYPE sluice_worker_paced_wait_seconds_total counter\n"
        "sluice_worker_paced_wait_seconds_total{queue=\"%s\",consumer=\"%s\"} %.3f\n",
        m->info.queue, m->label_consumer, (double)s.paced_wait_ms / 1000.0);
    sluice_text_printf(b,
                       "# HELP sluice_worker_in_flight Messages read and not yet acknowledged.\n");
    sluice_text_printf(b, "# TYPE sluice_worker_in_flight gauge\n");
    sluice_text_printf(b, "sluice_worker_in_flight{queue=\"%s\",consumer=\"%s\"} %d\n",
                       m->info.queue, m->label_consumer, s.in_flight);
    concurrency_limit(b, m);
    histogram(b, m, &s);
    http_metrics(b, m);
    queue_metrics(b, m);
}

/* ---- routes ---- */

static void maybe_free(sluice_metrics *m) {
    if (m->stop_called && m->handles == 0) {
        free(m);
    }
}

static void respond_text(sluice__http_req *req, int status, const char *msg) {
    sluice__http_respond(req, status, "text/plain; charset=utf-8", NULL, msg, strlen(msg), 0);
}

static void route(sluice__http_req *req, void *arg) {
    sluice_metrics *m = arg;
    int method = sluice__http_method(req);
    size_t len;
    const char *path = sluice__http_path(req, &len);
    if (path == NULL) {
        respond_text(req, 400, "bad request\n");
    } else if (method != HTTP_GET && method != HTTP_HEAD) {
        respond_text(req, 405, "method not allowed\n");
    } else if (sluice__http_path_is(path, len, "/healthz")) {
        /* live while the worker runs; ready while its figures from Redis are fresh */
        int fresh = m->q_at_ms != 0 && sluice_now_ms() - m->q_at_ms <= STALE_MS;
        respond_text(req, fresh ? 200 : 503,
                     fresh ? "ok\n" : "redis unreachable: figures are stale\n");
    } else if (!sluice__http_path_is(path, len, "/metrics")) {
        respond_text(req, 404, "not found: try /metrics or /healthz\n");
    } else {
        sluice_text body = {.max = HTTP_BODY_MAX}; /* a whole page or a 500 */
        render(&body, m);
        if (body.failed) {
            respond_text(req, 500, "metrics too large\n");
        } else {
            sluice__http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, body.p,
                                 body.len, 0);
        }
        sluice_text_free(&body);
    }
}

/* Listens on `addr` ("HOST:PORT") and logs the address it got. Returns 0 or -1 with a message. */
static int start_http(sluice_metrics *m, const char *addr, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    if (sluice_listen_addr_parse("--metrics", addr, &ss, err, errlen) != 0) {
        return -1;
    }
    sluice__http_options o;
    sluice__http_options_init(&o);
    o.max_body = HTTP_REQ_MAX;
    o.max_header_line = o.max_headers_total = o.max_url = HTTP_REQ_MAX;
    o.max_connections = HTTP_MAX_CLIENTS;
    o.header_timeout_ms = o.body_timeout_ms = o.idle_timeout_ms = HTTP_TIMEOUT_MS;
    o.backlog = 128;
    o.close_each = o.silent_refuse = o.unref = 1;
    o.server_name = "sluice-worker";
    int rc = sluice__http_listen(m->loop, (const struct sockaddr *)&ss, &o, route, m, &m->http);
    if (rc != 0) {
        snprintf(err, errlen, "--metrics: cannot listen on %s: %s", addr, uv_strerror(rc));
        return -1;
    }
    char ip[64];
    int port;
    sluice__http_address(m->http, ip, sizeof(ip), &port);
    SLUICE_LOG(SLUICE_LOG_INFO, "event=metrics_listening addr=%s port=%d path=/metrics", ip, port);
    return 0;
}

/* ---- queue figures ---- */

/* The totals of the partitions' figures (one queue: its own). */
static void figures_total(sluice_metrics *m) {
    sluice_figures *t = &m->q;
    *t = m->mq[0].round;
    for (int i = 1; i < m->nq; i++) {
        const sluice_figures *f = &m->mq[i].round;
        t->depth += f->depth, t->in_flight += f->in_flight, t->waiting += f->waiting;
        t->dead += f->dead, t->lanes_depth += f->lanes_depth;
        t->lanes_in_flight += f->lanes_in_flight, t->paused += f->paused;
        t->consumers = f->consumers > t->consumers ? f->consumers : t->consumers;
        t->capacity =
            t->capacity >= 0 && f->capacity >= 0 ? t->capacity + f->capacity : SLUICE_FIGURE_UNSET;
        for (int c = 0; c < SLUICE_COUNTER_COUNT_; c++) {
            t->counters[c] += f->counters[c];
        }
    }
}

/* Counts one reply of the current round; the round counts once all its replies are in (of
 * every partition). */
static void query_done(sluice_metrics *m, int ok) {
    m->round_failed |= !ok;
    if (--m->querying > 0) {
        return;
    }
    if (m->round_failed) {
        m->q_errors++;
        return;
    }
    for (int i = 0; i < m->nq; i++) {
        sluice_figures_finish(&m->mq[i].round, m->info.backend);
        m->mq[i].q = m->mq[i].round;
    }
    figures_total(m);
    m->q_at_ms = sluice_now_ms();
}

static void on_figure(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    (void)sent;
    struct query_part *part = arg;
    sluice_metrics *m = part->m;
    if (status == SLUICE_ECANCELED) {
        return;
    }
    if (r != NULL && (status == 0 || r->type == REDIS_REPLY_ERROR)) {
        status = sluice_figures_parse(&part->mq->round, m->info.backend, m->info.group, part->i, r);
    }
    query_done(m, status == 0);
}

/* Queue i: its keys and a connection of its own (no library load: plain reads). 0 or -1. */
static int mqueue_open(sluice_metrics *m, int i) {
    mqueue *mq = &m->mq[i];
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    if (sluice_partition_name(m->info.queue, i, name, sizeof(name)) != 0 ||
        sluice_keys_init(&mq->keys, name, NULL, 0) != 0) {
        return -1;
    }
    sluice_conn_options co;
    sluice_conn_options_init(&co);
    sluice__client_tls(&co, m->tls);
    co.no_load = 1;
    co.name = "metrics";
    co.queue = name;
    mq->conn = sluice_aconn_new(m->loop, m->url, &co, NULL, NULL);
    if (mq->conn == NULL) {
        return -1;
    }
    m->handles++;
    m->nq = i + 1;
    return 0;
}

static void query(sluice_metrics *m) {
    if (m->querying > 0) {
        return;
    }
    int want = sluice_worker_pool_partitions(m->pool);
    while (m->nq < want && mqueue_open(m, m->nq) == 0) {
    }
    if (m->nq < want) {
        m->q_errors++; /* out of memory: no figures rather than some partitions' */
        return;
    }
    for (int i = 0; i < m->nq; i++) {
        if (!sluice_aconn_ready(m->mq[i].conn)) {
            m->q_errors++; /* Redis unreachable: the figures age out after STALE_MS */
            return;
        }
    }
    m->round_failed = 0;
    m->querying = 1; /* held until every command is queued */
    for (int q = 0; q < m->nq; q++) {
        mqueue *mq = &m->mq[q];
        sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS];
        size_t n = sluice_figures_commands(&mq->keys, m->info.backend, cmds);
        sluice_figures_init(&mq->round);
        for (size_t i = 0; i < n; i++) {
            mq->parts[i] = (struct query_part){m, mq, i};
            if (sluice_aconn_command(mq->conn, cmds[i].argc, cmds[i].argv, NULL, QUERY_MS,
                                     on_figure, &mq->parts[i]) == 0) {
                m->querying++;
            } else {
                m->round_failed = 1;
            }
        }
    }
    query_done(m, 1);
}

/* ---- life cycle ---- */

static void handle_closed(uv_handle_t *h) {
    sluice_metrics *m = h->data;
    m->handles--;
    maybe_free(m);
}

static void conn_closed(void *arg) {
    sluice_metrics *m = arg;
    m->handles--;
    maybe_free(m);
}

static void http_closed(void *arg) {
    conn_closed(arg);
}

/* Closes everything; the memory goes once the last handle is closed and stop was called. */
static void shut(sluice_metrics *m) {
    if (m->closing) {
        return;
    }
    m->closing = 1;
    uv_close((uv_handle_t *)&m->tick, handle_closed);
    uv_close((uv_handle_t *)&m->watch, handle_closed);
    if (m->http != NULL) {
        sluice__http_close(m->http, http_closed, m);
        m->http = NULL;
    }
    for (int i = 0; i < m->nq; i++) {
        sluice_aconn_close(m->mq[i].conn, conn_closed, m);
        m->mq[i].conn = NULL;
    }
}

static int pool_closing(sluice_metrics *m) {
    sluice_worker_info info;
    sluice_worker_pool_get_info(m->pool, &info);
    return info.stopping == 2;
}

static void on_watch(uv_check_t *h) {
    sluice_metrics *m = h->data;
    if (pool_closing(m)) {
        shut(m);
    }
}

static void on_tick(uv_timer_t *t) {
    sluice_metrics *m = t->data;
    if (pool_closing(m)) {
        shut(m);
    } else {
        query(m);
    }
}

static void init_handles(sluice_metrics *m) {
    uv_timer_init(m->loop, &m->tick);
    uv_check_init(m->loop, &m->watch);
    m->tick.data = m->watch.data = m;
    m->handles = 2;
    uv_unref((uv_handle_t *)&m->tick);
    uv_unref((uv_handle_t *)&m->watch);
}

int sw_metrics_start(uv_loop_t *loop, const char *addr, sluice_worker_pool *pool,
                     const sluice_conn_options *tls, sluice_metrics **out, char *err,
                     size_t errlen) {
    sluice_metrics *m = calloc(1, sizeof(*m));
    *out = NULL;
    if (m == NULL) {
        snprintf(err, errlen, "--metrics: out of memory");
        return -1;
    }
    m->loop = loop;
    m->pool = pool;
    sluice_worker_pool_get_info(pool, &m->info);
    m->url = m->info.url;
    m->tls = tls;
    escape_label(m->label_consumer, sizeof(m->label_consumer), m->info.consumer);
    escape_label(m->label_group, sizeof(m->label_group), m->info.group);
    init_handles(m);
    if (start_http(m, addr, err, errlen) != 0) {
        m->stop_called = 1;
        shut(m); /* freed once libuv closed the handles */
        return -1;
    }
    m->handles++;
    mqueue_open(m, 0); /* a queue name the worker checked; no connection: figures stay absent */
    uv_timer_start(&m->tick, on_tick, QUERY_MS / 4, QUERY_MS);
    uv_check_start(&m->watch, on_watch);
    *out = m;
    return 0;
}

void sw_metrics_stop(sluice_metrics *m) {
    if (m == NULL) {
        return;
    }
    m->stop_called = 1;
    shut(m);
    maybe_free(m);
}
