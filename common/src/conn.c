/* SPDX-License-Identifier: MIT */
/*
 * conn.c - the blocking Redis connection (see redis.h).
 *
 * One hiredis redisContext, (re)connected lazily by the next call after a failure: connect with
 * a timeout, AUTH, SELECT, make sure the sluice library is on the server. Failed connects back
 * off exponentially with jitter, so a caller that retries in a loop does not storm the server.
 * Before each command the socket is checked for a peer close (idle timeout, CLIENT KILL), so
 * a command is not written into a dead connection and its outcome reported as unknown.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/buf.h"
#include "sluice/cli.h"
#include "sluice/client.h"
#include "sluice/log.h"
#include "sluice/lua.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/status.h"

#include "conn_internal.h"

enum { MODE_UNKNOWN = 0, MODE_FUNCTION = 1, MODE_EVAL = 2 };

struct sluice_conn {
    sluice_url url;
    sluice_conn_options o;
    redisContext *ctx;
    int mode;
    char sha[SLUICE_FN_COUNT_][41];
    uint64_t next_attempt_ms; /* no connect before this (monotonic ms) */
    int attempt;              /* failed connects since the last success */
    unsigned seed;            /* jitter generator state */
    char where[300];          /* redacted URL, for messages */
    char err[512];
};

void sluice_conn_options_init(sluice_conn_options *o) {
    memset(o, 0, sizeof(*o));
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 5000;
    o->backoff_min_ms = 100;
    o->backoff_max_ms = 5000;
}

void sluice__conn_options_fill(sluice_conn_options *dst, const sluice_conn_options *src) {
    sluice_conn_options d;
    sluice_conn_options_init(&d);
    *dst = src ? *src : d;
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
    c->seed = (unsigned)getpid() ^ (unsigned)sluice_now_ns() ^ (unsigned)(uintptr_t)c;
    return c;
}

