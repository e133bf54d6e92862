/* SPDX-License-Identifier: MIT */
/*
 * conn_sentinel.c - the Sentinel router of the blocking connection (conn_router.h): the
 * primary of a redis+sentinel:// URL, found through its sentinels.
 *
 * The sentinels are asked in turn (each with the connect timeout, the sentinel credentials of
 * the URL) SENTINEL GET-MASTER-ADDR-BY-NAME; the one node (conn_node.c) is connected to the
 * address named and checked with ROLE: a replica, or an answer that is no address, means ask
 * again. A node that is not connected (a lost connection), a READONLY error or a -REDIRECT
 * makes the next call ask again; a call is sent again, within its deadline (the command
 * timeout), only when it certainly did not run: refused before it was written (the node
 * layer's `sent` = 0), or answered READONLY / -REDIRECT. A call whose reply was lost is never
 * sent again. Inside MULTI ... EXEC and for WAIT (which speaks of the writes made on this
 * connection) nothing is asked again or re-sent: a lost connection fails the call.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sluice/clock.h"
#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/sentinel.h"
#include "sluice/status.h"

#include "conn_router.h"

/* A pause between two rounds of asking, while a failover is under way (ms). */
#define ROUND_PAUSE_MS 200

struct sluice__sentinel {
    sluice_url data; /* the URL the node connects: the primary's address, the data db/auth */
    int known;       /* data names the primary the sentinels gave last, checked by ROLE */
    int checked;     /* ROLE said master on the node's connection number `connects` */
    unsigned connects;
    int first;     /* the sentinel to ask first: the last one that answered */
    int txn;       /* inside MULTI: no asking again, no sending again */
    char why[400]; /* why the last round found no primary */
};

sluice__sentinel *sluice__sentinel_new(sluice_conn *c) {
    sluice__sentinel *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->data = c->url;
    s->data.is_sentinel = 0;
    s->data.nseeds = 0;
    s->data.host[0] = '\0';
    c->env.url = &s->data;
    return s;
}

void sluice__sentinel_free(sluice__sentinel *s) {
    if (s != NULL) {
        memset(s->data.password, 0, sizeof(s->data.password));
        memset(s->data.sentinel_password, 0, sizeof(s->data.sentinel_password));
        free(s);
    }
}

