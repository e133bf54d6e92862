/* SPDX-License-Identifier: MIT */
/*
 * conn_router.h - the routers of the blocking connection and the handle they share.
 *
 * The facade (conn.c, the public sluice_conn_* calls) dispatches each call to a router: the
 * single-node router (conn.c: one node, the library reloaded and the call re-sent once) or the
 * cluster router (conn_cluster.c: a node per primary, the slot map, MOVED / ASK / TRYAGAIN, the
 * deadline) or the Sentinel router (conn_sentinel.c: the one node at the primary the sentinels
 * name, checked with ROLE, asked again after a failover). Routers use the node layer
 * (conn_node.h), which never calls up: a router reacts to a node's failure by looking at what
 * the node returned.
 */
#ifndef SLUICE_CONN_ROUTER_H
#define SLUICE_CONN_ROUTER_H

#include "conn_node.h"

/* A call as the routers pass it: a command (argv) or a sluice function (argv NULL). */
typedef struct sluice__req {
    int argc;
    const char **argv;
    const size_t *lens;
    sluice_fn fn;
    int nkeys, nargs;
    const char **keys, **args;
    const size_t *keylens, *arglens;
    int multi; /* cluster router: sent inside MULTI */
} sluice__req;

/* The call of function `fn` with these keys and arguments (borrowed). */
sluice__req sluice__req_fcall(sluice_fn fn, int nkeys, const char **keys, const size_t *keylens,
                              int nargs, const char **args, const size_t *arglens);

/* Queues q on the connected node n (sluice__node_append_command or _append_fcall). */
int sluice__req_append(sluice__node *n, const sluice__req *q);

typedef struct sluice__cluster sluice__cluster;
typedef struct sluice__sentinel sluice__sentinel;

struct sluice_conn {
    sluice_url url;
    sluice_conn_options o;
    sluice__node_env env; /* what the nodes share: url, options, seed, err */
    sluice__node one;     /* the single server or the sentinels' primary; unused in a cluster */
    sluice__cluster *cl;  /* the router of a redis+cluster:// URL, else NULL */
    sluice__sentinel *sn; /* the router of a redis+sentinel:// URL, else NULL */
    unsigned seed;        /* jitter generator state */
    char where[300];      /* redacted URL, for messages */
    char err[512];
};

/* The cluster router (conn_cluster.c): created for a cluster URL by sluice_conn_new, and the
 * cluster side of each sluice_conn_* call. */
sluice__cluster *sluice__cluster_new(void);
void sluice__cluster_free(sluice__cluster *cl);
int sluice__cluster_ensure(sluice_conn *c);
int sluice__cluster_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                            redisReply **out, int *sent);
int sluice__cluster_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                          const size_t *keylens, int nargs, const char **args,
                          const size_t *arglens, redisReply **out, int *sent);
int sluice__cluster_append_command(sluice_conn *c, int argc, const char **argv, const size_t *lens);
int sluice__cluster_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                                 const size_t *keylens, int nargs, const char **args,
                                 const size_t *arglens);
int sluice__cluster_read_reply(sluice_conn *c, redisReply **out);

/* The Sentinel router (conn_sentinel.c): created for a sentinel URL by sluice_conn_new (it
 * points c->env.url at the primary's address it keeps), and the sentinel side of each call. */
sluice__sentinel *sluice__sentinel_new(sluice_conn *c);
void sluice__sentinel_free(sluice__sentinel *s);
int sluice__sentinel_ensure(sluice_conn *c);
int sluice__sentinel_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                             redisReply **out, int *sent);
int sluice__sentinel_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                           const size_t *keylens, int nargs, const char **args,
                           const size_t *arglens, redisReply **out, int *sent);
int sluice__sentinel_append_command(sluice_conn *c, int argc, const char **argv,
                                    const size_t *lens);
int sluice__sentinel_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                                  const size_t *keylens, int nargs, const char **args,
                                  const size_t *arglens);
int sluice__sentinel_read_reply(sluice_conn *c, redisReply **out);

#endif
