/* SPDX-License-Identifier: MIT */
/*
 * handshake.c - the handshake plan of a new connection (see sluice/handshake.h): the steps in
 * their order and what each reply decides. No I/O: the blocking connection and the async link
 * send what it yields and feed it the replies.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/lua.h"
#include "sluice/reply.h"
#include "sluice/status.h"

/* The phases, in order; each yields at most one kind of step. */
enum {
    P_AUTH = 0,
    P_MYID,
    P_SELECT,
    P_ROUTE,
    P_PROBE,
    P_PROBE_WAIT, /* the probe's answer decides what follows */
    P_LOAD,
    P_LOAD_WAIT,
    P_SCRIPTS,
    P_SCRIPTS_WAIT,
    P_DONE,
};

void sluice__hs_start(sluice__hs *p, const sluice__hs_config *cfg) {
    memset(p, 0, sizeof(*p));
    p->cfg = *cfg;
    if (p->cfg.mode_where == NULL) {
        p->cfg.mode_where = p->cfg.where;
    }
    if (p->cfg.sha != NULL) {
        memset(p->cfg.sha, 0, sizeof(*p->cfg.sha) * SLUICE_FN_COUNT_);
    }
}

void sluice__hs_free(sluice__hs *p) {
    free(p->script);
    p->script = NULL;
}

int sluice__hs_auth_argv(const sluice_url *url, const char *argv[3]) {
    if (url->password[0] == '\0') {
        return 0;
    }
    argv[0] = "AUTH";
    if (url->user[0] == '\0') {
        argv[1] = url->password;
        return 2;
    }
    argv[1] = url->user;
    argv[2] = url->password;
    return 3;
}

int sluice__mode_check(int is_cluster, const redisReply *r, const char *where, char *err,
                       size_t errlen) {
    if (r == NULL) {
        return 0;
    }
    if (!is_cluster && r->type == REDIS_REPLY_STRING) {
        snprintf(err, errlen, "%s: this server is a cluster node; use redis+cluster://", where);
        return SLUICE_ECLUSTER;
    }
    if (is_cluster && r->type == REDIS_REPLY_ERROR && r->str != NULL &&
        strstr(r->str, "cluster support disabled") != NULL) {
        snprintf(err, errlen,
                 "%s: not a cluster node (%s); a redis+cluster:// URL names nodes of a Redis "
                 "Cluster only, use redis:// for a single server",
                 where, r->str);
        return SLUICE_ECLUSTER;
    }
    return 0;
}

static int reply_status(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR ? sluice_reply_error_status(r->str, r->len) : 0;
}

int sluice__hs_load_reply(const redisReply *r, const char *where, int *mode, char *err,
                          size_t errlen) {
    int st = reply_status(r);
    if (st == 0) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=library_loaded server=%s", where);
        *mode = SLUICE_HS_MODE_FUNCTION;
        return 0;
    }
    snprintf(err, errlen, "%s: FUNCTION LOAD: %.*s", where, (int)r->len, r->str);
    if (sluice_reply_unknown_command(r)) {
        *mode = SLUICE_HS_MODE_EVAL; /* a server without functions (Redis < 7) */
        return 0;
    }
    return st;
}

int sluice__hs_script_reply(const redisReply *r, sluice_fn fn, const char *where, char sha[41],
                            char *err, size_t errlen) {
    if (r->type == REDIS_REPLY_STRING && r->len == 40) {
        memcpy(sha, r->str, 41);
        return 0;
    }
    snprintf(err, errlen, "%s: SCRIPT LOAD %s: %.*s", where, sluice_fn_name(fn), (int)r->len,
             r->str != NULL ? r->str : "unexpected reply");
    int st = reply_status(r);
    return st != 0 ? st : SLUICE_EPROTO;
}

static sluice__hs_event fail(sluice__hs *p, int status) {
    p->status = status;
    return SLUICE_HS_FAILED;
}

