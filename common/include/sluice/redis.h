/* SPDX-License-Identifier: MIT */
/*
 * redis.h - connections to Redis, blocking and libuv-async, and calls of the sluice functions.
 *
 * Owns: connecting (TCP or unix socket) with a connect timeout, AUTH and SELECT, loading the
 * embedded Lua library (FUNCTION LOAD on Redis 7, else SCRIPT LOAD + EVALSHA), reloading it
 * when the server lost it (restart without persistence, SCRIPT FLUSH) and re-sending the call
 * once, mapping Redis error replies to sluice statuses, and reconnecting with capped
 * exponential backoff and jitter. Does not own: what the calls mean (producer/, worker/).
 *
 * With a redis+cluster:// URL the blocking connection routes each call to the primary of its
 * first key's slot and follows the cluster's redirections (see docs/cluster.md). An
 * async connection serves one queue (sluice_conn_options.queue; without one it reports
 * SLUICE_EINVAL through its state callback): it connects to the owner of the queue's slot,
 * holds a call answered MOVED and sends it to the new owner, and sends a call answered ASK once
 * more, after ASKING, on a second connection to the node the ASK names - all within each call's
 * deadline.
 *
 * Both kinds of connection are for one thread. A blocking connection is lazily (re)connected
 * by the next call after a failure. An async connection lives on one uv_loop_t.
 *
 * hiredis 0.14 gives an async connection no timeouts and its libuv adapter never reports a
 * failed connect; the async connection here carries its own adapter and per-request deadlines.
 */
#ifndef SLUICE_REDIS_H
#define SLUICE_REDIS_H

#include <stddef.h>

/* Replies are hiredis's redisReply, passed by pointer only: the type is declared, not defined,
 * so hiredis's headers stay out of every includer. A program that reads a reply includes
 * <hiredis/hiredis.h> (whose `typedef struct redisReply redisReply` names the same type) and
 * frees one with freeReplyObject. */
struct redisReply;
/* Only pointers to the loop cross this API: no need to pull uv.h (and its feature-test
 * macro needs) into every includer. */
typedef struct uv_loop_s uv_loop_t;

#include "sluice/export.h"
#include "sluice/url.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The functions of the library built from scripts/lua/. */
typedef enum sluice_fn {
    SLUICE_FN_ADMIT = 0,
    SLUICE_FN_ACK,
    SLUICE_FN_DEAD,
    SLUICE_FN_RETRY,
    SLUICE_FN_RECLAIM,
    SLUICE_FN_TOUCH,
    SLUICE_FN_LIST_ADMIT,
    SLUICE_FN_LIST_TAKE,
    SLUICE_FN_LIST_ACK,
    SLUICE_FN_LIST_DEAD,
    SLUICE_FN_LIST_RECOVER,
    SLUICE_FN_VERSION,
    SLUICE_FN_REPLAY,
    SLUICE_FN_LIST_REPLAY,
    SLUICE_FN_PRUNE,
    SLUICE_FN_GROUP,
    SLUICE_FN_LIMIT,
    SLUICE_FN_ADMIT2,
    SLUICE_FN_LIST_ADMIT2,
    SLUICE_FN_LIMITS_CONFIG,
    SLUICE_FN_TAKE,
    SLUICE_FN_FAIR_TAKE,
    SLUICE_FN_LANE_ACK,
    SLUICE_FN_LANE_RECLAIM,
    SLUICE_FN_FAIR_CONFIG,
    SLUICE_FN_CLEAR,       /* sluice-admin clear: a stream queue's waiting entries */
    SLUICE_FN_LIST_CLEAR,  /* ... a list queue's */
    SLUICE_FN_FAIR_GRANT,  /* a fair read's lanes and counts, read by the worker itself */
    SLUICE_FN_FAIR_REFUND, /* ... what those reads did not find, given back */
    SLUICE_FN_COUNT_
} sluice_fn;

/* "sluice_admit" etc. */
SLUICE_API const char *sluice_fn_name(sluice_fn fn);

