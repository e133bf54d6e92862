/* SPDX-License-Identifier: MIT */
/*
 * uvredis_sentinel.c - the Sentinel router of the async connection (redis+sentinel://): the
 * hooks (uvredis_link.h) that keep the link on the primary the sentinels name.
 *
 * - pick: the sentinels are asked in turn, on the loop (a transport link each, uvredis_transport.h,
 *   TLS for rediss+sentinel://, bounded by connect_timeout_ms), SENTINEL GET-MASTER-ADDR-BY-NAME;
 * the first address named is where the link connects, and the sentinel that named it is asked first
 * next time. A round in which none names one fails the attempt like a refused connect (the backoff,
 * one redis_down line naming every sentinel and what it said). Every connect asks again.
 * - steps: ROLE in the handshake: a server that is not the primary is let go of, and the next
 *   attempt asks again, another sentinel first (one that has not heard of a failover yet may
 *   still name the old primary).
 * - reply: READONLY, -REDIRECT or a blocked call unblocked by a demotion (the server is no
 *   longer the primary): the call did not run; it is held on c->held (with the WAIT pipelined
 *   behind it), across failed attempts, and sent to the next primary when the link is ready
 *   (on the link's moved list), or fails at its deadline. The connection stops taking calls, lets
 * the link go once the calls sent on it are answered, and connects again at once.
 * - +switch-master: a pub/sub connection to one sentinel (the next when it breaks) hears each
 *   failover. The link to the old primary is let go of the same way, at once when nothing is
 *   pending on it, and the new primary is connected to without waiting for a backoff. The
 *   subscription is checked: a PING every SUB_PING_MS; one (or SUBSCRIBE) unanswered within
 *   SUB_DEADLINE_MS (a frozen sentinel: the socket stays up, nothing comes back) lets the link go
 *   and subscribes through the next sentinel, as a lost link does.
 * A lost link is a failure as on one server: the calls in flight on it fail (outcome unknown
 * when written), and the next attempt asks the sentinels again. The decisions on the
 * sentinels' answers are sentinel.c's, shared with the blocking router (conn_sentinel.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/sentinel.h"
#include "sluice/status.h"
#include "sluice/tls.h"

#include "conn_internal.h"
#include "uvredis_link.h"

/* The +switch-master connection, broken or refused, is opened again on the next sentinel after
 * this pause (ms); after a whole round of sentinels has failed, after SUB_PAUSE_MS. */
#define SUB_RETRY_MS 100
#define SUB_PAUSE_MS 1000
/* The subscription's liveness: a PING every SUB_PING_MS (in RESP2 subscribe mode answered
 * ["pong", ""], handed to the PING's request by the transport since it waits for a reply); no
 * answer to it, or to SUBSCRIBE, within SUB_DEADLINE_MS: the sentinel is taken for gone. */
#define SUB_PING_MS     2000
#define SUB_DEADLINE_MS 3000

/* Why a call held for the next primary failed at its deadline. */
#define HELD_LATE "the new primary was not ready in time"

typedef struct sluice__uvsentinel uvsent;

struct sluice__uvsentinel {
    sluice_aconn *c;
    int open;    /* our handles not closed yet (each one also in c->open_handles) */
    int closing; /* the connection closes */
    /* asking the sentinels */
    int asking;                   /* a round is under way */
    int k;                        /* sentinels asked in this round */
    int first;                    /* the sentinel asked first: the last one that answered */
    sluice__uvlink *ask;          /* the question under way, NULL between */
    uv_timer_t ask_timer;         /* bounds it */
    sluice__sentinel_round round; /* what each said */
    int tls_failed;               /* of them, how many failed the TLS handshake or its checks */
    /* the answer the next pick takes: an address (result 0) or a round's failure */
    int have, result;
    char host[256];
    int port;
    /* following a failover */
    int moving;    /* the link is let go of on purpose: the way to the new primary */
    int now;       /* connect at once, no backoff */
    char why[320]; /* why the link is let go of */
    /* the +switch-master subscription */
    sluice__uvlink *sub;
    uv_timer_t sub_timer; /* the pause before the next SUBSCRIBE; while subscribed, the check */
    int sub_next, sub_fails;
    int sub_waiting; /* SUBSCRIBE or the last PING unanswered */
};

