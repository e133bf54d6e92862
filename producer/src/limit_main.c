/* SPDX-License-Identifier: MIT */
/*
 * sluice-limit - check one request against rate limits, from the shell.
 *
 * All limits of one call are checked and counted in one atomic function call (sluice/limit.h).
 * Exit codes: 0 allowed, 1 limited (or never allowed at this weight), 2 usage, 3 Redis
 * unavailable, refused the call, or the outcome is unknown.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/limit.h"
#include "sluice/redis.h"
#include "sluice/status.h"

static const char usage[] =
    "usage: sluice-limit [options] NAMESPACE KEY=RATE [KEY=RATE...]\n"
    "\n"
    "Checks one request against every KEY=RATE limit at once and counts it in all of them, or\n"
    "in none when any refuses. State lives in Redis keys sluice:{NAMESPACE}:lim:KEY; time is\n"
    "the Redis server's.\n"
    "\n"
    "  RATE                        N/DURATION: N per DURATION, durations 500ms 10s 30m 1h 1d\n"
    "                              (\"5/s\" = 5 per second); window also takes ~PRECISION\n"
    "                              (default DURATION/60), e.g. 240/1h~1m\n"
    "  -a, --algorithm A           gcra (default: burst N, then N per DURATION evenly),\n"
    "                              window (sliding, sub-buckets), log (exact sliding log),\n"
    "                              fixed (clock-aligned windows), gate (one per DURATION/N)\n"
    "  -w, --weight N              the request's cost, 1..1000000000 (default 1)\n"
    "  -r, --redis URL             redis://[user:pass@]host:port[/db] or unix:///path\n"
    "                              (default $SLUICE_REDIS_URL, else redis://127.0.0.1:6379)\n"
    "                              rediss://...: TLS, options in $SLUICE_TLS_* (docs/tls.md)\n"
    "      --no-scripts            fixed windows with MULTI/INCRBY/PEXPIRE NX, for proxies that\n"
    "                              refuse scripts: allowed requests stay exact, but refused ones\n"
    "                              are counted too (the counter passes N)\n"
    "      --timeout MS            the call's deadline (default 5000)\n"
    "      --json                  print the result as JSON\n"
    "      --log-level LEVEL       error, warn, info, debug or off (default off): the\n"
    "                              connection's events (reconnects, redirects) on stderr\n"
    "  -h, --help                  this text\n"
    "  -V, --version               the version\n"
    "\n"
    "Prints: allowed=1 remaining=R retry_after_ms=0 reset_ms=T\n"
    "    or: allowed=0 limited_by=KEY remaining=0 retry_after_ms=T reset_ms=T\n"
    "    (never=1 and retry_after_ms=-1 when the weight is more than the limit could ever\n"
    "    allow). Options may follow NAMESPACE; \"--\" ends them. A key is given once (window\n"
    "    limits of different DURATION or PRECISION may share one). Log limits count at most\n"
    "    500 units in one call (weight x log limits).\n"
    "\n"
    "EXAMPLES\n"
    "  sluice-limit api key-42=5/1s                         5 per second per API key (GCRA)\n"
    "  sluice-limit --algorithm log notify global=100/30m errors=10/30m\n"
    "  sluice-limit --algorithm window -w 3 svc a=10/1s b=120/60s c=240/1h~1m\n"
    "  sluice-limit --algorithm gate tickets caller-7=1/10s   one purchase per 10 s\n"
    "  sluice-limit api k=5/s && curl ...                   run only when allowed\n"
    "\n"
    "Exit codes: 0 allowed, 1 limited, 2 usage, 3 Redis unavailable or refused (or the\n"
    "outcome is unknown: the reply was lost).\n";

enum { OPT_NO_SCRIPTS = 256, OPT_TIMEOUT, OPT_JSON, OPT_LOG_LEVEL };

static const struct option longopts[] = {
    {"algorithm", required_argument, NULL, 'a'},
    {"weight", required_argument, NULL, 'w'},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"redis", required_argument, NULL, 'r'},
    {"no-scripts", no_argument, NULL, OPT_NO_SCRIPTS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static int fail_usage(const char *msg) {
    fprintf(stderr, "sluice-limit: %s\nTry 'sluice-limit --help'.\n", msg);
    return SLUICE_EXIT_USAGE;
}

static void print_result(const sluice_limit_result *res, const sluice_limit *limits, int json) {
    const char *by = res->limited_by >= 0 ? limits[res->limited_by].key : NULL;
    size_t bylen = res->limited_by >= 0 ? limits[res->limited_by].keylen : 0;
    if (json) {
        printf("{\"allowed\":%s,\"never\":%s,\"limited_by\":", res->allowed == 1 ? "true" : "false",
               res->allowed == -1 ? "true" : "false");
        by ? sluice_cli_json_str(stdout, by, bylen) : (void)printf("null");
        printf(",\"remaining\":%lld,\"retry_after_ms\":%lld,\"reset_ms\":%lld}\n", res->remaining,
               res->retry_after_ms, res->reset_ms); /* retry_after_ms -1: never */
        return;
    }
    if (res->allowed == 1) {
        printf("allowed=1 remaining=%lld retry_after_ms=0 reset_ms=%lld\n", res->remaining,
               res->reset_ms);
    } else if (res->allowed == 0) {
        printf("allowed=0 limited_by=%.*s remaining=%lld retry_after_ms=%lld reset_ms=%lld\n",
               (int)bylen, by, res->remaining, res->retry_after_ms, res->reset_ms);
    } else {
        printf("allowed=0 never=1 limited_by=%.*s remaining=0 retry_after_ms=-1 reset_ms=0\n",
               (int)bylen, by);
    }
}

