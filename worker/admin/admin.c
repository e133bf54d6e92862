/* SPDX-License-Identifier: MIT */
/*
 * sluice-admin - operate a sluice queue: look at it, tune it, repair it.
 *
 * This file parses the command line (one option table; each subcommand names the options that
 * apply to it, so `--prune` on `stats` is a usage error rather than silently ignored), checks
 * the queue name before any Redis call, connects, and dispatches. The subcommands live in
 * admin_stats.c, admin_dead.c, admin_consumers.c and admin_queue.c.
 *
 * Exit codes: 0 ok, 1 nothing to do or some entries did not fit, 2 usage or bad input,
 * 3 Redis unavailable or refusing.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/envelope.h"
#include "sluice/limit.h"
#include "sluice/queue.h"
#include "sluice/url.h"

#include "admin.h"

static const char usage[] =
    "usage: sluice-admin COMMAND QUEUE [ARGS] [options]\n"
    "\n"
    "Look at, tune and repair a sluice queue.\n"
    "\n"
    "Commands:\n"
    "  stats QUEUE                  depth / capacity, waiting vs in flight, pending per\n"
    "                               consumer, dead letters, counters and their rates\n"
    "  watch QUEUE                  the same, refreshed like top until Ctrl-C\n"
    "  capacity QUEUE [N] [--per-tenant M]\n"
    "                               print the capacity, or set it to N (producers honour it\n"
    "                               on their next admission); --per-tenant M: no tenant holds\n"
    "                               more than M entries, waiting + in flight (0: off;\n"
    "                               stream backend)\n"
    "  dead list QUEUE              dead letters, oldest first (--limit N, default 50)\n"
    "  dead show QUEUE DEAD_ID      one dead letter with its decoded envelope\n"
    "  dead replay QUEUE [DEAD_ID...]\n"
    "                               admit dead letters again through the admission function:\n"
    "                               what fits is removed from the dead stream, the rest is\n"
    "                               reported and kept (exit 1)\n"
    "  dead delete QUEUE DEAD_ID... delete the dead letters named; says how many were\n"
    "                               found (exit 1 when some were not)\n"
    "  dead purge QUEUE [DEAD_ID...] --yes\n"
    "                               delete dead letters (all, or the ones named)\n"
    "  consumers QUEUE [--prune IDLE_MS]\n"
    "                               list consumers (a fair queue: lane entries counted);\n"
    "                               --prune deletes those idle at least IDLE_MS, after\n"
    "                               moving their pending entries (stream and lanes) to a\n"
    "                               live consumer (one whose entries cannot move is kept)\n"
    "  purge QUEUE --yes            delete every key of the queue (both backends)\n"
    "  pause QUEUE                  workers (every process, every partition) take no new\n"
    "                               entries within about a second; entries in flight\n"
    "                               finish, crashed workers' entries are still reclaimed;\n"
    "                               producers still admit until the bucket is full\n"
    "  resume QUEUE                 workers take entries again within about a second\n"
    "  peek QUEUE [--count N] [--tenant T]\n"
    "                               the oldest N entries (default 10), in flight or\n"
    "                               waiting, decoded: admitted time, state (consumer, idle\n"
    "                               time, deliveries), tenant, headers, payload\n"
    "  inspect QUEUE ID             one entry, decoded as peek shows it (list backend: ID\n"
    "                               is the element's number); exit 1 when it is not there\n"
    "  clear QUEUE --yes            delete the waiting entries (not those in flight), keeping\n"
    "                               capacity, limits, weights and counters; depth, tenant\n"
    "                               shares and fair lanes are counted again\n"
    "  limit QUEUE set NAME SCOPE RATE [--algorithm A]\n"
    "                               a rate limit the admission checks: SCOPE queue (all\n"
    "                               admissions), tenant (per envelope tenant) or client (per\n"
    "                               caller key), drain (the pace of all workers together:\n"
    "                               they wait for the next allowance, nothing fails) or\n"
    "                               inflight (RATE is then a count N of entries in flight\n"
    "                               across all workers); RATE N/DURATION, e.g. 100/1m\n"
    "  limit QUEUE list             the limits and how many admissions each refused\n"
    "  limit QUEUE del NAME         remove a limit\n"
    "  limit QUEUE show NAME [VALUE]\n"
    "                               one limit's state in Redis (VALUE: the tenant or client)\n"
    "                               drain-tenant RATE and inflight-tenant N: the same per\n"
    "                               tenant, on fair queues\n"
    "  partitions QUEUE [P]         spread QUEUE over P partitions (1..64, only more):\n"
    "                               QUEUE, QUEUE~1 ... QUEUE~P-1, each its own hash tag (on\n"
    "                               a Redis Cluster: its own slot), capacity split evenly;\n"
    "                               producers route by tenant, else to the emptier of\n"
    "                               two; one sluice-worker drains them all; limit, fair\n"
    "                               and --per-tenant apply to every partition (whole-queue\n"
    "                               limits split like the capacity)\n"
    "  fair QUEUE [on|off|show] [--weight TENANT=W ...]\n"
    "                               a fair queue keeps a lane per tenant and the workers\n"
    "                               serve the lanes in turn (W entries per turn, default 1),\n"
    "                               so a tenant with a backlog cannot starve the others;\n"
    "                               show: the lanes (the busiest first, --limit N)\n"
    "\n"
    "Options:\n"
    "  -r, --redis URL              redis://[user:pass@]host:port[/db] or unix:///path\n"
    "                               (default $SLUICE_REDIS_URL, else redis://127.0.0.1:6379)\n"
    "                               rediss://...: TLS, options in $SLUICE_TLS_* (docs/tls.md)\n"
    "  -b, --backend stream|list    the queue's backend (default: detected)\n"
    "      --group NAME             consumer group (default workers)\n"
    "      --json                   print one JSON object (watch: one per refresh)\n"
    "      --sample MS              stats: measure rates over MS (default 1000, 0 = none)\n"
    "      --interval MS            watch: refresh period (default 1000)\n"
    "      --count N                watch: stop after N refreshes (default: until Ctrl-C);\n"
    "                               peek: entries shown (default 10, at most 1000)\n"
    "      --tenant T               peek, inspect: the fair lane of tenant T\n"
    "      --bytes N                peek, inspect: payload bytes shown (default 200)\n"
    "      --algorithm A            limit set: gcra (default), window, log, fixed or gate\n"
    "      --per-tenant M           capacity: a tenant's share of the bucket\n"
    "      --weight TENANT=W        fair: TENANT's lane gets W turns to another's 1 (1..1000)\n"
    "      --limit N                dead list: entries shown (default 50); fair: lanes shown\n"
    "                               (default 50);\n"
    "                               dead replay: entries replayed at most (default all)\n"
    "      --default-capacity N     dead replay: capacity when the queue has none set\n"
    "                               (default 1000, the producers' default)\n"
    "      --yes                    purge, dead purge, clear: really delete\n"
    "      --log-level LEVEL        error, warn, info, debug or off (default off): the\n"
    "                               connection's events (reconnects, redirects) on stderr\n"
    "  -h, --help                   this text\n"
    "\n"
    "EXAMPLES\n"
    "  sluice-admin stats jobs                  depth, capacity, rates, consumers\n"
    "  sluice-admin capacity jobs 5000          producers honour it on their next call\n"
    "  sluice-admin dead list jobs              then: sluice-admin dead replay jobs\n"
    "  sluice-admin consumers jobs --prune 3600000\n"
    "  sluice-admin fair jobs on --weight gold=3\n"
    "\n"
    "Exit codes: 0 ok, 1 nothing to do or some did not fit, 2 usage or bad input,\n"
    "3 redis unavailable or refusing.\n";

enum {
    OPT_JSON = 256,
    OPT_GROUP,
    OPT_SAMPLE,
    OPT_INTERVAL,
    OPT_COUNT,
    OPT_LIMIT,
    OPT_DEFCAP,
    OPT_PRUNE,
    OPT_YES,
    OPT_ALGORITHM,
    OPT_PER_TENANT,
    OPT_WEIGHT,
    OPT_LOG_LEVEL,
    OPT_TENANT,
    OPT_BYTES,
};

/* Bits naming the options a subcommand accepts (--redis, --json, --log-level and --help: all of
 * them). */
