/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the blocking Redis connection (see redis.h): the facade and the single-node router.
 *
 * The facade is the public sluice_conn_* calls. Each dispatches to a router (conn_router.h):
 * for a redis:// or unix:// URL the single-node router below, one node (conn_node.c) that is
 * connected lazily by the next call after a failure, and the library reloaded and the call
 * re-sent once when the server lost it; for a redis+cluster:// URL the cluster router of
 * conn_cluster.c, which keeps one such node per primary; for a redis+sentinel:// URL the
 * Sentinel router of conn_sentinel.c, one node at the primary the sentinels name. What happens
 * on one server is the node layer's, the same under every router.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/clock.h"
#include "sluice/options.h"
#include "sluice/redis.h"
#include "sluice/status.h"
#include "sluice/tls.h"

#include "conn_router.h"

void sluice_conn_options_init_sized(sluice_conn_options *o, size_t size) {
    sluice_conn_options d;
    memset(&d, 0, sizeof(d));
    d.connect_timeout_ms = 2000;
    d.command_timeout_ms = 5000;
    d.backoff_min_ms = 100;
    d.backoff_max_ms = 5000;
    sluice__options_give(o, size, &d, sizeof(d));
}

void sluice__conn_options_fill(sluice_conn_options *dst, const sluice_conn_options *src) {
    sluice_conn_options d;
    sluice_conn_options_init(&d);
    *dst = d;
    if (src != NULL) {
        sluice__options_take(dst, sizeof(*dst), src);
    }
    if (dst->connect_timeout_ms <= 0) {
        dst->connect_timeout_ms = d.connect_timeout_ms;
    }
    if (dst->command_timeout_ms <= 0) {
        dst->command_timeout_ms = d.command_timeout_ms;
    }
    if (dst->backoff_min_ms <= 0) {
        dst->backoff_min_ms = d.backoff_min_ms;
    }
    if (dst->backoff_max_ms < dst->backoff_min_ms) {
        dst->backoff_max_ms =
            dst->backoff_min_ms > d.backoff_max_ms ? dst->backoff_min_ms : d.backoff_max_ms;
    }
}

sluice_conn *sluice_conn_new(const sluice_url *url, const sluice_conn_options *o) {
    sluice_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->url = *url;
    sluice__conn_options_fill(&c->o, o);
    if (sluice__tls_options_keep(&c->o) != 0) {
        free(c);
        return NULL;
    }
    sluice_url_redact(url, c->where, sizeof(c->where));
    c->seed = (unsigned)getpid() ^ (unsigned)sluice_now_ns() ^ (unsigned)(uintptr_t)c;
    c->env = (sluice__node_env){.url = &c->url,
                                .o = &c->o,
                                .seed = &c->seed,
                                .member = url->is_cluster,
                                .err = c->err,
                                .errlen = sizeof(c->err)};
    sluice__node_init(&c->one, &c->env, url->host, url->port, c->where);
    if ((url->is_cluster && (c->cl = sluice__cluster_new()) == NULL) ||
        (url->is_sentinel && (c->sn = sluice__sentinel_new(c)) == NULL)) {
        sluice__cluster_free(c->cl);
        sluice__tls_options_release(&c->o);
        free(c);
        return NULL;
    }
    return c;
}

void sluice_conn_free(sluice_conn *c) {
    if (c == NULL) {
        return;
    }
    sluice__node_release(&c->one);
    sluice__cluster_free(c->cl);
    sluice__sentinel_free(c->sn);
    sluice__tls_options_release(&c->o);
    memset(c->url.password, 0, sizeof(c->url.password));
    free(c);
}

const char *sluice_conn_errstr(const sluice_conn *c) {
    return c->err;
}

int sluice_conn_ensure(sluice_conn *c) {
    return c->cl != NULL   ? sluice__cluster_ensure(c)
           : c->sn != NULL ? sluice__sentinel_ensure(c)
                           : sluice__node_start(&c->one);
}

int sluice_conn_read_reply(sluice_conn *c, redisReply **out) {
    if (c->cl != NULL) {
        return sluice__cluster_read_reply(c, out);
    }
    if (c->sn != NULL) {
        return sluice__sentinel_read_reply(c, out);
    }
    return sluice__node_read(&c->one, out);
}

int sluice_conn_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                        redisReply **out, int *sent) {
    if (c->cl != NULL) {
        return sluice__cluster_command(c, argc, argv, lens, out, sent);
    }
    if (c->sn != NULL) {
        return sluice__sentinel_command(c, argc, argv, lens, out, sent);
    }
    return sluice__node_command(&c->one, argc, argv, lens, out, sent);
}

int sluice_conn_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                             const size_t *keylens, int nargs, const char **args,
                             const size_t *arglens) {
    if (c->cl != NULL) {
        return sluice__cluster_append_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens);
    }
    if (c->sn != NULL) {
        return sluice__sentinel_append_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens);
    }
    int st = sluice__node_start(&c->one);
    if (st != 0) {
        return st;
    }
    return sluice__node_append_fcall(&c->one, fn, nkeys, keys, keylens, nargs, args, arglens);
}

int sluice_conn_append_command(sluice_conn *c, int argc, const char **argv, const size_t *lens) {
    if (c->cl != NULL) {
        return sluice__cluster_append_command(c, argc, argv, lens);
    }
    if (c->sn != NULL) {
        return sluice__sentinel_append_command(c, argc, argv, lens);
    }
    int st = sluice__node_start(&c->one);
    return st != 0 ? st : sluice__node_append_command(&c->one, argc, argv, lens);
}

sluice__req sluice__req_fcall(sluice_fn fn, int nkeys, const char **keys, const size_t *keylens,
                              int nargs, const char **args, const size_t *arglens) {
    return (sluice__req){.fn = fn,
                         .nkeys = nkeys,
                         .keys = keys,
                         .keylens = keylens,
                         .nargs = nargs,
                         .args = args,
                         .arglens = arglens};
}

int sluice__req_append(sluice__node *n, const sluice__req *q) {
    return q->argv != NULL ? sluice__node_append_command(n, q->argc, q->argv, q->lens)
                           : sluice__node_append_fcall(n, q->fn, q->nkeys, q->keys, q->keylens,
                                                       q->nargs, q->args, q->arglens);
}

/* The single-node router's call of a function: when the server lost the library (restart
 * without persistence, FLUSH) it did not run the call, so reload and send it once more. */
static int single_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                        const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                        redisReply **out, int *sent) {
    *out = NULL;
    for (int attempt = 0;; attempt++) {
        if (sent != NULL) {
            *sent = 0;
        }
        int st = sluice_conn_append_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens);
        if (st != 0) {
            return st;
        }
        if (sent != NULL) {
            *sent = 1;
        }
        st = sluice__node_read(&c->one, out);
        if (st != SLUICE_ENOSCRIPT || attempt > 0) {
            return st;
        }
        freeReplyObject(*out);
        *out = NULL;
        if ((st = sluice__node_reload(&c->one)) != 0) {
            return st;
        }
    }
}

int sluice_conn_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                      const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                      redisReply **out, int *sent) {
    if (c->cl != NULL) {
        return sluice__cluster_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens, out, sent);
    }
    if (c->sn != NULL) {
        return sluice__sentinel_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens, out, sent);
    }
    return single_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens, out, sent);
}
