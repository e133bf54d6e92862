/* SPDX-License-Identifier: MIT */
/*
 * sluice-gateway - an HTTP/1.1 admission gateway for web clients.
 *
 * One process, one libuv loop: the HTTP responder (sluice/http_responder.h: the listener and
 * the client connections), whose requests gateway_routes.c serves, and one async producer (one
 * Redis connection) per served queue. Admissions from all connections that arrive in one loop
 * iteration go to Redis in one coalesced call per queue, which is what makes tens of thousands of
 * requests per second possible on one core.
 *
 * This file: options, starting the responder, signals and the graceful stop (SIGTERM/SIGINT: stop
 * accepting, close idle connections, answer what is in progress with Connection: close, then
 * exit 0; after --grace ms or a second signal, cancel what is left and exit).
 */
#include <ctype.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/log.h"
#include "sluice/client.h"
#include "sluice/url.h"

#include "gateway.h"

static const char usage[] =
    "usage: sluice-gateway --listen HOST:PORT --queue NAME[:CAPACITY] [--queue ...] [options]\n"
    "\n"
    "Serves HTTP/1.1 with keep-alive: POST /v1/queues/NAME/messages admits the request body into\n"
    "the queue (202 Accepted, or 429 Too Many Requests with Retry-After when the queue is full\n"
    "or a rate limit refuses it (with RateLimit-Policy and RateLimit headers),\n"
    "or 503 with Retry-After when Redis is unavailable); GET /v1/queues/NAME shows the queue;\n"
    "GET /v1/queues (every queue: figures, rates, history), GET /v1/events (the same as\n"
    "Server-Sent Events), GET /metrics (Prometheus) and GET /healthz.\n"
    "\n"
    "  -l, --listen HOST:PORT        IPv4 or [IPv6] address and port (port 0: any free port,\n"
    "                                logged as event=listening)\n"
    "  -q, --queue NAME[:CAPACITY]   a queue to serve (repeatable, up to 64); CAPACITY is used\n"
    "                                while the queue's meta has none (default 1000)\n"
    "  -r, --redis URL               redis://[user:pass@]host:port[/db] or unix:///path\n"
    "                                (default $SLUICE_REDIS_URL, else redis://127.0.0.1:6379)\n"
    "                                rediss://...: TLS, options in $SLUICE_TLS_* (docs/tls.md)\n"
    "      --timeout MS              deadline of one admission in Redis (default 2000)\n"
    "      --connect-timeout MS      Redis connect timeout (default 2000)\n"
    "      --wait-replicas N         answer 202 only once N replicas have the message (WAIT);\n"
    "                                fewer within --wait-timeout: 503 outcome unknown\n"
    "      --wait-timeout MS         how long WAIT may take (default 1000; at most --timeout)\n"
    "      --batch N                 most admissions per Redis call, 1..10000 (default 1000)\n"
    "      --max-pending N           admissions waiting per queue; beyond: 503 (default 65536)\n"
    "      --retry-after-max S       ceiling of Retry-After in seconds (default 60)\n"
    "      --max-body SIZE           largest request body, e.g. 64k (default 1m, at most 15m)\n"
    "      --max-connections N       open client connections (default 1024)\n"
    "      --max-headers N           headers per request (default 64)\n"
    "      --max-header-size SIZE    one header, name + value (default 8k)\n"
    "      --max-headers-total SIZE  request target + all headers (default 16k)\n"
    "      --header-timeout MS       first byte to end of headers (default 10000)\n"
    "      --body-timeout MS         end of headers to end of body (default 30000)\n"
    "      --idle-timeout MS         keep-alive connection between requests (default 30000)\n"
    "      --grace MS                on SIGTERM/SIGINT, time to finish requests (default 10000)\n"
    "      --client-header NAME      the request header that names the caller for `client`\n"
    "                                rate limits (key \"h:VALUE\"); without the header, or\n"
    "                                without this option, the peer's address (\"ip:ADDR\")\n"
    "      --trusted-proxies N       the header is a comma-separated list (X-Forwarded-For):\n"
    "                                take the Nth entry from the right, 1..64 (default 1:\n"
    "                                the rightmost, written by the proxy in front)\n"
    "      --require-client-header   answer 400 to a request without the client header\n"
    "      --tenant-header NAME      the request header whose value is the message's tenant\n"
    "                                (fair lanes, `tenant` limits and shares, partitions)\n"
    "      --dashboard               serve the operator's page at GET /ui/ (the figures are\n"
    "                                GET /v1/queues and GET /v1/events either way)\n"
    "      --discover                GET /v1/queues also lists the database's other queues\n"
    "                                (SCAN of their meta keys every 10 s; figures only)\n"
    "      --admin-token-file FILE   enables POST /v1/admin/... with Authorization: Bearer and\n"
    "                                the token in FILE (mode 0600 or stricter; else exit 2)\n"
    "      --log-level LEVEL         error, warn, info, debug or off (default info)\n"
    "  -h, --help                    this text\n"
    "\n"
    "EXAMPLES\n"
    "  sluice-gateway --listen 127.0.0.1:8080 --queue jobs:5000\n"
    "  curl -i -X POST --data-binary @job.json http://127.0.0.1:8080/v1/queues/jobs/messages\n"
    "  curl -s http://127.0.0.1:8080/v1/queues/jobs        depth, capacity, drain rate\n"
    "\n"
    "Exit codes: 0 stopped by SIGTERM/SIGINT, 2 usage or bad input (also: cannot listen).\n"
    "Redis being unavailable is not fatal: requests get 503 until it is back.\n";

