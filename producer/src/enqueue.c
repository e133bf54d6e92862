/* SPDX-License-Identifier: MIT */
/*
 * sluice-enqueue - admit payloads from the command line or standard input.
 *
 * Payloads come from the arguments, or one per line on stdin (sent in batches of --batch).
 * Exit codes: 0 all admitted, 1 some rejected because the queue was full, 2 usage or bad input
 * (e.g. a payload over --max-payload: reported with its line, the others still sent),
 * 3 redis unavailable or refused (nothing after the failed call is sent; the summary says how
 * many were admitted before it).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/cli.h"
#include "sluice/producer.h"
#include "sluice/redis.h"
#include "sluice/url.h"

static const char usage[] =
    "usage: sluice-enqueue --queue NAME [options] [PAYLOAD...]\n"
    "\n"
    "Admits each PAYLOAD (or each line of standard input when none is given) into a sluice\n"
    "queue. A full queue rejects at once: nothing is dropped silently.\n"
    "\n"
    "  -q, --queue NAME            queue (1-64 of A-Z a-z 0-9 _ . -)\n"
    "  -r, --redis URL             redis://[user:pass@]host:port[/db] or unix:///path\n"
    "                              (default $SLUICE_REDIS_URL, else redis://127.0.0.1:6379)\n"
    "                              rediss://...: TLS, options in $SLUICE_TLS_* (docs/tls.md)\n"
    "  -C, --capacity N            capacity when the queue has none set (default 1000)\n"
    "  -b, --backend stream|list   (default stream)\n"
    "  -n, --batch N               payloads per round trip from stdin, 1..10000 (default 100)\n"
    "      --max-payload SIZE      largest payload, e.g. 512k (default 1m)\n"
    "      --tenant NAME           envelope field k (also the key of `tenant` rate limits)\n"
    "      --client KEY            the caller's key for `client` rate limits\n"
    "      --header NAME=VALUE     envelope header (repeatable, up to 64)\n"
    "      --idempotency-key KEY   admit once per KEY within 24 h (single payload only)\n"
    "      --timeout MS            per-call deadline (default 5000)\n"
    "      --rate N                offer at most N payloads per second from stdin (default: as\n"
    "                              fast as Redis answers)\n"
    "      --wait-replicas N       report admitted only once N replicas have it (WAIT N);\n"
    "                              fewer within --wait-timeout: outcome unknown, exit 3\n"
    "      --wait-timeout MS       how long WAIT may take (default 1000)\n"
    "      --ids                   print \"ID PAYLOAD\" for each admitted payload\n"
    "      --json                  print the summary as JSON\n"
    "      --log-level LEVEL       error, warn, info, debug or off (default off): the\n"
    "                              connection's events (reconnects, redirects) on stderr\n"
    "  -h, --help                  this text\n"
    "\n"
    "Prints: admitted=N rejected=M depth=D capacity=C [limited=L (by LIMIT, retry after T ms)]\n"
    "(a partitioned queue: depth and capacity summed over its partitions, then partitions=P)\n"
    "EXAMPLES\n"
    "  sluice-enqueue --queue jobs 'hello' 'world'          two payloads\n"
    "  seq 1 1000 | sluice-enqueue -q jobs --batch 100     one payload per line\n"
    "  sluice-enqueue -q jobs --tenant acme --header trace=abc 'job'\n"
    "  sluice-enqueue -q jobs --idempotency-key order-17 'charge 17'   admitted once\n"
    "\n"
    "Exit codes: 0 all admitted, 1 some rejected (queue full or rate limited), 2 usage or bad\n"
    "input, 3 redis unavailable or refused.\n";

enum {
    OPT_MAXP = 256,
    OPT_TENANT,
    OPT_HEADER,
    OPT_IDEM,
    OPT_TIMEOUT,
    OPT_IDS,
    OPT_JSON,
    OPT_RATE,
    OPT_CLIENT,
    OPT_WAIT_REPLICAS,
    OPT_WAIT_TIMEOUT,
    OPT_LOG_LEVEL
};

static const struct option longopts[] = {
    {"queue", required_argument, NULL, 'q'},
    {"redis", required_argument, NULL, 'r'},
    {"capacity", required_argument, NULL, 'C'},
    {"backend", required_argument, NULL, 'b'},
    {"batch", required_argument, NULL, 'n'},
    {"max-payload", required_argument, NULL, OPT_MAXP},
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"client", required_argument, NULL, OPT_CLIENT},
    {"header", required_argument, NULL, OPT_HEADER},
    {"idempotency-key", required_argument, NULL, OPT_IDEM},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"ids", no_argument, NULL, OPT_IDS},
    {"json", no_argument, NULL, OPT_JSON},
    {"rate", required_argument, NULL, OPT_RATE},
    {"wait-replicas", required_argument, NULL, OPT_WAIT_REPLICAS},
    {"wait-timeout", required_argument, NULL, OPT_WAIT_TIMEOUT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

typedef struct run {
    sluice_producer_options o;
    sluice_producer *p;
    long long batch;
    const char *tenant;
    const char *client;
    const char *idem;
    sluice_header headers[SLUICE_ENVELOPE_MAX_HEADERS];
    size_t nheaders;
    int ids, json;
    unsigned long long duplicates; /* idempotency key seen before: nothing queued */
    long long rate;                /* payloads per second, 0 = unpaced */
    uint64_t started_ns;           /* when pacing started */
    unsigned long long offered;
    unsigned long long admitted, rejected, invalid;
    unsigned long long limited; /* refused by a rate limit (counted in rejected) */
    char last_limit[SLUICE_LIMIT_NAME_MAX + 1];
    long long limit_retry_ms; /* the largest retry-after a limit gave */
    long long depth, capacity;
    int redis_failed;
} run;

