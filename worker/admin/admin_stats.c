/* SPDX-License-Identifier: MIT */
/*
 * admin_stats.c - `sluice-admin stats`, `watch` and `capacity`.
 *
 * A snapshot is read in one MULTI/EXEC so that depth, pending and the counters describe the same
 * instant (waiting = depth - pending is only meaningful then). Rates are counter deltas between
 * two snapshots divided by the monotonic time between them: stats takes the second one after
 * --sample ms, watch uses the previous refresh.
 *
 * Depth, waiting, in flight, dead and the counters mean what sluice/figures.h says, the same
 * for every reader; the consumer rows come from XINFO CONSUMERS (stream) or the processing
 * lists (list backend). JSON's "lag" repeats "waiting" for readers of earlier versions.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/figures.h"
#include "sluice/status.h"

#include "admin.h"

#define MAX_ROWS 256 /* consumers shown; all are counted */

enum { NCOUNTERS = SLUICE_COUNTER_COUNT_ };

typedef struct row {
    char name[160];
    long long pending;
    long long idle_ms; /* -1: unknown (list backend) */
} row;

#define MAX_LIMITS 32 /* limits shown; all are counted */

typedef struct limit_row {
    char name[65], scope[16], spec[96];
    long long refused;
} limit_row;

typedef struct snapshot {
    uint64_t at_ns;
    sluice_figures f;  /* one meaning for every reader: see sluice/figures.h */
    size_t nconsumers; /* all of them; rows holds the first MAX_ROWS */
    row rows[MAX_ROWS];
    size_t nlimits; /* the queue's rate limits (sluice-admin limit), the first MAX_LIMITS */
    limit_row limits[MAX_LIMITS];
    long long per_tenant; /* the tenant share, 0 = none */
    long long tenants;    /* tenants holding entries under it */
    int fair;             /* meta `fair` */
    long long partitions; /* meta `partitions` (1: not partitioned) */
    sluice_figures all;   /* partitioned: the figures of every partition summed */
    int unavailable;      /* partitioned: partitions that could not be read (not in `all`) */
    uint64_t unavail;     /* bit i: partition i could not be read */
    long long lanes;      /* tenant lanes holding entries (a fair queue, or one switched back) */
} snapshot;

static int cmp_limit_row(const void *a, const void *b) {
    return strcmp(((const limit_row *)a)->name, ((const limit_row *)b)->name);
}

/* The limits hash (name -> "SCOPE SPEC") and their refusals (stats limited:NAME), by name. */
static void read_limits(snapshot *s, const redisReply *lims, const redisReply *stats) {
    for (size_t i = 0; lims != NULL && lims->type == REDIS_REPLY_ARRAY && i + 1 < lims->elements;
         i += 2) {
        if (s->nlimits++ >= MAX_LIMITS) {
            continue;
        }
        limit_row *l = &s->limits[s->nlimits - 1];
        char field[80];
        snprintf(l->name, sizeof(l->name), "%.64s", lims->element[i]->str);
        if (sscanf(lims->element[i + 1]->str, "%15s %95s", l->scope, l->spec) != 2) {
            snprintf(l->scope, sizeof(l->scope), "?");
        }
        snprintf(field, sizeof(field), "limited:%.64s", l->name);
        l->refused = sluice_reply_ll(sluice_reply_field(stats, field), 0);
    }
    size_t shown = s->nlimits < MAX_LIMITS ? s->nlimits : MAX_LIMITS;
    qsort(s->limits, shown, sizeof(s->limits[0]), cmp_limit_row);
}

/* ---- reading a snapshot ---- */