enum {
    OPT_TIMEOUT = 256,
    OPT_CONNECT_TIMEOUT,
    OPT_BATCH,
    OPT_MAX_PENDING,
    OPT_RETRY_MAX,
    OPT_MAX_BODY,
    OPT_MAX_CONNS,
    OPT_MAX_HEADERS,
    OPT_MAX_HEADER_SIZE,
    OPT_MAX_HEADERS_TOTAL,
    OPT_HEADER_TIMEOUT,
    OPT_BODY_TIMEOUT,
    OPT_IDLE_TIMEOUT,
    OPT_GRACE,
    OPT_LOG_LEVEL,
    OPT_CLIENT_HEADER,
    OPT_TRUSTED_PROXIES,
    OPT_REQUIRE_CLIENT,
    OPT_TENANT_HEADER,
    OPT_WAIT_REPLICAS,
    OPT_WAIT_TIMEOUT,
    OPT_DASHBOARD,
    OPT_DISCOVER,
    OPT_ADMIN_TOKEN,
};

static const struct option longopts[] = {
    {"listen", required_argument, NULL, 'l'},
    {"queue", required_argument, NULL, 'q'},
    {"redis", required_argument, NULL, 'r'},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"wait-replicas", required_argument, NULL, OPT_WAIT_REPLICAS},
    {"wait-timeout", required_argument, NULL, OPT_WAIT_TIMEOUT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"max-pending", required_argument, NULL, OPT_MAX_PENDING},
    {"retry-after-max", required_argument, NULL, OPT_RETRY_MAX},
    {"max-body", required_argument, NULL, OPT_MAX_BODY},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNS},
    {"max-headers", required_argument, NULL, OPT_MAX_HEADERS},
    {"max-header-size", required_argument, NULL, OPT_MAX_HEADER_SIZE},
    {"max-headers-total", required_argument, NULL, OPT_MAX_HEADERS_TOTAL},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT},
    {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"client-header", required_argument, NULL, OPT_CLIENT_HEADER},
    {"trusted-proxies", required_argument, NULL, OPT_TRUSTED_PROXIES},
    {"require-client-header", no_argument, NULL, OPT_REQUIRE_CLIENT},
    {"tenant-header", required_argument, NULL, OPT_TENANT_HEADER},
    {"dashboard", no_argument, NULL, OPT_DASHBOARD},
    {"discover", no_argument, NULL, OPT_DISCOVER},
    {"admin-token-file", required_argument, NULL, OPT_ADMIN_TOKEN},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef struct config {
    const char *listen;
    struct sockaddr_storage addr;
    const char *redis_url;
    long long timeout_ms, connect_timeout_ms, batch, max_pending, retry_max, grace_ms;
    long long wait_replicas, wait_timeout_ms;
    int log_level;
} config;

static gw_server server;
static uv_timer_t stop_timer;
static uint64_t stop_deadline;

/* ---------------------------------------------------------------------------------------- */
/* Options                                                                                  */

