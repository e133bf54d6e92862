/* SPDX-License-Identifier: MIT */
/*
 * conn_node.c - the node layer of the blocking connection (see conn_node.h): one server's
 * hiredis redisContext, (re)connected lazily by the next call after a failure: connect with a
 * timeout, then the handshake plan (AUTH, CLUSTER MYID, SELECT, the library). Failed connects
 * back off exponentially with jitter, so a caller that retries in a loop does not storm the
 * server. Before each command the socket is checked for a peer close (idle timeout, CLIENT
 * KILL), so a command is not written into a dead connection and its outcome reported as
 * unknown. A failure returns its status, with the detail in the connection's err, and marks the
 * node lost; it never calls up into a router.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/buf.h"
#include "sluice/clock.h"
#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/lua.h"
#include "sluice/reply.h"
#include "sluice/status.h"

#include "conn_node.h"

int sluice__backoff_ms(const sluice_conn_options *o, int attempt, unsigned *seed) {
    long long d = o->backoff_min_ms;
    for (int i = 1; i < attempt && d < o->backoff_max_ms; i++) {
        d *= 2;
    }
    if (d > o->backoff_max_ms) {
        d = o->backoff_max_ms;
    }
    /* jitter in [d/2, d] from the connection's own generator: a crowd of clients that lost the
     * server at the same moment spreads out instead of reconnecting in lockstep */
    *seed = *seed * 1103515245u + 12345u;
    return (int)(d / 2 + (long long)((*seed >> 8) % (unsigned)(d / 2 + 1)));
}

void sluice__fd_cloexec(int fd) {
    if (fd >= 0) {
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) {
            fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        }
    }
}

void sluice__node_init(sluice__node *n, const sluice__node_env *env, const char *host, int port,
                       const char *where) {
    memset(n, 0, sizeof(*n));
    n->env = env;
    snprintf(n->host, sizeof(n->host), "%s", host);
    n->port = port;
    snprintf(n->where, sizeof(n->where), "%s", where);
}

void sluice__node_drop(sluice__node *n) {
    if (n->ctx != NULL) {
        sluice__tls_link_close(n->tls);
        redisFree(n->ctx);
        n->ctx = NULL;
    }
}

void sluice__node_release(sluice__node *n) {
    sluice__node_drop(n);
    sluice__tls_link_free(n->tls);
    n->tls = NULL;
}

int sluice__node_lost(sluice__node *n) {
    int lost = n->lost;
    n->lost = 0;
    return lost;
}

void sluice__node_set_timeout(sluice__node *n, int ms) {
    if (n->tls != NULL) {
        n->tls->timeout_ms = ms;
    }
    if (n->ctx != NULL) {
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
        redisSetTimeout(n->ctx, tv);
    }
}

static int io_status(redisContext *ctx) {
    if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return SLUICE_ETIMEDOUT;
    }
    if (ctx->err == REDIS_ERR_PROTOCOL || ctx->err == REDIS_ERR_OOM) {
        return ctx->err == REDIS_ERR_OOM ? SLUICE_ENOMEM : SLUICE_EPROTO;
    }
    if (strstr(ctx->errstr, "timed out") != NULL) {
        return SLUICE_ETIMEDOUT;
    }
    return SLUICE_ECONN;
}

/* Records a failed command/connect: drops the connection, arms the backoff, marks n lost. */
static int fail(sluice__node *n, int status, const char *what) {
    const sluice__node_env *e = n->env;
    snprintf(e->err, e->errlen, "%s: %s", n->where, what);
    sluice__node_drop(n);
    if (n->attempt < SLUICE_ATTEMPT_MAX) {
        n->attempt++;
    }
    n->next_attempt_ms = sluice_now_ms() + (uint64_t)sluice__backoff_ms(e->o, n->attempt, e->seed);
    n->lost = 1;
    return status;
}

/* The next reply on n's connection into *r: hiredis's own I/O, or the TLS transport's. Returns
 * 0, or the failure's status with the connection dropped (fail). */
static int get_reply(sluice__node *n, void **r) {
    if (n->tls != NULL) {
        int st = sluice__tls_link_reply(n->tls, n->ctx, r);
        return st == 0 ? 0 : fail(n, st, n->tls->err);
    }
    if (redisGetReply(n->ctx, r) != REDIS_OK || *r == NULL) {
        return fail(n, io_status(n->ctx), n->ctx->errstr);
    }
    return 0;
}