enum {
    A_BACKEND = 1 << 0,
    A_GROUP = 1 << 1,
    A_SAMPLE = 1 << 2,
    A_WATCH = 1 << 3,
    A_LIMIT = 1 << 4,
    A_DEFCAP = 1 << 5,
    A_PRUNE = 1 << 6,
    A_YES = 1 << 7,
    A_ALGORITHM = 1 << 8,
    A_PER_TENANT = 1 << 9,
    A_WEIGHT = 1 << 10,
    A_COUNT = 1 << 11,
    A_TENANT = 1 << 12,
    A_BYTES = 1 << 13,
};

static const struct option longopts[] = {
    {"redis", required_argument, NULL, 'r'},
    {"backend", required_argument, NULL, 'b'},
    {"group", required_argument, NULL, OPT_GROUP},
    {"json", no_argument, NULL, OPT_JSON},
    {"sample", required_argument, NULL, OPT_SAMPLE},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"count", required_argument, NULL, OPT_COUNT},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"default-capacity", required_argument, NULL, OPT_DEFCAP},
    {"prune", required_argument, NULL, OPT_PRUNE},
    {"yes", no_argument, NULL, OPT_YES},
    {"algorithm", required_argument, NULL, OPT_ALGORITHM},
    {"per-tenant", required_argument, NULL, OPT_PER_TENANT},
    {"weight", required_argument, NULL, OPT_WEIGHT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"bytes", required_argument, NULL, OPT_BYTES},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const struct command {
    const char *name;
    int (*fn)(admin *a);
    unsigned allowed;
} commands[] = {
    {"stats", admin_stats, A_BACKEND | A_GROUP | A_SAMPLE},
    {"watch", admin_watch, A_BACKEND | A_GROUP | A_WATCH | A_COUNT},
    {"capacity", admin_capacity, A_PER_TENANT},
    {"dead", admin_dead, A_BACKEND | A_LIMIT | A_DEFCAP | A_YES},
    {"consumers", admin_consumers, A_BACKEND | A_GROUP | A_PRUNE},
    {"purge", admin_purge, A_YES},
    {"limit", admin_limit, A_ALGORITHM},
    {"fair", admin_fair, A_GROUP | A_WEIGHT | A_LIMIT},
    {"partitions", admin_partitions, 0},
    {"pause", admin_pause, A_BACKEND},
    {"resume", admin_resume, A_BACKEND},
    {"clear", admin_clear, A_BACKEND | A_GROUP | A_YES},
    {"inspect", admin_inspect, A_BACKEND | A_GROUP | A_TENANT | A_BYTES},
    {"peek", admin_peek, A_BACKEND | A_GROUP | A_TENANT | A_BYTES | A_COUNT},
};

