/* SPDX-License-Identifier: MIT */
/* bench_util.c - what several sluice-bench commands share (see bench_util.h). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/producer.h"
#include "sluice/queue.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/url.h"

#include "bench_util.h"

static sluice_conn_options conn_options;

static void read_conn_options(void) {
    char err[256];
    sluice_conn_options_init(&conn_options);
    if (sluice_cli_tls_env(&conn_options, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        exit(SLUICE_EXIT_USAGE);
    }
}

const sluice_conn_options *bench_conn_options(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* the producer and worker threads ask too */
    pthread_once(&once, read_conn_options);
    return &conn_options;
}

/* Parses the URL and the queue's keys and makes a connection (connected lazily); NULL after
 * printing why, with *rc the exit code. */
static sluice_conn *open_queue(const char *url, const char *queue, sluice_keys *k, int *rc) {
    sluice_url u;
    char err[256];
    if (sluice_url_parse(&u, url, err, sizeof(err)) != 0 ||
        sluice_keys_init(k, queue, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        *rc = SLUICE_EXIT_USAGE;
        return NULL;
    }
    sluice_conn *c = sluice_conn_new(&u, bench_conn_options());
    if (c == NULL) {
        fprintf(stderr, "sluice-bench: out of memory\n");
        *rc = SLUICE_EXIT_REDIS;
    }
    return c;
}

/* Runs one command (lens NULL = strlen); prints the error. Returns 0 or exit code 3; *out (may
 * be NULL) gets the reply. */
static int command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                   redisReply **out) {
    redisReply *r = NULL;
    int st = sluice_conn_command(c, argc, argv, lens, &r, NULL);
    if (st != 0) {
        fprintf(stderr, "sluice-bench: %s: %s\n", argv[0],
                r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : sluice_conn_errstr(c));
    }
    if (out != NULL && st == 0) {
        *out = r;
    } else {
        freeReplyObject(r);
    }
    return st == 0 ? 0 : SLUICE_EXIT_REDIS;
}

/* DELs a fair queue's tenant lanes (the streams named in sluice:{Q}:lanes) and its fair
 * bookkeeping. keep_config spares the weights and clears meta's lane counts instead (meta stays,
 * so its depth must not count the deleted lanes). */
static int purge_fair(sluice_conn *c, const sluice_keys *k, int keep_config) {
    static const char *const parts[] = {"lanes",   "lwait", "served", "ring",
                                        "deficit", "wake",  "weights"};
    enum { NPARTS = sizeof(parts) / sizeof(parts[0]), CHUNK = 256 };
    char names[NPARTS][SLUICE_KEY_MAX + 16];
    for (size_t i = 0; i < NPARTS; i++) {
        snprintf(names[i], sizeof(names[i]), "%s%s", k->prefix, parts[i]);
    }
    const char *hkeys[] = {"HKEYS", names[0]};
    redisReply *lanes = NULL;
    int rc = command(c, 2, hkeys, NULL, &lanes);
    /* the lanes' streams, CHUNK per DEL */
    const char *argv[1 + CHUNK];
    size_t lens[1 + CHUNK], plen = strlen(k->prefix) + 5; /* "sluice:{Q}:lane:" */
    argv[0] = "DEL", lens[0] = 3;
    for (size_t i = 0; rc == 0 && lanes->type == REDIS_REPLY_ARRAY && i < lanes->elements;) {
        char *buf[CHUNK];
        int n = 0;
        for (; n < CHUNK && i < lanes->elements; n++, i++) {
            const redisReply *t = lanes->element[i];
            buf[n] = malloc(plen + t->len + 1);
            if (buf[n] == NULL) {
                rc = SLUICE_EXIT_REDIS;
                break;
            }
            snprintf(buf[n], plen + t->len + 1, "%slane:%.*s", k->prefix, (int)t->len, t->str);
            argv[1 + n] = buf[n], lens[1 + n] = plen + t->len;
        }
        if (rc == 0) {
            rc = command(c, 1 + n, argv, lens, NULL);
        }
        while (n > 0) {
            free(buf[--n]);
        }
    }
    freeReplyObject(lanes);
    for (size_t i = 0; i < NPARTS; i++) {
        argv[1 + i] = names[i];
    }
    if (rc == 0) {
        rc = command(c, keep_config ? NPARTS : NPARTS + 1, argv, NULL, NULL);
    }
    const char *hdel[] = {"HDEL", k->meta, "lane_depth", "lane_wait"};
    return rc != 0 || !keep_config ? rc : command(c, 4, hdel, NULL, NULL);
}