static void read_consumers(snapshot *s, const redisReply *cs) {
    if (cs == NULL || cs->type != REDIS_REPLY_ARRAY) {
        return;
    }
    s->nconsumers = cs->elements;
    for (size_t i = 0; i < cs->elements && i < MAX_ROWS; i++) {
        const redisReply *c = cs->element[i];
        const redisReply *name = sluice_reply_field(c, "name");
        row *r = &s->rows[i];
        snprintf(r->name, sizeof(r->name), "%s",
                 name && name->type == REDIS_REPLY_STRING ? name->str : "?");
        r->pending = sluice_reply_ll(sluice_reply_field(c, "pending"), 0);
        r->idle_ms = sluice_reply_ll(sluice_reply_field(c, "idle"), -1);
    }
}

/* Sends MULTI, the commands, EXEC; *out is the EXEC array (n replies, errors inline). */
static int transaction(admin *a, redisReply **out, sluice_figures_cmd *cmds, size_t n) {
    redisReply *r;
    int rc = admin_call(a, &r, "MULTI", "MULTI", NULL);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        freeReplyObject(r);
        rc = admin_callv(a, &r, cmds[i].argv[0], cmds[i].argc, cmds[i].argv, NULL);
    }
    freeReplyObject(r);
    if (rc != 0) { /* a command refused while queuing leaves the MULTI open: close it */
        const char *discard[] = {"DISCARD"};
        r = NULL;
        sluice_conn_command(a->conn, 1, discard, NULL, &r, NULL);
        freeReplyObject(r);
        return rc;
    }
    rc = admin_call(a, &r, "EXEC", "EXEC", NULL);
    if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements != n)) {
        admin_err(a, "EXEC: unexpected reply");
        freeReplyObject(r);
        return SLUICE_EXIT_REDIS;
    }
    *out = r;
    return rc;
}

int admin_part_figures(admin *a, const sluice_keys *k, sluice_figures *f) {
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS];
    size_t n = sluice_figures_commands(k, a->backend, cmds);
    redisReply *r;
    int rc = transaction(a, &r, cmds, n);
    if (rc != 0) {
        return rc;
    }
    sluice_figures_read(f, a->backend, a->group, r->element, n, NULL);
    freeReplyObject(r);
    return 0;
}

/* A partitioned queue: the figures of partitions 1..P-1 (one MULTI/EXEC each: a partition's
 * keys share its slot) added to partition 0's into s->all. A partition that cannot be read (its
 * primary down) is said on stderr, counted in s->unavailable and left out of the sums: the
 * others are still shown. */
static int snap_partitions(admin *a, snapshot *s) {
    s->all = s->f;
    for (long long i = 1; i < s->partitions && i < SLUICE_PARTITIONS_MAX; i++) {
        sluice_keys k;
        if (sluice__partition_keys(a->queue, (int)i, &k) != 0) {
            continue;
        }
        sluice_figures f;
        if (admin_part_figures(a, &k, &f) != 0) {
            s->unavailable++;
            s->unavail |= (uint64_t)1 << i;
            continue;
        }
        sluice_figures_add(&s->all, &f);
    }
    return 0;
}

/* List backend: each processing list is a consumer; its length is what it holds. */
static int snap_list_procs(admin *a, snapshot *s, const redisReply *procs) {
    if (procs == NULL || procs->type != REDIS_REPLY_ARRAY) {
        return 0;
    }
    s->nconsumers = procs->elements;
    for (size_t i = 0; i < procs->elements && i < MAX_ROWS; i++) {
        redisReply *r;
        int rc = admin_call(a, &r, "LLEN", "LLEN", procs->element[i]->str, NULL);
        if (rc != 0) {
            return rc;
        }
        snprintf(s->rows[i].name, sizeof(s->rows[i].name), "%s",
                 sluice_key_proc_consumer(&a->keys, procs->element[i]->str));
        s->rows[i].pending = sluice_reply_ll(r, 0);
        s->rows[i].idle_ms = -1;
        freeReplyObject(r);
    }
    return 0;
}

