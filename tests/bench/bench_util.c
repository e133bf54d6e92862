/* SPDX-License-Identifier: MIT */
/* bench_util.c - what several sluice-bench commands share (see bench_util.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/producer.h"
#include "sluice/queue.h"
#include "sluice/redis.h"
#include "sluice/url.h"

#include "bench_util.h"

/* DELs the queue's keys; keep_config spares meta and the limits hash (see bench_util.h). */
static int purge(const char *url, const char *queue, int keep_config) {
    sluice_url u;
    sluice_keys k;
    char err[256];
    if (sluice_url_parse(&u, url, err, sizeof(err)) != 0 ||
        sluice_keys_init(&k, queue, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    sluice_conn *c = sluice_conn_new(&u, NULL);
    const char *argv[] = {"DEL", k.stream, k.dead, k.stats, k.list, k.procs, k.meta, k.limits};
    redisReply *r = NULL;
    int argc = keep_config ? 6 : 8;
    int st = c ? sluice_conn_command(c, argc, argv, NULL, &r, NULL) : SLUICE_ENOMEM;
    if (st != 0) {
        fprintf(stderr, "sluice-bench: %s\n", c ? sluice_conn_errstr(c) : "out of memory");
    }
    freeReplyObject(r);
    sluice_conn_free(c);
    return st == 0 ? 0 : SLUICE_EXIT_REDIS;
}

int bench_purge(const char *url, const char *queue) {
    return purge(url, queue, 0);
}

int bench_purge_data(const char *url, const char *queue) {
    return purge(url, queue, 1);
}

int bench_fill(const char *url, const char *queue, long long count, size_t size) {
    sluice_producer_options o;
    sluice_producer *p;
    char err[256];
    sluice_producer_options_init(&o);
    o.redis_url = url;
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
    memset(payload, 'x', size);
    for (int i = 0; i < B; i++) {
        msgs[i].payload = payload;
        msgs[i].len = size;
    }
    int rc = 0;
    for (long long done = 0; done < count && rc == 0; done += B) {
        size_t n = (size_t)(count - done < B ? count - done : B), admitted = 0;
        if (sluice_producer_admit_batch(p, msgs, n, res, &admitted) != 0 || admitted != n) {
            fprintf(stderr, "sluice-bench: filling %s failed: %s\n", queue,
                    sluice_producer_errstr(p));
            rc = SLUICE_EXIT_REDIS;
        }
    }
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