void sluice_conn_free(sluice_conn *c) {
    if (c == NULL) {
        return;
    }
    if (c->ctx != NULL) {
        redisFree(c->ctx);
    }
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

static void drop(sluice_conn *c) {
    if (c->ctx != NULL) {
        redisFree(c->ctx);
        c->ctx = NULL;
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
static int fail(sluice_conn *c, int status, const char *what) {
    snprintf(c->err, sizeof(c->err), "%s: %s", c->where, what);
    drop(c);
    if (c->attempt < SLUICE_ATTEMPT_MAX) {
        c->attempt++;
    }
    c->next_attempt_ms =
        sluice_now_ms() + (uint64_t)sluice__backoff_ms(&c->o, c->attempt, &c->seed);
    return status;
}

/* A command run while connecting; error replies become statuses with the reply text. */
static int setup_cmd(sluice_conn *c, redisReply **out, int argc, const char **argv) {
    redisReply *r = redisCommandArgv(c->ctx, argc, argv, NULL);
    *out = NULL;
    if (r == NULL) {
        return fail(c, io_status(c->ctx), c->ctx->errstr);
    }
    if (r->type == REDIS_REPLY_ERROR) {
        int st = sluice_reply_error_status(r->str, r->len);
        snprintf(c->err, sizeof(c->err), "%s: %s", c->where, r->str);
        *out = r;
        return st;
    }
    *out = r;
    return 0;
}

static int load_library(sluice_conn *c) {
    size_t len;
    const char *lib = sluice_lua_library(&len);
    const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", lib};
    size_t lens[] = {8, 4, 7, len};
    redisReply *r = redisCommandArgv(c->ctx, 4, argv, lens);
    if (r == NULL) {
        return fail(c, io_status(c->ctx), c->ctx->errstr);
    }
    int st = 0;
    if (r->type == REDIS_REPLY_ERROR) {
        st = sluice_reply_error_status(r->str, r->len);
        snprintf(c->err, sizeof(c->err), "%s: FUNCTION LOAD: %s", c->where, r->str);
        if (strstr(r->str, "unknown command") != NULL) {
            c->mode = MODE_EVAL; /* a server without functions (Redis < 7) */
            st = 0;
        }
    } else {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=library_loaded server=%s", c->where);
        c->mode = MODE_FUNCTION;
    }
    freeReplyObject(r);
    return st;
}

/* Makes sure the sluice library is on the server (functions), or selects EVALSHA mode. */
static int ensure_library(sluice_conn *c) {
    memset(c->sha, 0, sizeof(c->sha));
    if (c->o.force_eval) {
        c->mode = MODE_EVAL;
        return 0;
    }
    const char *argv[] = {"FCALL", "sluice_version", "0"};
    redisReply *r;
    int st = setup_cmd(c, &r, 3, argv);
    if (r == NULL) {
        return st;
    }
    sluice_lua_action act = sluice_lua_probe(st, r, c->o.no_load);
    freeReplyObject(r);
    c->mode = act == SLUICE_LUA_EVAL ? MODE_EVAL : MODE_FUNCTION;
    if (act == SLUICE_LUA_FAIL) {
        return st;
    }
    if (act != SLUICE_LUA_LOAD) {
        return 0;
    }
    st = load_library(c);
    return st == SLUICE_ENOPERM ? 0 : st; /* a restricted user may only call functions */
}

static int handshake(sluice_conn *c) {
    redisReply *r = NULL;
    int st = 0;
    if (c->url.password[0] != '\0') {
        const char *argv[] = {"AUTH", c->url.user, c->url.password};
        st = c->url.user[0] ? setup_cmd(c, &r, 3, argv)
                            : setup_cmd(c, &r, 2, (const char *[]){"AUTH", c->url.password});
        freeReplyObject(r);
        if (st != 0) {
            return st == SLUICE_EREDIS ? SLUICE_EAUTH : st;
        }
    }
    if (c->url.db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%d", c->url.db);
        st = setup_cmd(c, &r, 2, (const char *[]){"SELECT", db});
        freeReplyObject(r);
        if (st != 0) {
            return st;
        }
    }
    return ensure_library(c);
}

int sluice_conn_ensure(sluice_conn *c) {
    if (c->ctx != NULL) {
        return 0;
    }
    uint64_t now = sluice_now_ms();
    if (now < c->next_attempt_ms) {
        /* keep the last error: it says why we are backing off */
        return SLUICE_ECONN;
    }
    struct timeval ctv = {c->o.connect_timeout_ms / 1000, (c->o.connect_timeout_ms % 1000) * 1000};
    struct timeval tv = {c->o.command_timeout_ms / 1000, (c->o.command_timeout_ms % 1000) * 1000};
    c->ctx = c->url.is_unix ? redisConnectUnixWithTimeout(c->url.path, ctv)
                            : redisConnectWithTimeout(c->url.host, c->url.port, ctv);
    if (c->ctx == NULL) {
        return fail(c, SLUICE_ENOMEM, "out of memory");
    }
    sluice__fd_cloexec(c->ctx->fd);
    if (c->ctx->err) {
        return fail(c, io_status(c->ctx), c->ctx->errstr);
    }
    redisSetTimeout(c->ctx, tv);
    if (!c->url.is_unix) {
        redisEnableKeepAlive(c->ctx);
    }
    int st = handshake(c);
    if (st != 0) {
        if (c->ctx != NULL) {
            char keep[sizeof(c->err)];
            memcpy(keep, c->err, sizeof(keep));
            fail(c, st, "");
            memcpy(c->err, keep, sizeof(keep));
        }
        return st;
    }
    c->attempt = 0;
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

static int start(sluice_conn *c, int *sent) {
    if (sent != NULL) {
        *sent = 0;
    }
    if (c->ctx != NULL && peer_closed(c->ctx)) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=reconnect reason=peer_closed server=%s", c->where);
        drop(c);
        c->next_attempt_ms = 0;
    }
    return sluice_conn_ensure(c);
}

int sluice_conn_read_reply(sluice_conn *c, redisReply **out) {
    void *r = NULL;
    *out = NULL;
    if (c->ctx == NULL) {
        return SLUICE_ECONN;
    }
    if (redisGetReply(c->ctx, &r) != REDIS_OK || r == NULL) {
        return fail(c, io_status(c->ctx), c->ctx->errstr);
    }
    *out = r;
    if ((*out)->type == REDIS_REPLY_ERROR) {
        snprintf(c->err, sizeof(c->err), "%s: %s", c->where, (*out)->str);
        return sluice_reply_error_status((*out)->str, (*out)->len);
    }
    return 0;
}

int sluice_conn_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                        redisReply **out, int *sent) {
    *out = NULL;
    int st = start(c, sent);
    if (st != 0) {
        return st;
    }
    if (redisAppendCommandArgv(c->ctx, argc, argv, lens) != REDIS_OK) {
        return fail(c, SLUICE_ENOMEM, "out of memory formatting a command");
    }
    if (sent != NULL) {
        *sent = 1;
    }
    return sluice_conn_read_reply(c, out);
}

/* Loads the EVALSHA script of `fn` unless its sha is known. */
static int ensure_sha(sluice_conn *c, sluice_fn fn) {
    if (c->sha[fn][0] != '\0') {
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
    int st = sluice_conn_command(c, 3, argv, lens, &r, NULL);
    free(text);
    if (st == 0 && (r->type != REDIS_REPLY_STRING || r->len != 40)) {
        st = SLUICE_EPROTO;
    }
    if (st == 0) {
        memcpy(c->sha[fn], r->str, 41);
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

int sluice_conn_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                             const size_t *keylens, int nargs, const char **args,
                             const size_t *arglens) {
    int st = start(c, NULL);
    if (st == 0 && c->mode == MODE_EVAL) {
        st = ensure_sha(c, fn);
    }
    if (st != 0) {
        return st;
    }
    int eval = c->mode == MODE_EVAL;
    sds cmd = NULL;
    st = sluice__format_fcall(eval ? "EVALSHA" : "FCALL", eval ? c->sha[fn] : sluice_fn_name(fn),
                              nkeys, keys, keylens, nargs, args, arglens, &cmd);
    if (st == 0 && redisAppendFormattedCommand(c->ctx, cmd, sdslen(cmd)) != REDIS_OK) {
        st = fail(c, SLUICE_ENOMEM, "out of memory queueing a command");
    }
    sdsfree(cmd);
    return st;
}

int sluice_conn_append_command(sluice_conn *c, int argc, const char **argv, const size_t *lens) {
    int st = start(c, NULL);
    if (st == 0 && redisAppendCommandArgv(c->ctx, argc, argv, lens) != REDIS_OK) {
        st = fail(c, SLUICE_ENOMEM, "out of memory queueing a command");
    }
    return st;
}

int sluice_conn_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
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
        st = sluice_conn_read_reply(c, out);
        if (st != SLUICE_ENOSCRIPT || attempt > 0) {
            return st;
        }
        /* The server lost the library (restart without persistence, FLUSH): it did not run
         * the call, so reload and send it once more. */
        SLUICE_LOG(SLUICE_LOG_WARN, "event=library_missing server=%s action=reload", c->where);
        freeReplyObject(*out);
        *out = NULL;
        memset(c->sha, 0, sizeof(c->sha));
        if (c->mode == MODE_FUNCTION) {
            if (c->o.no_load) {
                return SLUICE_ENOSCRIPT;
            }
            st = load_library(c);
            if (st != 0) {
                return st;
            }
        }
    }
}

int sluice_client_setup(const char *redis_url, int connect_timeout_ms, int command_timeout_ms,
                        int force_eval, const char *name, sluice_url *url, sluice_conn_options *co,
                        char *err, size_t errlen) {
    if (sluice_url_parse(url, redis_url ? redis_url : sluice_url_default(), err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    sluice_conn_options_init(co);
    co->connect_timeout_ms = connect_timeout_ms;
    co->command_timeout_ms = command_timeout_ms;
    co->force_eval = force_eval;
    co->name = name;
    return 0;
}