/* The queue figures and the consumer rows, read in one MULTI/EXEC. */
static int snapshot_take(admin *a, snapshot *s) {
    memset(s, 0, sizeof(*s));
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS + 8];
    size_t n = sluice_figures_commands(&a->keys, a->backend, cmds);
    int list = a->backend == SLUICE_BACKEND_LIST;
    char tdepth[SLUICE_KEY_MAX], lanes[SLUICE_KEY_MAX];
    sluice__key(&a->keys, SLUICE_KEY_TDEPTH, NULL, 0, tdepth, sizeof(tdepth));
    sluice__key(&a->keys, SLUICE_KEY_LANES, NULL, 0, lanes, sizeof(lanes));
    cmds[n] = list ? (sluice_figures_cmd){2, {"SMEMBERS", a->keys.procs}}
                   : (sluice_figures_cmd){4, {"XINFO", "CONSUMERS", a->keys.stream, a->group}};
    cmds[n + 1] = (sluice_figures_cmd){2, {"HGETALL", a->keys.limits}};
    cmds[n + 2] = (sluice_figures_cmd){2, {"HGETALL", a->keys.stats}};
    cmds[n + 3] = (sluice_figures_cmd){3, {"HGET", a->keys.meta, "per_tenant"}};
    cmds[n + 4] = (sluice_figures_cmd){2, {"HLEN", tdepth}};
    cmds[n + 5] = (sluice_figures_cmd){3, {"HGET", a->keys.meta, "fair"}};
    cmds[n + 6] = (sluice_figures_cmd){2, {"HLEN", lanes}};
    cmds[n + 7] = (sluice_figures_cmd){3, {"HGET", a->keys.meta, "partitions"}};
    redisReply *r;
    int rc = transaction(a, &r, cmds, n + 8);
    if (rc != 0) {
        return rc;
    }
    size_t bad = 0;
    int st = sluice_figures_read(&s->f, a->backend, a->group, r->element, n, &bad);
    if (st != 0) {
        admin_err(a, "%s: %s", cmds[bad].argv[0],
                  r->element[bad]->type == REDIS_REPLY_ERROR ? r->element[bad]->str
                                                             : sluice_strerror(st));
        rc = SLUICE_EXIT_REDIS;
    }
    if (rc == 0) {
        read_limits(s, r->element[n + 1], r->element[n + 2]);
        s->per_tenant = sluice_reply_ll(r->element[n + 3], 0);
        s->tenants = sluice_reply_ll(r->element[n + 4], 0);
        s->fair = sluice_reply_ll(r->element[n + 5], 0) == 1;
        s->lanes = sluice_reply_ll(r->element[n + 6], 0);
        s->partitions = sluice_reply_ll(r->element[n + 7], 1);
        rc = list ? snap_list_procs(a, s, r->element[n]) : (read_consumers(s, r->element[n]), 0);
        if (rc == 0 && s->partitions > 1) {
            freeReplyObject(r);
            r = NULL;
            rc = snap_partitions(a, s);
        }
    }
    freeReplyObject(r);
    s->at_ns = sluice_now_ns();
    return rc;
}

/* ---- output ---- */

/* Rates per second between two snapshots into r[]; returns 0 when there is no interval. */
static int rates(const snapshot *prev, const snapshot *cur, double *r) {
    if (prev == NULL || cur->at_ns <= prev->at_ns) {
        return 0;
    }
    double dt = (double)(cur->at_ns - prev->at_ns) / 1e9;
    for (size_t i = 0; i < NCOUNTERS; i++) {
        long long d = cur->f.counters[i] - prev->f.counters[i];
        r[i] = d > 0 ? (double)d / dt : 0.0; /* a purge resets counters: no negative rates */
    }
    return 1;
}

/* The partitions paused (of a queue not partitioned: 1 when it is paused). */
static long long paused_parts(const snapshot *s) {
    return s->partitions > 1 ? s->all.paused : s->f.paused;
}