static int parse_listen(config *cfg, const char *v, char *err, size_t n) {
    if (sluice_listen_addr_parse("--listen", v, &cfg->addr, err, n) != 0) {
        return -1;
    }
    cfg->listen = v;
    return 0;
}

/* "NAME[:CAPACITY]" -> a new served queue. */
static int parse_queue(gw_server *s, const char *v, char *err, size_t n) {
    const char *colon = strchr(v, ':');
    size_t nl = colon ? (size_t)(colon - v) : strlen(v);
    char name[SLUICE_QUEUE_NAME_MAX + 1], detail[256];
    long long cap = 1000;
    if (s->nqueues == GW_MAX_QUEUES) {
        snprintf(err, n, "--queue: more than %d queues", GW_MAX_QUEUES);
        return -1;
    }
    if (nl > SLUICE_QUEUE_NAME_MAX) {
        snprintf(err, n, "--queue: \"%.80s...\": the name is longer than %d characters", v,
                 SLUICE_QUEUE_NAME_MAX);
        return -1;
    }
    memcpy(name, v, nl);
    name[nl] = '\0';
    if (sluice_queue_name_check(name, detail, sizeof(detail)) != 0) {
        snprintf(err, n, "--queue: \"%s\": %s", v, detail);
        return -1;
    }
    if (colon != NULL &&
        sluice_parse_ll("--queue capacity", colon + 1, 1, SLUICE_CAPACITY_MAX, &cap, err, n) != 0) {
        return -1;
    }
    if (gw_find_queue(s, name, nl) != NULL) {
        snprintf(err, n, "--queue: \"%s\" is given twice", name);
        return -1;
    }
    gw_queue *q = &s->queues[s->nqueues++];
    memcpy(q->name, name, nl + 1);
    q->capacity = cap;
    return 0;
}

