/* SPDX-License-Identifier: MIT */
/*
 * admin.h - what the modules of sluice-admin share:
 *   admin.c            main: options, dispatch, usage
 *   admin_util.c       Redis calls with one-line failure messages, reply helpers, JSON output
 *   admin_stats.c      stats, watch, capacity
 *   admin_dead.c       dead list | show | replay | purge
 *   admin_consumers.c  consumers [--prune], purge
 *   admin_queue.c      pause, resume, clear
 *   admin_inspect.c    inspect, peek
 *
 * sluice-admin talks to Redis over one blocking connection (sluice_conn). Every subcommand
 * returns an exit code: 0 ok, 1 nothing to do or some did not fit, 2 usage, 3 Redis
 * unavailable or refusing. A failed call prints one line naming what failed; the caller just
 * returns the code.
 */
#ifndef SLUICE_ADMIN_H
#define SLUICE_ADMIN_H

#include <stddef.h>
#include <stdio.h>

#include <hiredis/hiredis.h>

#include "sluice/figures.h"
#include "sluice/keys.h"
#include "sluice/queue.h"
#include "sluice/reply.h"
#include "sluice/redis.h"
#include "sluice/url.h"

/* fair: --weight options accepted in one run */
#define ADMIN_WEIGHTS_MAX 64
/* fair: the largest weight (scripts/lua/95_config.lua FAIR_MAX_WEIGHT) */
#define SLUICE_FAIR_WEIGHT_MAX 1000

/* The parsed command line and the connection of one run. */
typedef struct admin {
    const char *cmd;   /* "stats", "dead", ... */
    const char *queue; /* validated queue name */
    sluice_keys keys;
    const char *group;      /* consumer group, default "workers" */
    sluice_backend backend; /* the queue's backend (from --backend or detected) */
    int backend_given;      /* --backend was given */
    int json;
    int yes;
    long long sample_ms;   /* stats: rate sample, default 1000, 0 = no rates */
    long long interval_ms; /* watch: refresh period, default 1000 */
    long long count;       /* watch: refreshes, 0 = until SIGINT; peek: entries, 0 = 10 */
    long long limit;       /* dead list/replay: entries, default 50 / all */
    long long prune_ms;    /* consumers --prune IDLE_MS; -1 = no pruning */
    long long default_cap; /* dead replay: capacity when the queue has none, default 1000 */
    int algorithm;         /* limit set: --algorithm, a sluice_limit_alg (default gcra) */
    long long per_tenant;  /* capacity --per-tenant M; -1 = not given, 0 = off */
    const char *weights[ADMIN_WEIGHTS_MAX]; /* fair: --weight TENANT=W, as given */
    int nweights;
    const char *tenant; /* peek, inspect: --tenant T, the fair lane of T; NULL: not given */
    long long bytes;    /* peek, inspect: payload bytes shown, default 200 */
    char **args;        /* positional arguments after QUEUE (subcommand-specific) */
    int nargs;
    sluice_url url;
    char where[300]; /* redacted URL for messages */
    sluice_conn *conn;
} admin;

/* ---- admin_util.c ---- */

/* Prints "sluice-admin CMD: <message>" on stderr (one line). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void admin_err(const admin *a, const char *fmt, ...);

/*
 * Runs one command given as NULL-terminated strings. Returns 0 with *out set (caller frees), or
 * SLUICE_EXIT_REDIS after printing why (unreachable, timed out, error reply). `what` names the
 * step in that message ("reading the dead stream").
 */
int admin_call(admin *a, redisReply **out, const char *what, ...);

/* The same with an argv array (binary-safe lengths may be NULL). */
int admin_callv(admin *a, redisReply **out, const char *what, int argc, const char **argv,
                const size_t *lens);

/* Connects (exit code 3 with a message when Redis cannot be reached). */
int admin_connect(admin *a);

/* Sets a->backend from TYPE of the stream / list keys unless --backend was given. */
int admin_detect_backend(admin *a);

/* A capacity read from meta (HGET): the value, ADMIN_CAPACITY_UNSET for nil, or
 * ADMIN_CAPACITY_INVALID for anything sluice_capacity_parse refuses. */
#define ADMIN_CAPACITY_UNSET   (-1)
#define ADMIN_CAPACITY_INVALID (-2)
long long admin_capacity_value(const redisReply *r);