typedef struct sluice_conn_options {
    size_t struct_size;     /* set by _init (sluice/export.h) */
    int connect_timeout_ms; /* ms, default 2000 */
    int command_timeout_ms; /* ms, default 5000; the deadline of each call */
    int backoff_min_ms;     /* ms, default 100: first reconnect delay */
    int backoff_max_ms;     /* ms, default 5000: cap of the exponential backoff */
    int force_eval;         /* 1: use EVALSHA even when FUNCTION exists (tests); default 0 */
    int no_load;            /* 1: never FUNCTION/SCRIPT LOAD (least-privilege users); default 0 */
    const char *name;       /* the connection in log lines (conn=NAME), default "redis"; copied */
    const char *queue;      /* the queue it serves in log lines (queue=Q), NULL = none; copied */
    /* TLS, for rediss:// URLs (ignored otherwise). Paths in PEM; each copied, NULL = unset */
    const char *tls_ca_file;      /* CA bundle to verify the server; NULL and no tls_ca_dir: the
                                     system store */
    const char *tls_ca_dir;       /* directory of hashed CA certificates (c_rehash) */
    const char *tls_cert_file;    /* client certificate (chain), for tls-auth-clients; with key */
    const char *tls_key_file;     /* its private key */
    const char *tls_server_name;  /* SNI and the name checked in the certificate; NULL = the
                                     URL's host (an IP literal is checked as an IP address) */
    int tls_insecure_skip_verify; /* 1: no certificate or name check, FOR TESTS ONLY (logged as
                                     a warning at every connect); default 0 */
} sluice_conn_options;

SLUICE_API void sluice_conn_options_init_sized(sluice_conn_options *o, size_t size);
#define sluice_conn_options_init(o) sluice_conn_options_init_sized((o), sizeof(*(o)))

/* ---------------------------------------------------------------------------------------- */
/* Blocking connection                                                                      */

typedef struct sluice_conn sluice_conn;

/* Copies url and options; does not connect. Returns NULL only when out of memory. */
SLUICE_API sluice_conn *sluice_conn_new(const sluice_url *url, const sluice_conn_options *o);
SLUICE_API void sluice_conn_free(sluice_conn *c);

/*
 * Connects now unless connected. Respects the backoff after a failure: returns SLUICE_ECONN
 * at once while the backoff has not elapsed. Returns 0 or a status (ECONN, ETIMEDOUT, EAUTH,
 * ENOPERM, ...); the detail is in sluice_conn_errstr().
 */
SLUICE_API int sluice_conn_ensure(sluice_conn *c);

/*
 * Sends one command and reads its reply (*out, caller frees with freeReplyObject). A Redis
 * error reply is returned as its status with *out set to the reply. After an I/O failure or a
 * timeout the connection is dropped and *sent tells whether the command may have reached the
 * server (1) or certainly did not (0). `sent` may be NULL.
 */
SLUICE_API int sluice_conn_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                                   struct redisReply **out, int *sent);

/*
 * Calls a sluice function: FCALL name nkeys keys... args... (or EVALSHA). When the server
 * lost the library (function not found / NOSCRIPT), reloads it and re-sends once.
 */
SLUICE_API int sluice_conn_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                                 const size_t *keylens, int nargs, const char **args,
                                 const size_t *arglens, struct redisReply **out, int *sent);

/* Pipelined calls: append `n` calls with sluice_conn_append_fcall or sluice_conn_append_command
 * (lens NULL = strlen), then read each reply in order with sluice_conn_read_reply. */
SLUICE_API int sluice_conn_append_command(sluice_conn *c, int argc, const char **argv,
                                          const size_t *lens);
SLUICE_API int sluice_conn_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                                        const size_t *keylens, int nargs, const char **args,
                                        const size_t *arglens);
SLUICE_API int sluice_conn_read_reply(sluice_conn *c, struct redisReply **out);

/* Detail of the last failure, e.g. "redis://127.0.0.1:6379: Connection refused". */
SLUICE_API const char *sluice_conn_errstr(const sluice_conn *c);

/* ---------------------------------------------------------------------------------------- */
/* Async connection (libuv)                                                                 */