static int fail_usage(const char *msg) {
    fprintf(stderr, "sluice-enqueue: %s\nTry 'sluice-enqueue --help'.\n", msg);
    return SLUICE_EXIT_USAGE;
}

static int add_header(run *r, const char *v, char *err, size_t n) {
    const char *eq = strchr(v, '=');
    if (eq == NULL || eq == v) {
        snprintf(err, n, "--header: \"%s\" is not NAME=VALUE", v);
        return -1;
    }
    if (r->nheaders == SLUICE_ENVELOPE_MAX_HEADERS) {
        snprintf(err, n, "--header: more than %d headers", SLUICE_ENVELOPE_MAX_HEADERS);
        return -1;
    }
    sluice_header *h = &r->headers[r->nheaders++];
    h->name = v;
    h->name_len = (size_t)(eq - v);
    h->value = eq + 1;
    h->value_len = strlen(eq + 1);
    return 0;
}

static int parse_opt(run *r, int ch, const char *v, char *err, size_t n) {
    long long x;
    switch (ch) {
    case 'q':
        r->o.queue = v;
        return 0;
    case 'r':
        r->o.redis_url = v;
        return 0;
    case 'C':
        return sluice_parse_ll("--capacity", v, 1, SLUICE_CAPACITY_MAX, &r->o.capacity, err, n);
    case 'b':
        if (sluice_backend_parse(v, &r->o.backend) != 0) {
            snprintf(err, n, "--backend: \"%s\" is not stream or list", v);
            return -1;
        }
        return 0;
    case 'n':
        return sluice_parse_ll("--batch", v, 1, 10000, &r->batch, err, n);
    case OPT_MAXP:
        return sluice_parse_size("--max-payload", v, 0, 15u << 20, &r->o.max_payload, err, n);
    case OPT_CLIENT:
        r->client = v;
        return 0;
    case OPT_TENANT:
        r->tenant = v;
        return 0;
    case OPT_HEADER:
        return add_header(r, v, err, n);
    case OPT_IDEM:
        r->idem = v;
        return 0;
    case OPT_TIMEOUT:
        if (sluice_parse_ll("--timeout", v, 1, 3600000, &x, err, n) != 0) {
            return -1;
        }
        r->o.command_timeout_ms = (int)x;
        return 0;
    case OPT_IDS:
        r->ids = 1;
        return 0;
    case OPT_JSON:
        r->json = 1;
        return 0;
    case OPT_RATE:
        return sluice_parse_ll("--rate", v, 1, 10000000, &r->rate, err, n);
    case OPT_WAIT_REPLICAS:
        if (sluice_parse_ll("--wait-replicas", v, 0, SLUICE_WAIT_REPLICAS_MAX, &x, err, n) != 0) {
            return -1;
        }
        r->o.wait_replicas = (int)x;
        return 0;
    case OPT_WAIT_TIMEOUT:
        if (sluice_parse_ll("--wait-timeout", v, 1, 3600000, &x, err, n) != 0) {
            return -1;
        }
        r->o.wait_timeout_ms = (int)x;
        return 0;
    case OPT_LOG_LEVEL:
        return sluice_cli_log_level(v, "sluice-enqueue", err, n);
    default:
        snprintf(err, n, "unknown option");
        return -1;
    }
}