static void print_json(const admin *a, const snapshot *s, const snapshot *prev) {
    double r[NCOUNTERS];
    int have = rates(prev, s, r);
    printf("{\"queue\":\"%s\",\"backend\":\"%s\",\"group\":", a->queue,
           sluice_backend_name(a->backend));
    admin_json_str(stdout, a->group, strlen(a->group));
    printf(",\"depth\":%lld,\"capacity\":", s->f.depth);
    s->f.capacity >= 0 ? printf("%lld", s->f.capacity) : printf("null");
    if (s->f.capacity == ADMIN_CAPACITY_INVALID) {
        printf(",\"capacity_error\":\"invalid capacity in meta\"");
    }
    printf(",\"waiting\":%lld,\"in_flight\":%lld,\"pending\":%lld,\"lag\":", s->f.waiting,
           s->f.in_flight, s->f.in_flight);
    printf("%lld", s->f.waiting); /* kept for readers of earlier versions: = waiting */
    printf(",\"dead\":%lld,\"consumers\":[", s->f.dead);
    for (size_t i = 0; i < s->nconsumers && i < MAX_ROWS; i++) {
        printf("%s{\"name\":", i ? "," : "");
        admin_json_str(stdout, s->rows[i].name, strlen(s->rows[i].name));
        printf(",\"pending\":%lld,\"idle_ms\":", s->rows[i].pending);
        s->rows[i].idle_ms >= 0 ? printf("%lld}", s->rows[i].idle_ms) : printf("null}");
    }
    printf("],\"consumers_total\":%zu,\"counters\":{", s->nconsumers);
    for (size_t i = 0; i < NCOUNTERS; i++) {
        printf("%s\"%s\":%lld", i ? "," : "", sluice_counter_name((sluice_counter)i),
               s->f.counters[i]);
    }
    printf("},\"rates\":");
    if (!have) {
        printf("null");
    } else {
        for (size_t i = 0; i < NCOUNTERS; i++) {
            printf("%s\"%s\":%.1f", i ? "," : "{", sluice_counter_name((sluice_counter)i), r[i]);
        }
        printf("}");
    }
    printf(",\"limits\":[");
    for (size_t i = 0; i < s->nlimits && i < MAX_LIMITS; i++) { /* names and specs: ASCII */
        printf("%s{\"name\":\"%s\",\"scope\":\"%s\",\"spec\":\"%s\",\"refused\":%lld}",
               i ? "," : "", s->limits[i].name, s->limits[i].scope, s->limits[i].spec,
               s->limits[i].refused);
    }
    printf("],\"limits_total\":%zu,\"per_tenant\":", s->nlimits);
    s->per_tenant > 0 ? printf("%lld", s->per_tenant) : printf("null");
    printf(",\"tenants_holding\":%lld,\"fair\":%s,\"lanes_holding\":%lld,\"partitions\":%lld",
           s->tenants, s->fair ? "true" : "false", s->lanes, s->partitions < 1 ? 1 : s->partitions);
    if (s->partitions > 1) {
        printf(",\"all_partitions\":{\"depth\":%lld,\"waiting\":%lld,\"in_flight\":%lld,"
               "\"dead\":%lld,\"capacity\":",
               s->all.depth, s->all.waiting, s->all.in_flight, s->all.dead);
        s->all.capacity >= 0 ? printf("%lld", s->all.capacity) : printf("null");
        printf(",\"unavailable\":[");
        for (int i = 1, first = 1; i < SLUICE_PARTITIONS_MAX; i++) {
            if (s->unavail & ((uint64_t)1 << i)) {
                printf("%s%d", first ? "" : ",", i);
                first = 0;
            }
        }
        printf("]}");
    }
    printf(",\"paused\":%s", paused_parts(s) > 0 ? "true" : "false");
    printf(",\"sample_ms\":%lld}\n", have ? (long long)((s->at_ns - prev->at_ns) / 1000000u) : 0LL);
    fflush(stdout);
}