static int fail_usage(const char *cmd, const char *msg) {
    fprintf(stderr, "sluice-admin%s%s: %s\nTry 'sluice-admin --help'.\n", cmd ? " " : "",
            cmd ? cmd : "", msg);
    return SLUICE_EXIT_USAGE;
}

/* The bit an option needs, 0 for the ones every subcommand takes. */
static unsigned option_bit(int ch) {
    switch (ch) {
    case 'b':
        return A_BACKEND;
    case OPT_GROUP:
        return A_GROUP;
    case OPT_SAMPLE:
        return A_SAMPLE;
    case OPT_INTERVAL:
        return A_WATCH;
    case OPT_COUNT:
        return A_COUNT;
    case OPT_TENANT:
        return A_TENANT;
    case OPT_BYTES:
        return A_BYTES;
    case OPT_LIMIT:
        return A_LIMIT;
    case OPT_DEFCAP:
        return A_DEFCAP;
    case OPT_PRUNE:
        return A_PRUNE;
    case OPT_YES:
        return A_YES;
    case OPT_ALGORITHM:
        return A_ALGORITHM;
    case OPT_PER_TENANT:
        return A_PER_TENANT;
    case OPT_WEIGHT:
        return A_WEIGHT;
    default:
        return 0;
    }
}

static int parse_number(int ch, const char *v, admin *a, char *err, size_t n) {
    switch (ch) {
    case OPT_SAMPLE:
        return sluice_parse_ll("--sample", v, 0, 600000, &a->sample_ms, err, n);
    case OPT_INTERVAL:
        return sluice_parse_ll("--interval", v, 50, 3600000, &a->interval_ms, err, n);
    case OPT_COUNT:
        return sluice_parse_ll("--count", v, 1, 1000000000, &a->count, err, n);
    case OPT_LIMIT:
        return sluice_parse_ll("--limit", v, 1, 1000000000, &a->limit, err, n);
    case OPT_DEFCAP:
        return sluice_parse_ll("--default-capacity", v, 1, SLUICE_CAPACITY_MAX, &a->default_cap,
                               err, n);
    case OPT_PRUNE:
        return sluice_parse_ll("--prune", v, 0, (long long)1e12, &a->prune_ms, err, n);
    case OPT_PER_TENANT:
        return sluice_parse_ll("--per-tenant", v, 0, SLUICE_CAPACITY_MAX, &a->per_tenant, err, n);
    case OPT_BYTES:
        return sluice_parse_ll("--bytes", v, 1, SLUICE_ENVELOPE_MAX_BYTES, &a->bytes, err, n);
    default:
        snprintf(err, n, "unknown option");
        return -1;
    }
}

