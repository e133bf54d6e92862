/* SPDX-License-Identifier: MIT */
/*
 * bench_limit.c - `sluice-bench limit`: rate-limit checks per second on one connection, and the
 * memory a limit's key holds.
 *
 * Rows, for each algorithm of --algorithms:
 *   one limit, one per round trip  sluice_limiter_check() in a loop over --keys keys
 *                                  ("k<i % keys>"), each limited to --limit (default 100/1s,
 *                                  so keys hot enough are refused now and then)
 *   one limit, pipelined           the same calls, --depth at a time on one connection
 *                                  (sluice_conn_append_fcall + sluice_conn_read_reply)
 *   two limits, both ways          every call checks a "global" and a "category" key, both at
 *                                  --pair-limit (default 1000000/1s: everything passes, so
 *                                  every call writes; the worst case of a sliding-window log)
 * Each row prints calls per second and how many calls were allowed and refused.
 *
 * Memory: for each algorithm and each N of --memory-limits, one key limited to N per hour gets
 * N calls of weight 1 (all allowed, except that a gate passes only one per N/hour), then
 * `MEMORY USAGE key SAMPLES 0` gives its bytes.
 *
 * Every key is sluice:{bench-limit-PID}:lim:..., deleted before each row and at the end.
 * Output: a table on stdout, progress on stderr (on a terminal), --tsv for scripts/bench.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "sluice/cli.h"
#include "sluice/limit.h"
#include "sluice/queue.h"
#include "sluice/redis.h"
#include "sluice/status.h"
#include "sluice/url.h"

#include "bench.h"
#include "bench_util.h"

#define MAX_MEM_LIMITS 8
#define KEY_BYTES      (SLUICE_KEY_MAX + 32)
#define SPEC_BYTES     80
#define HOUR_MS        3600000LL

static const char usage[] =
    "usage: sluice-bench limit [--redis URL] [--count N] [--pipe-count N] [--keys N]\n"
    "                          [--limit N/DURATION] [--depth D] [--pair-limit N/DURATION]\n"
    "                          [--algorithms LIST] [--memory-limits LIST] [--no-memory] [--tsv]\n"
    "  --count N             calls per one-per-round-trip row (default 20000)\n"
    "  --pipe-count N        calls per pipelined row (default 200000)\n"
    "  --keys N              distinct keys of the one-limit rows, 1..1000000 (default 1000)\n"
    "  --limit N/DURATION    the limit of each of those keys (default 100/1s)\n"
    "  --depth D             calls in flight in the pipelined rows, 1..10000 (default 100)\n"
    "  --pair-limit N/DUR    the global and the category limit of the two-limit rows\n"
    "                        (default 1000000/1s)\n"
    "  --algorithms LIST     comma-separated, of gcra,window,log,fixed,gate (default all)\n"
    "  --memory-limits LIST  N of the memory rows (default 100,10000); each key gets N calls\n"
    "                        against N per hour\n"
    "  --no-memory           skip the memory rows\n"
    "  --tsv                 tab-separated rows instead of the table:\n"
    "                          rate ALG LIMITS MODE CALLS PER_S ALLOWED REFUSED\n"
    "                          memory ALG N ALLOWED BYTES\n"
    "\n"
    "EXAMPLES\n"
    "  sluice-bench limit\n"
    "  sluice-bench limit --algorithms gcra,log --count 100000 --no-memory\n"
    "  sluice-bench limit --keys 10 --limit 1000/1s --depth 1000\n";

typedef struct opts {
    const char *url;
    long long count, pipe_count, keys, depth;
    sluice_limit limit, pair;
    sluice_limit_alg algs[5];
    size_t nalgs;
    long long mem[MAX_MEM_LIMITS];
    size_t nmem;
    int memory, tsv;
} opts;

typedef struct bench {
    const opts *o;
    char ns[64];
    sluice_keys qk;
    sluice_conn *conn;
    char *keys; /* o->keys full key names, KEY_BYTES each */
    char global[KEY_BYTES], category[KEY_BYTES];
} bench;

typedef struct result {
    double per_s;
    long long allowed, refused;
} result;

static void progress(const char *what) {
    if (isatty(2)) {
        fprintf(stderr, "\r%-70s", what);
        fflush(stderr);
    }
}

static void progress_done(void) {
    if (isatty(2)) {
        fprintf(stderr, "\r%-70s\r", "");
        fflush(stderr);
    }
}

