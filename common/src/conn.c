/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the blocking Redis connection (see redis.h).
 *
 * One hiredis redisContext, (re)connected lazily by the next call after a failure: connect with
 * a timeout, AUTH, SELECT, make sure the sluice library is on the server. Failed connects back
 * off exponentially with jitter, so a caller that retries in a loop does not storm the server.
 * Before each command the socket is checked for a peer close (idle timeout, CLIENT KILL), so
 * a command is not written into a dead connection and its outcome reported as unknown.
 *
 * With a redis+cluster:// URL the same calls go through the router of conn_cluster.c, which
 * keeps one such connection (a node) per primary; what happens on one server is the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/buf.h"
#include "sluice/clock.h"
#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/lua.h"
#include "sluice/options.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/status.h"

#include "conn_internal.h"

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

sluice_conn *sluice_conn_new(const sluice_url *url, const sluice_conn_options *o) {
    sluice_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->url = *url;
    sluice__conn_options_fill(&c->o, o);
    sluice_url_redact(url, c->where, sizeof(c->where));
    memcpy(c->one.where, c->where, sizeof(c->one.where));
    c->seed = (unsigned)getpid() ^ (unsigned)sluice_now_ns() ^ (unsigned)(uintptr_t)c;
    if (url->is_cluster && (c->cl = sluice__cluster_new()) == NULL) {
        free(c);
        return NULL;
    }
    return c;
}

void sluice_conn_free(sluice_conn *c) {
    if (c == NULL) {
        return;
    }
    sluice__node_drop(&c->one);
    sluice__cluster_free(c->cl);
    memset(c->url.password, 0, sizeof(c->url.password));
    free(c);
}

const char *sluice_conn_errstr(const sluice_conn *c) {
    return c->err;
}

void sluice__fd_cloexec(int fd) {
    if (fd >= 0) {
        int flags = fcntl(fd, F_GETFD);
        if (flags >= 0) {
            fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
        }
    }
}