static void print_consumers(const snapshot *s) {
    char a[32], b[32];
    if (s->nconsumers == 0) {
        printf("  consumers  none\n");
        return;
    }
    printf("  consumers  %zu\n    %-40s %10s %10s\n", s->nconsumers, "NAME", "PENDING", "IDLE");
    for (size_t i = 0; i < s->nconsumers && i < MAX_ROWS; i++) {
        printf("    %-40.40s %10s %10s\n", s->rows[i].name,
               sluice_fmt_count(a, sizeof(a), (unsigned long long)s->rows[i].pending),
               admin_fmt_ms(b, sizeof(b), s->rows[i].idle_ms));
    }
    if (s->nconsumers > MAX_ROWS) {
        printf("    ... and %zu more\n", s->nconsumers - MAX_ROWS);
    }
}

/* 12.5 below 100 per second, 12,345 above: the digits a person needs. */
static char *fmt_rate(char *buf, size_t len, double v) {
    if (v < 100) {
        snprintf(buf, len, "%.1f", v);
        return buf;
    }
    return sluice_fmt_count(buf, len, (unsigned long long)(v + 0.5));
}

static void print_counters(const snapshot *s, const snapshot *prev) {
    double r[NCOUNTERS];
    int have = rates(prev, s, r);
    char a[32];
    printf("  %-10s %16s %12s\n", "COUNTER", "TOTAL", "PER SEC");
    for (size_t i = 0; i < NCOUNTERS; i++) {
        printf("  %-10s %16s", sluice_counter_name((sluice_counter)i),
               sluice_fmt_count(a, sizeof(a), (unsigned long long)s->f.counters[i]));
        printf(" %12s\n", have ? fmt_rate(a, sizeof(a), r[i]) : "-");
    }
    /* Little's law: a new entry waits about depth / drain rate. */
    if (have && r[2] > 0) {
        printf("  drain %s/s: a new entry waits ~%.2fs; a full bucket drains in ~%.2fs\n",
               fmt_rate(a, sizeof(a), r[2]), (double)s->f.depth / r[2],
               s->f.capacity >= 0 ? (double)s->f.capacity / r[2] : (double)s->f.depth / r[2]);
    }
}

static void print_limits(const admin *ad, const snapshot *s) {
    char a[32];
    if (s->partitions > 1) {
        char d[32], w[32], f[32], c[32];
        printf("  partitions %lld, all together: depth %s, waiting %s, in flight %s, capacity %s "
               "(the other figures are partition 0's; sluice-admin partitions %s: each)\n",
               s->partitions, sluice_fmt_count(d, sizeof(d), (unsigned long long)s->all.depth),
               sluice_fmt_count(w, sizeof(w), (unsigned long long)s->all.waiting),
               sluice_fmt_count(f, sizeof(f), (unsigned long long)s->all.in_flight),
               s->all.capacity >= 0
                   ? sluice_fmt_count(c, sizeof(c), (unsigned long long)s->all.capacity)
                   : "(not set)",
               ad->queue);
    }
    if (s->unavailable > 0) {
        printf("  UNAVAILABLE %d partition%s, not in the totals:", s->unavailable,
               s->unavailable == 1 ? "" : "s");
        for (int i = 1; i < SLUICE_PARTITIONS_MAX; i++) {
            if (s->unavail & ((uint64_t)1 << i)) {
                printf(" %s~%d", ad->queue, i);
            }
        }
        printf("\n");
    }
    if (s->fair || s->lanes > 0) {
        printf("  fair       %s, %lld tenant lane%s holding entries (sluice-admin fair %s: the "
               "lanes)\n",
               s->fair ? "on" : "off", s->lanes, s->lanes == 1 ? "" : "s", ad->queue);
    }
    if (s->per_tenant > 0) {
        printf("  per-tenant share %s (tenants holding entries: %lld)\n",
               sluice_fmt_count(a, sizeof(a), (unsigned long long)s->per_tenant), s->tenants);
    }
    if (s->nlimits == 0) {
        return;
    }
    printf("  limits     %zu\n    %-24s %-8s %-28s %10s\n", s->nlimits, "NAME", "SCOPE", "SPEC",
           "REFUSED");
    for (size_t i = 0; i < s->nlimits && i < MAX_LIMITS; i++) {
        printf("    %-24.24s %-8s %-28.28s %10s\n", s->limits[i].name, s->limits[i].scope,
               s->limits[i].spec,
               sluice_fmt_count(a, sizeof(a), (unsigned long long)s->limits[i].refused));
    }
    if (s->nlimits > MAX_LIMITS) {
        printf("    ... and %zu more (sluice-admin limit QUEUE list)\n", s->nlimits - MAX_LIMITS);
    }
}