/* The function's spec text of a limit, as sluice_limiter_check sends it. */
static void spec_text(sluice_limit_alg alg, long long count, long long period_ms, char *buf,
                      size_t len) {
    if (alg == SLUICE_LIMIT_WINDOW) {
        long long prec = period_ms / 60 < 1 ? 1 : period_ms / 60;
        snprintf(buf, len, "window:%lld:%lld:%lld", count, period_ms, prec);
    } else {
        snprintf(buf, len, "%s:%lld:%lld", sluice_limit_alg_name(alg), count, period_ms);
    }
}

/* "1,000,000/1s" */
static const char *rate_text(const sluice_limit *l, char *buf, size_t len) {
    static const struct {
        long long ms;
        const char *unit;
    } units[] = {{86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}, {1, "ms"}};
    char n[32];
    size_t u = 0;
    while (l->period_ms % units[u].ms != 0) {
        u++;
    }
    snprintf(buf, len, "%s/%lld%s", sluice_fmt_count(n, sizeof(n), (unsigned long long)l->count),
             l->period_ms / units[u].ms, units[u].unit);
    return buf;
}

static int key_of(bench *b, const char *name, char *buf) {
    if (sluice_key_limit(&b->qk, name, strlen(name), buf, KEY_BYTES) != 0) {
        fprintf(stderr, "sluice-bench limit: key %s is too long\n", name);
        return SLUICE_EXIT_USAGE;
    }
    return 0;
}

/* Deletes every key of the run. Returns 0 or exit code 3. */
static int purge(bench *b) {
    enum { CHUNK = 500 };
    const char *argv[CHUNK + 1];
    argv[0] = "DEL";
    long long n = b->o->keys, i = 0;
    int first = 1;
    while (i < n || first) {
        int argc = 1;
        if (first) {
            argv[argc++] = b->global;
            argv[argc++] = b->category;
            first = 0;
        }
        while (i < n && argc <= CHUNK) {
            argv[argc++] = b->keys + (size_t)i * KEY_BYTES;
            i++;
        }
        redisReply *r = NULL;
        int st = sluice_conn_command(b->conn, argc, argv, NULL, &r, NULL);
        freeReplyObject(r);
        if (st != 0) {
            fprintf(stderr, "sluice-bench limit: %s\n", sluice_conn_errstr(b->conn));
            return SLUICE_EXIT_REDIS;
        }
    }
    return 0;
}

/* The "allowed" element of a sluice_limit reply: 1, 0 or -1; -2 for anything else. */
static int reply_allowed(const redisReply *r) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 5 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
        return -2;
    }
    return (int)r->element[0]->integer;
}