static int parse_one(admin *a, int ch, const char *v, char *err, size_t n) {
    switch (ch) {
    case 'r':
        if (sluice_url_parse(&a->url, v, err, n) != 0) {
            return -1;
        }
        return 0;
    case 'b':
        if (sluice_backend_parse(v, &a->backend) != 0) {
            snprintf(err, n, "--backend: \"%s\" is not stream or list", v);
            return -1;
        }
        a->backend_given = 1;
        return 0;
    case OPT_GROUP:
        a->group = v;
        return 0;
    case OPT_JSON:
        a->json = 1;
        return 0;
    case OPT_YES:
        a->yes = 1;
        return 0;
    case OPT_TENANT:
        a->tenant = v;
        return 0;
    case OPT_LOG_LEVEL:
        return sluice_cli_log_level(v, "sluice-admin", err, n);
    case OPT_WEIGHT:
        if (a->nweights == ADMIN_WEIGHTS_MAX) {
            snprintf(err, n, "--weight: at most %d in one run", ADMIN_WEIGHTS_MAX);
            return -1;
        }
        a->weights[a->nweights++] = v;
        return 0;
    case OPT_ALGORITHM: {
        sluice_limit_alg alg;
        if (sluice_limit_alg_parse(v, &alg) != 0) {
            snprintf(err, n, "--algorithm: \"%s\" is not gcra, window, log, fixed or gate", v);
            return -1;
        }
        a->algorithm = (int)alg;
        return 0;
    }
    default:
        return parse_number(ch, v, a, err, n);
    }
}

static void defaults(admin *a) {
    memset(a, 0, sizeof(*a));
    a->group = SLUICE_DEFAULT_GROUP;
    a->sample_ms = 1000;
    a->interval_ms = 1000;
    a->prune_ms = -1;
    a->per_tenant = -1;
    a->default_cap = 1000;
    a->bytes = 200;
}

static const struct command *find_command(const char *name) {
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(commands[i].name, name) == 0) {
            return &commands[i];
        }
    }
    return NULL;
}

/*
 * Parses every option, wherever it is (`sluice-admin --redis URL stats Q` and
 * `sluice-admin stats Q --redis URL` alike), then takes the command from the first positional
 * and checks that each option given applies to it. Returns 0 or an exit code.
 */
/* `sluice-admin COMMAND --help`: the lines of the usage text about COMMAND and about the
 * options it takes, cut from the one text so the two never disagree. */
static void command_help(const struct command *c) {
    const char *line = usage;
    int section = 0, keep = 0; /* 1 Commands, 2 Options */
    printf("usage: sluice-admin %s QUEUE [ARGS] [options]\n\n", c->name);
    while (*line != '\0') {
        size_t len = strcspn(line, "\n");
        if (strncmp(line, "Commands:", 9) == 0 || strncmp(line, "Options:", 8) == 0) {
            section = line[0] == 'C' ? 1 : 2;
            printf("%.*s\n", (int)len, line);
            keep = 0;
        } else if (len == 0) {
            if (section != 0) {
                printf("\n");
            }
            section = 0;
        } else if (section != 0 &&
                   (section == 1 ? line[2] != ' ' : line[strspn(line, " ")] == '-')) {
            /* a new entry (a command, or an option): keep it? */
            keep = 0;
            if (section == 1) {
                size_t n = strlen(c->name);
                keep = strncmp(line + 2, c->name, n) == 0 && line[2 + n] == ' ';
            } else {
                for (int i = 0; longopts[i].name != NULL; i++) {
                    char opt[40];
                    snprintf(opt, sizeof(opt), "--%s", longopts[i].name);
                    const char *at = strstr(line, opt);
                    size_t ol = strlen(opt);
                    if (at != NULL && at < line + len && (at[ol] == ' ' || at[ol] == '\n') &&
                        (option_bit(longopts[i].val) & ~c->allowed) == 0) {
                        keep = 1;
                    }
                }
            }
            if (keep) {
                printf("%.*s\n", (int)len, line);
            }
        } else if (section != 0 && keep) {
            printf("%.*s\n", (int)len, line);
        }
        line += len + (line[len] == '\n');
    }
}

/* "--help" anywhere after a command word: that command's help. */
static void maybe_command_help(int argc, char **argv) {
    const struct command *c = NULL;
    int help = 0;
    for (int i = 1; i < argc; i++) {
        if (c == NULL && argv[i][0] != '-') {
            c = find_command(argv[i]);
            if (c == NULL) {
                return;
            }
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            help = 1;
        }
    }
    if (c != NULL && help) {
        command_help(c);
        exit(SLUICE_EXIT_OK);
    }
}

