/* SPDX-License-Identifier: MIT */
/*
 * conn_internal.h - what the blocking and async connections share inside libsluice: option
 * defaults and the reconnect backoff; and what the blocking connection (conn.c) shares with
 * its Redis Cluster router (conn_cluster.c): one server's connection (a node) and the calls on
 * it.
 */
#ifndef SLUICE_CONN_INTERNAL_H
#define SLUICE_CONN_INTERNAL_H

#include <stdint.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "sluice/redis.h"

/* Copies `src` (NULL = defaults) into `dst`, replacing zero fields by their defaults. */
/* Marks a socket hiredis opened close-on-exec (hiredis 0.14 does not): a child process an
 * exec handler starts must hold no Redis session of ours (docs/faults.md F23). hiredis creates
 * the socket on the calling thread, and sluice starts child processes on the loop thread that
 * connects, so nothing can fork in between. */
void sluice__fd_cloexec(int fd);

void sluice__conn_options_fill(sluice_conn_options *dst, const sluice_conn_options *src);

/* Reconnect attempts are counted up to this and no further: the backoff reached its cap long
 * before (100 ms doubled 16 times is past any sane cap), and the count must not overflow. */
#define SLUICE_ATTEMPT_MAX 30

/* Delay before reconnect attempt number `attempt` (1-based): min * 2^(attempt-1) capped at
 * max, with jitter in [d/2, d] drawn from the caller's generator state `seed`. */
int sluice__backoff_ms(const sluice_conn_options *o, int attempt, unsigned *seed);

/* Formats `VERB TARGET nkeys keys... args...` (FCALL name / EVALSHA sha) into *out (an sds the
 * caller frees). NULL length arrays mean strlen. Returns 0 or SLUICE_ENOMEM. */
int sluice__format_fcall(const char *verb, const char *target, int nkeys, const char **keys,
                         const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                         sds *out);

/* ---- the blocking connection and its nodes ---- */

/* One server: the only one of a redis:// or unix:// URL, or one primary of a cluster. Connected
 * lazily, with its own backoff after failures and its own view of the library (mode, shas). */
typedef struct sluice__node {
    char host[256]; /* cluster node: its address; the single server uses the URL */
    int port;
    redisContext *ctx;
    int mode; /* SLUICE_HS_MODE_*: how it runs the sluice functions, learnt by the handshake */
    char sha[SLUICE_FN_COUNT_][41];
    uint64_t next_attempt_ms; /* no connect before this (monotonic ms) */
    int attempt;              /* failed connects since the last success */
    int wrong_mode;           /* the last handshake found a server of the other kind */
    char where[300];          /* redacted URL or "cluster node HOST:PORT", for messages */
} sluice__node;

typedef struct sluice__cluster sluice__cluster;

struct sluice_conn {
    sluice_url url;
    sluice_conn_options o;
    sluice__node one;    /* the single server; unused with a cluster URL */
    sluice__cluster *cl; /* the router of a redis+cluster:// URL, else NULL */
    unsigned seed;       /* jitter generator state */
    char where[300];     /* redacted URL, for messages */
    char err[512];
};

/* Connects `n` unless connected (after checking the socket for a peer close), with the
 * handshake: AUTH, SELECT, the library. Returns 0 or a status; detail in c->err. */
int sluice__node_start(sluice_conn *c, sluice__node *n);

/* Reads the next reply on `n` (see sluice_conn_read_reply). */
int sluice__node_read(sluice_conn *c, sluice__node *n, redisReply **out);

/* Queues FCALL (or EVALSHA, loading the script first) of `fn` on the connected `n`. */
int sluice__node_append_fcall(sluice_conn *c, sluice__node *n, sluice_fn fn, int nkeys,
                              const char **keys, const size_t *keylens, int nargs,
                              const char **args, const size_t *arglens);

/* After NOSCRIPT / function not found on `n`: forget the shas and reload the library (function
 * mode). Returns 0 when the call may be sent again. */
int sluice__node_reload(sluice_conn *c, sluice__node *n);

/* Closes n's connection (if any); the node stays usable. */
void sluice__node_drop(sluice__node *n);

/* The cluster router (conn_cluster.c): created for a cluster URL by sluice_conn_new, and the
 * cluster side of each sluice_conn_* call. */
sluice__cluster *sluice__cluster_new(void);
void sluice__cluster_free(sluice__cluster *cl);
/* A node of `c` failed and was dropped: a pipeline or transaction on it is over. */
void sluice__cluster_node_failed(sluice_conn *c, sluice__node *n);
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

#endif