typedef struct sluice_aconn sluice_aconn;

/*
 * Reply callback. status 0: `reply` is the reply (borrowed; valid during the callback only).
 * A Redis error reply gives its mapped status and the reply. ETIMEDOUT: the deadline passed;
 * ECONN: the connection was lost (with `sent` telling whether the command may have been
 * executed, as for the blocking call); ECANCELED: sluice_aconn_close() was called. Runs
 * exactly once per accepted request, on the loop thread.
 */
typedef void (*sluice_aconn_reply_cb)(sluice_aconn *c, int status, int sent,
                                      struct redisReply *reply, void *arg);

/* Called on the loop thread each time the connection becomes ready (1) or is lost (0). */
typedef void (*sluice_aconn_state_cb)(sluice_aconn *c, int ready, int status, void *arg);

/* Creates a connection on `loop` and starts connecting. Returns NULL when out of memory. A
 * rediss:// URL is reached over TLS (the tls_* options). With a redis+sentinel:// URL
 * (rediss+sentinel://: the sentinels and the data nodes over TLS) it connects to the primary the
 * sentinels name and follows failovers (+switch-master, READONLY) by itself. */
SLUICE_API sluice_aconn *sluice_aconn_new(uv_loop_t *loop, const sluice_url *url,
                                          const sluice_conn_options *o,
                                          sluice_aconn_state_cb state_cb, void *state_arg);

/* 1 when ready for commands. */
SLUICE_API int sluice_aconn_ready(const sluice_aconn *c);

/*
 * Queues a command with its own deadline (timeout_ms; 0 = the command timeout of the options).
 * Returns 0 (the callback will run exactly once) or an error (ECONN when not ready, ENOMEM),
 * in which case the callback never runs.
 */
SLUICE_API int sluice_aconn_command(sluice_aconn *c, int argc, const char **argv,
                                    const size_t *lens, int timeout_ms, sluice_aconn_reply_cb cb,
                                    void *arg);

/*
 * The same, except that a call made while the connection is not ready (connecting, reconnecting
 * after a loss, following a cluster redirect or a Sentinel failover) is not refused: it is held,
 * in order with the others held, and sent once, first, as soon as the connection is ready -
 * within its deadline (timeout_ms, counted from this call). Past it the callback gets ETIMEDOUT
 * with sent = 0, and the call is never sent. A call held when sluice_aconn_close() is called gets
 * ECANCELED (sent = 0). Once written it is like any other call (a loss then reports ECONN with
 * `sent`); it is not sent a second time. Held calls count in sluice_aconn_pending(); their bytes
 * are bounded like the bytes not yet written (64 MiB: past it ETOOBIG). Returns 0 (the callback
 * will run exactly once) or an error (ECONN after sluice_aconn_close(), ETOOBIG, ENOMEM, EINVAL),
 * in which case the callback never runs. Loop thread only.
 */
SLUICE_API int sluice_aconn_command_held(sluice_aconn *c, int argc, const char **argv,
                                         const size_t *lens, int timeout_ms,
                                         sluice_aconn_reply_cb cb, void *arg);

/* The same for a sluice function; reloads the library and re-sends once if the server lost it. */
SLUICE_API int sluice_aconn_fcall(sluice_aconn *c, sluice_fn fn, int nkeys, const char **keys,
                                  const size_t *keylens, int nargs, const char **args,
                                  const size_t *arglens, int timeout_ms, sluice_aconn_reply_cb cb,
                                  void *arg);

/* Number of requests waiting for a reply. */
SLUICE_API size_t sluice_aconn_pending(const sluice_aconn *c);

/* Detail of the last failure. */
SLUICE_API const char *sluice_aconn_errstr(const sluice_aconn *c);

/*
 * Closes: every pending request's callback runs with ECANCELED (before this returns or on the
 * next loop iteration), no state callback runs any more, and the memory is freed once libuv has
 * closed its handles (`closed`, may be NULL, is then called). Safe to call from a callback.
 */
SLUICE_API void sluice_aconn_close(sluice_aconn *c, void (*closed)(void *arg), void *arg);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_REDIS_H */