static int parse_args(admin *a, int argc, char **argv, const struct command **cmd) {
    char err[512];
    int ch;
    unsigned seen = 0;
    if (sluice_url_parse(&a->url, sluice_url_default(), err, sizeof(err)) != 0) {
        return fail_usage(NULL, err); /* a bad $SLUICE_REDIS_URL */
    }
    maybe_command_help(argc, argv);
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":r:b:hV", longopts, NULL)) != -1) {
        if (ch == 'V') {
            exit(sluice_cli_version("sluice-admin"));
        }
        if (ch == 'h') {
            fputs(usage, stdout);
            exit(0);
        }
        if (ch == '?' && optopt >= '0' && optopt <= '9') {
            /* "capacity jobs -3": a negative number, not an option. getopt moves operands and
             * may stop inside an element, so optind does not say which one: name the first
             * element that starts with this dash and digit. */
            const char *bad = argv[optind - 1];
            for (int i = 1; i < argc; i++) {
                if (argv[i][0] == '-' && argv[i][1] == optopt) {
                    bad = argv[i];
                    break;
                }
            }
            snprintf(err, sizeof(err), "invalid value '%s': negative numbers are not allowed", bad);
            return fail_usage(NULL, err);
        }
        if (ch == '?' || ch == ':') {
            snprintf(err, sizeof(err), "%s option '%s'",
                     ch == '?' ? "unknown" : "missing value for", argv[optind - 1]);
            return fail_usage(NULL, err);
        }
        if (parse_one(a, ch, optarg, err, sizeof(err)) != 0) {
            return fail_usage(NULL, err);
        }
        seen |= option_bit(ch);
    }
    if (sluice_url_supported(&a->url, err, sizeof(err)) != 0) {
        return fail_usage(NULL, err);
    }
    if (optind >= argc) {
        fputs(usage, stderr);
        return SLUICE_EXIT_USAGE;
    }
    if ((*cmd = find_command(argv[optind])) == NULL) {
        snprintf(err, sizeof(err), "unknown command '%.200s'", argv[optind]);
        return fail_usage(NULL, err);
    }
    for (int i = 0; longopts[i].name != NULL; i++) {
        if ((option_bit(longopts[i].val) & seen & ~(*cmd)->allowed) != 0) {
            snprintf(err, sizeof(err), "option '--%s' does not apply to '%s'", longopts[i].name,
                     (*cmd)->name);
            return fail_usage((*cmd)->name, err);
        }
    }
    a->cmd = (*cmd)->name;
    a->args = argv + optind + 1;
    a->nargs = argc - optind - 1;
    return 0;
}

/* Takes QUEUE from the positionals ("dead" has its action first) and builds the keys. */
static int take_queue(admin *a) {
    char err[256];
    int at = strcmp(a->cmd, "dead") == 0 ? 1 : 0;
    if (a->nargs <= at) {
        return fail_usage(a->cmd, at ? "usage: dead list|show|replay|delete|purge QUEUE ..."
                                     : "QUEUE is required");
    }
    if (sluice_keys_init(&a->keys, a->args[at], err, sizeof(err)) != 0) {
        char msg[600];
        snprintf(msg, sizeof(msg), "QUEUE \"%.200s\": %s", a->args[at], err);
        return fail_usage(a->cmd, msg);
    }
    a->queue = a->args[at];
    if (a->group[0] == '\0' || strlen(a->group) > 200) {
        return fail_usage(a->cmd, "--group: 1..200 characters");
    }
    return 0;
}

int main(int argc, char **argv) {
    static admin a;
    const struct command *c = NULL;
    signal(SIGPIPE, SIG_IGN);
    defaults(&a);
    int rc = parse_args(&a, argc, argv, &c);
    if (rc == 0) {
        rc = take_queue(&a);
    }
    if (rc != 0) {
        return rc;
    }
    sluice_url_redact(&a.url, a.where, sizeof(a.where));
    sluice_conn_options co;
    char err[512];
    sluice_conn_options_init(&co);
    if (sluice_cli_tls_env(&co, err, sizeof(err)) != 0) {
        return fail_usage(NULL, err);
    }
    a.conn = sluice_conn_new(&a.url, &co);
    if (a.conn == NULL) {
        admin_err(&a, "out of memory");
        return SLUICE_EXIT_REDIS;
    }
    rc = c->fn(&a);
    sluice_conn_free(a.conn);
    return rc;
}