/* ---------------------------------------------------------------------------------------- */
/* Handles and links of our own                                                            */

static void handle_closed(uvsent *s) {
    sluice_aconn *c = s->c;
    if (--s->open == 0) {
        free(s);
    }
    sluice__uv_handle_closed(c); /* may free c: last */
}

static void on_timer_closed(uv_handle_t *h) {
    handle_closed(h->data);
}

static void on_link_closed(sluice__uvlink *l) {
    handle_closed(l->owner);
}

static uvsent *sentinel_of(sluice_aconn *c) {
    if (c->sentinel != NULL) {
        return c->sentinel;
    }
    uvsent *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->c = c;
    uv_timer_init(c->loop, &s->ask_timer); /* cannot fail */
    uv_timer_init(c->loop, &s->sub_timer);
    s->ask_timer.data = s->sub_timer.data = s;
    s->open = 2;
    c->open_handles += 2;
    c->sentinel = s;
    return s;
}

/* Stops using a link whose hook we are in and which frees itself (a failed connect, a lost
 * link): whatever it still reports is ignored. */
static void detach(sluice__uvlink **lp) {
    if (*lp != NULL) {
        (*lp)->data = NULL;
        *lp = NULL;
    }
}

/* Lets go of a link and frees it (once the hook returns when inside one of its reply hooks):
 * its pending replies come back NULL, ignored. */
static void let_go(sluice__uvlink **lp) {
    sluice__uvlink *l = *lp;
    detach(lp);
    sluice__uvlink_free(l);
}

/* What a request on a link to a sentinel is: the privdata its reply comes back with. */
static char tag_auth, tag_addr, tag_sub, tag_ping;

static const sluice_url_seed *asked_seed(const uvsent *s);
static void ask_failed(uvsent *s, int res, const char *why);
static void sub_later(uvsent *s);
static void on_auth(uvsent *s, sluice__uvlink *l, redisReply *r);
static void on_addr(uvsent *s, redisReply *r);
static void on_sub_message(uvsent *s, redisReply *r);
static void sub_alive(uvsent *s);

/* The link broke or could not be made (status, reason in l->errstr): the question goes to the
 * next sentinel, the subscription waits and moves to the next. */
static void side_lost(uvsent *s, sluice__uvlink *l, int status, const char *otherwise) {
    const char *why = l->errstr[0] ? l->errstr : otherwise;
    if (l == s->ask) {
        char detail[sizeof(l->errstr) + 80];
        snprintf(detail, sizeof(detail), "%s", why);
        if (status == SLUICE_ETLS) {
            s->tls_failed++;
            const char *o = s->c->o.tls_server_name;
            sluice__tls_explain(detail, sizeof(detail), o != NULL ? o : asked_seed(s)->host);
        }
        detach(&s->ask);
        ask_failed(s, SLUICE_SENTINEL_DOWN, detail);
    } else if (l == s->sub) {
        detach(&s->sub);
        if (l->stage == SLUICE__UVLINK_UP) {
            char q[256];
            SLUICE_LOG(SLUICE_LOG_INFO, "event=sentinel_unsubscribed conn=%s detail=%s", s->c->name,
                       sluice_log_q(why, q, sizeof(q)));
        }
        sub_later(s);
    }
}

static void side_connected(sluice__uvlink *l, int status) {
    if (l->data != NULL && status != 0) { /* the link frees itself when this returns */
        side_lost(l->data, l, status, "could not connect");
    }
}

