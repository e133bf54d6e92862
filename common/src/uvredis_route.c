/* SPDX-License-Identifier: MIT */
/*
 * uvredis_route.c - the routing of an async connection over a Redis Cluster (redis+cluster://):
 * the router whose hooks (uvredis_link.h) the link calls.
 *
 * Every command of a cluster connection is for one queue, so one slot, so one node - the owner
 * of the queue's slot, found by asking a seed (or a node learnt since) and following its MOVED.
 * A MOVED later (the slot moved, a replica was promoted) holds the call and reconnects to the
 * node it names; an ASK sends it on to the node it names, on an ask link (a connection of the
 * same kind, pinned to that node); a TRYAGAIN sends it again after a pause (the again list);
 * CLUSTERDOWN fails it as busy (transient); a MOVED for another slot (a key outside the queue's
 * slot) fails it as invalid, the connection staying where it is. A WAIT pipelined behind a call
 * that is sent again goes where the call went. The link (uvredis_link.c) does the I/O and never
 * calls in here but through the hooks installed by sluice_aconn_new.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/cluster.h"
#include "sluice/keys.h"
#include "sluice/log.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/status.h"

#include "conn_internal.h"
#include "uvredis_link.h"

/* A node of the cluster answered (MOVED, CLUSTERDOWN, TRYAGAIN): the attempt count goes back to
 * at most this, so the next wait is the backoff's third step (200-400 ms with the default
 * backoff_min_ms) and the end of a failover is seen within about that, while a cluster no node
 * of which answers still backs off fully. */
#define CLUSTER_ANSWERED_ATTEMPT 2

/* A call answered TRYAGAIN is sent again after a pause of 10 ms doubling up to this (with
 * jitter), as the blocking cluster client does, while its deadline leaves room for one. */
#define AGAIN_PAUSE_MAX_MS 200

static const sluice__uvroute_ops cluster;

static int send_map_query(sluice_aconn *c, int slots);
static void on_again(uv_timer_t *t);
static int ask_send(sluice_aconn *a, request *q);

/* The slot of the queue the connection serves. */
static int queue_slot(const sluice_aconn *c) {
    sluice_keys k; /* every key of the queue is in its slot */
    sluice__keys_fill(&k, c->queue);
    return sluice__cluster_key_slot(k.prefix, strlen(k.prefix));
}

/* ---------------------------------------------------------------------------------------- */
/* The nodes to find the slot's owner through                                               */