/* nlimits 1: the key of call i is k<i % keys> at o->limit; 2: global + category at o->pair. */
static int run_single(bench *b, sluice_limit_alg alg, int nlimits, result *res) {
    const opts *o = b->o;
    sluice_limiter_options lo;
    sluice_limiter *l = NULL;
    char err[256], name[32];
    sluice_limiter_options_init(&lo);
    lo.redis_url = o->url;
    lo.tls = bench_conn_options();
    lo.ns = b->ns;
    if (sluice_limiter_new(&lo, &l, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench limit: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    sluice_limit lims[2];
    if (nlimits == 1) {
        lims[0] = o->limit;
        lims[0].key = name;
        lims[0].keylen = 0;
    } else {
        lims[0] = o->pair;
        lims[0].key = "global";
        lims[1] = o->pair;
        lims[1].key = "category";
        lims[0].keylen = lims[1].keylen = 0;
    }
    lims[0].alg = lims[1].alg = alg;
    lims[0].precision_ms = lims[1].precision_ms = 0;
    sluice_limit_result lr;
    /* one call before the clock starts: connects and loads the library */
    snprintf(name, sizeof(name), "k0");
    int st = sluice_limiter_check(l, lims, (size_t)nlimits, 1, &lr);
    *res = (result){0, 0, 0};
    uint64_t t0 = sluice_now_ns();
    for (long long i = 0; i < o->count && st == 0; i++) {
        if (nlimits == 1) {
            snprintf(name, sizeof(name), "k%lld", i % o->keys);
        }
        st = sluice_limiter_check(l, lims, (size_t)nlimits, 1, &lr);
        if (st == 0) {
            if (lr.allowed == 1) {
                res->allowed++;
            } else {
                res->refused++;
            }
        }
    }
    res->per_s = (double)o->count / ((double)(sluice_now_ns() - t0) / 1e9);
    if (st != 0) {
        fprintf(stderr, "sluice-bench limit: %s\n", sluice_limiter_errstr(l));
    }
    sluice_limiter_free(l);
    return st == 0 ? 0 : SLUICE_EXIT_REDIS;
}

/* Sends `count` calls, `depth` at a time. key(i) names the keys of call i. */
static int run_pipelined(bench *b, sluice_limit_alg alg, int nlimits, long long count,
                         const char *const *fixed_keys, const sluice_limit *lim, result *res) {
    const opts *o = b->o;
    char spec[SPEC_BYTES];
    spec_text(alg, lim->count, lim->period_ms, spec, sizeof(spec));
    const char *args[3] = {"1", spec, spec};
    const char *keys[2];
    redisReply *r = NULL;
    /* connects and loads the library before the clock starts */
    int st = sluice_conn_fcall(b->conn, SLUICE_FN_VERSION, 0, NULL, NULL, 0, NULL, NULL, &r, NULL);
    freeReplyObject(r);
    *res = (result){0, 0, 0};
    uint64_t t0 = sluice_now_ns();
    for (long long done = 0; done < count && st == 0;) {
        long long n = count - done < o->depth ? count - done : o->depth;
        for (long long j = 0; j < n && st == 0; j++) {
            if (fixed_keys != NULL) {
                keys[0] = fixed_keys[0];
                keys[1] = fixed_keys[1];
            } else {
                keys[0] = b->keys + (size_t)((done + j) % o->keys) * KEY_BYTES;
            }
            st = sluice_conn_append_fcall(b->conn, SLUICE_FN_LIMIT, nlimits, keys, NULL,
                                          1 + nlimits, args, NULL);
        }
        for (long long j = 0; j < n && st == 0; j++) {
            st = sluice_conn_read_reply(b->conn, &r);
            int a = st == 0 ? reply_allowed(r) : -2;
            freeReplyObject(r);
            if (st == 0 && a == -2) {
                fprintf(stderr, "sluice-bench limit: unexpected reply from sluice_limit\n");
                return SLUICE_EXIT_REDIS;
            }
            if (a == 1) {
                res->allowed++;
            } else if (st == 0) {
                res->refused++;
            }
        }
        done += n;
    }
    res->per_s = (double)count / ((double)(sluice_now_ns() - t0) / 1e9);
    if (st != 0) {
        fprintf(stderr, "sluice-bench limit: %s\n", sluice_conn_errstr(b->conn));
        return SLUICE_EXIT_REDIS;
    }
    return 0;
}

static void print_rate(const opts *o, sluice_limit_alg alg, int nlimits, const char *mode,
                       long long count, const result *r) {
    char a[32], x[32], y[32];
    if (o->tsv) {
        printf("rate\t%s\t%d\t%s\t%lld\t%.0f\t%lld\t%lld\n", sluice_limit_alg_name(alg), nlimits,
               mode, count, r->per_s, r->allowed, r->refused);
    } else {
        printf("  %-7s %-6s %-10s %14s/s %12s %12s\n", sluice_limit_alg_name(alg),
               nlimits == 1 ? "1" : "2", mode,
               sluice_fmt_count(a, sizeof(a), (unsigned long long)r->per_s),
               sluice_fmt_count(x, sizeof(x), (unsigned long long)r->allowed),
               sluice_fmt_count(y, sizeof(y), (unsigned long long)r->refused));
    }
    fflush(stdout);
}

static int rates(bench *b) {
    const opts *o = b->o;
    char what[128];
    const char *pair_keys[2] = {b->global, b->category};
    if (!o->tsv) {
        char l1[48], l2[48];
        printf("checks per second on one connection (%lld calls per single row, %lld per "
               "pipelined row)\n",
               o->count, o->pipe_count);
        printf("  1 limit:  keys k0..k%lld in turn, each %s\n", o->keys - 1,
               rate_text(&o->limit, l1, sizeof(l1)));
        printf("  2 limits: \"global\" and \"category\", both %s\n",
               rate_text(&o->pair, l2, sizeof(l2)));
        printf("  %-7s %-6s %-10s %16s %12s %12s\n", "alg", "limits", "mode", "checks", "allowed",
               "refused");
    }
    for (size_t i = 0; i < o->nalgs; i++) {
        sluice_limit_alg alg = o->algs[i];
        const char *an = sluice_limit_alg_name(alg);
        result r;
        char mode[32];
        snprintf(mode, sizeof(mode), "pipe %lld", o->depth);
        for (int nl = 1; nl <= 2; nl++) {
            int rc;
            snprintf(what, sizeof(what), "%s, %d limit%s, one per round trip ...", an, nl,
                     nl == 1 ? "" : "s");
            progress(what);
            if ((rc = purge(b)) != 0 || (rc = run_single(b, alg, nl, &r)) != 0) {
                return rc;
            }
            progress_done();
            print_rate(o, alg, nl, "single", o->count, &r);
            snprintf(what, sizeof(what), "%s, %d limit%s, %lld in flight ...", an, nl,
                     nl == 1 ? "" : "s", o->depth);
            progress(what);
            if ((rc = purge(b)) != 0 ||
                (rc = run_pipelined(b, alg, nl, o->pipe_count, nl == 1 ? NULL : pair_keys,
                                    nl == 1 ? &o->limit : &o->pair, &r)) != 0) {
                return rc;
            }
            progress_done();
            print_rate(o, alg, nl, mode, o->pipe_count, &r);
        }
    }
    return purge(b);
}

static int memory(bench *b) {
    const opts *o = b->o;
    char what[128];
    if (!o->tsv) {
        printf("\nmemory per key: N calls of weight 1 against N per hour, then MEMORY USAGE key "
               "SAMPLES 0\n");
        printf("  %-7s %10s %10s %12s\n", "alg", "N", "allowed", "bytes");
    }
    const char *fixed[2] = {b->global, b->category};
    for (size_t i = 0; i < o->nalgs; i++) {
        for (size_t m = 0; m < o->nmem; m++) {
            sluice_limit lim = {.key = "global", .count = o->mem[m], .period_ms = HOUR_MS};
            result r;
            int rc;
            snprintf(what, sizeof(what), "memory: %s at %lld per hour ...",
                     sluice_limit_alg_name(o->algs[i]), o->mem[m]);
            progress(what);
            if ((rc = purge(b)) != 0 ||
                (rc = run_pipelined(b, o->algs[i], 1, o->mem[m], fixed, &lim, &r)) != 0) {
                return rc;
            }
            const char *argv[] = {"MEMORY", "USAGE", b->global, "SAMPLES", "0"};
            redisReply *rep = NULL;
            int st = sluice_conn_command(b->conn, 5, argv, NULL, &rep, NULL);
            long long bytes = rep != NULL && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
            freeReplyObject(rep);
            progress_done();
            if (st != 0) {
                fprintf(stderr, "sluice-bench limit: MEMORY USAGE: %s\n",
                        sluice_conn_errstr(b->conn));
                return SLUICE_EXIT_REDIS;
            }
            char n[32], a[32], y[32];
            if (o->tsv) {
                printf("memory\t%s\t%lld\t%lld\t%lld\n", sluice_limit_alg_name(o->algs[i]),
                       o->mem[m], r.allowed, bytes);
            } else {
                printf("  %-7s %10s %10s %12s\n", sluice_limit_alg_name(o->algs[i]),
                       sluice_fmt_count(n, sizeof(n), (unsigned long long)o->mem[m]),
                       sluice_fmt_count(a, sizeof(a), (unsigned long long)r.allowed),
                       bytes < 0 ? "-" : sluice_fmt_count(y, sizeof(y), (unsigned long long)bytes));
            }
            fflush(stdout);
        }
    }
    return purge(b);
}

static int parse_algs(const char *s, opts *o, char *err, size_t errlen) {
    o->nalgs = 0;
    const char *p = s;
    while (*p != '\0') {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char name[16];
        sluice_limit_alg a;
        if (len == 0 || len >= sizeof(name)) {
            snprintf(err, errlen, "--algorithms: bad list \"%s\"", s);
            return -1;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        if (sluice_limit_alg_parse(name, &a) != 0) {
            snprintf(err, errlen,
                     "--algorithms: unknown algorithm \"%s\" (gcra, window, log, "
                     "fixed, gate)",
                     name);
            return -1;
        }
        for (size_t i = 0; i < o->nalgs; i++) {
            if (o->algs[i] == a) {
                snprintf(err, errlen, "--algorithms: \"%s\" is given twice", name);
                return -1;
            }
        }
        o->algs[o->nalgs++] = a;
        p += len;
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                snprintf(err, errlen, "--algorithms: bad list \"%s\"", s);
                return -1;
            }
        }
    }
    return o->nalgs > 0 ? 0 : -1;
}

/* "N/DURATION" through the library's own parser (key "x"). */
static int parse_rate(const char *opt, const char *s, sluice_limit *out, char *err, size_t errlen) {
    char buf[96], e[200];
    snprintf(buf, sizeof(buf), "x=%s", s);
    if (strlen(s) > 80 || sluice_limit_parse(buf, SLUICE_LIMIT_GCRA, out, e, sizeof(e)) != 0) {
        snprintf(err, errlen, "%s: \"%s\" is not N/DURATION (e.g. 100/1s)", opt, s);
        return -1;
    }
    return 0;
}

int bench_limit(int argc, char **argv) {
    static const struct option lopts[] = {{"redis", 1, NULL, 'r'},
                                          {"pipe-count", 1, NULL, 'N'},
                                          {"count", 1, NULL, 'n'},
                                          {"keys", 1, NULL, 'k'},
                                          {"limit", 1, NULL, 'l'},
                                          {"depth", 1, NULL, 'd'},
                                          {"pair-limit", 1, NULL, 'p'},
                                          {"algorithms", 1, NULL, 'a'},
                                          {"memory-limits", 1, NULL, 'm'},
                                          {"no-memory", 0, NULL, 'M'},
                                          {"tsv", 0, NULL, 't'},
                                          {"help", 0, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
    opts o = {.url = sluice_url_default(),
              .count = 20000,
              .pipe_count = 200000,
              .keys = 1000,
              .depth = 100,
              .algs = {SLUICE_LIMIT_GCRA, SLUICE_LIMIT_WINDOW, SLUICE_LIMIT_LOG, SLUICE_LIMIT_FIXED,
                       SLUICE_LIMIT_GATE},
              .nalgs = 5,
              .mem = {100, 10000},
              .nmem = 2,
              .memory = 1};
    char err[256];
    int ch, rc;
    parse_rate("--limit", "100/1s", &o.limit, err, sizeof(err));
    parse_rate("--pair-limit", "1000000/1s", &o.pair, err, sizeof(err));
    while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
        rc = 0;
        switch (ch) {
        case 'r':
            o.url = optarg;
            break;
        case 'n':
            rc = sluice_parse_ll("--count", optarg, 1, (long long)1e9, &o.count, err, sizeof(err));
            break;
        case 'N':
            rc = sluice_parse_ll("--pipe-count", optarg, 1, (long long)1e10, &o.pipe_count, err,
                                 sizeof(err));
            break;
        case 'k':
            rc = sluice_parse_ll("--keys", optarg, 1, 1000000, &o.keys, err, sizeof(err));
            break;
        case 'd':
            rc = sluice_parse_ll("--depth", optarg, 1, 10000, &o.depth, err, sizeof(err));
            break;
        case 'l':
            rc = parse_rate("--limit", optarg, &o.limit, err, sizeof(err));
            break;
        case 'p':
            rc = parse_rate("--pair-limit", optarg, &o.pair, err, sizeof(err));
            break;
        case 'a':
            rc = parse_algs(optarg, &o, err, sizeof(err));
            break;
        case 'm':
            rc = sluice_parse_ll_list("--memory-limits", optarg, 1, 1000000, o.mem, MAX_MEM_LIMITS,
                                      &o.nmem, err, sizeof(err));
            break;
        case 'M':
            o.memory = 0;
            break;
        case 't':
            o.tsv = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return SLUICE_EXIT_USAGE;
        }
        if (rc != 0) {
            fprintf(stderr, "sluice-bench limit: %s\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sluice-bench limit: unexpected argument '%s'\n", argv[optind]);
        return SLUICE_EXIT_USAGE;
    }

    bench b = {.o = &o};
    sluice_url u;
    snprintf(b.ns, sizeof(b.ns), "bench-limit-%d", (int)getpid());
    if (sluice_url_parse(&u, o.url, err, sizeof(err)) != 0 ||
        sluice_keys_init(&b.qk, b.ns, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench limit: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    b.keys = malloc((size_t)o.keys * KEY_BYTES);
    b.conn = sluice_conn_new(&u, bench_conn_options());
    if (b.keys == NULL || b.conn == NULL) {
        fprintf(stderr, "sluice-bench limit: out of memory\n");
        free(b.keys);
        sluice_conn_free(b.conn);
        return SLUICE_EXIT_REDIS;
    }
    rc = key_of(&b, "global", b.global);
    if (rc == 0) {
        rc = key_of(&b, "category", b.category);
    }
    for (long long i = 0; i < o.keys && rc == 0; i++) {
        char name[32];
        snprintf(name, sizeof(name), "k%lld", i);
        rc = key_of(&b, name, b.keys + (size_t)i * KEY_BYTES);
    }
    if (rc == 0) {
        rc = rates(&b);
    }
    if (rc == 0 && o.memory) {
        rc = memory(&b);
    }
    if (rc != 0) {
        progress_done();
        purge(&b);
    }
    sluice_conn_free(b.conn);
    free(b.keys);
    return rc;
}