static void side_reply(sluice__uvlink *l, redisReply *r, void *privdata) {
    uvsent *s = l->data;
    if (s == NULL || r == NULL) {
        return; /* let go of; or broken, and `disconnected` follows */
    }
    if (privdata == &tag_auth) {
        on_auth(s, l, r);
    } else if (privdata == &tag_addr) {
        on_addr(s, r);
    } else if (privdata == &tag_sub) {
        on_sub_message(s, r);
    } else if (privdata == &tag_ping) {
        sub_alive(s);
        /* a message sent before the pong is handed to the PING (the pong then comes as a push,
         * ignored); an error (PING refused) is an answer all the same */
        if (r->type != REDIS_REPLY_ERROR) {
            on_sub_message(s, r);
        }
    }
}

static void side_push(sluice__uvlink *l, redisReply *r) {
    if (l->data != NULL && l == ((uvsent *)l->data)->sub) {
        on_sub_message(l->data, r);
    }
}

static void side_disconnected(sluice__uvlink *l) {
    if (l->data != NULL) {
        side_lost(l->data, l, SLUICE_ECONN, "connection closed");
    }
}

/* The links to the sentinels: a question, or the subscription (replies beyond the requests). */
static const sluice__uvlink_hooks side_hooks = {
    .connected = side_connected,
    .reply = side_reply,
    .disconnected = side_disconnected,
    .closed = on_link_closed,
    .push = side_push,
};

/* Queues a command on a link to a sentinel. 0, or -1 (out of memory; the link is let go of by
 * the caller). */
static int side_send(sluice__uvlink *l, int argc, const char **argv, char *tag) {
    sds cmd = NULL;
    if (redisFormatSdsCommandArgv(&cmd, argc, argv, NULL) < 0) {
        return -1;
    }
    int st = sluice__uvlink_append(l, cmd, sdslen(cmd), tag);
    sdsfree(cmd);
    return st;
}

/* A link to a sentinel (TLS for rediss+sentinel://, with the connection's TLS options) with
 * AUTH queued when the URL gives the sentinels credentials, then the command argv. NULL (the
 * reason in why) when it cannot even start. */
static sluice__uvlink *open_link(uvsent *s, const sluice_url_seed *seed, int argc,
                                 const char **argv, char *tag, char *why, size_t len) {
    sluice_aconn *c = s->c;
    sluice__uvlink_tls tls = {&c->o, &c->tls_ctx, NULL, c->where};
    int st = 0;
    sluice__uvlink *l =
        sluice__uvlink_open(c->loop, seed->host, seed->port, NULL, c->url.is_tls ? &tls : NULL,
                            &side_hooks, s, &st, why, len);
    if (l == NULL) {
        return NULL;
    }
    l->data = s;
    s->open++;
    c->open_handles++;
    sluice_url auth;
    sluice__sentinel_auth(&c->url, &auth);
    const char *auth_argv[3];
    int auth_argc = sluice__hs_auth_argv(&auth, auth_argv);
    int failed = auth_argc > 0 && side_send(l, auth_argc, auth_argv, &tag_auth) != 0;
    memset(auth.password, 0, sizeof(auth.password));
    if (failed || side_send(l, argc, argv, tag) != 0) {
        snprintf(why, len, "out of memory");
        let_go(&l);
        return NULL;
    }
    return l;
}

/* ---------------------------------------------------------------------------------------- */
/* Asking the sentinels                                                                     */

static void ask_next(uvsent *s);
static void sub_later(uvsent *s);

static const sluice_url_seed *asked_seed(const uvsent *s) {
    return &s->c->url.seeds[(s->first + s->k) % s->c->url.nseeds];
}

/* The sentinel asked did not name the primary (res, why): the next one is asked. */
static void ask_failed(uvsent *s, int res, const char *why) {
    sluice__sentinel_round_add(&s->round, asked_seed(s), res, why);
    uv_timer_stop(&s->ask_timer);
    s->k++;
    ask_next(s);
}

/* The round ends: the address (result 0) or the failure goes to the next pick, now. */
static void ask_done(uvsent *s, int result) {
    s->asking = 0;
    s->have = 1;
    s->result = result;
    uv_timer_stop(&s->ask_timer);
    sluice__uv_reconnect(s->c);
}