void sluice__node_drop(sluice__node *n) {
    if (n->ctx != NULL) {
        redisFree(n->ctx);
        n->ctx = NULL;
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

/* Records a failed command/connect: drops the connection and arms the backoff. */
static int fail(sluice_conn *c, sluice__node *n, int status, const char *what) {
    snprintf(c->err, sizeof(c->err), "%s: %s", n->where, what);
    sluice__node_drop(n);
    if (n->attempt < SLUICE_ATTEMPT_MAX) {
        n->attempt++;
    }
    n->next_attempt_ms =
        sluice_now_ms() + (uint64_t)sluice__backoff_ms(&c->o, n->attempt, &c->seed);
    if (c->cl != NULL) {
        sluice__cluster_node_failed(c, n);
    }
    return status;
}

/* FUNCTION LOAD of the library on `n` (after NOSCRIPT: the server lost it). */
static int load_library(sluice_conn *c, sluice__node *n) {
    size_t len;
    const char *lib = sluice_lua_library(&len);
    const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", lib};
    size_t lens[] = {8, 4, 7, len};
    redisReply *r = redisCommandArgv(n->ctx, 4, argv, lens);
    if (r == NULL) {
        return fail(c, n, io_status(n->ctx), n->ctx->errstr);
    }
    int st = sluice__hs_load_reply(r, n->where, &n->mode, c->err, sizeof(c->err));
    freeReplyObject(r);
    return st;
}

/* The handshake plan (handshake.h), one step at a time: AUTH, CLUSTER MYID (not on a node a
 * cluster's map named), SELECT, the library. */
static int handshake(sluice_conn *c, sluice__node *n) {
    sluice__hs_config cfg = {.url = &c->url,
                             .kind = c->cl != NULL ? SLUICE_HS_MEMBER : SLUICE_HS_SINGLE,
                             .force_eval = c->o.force_eval,
                             .no_load = c->o.no_load,
                             .where = n->where,
                             .sha = n->sha,
                             .err = c->err,
                             .errlen = sizeof(c->err)};
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
        redisReply *r = redisCommandArgv(n->ctx, cmd.argc, cmd.argv, cmd.lens);
        if (r == NULL) {
            st = fail(c, n, io_status(n->ctx), n->ctx->errstr);
            break;
        }
        sluice__hs_feed(&p, r);
        freeReplyObject(r);
    }
    sluice__hs_free(&p);
    return st;
}

/* Connects `n` now unless connected (see sluice_conn_ensure). */
static int node_ensure(sluice_conn *c, sluice__node *n) {
    if (n->ctx != NULL) {
        return 0;
    }
    uint64_t now = sluice_now_ms();
    if (now < n->next_attempt_ms) {
        /* keep the last error: it says why we are backing off */
        return n->wrong_mode ? SLUICE_ECLUSTER : SLUICE_ECONN;
    }
    struct timeval ctv = {c->o.connect_timeout_ms / 1000, (c->o.connect_timeout_ms % 1000) * 1000};
    struct timeval tv = {c->o.command_timeout_ms / 1000, (c->o.command_timeout_ms % 1000) * 1000};
    int is_unix = c->cl == NULL && c->url.is_unix;
    const char *host = c->cl != NULL ? n->host : c->url.host;
    n->ctx = is_unix ? redisConnectUnixWithTimeout(c->url.path, ctv)
                     : redisConnectWithTimeout(host, c->cl != NULL ? n->port : c->url.port, ctv);
    if (n->ctx == NULL) {
        return fail(c, n, SLUICE_ENOMEM, "out of memory");
    }
    sluice__fd_cloexec(n->ctx->fd);
    if (n->ctx->err) {
        return fail(c, n, io_status(n->ctx), n->ctx->errstr);
    }
    redisSetTimeout(n->ctx, tv);
    if (!is_unix) {
        redisEnableKeepAlive(n->ctx);
    }
    int st = handshake(c, n);
    n->wrong_mode = st == SLUICE_ECLUSTER;
    if (st != 0) {
        if (n->ctx != NULL) {
            char keep[sizeof(c->err)];
            memcpy(keep, c->err, sizeof(keep));
            fail(c, n, st, "");
            memcpy(c->err, keep, sizeof(keep));
        }
        return st;
    }
    n->attempt = 0;
    return 0;
}

int sluice_conn_ensure(sluice_conn *c) {
    return c->cl != NULL ? sluice__cluster_ensure(c) : node_ensure(c, &c->one);
}

/* 1 when the server has closed our socket (idle timeout, CLIENT KILL, restart). */
static int peer_closed(redisContext *ctx) {
    struct pollfd p = {.fd = ctx->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) {
        return 0;
    }
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

int sluice__node_start(sluice_conn *c, sluice__node *n) {
    if (n->ctx != NULL && peer_closed(n->ctx)) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=reconnect reason=peer_closed server=%s", n->where);
        sluice__node_drop(n);
        n->next_attempt_ms = 0;
    }
    return node_ensure(c, n);
}

static int start(sluice_conn *c, int *sent) {
    if (sent != NULL) {
        *sent = 0;
    }
    return sluice__node_start(c, &c->one);
}

int sluice__node_read(sluice_conn *c, sluice__node *n, redisReply **out) {
    void *r = NULL;
    *out = NULL;
    if (n->ctx == NULL) {
        return SLUICE_ECONN;
    }
    if (redisGetReply(n->ctx, &r) != REDIS_OK || r == NULL) {
        return fail(c, n, io_status(n->ctx), n->ctx->errstr);
    }
    *out = r;
    if ((*out)->type == REDIS_REPLY_ERROR) {
        snprintf(c->err, sizeof(c->err), "%s: %s", n->where, (*out)->str);
        return sluice_reply_error_status((*out)->str, (*out)->len);
    }
    return 0;
}

int sluice_conn_read_reply(sluice_conn *c, redisReply **out) {
    if (c->cl != NULL) {
        return sluice__cluster_read_reply(c, out);
    }
    return sluice__node_read(c, &c->one, out);
}

/* One command on one node: connect if needed, send, read. */
static int node_command(sluice_conn *c, sluice__node *n, int argc, const char **argv,
                        const size_t *lens, redisReply **out, int *sent) {
    *out = NULL;
    if (sent != NULL) {
        *sent = 0;
    }
    int st = sluice__node_start(c, n);
    if (st != 0) {
        return st;
    }
    if (redisAppendCommandArgv(n->ctx, argc, argv, lens) != REDIS_OK) {
        return fail(c, n, SLUICE_ENOMEM, "out of memory formatting a command");
    }
    if (sent != NULL) {
        *sent = 1;
    }
    return sluice__node_read(c, n, out);
}

int sluice_conn_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                        redisReply **out, int *sent) {
    if (c->cl != NULL) {
        return sluice__cluster_command(c, argc, argv, lens, out, sent);
    }
    return node_command(c, &c->one, argc, argv, lens, out, sent);
}