/* With --rate, sleeps until the next n payloads are due. */
static void pace(run *r, size_t n) {
    if (r->rate <= 0) {
        return;
    }
    if (r->started_ns == 0) {
        r->started_ns = sluice_now_ns();
    }
    uint64_t due = r->started_ns + (uint64_t)((double)r->offered * 1e9 / (double)r->rate);
    uint64_t now = sluice_now_ns();
    if (due > now) {
        struct timespec ts = {(time_t)((due - now) / 1000000000u),
                              (long)((due - now) % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    r->offered += n;
}

/* Sends msgs[0..n); prints the ids and counts the outcomes Redis decided (on a partitioned queue
 * also when another partition's call failed); returns 0, or -1 after a redis failure. */
static int send_batch(run *r, sluice_message *msgs, size_t n) {
    pace(r, n);
    static sluice_admit_result res[10000];
    int st = sluice_producer_admit_batch(r->p, msgs, n, res, NULL);
    if (st == SLUICE_ETOOBIG || st == SLUICE_EINVAL) {
        fprintf(stderr, "sluice-enqueue: %s\n", sluice_producer_errstr(r->p));
        r->invalid += n;
        return 0;
    }
    if (st != 0) { /* some or all: a partitioned queue's other partitions may have answered */
        fprintf(stderr, "sluice-enqueue: %s: %s\n", sluice_strerror(st),
                sluice_producer_errstr(r->p));
        r->redis_failed = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (res[i].outcome == SLUICE_FAILED || res[i].outcome == SLUICE_OPEN) {
            continue; /* not decided by Redis: said above */
        }
        r->depth = res[i].depth;
        r->capacity = res[i].capacity;
        if (res[i].outcome == SLUICE_ADMITTED) {
            r->admitted++;
            if (r->ids) { /* the payload as given, NUL bytes included */
                printf("%s ", res[i].id);
                fwrite(msgs[i].payload, 1, msgs[i].len, stdout);
                putchar('\n');
            }
        } else if (res[i].outcome == SLUICE_DUPLICATE) {
            r->duplicates++;
            /* not "ID PAYLOAD": this payload was not queued, the id is an earlier one's */
            fprintf(stderr,
                    "sluice-enqueue: duplicate: idempotency key '%s' was admitted earlier as %s; "
                    "this payload was not queued\n",
                    msgs[i].idempotency_key ? msgs[i].idempotency_key : "", res[i].id);
        } else {
            r->rejected++;
            if (res[i].outcome == SLUICE_LIMITED) {
                r->limited++;
                snprintf(r->last_limit, sizeof(r->last_limit), "%s", res[i].limit);
                if (res[i].retry_after_ms > r->limit_retry_ms) {
                    r->limit_retry_ms = res[i].retry_after_ms;
                }
            }
        }
    }
    return st != 0 ? -1 : 0;
}

static void fill(run *r, sluice_message *m, const char *payload, size_t len) {
    m->payload = payload;
    m->len = len;
    m->headers = r->headers;
    m->nheaders = r->nheaders;
    m->tenant = r->tenant;
    m->idempotency_key = r->idem;
    m->client = r->client;
}

/* Reads one line (without its newline) into a fresh buffer that grows only up to max bytes:
 * a longer line is read to its end and dropped, so memory stays bounded by --max-payload
 * whatever the input. Returns 1 (*out, *len set), -1 for a line over max (*len = its length,
 * *out NULL), 0 at the end of the input. */
static int read_line(FILE *in, size_t max, char **out, size_t *len) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int c, any = 0;
    *out = NULL;
    while ((c = getc_unlocked(in)) != EOF) {
        any = 1;
        if (c == '\n') {
            break;
        }
        if (n < max) {
            if (n + 1 >= cap) {
                size_t ncap = cap == 0 ? 256 : cap * 2;
                ncap = ncap > max + 1 ? max + 1 : ncap;
                char *nb = realloc(buf, ncap);
                if (nb == NULL) {
                    free(buf);
                    return -1;
                }
                buf = nb;
                cap = ncap;
            }
            buf[n] = (char)c;
        }
        n++;
    }
    *len = n;
    if (!any) {
        return 0;
    }
    if (n > max) {
        free(buf);
        return -1;
    }
    if (buf == NULL && (buf = malloc(1)) == NULL) {
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    return 1;
}

static void from_stdin(run *r) {
    static sluice_message msgs[10000];
    static char *lines[10000];
    size_t n = 0, len = 0;
    char *line;
    int got;
    unsigned long long lineno = 0;
    while (!r->redis_failed && (got = read_line(stdin, r->o.max_payload, &line, &len)) != 0) {
        lineno++;
        if (got < 0) {
            fprintf(stderr, "sluice-enqueue: line %llu: payload is %zu bytes; the limit is %zu\n",
                    lineno, len, r->o.max_payload);
            r->invalid++;
            continue;
        }
        lines[n] = line;
        fill(r, &msgs[n], line, len);
        if (++n == (size_t)r->batch) {
            send_batch(r, msgs, n);
            while (n > 0) {
                free(lines[--n]);
            }
        }
    }
    if (n > 0 && !r->redis_failed) {
        send_batch(r, msgs, n);
    }
    while (n > 0) {
        free(lines[--n]);
    }
}

/* A figure Redis told us, or "unknown" (JSON null) when no call answered. */
static const char *figure(long long v, int json, char *buf, size_t len) {
    if (v < 0) {
        return json ? "null" : "unknown";
    }
    snprintf(buf, len, "%lld", v);
    return buf;
}

/* A partitioned queue: the summary gives the queue's depth and capacity, the sums over its
 * partitions read at the end (each reply gives only its own partition's). */
static void queue_totals(run *r) {
    if (sluice_producer_partitions(r->p) <= 1) {
        return;
    }
    int st = sluice_producer_queue_figures(r->p, &r->depth, &r->capacity);
    if (st != 0) {
        fprintf(stderr, "sluice-enqueue: the queue's depth and capacity: %s: %s\n",
                sluice_strerror(st), sluice_producer_errstr(r->p));
    }
}

static void summary(const run *r) {
    char d[24], c[24];
    int parts = sluice_producer_partitions(r->p);
    if (r->json) {
        printf("{\"admitted\":%llu,\"rejected\":%llu,\"limited\":%llu,\"invalid\":%llu,"
               "\"duplicates\":%llu,\"depth\":%s,\"capacity\":%s,\"partitions\":%d}\n",
               r->admitted, r->rejected, r->limited, r->invalid, r->duplicates,
               figure(r->depth, 1, d, sizeof(d)), figure(r->capacity, 1, c, sizeof(c)), parts);
    } else {
        printf("admitted=%llu rejected=%llu depth=%s capacity=%s", r->admitted, r->rejected,
               figure(r->depth, 0, d, sizeof(d)), figure(r->capacity, 0, c, sizeof(c)));
        if (parts > 1) {
            printf(" partitions=%d", parts);
        }
        if (r->duplicates > 0) {
            printf(" duplicates=%llu", r->duplicates);
        }
        if (r->limited > 0) {
            printf(" limited=%llu (by %s, retry after %lld ms)", r->limited, r->last_limit,
                   r->limit_retry_ms);
        }
        printf("%s\n", r->invalid ? " (some input was invalid)" : "");
    }
}

int main(int argc, char **argv) {
    static run r;
    char err[512];
    int ch;
    signal(SIGPIPE, SIG_IGN);
    sluice_producer_options_init(&r.o);
    r.batch = 100;
    r.depth = r.capacity = -1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":q:r:C:b:n:hV", longopts, NULL)) != -1) {
        if (ch == 'V') {
            exit(sluice_cli_version("sluice-enqueue"));
        }
        if (ch == 'h') {
            fputs(usage, stdout);
            return 0;
        }
        if (ch == '?' || ch == ':') {
            snprintf(err, sizeof(err), "%s option '%s'",
                     ch == '?' ? "unknown" : "missing value for", argv[optind - 1]);
            return fail_usage(err);
        }
        if (parse_opt(&r, ch, optarg, err, sizeof(err)) != 0) {
            return fail_usage(err);
        }
    }
    if (r.o.queue == NULL) {
        return fail_usage("--queue is required");
    }
    if (r.idem != NULL && argc - optind != 1) {
        return fail_usage("--idempotency-key needs exactly one PAYLOAD argument");
    }
    sluice_conn_options tls;
    sluice_conn_options_init(&tls);
    if (sluice_cli_tls_env(&tls, err, sizeof(err)) != 0) {
        return fail_usage(err);
    }
    r.o.tls = &tls;
    if (sluice_producer_new(&r.o, &r.p, err, sizeof(err)) != 0) {
        return fail_usage(err);
    }
    if (optind < argc) {
        for (int i = optind; i < argc && !r.redis_failed; i++) {
            sluice_message m;
            size_t len = strlen(argv[i]);
            if (len > r.o.max_payload) { /* named by its place among the PAYLOAD arguments */
                fprintf(stderr,
                        "sluice-enqueue: payload argument %d: %zu bytes; the limit is %zu\n",
                        i - optind + 1, len, r.o.max_payload);
                r.invalid++;
                continue;
            }
            fill(&r, &m, argv[i], len);
            send_batch(&r, &m, 1);
        }
    } else {
        from_stdin(&r);
    }
    queue_totals(&r);
    summary(&r);
    sluice_producer_free(r.p);
    if (r.redis_failed) {
        return SLUICE_EXIT_REDIS;
    }
    if (r.invalid > 0) {
        return SLUICE_EXIT_USAGE;
    }
    return r.rejected > 0 ? SLUICE_EXIT_REJECTED : SLUICE_EXIT_OK;
}