static void on_addr(uvsent *s, redisReply *r) {
    char why[200], host[sizeof(s->host)];
    int port = 0;
    int res = sluice__sentinel_addr_reply(r, host, sizeof(host), &port, why, sizeof(why));
    let_go(&s->ask);
    if (res != SLUICE_SENTINEL_FOUND) {
        ask_failed(s, res, why);
        return;
    }
    const sluice_url_seed *seed = asked_seed(s);
    sluice_aconn *c = s->c;
    SLUICE_LOG(SLUICE_LOG_INFO,
               "event=sentinel_master conn=%s queue=%s master=%s addr=%s:%d sentinel=%s:%d",
               c->name, c->queue, c->url.master_name, host, port, seed->host, seed->port);
    s->first = (s->first + s->k) % c->url.nseeds;
    snprintf(s->host, sizeof(s->host), "%s", host);
    s->port = port;
    ask_done(s, 0);
}

static void on_ask_timeout(uv_timer_t *t) {
    uvsent *s = t->data;
    char why[64];
    snprintf(why, sizeof(why), "no answer within %d ms", s->c->o.connect_timeout_ms);
    let_go(&s->ask);
    ask_failed(s, SLUICE_SENTINEL_DOWN, why);
}

/* Asks the next sentinel of the round, or ends the round when every one was asked. */
static void ask_next(uvsent *s) {
    sluice_aconn *c = s->c;
    const sluice_url *u = &c->url;
    while (s->k < u->nseeds) {
        char why[200];
        const char *q[] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", u->master_name};
        s->ask = open_link(s, asked_seed(s), 3, q, &tag_addr, why, sizeof(why));
        if (s->ask != NULL) {
            uv_timer_start(&s->ask_timer, on_ask_timeout, (uint64_t)c->o.connect_timeout_ms, 0);
            return;
        }
        sluice__sentinel_round_add(&s->round, asked_seed(s), SLUICE_SENTINEL_DOWN, why);
        s->k++;
    }
    sluice__sentinel_round_fail(&s->round, c->where, u->master_name, c->err, sizeof(c->err));
    /* every sentinel refused by the TLS checks: a configuration error (the worker stops on it,
     * as for a rediss:// server), not a sentinel down */
    ask_done(s, s->tls_failed == u->nseeds ? SLUICE_ETLS : SLUICE_ECONN);
}

static void ask_start(uvsent *s) {
    s->asking = 1;
    s->k = 0;
    s->tls_failed = 0;
    memset(&s->round, 0, sizeof(s->round));
    ask_next(s);
}

static void ask_stop(uvsent *s) {
    s->asking = 0;
    uv_timer_stop(&s->ask_timer);
    let_go(&s->ask);
}

