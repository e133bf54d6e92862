/* SPDX-License-Identifier: MIT */
/*
 * conn_node.h - the node layer of the blocking connection: one server's connection (a node).
 *
 * Owns: connecting (TCP or unix socket, with the connect timeout), the handshake's I/O (the plan
 * of handshake.h), noticing a peer close before a command, sending, appending and reading, the
 * node's view of the library (mode, EVALSHA shas, reloading it after NOSCRIPT), and the backoff
 * after a failed connect. Every call returns a status and says nothing to anyone else: a router
 * above (conn.c for one server, conn_cluster.c for a cluster) looks at the status, at whether
 * the node is still connected, and at sluice__node_lost, and decides. This header does not know
 * the routers. A rediss:// server is reached through the TLS transport of conn_tls.h; the node
 * keeps a redisContext either way, so only its I/O calls branch.
 */
#ifndef SLUICE_CONN_NODE_H
#define SLUICE_CONN_NODE_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "sluice/redis.h"

#include "conn_internal.h"
#include "conn_tls.h"

/* What the nodes of one connection share, owned by the connection (the router). */
typedef struct sluice__node_env {
    const sluice_url *url;        /* credentials, db; the server of a single-node URL */
    const sluice_conn_options *o; /* timeouts, backoff, force_eval, no_load */
    unsigned *seed;               /* backoff jitter generator state */
    int member;                   /* 1: nodes a cluster named (host, port); no CLUSTER MYID */
    char *err;                    /* the detail of the last failure */
    size_t errlen;
} sluice__node_env;

/* One server: the only one of a redis:// or unix:// URL, or one primary of a cluster. Connected
 * lazily, with its own backoff after failures and its own view of the library (mode, shas). */
typedef struct sluice__node {
    const sluice__node_env *env;
    char host[256]; /* cluster node: its address; the single server uses the URL */
    int port;
    redisContext *ctx;
    int mode; /* SLUICE_HS_MODE_*: how it runs the sluice functions, learnt by the handshake */
    char sha[SLUICE_FN_COUNT_][41];
    uint64_t next_attempt_ms; /* no connect before this (monotonic ms) */
    int attempt;              /* failed connects since the last success */
    int wrong_mode;           /* the last handshake found a server of the other kind */
    int tls_refused;          /* the last connect failed in TLS (verification, an alert) */
    int lost;                 /* a call failed and dropped the connection (sluice__node_lost) */
    unsigned connects;        /* successful connects: a router sees a new connection by it */
    char where[300];          /* redacted URL or "cluster node HOST:PORT", for messages */
    sluice__tls_link *tls;    /* rediss://: the TLS transport (made at the first connect) */
} sluice__node;

/* A router's own short-lived connection, for its questions (a cluster's slot map from a seed,
 * a sentinel's answer): plain TCP, or TLS with the options' CAs and names when `tls`; no
 * handshake plan. Also a view of a connected node: {n->ctx, n->tls}. */
typedef struct sluice__probe {
    redisContext *ctx;
    sluice__tls_link *tls; /* the TLS transport, or NULL over plain TCP */
} sluice__probe;

/* Connects p to host:port, connect and each reply within timeout_ms. Returns 0, or a status
 * (SLUICE_ETLS for a TLS failure: "certificate verify failed: ...") with the reason in why and
 * nothing left open. */
int sluice__probe_open(sluice__probe *p, const sluice_conn_options *o, int tls, const char *host,
                       int port, int timeout_ms, char *why, size_t len);

/* One command on p and its reply (the caller frees it), or NULL with the reason in why: the
 * connection is then unusable. */
redisReply *sluice__probe_command(sluice__probe *p, int argc, const char **argv, char *why,
                                  size_t len);

/* Closes what sluice__probe_open opened. NULL-safe. */
void sluice__probe_close(sluice__probe *p);

/* Sets up `n` (not connected) for `env`: host and port for a cluster's node (env->member). */
void sluice__node_init(sluice__node *n, const sluice__node_env *env, const char *host, int port,
                       const char *where);

/* Connects `n` unless connected (after checking the socket for a peer close), with the
 * handshake. While the backoff after a failure lasts: SLUICE_ECONN (SLUICE_ECLUSTER after a
 * server of the wrong kind) at once. Returns 0 or a status; detail in env->err. */
int sluice__node_start(sluice__node *n);

/* Reads the next reply on `n` (see sluice_conn_read_reply). */
int sluice__node_read(sluice__node *n, redisReply **out);

/* Queues a command, or FCALL (or EVALSHA, loading the script first) of `fn`, or formatted
 * commands, on the connected `n`. */
int sluice__node_append_command(sluice__node *n, int argc, const char **argv, const size_t *lens);
int sluice__node_append_fcall(sluice__node *n, sluice_fn fn, int nkeys, const char **keys,
                              const size_t *keylens, int nargs, const char **args,
                              const size_t *arglens);
int sluice__node_append_formatted(sluice__node *n, const char *cmd, size_t len);

/* One command: connect if needed, send, read (see sluice_conn_command). */
int sluice__node_command(sluice__node *n, int argc, const char **argv, const size_t *lens,
                         redisReply **out, int *sent);

/* After NOSCRIPT / function not found on `n`: forget the shas and reload the library (function
 * mode). Returns 0 when the call may be sent again. */
int sluice__node_reload(sluice__node *n);

/* The read timeout of n's connection, when connected. */
void sluice__node_set_timeout(sluice__node *n, int ms);

/* 1 once after a call on `n` failed and dropped its connection (I/O, timeout, handshake, out of
 * memory): a router's pipeline or transaction on it is over. Clears the mark. */
int sluice__node_lost(sluice__node *n);

/* Closes n's connection (if any); the node stays usable. */
void sluice__node_drop(sluice__node *n);

/* Closes n's connection and frees what it keeps between connections (the TLS context and
 * session); the node is not used after. */
void sluice__node_release(sluice__node *n);

#endif