static int parse_ms(const char *opt, const char *v, int *out, char *err, size_t n) {
    long long x;
    if (sluice_parse_ll(opt, v, 1, 86400000, &x, err, n) != 0) {
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_limit(sluice__http_options *l, int ch, const char *v, char *err, size_t n) {
    long long x = 0;
    int rc = 0;
    switch (ch) {
    case OPT_MAX_BODY:
        return sluice_parse_size("--max-body", v, 0, 15u << 20, &l->max_body, err, n);
    case OPT_MAX_HEADER_SIZE:
        return sluice_parse_size("--max-header-size", v, 64, 1u << 20, &l->max_header_line, err, n);
    case OPT_MAX_HEADERS_TOTAL:
        return sluice_parse_size("--max-headers-total", v, 256, 1u << 20, &l->max_headers_total,
                                 err, n);
    case OPT_MAX_CONNS:
        rc = sluice_parse_ll("--max-connections", v, 1, 1000000, &x, err, n);
        l->max_connections = (int)x;
        return rc;
    case OPT_MAX_HEADERS:
        rc = sluice_parse_ll("--max-headers", v, 1, 10000, &x, err, n);
        l->max_headers = (int)x;
        return rc;
    case OPT_HEADER_TIMEOUT:
        return parse_ms("--header-timeout", v, &l->header_timeout_ms, err, n);
    case OPT_BODY_TIMEOUT:
        return parse_ms("--body-timeout", v, &l->body_timeout_ms, err, n);
    case OPT_IDLE_TIMEOUT:
        return parse_ms("--idle-timeout", v, &l->idle_timeout_ms, err, n);
    default:
        snprintf(err, n, "unknown option");
        return -1;
    }
}

/* A header name option: 1..len-1 bytes, stored lower case (headers are looked up so). */
static int header_name(const char *opt, const char *v, char *out, size_t len, char *err, size_t n) {
    size_t vl = strlen(v);
    if (vl == 0 || vl >= len) {
        snprintf(err, n, "%s: \"%s\" is not a header name of 1..%zu bytes", opt, v, len - 1);
        return -1;
    }
    for (size_t i = 0; i < vl; i++) { /* a field name is a token (RFC 9110, 5.1) */
        unsigned char ch = (unsigned char)v[i];
        if (!isalnum(ch) && strchr("!#$%&'*+-.^_`|~", ch) == NULL) {
            snprintf(err, n,
                     "%s: \"%s\" is not a header name (byte %zu: letters, digits and "
                     "!#$%%&'*+-.^_`|~ only)",
                     opt, v, i + 1);
            return -1;
        }
    }
    for (size_t i = 0; i <= vl; i++) {
        out[i] = (char)tolower((unsigned char)v[i]);
    }
    return 0;
}

static int parse_opt(config *cfg, gw_server *s, int ch, const char *v, char *err, size_t n) {
    switch (ch) {
    case 'l':
        return parse_listen(cfg, v, err, n);
    case 'q':
        return parse_queue(s, v, err, n);
    case 'r':
        cfg->redis_url = v;
        return 0;
    case OPT_TIMEOUT:
        return sluice_parse_ll("--timeout", v, 1, 3600000, &cfg->timeout_ms, err, n);
    case OPT_CONNECT_TIMEOUT:
        return sluice_parse_ll("--connect-timeout", v, 1, 3600000, &cfg->connect_timeout_ms, err,
                               n);
    case OPT_WAIT_REPLICAS:
        return sluice_parse_ll("--wait-replicas", v, 0, SLUICE_WAIT_REPLICAS_MAX,
                               &cfg->wait_replicas, err, n);
    case OPT_WAIT_TIMEOUT:
        return sluice_parse_ll("--wait-timeout", v, 1, 3600000, &cfg->wait_timeout_ms, err, n);
    case OPT_BATCH:
        return sluice_parse_ll("--batch", v, 1, 10000, &cfg->batch, err, n);
    case OPT_MAX_PENDING:
        return sluice_parse_ll("--max-pending", v, 1, 10000000, &cfg->max_pending, err, n);
    case OPT_RETRY_MAX:
        return sluice_parse_ll("--retry-after-max", v, 1, 86400, &cfg->retry_max, err, n);
    case OPT_GRACE:
        return sluice_parse_ll("--grace", v, 0, 3600000, &cfg->grace_ms, err, n);
    case OPT_CLIENT_HEADER:
        return header_name("--client-header", v, s->client_header, sizeof(s->client_header), err,
                           n);
    case OPT_TRUSTED_PROXIES: {
        long long x;
        int rc = sluice_parse_ll("--trusted-proxies", v, 1, 64, &x, err, n);
        s->trusted_proxies = (int)x;
        return rc;
    }
    case OPT_REQUIRE_CLIENT:
        s->require_client = 1;
        return 0;
    case OPT_TENANT_HEADER:
        return header_name("--tenant-header", v, s->tenant_header, sizeof(s->tenant_header), err,
                           n);
    case OPT_DASHBOARD:
        s->dash.ui = 1;
        return 0;
    case OPT_DISCOVER:
        s->dash.disc.on = 1;
        return 0;
    case OPT_ADMIN_TOKEN:
        return gw_dash_read_token(s, v, err, n);
    case OPT_LOG_LEVEL:
        cfg->log_level = sluice_log_level_parse(v);
        if (cfg->log_level == -2) {
            snprintf(err, n, "--log-level: \"%s\" is not error, warn, info, debug or off", v);
            return -1;
        }
        return 0;
    default:
        return parse_limit(&s->lim, ch, v, err, n);
    }
}

static void defaults(config *cfg, gw_server *s) {
    memset(cfg, 0, sizeof(*cfg));
    cfg->redis_url = sluice_url_default();
    cfg->timeout_ms = 2000;
    cfg->connect_timeout_ms = 2000;
    cfg->batch = 1000;
    cfg->max_pending = 65536;
    cfg->retry_max = 60;
    cfg->grace_ms = 10000;
    cfg->log_level = SLUICE_LOG_INFO;
    s->trusted_proxies = 1;
    sluice__http_options_init(&s->lim); /* the limits' defaults are the responder's */
    s->lim.server_name = "sluice-gateway";
    s->lim.on_response = gw_count_response;
}

/* Returns 0, or the exit code. */
static int parse_args(int argc, char **argv, config *cfg, gw_server *s) {
    char err[512];
    int ch;
    defaults(cfg, s);
    opterr = 0; /* errors in the one style of every sluice binary, not getopt's */
    while ((ch = getopt_long(argc, argv, ":l:q:r:hV", longopts, NULL)) != -1) {
        if (ch == 'V') {
            exit(sluice_cli_version("sluice-gateway"));
        }
        if (ch == 'h') {
            fputs(usage, stdout);
            exit(SLUICE_EXIT_OK);
        }
        if (ch == '?' || ch == ':') {
            snprintf(err, sizeof(err), "%s option '%s'",
                     ch == '?' ? "unknown" : "missing value for", argv[optind - 1]);
        }
        if (ch == '?' || ch == ':' || parse_opt(cfg, s, ch, optarg, err, sizeof(err)) != 0) {
            fprintf(stderr, "sluice-gateway: %s\nTry 'sluice-gateway --help'.\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    const char *missing =
        cfg->listen == NULL ? "--listen HOST:PORT is required"
        : s->nqueues == 0   ? "at least one --queue NAME is required"
        : (s->trusted_proxies != 1 || s->require_client) && !s->client_header[0]
            ? "--trusted-proxies and --require-client-header need --client-header NAME"
            : NULL;
    if (optind < argc) {
        fprintf(stderr, "sluice-gateway: unexpected argument \"%s\"\n", argv[optind]);
        return SLUICE_EXIT_USAGE;
    }
    if (missing != NULL) {
        fprintf(stderr, "sluice-gateway: %s\nTry 'sluice-gateway --help'.\n", missing);
        return SLUICE_EXIT_USAGE;
    }
    sluice_url u;
    if (sluice_url_parse(&u, cfg->redis_url, err, sizeof(err)) != 0 ||
        sluice_client_async_supported(&u, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-gateway: --redis: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    sluice_conn_options_init(&s->tls);
    if (sluice_cli_tls_env(&s->tls, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-gateway: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Start and stop                                                                           */

static void on_stop_tick(uv_timer_t *t);

/* A connection refused for a reason no retry heals (a certificate check): said once, then the
 * gateway stops at once (exit 3), as the blocking binaries do. */
static void on_refused(sluice_aproducer *ap, int status, void *arg) {
    gw_server *s = arg;
    if (s->exit_code != 0 || s->stopping == 2) {
        return;
    }
    fprintf(stderr, "sluice-gateway: queue %s: %s: %s\n", sluice_aproducer_queue(ap),
            sluice_strerror(status), sluice_aproducer_errstr(ap));
    s->exit_code = SLUICE_EXIT_REDIS;
    if (!s->stopping) {
        s->stopping = 1;
        sluice__http_stop(s->http);
        gw_dash_stop(s);
    }
    stop_deadline = uv_now(s->loop); /* no grace: nothing can be admitted */
    uv_timer_start(&stop_timer, on_stop_tick, 0, 20);
}

static int start_producers(gw_server *s, const config *cfg) {
    char err[512];
    for (size_t i = 0; i < s->nqueues; i++) {
        sluice_producer_options o;
        sluice_producer_options_init(&o);
        o.redis_url = cfg->redis_url;
        o.queue = s->queues[i].name;
        o.capacity = s->queues[i].capacity;
        o.max_payload = s->lim.max_body;
        o.max_batch = (size_t)cfg->batch;
        o.connect_timeout_ms = (int)cfg->connect_timeout_ms;
        o.command_timeout_ms = (int)cfg->timeout_ms;
        o.retry_after_max_s = (unsigned)cfg->retry_max;
        o.wait_replicas = (int)cfg->wait_replicas;
        o.wait_timeout_ms = (int)cfg->wait_timeout_ms;
        o.tls = &s->tls;
        sluice_aproducer_options ao;
        sluice_aproducer_options_init(&ao);
        ao.refused_cb = on_refused;
        ao.refused_arg = s;
        ao.max_queued = (size_t)cfg->max_pending;
        ao.drain_sample_ms = 1000; /* keeps Retry-After current between rejections */
        if (sluice_aproducer_new(s->loop, &o, &ao, &s->queues[i].ap, err, sizeof(err)) != 0) {
            fprintf(stderr, "sluice-gateway: queue %s: %s\n", s->queues[i].name, err);
            return SLUICE_EXIT_USAGE;
        }
    }
    return 0;
}

/* Closes the producers (what is left gets ECANCELED -> 503) and the process handles. */
static void finish(gw_server *s) {
    for (size_t i = 0; i < s->nqueues; i++) {
        sluice_aproducer_close(s->queues[i].ap, NULL, NULL);
    }
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&stop_timer, NULL);
    gw_dash_stop(s);
}

static size_t open_conns(const gw_server *s) {
    sluice__http_stats st = {0};
    if (s->http != NULL) {
        sluice__http_get_stats(s->http, &st);
    }
    return st.open;
}

/* Closes the responder (freed once the producers' callbacks released their requests). */
static void close_http(gw_server *s) {
    sluice__http_close(s->http, NULL, NULL);
    s->http = NULL;
}

static void hard_stop(gw_server *s) {
    SLUICE_LOG(SLUICE_LOG_WARN, "event=stop_now connections=%zu", open_conns(s));
    s->stopping = 2;
    gw_dash_stop(s);
    close_http(s);
    finish(s);
}

static void on_stop_tick(uv_timer_t *t) {
    gw_server *s = t->data;
    size_t pending = 0;
    for (size_t i = 0; i < s->nqueues; i++) {
        pending += sluice_aproducer_pending(s->queues[i].ap);
    }
    if (open_conns(s) == 0 && pending == 0) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=stopped");
        uv_timer_stop(t);
        s->stopping = 2;
        close_http(s);
        finish(s);
    } else if (uv_now(s->loop) >= stop_deadline) {
        uv_timer_stop(t);
        hard_stop(s);
    }
}

static void on_signal(uv_signal_t *h, int signum) {
    gw_server *s = h->data;
    if (s->stopping == 2) {
        return;
    }
    if (s->stopping) {
        hard_stop(s); /* a second signal */
        return;
    }
    s->stopping = 1;
    SLUICE_LOG(SLUICE_LOG_INFO, "event=stopping signal=%s connections=%zu",
               signum == SIGTERM ? "TERM" : "INT", open_conns(s));
    sluice__http_stop(s->http);
    gw_dash_stop(s); /* ends the event streams: they would hold the stop until --grace */
    stop_deadline = uv_now(s->loop) + (uint64_t)s->grace_ms;
    uv_timer_start(&stop_timer, on_stop_tick, 0, 20);
}

static int start_listener(gw_server *s, const config *cfg) {
    char host[64];
    int port;
    int rc = sluice__http_listen(s->loop, (const struct sockaddr *)&cfg->addr, &s->lim, gw_route, s,
                                 &s->http);
    if (rc != 0) {
        fprintf(stderr, "sluice-gateway: cannot listen on %s: %s\n", cfg->listen, uv_strerror(rc));
        return SLUICE_EXIT_USAGE;
    }
    int v6 = sluice__http_address(s->http, host, sizeof(host), &port) == AF_INET6;
    char where[SLUICE_URL_MAX];
    sluice_url u;
    sluice_url_parse(&u, cfg->redis_url, NULL, 0);
    sluice_url_redact(&u, where, sizeof(where));
    memset(&u, 0, sizeof(u));
    SLUICE_LOG(SLUICE_LOG_INFO, "event=listening addr=%s%s%s:%d redis=%s queues=%zu", v6 ? "[" : "",
               host, v6 ? "]" : "", port, where, s->nqueues);
    return 0;
}

int main(int argc, char **argv) {
    config cfg;
    gw_server *s = &server;
    int rc = parse_args(argc, argv, &cfg, s);
    if (rc != 0) {
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    sluice_log_set_level(cfg.log_level, "sluice-gateway");
    s->loop = uv_default_loop();
    s->grace_ms = (int)cfg.grace_ms;
    if ((rc = start_producers(s, &cfg)) != 0 || (rc = start_listener(s, &cfg)) != 0) {
        return rc;
    }
    uv_signal_init(s->loop, &s->sigterm);
    uv_signal_init(s->loop, &s->sigint);
    uv_timer_init(s->loop, &stop_timer);
    s->sigterm.data = s->sigint.data = stop_timer.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    sluice_url u;
    sluice_url_parse(&u, cfg.redis_url, NULL, 0);
    if (gw_dash_start(s) != 0 || gw_conns_open(s, &u) != 0) {
        fprintf(stderr, "sluice-gateway: out of memory\n");
        return SLUICE_EXIT_USAGE;
    }
    memset(&u, 0, sizeof(u));
    uv_run(s->loop, UV_RUN_DEFAULT);
    uv_loop_close(s->loop);
    gw_dash_free(s);
    memset(s->dash.token, 0, sizeof(s->dash.token));
    return s->exit_code;
}
