/* SPDX-License-Identifier: MIT */
/*
 * sluice-worker - the worker daemon: drains one queue with a built-in handler.
 *
 * Exit codes: 0 stopped cleanly (signal, --max-messages), 2 usage or bad input, 3 Redis
 * refused (wrong key type, missing permission), 130 stopped at once by a second signal.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "sluice/cli.h"
#include "sluice/log.h"
#include "sluice/worker.h"

#include "handlers.h"
#include "metrics.h"

static const char usage[] =
    "usage: sluice-worker --queue NAME [options]\n"
    "\n"
    "Drains a sluice queue: reads entries through a consumer group, runs the handler,\n"
    "acknowledges and deletes each entry. Processing speed sets the admission rate.\n"
    "\n"
    "  -q, --queue NAME             queue to drain (1-64 of A-Z a-z 0-9 _ . -)\n"
    "  -r, --redis URL              redis://[user:pass@]host:port[/db] or unix:///path\n"
    "                               (default $SLUICE_REDIS_URL, else redis://127.0.0.1:6379)\n"
    "                               rediss://...: TLS, options in $SLUICE_TLS_* (docs/tls.md)\n"
    "  -H, --handler SPEC           noop | sleep:MS | exec:CMD | crash-on:TEXT |\n"
    "                               http://HOST[:PORT]/PATH | https://... (default noop)\n"
    "                               exec: payload on stdin; exit 0 done, 75 retry, else failed\n"
    "                               http(s): one POST per message; 2xx done, 429/503 retry\n"
    "                               after Retry-After, other 4xx dead (docs/delivery.md)\n"
    "      --http-header 'N: V'     extra request header (repeatable)\n"
    "      --http-header-file FILE  extra headers, one a line (secrets: not on the command line)\n"
    "      --sign-secret-file FILE  sign requests (Standard Webhooks; whsec_BASE64 in FILE)\n"
    "      --http-ca FILE           https: trust the CAs in FILE (default: the system store)\n"
    "      --http-follow            follow redirects (default: a 3xx is dead-lettered)\n"
    "  -c, --concurrency N          max in-flight messages, 1..100000 (default 16)\n"
    "  -c, --concurrency auto[:MIN-MAX]  adaptive: follows the handler's latency, between\n"
    "                               MIN and MAX (default 1-256)\n"
    "      --handler-timeout MS     give up a message after MS in the handler: retried\n"
    "                               (exec: SIGTERM, SIGKILL 2 s later; http: the request's\n"
    "                               deadline); 0 none (default 600000; http: 30000)\n"
    "  -b, --backend stream|list    (default stream)\n"
    "      --group NAME             consumer group (default workers)\n"
    "      --consumer NAME          consumer name (default HOSTNAME-PID)\n"
    "      --visibility-timeout MS  idle time before others may claim an entry (default 30000)\n"
    "      --max-deliveries N       deliveries before an entry is dead-lettered (default 5)\n"
    "      --retry-backoff MS       first retry delay, doubled per delivery (default 1000)\n"
    "      --grace MS               shutdown waits this long for handlers (default 10000)\n"
    "      --max-messages N         exit after N messages in all (default: run until signalled)\n"
    "      --block MS               XREADGROUP BLOCK time (default 1000)\n"
    "      --read-batch N           max entries per read (default 1000)\n"
    "      --record FILE            append \"ID PAYLOAD WALL_MS\" per processed message\n"
    "                               (checking)\n"
    "      --metrics HOST:PORT      serve Prometheus metrics at http://HOST:PORT/metrics\n"
    "      --log-level LEVEL        error|warn|info|debug|off (default info)\n"
    "  -h, --help                   this text\n"
    "\n"
    "A partitioned queue (sluice-admin partitions QUEUE P) is drained as a whole: one worker\n"
    "per partition, each on a thread of its own (--concurrency applies to each, --max-messages\n"
    "counts them all; partitions added later, also to a queue that was plain when the worker\n"
    "started, are picked up within a second; --metrics shows the queue as one, with a series\n"
    "per partition).\n"
    "\n"
    "SIGTERM/SIGINT: stop reading, finish in-flight work within the grace period, exit 0.\n"
    "A second signal exits at once (130); unfinished entries are reclaimed by other workers.\n"
    "EXAMPLES\n"
    "  sluice-worker --queue jobs --handler 'exec:./process.sh' --concurrency 8\n"
    "  sluice-worker -q jobs -H sleep:20 -c 16 --metrics 127.0.0.1:9100   simulate work\n"
    "  SLUICE_REDIS_URL=unix:///run/redis.sock sluice-worker -q jobs -H 'exec:cat'\n"
    "\n"
    "Exit codes: 0 ok, 2 usage or bad input, 3 redis refused, 130 forced stop.\n";

/* Every handler gets a deadline unless told otherwise (docs/delivery.md#handler-timeouts):
 * far above what a message's work should take, short enough that a hang is noticed. */