static int known_has(const sluice_aconn *c, const char *host, int port) {
    for (int i = 0; i < c->nknown; i++) {
        if (c->known[i].port == port && strcmp(c->known[i].host, host) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Remembers host:port as a node to ask (when not known yet and there is room). */
static void known_add(sluice_aconn *c, const char *host, int port) {
    if (!known_has(c, host, port) && c->nknown < KNOWN_MAX &&
        strlen(host) < sizeof(c->known[0].host)) {
        snprintf(c->known[c->nknown].host, sizeof(c->known[0].host), "%s", host);
        c->known[c->nknown++].port = port;
    }
}

/* The node to connect to next, none being named: the known nodes and then the URL's seeds not
 * among them, in turn, so one that answers names the slot's owner even when the seeds are
 * gone. */
static void next_node(sluice_aconn *c) {
    int n = c->nknown + c->url.nseeds;
    for (int tries = 0; tries < n; tries++) {
        int i = c->next_seed++ % n;
        if (c->next_seed >= n) {
            c->next_seed = 0;
        }
        const char *host = i < c->nknown ? c->known[i].host : c->url.seeds[i - c->nknown].host;
        int port = i < c->nknown ? c->known[i].port : c->url.seeds[i - c->nknown].port;
        if ((i >= c->nknown && known_has(c, host, port)) ||
            (tries + 1 < n && port == c->failed.port && strcmp(host, c->failed.host) == 0)) {
            continue; /* asked as a known node already; or it just failed */
        }
        snprintf(c->node_host, sizeof(c->node_host), "%s", host);
        c->node_port = port;
        return;
    }
    /* every other candidate was a duplicate: the one that failed, again */
    snprintf(c->node_host, sizeof(c->node_host), "%s",
             c->failed.port != 0 ? c->failed.host : c->url.seeds[0].host);
    c->node_port = c->failed.port != 0 ? c->failed.port : c->url.seeds[0].port;
}

/* CLUSTER SHARDS (fn 0; CLUSTER SLOTS, fn 1, before Redis 7): the primaries it names replace
 * the known nodes. Not being allowed to ask (an ACL) only leaves the seeds to fall back on. */
static void step_map(sluice_aconn *c, redisReply *r, int fn) {
    if (fn == 0 && r->type == REDIS_REPLY_ERROR && send_map_query(c, 1) == 0) {
        sluice__uv_step_done(c);
        return;
    }
    sluice_cluster_map *m = malloc(sizeof(*m));
    char why[256] = "out of memory";
    int st = SLUICE_ENOMEM;
    if (m != NULL) {
        st = fn == 0 ? sluice__cluster_parse_shards(r, c->node_host, m, why, sizeof(why))
                     : sluice__cluster_parse_slots(r, c->node_host, m, why, sizeof(why));
    }
    if (st == 0) {
        c->nknown = 0;
        for (int i = 0; i < m->nnodes; i++) {
            known_add(c, m->nodes[i].host, m->nodes[i].port);
        }
    } else {
        char q[300];
        SLUICE_LOG(SLUICE_LOG_INFO, "event=cluster_nodes_unknown conn=%s queue=%s detail=%s",
                   c->name, c->queue,
                   sluice_log_q(r->type == REDIS_REPLY_ERROR ? r->str : why, q, sizeof(q)));
    }
    free(m);
    sluice__uv_step_done(c);
}

static int send_map_query(sluice_aconn *c, int slots) {
    const char *argv[] = {"CLUSTER", slots ? "SLOTS" : "SHARDS"};
    return sluice__uv_send_step(c, 2, argv, NULL, step_map, slots);
}

/* Redirects to the node a MOVED names (once the link is let go, reconnects there at once).
 * Returns 1 when r was a MOVED. */
static int follow_moved(sluice_aconn *c, const redisReply *r) {
    sluice_cluster_redirect rd;
    if (r->type != REDIS_REPLY_ERROR ||
        sluice__cluster_redirect_parse(r->str, r->len, &rd) != SLUICE_REDIRECT_MOVED) {
        return 0;
    }
    if (rd.addr.host[0] != '\0') {
        snprintf(c->node_host, sizeof(c->node_host), "%s", rd.addr.host);
    }
    c->node_port = rd.addr.port;
    known_add(c, c->node_host, c->node_port);
    c->redirected = 1;
    c->redirects++;
    SLUICE_LOG(SLUICE_LOG_INFO, "event=cluster_moved conn=%s queue=%s slot=%d node=%s:%d", c->name,
               c->queue, rd.slot, c->node_host, c->node_port);
    return 1;
}

/* Cluster: EXISTS on the queue's meta, the question "do you own the slot?". A MOVED names the
 * owner: reconnect there. An ASK (the slot is migrating away) still lets this node serve it. */
static void step_route(sluice_aconn *c, redisReply *r, int fn) {
    (void)fn;
    sluice_cluster_redirect rd;
    if (r->type == REDIS_REPLY_ERROR && c->attempt > CLUSTER_ANSWERED_ATTEMPT &&
        sluice__cluster_redirect_parse(r->str, r->len, &rd) != SLUICE_REDIRECT_NONE) {
        c->attempt = CLUSTER_ANSWERED_ATTEMPT; /* the cluster is there, changing: look again soon */
    }
    if (follow_moved(c, r)) {
        sluice__uv_fail_handshake(c, SLUICE_ECONN, "the queue's slot is served by another node", r);
        return;
    }
    int st = r->type == REDIS_REPLY_ERROR ? sluice_reply_error_status(r->str, r->len) : 0;
    if (st != 0 && !(r->type == REDIS_REPLY_ERROR &&
                     sluice__cluster_redirect_parse(r->str, r->len, &rd) == SLUICE_REDIRECT_ASK)) {
        sluice__uv_fail_handshake(c, st, "EXISTS (cluster routing)", r);
        return;
    }
    sluice__uv_step_done(c);
}

/* The router's steps, in the plan's place for them: is this node the owner of the queue's slot
 * (EXISTS on its meta), and the nodes to come back through (the map). */
static int route_steps(sluice_aconn *c) {
    sluice_keys k;
    sluice__keys_fill(&k, c->queue);
    const char *argv[] = {"EXISTS", k.meta};
    int st = sluice__uv_send_step(c, 2, argv, NULL, step_route, -1);
    return st | send_map_query(c, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* ASK: the ask link                                                                        */

static void step_asking(sluice_aconn *c, redisReply *r, int fn) {
    (void)c, (void)r, (void)fn; /* an error shows in the reply to the command behind it */
}

/* ASKING, the one-command permission an importing node needs, in front of a call. */
static int send_asking(sluice_aconn *c) {
    const char *argv[] = {"ASKING"};
    return sluice__uv_send_step(c, 1, argv, NULL, step_asking, -1);
}

static void on_ask_closed(void *arg) {
    sluice_aconn *c = arg;
    sluice__uv_handle_closed(c);
}

/* Answers the calls held for the ask link with `status` (they did not run). */
static void ask_fail_held(sluice_aconn *c, int status) {
    sluice__uv_held_fail(c, &c->held, &c->held_tail, status);
}

/* 1 while a caller's call sent on `a` waits for its reply. */
static int has_calls(const sluice_aconn *a) {
    for (const request *q = a->head; q != NULL; q = q->next) {
        if (q->cb != NULL) {
            return 1;
        }
    }
    return 0;
}

/* Closes a retired ask link once no call sent on it waits for a reply. */
static void retired_maybe_close(sluice_aconn *a) {
    if (!a->retiring || a->closing || has_calls(a)) {
        return;
    }
    sluice_aconn *c = a->parent;
    for (sluice_aconn **p = &c->retired; *p != NULL; p = &(*p)->retired_next) {
        if (*p == a) {
            *p = a->retired_next;
            break;
        }
    }
    sluice_aconn_close(a, on_ask_closed, c);
}

/*
 * Lets go of the ask link: no call goes there any more, the calls held for it go to the slot's
 * new owner with the MOVED-held ones (to_moved: the migration is over) or are answered busy
 * (they did not run), and those already sent on it get their replies - they may well have run
 * there, so cancelling them would be a lie - before it closes (retired_maybe_close).
 */
static void ask_retire(sluice_aconn *c, int to_moved) {
    sluice_aconn *a = c->ask;
    if (a != NULL) {
        c->ask = NULL;
        a->retiring = 1;
        a->retired_next = c->retired;
        c->retired = a;
        retired_maybe_close(a);
    }
    if (!to_moved) {
        ask_fail_held(c, SLUICE_EBUSY);
        return;
    }
    if (c->held != NULL) { /* after the MOVED-held ones; their deadlines are armed already */
        if (c->moved_tail != NULL) {
            c->moved_tail->next = c->held;
        } else {
            c->moved = c->held;
        }
        c->moved_tail = c->held_tail;
        c->held = c->held_tail = NULL;
    }
}

/* Closes the ask links (the connection closes): the calls held for them get `status`, those
 * in flight on them ECANCELED (they may have run). */
static void ask_close(sluice_aconn *c, int status) {
    sluice_aconn *a = c->ask;
    if (a != NULL) {
        c->ask = NULL;
        sluice_aconn_close(a, on_ask_closed, c);
    }
    while (c->retired != NULL) {
        a = c->retired;
        c->retired = a->retired_next;
        sluice_aconn_close(a, on_ask_closed, c);
    }
    ask_fail_held(c, status);
}

/* Sends q on the ask link, after ASKING. 0, or -1 (not sent). */
static int ask_send(sluice_aconn *a, request *q) {
    if (a->link == NULL || a->closing || send_asking(a) != 0) {
        return -1; /* (a callback of an earlier call may have closed it) */
    }
    q->conn = a;
    q->resent = 0;
    if (sluice__uv_append(a, a->link, q, q->cmd, sdslen(q->cmd)) != 0) {
        q->conn = q->caller;
        return -1;
    }
    return 0;
}

/* The ask link is ready (the held calls go now) or failed (they are answered busy). */
static void on_ask_state(sluice_aconn *a, int ready, int status, void *arg) {
    (void)status;
    sluice_aconn *c = arg;
    if (c->ask != a) {
        return; /* retired: the calls held now are another link's */
    }
    if (!ready) {
        ask_fail_held(c, SLUICE_EBUSY);
        return;
    }
    request *q = c->held;
    c->held = c->held_tail = NULL;
    while (q != NULL) {
        request *next = q->next;
        q->next = NULL;
        if (ask_send(a, q) != 0) {
            sluice__uv_complete(c, q, SLUICE_EBUSY, 0, NULL);
        }
        q = next;
    }
}

/* The ask link to the node `rd` names, opened now when there is none to it (it connects on the
 * next loop iteration, within the call's deadline). NULL when out of memory. */
static sluice_aconn *ask_link(sluice_aconn *c, const sluice_cluster_redirect *rd,
                              uint64_t deadline) {
    const char *host = rd->addr.host[0] != '\0' ? rd->addr.host : c->node_host;
    if (c->ask != NULL &&
        (strcmp(c->ask->node_host, host) != 0 || c->ask->node_port != rd->addr.port)) {
        ask_retire(c, 0); /* the keys went somewhere else */
    }
    if (c->ask == NULL) {
        sluice_aconn *a = sluice__uv_new(c->loop, &c->url, &c->o, on_ask_state, c, &cluster);
        if (a == NULL) {
            return NULL;
        }
        uint64_t now = uv_now(c->loop);
        uint64_t left = deadline > now ? deadline - now : 1;
        if (left < (uint64_t)a->o.connect_timeout_ms) {
            a->o.connect_timeout_ms = (int)left; /* the held calls wait no longer than that */
        }
        a->parent = c;
        snprintf(a->node_host, sizeof(a->node_host), "%s", host);
        a->node_port = rd->addr.port;
        snprintf(a->name, sizeof(a->name), "%.27s-ask", c->name);
        c->ask = a;
        c->open_handles++; /* this connection is freed only after its ask link */
        SLUICE_LOG(SLUICE_LOG_INFO, "event=cluster_ask conn=%s queue=%s slot=%d node=%s:%d",
                   c->name, c->queue, rd->slot, host, rd->addr.port);
    }
    return c->ask;
}

/*
 * A caller's call answered ASK: sends it once more, after ASKING, on the ask link - or holds it
 * until the link is ready. Returns 0 when taken (it completes there), -1 when not: it was
 * already sent on once, or this is an ask link itself; the caller then hears EBUSY (not run).
 */
static int ask_forward(sluice_aconn *c, request *q, const sluice_cluster_redirect *rd) {
    if (c->parent != NULL || c->closing || q->conn != q->caller || q->asked) {
        return -1;
    }
    sluice_aconn *a = ask_link(c, rd, q->deadline);
    if (a == NULL) {
        return -1;
    }
    q->asked = 1;
    if (sluice_aconn_ready(a) && a->link != NULL) {
        return ask_send(a, q);
    }
    sluice__uv_held_push(c, &c->held, &c->held_tail, q);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* TRYAGAIN: the again list                                                                 */

/* Sets the again timer for the earliest call due (a call waits for its WAIT's answer, which
 * comes right after its own, or for its deadline). */
static void again_arm(sluice_aconn *c) {
    if (c->closing || c->again == NULL) {
        return;
    }
    uint64_t now = uv_now(c->loop), next = 0;
    for (request *q = c->again; q != NULL; q = q->next) {
        uint64_t at = q->trail != NULL && q->trail->follow == FOLLOW_AGAIN
                          ? (q->deadline < now + 10 ? q->deadline : now + 10)
                          : q->due;
        if (next == 0 || at < next) {
            next = at;
        }
    }
    uv_timer_start(&c->again_timer, on_again, next > now ? next - now : 0, 0);
}

/* The call gives up on a migration (TRYAGAIN until its deadline, an ASK not followed) after
 * `tries` sends: the errstr names the slot, the tries, the time and the last answer, from `at`
 * when known; the caller hears SLUICE_EMIGRATING (not run). */
static void again_gave_up(sluice_aconn *at, request *q, int tries, const char *answer) {
    sluice_aconn *c = q->caller;
    char node[300] = "";
    if (at != NULL) {
        snprintf(node, sizeof(node),
                 strchr(at->node_host, ':') != NULL ? " by [%s]:%d" : " by %s:%d", at->node_host,
                 at->node_port);
    }
    snprintf(c->err, sizeof(c->err),
             "%s: slot %d (the queue's) is being migrated between nodes; the call did not run "
             "(%d tries in %llu ms, the last answered%s with %s)",
             c->where, queue_slot(c), tries, (unsigned long long)(uv_now(c->loop) - q->born), node,
             answer);
    request *w = q->trail != NULL && q->trail->follow == FOLLOW_NONE ? q->trail : NULL;
    sluice__uv_complete(c, q, SLUICE_EMIGRATING, 0, NULL);
    if (w != NULL) { /* its answer was about other writes */
        sluice__uv_complete(c, w, SLUICE_EBUSY, 0, NULL);
    }
}

/* A caller's call answered TRYAGAIN (by its connection or an ask link): put on the again list
 * of its caller. 0, or -1 when its deadline leaves no room for a pause and a try. */
static int again_hold(sluice_aconn *at, request *q) {
    sluice_aconn *c = q->caller;
    if (c->closing || at->closing) {
        return -1;
    }
    sluice_conn_options o = c->o;
    o.backoff_min_ms = 10;
    o.backoff_max_ms = AGAIN_PAUSE_MAX_MS;
    uint64_t now = uv_now(c->loop);
    uint64_t pause = (uint64_t)sluice__backoff_ms(&o, q->tries + 1, &c->seed);
    if (now + pause + 1 >= q->deadline) {
        return -1;
    }
    q->tries++;
    q->due = now + pause;
    q->conn = c;
    q->asked = 0; /* an ASK after TRYAGAIN is followed again: the keys are moving */
    sluice__uv_held_push(c, &c->again, &c->again_tail, q);
    again_arm(c);
    return 0;
}

/* Sends q (and the WAIT going with it) again to the slot's owner, or holds them for it while
 * the connection is not ready (a MOVED being followed, a reconnect), in their order. */
static void again_send(sluice_aconn *c, request *q) {
    request *w = q->trail;
    if (w != NULL) {
        q->trail = w->lead = NULL;
    }
    request *both[] = {q, w};
    for (int i = 0; i < 2 && both[i] != NULL; i++) {
        request *r = both[i];
        r->conn = c;
        if (c->closing) {
            sluice__uv_complete(c, r, SLUICE_ECANCELED, 0, NULL);
        } else if (r->deadline <= uv_now(c->loop)) { /* a WAIT whose own deadline passed */
            sluice__uv_complete(c, r, SLUICE_ETIMEDOUT, 0, NULL);
        } else if (!c->ready || c->link == NULL) {
            sluice__uv_held_push(c, &c->moved, &c->moved_tail, r);
        } else if (sluice__uv_append(c, c->link, r, r->cmd, sdslen(r->cmd)) != 0) {
            sluice__uv_complete(c, r, SLUICE_ECONN, 0, NULL);
        }
    }
}

/* The again timer: the calls due go again; one whose deadline passed (waiting for its WAIT's
 * answer) gives up. */
static void on_again(uv_timer_t *t) {
    sluice_aconn *c = t->data;
    uint64_t now = uv_now(c->loop);
    request *go = NULL, *go_tail = NULL, *q = c->again;
    c->again = c->again_tail = NULL;
    while (q != NULL) { /* split first: a callback below may submit, or close c */
        request *next = q->next;
        int waits = q->trail != NULL && q->trail->follow == FOLLOW_AGAIN;
        if (q->deadline <= now || (q->due <= now && !waits)) {
            sluice__uv_held_push(c, &go, &go_tail, q);
        } else {
            sluice__uv_held_push(c, &c->again, &c->again_tail, q);
        }
        q = next;
    }
    while (go != NULL) {
        q = go;
        go = q->next;
        q->next = NULL;
        if (q->deadline <= now) {
            again_gave_up(NULL, q, q->tries, "TRYAGAIN");
        } else {
            again_send(c, q);
        }
    }
    again_arm(c);
}

/* Answers the calls on the again list with `status` (the connection closes). */
static void again_fail(sluice_aconn *c, int status) {
    request *q = c->again;
    c->again = c->again_tail = NULL;
    while (q != NULL) {
        request *next = q->next, *w = q->trail;
        int with = w != NULL && w->follow == FOLLOW_NONE; /* answered, going with q */
        sluice__uv_complete(c, q, status, 0, NULL);
        if (with) {
            sluice__uv_complete(c, w, status, 0, NULL);
        }
        q = next;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Redirections of a reply; WAIT following its call                                         */

/* Sends the WAIT w where the call ahead of it went (ASK, MOVED, TRYAGAIN). 0, or -1 (the
 * caller hears EBUSY). */
static int route_follow(sluice_aconn *c, sluice__uvlink *l, request *w, int kind) {
    (void)l;
    if (kind == FOLLOW_AGAIN) {
        if (w->lead == NULL) {
            return -1; /* the call gave up */
        }
        again_arm(w->caller); /* it goes with its call (which may be due already) */
        return 0;
    }
    if (kind == FOLLOW_MOVED && c->moving) {
        sluice__uv_held_push(c, &c->moved, &c->moved_tail,
                             w); /* after the call, to the new owner */
        return 0;
    }
    sluice_aconn *a = c->ask;
    if (kind != FOLLOW_ASK || a == NULL) {
        return -1;
    }
    if (c->held != NULL || !sluice_aconn_ready(a) || a->link == NULL) {
        sluice__uv_held_push(c, &c->held, &c->held_tail,
                             w); /* the call waits for the link: behind it */
        return 0;
    }
    return ask_send(a, w);
}

/* Moving to a slot's new owner: once everything sent on the old link is answered, let it go
 * (the reconnect to the new owner starts at once). */
static void moved_maybe_drop(sluice_aconn *c, sluice__uvlink *l) {
    if (c->moving && c->head == NULL && c->link == l && l->open && !c->closing) {
        sluice__uv_drop(c, SLUICE_ECONN, "the queue's slot moved");
    }
    retired_maybe_close(c); /* a retired ask link, once its last call is answered */
}

/* A MOVED for a slot other than the queue's: the call named a key outside the queue's slot,
 * which is not this connection's to follow (moving there would leave the queue's slot, whose
 * owner the next handshake finds again: a reconnect loop until the call's deadline). The call
 * did not run; the caller hears EINVAL at once and the connection stays where it is. */
static void moved_elsewhere(sluice_aconn *c, request *q, const sluice_cluster_redirect *rd,
                            redisReply *reply) {
    size_t n = (size_t)snprintf(c->err, sizeof(c->err), "%s: ", c->where);
    snprintf(c->err + n, n < sizeof(c->err) ? sizeof(c->err) - n : 0,
             "an async cluster connection serves its queue's slot only; the call named a key in "
             "slot %d, not in slot %d (queue %s), and did not run (%.*s)",
             rd->slot, queue_slot(c), c->queue, (int)reply->len, reply->str);
    sluice__uv_complete(c, q, SLUICE_EINVAL, 0, reply);
}

/* A caller's call answered with an error: a redirection is followed or answered here (1);
 * anything else is the caller's answer as it is (0). */
static int route_reply(sluice_aconn *c, sluice__uvlink *l, request *q, redisReply *reply) {
    sluice_cluster_redirect rd;
    sluice_cluster_redirect_kind k = sluice__cluster_redirect_parse(reply->str, reply->len, &rd);
    if (k == SLUICE_REDIRECT_MOVED && rd.slot != queue_slot(c)) {
        moved_elsewhere(c, q, &rd, reply);
        moved_maybe_drop(c, l);
        return 1;
    }
    if (k == SLUICE_REDIRECT_ASK && ask_forward(c, q, &rd) == 0) {
        sluice__uv_follow_mark(c, FOLLOW_ASK);
        return 1; /* sent on, after ASKING, to the node the keys moved to */
    }
    if (k == SLUICE_REDIRECT_MOVED && c->parent == NULL && !c->closing && c->link == l) {
        if (!c->moving) {
            follow_moved(c, reply);
            c->moving = 1;
            c->ready = 0;     /* new calls wait for the new owner */
            ask_retire(c, 1); /* the migration is over (or was undone) */
        }
        sluice__uv_held_push(c, &c->moved, &c->moved_tail,
                             q); /* it did not run: sent again there */
        sluice__uv_follow_mark(c, FOLLOW_MOVED);
        moved_maybe_drop(c, l);
        return 1;
    }
    if (k == SLUICE_REDIRECT_TRYAGAIN && again_hold(c, q) == 0) {
        request *w = sluice__uv_follow_mark(c, FOLLOW_AGAIN);
        if (w != NULL) {
            w->lead = q;
            q->trail = w;
        }
        moved_maybe_drop(c, l);
        return 1; /* sent again after a pause */
    }
    if (k == SLUICE_REDIRECT_TRYAGAIN || k == SLUICE_REDIRECT_ASK) {
        /* TRYAGAIN past the deadline, an ASK not followed: the queue's slot is migrating (a
         * key the call needs is on neither node for sure yet); the call did not run */
        again_gave_up(c, q, q->tries + 1, k == SLUICE_REDIRECT_ASK ? "an ASK" : "TRYAGAIN");
        moved_maybe_drop(c, l);
        return 1;
    }
    if (k != SLUICE_REDIRECT_NONE) {
        /* CLUSTERDOWN, a MOVED on an ask link: the command did not run; the caller may send
         * it again */
        snprintf(c->err, sizeof(c->err), "%s: %.*s", c->where, (int)reply->len, reply->str);
        sluice__uv_complete(c, q, SLUICE_EBUSY, 0, reply);
        moved_maybe_drop(c, l);
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* The hooks the link calls                                                                 */

/* The node to connect to: the one a MOVED named or the pinned node of an ask link, else the
 * next known node or seed. A cluster connection serves one queue. */
static int route_pick(sluice_aconn *c) {
    if (c->o.queue == NULL) {
        snprintf(c->err, sizeof(c->err),
                 "%s: an async connection to a Redis Cluster serves one queue, and none was given",
                 c->where);
        return SLUICE_EINVAL;
    }
    if (c->node_host[0] == '\0') {
        next_node(c);
    }
    return 0;
}

/* A node is checked against the URL's kind (not an ask link's: the cluster named it), and the
 * router's steps go in the plan (not on an ask link: it does not ask who owns the slot). */
static void route_plan(sluice_aconn *c, sluice__hs_config *cfg) {
    snprintf(c->hs_where, sizeof(c->hs_where),
             strchr(c->node_host, ':') != NULL ? "[%s]:%d" : "%s:%d", c->node_host, c->node_port);
    cfg->mode_where = c->hs_where;
    cfg->kind = c->parent != NULL ? SLUICE_HS_MEMBER : SLUICE_HS_SEED;
    cfg->route = c->parent == NULL;
}

static int route_lost(sluice_aconn *c) {
    c->moving = 0;
    return c->redirected;
}

static int route_retry(sluice_aconn *c) {
    if (c->redirected) {
        /* a MOVED named the node: go there next - at once, unless the nodes keep sending us
         * around (a failover under way): then after the backoff */
        c->redirected = 0;
        return c->redirects <= 5;
    }
    if (c->parent == NULL) {
        snprintf(c->failed.host, sizeof(c->failed.host), "%s", c->node_host);
        c->failed.port = c->node_port;
        c->node_host[0] = '\0'; /* that node failed us: ask the next known node */
        c->redirects = 0;       /* not a ping-pong: the MOVED was followed to a dead node */
    }
    return 0;
}

static void route_node(sluice_aconn *c, char *buf, size_t len) {
    const sluice_cluster_addr *at = &c->failed;
    if (c->parent != NULL || at->port != 0) {
        const char *host = c->parent != NULL ? c->node_host : at->host;
        snprintf(buf, len, strchr(host, ':') != NULL ? " node=[%s]:%d" : " node=%s:%d", host,
                 c->parent != NULL ? c->node_port : at->port);
    }
}

static void route_ready(sluice_aconn *c) {
    c->redirects = 0;
}

static int route_before_resend(sluice_aconn *c) {
    return c->parent != NULL ? send_asking(c) : 0;
}

static void route_close(sluice_aconn *c, int status) {
    ask_close(c, status);
    sluice__uv_held_fail(c, &c->moved, &c->moved_tail, status);
    again_fail(c, status);
}

static const sluice__uvroute_ops cluster = {
    .pick = route_pick,
    .plan = route_plan,
    .steps = route_steps,
    .reply = route_reply,
    .follow = route_follow,
    .after = moved_maybe_drop,
    .lost = route_lost,
    .retry = route_retry,
    .node = route_node,
    .ready = route_ready,
    .before_resend = route_before_resend,
    .close = route_close,
    .redirect_event = "cluster_redirect",
    .held_late = "the slot's new owner was not ready in time",
};

sluice_aconn *sluice_aconn_new(uv_loop_t *loop, const sluice_url *url, const sluice_conn_options *o,
                               sluice_aconn_state_cb state_cb, void *state_arg) {
    if (url == NULL) {
        return NULL;
    }
    const sluice__uvroute_ops *route = url->is_sentinel  ? &sluice__uvsentinel_route
                                       : url->is_cluster ? &cluster
                                                         : NULL;
    return sluice__uv_new(loop, url, o, state_cb, state_arg, route);
}