static void print_human(const admin *a, const snapshot *s, const snapshot *prev) {
    char d[32], c[32], w[32], f[32], x[32];
    printf("queue %s (%s backend", a->queue, sluice_backend_name(a->backend));
    if (a->backend == SLUICE_BACKEND_STREAM) {
        printf(", group %s%s", a->group, s->f.group_exists ? "" : " - not created yet");
    }
    printf(")\n  depth      %s / %s",
           sluice_fmt_count(d, sizeof(d), (unsigned long long)s->f.depth),
           s->f.capacity >= 0 ? sluice_fmt_count(c, sizeof(c), (unsigned long long)s->f.capacity)
           : s->f.capacity == ADMIN_CAPACITY_UNSET
               ? "(not set: producers' default)"
               : "(INVALID in meta: admissions fail; fix with sluice-admin capacity QUEUE N)");
    if (s->f.capacity > 0) {
        printf("  (%.0f%%)", 100.0 * (double)s->f.depth / (double)s->f.capacity);
    }
    printf("\n  waiting    %s   in flight %s",
           sluice_fmt_count(w, sizeof(w), (unsigned long long)s->f.waiting),
           sluice_fmt_count(f, sizeof(f), (unsigned long long)s->f.in_flight));
    printf("\n  dead       %s\n", sluice_fmt_count(x, sizeof(x), (unsigned long long)s->f.dead));
    if (paused_parts(s) > 0) {
        printf("  PAUSED     workers take no new entries (sluice-admin resume %s); producers "
               "still admit until the bucket is full\n",
               a->queue);
    }
    print_consumers(s);
    print_limits(a, s);
    print_counters(s, prev);
    fflush(stdout);
}

static void print_snapshot(const admin *a, const snapshot *s, const snapshot *prev) {
    if (a->json) {
        print_json(a, s, prev);
    } else {
        print_human(a, s, prev);
    }
}