/* DELs the queue's keys, and those of its partitions 1..P-1 when it is partitioned (meta
 * `partitions`, read first); keep_config spares meta, the limits hash and the lane weights (see
 * bench_util.h). */
static int purge(const char *url, const char *queue, int keep_config) {
    sluice_keys k;
    int rc = 0;
    sluice_conn *c = open_queue(url, queue, &k, &rc);
    if (c == NULL) {
        return rc;
    }
    long long parts = 1;
    redisReply *r = NULL;
    const char *hget[] = {"HGET", k.meta, "partitions"};
    if (strchr(queue, '~') == NULL && (rc = command(c, 3, hget, NULL, &r)) == 0) {
        parts = sluice_reply_ll(r, 1);
        freeReplyObject(r);
    }
    const char *argv[] = {"DEL", k.stream, k.dead, k.stats, k.list, k.procs, k.meta, k.limits};
    if (rc == 0) {
        rc = purge_fair(c, &k, keep_config);
    }
    if (rc == 0) {
        rc = command(c, keep_config ? 6 : 8, argv, NULL, NULL);
    }
    sluice_conn_free(c);
    for (int i = 1; rc == 0 && i < parts && i < SLUICE_PARTITIONS_MAX; i++) {
        char name[SLUICE_QUEUE_NAME_MAX + 1];
        rc = sluice_partition_name(queue, i, name, sizeof(name)) == 0
                 ? purge(url, name, keep_config)
                 : SLUICE_EXIT_USAGE;
    }
    return rc;
}

int bench_purge(const char *url, const char *queue) {
    return purge(url, queue, 0);
}

int bench_purge_data(const char *url, const char *queue) {
    return purge(url, queue, 1);
}

/* Calls one of the queue's configuration functions: sluice_fair_config (keys stream, meta) or
 * sluice_limits_config (keys limits, meta). Returns 0 or an exit code after printing why. */
static int configure(const char *url, const char *queue, sluice_fn fn, int nargs,
                     const char **args) {
    sluice_keys k;
    int rc = 0;
    sluice_conn *c = open_queue(url, queue, &k, &rc);
    if (c == NULL) {
        return rc;
    }
    const char *keys[] = {fn == SLUICE_FN_FAIR_CONFIG ? k.stream : k.limits, k.meta};
    redisReply *r = NULL;
    int st = sluice_conn_fcall(c, fn, 2, keys, NULL, nargs, args, NULL, &r, NULL);
    if (st != 0) {
        fprintf(stderr, "sluice-bench: %s %s: %s\n", queue, args[0],
                r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : sluice_conn_errstr(c));
    }
    freeReplyObject(r);
    sluice_conn_free(c);
    return st == 0 ? 0 : st == SLUICE_ECONFIG ? SLUICE_EXIT_USAGE : SLUICE_EXIT_REDIS;
}

int bench_fair_on(const char *url, const char *queue) {
    const char *args[] = {"on"};
    return configure(url, queue, SLUICE_FN_FAIR_CONFIG, 1, args);
}

int bench_drain_limit(const char *url, const char *queue, const char *name, const char *spec) {
    const char *args[] = {"set", name, "drain", spec};
    return configure(url, queue, SLUICE_FN_LIMITS_CONFIG, 4, args);
}

