/* SPDX-License-Identifier: MIT */
/*
 * handshake.h - the handshake plan: what a new connection to one server says before it takes
 * calls (AUTH, CLUSTER MYID, SELECT, the library probe FCALL sluice_version, FUNCTION LOAD,
 * and in EVALSHA mode SCRIPT LOAD), and what each answer means: the next command, the node's
 * mode (functions or EVALSHA scripts), and the final status with its error text.
 *
 * Owns: the order of the steps and every decision on their replies. Does not own: I/O. Like
 * hiredis's reply reader it never touches a socket; the blocking connection (conn_node.c) and
 * the async link (uvredis_link.c) feed it replies and send what it yields, so both say the same
 * things in the same order. Internal to sluice; one plan per connection attempt, one thread.
 *
 * Driving it:
 *     sluice__hs_start(&p, &cfg);
 *     for (;;) switch (sluice__hs_next(&p, &cmd)) {
 *         SLUICE_HS_SEND:  send cmd; (later) feed its reply with sluice__hs_feed
 *         SLUICE_HS_ROUTE: the router's own commands go here, in this place of the pipeline
 *         SLUICE_HS_WAIT:  feed a reply owed first
 *         SLUICE_HS_DONE:  ready, in mode p.mode     SLUICE_HS_FAILED: p.status, text in cfg.err
 *     }
 * A blocking driver sends and feeds one step at a time; an async one sends every step the plan
 * yields before it waits (AUTH, MYID, SELECT and the probe go out pipelined) and feeds the
 * replies as they come. After a failure the replies still owed are of no interest.
 */
#ifndef SLUICE_HANDSHAKE_H
#define SLUICE_HANDSHAKE_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "sluice/redis.h"
#include "sluice/url.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How a node runs the sluice functions. */
enum { SLUICE_HS_MODE_UNKNOWN = 0, SLUICE_HS_MODE_FUNCTION = 1, SLUICE_HS_MODE_EVAL = 2 };

/* What kind of server the connection expects: CLUSTER MYID checks it against the URL. */
typedef enum sluice__hs_kind {
    SLUICE_HS_SINGLE = 0, /* redis:// or unix://: a cluster node is refused */
    SLUICE_HS_SEED,       /* redis+cluster:// seed: a server without cluster mode is refused */
    SLUICE_HS_MEMBER,     /* a node a cluster named (its map, a redirection): not asked */
} sluice__hs_kind;

typedef struct sluice__hs_config {
    const sluice_url *url; /* user, password, db */
    sluice__hs_kind kind;
    int route;              /* 1: yield SLUICE_HS_ROUTE after SELECT, before the probe */
    int preload_scripts;    /* 1: in EVALSHA mode SCRIPT LOAD every function now (into sha) */
    int force_eval;         /* sluice_conn_options: EVALSHA mode without asking */
    int no_load;            /* sluice_conn_options: never load the library */
    const char *where;      /* the server in messages and log lines (redacted URL, node) */
    const char *mode_where; /* the server in the CLUSTER MYID refusal; NULL = where */
    char (*sha)[41];        /* SLUICE_FN_COUNT_ shas: cleared at start, filled by preloading */
    char *err;              /* receives the reason of a failure (or of a tolerated refusal) */
    size_t errlen;
} sluice__hs_config;

/* What the plan wants next. */
typedef enum sluice__hs_event {
    SLUICE_HS_SEND = 0, /* send the command it filled in */
    SLUICE_HS_ROUTE,    /* the router's commands go here (only with cfg.route) */
    SLUICE_HS_WAIT,     /* a reply is owed before anything else can be decided */
    SLUICE_HS_DONE,     /* the handshake is over: p.mode is set */
    SLUICE_HS_FAILED,   /* p.status (negative), the reason in cfg.err */
} sluice__hs_event;

/* The steps, as recorded for the replies owed (and for tests). */
typedef enum sluice__hs_step {
    SLUICE_HS_AUTH = 0,
    SLUICE_HS_MYID,
    SLUICE_HS_SELECT,
    SLUICE_HS_PROBE,
    SLUICE_HS_LOAD,
    SLUICE_HS_SCRIPT,
} sluice__hs_step;

/* One command to send: argv/lens borrowed from the plan until its next call. */
typedef struct sluice__hs_cmd {
    sluice__hs_step step;
    int argc;
    const char *argv[4];
    size_t lens[4];
} sluice__hs_cmd;

#define SLUICE_HS_OWED_MAX (SLUICE_FN_COUNT_ + 4)

typedef struct sluice__hs {
    sluice__hs_config cfg;
    int phase;  /* the next step to consider */
    int status; /* 0, or the failure */
    int mode;   /* SLUICE_HS_MODE_*, known once the probe (or force_eval) decided */
    int fn;     /* the next function to SCRIPT LOAD */
    struct {
        sluice__hs_step step;
        int fn;
    } owed[SLUICE_HS_OWED_MAX]; /* steps sent and not answered, in send order */
    int nowed, head;
    char db[16];
    char *script; /* the SCRIPT LOAD text last yielded, freed at the next call */
} sluice__hs;

/* Starts a plan (cfg copied; its pointers borrowed for the plan's life). */
void sluice__hs_start(sluice__hs *p, const sluice__hs_config *cfg);

/* The next thing to do (see the top). On SLUICE_HS_SEND, *cmd is the command; the plan counts
 * its reply as owed. */
sluice__hs_event sluice__hs_next(sluice__hs *p, sluice__hs_cmd *cmd);

/* The reply to the oldest step owed (borrowed). Returns 0, or the failure status (then every
 * later call of sluice__hs_next says SLUICE_HS_FAILED). */
int sluice__hs_feed(sluice__hs *p, const redisReply *r);

/* Frees what the plan holds (the last script text). The plan may be started again. */
void sluice__hs_free(sluice__hs *p);

/* The command words of AUTH for `url` (AUTH [user] password) into argv; returns argc, 0 when
 * the URL has no password. */
int sluice__hs_auth_argv(const sluice_url *url, const char *argv[3]);

/* The answer `r` to CLUSTER MYID, the question "is this a cluster node?", against the URL's
 * kind: a redis:// (or unix://) URL at a cluster node, or a redis+cluster:// URL at a server
 * without cluster mode, is SLUICE_ECLUSTER with the reason in err (naming `where`, the server).
 * Any other refusal (an ACL without CLUSTER, a server without the command) is 0: unknown. */
int sluice__mode_check(int is_cluster, const redisReply *r, const char *where, char *err,
                       size_t errlen);

/* The reply to FUNCTION LOAD, at the handshake or reloading after NOSCRIPT: 0 and the
 * library_loaded log line; "unknown command" (Redis < 7) sets *mode to EVALSHA and returns 0;
 * any other refusal is its status, with "WHERE: FUNCTION LOAD: ..." in err. */
int sluice__hs_load_reply(const redisReply *r, const char *where, int *mode, char *err,
                          size_t errlen);

/* The reply to SCRIPT LOAD of `fn`: its sha into `sha` (0), or SLUICE_EPROTO / the refusal's
 * status with "WHERE: SCRIPT LOAD name: ..." in err (the sha stays empty). */
int sluice__hs_script_reply(const redisReply *r, sluice_fn fn, const char *where, char sha[41],
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_HANDSHAKE_H */