/* One command on the connected `n` and its reply (redisCommandArgv over either transport). */
static int roundtrip(sluice__node *n, int argc, const char **argv, const size_t *lens,
                     redisReply **r) {
    if (n->tls == NULL) {
        *r = redisCommandArgv(n->ctx, argc, argv, lens);
        return *r != NULL ? 0 : fail(n, io_status(n->ctx), n->ctx->errstr);
    }
    *r = NULL;
    if (redisAppendCommandArgv(n->ctx, argc, argv, lens) != REDIS_OK) {
        return fail(n, SLUICE_ENOMEM, "out of memory formatting a command");
    }
    return get_reply(n, (void **)r);
}

int sluice__probe_open(sluice__probe *p, const sluice_conn_options *o, int tls, const char *host,
                       int port, int timeout_ms, char *why, size_t len) {
    p->ctx = NULL;
    p->tls = NULL;
    if (!tls) {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        p->ctx = redisConnectWithTimeout(host, port, tv);
        if (p->ctx == NULL || p->ctx->err) {
            snprintf(why, len, "%s", p->ctx ? p->ctx->errstr : "out of memory");
            int st = p->ctx != NULL ? io_status(p->ctx) : SLUICE_ENOMEM;
            sluice__probe_close(p);
            return st;
        }
        sluice__fd_cloexec(p->ctx->fd);
        redisSetTimeout(p->ctx, tv);
        return 0;
    }
    if ((p->tls = sluice__tls_link_new()) == NULL) {
        snprintf(why, len, "out of memory");
        return SLUICE_ENOMEM;
    }
    sluice_conn_options t = *o; /* the probe's own timeout for the connect and each reply */
    t.connect_timeout_ms = t.command_timeout_ms = timeout_ms;
    char where[300];
    snprintf(where, sizeof(where), strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d", host, port);
    int st = sluice__tls_link_open(p->tls, &t, host, port, where, &p->ctx);
    if (st != 0) {
        snprintf(why, len, "%s", p->tls->err);
        sluice__probe_close(p);
    }
    return st;
}

redisReply *sluice__probe_command(sluice__probe *p, int argc, const char **argv, char *why,
                                  size_t len) {
    void *r = NULL;
    if (p->tls == NULL) {
        if ((r = redisCommandArgv(p->ctx, argc, argv, NULL)) == NULL) {
            snprintf(why, len, "%s", p->ctx->errstr);
        }
        return r;
    }
    if (redisAppendCommandArgv(p->ctx, argc, argv, NULL) != REDIS_OK) {
        snprintf(why, len, "out of memory formatting a command");
        return NULL;
    }
    if (sluice__tls_link_reply(p->tls, p->ctx, &r) != 0) {
        snprintf(why, len, "%s", p->tls->err);
        return NULL;
    }
    return r;
}

void sluice__probe_close(sluice__probe *p) {
    if (p != NULL) {
        sluice__tls_link_free(p->tls); /* before the context, which closes the socket */
        redisFree(p->ctx);
        p->ctx = NULL;
        p->tls = NULL;
    }
}

/* FUNCTION LOAD of the library on `n` (after NOSCRIPT: the server lost it). */
static int load_library(sluice__node *n) {
    size_t len;
    const char *lib = sluice_lua_library(&len);
    const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", lib};
    size_t lens[] = {8, 4, 7, len};
    redisReply *r = NULL;
    int io = roundtrip(n, 4, argv, lens, &r);
    if (io != 0) {
        return io;
    }
    int st = sluice__hs_load_reply(r, n->where, &n->mode, n->env->err, n->env->errlen);
    freeReplyObject(r);
    return st;
}

/* The handshake plan (handshake.h), one step at a time: AUTH, CLUSTER MYID (not on a node a
 * cluster's map named), SELECT, the library. */
static int handshake(sluice__node *n) {
    const sluice__node_env *e = n->env;
    sluice__hs_config cfg = {.url = e->url,
                             .kind = e->member ? SLUICE_HS_MEMBER : SLUICE_HS_SINGLE,
                             .force_eval = e->o->force_eval,
                             .no_load = e->o->no_load,
                             .where = n->where,
                             .sha = n->sha,
                             .err = e->err,
                             .errlen = e->errlen};
    sluice__hs p;
    sluice__hs_start(&p, &cfg);
    int st = SLUICE_EPROTO;
    for (;;) {
        sluice__hs_cmd cmd;
        sluice__hs_event ev = sluice__hs_next(&p, &cmd);
        if (ev != SLUICE_HS_SEND) {
            st = ev == SLUICE_HS_DONE ? 0 : ev == SLUICE_HS_FAILED ? p.status : SLUICE_EPROTO;
            n->mode = p.mode;
            break;
        }
        redisReply *r = NULL;
        if ((st = roundtrip(n, cmd.argc, cmd.argv, cmd.lens, &r)) != 0) {
            break;
        }
        sluice__hs_feed(&p, r);
        freeReplyObject(r);
    }
    sluice__hs_free(&p);
    return st;
}

/* Opens n's rediss:// connection: socket and TLS handshake (conn_tls.h), within the connect
 * timeout. A cluster's node is checked against its own address (or tls_server_name). */
static int tls_connect(sluice__node *n, const char *host, int port) {
    if (n->tls == NULL && (n->tls = sluice__tls_link_new()) == NULL) {
        return fail(n, SLUICE_ENOMEM, "out of memory");
    }
    int st = sluice__tls_link_open(n->tls, n->env->o, host, port, n->where, &n->ctx);
    return st == 0 ? 0 : fail(n, st, n->tls->err);
}

/* Connects `n` now unless connected (see sluice_conn_ensure). */
static int node_ensure(sluice__node *n) {
    if (n->ctx != NULL) {
        return 0;
    }
    uint64_t now = sluice_now_ms();
    if (now < n->next_attempt_ms) {
        /* keep the last error: it says why we are backing off */
        return n->wrong_mode ? SLUICE_ECLUSTER : n->tls_refused ? SLUICE_ETLS : SLUICE_ECONN;
    }
    const sluice__node_env *e = n->env;
    int ct = e->o->connect_timeout_ms, mt = e->o->command_timeout_ms;
    struct timeval ctv = {ct / 1000, (ct % 1000) * 1000};
    struct timeval tv = {mt / 1000, (mt % 1000) * 1000};
    int is_unix = !e->member && e->url->is_unix;
    const char *host = e->member ? n->host : e->url->host;
    if (e->url->is_tls) {
        int st = tls_connect(n, host, e->member ? n->port : e->url->port);
        if (st != 0) {
            n->tls_refused = st == SLUICE_ETLS;
            return st;
        }
    } else {
        n->ctx = is_unix ? redisConnectUnixWithTimeout(e->url->path, ctv)
                         : redisConnectWithTimeout(host, e->member ? n->port : e->url->port, ctv);
        if (n->ctx == NULL) {
            return fail(n, SLUICE_ENOMEM, "out of memory");
        }
        sluice__fd_cloexec(n->ctx->fd);
        if (n->ctx->err) {
            return fail(n, io_status(n->ctx), n->ctx->errstr);
        }
    }
    redisSetTimeout(n->ctx, tv);
    if (!is_unix) {
        redisEnableKeepAlive(n->ctx);
    }
    int st = handshake(n);
    n->wrong_mode = st == SLUICE_ECLUSTER;
    n->tls_refused = st == SLUICE_ETLS;
    if (st != 0) {
        if (n->ctx != NULL) {
            char keep[512];
            snprintf(keep, sizeof(keep), "%s", e->err);
            fail(n, st, "");
            snprintf(e->err, e->errlen, "%s", keep);
        }
        return st;
    }
    n->attempt = 0;
    n->connects++;
    return 0;
}

/* 1 when the server has closed our socket (idle timeout, CLIENT KILL, restart). */
static int peer_closed(redisContext *ctx) {
    struct pollfd p = {.fd = ctx->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) {
        return 0;
    }
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

int sluice__node_start(sluice__node *n) {
    if (n->ctx != NULL && peer_closed(n->ctx)) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=reconnect reason=peer_closed server=%s", n->where);
        sluice__node_drop(n);
        n->next_attempt_ms = 0;
    }
    return node_ensure(n);
}

int sluice__node_read(sluice__node *n, redisReply **out) {
    void *r = NULL;
    *out = NULL;
    if (n->ctx == NULL) {
        return SLUICE_ECONN;
    }
    int st = get_reply(n, &r);
    if (st != 0) {
        return st;
    }
    *out = r;
    if ((*out)->type == REDIS_REPLY_ERROR) {
        snprintf(n->env->err, n->env->errlen, "%s: %s", n->where, (*out)->str);
        return sluice_reply_error_status((*out)->str, (*out)->len);
    }
    return 0;
}

int sluice__node_append_command(sluice__node *n, int argc, const char **argv, const size_t *lens) {
    if (redisAppendCommandArgv(n->ctx, argc, argv, lens) != REDIS_OK) {
        return fail(n, SLUICE_ENOMEM, "out of memory queueing a command");
    }
    return 0;
}

int sluice__node_append_formatted(sluice__node *n, const char *cmd, size_t len) {
    if (redisAppendFormattedCommand(n->ctx, cmd, len) != REDIS_OK) {
        return fail(n, SLUICE_ENOMEM, "out of memory queueing a command");
    }
    return 0;
}

int sluice__node_command(sluice__node *n, int argc, const char **argv, const size_t *lens,
                         redisReply **out, int *sent) {
    *out = NULL;
    if (sent != NULL) {
        *sent = 0;
    }
    int st = sluice__node_start(n);
    if (st != 0) {
        return st;
    }
    if (redisAppendCommandArgv(n->ctx, argc, argv, lens) != REDIS_OK) {
        return fail(n, SLUICE_ENOMEM, "out of memory formatting a command");
    }
    if (sent != NULL) {
        *sent = 1;
    }
    return sluice__node_read(n, out);
}

/* Loads the EVALSHA script of `fn` on `n` unless its sha is known. */
static int ensure_sha(sluice__node *n, sluice_fn fn) {
    if (n->sha[fn][0] != '\0') {
        return 0;
    }
    size_t len;
    char *text = sluice_lua_script(fn, &len);
    if (text == NULL) {
        return SLUICE_ENOMEM;
    }
    const char *argv[] = {"SCRIPT", "LOAD", text};
    size_t lens[] = {6, 4, len};
    redisReply *r = NULL;
    int st = sluice__node_command(n, 3, argv, lens, &r, NULL);
    free(text);
    if (st == 0 && (r->type != REDIS_REPLY_STRING || r->len != 40)) {
        st = SLUICE_EPROTO;
    }
    if (st == 0) {
        memcpy(n->sha[fn], r->str, 41);
    }
    freeReplyObject(r);
    return st;
}

int sluice__format_fcall(const char *verb, const char *target, int nkeys, const char **keys,
                         const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                         sds *out) {
    int argc = 3 + nkeys + nargs;
    sluice_argv a;
    if (sluice_argv_init(&a, argc) != 0) {
        return SLUICE_ENOMEM;
    }
    char nk[16];
    snprintf(nk, sizeof(nk), "%d", nkeys);
    a.v[0] = verb;
    a.v[1] = target;
    a.v[2] = nk;
    for (int i = 0; i < 3; i++) {
        a.lens[i] = strlen(a.v[i]);
    }
    for (int i = 0; i < nkeys; i++) {
        a.v[3 + i] = keys[i];
        a.lens[3 + i] = keylens != NULL ? keylens[i] : strlen(keys[i]);
    }
    for (int i = 0; i < nargs; i++) {
        a.v[3 + nkeys + i] = args[i];
        a.lens[3 + nkeys + i] = arglens != NULL ? arglens[i] : strlen(args[i]);
    }
    int st = redisFormatSdsCommandArgv(out, argc, a.v, a.lens) < 0 ? SLUICE_ENOMEM : 0;
    sluice_argv_free(&a);
    return st;
}

int sluice__node_append_fcall(sluice__node *n, sluice_fn fn, int nkeys, const char **keys,
                              const size_t *keylens, int nargs, const char **args,
                              const size_t *arglens) {
    int st = n->mode == SLUICE_HS_MODE_EVAL ? ensure_sha(n, fn) : 0;
    if (st != 0) {
        return st;
    }
    int eval = n->mode == SLUICE_HS_MODE_EVAL;
    sds cmd = NULL;
    st = sluice__format_fcall(eval ? "EVALSHA" : "FCALL", eval ? n->sha[fn] : sluice_fn_name(fn),
                              nkeys, keys, keylens, nargs, args, arglens, &cmd);
    if (st == 0) {
        st = sluice__node_append_formatted(n, cmd, sdslen(cmd));
    }
    sdsfree(cmd);
    return st;
}

int sluice__node_reload(sluice__node *n) {
    SLUICE_LOG(SLUICE_LOG_WARN, "event=library_missing server=%s action=reload", n->where);
    memset(n->sha, 0, sizeof(n->sha));
    if (n->mode != SLUICE_HS_MODE_FUNCTION) {
        return 0;
    }
    if (n->env->o->no_load) {
        return SLUICE_ENOSCRIPT;
    }
    return load_library(n);
}