char (*bench_tenant_names(long long n))[BENCH_TENANT_LEN] {
    char(*names)[BENCH_TENANT_LEN] = n > 0 ? calloc((size_t)n, sizeof(*names)) : NULL;
    for (long long i = 0; names != NULL && i < n; i++) {
        snprintf(names[i], sizeof(names[i]), "t%lld", i);
    }
    if (n > 0 && names == NULL) {
        fprintf(stderr, "sluice-bench: out of memory for %lld tenant names\n", n);
    }
    return names;
}

int bench_fill(const char *url, const char *queue, long long count, size_t size,
               long long tenants) {
    sluice_producer_options o;
    sluice_producer *p;
    char err[256];
    sluice_producer_options_init(&o);
    o.redis_url = url;
    o.tls = bench_conn_options();
    o.queue = queue;
    o.capacity = count + 1;
    if (sluice_producer_new(&o, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    enum { B = 1000 };
    static sluice_message msgs[B];
    static sluice_admit_result res[B];
    char *payload = calloc(1, size + 1);
    char(*names)[BENCH_TENANT_LEN] = bench_tenant_names(tenants);
    int rc = payload == NULL || (tenants > 0 && names == NULL) ? SLUICE_EXIT_REDIS : 0;
    for (int i = 0; rc == 0 && i < B; i++) {
        msgs[i].payload = payload;
        msgs[i].len = size;
        msgs[i].tenant = NULL;
    }
    if (rc == 0) {
        memset(payload, 'x', size);
    }
    for (long long done = 0; done < count && rc == 0; done += B) {
        size_t n = (size_t)(count - done < B ? count - done : B), admitted = 0;
        for (size_t i = 0; tenants > 0 && i < n; i++) { /* round robin over the tenants */
            msgs[i].tenant = names[(done + (long long)i) % tenants];
        }
        if (sluice_producer_admit_batch(p, msgs, n, res, &admitted) != 0 || admitted != n) {
            fprintf(stderr, "sluice-bench: filling %s failed: %s\n", queue,
                    sluice_producer_errstr(p));
            rc = SLUICE_EXIT_REDIS;
        }
    }
    free(names);
    free(payload);
    sluice_producer_free(p);
    return rc;
}

int bench_figures(sluice_conn *c, const sluice_keys *k, sluice_figures *f) {
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS];
    size_t n = sluice_figures_commands(k, SLUICE_BACKEND_STREAM, cmds);
    sluice_figures_init(f);
    int st = 0;
    for (size_t i = 0; i < n && st == 0; i++) {
        redisReply *r = NULL;
        st = sluice_conn_command(c, cmds[i].argc, cmds[i].argv, NULL, &r, NULL);
        if (r != NULL && (st == 0 || r->type == REDIS_REPLY_ERROR)) {
            st = sluice_figures_parse(f, SLUICE_BACKEND_STREAM, SLUICE_DEFAULT_GROUP, i, r);
        }
        freeReplyObject(r);
    }
    sluice_figures_finish(f, SLUICE_BACKEND_STREAM);
    return st;
}

double bench_redis_cpu_s(sluice_conn *c) {
    const char *argv[] = {"INFO", "cpu"};
    redisReply *r = NULL;
    double total = -1;
    if (sluice_conn_command(c, 2, argv, NULL, &r, NULL) == 0 && r->type == REDIS_REPLY_STRING) {
        const char *u = strstr(r->str, "used_cpu_user:"), *s = strstr(r->str, "used_cpu_sys:");
        if (u != NULL && s != NULL) {
            total = atof(u + 14) + atof(s + 13);
        }
    }
    freeReplyObject(r);
    return total;
}

int bench_sibling_path(const char *name, char *out, size_t len) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        return -1;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    int k = snprintf(out, len, "%s/%s", self, name);
    return k > 0 && (size_t)k < len ? access(out, X_OK) : -1;
}