int main(int argc, char **argv) {
    sluice_limiter_options o;
    sluice_limit_alg alg = SLUICE_LIMIT_GCRA;
    long long weight = 1, timeout = 5000;
    int json = 0, ch;
    char err[512];
    sluice_limiter_options_init(&o);
    opterr = 0;
    /* options may come after NAMESPACE and the limits too ("--" ends them) */
    while ((ch = getopt_long(argc, argv, "a:w:r:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'a':
            if (sluice_limit_alg_parse(optarg, &alg) != 0) {
                snprintf(err, sizeof(err),
                         "--algorithm: '%s' is not one of gcra, window, log, fixed, gate", optarg);
                return fail_usage(err);
            }
            break;
        case 'w':
            if (sluice_parse_ll("weight", optarg, 1, SLUICE_LIMIT_COUNT_MAX, &weight, err,
                                sizeof(err)) != 0) {
                return fail_usage(err);
            }
            break;
        case 'r':
            o.redis_url = optarg;
            break;
        case OPT_NO_SCRIPTS:
            o.no_scripts = 1;
            break;
        case OPT_TIMEOUT:
            if (sluice_parse_ll("timeout", optarg, 1, 3600000, &timeout, err, sizeof(err)) != 0) {
                return fail_usage(err);
            }
            break;
        case OPT_JSON:
            json = 1;
            break;
        case OPT_LOG_LEVEL:
            if (sluice_cli_log_level(optarg, "sluice-limit", err, sizeof(err)) != 0) {
                return fail_usage(err);
            }
            break;
        case 'h':
            fputs(usage, stdout);
            return SLUICE_EXIT_OK;
        case 'V':
            return sluice_cli_version("sluice-limit");
        default:
            snprintf(err, sizeof(err), "unknown option or missing value: '%s'", argv[optind - 1]);
            return fail_usage(err);
        }
    }
    if (argc - optind < 2) {
        return fail_usage("give a NAMESPACE and at least one KEY=RATE");
    }
    if (o.no_scripts && alg != SLUICE_LIMIT_FIXED) {
        if (alg != SLUICE_LIMIT_GCRA) { /* gcra is only the default: --no-scripts means fixed */
            return fail_usage("--no-scripts works with the fixed algorithm only");
        }
        alg = SLUICE_LIMIT_FIXED;
    }
    o.ns = argv[optind];
    o.command_timeout_ms = (int)timeout;
    size_t n = (size_t)(argc - optind - 1);
    if (n > SLUICE_LIMIT_MAX) {
        snprintf(err, sizeof(err), "%zu limits; at most %d in one call", n, SLUICE_LIMIT_MAX);
        return fail_usage(err);
    }
    sluice_limit limits[SLUICE_LIMIT_MAX];
    for (size_t i = 0; i < n; i++) {
        if (sluice_limit_parse(argv[optind + 1 + (int)i], alg, &limits[i], err, sizeof(err)) != 0) {
            return fail_usage(err);
        }
    }
    sluice_conn_options tls;
    sluice_conn_options_init(&tls);
    if (sluice_cli_tls_env(&tls, err, sizeof(err)) != 0) {
        return fail_usage(err);
    }
    o.tls = &tls;
    sluice_limiter *l;
    if (sluice_limiter_new(&o, &l, err, sizeof(err)) != 0) {
        return fail_usage(err);
    }
    sluice_limit_result res;
    int st = sluice_limiter_check(l, limits, n, weight, &res);
    if (st != 0) {
        fprintf(stderr, "sluice-limit: %s: %s\n", sluice_strerror(st), sluice_limiter_errstr(l));
        sluice_limiter_free(l);
        return st == SLUICE_EINVAL ? SLUICE_EXIT_USAGE : SLUICE_EXIT_REDIS;
    }
    print_result(&res, limits, json);
    sluice_limiter_free(l);
    return res.allowed == 1 ? SLUICE_EXIT_OK : SLUICE_EXIT_REJECTED;
}