#define SW_HANDLER_TIMEOUT_MS 600000

static sluice_worker_pool *pool;
static sluice_http *http_target; /* --handler http(s)://: shared by every partition's worker */
static int signals_seen;

static void on_signal(uv_signal_t *s, int signum) {
    (void)s, (void)signum;
    if (++signals_seen > 1) {
        fprintf(stderr, "sluice-worker: second signal: exiting now; in-flight entries stay "
                        "pending and will be reclaimed\n");
        _exit(130);
    }
    /* every partition stops reading and finishes its in-flight work within the grace period;
     * then what its handlers still run is ended (abandon) */
    sluice_worker_pool_stop(pool);
}

/* The summary line's HTTP fields (deliveries by answer), before its newline. */
static void print_http(void) {
    if (http_target == NULL) {
        return;
    }
    sluice_http_stats h;
    sluice_http_get_stats(http_target, &h);
    printf(" http_ok=%llu http_throttled=%llu http_server_error=%llu http_rejected=%llu "
           "http_redirect=%llu http_connect_error=%llu http_tls_error=%llu http_timeout=%llu "
           "http_holds=%llu",
           h.ok, h.throttled, h.server_error, h.rejected, h.redirect, h.connect_error, h.tls_error,
           h.timeout, h.holds);
}

static int bad(const char *msg) {
    fprintf(stderr, "sluice-worker: %s\n", msg);
    fprintf(stderr, "Try 'sluice-worker --help'.\n");
    return SLUICE_EXIT_USAGE;
}

enum {
    OPT_GROUP = 256,
    OPT_CONSUMER,
    OPT_VIS,
    OPT_MAXDEL,
    OPT_BACKOFF,
    OPT_GRACE,
    OPT_MAXMSG,
    OPT_BLOCK,
    OPT_BATCH,
    OPT_RECORD,
    OPT_METRICS,
    OPT_LOG,
    OPT_HTIMEOUT,
    OPT_HTTP_HEADER,
    OPT_HTTP_HEADER_FILE,
    OPT_SIGN_SECRET_FILE,
    OPT_HTTP_CA,
    OPT_HTTP_FOLLOW,
};

static const struct option longopts[] = {
    {"queue", required_argument, NULL, 'q'},
    {"redis", required_argument, NULL, 'r'},
    {"handler", required_argument, NULL, 'H'},
    {"concurrency", required_argument, NULL, 'c'},
    {"backend", required_argument, NULL, 'b'},
    {"group", required_argument, NULL, OPT_GROUP},
    {"consumer", required_argument, NULL, OPT_CONSUMER},
    {"visibility-timeout", required_argument, NULL, OPT_VIS},
    {"max-deliveries", required_argument, NULL, OPT_MAXDEL},
    {"retry-backoff", required_argument, NULL, OPT_BACKOFF},
    {"grace", required_argument, NULL, OPT_GRACE},
    {"max-messages", required_argument, NULL, OPT_MAXMSG},
    {"block", required_argument, NULL, OPT_BLOCK},
    {"read-batch", required_argument, NULL, OPT_BATCH},
    {"record", required_argument, NULL, OPT_RECORD},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"log-level", required_argument, NULL, OPT_LOG},
    {"handler-timeout", required_argument, NULL, OPT_HTIMEOUT},
    {"http-header", required_argument, NULL, OPT_HTTP_HEADER},
    {"http-header-file", required_argument, NULL, OPT_HTTP_HEADER_FILE},
    {"sign-secret-file", required_argument, NULL, OPT_SIGN_SECRET_FILE},
    {"http-ca", required_argument, NULL, OPT_HTTP_CA},
    {"http-follow", no_argument, NULL, OPT_HTTP_FOLLOW},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef struct args {
    sluice_worker_options o;
    const char *handler;
    const char *record;
    const char *metrics;
    int log_level;
    int timeout_given; /* --handler-timeout was given */
    sw_http_args http;
    sluice_conn_options tls; /* SLUICE_TLS_* (rediss://) */
} args;