/* ---- subcommands ---- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    interrupted = 1;
}

/* Sleeps ms, returning early on SIGINT. */
static void nap(long long ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (!interrupted && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int prepare(admin *a, int max_extra) {
    if (a->nargs > 1 + max_extra) {
        admin_err(a, "unexpected argument '%s'", a->args[1 + max_extra]);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    return rc != 0 ? rc : admin_detect_backend(a);
}

/* 1 when no key of the queue exists: a typo in a queue name must not read as an empty queue. */
static int queue_missing(admin *a, int *rc) {
    redisReply *r;
    *rc = admin_call(a, &r, "looking for the queue", "EXISTS", a->keys.stream, a->keys.meta,
                     a->keys.stats, a->keys.dead, a->keys.list, NULL);
    if (*rc != 0) {
        return 0;
    }
    int missing = sluice_reply_ll(r, 1) == 0;
    freeReplyObject(r);
    if (missing) {
        admin_err(a, "queue %s does not exist (no keys %s*; names are case-sensitive)", a->queue,
                  a->keys.prefix);
        *rc = SLUICE_EXIT_REJECTED;
    }
    return missing;
}

int admin_stats(admin *a) {
    static snapshot s1, s2;
    int rc = prepare(a, 0);
    if (rc != 0 || queue_missing(a, &rc) || rc != 0 || (rc = snapshot_take(a, &s1)) != 0) {
        return rc;
    }
    if (a->sample_ms == 0) {
        print_snapshot(a, &s1, NULL);
        return s1.unavailable > 0 ? SLUICE_EXIT_REDIS : 0; /* shown, but not the whole queue */
    }
    nap(a->sample_ms);
    if ((rc = snapshot_take(a, &s2)) != 0) {
        return rc;
    }
    print_snapshot(a, &s2, &s1);
    return s2.unavailable > 0 ? SLUICE_EXIT_REDIS : 0;
}

/* On a terminal each frame redraws the screen; into a pipe or file the frames follow one another,
 * separated by a blank line, with no escape sequences to garble a log. */
static void watch_frame(const admin *a, const snapshot *s, const snapshot *prev, int first) {
    if (!a->json) {
        char when[32];
        time_t t = time(NULL);
        strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
        if (isatty(STDOUT_FILENO)) {
            printf("\033[H\033[2J");
        } else if (!first) {
            printf("\n");
        }
        printf("sluice-admin watch %s - every %.1fs - %s - Ctrl-C to stop\n\n", a->queue,
               (double)a->interval_ms / 1000.0, when);
    }
    print_snapshot(a, s, prev);
}

int admin_watch(admin *a) {
    static snapshot snaps[2];
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint; /* no SA_RESTART: the sleep ends at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    int rc = prepare(a, 0), have_prev = 0, shown = 0;
    if (rc != 0) {
        return rc;
    }
    /* A failed refresh is reported and retried; the exit code tells how the last one went. */
    for (long long i = 0; !interrupted && (a->count == 0 || i < a->count); i++) {
        snapshot *cur = &snaps[i % 2], *prev = &snaps[(i + 1) % 2];
        rc = snapshot_take(a, cur);
        if (rc != 0 && i == 0) {
            return rc; /* a wrong URL should not leave an empty screen refreshing */
        }
        if (rc == 0) {
            watch_frame(a, cur, have_prev ? prev : NULL, shown++ == 0);
        }
        have_prev = rc == 0;
        if (a->count == 0 || i + 1 < a->count) {
            nap(a->interval_ms);
        }
    }
    return rc;
}

/* The capacity; of a partitioned queue the whole (meta `capacity_total`, what `capacity Q N`
 * spread) and each partition's. */
static int capacity_show(admin *a) {
    redisReply *r;
    int rc = admin_call(a, &r, "reading the capacity", "HMGET", a->keys.meta, "capacity",
                        "partitions", "capacity_total", NULL);
    if (rc != 0) {
        return rc;
    }
    long long cap = admin_capacity_value(r->element[0]);
    long long parts = strchr(a->queue, '~') != NULL ? 1 : sluice_reply_ll(r->element[1], 1);
    long long total = r->element[2]->type == REDIS_REPLY_STRING
                          ? admin_capacity_value(r->element[2])
                          : ADMIN_CAPACITY_INVALID;
    freeReplyObject(r);
    if (parts > 1 && cap >= 0 && total >= 0) {
        if (a->json) {
            printf("{\"queue\":\"%s\",\"capacity\":%lld,\"partitions\":%lld,"
                   "\"per_partition\":",
                   a->queue, total, parts);
            printf("%lld}\n", cap);
        } else {
            printf("capacity of %s: %lld in all, %lld in each of its %lld partitions\n", a->queue,
                   total, cap, parts);
        }
        return 0;
    }
    if (cap == ADMIN_CAPACITY_INVALID) {
        admin_err(a,
                  "queue %s has an invalid capacity in its meta hash; set one with "
                  "sluice-admin capacity %s N",
                  a->queue, a->queue);
        return SLUICE_EXIT_REDIS;
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"capacity\":", a->queue);
        cap >= 0 ? printf("%lld}\n", cap) : printf("null}\n");
    } else if (cap >= 0) {
        printf("capacity of %s: %lld\n", a->queue, cap);
    } else {
        printf("capacity of %s: not set (each producer uses its own default)\n", a->queue);
    }
    return 0;
}

int admin_capacity(admin *a) {
    char err[256];
    long long n, old, depth;
    if (a->nargs > 2) {
        admin_err(a, "unexpected argument '%s'", a->args[2]);
        return SLUICE_EXIT_USAGE;
    }
    if (a->nargs == 2 && sluice_parse_ll("capacity", a->args[1], 0, SLUICE_CAPACITY_MAX, &n, err,
                                         sizeof(err)) != 0) {
        admin_err(a, "%s", err);
        return SLUICE_EXIT_USAGE;
    }
    int rc = admin_connect(a);
    if (rc != 0 || a->nargs == 1) {
        return rc != 0 ? rc : capacity_show(a);
    }
    int handled;
    if ((rc = admin_partitioned_capacity(a, n, &handled)) != 0 || handled) {
        return rc;
    }
    char value[24], share[24]; /* written as parsed: "+5" or "010" are stored as 5 and 10 */
    snprintf(value, sizeof(value), "%lld", n);
    snprintf(share, sizeof(share), "%lld", a->per_tenant);
    if (a->per_tenant > n) {
        admin_err(a, "--per-tenant %lld is more than the capacity %lld", a->per_tenant, n);
        return SLUICE_EXIT_USAGE;
    }
    if ((rc = admin_detect_backend(a)) != 0 ||
        (a->per_tenant >= 0 && a->backend == SLUICE_BACKEND_LIST)) {
        if (rc == 0) {
            admin_err(a, "--per-tenant needs the stream backend; %s is a list queue", a->queue);
        }
        return rc != 0 ? rc : SLUICE_EXIT_USAGE;
    }
    /* the depth is the figures' (sluice/figures.h), the one admission compares with the
     * capacity: a fair queue's lanes count, read in the same step as the write */
    sluice_figures_cmd cmds[2 + SLUICE_FIGURES_MAX_CMDS + 1] = {
        {3, {"HGET", a->keys.meta, "capacity"}}, {4, {"HSET", a->keys.meta, "capacity", value}}};
    size_t nf = sluice_figures_commands(&a->keys, a->backend, cmds + 2), ncmds = 2 + nf;
    if (a->per_tenant > 0) {
        cmds[ncmds++] = (sluice_figures_cmd){4, {"HSET", a->keys.meta, "per_tenant", share}};
    } else if (a->per_tenant == 0) { /* 0 switches the share off */
        cmds[ncmds++] = (sluice_figures_cmd){3, {"HDEL", a->keys.meta, "per_tenant"}};
    }
    redisReply *r;
    sluice_figures f;
    if ((rc = transaction(a, &r, cmds, ncmds)) != 0) {
        return rc;
    }
    old = admin_capacity_value(r->element[0]);
    sluice_figures_read(&f, a->backend, a->group, r->element + 2, nf, NULL);
    depth = f.depth;
    freeReplyObject(r);
    if (a->json) {
        printf("{\"queue\":\"%s\",\"capacity\":%lld,\"previous\":", a->queue, n);
        old >= 0 ? printf("%lld", old) : printf("null");
        printf(",\"depth\":%lld", depth);
        a->per_tenant >= 0 ? printf(",\"per_tenant\":%lld}\n", a->per_tenant) : printf("}\n");
        return 0;
    }
    char was[48] = "was not set";
    if (old == ADMIN_CAPACITY_INVALID) {
        snprintf(was, sizeof(was), "was invalid");
    } else if (old >= 0) {
        snprintf(was, sizeof(was), "was %lld", old);
    }
    printf("capacity of %s: %lld (%s; depth %lld)\n", a->queue, n, was, depth);
    if (a->per_tenant > 0) {
        printf("per-tenant share: no tenant holds more than %lld entries (waiting + in flight)\n",
               a->per_tenant);
    } else if (a->per_tenant == 0) {
        printf("per-tenant share: off\n");
    }
    if (n == 0) {
        printf("note: capacity 0 closes the queue: every admission is rejected as full\n");
    } else if (depth > n) {
        printf("note: depth is above the new capacity: admissions are refused until the "
               "workers drain it below %lld\n",
               n);
    }
    return 0;
}