/* snprintf for messages, which may be cut at the buffer's end. */
__attribute__((format(printf, 3, 4))) static void say(char *buf, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

static void set_sent(int *sent, int v) {
    if (sent != NULL) {
        *sent = v;
    }
}

static int left_ms(uint64_t deadline) {
    uint64_t now = sluice_now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Asks the sentinel `seed` for the primary's address (into s->data), over TLS for
 * rediss+sentinel:// (the connection's TLS options); the reason of a failure in why. */
static int ask_one(sluice_conn *c, const sluice_url_seed *seed, int timeout_ms, char *why,
                   size_t len) {
    sluice__probe p;
    if (sluice__probe_open(&p, &c->o, c->url.is_tls, seed->host, seed->port, timeout_ms, why,
                           len) != 0) {
        return SLUICE_SENTINEL_DOWN;
    }
    sluice_url auth;
    sluice__sentinel_auth(&c->url, &auth);
    const char *argv[3];
    int argc = sluice__hs_auth_argv(&auth, argv);
    int res = SLUICE_SENTINEL_REFUSED;
    redisReply *r = argc > 0 ? sluice__probe_command(&p, argc, argv, why, len) : NULL;
    memset(auth.password, 0, sizeof(auth.password));
    if (argc > 0 && (r == NULL || r->type == REDIS_REPLY_ERROR)) {
        if (r != NULL) {
            say(why, len, "AUTH: %s", r->str);
        }
        res = r != NULL ? SLUICE_SENTINEL_REFUSED : SLUICE_SENTINEL_DOWN;
        goto out;
    }
    freeReplyObject(r);
    const char *q[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", c->url.master_name};
    r = sluice__probe_command(&p, 3, q, why, len);
    if (r == NULL) {
        res = SLUICE_SENTINEL_DOWN;
    } else {
        res = sluice__sentinel_addr_reply(r, c->sn->data.host, sizeof(c->sn->data.host),
                                          &c->sn->data.port, why, len);
    }
out:
    freeReplyObject(r);
    sluice__probe_close(&p);
    return res;
}

/* Asks the sentinels in turn until one names the primary. Returns 0, or SLUICE_ECONN with a
 * message naming every sentinel and what it said. */
static int ask_sentinels(sluice_conn *c, uint64_t deadline) {
    sluice__sentinel *s = c->sn;
    const sluice_url *u = &c->url;
    sluice__sentinel_round rd = {0};
    for (int k = 0; k < u->nseeds; k++) {
        int i = (s->first + k) % u->nseeds;
        int t = left_ms(deadline);
        t = t < c->o.connect_timeout_ms ? t : c->o.connect_timeout_ms;
        char why[200] = "the deadline passed";
        int res = t > 0 ? ask_one(c, &u->seeds[i], t, why, sizeof(why)) : SLUICE_SENTINEL_DOWN;
        if (res == SLUICE_SENTINEL_FOUND) {
            s->first = i;
            SLUICE_LOG(SLUICE_LOG_INFO, "event=sentinel_master master=%s addr=%s:%d sentinel=%s:%d",
                       u->master_name, s->data.host, s->data.port, u->seeds[i].host,
                       u->seeds[i].port);
            return 0;
        }
        sluice__sentinel_round_add(&rd, &u->seeds[i], res, why);
    }
    int st = sluice__sentinel_round_fail(&rd, c->where, u->master_name, c->err, sizeof(c->err));
    say(s->why, sizeof(s->why), "%s", c->err);
    return st;
}

/* ROLE on the node just connected: 0 for a primary, 1 for anything else (reason in s->why), or
 * a status that asking again will not change (an ACL refusing ROLE). */
static int check_role(sluice_conn *c) {
    sluice__sentinel *s = c->sn;
    const char *argv[] = {"ROLE"};
    redisReply *r = NULL;
    int st = sluice__node_command(&c->one, 1, argv, NULL, &r, NULL);
    int other = 1;
    if (st == SLUICE_EAUTH || st == SLUICE_ENOPERM) {
        say(s->why, sizeof(s->why), "%s", c->err);
        freeReplyObject(r);
        return st;
    }
    if (st == 0) {
        char addr[300];
        say(addr, sizeof(addr), "%s:%d", s->data.host, s->data.port);
        other = sluice__sentinel_role_reply(r, c->where, addr, s->why, sizeof(s->why));
    } else {
        say(s->why, sizeof(s->why), "%s", c->err);
    }
    freeReplyObject(r);
    return other;
}

/* The address the sentinels gave did not lead to the primary: ask again, another sentinel
 * first (the one that answered may not have heard of the failover yet). */
static void forget(sluice_conn *c) {
    c->sn->known = 0;
    c->sn->first = (c->sn->first + 1) % c->url.nseeds;
}

static void pause_round(uint64_t deadline) {
    int d = left_ms(deadline);
    d = d < ROUND_PAUSE_MS ? d : ROUND_PAUSE_MS;
    if (d > 0) {
        struct timespec ts = {d / 1000, (long)(d % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* The node connected to a checked primary, asking the sentinels while it is not, until the
 * deadline. */
static int master_ready(sluice_conn *c, uint64_t deadline) {
    sluice__sentinel *s = c->sn;
    sluice__node *n = &c->one;
    for (int round = 0;; round++) {
        if (round > 0) {
            pause_round(deadline);
        }
        if (round > 0 && left_ms(deadline) == 0) {
            say(c->err, sizeof(c->err), "%s (the deadline, %d ms, passed)", s->why,
                c->o.command_timeout_ms);
            return SLUICE_ECONN;
        }
        if (!s->known || n->ctx == NULL) {
            char old[256];
            int old_port = s->data.port;
            snprintf(old, sizeof(old), "%s", s->data.host);
            int st = ask_sentinels(c, deadline);
            if (st != 0) {
                return st == SLUICE_ENOTFOUND ? SLUICE_ECONN : st;
            }
            s->known = 1;
            s->checked = 0; /* ROLE again, even on a connection still open (after READONLY in a
                             * pipeline, the same address may now be a replica) */
            if (strcmp(old, s->data.host) != 0 || old_port != s->data.port) {
                /* another server: its own backoff, its own library, its own TLS session */
                sluice__node_release(n);
                sluice__node_init(n, &c->env, s->data.host, s->data.port, "");
            }
            say(n->where, sizeof(n->where), "master '%.100s' at %.60s:%d (%.100s)",
                c->url.master_name, s->data.host, s->data.port, c->where);
        }
        int st = sluice__node_start(n);
        if (st == SLUICE_ECONN || st == SLUICE_ETIMEDOUT) {
            say(s->why, sizeof(s->why), "%s", c->err);
            forget(c);
            continue;
        }
        if (st != 0) {
            return st;
        }
        if (s->checked && n->connects == s->connects) {
            return 0; /* the connection ROLE checked */
        }
        if ((st = check_role(c)) == 0) {
            s->checked = 1;
            s->connects = n->connects;
            return 0;
        }
        sluice__node_drop(n);
        forget(c);
        if (st < 0) {
            say(c->err, sizeof(c->err), "%s", s->why);
            return st;
        }
    }
}

int sluice__sentinel_ensure(sluice_conn *c) {
    return master_ready(c, sluice_now_ms() + (uint64_t)c->o.command_timeout_ms);
}

static int is_verb(int argc, const char **argv, const size_t *lens, const char *verb) {
    size_t len = strlen(verb);
    return argc > 0 && (lens != NULL ? lens[0] : strlen(argv[0])) == len &&
           strncasecmp(argv[0], verb, len) == 0;
}

/* On the connection as it is: no asking, no reconnecting (inside MULTI, WAIT). */
static int pinned(sluice_conn *c, const sluice__req *q, redisReply **out, int *sent) {
    sluice__node *n = &c->one;
    if (n->ctx == NULL) {
        say(c->err, sizeof(c->err), "%s: the connection was lost before this call", n->where);
        return SLUICE_ECONN;
    }
    int st = sluice__req_append(n, q);
    if (st != 0) {
        return st;
    }
    set_sent(sent, 1);
    return sluice__node_read(n, out);
}

static int call(sluice_conn *c, const sluice__req *q, redisReply **out, int *sent) {
    sluice__sentinel *s = c->sn;
    sluice__node *n = &c->one;
    uint64_t deadline = sluice_now_ms() + (uint64_t)c->o.command_timeout_ms;
    *out = NULL;
    set_sent(sent, 0);
    int st = 0, reloaded = 0;
    for (int attempt = 0;; attempt++) {
        if (attempt > 0 && left_ms(deadline) == 0) {
            return st; /* it did not run; c->err says why */
        }
        if ((st = master_ready(c, deadline)) != 0) {
            return st;
        }
        if ((st = sluice__req_append(n, q)) != 0) {
            if (n->ctx == NULL) {
                s->known = 0;
                continue; /* lost before anything was written */
            }
            return st;
        }
        set_sent(sent, 1);
        st = sluice__node_read(n, out);
        if (st == 0 || *out == NULL) {
            return st; /* the answer, or a lost reply: the call may have run */
        }
        if (sluice__sentinel_not_primary(st, *out)) {
            SLUICE_LOG(SLUICE_LOG_INFO, "event=sentinel_not_primary server=%s reply=%.60s",
                       n->where, (*out)->str);
            say(s->why, sizeof(s->why), "%s: %.100s", n->where, (*out)->str);
            sluice__node_drop(n);
            s->known = 0;
        } else if (st == SLUICE_ENOSCRIPT && q->argv == NULL && !reloaded) {
            reloaded = 1; /* the server lost the library: it did not run the call */
            if (sluice__node_reload(n) != 0) {
                return st;
            }
        } else {
            return st;
        }
        if (left_ms(deadline) == 0) {
            return st; /* the reply (READONLY, REDIRECT) stays with the caller */
        }
        freeReplyObject(*out);
        *out = NULL;
        set_sent(sent, 0);
    }
}

int sluice__sentinel_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                             redisReply **out, int *sent) {
    sluice__req q = {.argc = argc, .argv = argv, .lens = lens};
    sluice__sentinel *s = c->sn;
    int st;
    if (s->txn || is_verb(argc, argv, lens, "WAIT")) {
        *out = NULL;
        set_sent(sent, 0);
        st = pinned(c, &q, out, sent);
    } else {
        st = call(c, &q, out, sent);
    }
    if (is_verb(argc, argv, lens, "MULTI")) {
        s->txn = st == 0;
    } else if (is_verb(argc, argv, lens, "EXEC") || is_verb(argc, argv, lens, "DISCARD")) {
        s->txn = 0;
    }
    if (c->one.ctx == NULL) {
        s->txn = 0; /* the server dropped the transaction with the connection */
    }
    return st;
}

int sluice__sentinel_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                           const size_t *keylens, int nargs, const char **args,
                           const size_t *arglens, redisReply **out, int *sent) {
    sluice__req q = sluice__req_fcall(fn, nkeys, keys, keylens, nargs, args, arglens);
    if (c->sn->txn) {
        *out = NULL;
        set_sent(sent, 0);
        return pinned(c, &q, out, sent);
    }
    return call(c, &q, out, sent);
}

/* A pipeline: on the checked primary; a reply saying it is no longer one (or a lost
 * connection) makes the next call ask again. */
int sluice__sentinel_append_command(sluice_conn *c, int argc, const char **argv,
                                    const size_t *lens) {
    int st = c->sn->txn ? (c->one.ctx != NULL ? 0 : SLUICE_ECONN) : sluice__sentinel_ensure(c);
    return st != 0 ? st : sluice__node_append_command(&c->one, argc, argv, lens);
}

int sluice__sentinel_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                                  const size_t *keylens, int nargs, const char **args,
                                  const size_t *arglens) {
    int st = c->sn->txn ? (c->one.ctx != NULL ? 0 : SLUICE_ECONN) : sluice__sentinel_ensure(c);
    return st != 0
               ? st
               : sluice__node_append_fcall(&c->one, fn, nkeys, keys, keylens, nargs, args, arglens);
}

int sluice__sentinel_read_reply(sluice_conn *c, redisReply **out) {
    int st = sluice__node_read(&c->one, out);
    if (c->one.ctx == NULL || sluice__sentinel_not_primary(st, *out)) {
        c->sn->known = 0;
    }
    return st;
}