static int int_opt(const char *name, const char *v, long long lo, long long hi, int *out, char *err,
                   size_t errlen) {
    long long x;
    if (sluice_parse_ll(name, v, lo, hi, &x, err, errlen) != 0) {
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* N, or auto[:MIN-MAX] (adaptive, default 1-256). */
static int concurrency_opt(sluice_worker_options *o, const char *v, char *err, size_t n) {
    if (strncmp(v, "auto", 4) != 0) {
        o->concurrency_min = 0;
        return int_opt("--concurrency", v, 1, 100000, &o->concurrency, err, n);
    }
    long long lo = 1, hi = 256;
    if (v[4] == ':') {
        char *end;
        lo = strtoll(v + 5, &end, 10);
        hi = *end == '-' ? strtoll(end + 1, &end, 10) : 0;
        if (v[5] < '0' || v[5] > '9' || *end != '\0' || lo < 1 || hi < lo || hi > 100000) {
            snprintf(err, n,
                     "--concurrency: \"%s\" is not auto:MIN-MAX with 1 <= MIN <= MAX <= 100000", v);
            return -1;
        }
    } else if (v[4] != '\0') {
        snprintf(err, n, "--concurrency: \"%s\" is not a number, auto or auto:MIN-MAX", v);
        return -1;
    }
    o->concurrency_min = (int)lo;
    o->concurrency = (int)hi;
    return 0;
}

static int parse_http(args *a, int ch, const char *v, char *err, size_t n) {
    sw_http_args *h = &a->http;
    switch (ch) {
    case OPT_HTTP_HEADER:
        if (h->nheaders == SW_HTTP_HEADERS_MAX) {
            snprintf(err, n, "--http-header: more than %d", SW_HTTP_HEADERS_MAX);
            return -1;
        }
        h->headers[h->nheaders++] = v;
        return 0;
    case OPT_HTTP_HEADER_FILE:
        h->header_file = v;
        return 0;
    case OPT_SIGN_SECRET_FILE:
        h->secret_file = v;
        return 0;
    case OPT_HTTP_CA:
        h->ca_file = v;
        return 0;
    case OPT_HTTP_FOLLOW:
        h->follow = 1;
        return 0;
    default:
        snprintf(err, n, "unknown option");
        return -1;
    }
}

static int parse_one(args *a, int ch, const char *v, char *err, size_t n) {
    sluice_worker_options *o = &a->o;
    switch (ch) {
    case 'q':
        o->queue = v;
        return 0;
    case 'r':
        o->redis_url = v;
        return 0;
    case 'H':
        a->handler = v;
        return 0;
    case 'c':
        return concurrency_opt(o, v, err, n);
    case 'b':
        if (sluice_backend_parse(v, &o->backend) != 0) {
            snprintf(err, n, "--backend: \"%s\" is not stream or list", v);
            return -1;
        }
        return 0;
    case OPT_GROUP:
        o->group = v;
        return 0;
    case OPT_CONSUMER:
        o->consumer = v;
        return 0;
    case OPT_VIS:
        return int_opt("--visibility-timeout", v, 100, 86400000, &o->visibility_timeout_ms, err, n);
    case OPT_MAXDEL:
        return int_opt("--max-deliveries", v, 1, 1000000, &o->max_deliveries, err, n);
    case OPT_BACKOFF:
        return int_opt("--retry-backoff", v, 0, 86400000, &o->retry_backoff_ms, err, n);
    case OPT_GRACE:
        return int_opt("--grace", v, 0, 86400000, &o->grace_ms, err, n);
    case OPT_MAXMSG:
        return sluice_parse_ll("--max-messages", v, 1, (long long)1e15, &o->max_messages, err, n);
    case OPT_BLOCK:
        return int_opt("--block", v, 1, 600000, &o->block_ms, err, n);
    case OPT_BATCH:
        return int_opt("--read-batch", v, 1, 100000, &o->read_batch, err, n);
    case OPT_HTIMEOUT:
        a->timeout_given = 1;
        return int_opt("--handler-timeout", v, 0, 86400000, &o->handler_timeout_ms, err, n);
    case OPT_RECORD:
        a->record = v;
        return 0;
    case OPT_METRICS:
        a->metrics = v;
        return 0;
    case OPT_LOG:
        a->log_level = sluice_log_level_parse(v);
        if (a->log_level < -1) {
            snprintf(err, n, "--log-level: \"%s\" is not error, warn, info, debug or off", v);
            return -1;
        }
        return 0;
    default:
        return parse_http(a, ch, v, err, n);
    }
}

static int parse_args(args *a, int argc, char **argv, char *err, size_t n) {
    memset(a, 0, sizeof(*a));
    sluice_worker_options_init(&a->o);
    a->o.handler_timeout_ms = SW_HANDLER_TIMEOUT_MS;
    a->handler = "noop";
    a->log_level = SLUICE_LOG_INFO;
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":q:r:H:c:b:hV", longopts, NULL)) != -1) {
        if (ch == 'V') {
            exit(sluice_cli_version("sluice-worker"));
        }
        if (ch == 'h') {
            fputs(usage, stdout);
            exit(0);
        }
        if (ch == '?' || ch == ':') {
            snprintf(err, n, "%s option '%s'", ch == '?' ? "unknown" : "missing value for",
                     argv[optind - 1]);
            return -1;
        }
        if (parse_one(a, ch, optarg, err, n) != 0) {
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, n, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    if (a->o.queue == NULL) {
        snprintf(err, n, "--queue is required");
        return -1;
    }
    sluice_conn_options_init(&a->tls);
    if (sluice_cli_tls_env(&a->tls, err, n) != 0) {
        return -1;
    }
    a->o.tls = &a->tls;
    if (sw_handler_parse(a->handler, a->o.queue, &a->o, err, n) != 0) {
        return -1;
    }
    if (a->o.async_handler == NULL) {
        a->http.url = a->handler; /* http(s)://: main builds the target */
        if (!a->timeout_given) {
            a->o.handler_timeout_ms = SLUICE_HTTP_TIMEOUT_DEFAULT_MS;
        }
    } else if (a->http.nheaders > 0 || a->http.header_file || a->http.secret_file ||
               a->http.ca_file || a->http.follow) {
        snprintf(err, n, "--http-* and --sign-secret-file need an http:// or https:// --handler");
        return -1;
    }
    return 0;
}

/* After a stop's grace period, on each partition's loop: end what the handlers still run (sleeps
 * and commands live on the loop of the thread that started them). */
static void abandon(uv_loop_t *loop, void *arg) {
    (void)arg;
    sw_handlers_abandon(loop);
}

int main(int argc, char **argv) {
    args a;
    char err[512];
    signal(SIGPIPE, SIG_IGN);
    if (parse_args(&a, argc, argv, err, sizeof(err)) != 0) {
        return bad(err);
    }
    sluice_log_set_level(a.log_level, "sluice-worker");
    if (a.record != NULL && sw_handlers_record(a.record) != 0) {
        snprintf(err, sizeof(err), "--record: cannot open \"%s\"", a.record);
        return bad(err);
    }
    if (a.record != NULL) {
        a.o.on_verdict = sw_handlers_record_verdict;
    }
    if (a.http.url != NULL && sw_http_new(&a.http, &http_target, err, sizeof(err)) != 0) {
        return bad(err);
    }
    a.o.http = http_target;
    sw_metrics_http(http_target);
    /* a partitioned queue is drained as a whole (also one partitioned while this runs), and
     * --max-messages counts the process: the pool's workers share one tally */
    sluice_worker_pool_options po;
    sluice_worker_pool_options_init(&po);
    po.on_grace_expired = abandon;
    if (sluice_worker_pool_new(&a.o, &po, &pool, err, sizeof(err)) != 0) {
        sluice_http_free(http_target);
        return bad(err);
    }
    uv_loop_t *loop = uv_default_loop();
    uv_signal_t sigterm, sigint;
    uv_signal_init(loop, &sigterm);
    uv_signal_init(loop, &sigint);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_start(&sigint, on_signal, SIGINT);
    uv_unref((uv_handle_t *)&sigterm); /* signals alone do not keep the loop running */
    uv_unref((uv_handle_t *)&sigint);
    sluice_metrics *m = NULL;
    if (a.metrics != NULL &&
        sw_metrics_start(loop, a.metrics, pool, &a.tls, &m, err, sizeof(err)) != 0) {
        sluice_worker_pool_free(pool);
        sluice_http_free(http_target);
        return bad(err);
    }
    int st = sluice_worker_pool_run(pool, loop);
    sw_metrics_stop(m);
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    sluice_worker_stats s;
    sluice_worker_pool_get_stats(pool, &s);
    int parts = sluice_worker_pool_partitions(pool);
    printf("processed=%llu failed=%llu retried=%llu dead=%llu reclaimed=%llu", s.processed,
           s.failed, s.retried, s.dead, s.reclaimed);
    if (parts > 1) {
        printf(" partitions=%d", parts);
    }
    if (a.o.concurrency_min > 0) {
        printf(" concurrency_limit=%d", sluice_worker_pool_concurrency_limit(pool));
    }
    print_http();
    printf("\n");
    if (st != 0) {
        fprintf(stderr, "sluice-worker: %s\n", sluice_worker_pool_errstr(pool));
    }
    sluice_worker_pool_free(pool);
    sluice_http_free(http_target);
    uv_loop_close(loop);
    /* a partition that could not be started is a usage error; a worker's failure, Redis's */
    return st == 0 ? 0 : st == SLUICE_EINVAL ? SLUICE_EXIT_USAGE : SLUICE_EXIT_REDIS;
}