/* Fills cmd with step `s` and records its reply as owed. */
static sluice__hs_event yield(sluice__hs *p, sluice__hs_cmd *cmd, sluice__hs_step s, int argc,
                              const char *const *argv, const size_t *lens) {
    if (p->nowed == SLUICE_HS_OWED_MAX) {
        return fail(p, SLUICE_EPROTO); /* more steps in flight than any plan sends */
    }
    int at = (p->head + p->nowed++) % SLUICE_HS_OWED_MAX;
    p->owed[at].step = s;
    p->owed[at].fn = p->fn;
    cmd->step = s;
    cmd->argc = argc;
    for (int i = 0; i < argc; i++) {
        cmd->argv[i] = argv[i];
        cmd->lens[i] = lens != NULL ? lens[i] : strlen(argv[i]);
    }
    return SLUICE_HS_SEND;
}

/* The mode is known: what follows it. */
static void decided(sluice__hs *p, int mode) {
    p->mode = mode;
    p->phase = mode == SLUICE_HS_MODE_EVAL && p->cfg.preload_scripts ? P_SCRIPTS : P_DONE;
}

sluice__hs_event sluice__hs_next(sluice__hs *p, sluice__hs_cmd *cmd) {
    free(p->script);
    p->script = NULL;
    while (p->status == 0) {
        const sluice_url *u = p->cfg.url;
        switch (p->phase++) {
        case P_AUTH: {
            const char *argv[3];
            int argc = sluice__hs_auth_argv(u, argv);
            if (argc > 0) {
                return yield(p, cmd, SLUICE_HS_AUTH, argc, argv, NULL);
            }
            break;
        }
        case P_MYID:
            if (p->cfg.kind != SLUICE_HS_MEMBER) {
                return yield(p, cmd, SLUICE_HS_MYID, 2, (const char *[]){"CLUSTER", "MYID"}, NULL);
            }
            break;
        case P_SELECT:
            if (u->db != 0) {
                snprintf(p->db, sizeof(p->db), "%d", u->db);
                return yield(p, cmd, SLUICE_HS_SELECT, 2, (const char *[]){"SELECT", p->db}, NULL);
            }
            break;
        case P_ROUTE:
            if (p->cfg.route) {
                return SLUICE_HS_ROUTE;
            }
            break;
        case P_PROBE:
            if (p->cfg.force_eval) {
                decided(p, SLUICE_HS_MODE_EVAL);
                break;
            }
            return yield(p, cmd, SLUICE_HS_PROBE, 3,
                         (const char *[]){"FCALL", "sluice_version", "0"}, NULL);
        case P_PROBE_WAIT:
        case P_LOAD_WAIT:
            p->phase--; /* feed moves on */
            return SLUICE_HS_WAIT;
        case P_LOAD: {
            size_t len;
            const char *lib = sluice_lua_library(&len);
            const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", lib};
            const size_t lens[] = {8, 4, 7, len};
            return yield(p, cmd, SLUICE_HS_LOAD, 4, argv, lens);
        }
        case P_SCRIPTS:
            if (p->fn < SLUICE_FN_COUNT_) {
                size_t len;
                p->phase--;
                if ((p->script = sluice_lua_script((sluice_fn)p->fn, &len)) == NULL) {
                    snprintf(p->cfg.err, p->cfg.errlen, "%s: out of memory loading scripts",
                             p->cfg.where);
                    return fail(p, SLUICE_ENOMEM);
                }
                const char *argv[] = {"SCRIPT", "LOAD", p->script};
                const size_t lens[] = {6, 4, len};
                sluice__hs_event ev = yield(p, cmd, SLUICE_HS_SCRIPT, 3, argv, lens);
                p->fn++;
                return ev;
            }
            break;
        case P_SCRIPTS_WAIT:
            if (p->nowed > 0) {
                p->phase--;
                return SLUICE_HS_WAIT;
            }
            break;
        default:
            p->phase = P_DONE;
            return SLUICE_HS_DONE;
        }
    }
    return SLUICE_HS_FAILED;
}