/* Writes s[0..len) as a JSON string literal (quotes included); bytes >= 0x80 as \u00XX. */
void admin_json_str(FILE *f, const char *s, size_t len);

/* Writes s[0..len) for a terminal: printable ASCII as is, the rest as \xHH, at most `max` bytes
 * of input (then "..."). */
/* A copy of s for a terminal: anything but printable ASCII becomes '?' (no escape sequence
 * from a consumer name or a reason reaches the screen). Returns buf. */
const char *admin_safe(const char *s, char *buf, size_t cap);
void admin_print_safe(FILE *f, const char *s, size_t len, size_t max);

/* The wall-clock time in a stream id's millisecond part, as "YYYY-MM-DD HH:MM:SS.mmm UTC". */
char *admin_id_time(const char *id, char *buf, size_t len);

/* An envelope m[0..len) for a person, a line each: tenant, headers, payload (its size, then at
 * most max_payload bytes, escaped); one line saying why when it does not decode. */
void admin_show_envelope(const char *m, size_t len, size_t max_payload);

/* The same as JSON members: sluice_cli_envelope_json (sluice/cli_entry.h). */

/* "1.2s", "3m04s", "2h01m", "-" for negative: a person's reading of a duration in ms. */
char *admin_fmt_ms(char *buf, size_t len, long long ms);

/* ---- subcommands ---- */

int admin_stats(admin *a);
int admin_watch(admin *a);
int admin_capacity(admin *a);
/* The figures of the queue of keys `k` (a partition), read in one MULTI/EXEC as stats reads
 * them (sluice/figures.h: depth counts a fair queue's lanes); exit codes, with a message. */
int admin_part_figures(admin *a, const sluice_keys *k, sluice_figures *f);
int admin_dead(admin *a);
int admin_consumers(admin *a);
int admin_purge(admin *a);
int admin_limit(admin *a);      /* admin_limit.c */
int admin_fair(admin *a);       /* admin_fair.c */
int admin_partitions(admin *a); /* admin_parts.c */
int admin_pause(admin *a);      /* admin_queue.c */
int admin_resume(admin *a);
int admin_clear(admin *a);
int admin_inspect(admin *a); /* admin_inspect.c */
int admin_peek(admin *a);
/* capacity QUEUE N on a partitioned queue: N in all, spread; *handled 0 when not partitioned */
int admin_partitioned_capacity(admin *a, long long total, int *handled);

/*
 * A partitioned queue's configuration is the queue's: limits, fair mode and weights and the
 * per-tenant share are written into every partition. Scopes that count the whole queue (queue,
 * client, drain, inflight) are split like the capacity, ceil(N / P) per partition, and the whole
 * is kept in QUEUE's meta (`limit_whole:NAME`) so that growth can split it again; per-tenant
 * scopes, the share and the weights are copied as they are (a tenant lives in one partition).
 */
/* The partitions of a->queue (1: not partitioned, or a partition named on its own). */
int admin_parts_count(admin *a, long long *parts);
/* The keys of partition i of a->queue; 0, or EXIT_USAGE with a message. */
int admin_part_keys(admin *a, long long i, sluice_keys *k);
/* Before a write to every partition: each of the `parts` partitions is read (reachable, and the
 * user may use its keys) and, when stream_only names the setting, none is a list queue. 0, or the
 * exit code with a message naming the partition; nothing is written either way. */
int admin_parts_check(admin *a, long long parts, const char *stream_only);
/* After a write to every partition stopped at partition i (0-based; a node lost mid-way): says
 * which partitions were written and which were not. Nothing when parts <= 1. */
void admin_parts_stopped(admin *a, long long i, long long parts);
/* 1 when a limit of this scope counts the whole queue (split over partitions). */
int admin_scope_split(const char *scope);
/* One partition's share of a limit spec: "ALG:N:..." or "N" with N -> ceil(N / parts) (a gate,
 * one per interval, is kept as it is). */
void admin_spec_split(const char *spec, long long parts, char *out, size_t len);
/* sluice_limits_config / sluice_fair_config on the queue of keys `k` (admin_limit.c,
 * admin_fair.c); exit codes, with a message printed. */
int admin_limits_config(admin *a, const sluice_keys *k, int nargs, const char **args);
int admin_fair_config(admin *a, const sluice_keys *k, int nargs, const char **args,
                      redisReply **out);

#endif