/* AUTH refused by a sentinel: the question (or the subscription) goes to the next one. */
static void on_auth(uvsent *s, sluice__uvlink *l, redisReply *r) {
    if (r->type != REDIS_REPLY_ERROR) {
        return;
    }
    char why[200];
    snprintf(why, sizeof(why), "AUTH: %s", r->str);
    if (l == s->ask) {
        let_go(&s->ask);
        ask_failed(s, SLUICE_SENTINEL_REFUSED, why);
    } else if (l == s->sub) {
        char q[256];
        SLUICE_LOG(SLUICE_LOG_WARN, "event=sentinel_subscribe_failed conn=%s detail=%s", s->c->name,
                   sluice_log_q(why, q, sizeof(q)));
        let_go(&s->sub);
        sub_later(s);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Following a failover                                                                     */

/*
 * The server of the link is no longer the primary (s->why says why): no new call goes there;
 * the link goes at once when nothing is pending on it, else once the calls sent on it are
 * answered (sentinel_after), or at their deadline. lost() then reports it as the way to the
 * new primary, not as a failure, and the reconnect starts at once.
 */
static void move_away(uvsent *s) {
    sluice_aconn *c = s->c;
    if (c->link == NULL || c->closing) {
        return;
    }
    s->moving = 1;
    if (!c->ready || c->head == NULL) {
        sluice__uv_drop(c, SLUICE_ECONN, s->why);
        return;
    }
    c->ready = 0; /* new calls wait for the new primary */
}

/* +switch-master: the sentinels promoted another server. */
static void switch_master(uvsent *s, const char *msg, size_t len) {
    sluice_aconn *c = s->c;
    char host[sizeof(s->host)];
    int port = 0;
    if (c->closing || sluice__sentinel_switch_parse(msg, len, c->url.master_name, host,
                                                    sizeof(host), &port) != 1) {
        return;
    }
    SLUICE_LOG(SLUICE_LOG_INFO, "event=sentinel_switch_master conn=%s queue=%s master=%s to=%s:%d",
               c->name, c->queue, c->url.master_name, host, port);
    if (c->link != NULL && c->node_port == port && strcmp(c->node_host, host) == 0) {
        return; /* the link is there already */
    }
    snprintf(s->host, sizeof(s->host), "%s", host);
    s->port = port;
    s->have = 1;
    s->result = 0;
    if (s->asking) {
        ask_stop(s);
    }
    if (c->link == NULL) {
        sluice__uv_reconnect(c); /* a backoff or a round is cut short */
        return;
    }
    snprintf(s->why, sizeof(s->why), "the sentinels switched master '%.100s' to %.100s:%d",
             c->url.master_name, host, port);
    move_away(s);
}

static void sub_start(uvsent *s);

static void on_sub_timer(uv_timer_t *t) {
    sub_start(t->data);
}

/* While subscribed: a PING is due, or the deadline of the last one (or of SUBSCRIBE) passed. */
static void on_sub_check(uv_timer_t *t) {
    uvsent *s = t->data;
    if (s->sub == NULL || s->closing) {
        return;
    }
    const char *argv[] = {"PING"};
    if (s->sub_waiting || side_send(s->sub, 1, argv, &tag_ping) != 0) {
        const sluice_url_seed *seed = &s->c->url.seeds[s->sub_next];
        char why[64] = "out of memory", q[128];
        if (s->sub_waiting) {
            snprintf(why, sizeof(why), "no answer within %d ms", SUB_DEADLINE_MS);
        }
        SLUICE_LOG(SLUICE_LOG_WARN, "event=sentinel_unsubscribed conn=%s sentinel=%s:%d detail=%s",
                   s->c->name, seed->host, seed->port, sluice_log_q(why, q, sizeof(q)));
        let_go(&s->sub);
        sub_later(s);
        return;
    }
    s->sub_waiting = 1;
    uv_timer_start(&s->sub_timer, on_sub_check, SUB_DEADLINE_MS, 0);
}

/* The subscribed sentinel answered: the next PING in SUB_PING_MS. */
static void sub_alive(uvsent *s) {
    s->sub_waiting = 0;
    uv_timer_start(&s->sub_timer, on_sub_check, SUB_PING_MS, 0);
}

/* The subscription is lost: again on the next sentinel, after a pause. */
static void sub_later(uvsent *s) {
    int n = s->c->url.nseeds;
    if (s->closing) {
        return;
    }
    s->sub_next = (s->sub_next + 1) % n;
    s->sub_fails++;
    uv_timer_start(&s->sub_timer, on_sub_timer, s->sub_fails < n ? SUB_RETRY_MS : SUB_PAUSE_MS, 0);
    if (s->sub_fails >= n) {
        s->sub_fails = 0;
    }
}

static void on_sub_message(uvsent *s, redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR) { /* SUBSCRIBE refused (an ACL) */
        char q[256];
        SLUICE_LOG(SLUICE_LOG_WARN, "event=sentinel_subscribe_failed conn=%s detail=%s", s->c->name,
                   sluice_log_q(r->str, q, sizeof(q)));
        let_go(&s->sub);
        sub_later(s);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        return;
    }
    if (strcmp(r->element[0]->str, "subscribe") == 0) {
        const sluice_url_seed *seed = &s->c->url.seeds[s->sub_next];
        SLUICE_LOG(SLUICE_LOG_INFO,
                   "event=sentinel_subscribed conn=%s channel=+switch-master "
                   "sentinel=%s:%d",
                   s->c->name, seed->host, seed->port);
        s->sub_fails = 0;
        sub_alive(s);
    } else if (strcmp(r->element[0]->str, "message") == 0 &&
               r->element[2]->type == REDIS_REPLY_STRING) {
        switch_master(s, r->element[2]->str, r->element[2]->len);
    }
}

/* SUBSCRIBE +switch-master on the next sentinel (unless subscribed or waiting to). */
static void sub_start(uvsent *s) {
    if (s->closing || s->sub != NULL || uv_is_active((uv_handle_t *)&s->sub_timer)) {
        return;
    }
    char why[200];
    const char *argv[] = {"SUBSCRIBE", "+switch-master"};
    s->sub = open_link(s, &s->c->url.seeds[s->sub_next], 2, argv, &tag_sub, why, sizeof(why));
    if (s->sub == NULL) {
        sub_later(s);
        return;
    }
    s->sub_waiting = 1; /* SUBSCRIBE answered within the deadline, or the next sentinel */
    uv_timer_start(&s->sub_timer, on_sub_check, SUB_DEADLINE_MS, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* The hooks the link calls                                                                 */

/* The primary: the address the last round (or a +switch-master) gave, else a round starts and
 * the link waits for it (1). */
static int sentinel_pick(sluice_aconn *c) {
    uvsent *s = sentinel_of(c);
    if (s == NULL) {
        snprintf(c->err, sizeof(c->err), "%s: out of memory", c->where);
        return SLUICE_ENOMEM;
    }
    sub_start(s);
    if (s->have) {
        s->have = 0;
        if (s->result != 0) {
            c->node_host[0] = '\0'; /* no node was tried: the redis_down line names none */
            return s->result;       /* c->err names every sentinel and what it said */
        }
        snprintf(c->node_host, sizeof(c->node_host), "%s", s->host);
        c->node_port = s->port;
        return 0;
    }
    if (!s->asking) {
        ask_start(s);
    }
    return 1;
}

static void sentinel_plan(sluice_aconn *c, sluice__hs_config *cfg) {
    snprintf(c->hs_where, sizeof(c->hs_where), "master '%.100s' at %.150s:%d", c->url.master_name,
             c->node_host, c->node_port);
    cfg->mode_where = c->hs_where;
    cfg->kind = SLUICE_HS_SINGLE;
    cfg->route = 1;
}

/* ROLE: only the primary takes calls. */
static void step_role(sluice_aconn *c, redisReply *r, int fn) {
    (void)fn;
    uvsent *s = c->sentinel;
    if (r->type == REDIS_REPLY_ERROR) { /* an ACL refusing ROLE: asking again will not help */
        int st = sluice_reply_error_status(r->str, r->len);
        sluice__uv_fail_handshake(c, st == SLUICE_ENOPERM || st == SLUICE_EAUTH ? st : SLUICE_ECONN,
                                  "ROLE", r);
        return;
    }
    char addr[300];
    snprintf(addr, sizeof(addr), "%s:%d", c->node_host, c->node_port);
    if (sluice__sentinel_role_reply(r, c->where, addr, c->err, sizeof(c->err)) != 0) {
        char q[sizeof(c->err) + 64];
        SLUICE_LOG(SLUICE_LOG_INFO, "event=sentinel_not_primary conn=%s queue=%s detail=%s",
                   c->name, c->queue, sluice_log_q(c->err, q, sizeof(q)));
        s->first = (s->first + 1) % c->url.nseeds; /* another sentinel first */
        sluice__uv_drop(c, SLUICE_ECONN, NULL);
        return;
    }
    sluice__uv_step_done(c);
}

static int sentinel_steps(sluice_aconn *c) {
    const char *argv[] = {"ROLE"};
    return sluice__uv_send_step(c, 1, argv, NULL, step_role, -1);
}

/* The link goes once nothing sent on it waits for an answer (moving away from it). */
static void sentinel_after(sluice_aconn *c, sluice__uvlink *l) {
    uvsent *s = c->sentinel;
    if (s != NULL && s->moving && c->head == NULL && c->link == l && l->open && !c->closing) {
        sluice__uv_drop(c, SLUICE_ECONN, s->why);
    }
}

/* READONLY, -REDIRECT, UNBLOCKED by a demotion: the call did not run; it is held for the next
 * primary (within its deadline) and the connection moves away from this server. */
static int sentinel_reply(sluice_aconn *c, sluice__uvlink *l, request *q, redisReply *r) {
    uvsent *s = c->sentinel;
    int st = sluice_reply_error_status(r->str, r->len);
    if (!sluice__sentinel_not_primary(st, r) || s == NULL || c->closing || c->link != l ||
        q->deadline <= uv_now(c->loop)) {
        return 0; /* the caller hears it as it is */
    }
    SLUICE_LOG(SLUICE_LOG_INFO,
               "event=sentinel_not_primary conn=%s queue=%s node=%s:%d reply=%.60s", c->name,
               c->queue, c->node_host, c->node_port, r->str);
    sluice__uv_held_push(c, &c->held, &c->held_tail, q);
    sluice__uv_follow_mark(c, FOLLOW_MOVED);
    if (!s->moving) {
        snprintf(s->why, sizeof(s->why), "%.100s:%d is no longer the primary (%.60s)", c->node_host,
                 c->node_port, r->str);
        move_away(s);
    }
    sentinel_after(c, l);
    return 1;
}

/* A WAIT whose call was held for the next primary goes there behind it. */
static int sentinel_follow(sluice_aconn *c, sluice__uvlink *l, request *w, int kind) {
    (void)l;
    if (kind != FOLLOW_MOVED || c->sentinel == NULL || !c->sentinel->moving) {
        return -1;
    }
    sluice__uv_held_push(c, &c->held, &c->held_tail, w);
    return 0;
}

static int sentinel_lost(sluice_aconn *c) {
    uvsent *s = c->sentinel;
    if (s == NULL || !s->moving) {
        return 0;
    }
    s->moving = 0;
    s->now = 1;
    return 1;
}

static int sentinel_retry(sluice_aconn *c) {
    uvsent *s = c->sentinel;
    if (s != NULL && (s->now || s->have)) {
        s->now = 0;
        return 1;
    }
    return 0;
}

static void sentinel_node(sluice_aconn *c, char *buf, size_t len) {
    if (c->node_host[0] != '\0') {
        snprintf(buf, len, strchr(c->node_host, ':') != NULL ? " node=[%s]:%d" : " node=%s:%d",
                 c->node_host, c->node_port);
    }
}

/* The held calls go to the primary now, first and in their order: the link sends its moved
 * list as soon as this returns (none of this router's calls are on it otherwise). */
static void sentinel_ready(sluice_aconn *c) {
    if (c->held != NULL) {
        c->held_tail->next = c->moved;
        if (c->moved == NULL) {
            c->moved_tail = c->held_tail;
        }
        c->moved = c->held;
        c->held = c->held_tail = NULL;
    }
}

static int sentinel_before_resend(sluice_aconn *c) {
    (void)c;
    return 0;
}

static void sentinel_close(sluice_aconn *c, int status) {
    sluice__uv_held_fail(c, &c->held, &c->held_tail, status);
    uvsent *s = c->sentinel;
    if (s == NULL) {
        return;
    }
    s->closing = 1;
    ask_stop(s);
    let_go(&s->sub);
    uv_close((uv_handle_t *)&s->ask_timer, on_timer_closed);
    uv_close((uv_handle_t *)&s->sub_timer, on_timer_closed);
}

const sluice__uvroute_ops sluice__uvsentinel_route = {
    .pick = sentinel_pick,
    .plan = sentinel_plan,
    .steps = sentinel_steps,
    .reply = sentinel_reply,
    .follow = sentinel_follow,
    .after = sentinel_after,
    .lost = sentinel_lost,
    .retry = sentinel_retry,
    .node = sentinel_node,
    .ready = sentinel_ready,
    .before_resend = sentinel_before_resend,
    .close = sentinel_close,
    .redirect_event = "sentinel_failover",
    .held_late = HELD_LATE,
};