/* The probe's answer (FCALL sluice_version 0), by the rule of sluice_lua_probe. */
static int fed_probe(sluice__hs *p, const redisReply *r) {
    int st = reply_status(r);
    sluice_lua_action act = sluice_lua_probe(st, r, p->cfg.no_load);
    if (act == SLUICE_LUA_FAIL) {
        snprintf(p->cfg.err, p->cfg.errlen, "%s: %.*s", p->cfg.where, (int)r->len, r->str);
        return st;
    }
    if (act == SLUICE_LUA_LOAD) {
        p->mode = SLUICE_HS_MODE_FUNCTION;
        p->phase = P_LOAD;
        return 0;
    }
    if (st != 0 && act == SLUICE_LUA_USE) {
        /* a restricted user may not call or load this; the calls themselves will say more */
        snprintf(p->cfg.err, p->cfg.errlen, "%s: %.*s", p->cfg.where, (int)r->len, r->str);
    }
    decided(p, act == SLUICE_LUA_EVAL ? SLUICE_HS_MODE_EVAL : SLUICE_HS_MODE_FUNCTION);
    return 0;
}

static int fed(sluice__hs *p, sluice__hs_step step, int fn, const redisReply *r) {
    int st = reply_status(r);
    switch (step) {
    case SLUICE_HS_AUTH:
        if (st != 0) {
            /* whatever AUTH objects to, the credentials did not work */
            snprintf(p->cfg.err, p->cfg.errlen, "%s: %.*s", p->cfg.where, (int)r->len, r->str);
            return st == SLUICE_EREDIS ? SLUICE_EAUTH : st;
        }
        return 0;
    case SLUICE_HS_MYID: /* a refusal (an ACL without CLUSTER) is no failure */
        return sluice__mode_check(p->cfg.kind == SLUICE_HS_SEED, r, p->cfg.mode_where, p->cfg.err,
                                  p->cfg.errlen);
    case SLUICE_HS_SELECT:
        if (st != 0) {
            snprintf(p->cfg.err, p->cfg.errlen, "%s: SELECT: %.*s", p->cfg.where, (int)r->len,
                     r->str);
        }
        return st;
    case SLUICE_HS_PROBE:
        return fed_probe(p, r);
    case SLUICE_HS_LOAD: {
        int mode = SLUICE_HS_MODE_FUNCTION;
        st = sluice__hs_load_reply(r, p->cfg.where, &mode, p->cfg.err, p->cfg.errlen);
        if (st == SLUICE_ENOPERM) {
            st = 0; /* a restricted user may only call functions */
        }
        if (st == 0) {
            decided(p, mode);
        }
        return st;
    }
    case SLUICE_HS_SCRIPT:
        /* a refusal of the user (NOPERM) or of the script leaves its sha empty; calls of it
         * then fail. A refusal of the connection (NOAUTH, LOADING, BUSY...) fails the
         * handshake, as the probe's would: with force_eval there is no probe before. */
        if (p->cfg.sha != NULL) {
            sluice__hs_script_reply(r, (sluice_fn)fn, p->cfg.where, p->cfg.sha[fn], p->cfg.err,
                                    p->cfg.errlen);
        } else if (st != 0) {
            snprintf(p->cfg.err, p->cfg.errlen, "%s: SCRIPT LOAD %s: %.*s", p->cfg.where,
                     sluice_fn_name((sluice_fn)fn), (int)r->len, r->str);
        }
        return st == SLUICE_ENOPERM || st == SLUICE_EREDIS ? 0 : st;
    }
    return SLUICE_EPROTO;
}

int sluice__hs_feed(sluice__hs *p, const redisReply *r) {
    if (p->status != 0) {
        return p->status;
    }
    if (p->nowed == 0 || r == NULL) {
        snprintf(p->cfg.err, p->cfg.errlen, "%s: a reply the handshake did not expect",
                 p->cfg.where);
        return p->status = SLUICE_EPROTO;
    }
    int at = p->head;
    p->head = (p->head + 1) % SLUICE_HS_OWED_MAX;
    p->nowed--;
    return p->status = fed(p, p->owed[at].step, p->owed[at].fn, r);
}