/* Loads the EVALSHA script of `fn` on `n` unless its sha is known. */
static int ensure_sha(sluice_conn *c, sluice__node *n, sluice_fn fn) {
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
    int st = node_command(c, n, 3, argv, lens, &r, NULL);
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

int sluice__node_append_fcall(sluice_conn *c, sluice__node *n, sluice_fn fn, int nkeys,
                              const char **keys, const size_t *keylens, int nargs,
                              const char **args, const size_t *arglens) {
    int st = n->mode == SLUICE_HS_MODE_EVAL ? ensure_sha(c, n, fn) : 0;
    if (st != 0) {
        return st;
    }
    int eval = n->mode == SLUICE_HS_MODE_EVAL;
    sds cmd = NULL;
    st = sluice__format_fcall(eval ? "EVALSHA" : "FCALL", eval ? n->sha[fn] : sluice_fn_name(fn),
                              nkeys, keys, keylens, nargs, args, arglens, &cmd);
    if (st == 0 && redisAppendFormattedCommand(n->ctx, cmd, sdslen(cmd)) != REDIS_OK) {
        st = fail(c, n, SLUICE_ENOMEM, "out of memory queueing a command");
    }
    sdsfree(cmd);
    return st;
}

int sluice_conn_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                             const size_t *keylens, int nargs, const char **args,
                             const size_t *arglens) {
    if (c->cl != NULL) {
        return sluice__cluster_append_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens);
    }
    int st = start(c, NULL);
    if (st != 0) {
        return st;
    }
    return sluice__node_append_fcall(c, &c->one, fn, nkeys, keys, keylens, nargs, args, arglens);
}

int sluice_conn_append_command(sluice_conn *c, int argc, const char **argv, const size_t *lens) {
    if (c->cl != NULL) {
        return sluice__cluster_append_command(c, argc, argv, lens);
    }
    int st = start(c, NULL);
    if (st == 0 && redisAppendCommandArgv(c->one.ctx, argc, argv, lens) != REDIS_OK) {
        st = fail(c, &c->one, SLUICE_ENOMEM, "out of memory queueing a command");
    }
    return st;
}

int sluice__node_reload(sluice_conn *c, sluice__node *n) {
    SLUICE_LOG(SLUICE_LOG_WARN, "event=library_missing server=%s action=reload", n->where);
    memset(n->sha, 0, sizeof(n->sha));
    if (n->mode != SLUICE_HS_MODE_FUNCTION) {
        return 0;
    }
    if (c->o.no_load) {
        return SLUICE_ENOSCRIPT;
    }
    return load_library(c, n);
}

int sluice_conn_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                      const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                      redisReply **out, int *sent) {
    if (c->cl != NULL) {
        return sluice__cluster_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens, out, sent);
    }
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
        st = sluice_conn_read_reply(c, out);
        if (st != SLUICE_ENOSCRIPT || attempt > 0) {
            return st;
        }
        /* The server lost the library (restart without persistence, FLUSH): it did not run
         * the call, so reload and send it once more. */
        freeReplyObject(*out);
        *out = NULL;
        if ((st = sluice__node_reload(c, &c->one)) != 0) {
            return st;
        }
    }
}
