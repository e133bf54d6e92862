/* SPDX-License-Identifier: MIT */
/*
 * conn_cluster.c - the blocking connection on a Redis Cluster (redis+cluster:// URLs): the
 * cluster router (conn_router.h). It uses the node layer (conn_node.h) and learns of a node's
 * failure from what the node returns (`watch`), never from a call up.
 *
 * Keeps the slot map (cluster.h) and one node connection per server it talks to, each made
 * lazily and with its own handshake, so the sluice library is loaded on every primary that
 * serves a call. A call goes to the primary of its routing key's slot; keyless calls go to any
 * primary. Replies that say the call did not run are followed until the call's deadline
 * (command_timeout_ms), never for a count alone: from the second redirection of a call on, a
 * short pause (10 ms doubling to PAUSE_MAX_MS, with jitter) comes before each send, so a MOVED
 * ping-pong at the end of a migration (the source already names the target, the target still
 * the source) or a failover waits for the cluster to settle instead of failing at once:
 *   MOVED          the slot has a new owner: update that slot, refresh the whole map before the
 *                  next call, send again there;
 *   ASK            the slot is migrating and the keys are gone: ASKING + send once on the
 *                  importing node, without touching the map;
 *   TRYAGAIN       a multi-key call during a migration, CLUSTERDOWN: back off, send again;
 *   no connection  to the node (failover, restart): pause, refresh the map from any node that
 *                  answers and send again, until the deadline.
 * A call still redirected or refused a connection when the deadline passes fails with
 * SLUICE_ETIMEDOUT (it did not run: `sent` = 0).
 * A request written to a node whose reply was lost is never sent again: the caller learns
 * `sent` = 1 (outcome unknown), exactly as on one server.
 *
 * WAIT goes to the node that took the last keyed call (the importing node after an ASK), whose
 * replicas must hold the write, not to the slot's owner in the map.
 *
 * A transaction sent command by command (MULTI, ..., EXEC) runs on the node of its first keyed
 * command: MULTI is answered here (+OK) and sent with that command. A pipeline
 * (sluice_conn_append_*, then sluice_conn_read_reply) likewise runs on the node of its first
 * keyed command; neither is followed through redirections once under way (a MOVED in them
 * still corrects the map for the next call).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sluice/clock.h"
#include "sluice/cluster.h"
#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/reply.h"
#include "sluice/status.h"

#include "conn_router.h"

#define PAUSE_MAX_MS   200 /* the longest pause between two rounds of one call */
#define TRY_MIN_MS     20  /* a try after a pause gets at least this long, or is not made */
#define REFRESH_MIN_MS 100 /* a map made stale by MOVED is reread at most this often */
#define POOL_MAX       SLUICE_CLUSTER_NODES_MAX

enum { TXN_NONE = 0, TXN_DEFERRED, TXN_OPEN };

struct sluice__cluster {
    sluice_cluster_map map;
    sluice_cluster_map fresh; /* where a refresh parses into */
    int have_map;
    int stale;
    uint64_t next_refresh_ms;
    sluice__node *pool[POOL_MAX];
    int npool;
    /* a pipeline or a transaction: the node it runs on, what is queued before it is chosen */
    sluice__node *pipe;
    sds pending;
    int npending; /* commands in `pending` */
    int owed;     /* replies to read from `pipe` */
    int txn;
    sluice_cluster_addr last; /* the node that took the last keyed call: WAIT goes there */
};

sluice__cluster *sluice__cluster_new(void) {
    sluice__cluster *cl = calloc(1, sizeof(*cl));
    if (cl != NULL) {
        sluice__cluster_map_init(&cl->map);
    }
    return cl;
}

void sluice__cluster_free(sluice__cluster *cl) {
    if (cl == NULL) {
        return;
    }
    for (int i = 0; i < cl->npool; i++) {
        sluice__node_release(cl->pool[i]); /* with its TLS context and session */
        free(cl->pool[i]);
    }
    sdsfree(cl->pending);
    free(cl);
}

static void set_sent(int *sent, int v) {
    if (sent != NULL) {
        *sent = v;
    }
}

/* Ends any pipeline or transaction (its node failed, or it is complete). */
static void pipe_reset(sluice__cluster *cl) {
    cl->pipe = NULL;
    sdsfree(cl->pending);
    cl->pending = NULL;
    cl->npending = 0;
    cl->owed = 0;
    cl->txn = TXN_NONE;
}

/* What the router does about a node's failure, seen in what the node returned (the node layer
 * never calls up): a pipeline or transaction on it is over, and its slots may have moved
 * (failover), so the cluster is asked next time. Returns `st`. */
static int watch(sluice__cluster *cl, sluice__node *n, int st) {
    if (sluice__node_lost(n)) {
        if (cl->pipe == n) {
            pipe_reset(cl);
        }
        cl->stale = 1;
    }
    return st;
}

/* ---- nodes and the map ---- */

static int in_map(const sluice_cluster_map *m, const sluice__node *n) {
    for (int i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].port == n->port && strcmp(m->nodes[i].host, n->host) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The node host:port, created (not connected) when new. NULL when out of memory or when
 * every place in the pool holds a primary or the pipeline's node. */
static sluice__node *pool_get(sluice_conn *c, const char *host, int port) {
    sluice__cluster *cl = c->cl;
    for (int i = 0; i < cl->npool; i++) {
        if (cl->pool[i]->port == port && strcmp(cl->pool[i]->host, host) == 0) {
            return cl->pool[i];
        }
    }
    int at = cl->npool;
    for (int i = 0; at == POOL_MAX && i < cl->npool; i++) {
        if (cl->pool[i] != cl->pipe && !in_map(&cl->map, cl->pool[i])) {
            at = i; /* a node that serves no slot any more makes room */
        }
    }
    if (at == POOL_MAX) {
        snprintf(c->err, sizeof(c->err), "%s: more than %d cluster nodes", c->where, POOL_MAX);
        return NULL;
    }
    sluice__node *n = calloc(1, sizeof(*n));
    if (n == NULL) {
        snprintf(c->err, sizeof(c->err), "%s: out of memory", c->where);
        return NULL;
    }
    char where[300];
    snprintf(where, sizeof(where),
             strchr(host, ':') != NULL ? "cluster node [%s]:%d" : "cluster node %s:%d", host, port);
    sluice__node_init(n, &c->env, host, port, where);
    if (at < cl->npool) {
        sluice__node_release(cl->pool[at]);
        free(cl->pool[at]);
    } else {
        cl->npool++;
    }
    cl->pool[at] = n;
    return n;
}

/* CLUSTER SHARDS (CLUSTER SLOTS before Redis 7) on p (host:port) into cl->fresh. Returns 0,
 * -1 when the connection failed (p unusable), or a status: SLUICE_ECLUSTER from a server
 * without cluster mode, SLUICE_EAUTH / ENOPERM when it refused us. */
static int ask_map(sluice_conn *c, sluice__probe *p, const char *host, int port, char *why,
                   size_t len) {
    static const char *const cmds[][2] = {{"CLUSTER", "SHARDS"}, {"CLUSTER", "SLOTS"}};
    int st = SLUICE_EPROTO;
    for (int i = 0; i < 2; i++) {
        redisReply *r = sluice__probe_command(p, 2, (const char **)cmds[i], why, len);
        if (r == NULL) {
            return -1;
        }
        char where[300];
        snprintf(where, sizeof(where), strchr(host, ':') != NULL ? "[%s]:%d" : "%s:%d", host, port);
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(why, len, "CLUSTER %s: %s", cmds[i][1], r->str);
            st = sluice_reply_error_status(r->str, r->len);
            if (st == SLUICE_EAUTH || st == SLUICE_ENOPERM ||
                (st = sluice__mode_check(1, r, where, why, len)) != 0) {
                freeReplyObject(r); /* no other command will do better */
                return st;
            }
            st = SLUICE_EPROTO;
        } else {
            st = i == 0 ? sluice__cluster_parse_shards(r, host, &c->cl->fresh, why, len)
                        : sluice__cluster_parse_slots(r, host, &c->cl->fresh, why, len);
        }
        freeReplyObject(r);
        if (st == 0) {
            return 0;
        }
    }
    return st;
}

/* A short-lived connection to a seed or former primary (over TLS for rediss+cluster://, with
 * the connection's TLS options), only to read the map. A TLS failure is SLUICE_ETLS. */
static int ask_map_at(sluice_conn *c, const char *host, int port, int timeout_ms, char *why,
                      size_t len) {
    sluice__probe p;
    char reason[300];
    int st = sluice__probe_open(&p, &c->o, c->url.is_tls, host, port, timeout_ms, reason,
                                sizeof(reason));
    if (st != 0) {
        snprintf(why, len, "%s:%d: %s", host, port, reason);
        return st == SLUICE_ETLS ? st : -1;
    }
    const char *argv[3];
    int argc = sluice__hs_auth_argv(&c->url, argv);
    if (argc > 0) {
        redisReply *r = sluice__probe_command(&p, argc, argv, reason, sizeof(reason));
        if (r == NULL || r->type == REDIS_REPLY_ERROR) {
            snprintf(why, len, "%s:%d: AUTH: %s", host, port, r ? r->str : reason);
            st = SLUICE_EAUTH;
        }
        freeReplyObject(r);
    }
    if (st == 0) {
        st = ask_map(c, &p, host, port, why, len);
    }
    sluice__probe_close(&p);
    return st;
}

static int remaining_ms(uint64_t deadline) {
    uint64_t now = sluice_now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Rereads the slot map from the first node that answers: a connected node first, then the
 * known primaries and the seeds of the URL, while the deadline allows. */
static int refresh(sluice_conn *c, uint64_t deadline) {
    sluice__cluster *cl = c->cl;
    char why[512] = "no node to ask";
    int st = -1;
    cl->next_refresh_ms = sluice_now_ms() + REFRESH_MIN_MS;
    for (int i = 0; st != 0 && i < cl->npool; i++) {
        sluice__node *n = cl->pool[i];
        if (n->ctx != NULL && n != cl->pipe) {
            sluice__probe view = {n->ctx, n->tls};
            st = ask_map(c, &view, n->host, n->port, why, sizeof(why));
            if (st == -1) {
                sluice__node_drop(n);
            }
        }
    }
    int nknown = cl->map.nnodes;
    for (int i = 0; st != 0 && st != SLUICE_ECLUSTER && i < nknown + c->url.nseeds; i++) {
        int left = remaining_ms(deadline);
        if (left <= 0) {
            break;
        }
        const char *host = i < nknown ? cl->map.nodes[i].host : c->url.seeds[i - nknown].host;
        int port = i < nknown ? cl->map.nodes[i].port : c->url.seeds[i - nknown].port;
        int t = left < c->o.connect_timeout_ms ? left : c->o.connect_timeout_ms;
        st = ask_map_at(c, host, port, t, why, sizeof(why));
    }
    if (st == SLUICE_ECLUSTER) {
        snprintf(c->err, sizeof(c->err), "%s: %s", c->where, why); /* a seed is refused */
        return st;
    }
    if (st != 0) {
        snprintf(c->err, sizeof(c->err), "%s: no node gave the slot map: %s", c->where, why);
        return st == -1 || st == SLUICE_EPROTO ? SLUICE_ECONN : st;
    }
    memcpy(&cl->map, &cl->fresh, sizeof(cl->map));
    cl->have_map = 1;
    cl->stale = 0;
    SLUICE_LOG(SLUICE_LOG_INFO, "event=cluster_map server=%s primaries=%d", c->where,
               cl->map.nnodes);
    return 0;
}

/* The map, read when there is none or (at most every REFRESH_MIN_MS) when it is stale. */
static int map_ready(sluice_conn *c, uint64_t deadline) {
    sluice__cluster *cl = c->cl;
    if (cl->have_map && !(cl->stale && sluice_now_ms() >= cl->next_refresh_ms)) {
        return 0;
    }
    int st = refresh(c, deadline);
    return cl->have_map ? 0 : st; /* a stale map beats none: redirections correct it */
}

/* Whether the primary host:port may be connected now: it has not failed a connect lately
 * (no backoff pending, or not in the pool yet). */
static int may_try(const sluice__cluster *cl, const sluice_cluster_addr *a, uint64_t now) {
    for (int i = 0; i < cl->npool; i++) {
        if (cl->pool[i]->port == a->port && strcmp(cl->pool[i]->host, a->host) == 0) {
            return now >= cl->pool[i]->next_attempt_ms;
        }
    }
    return 1;
}

/* The primary of `slot`; for -1 (keyless) a connected primary, else the first in the map that
 * has not failed lately (a dead one is skipped after its failed connect), else the first. */
static sluice__node *route(sluice_conn *c, int slot) {
    sluice__cluster *cl = c->cl;
    const sluice_cluster_addr *a = sluice__cluster_map_lookup(&cl->map, slot);
    if (slot < 0 && cl->map.nnodes > 0) {
        for (int i = 0; i < cl->npool; i++) {
            if (cl->pool[i]->ctx != NULL && in_map(&cl->map, cl->pool[i])) {
                return cl->pool[i];
            }
        }
        uint64_t now = sluice_now_ms();
        a = &cl->map.nodes[0];
        for (int i = 0; i < cl->map.nnodes; i++) {
            if (may_try(cl, &cl->map.nodes[i], now)) {
                a = &cl->map.nodes[i];
                break;
            }
        }
    }
    if (a == NULL) {
        snprintf(c->err, sizeof(c->err), "%s: no primary serves slot %d", c->where, slot);
        cl->stale = 1;
        return NULL;
    }
    return pool_get(c, a->host, a->port);
}

static int reroute(sluice_conn *c, int *reroutes, int *rounds, uint64_t deadline);

/* A connected primary, any of the map: a failed connect moves on to the next primary (route
 * skips it while its backoff lasts); once every one has failed, the map is read again and the
 * primaries tried again, after a pause, until the command deadline (as a call's reroute). */
int sluice__cluster_ensure(sluice_conn *c) {
    uint64_t deadline = sluice_now_ms() + (uint64_t)c->o.command_timeout_ms;
    int reroutes = 0, rounds = 0;
    int st = map_ready(c, deadline);
    while (st == 0) {
        sluice__node *n = route(c, -1);
        if (n == NULL) {
            return SLUICE_ECONN;
        }
        int all_failed = n->ctx == NULL && sluice_now_ms() < n->next_attempt_ms;
        st = watch(c->cl, n, sluice__node_start(n));
        if (st != SLUICE_ECONN && st != SLUICE_ETIMEDOUT && st != SLUICE_EREADONLY) {
            return st;
        }
        if ((all_failed || remaining_ms(deadline) == 0) &&
            reroute(c, &reroutes, &rounds, deadline) != 0) {
            return st;
        }
        st = 0;
    }
    return st;
}

/* ---- one call, followed through redirections ---- */

/* A command (argv) or a sluice function (argv NULL); `multi`: sent inside MULTI. */
typedef sluice__req creq;

static int append_req(sluice_conn *c, sluice__node *n, const creq *q) {
    return watch(c->cl, n, sluice__req_append(n, q));
}

/* Reads the `k` replies that only prepare the request (ASKING, MULTI), then the request's into
 * *out. When a preparing command was refused its error is the answer (*out) and the rest are
 * read and dropped. */
static int read_replies(sluice_conn *c, sluice__node *n, int k, redisReply **out) {
    redisReply *refused = NULL;
    int refused_st = 0, st = 0;
    for (int i = 0; i <= k; i++) {
        st = watch(c->cl, n, sluice__node_read(n, out));
        if (*out == NULL) { /* I/O: the outcome is unknown */
            freeReplyObject(refused);
            return st;
        }
        if (i < k || refused != NULL) {
            if (st != 0 && refused == NULL) {
                refused = *out, refused_st = st;
            } else {
                freeReplyObject(*out);
            }
            *out = NULL;
        }
    }
    if (refused != NULL) {
        *out = refused;
        return refused_st;
    }
    return st;
}

/* [ASKING] [MULTI] request on n, then their replies; *out is the request's. */
static int send_req(sluice_conn *c, sluice__node *n, const creq *q, int asking, redisReply **out,
                    int *sent) {
    const char *pre[2];
    int npre = 0, st = 0;
    if (asking) {
        pre[npre++] = "ASKING";
    }
    if (q->multi) {
        pre[npre++] = "MULTI";
    }
    for (int i = 0; i < npre && st == 0; i++) {
        st = watch(c->cl, n, sluice__node_append_command(n, 1, &pre[i], NULL));
    }
    if (st == 0) {
        st = append_req(c, n, q);
    }
    if (st != 0) {
        return st;
    }
    set_sent(sent, 1);
    return read_replies(c, n, npre, out);
}

static const char *redirect_name(sluice_cluster_redirect_kind k) {
    return k == SLUICE_REDIRECT_MOVED      ? "moved"
           : k == SLUICE_REDIRECT_ASK      ? "ask"
           : k == SLUICE_REDIRECT_TRYAGAIN ? "tryagain"
                                           : "clusterdown";
}

/* Waits before a call's pause number `round` (1, 2, ...): 10 ms doubling up to PAUSE_MAX_MS,
 * with jitter, and never past the deadline. When less than TRY_MIN_MS would be left for the try
 * after it, it waits until the deadline instead: a try with a few milliseconds left would time
 * out reading its answer and leave the outcome unknown, where giving up before it says truly
 * that the call did not run. */
static void pause_round(sluice_conn *c, int round, uint64_t deadline) {
    sluice_conn_options o = c->o;
    o.backoff_min_ms = 10;
    o.backoff_max_ms = PAUSE_MAX_MS;
    int d = sluice__backoff_ms(&o, round, &c->seed);
    int left = remaining_ms(deadline);
    d = d < left - TRY_MIN_MS ? d : left;
    if (d > 0) {
        struct timespec ts = {d / 1000, (long)(d % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Acts on a redirection from n before the next send: the map, the ASK node. */
static sluice__node *follow(sluice_conn *c, sluice__node *n, sluice_cluster_redirect *rd) {
    sluice__cluster *cl = c->cl;
    if (rd->addr.host[0] == '\0') {
        snprintf(rd->addr.host, sizeof(rd->addr.host), "%s", n->host); /* unknown endpoint */
    }
    SLUICE_LOG(SLUICE_LOG_INFO, "event=cluster_redirect kind=%s slot=%d from=%s to=%s:%d",
               redirect_name(rd->kind), rd->slot, n->where, rd->addr.host, rd->addr.port);
    if (rd->kind == SLUICE_REDIRECT_MOVED) {
        int idx = sluice__cluster_map_node(&cl->map, rd->addr.host, rd->addr.port);
        if (idx >= 0) {
            cl->map.slot_node[rd->slot] = (int16_t)idx;
        }
        cl->stale = 1;
        return NULL;
    }
    if (rd->kind == SLUICE_REDIRECT_ASK) {
        return pool_get(c, rd->addr.host, rd->addr.port);
    }
    if (rd->kind == SLUICE_REDIRECT_DOWN) {
        cl->stale = 1;
    }
    return NULL;
}

/* After a redirected MULTI request: the transaction on n is spoilt, DISCARD it. */
static int discard(sluice_conn *c, sluice__node *n) {
    redisReply *r = NULL;
    const char *argv[] = {"DISCARD"};
    int st = watch(c->cl, n, sluice__node_append_command(n, 1, argv, NULL));
    if (st != 0) {
        return st;
    }
    st = watch(c->cl, n, sluice__node_read(n, &r));
    freeReplyObject(r);
    return r == NULL ? st : 0;
}

/* The node of a call is gone (failover, restart), a replica now, or no primary serves the slot:
 * who serves it now? The first time at once, then after a pause. Returns 0 to send again, -1
 * once the deadline has passed (c->err still says what failed). */
static int reroute(sluice_conn *c, int *reroutes, int *rounds, uint64_t deadline) {
    if (*reroutes > 0) {
        pause_round(c, ++*rounds, deadline);
    }
    ++*reroutes;
    if (remaining_ms(deadline) == 0) {
        return -1;
    }
    char keep[sizeof(c->err)]; /* the node's failure says more than the refresh's */
    memcpy(keep, c->err, sizeof(keep));
    if (refresh(c, deadline) != 0) {
        memcpy(c->err, keep, sizeof(keep)); /* no node answered yet: try again */
    }
    return 0;
}

/* The call's deadline passed while it was still redirected: SLUICE_ETIMEDOUT, with the last
 * redirection in c->err. */
static int past_deadline(sluice_conn *c, const sluice__node *n, const char *last, int sends) {
    if (last[0] == '\0') {
        snprintf(c->err, sizeof(c->err), "%s: the deadline (%d ms) passed", n->where,
                 c->o.command_timeout_ms);
    } else {
        snprintf(c->err, sizeof(c->err),
                 "%s: still redirected when the deadline (%d ms) passed, after %d sends", last,
                 c->o.command_timeout_ms, sends);
    }
    return SLUICE_ETIMEDOUT;
}

/* No primary for `slot` in the map (a failover under way), as opposed to a full pool. */
static int no_owner(const sluice_cluster_map *m, int slot) {
    return slot >= 0 ? sluice__cluster_map_lookup(m, slot) == NULL : m->nnodes == 0;
}

/* The call gives up on a redirection: when it was a migration's (TRYAGAIN, or ASK again after
 * the importing node's TRYAGAIN), the error says so - the slot, the tries, the time, the last
 * answer and who gave it - not the raw redirection or a bare timeout. Other kinds keep `st`
 * and c->err. */
static int gave_up(sluice_conn *c, sluice_cluster_redirect_kind kind, int slot, int tries,
                   uint64_t started, const char *where, int st) {
    if (kind != SLUICE_REDIRECT_TRYAGAIN && kind != SLUICE_REDIRECT_ASK) {
        return st;
    }
    snprintf(c->err, sizeof(c->err),
             "%.100s: slot %d (the queue's) is being migrated between nodes; the call did not "
             "run (%d tries in %llu ms, the last answered by %.100s with %s)",
             c->where, slot, tries, (unsigned long long)(sluice_now_ms() - started), where,
             kind == SLUICE_REDIRECT_ASK ? "an ASK" : "TRYAGAIN");
    return SLUICE_EMIGRATING;
}

/* Sends q to the node of `slot` (or to `pin`, which no redirection or refresh replaces) and
 * follows redirections until the deadline; *used is the node that answered. */
static int call(sluice_conn *c, const creq *q, int slot, sluice__node *pin, redisReply **out,
                int *sent, sluice__node **used) {
    uint64_t started = sluice_now_ms(), deadline = started + (uint64_t)c->o.command_timeout_ms;
    sluice__node *ask = NULL;
    int asked = 0, reloaded = 0, reroutes = 0, rounds = 0, pause = 0;
    char last[400] = ""; /* the last redirection, for the message when the deadline passes */
    sluice_cluster_redirect_kind last_kind = SLUICE_REDIRECT_NONE;
    *out = NULL;
    set_sent(sent, 0);
    int st = pin != NULL ? 0 : map_ready(c, deadline);
    for (int attempt = 0; st == 0; attempt++) {
        if (pause) {
            pause_round(c, ++rounds, deadline);
            pause = 0;
        }
        sluice__node *n = ask != NULL ? ask : pin != NULL ? pin : route(c, slot);
        if (n == NULL) {
            if (!no_owner(&c->cl->map, slot) || reroute(c, &reroutes, &rounds, deadline) != 0) {
                return SLUICE_ECONN;
            }
            continue;
        }
        st = watch(c->cl, n, sluice__node_start(n));
        if (st == SLUICE_ECONN || st == SLUICE_ETIMEDOUT || st == SLUICE_EREADONLY) {
            if (ask != NULL || pin != NULL || reroute(c, &reroutes, &rounds, deadline) != 0) {
                return st;
            }
            st = 0;
            continue;
        }
        if (st != 0) {
            return st;
        }
        int left = remaining_ms(deadline);
        if (attempt > 0 && left <= 0) {
            return gave_up(c, last_kind, slot, attempt, started, n->where,
                           past_deadline(c, n, last, attempt));
        }
        if (attempt > 0) {
            sluice__node_set_timeout(n, left); /* a retry gets what is left of the deadline */
        }
        st = send_req(c, n, q, ask != NULL, out, sent);
        if (attempt > 0) {
            sluice__node_set_timeout(n, c->o.command_timeout_ms);
        }
        *used = n;
        if (st == 0 || *out == NULL) {
            return st; /* the answer, or an I/O failure: the request may have run */
        }
        sluice_cluster_redirect rd;
        sluice_cluster_redirect_kind kind =
            sluice__cluster_redirect_parse((*out)->str, (*out)->len, &rd);
        if (kind == SLUICE_REDIRECT_NONE) {
            if (st != SLUICE_ENOSCRIPT || q->argv != NULL || reloaded) {
                return st;
            }
            /* the node lost the library (or never had it): it did not run the call */
            reloaded = 1;
        } else if (kind == SLUICE_REDIRECT_ASK && asked) {
            return gave_up(c, kind, slot, attempt + 1, started, n->where,
                           st); /* the last redirection */
        }
        if (q->multi && discard(c, n) != 0) {
            return st;
        }
        if (kind != SLUICE_REDIRECT_NONE) {
            int len = (*out)->len < 80 ? (int)(*out)->len : 80;
            snprintf(last, sizeof(last), "%s: %.*s", n->where, len, (*out)->str);
        }
        if (kind != SLUICE_REDIRECT_NONE && remaining_ms(deadline) == 0) {
            freeReplyObject(*out);
            *out = NULL;
            set_sent(sent, 0);
            /* it did not run */
            return gave_up(c, kind, slot, attempt + 1, started, n->where,
                           past_deadline(c, n, last, attempt + 1));
        }
        freeReplyObject(*out);
        *out = NULL;
        set_sent(sent, 0); /* a redirection means the node did not run it */
        if (kind == SLUICE_REDIRECT_NONE) {
            st = watch(c->cl, n, sluice__node_reload(n));
            continue;
        }
        /* an ASK after the importing node's TRYAGAIN is followed again (the keys are moving) */
        asked = kind == SLUICE_REDIRECT_ASK || (asked && kind != SLUICE_REDIRECT_TRYAGAIN);
        last_kind = kind;
        st = 0;
        /* the first redirection is followed at once; TRYAGAIN, CLUSTERDOWN and any later one
         * after a pause (a MOVED ping-pong lasts until every node has learnt the new owner) */
        pause = attempt > 0 || kind == SLUICE_REDIRECT_TRYAGAIN || kind == SLUICE_REDIRECT_DOWN;
        ask = follow(c, n, &rd);
        if (kind == SLUICE_REDIRECT_ASK && ask == NULL) {
            return SLUICE_ENOMEM;
        }
    }
    return st;
}

/* Remembers the node that took a keyed call, for the WAIT that may follow it. */
static void note_write(sluice__cluster *cl, int slot, const sluice__node *used) {
    if (slot >= 0 && used != NULL) {
        snprintf(cl->last.host, sizeof(cl->last.host), "%s", used->host);
        cl->last.port = used->port;
    }
}

int sluice__cluster_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                          const size_t *keylens, int nargs, const char **args,
                          const size_t *arglens, redisReply **out, int *sent) {
    creq q = sluice__req_fcall(fn, nkeys, keys, keylens, nargs, args, arglens);
    int slot =
        nkeys > 0 ? sluice__cluster_key_slot(keys[0], keylens ? keylens[0] : strlen(keys[0])) : -1;
    sluice__node *used = NULL;
    *out = NULL;
    if (c->cl->pipe != NULL || c->cl->npending > 0) {
        snprintf(c->err, sizeof(c->err), "%s: a pipeline or transaction is open", c->where);
        return SLUICE_EINVAL;
    }
    int st = call(c, &q, slot, NULL, out, sent, &used);
    note_write(c->cl, slot, used);
    return st;
}

/* ---- transactions sent command by command ---- */

static int is_cmd(int argc, const char **argv, const size_t *lens, const char *name) {
    size_t n = strlen(name);
    return argc > 0 && (lens ? lens[0] : strlen(argv[0])) == n &&
           strncasecmp(argv[0], name, n) == 0;
}

/* +OK, as Redis answers MULTI. */
static redisReply *ok_reply(void) {
    redisReply *r = calloc(1, sizeof(*r));
    if (r != NULL && (r->str = malloc(3)) != NULL) {
        r->type = REDIS_REPLY_STATUS;
        memcpy(r->str, "OK", 3);
        r->len = 2;
        return r;
    }
    free(r);
    return NULL;
}

/* A command of an open transaction: on its node, no redirection followed. */
static int txn_next(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                    redisReply **out, int *sent) {
    sluice__cluster *cl = c->cl;
    sluice__node *n = cl->pipe;
    int st = SLUICE_ECONN;
    if (n->ctx == NULL) {
        snprintf(c->err, sizeof(c->err), "%s: the transaction's connection was lost", n->where);
    } else if ((st = watch(cl, n, sluice__node_append_command(n, argc, argv, lens))) == 0) {
        set_sent(sent, 1);
        st = watch(cl, n, sluice__node_read(n, out));
    }
    sluice_cluster_redirect rd;
    if (*out != NULL && (*out)->type == REDIS_REPLY_ERROR &&
        sluice__cluster_redirect_parse((*out)->str, (*out)->len, &rd) == SLUICE_REDIRECT_MOVED) {
        cl->stale = 1; /* the transaction fails (EXECABORT); the next one goes right */
    }
    if (*out == NULL || is_cmd(argc, argv, lens, "EXEC") || is_cmd(argc, argv, lens, "DISCARD")) {
        pipe_reset(cl);
    }
    return st;
}

int sluice__cluster_command(sluice_conn *c, int argc, const char **argv, const size_t *lens,
                            redisReply **out, int *sent) {
    sluice__cluster *cl = c->cl;
    *out = NULL;
    set_sent(sent, 0);
    if (cl->txn == TXN_OPEN) {
        return txn_next(c, argc, argv, lens, out, sent);
    }
    if (cl->pipe != NULL || cl->npending > 0) {
        snprintf(c->err, sizeof(c->err), "%s: a pipeline is open", c->where);
        return SLUICE_EINVAL;
    }
    if (is_cmd(argc, argv, lens, "MULTI") && cl->txn == TXN_NONE) {
        /* its node is the one of the first keyed command that follows */
        cl->txn = TXN_DEFERRED;
        return (*out = ok_reply()) != NULL ? 0 : SLUICE_ENOMEM;
    }
    creq q = {.argc = argc, .argv = argv, .lens = lens, .multi = cl->txn == TXN_DEFERRED};
    sluice__node *used = NULL, *pin = NULL;
    int slot = sluice__cluster_command_slot(argc, argv, lens);
    if (slot < 0 && cl->last.host[0] != '\0' && is_cmd(argc, argv, lens, "WAIT") &&
        (pin = pool_get(c, cl->last.host, cl->last.port)) == NULL) {
        return SLUICE_ENOMEM; /* the replicas of the node that took the last write */
    }
    int st = call(c, &q, slot, pin, out, sent, &used);
    note_write(cl, slot, used);
    if (q.multi) {
        int over =
            *out == NULL || is_cmd(argc, argv, lens, "EXEC") || is_cmd(argc, argv, lens, "DISCARD");
        cl->txn = over ? TXN_NONE : TXN_OPEN;
        cl->pipe = over ? NULL : used;
    }
    return st;
}

/* ---- pipelines ---- */

/* Chooses the pipeline's node (the one of `slot`, or any) and writes what was queued. */
static int pipe_open(sluice_conn *c, int slot) {
    sluice__cluster *cl = c->cl;
    if (cl->pipe != NULL) {
        return cl->pipe->ctx != NULL ? 0 : SLUICE_ECONN;
    }
    int st = map_ready(c, sluice_now_ms() + (uint64_t)c->o.command_timeout_ms);
    sluice__node *n = st == 0 ? route(c, slot) : NULL;
    if (n == NULL || (st = watch(cl, n, sluice__node_start(n))) != 0) {
        pipe_reset(cl);
        return st != 0 ? st : SLUICE_ECONN;
    }
    if (cl->npending > 0 &&
        (st = watch(cl, n, sluice__node_append_formatted(n, cl->pending, sdslen(cl->pending)))) !=
            0) {
        pipe_reset(cl);
        return st;
    }
    cl->owed += cl->npending;
    sdsfree(cl->pending);
    cl->pending = NULL;
    cl->npending = 0;
    cl->pipe = n;
    return 0;
}

int sluice__cluster_append_command(sluice_conn *c, int argc, const char **argv,
                                   const size_t *lens) {
    sluice__cluster *cl = c->cl;
    if (cl->txn != TXN_NONE) {
        snprintf(c->err, sizeof(c->err), "%s: a transaction is open", c->where);
        return SLUICE_EINVAL;
    }
    int slot = sluice__cluster_command_slot(argc, argv, lens);
    if (cl->pipe == NULL && slot < 0) {
        /* no node yet: keep it until a keyed command or the first read chooses one */
        sds cmd = NULL;
        if (redisFormatSdsCommandArgv(&cmd, argc, argv, lens) < 0) {
            return SLUICE_ENOMEM;
        }
        sds all = cl->pending != NULL ? sdscatsds(cl->pending, cmd) : cmd;
        if (all == NULL) {
            sdsfree(cmd);
            return SLUICE_ENOMEM;
        }
        if (all != cmd) {
            sdsfree(cmd);
        }
        cl->pending = all;
        cl->npending++;
        return 0;
    }
    int st = pipe_open(c, slot);
    if (st == 0) {
        st = watch(cl, cl->pipe, sluice__node_append_command(cl->pipe, argc, argv, lens));
    }
    cl->owed += st == 0;
    return st;
}

int sluice__cluster_append_fcall(sluice_conn *c, sluice_fn fn, int nkeys, const char **keys,
                                 const size_t *keylens, int nargs, const char **args,
                                 const size_t *arglens) {
    sluice__cluster *cl = c->cl;
    if (cl->txn != TXN_NONE) {
        snprintf(c->err, sizeof(c->err), "%s: a transaction is open", c->where);
        return SLUICE_EINVAL;
    }
    int slot =
        nkeys > 0 ? sluice__cluster_key_slot(keys[0], keylens ? keylens[0] : strlen(keys[0])) : -1;
    int st = pipe_open(c, slot);
    if (st == 0) {
        sluice__node *n = cl->pipe;
        st = watch(cl, n,
                   sluice__node_append_fcall(n, fn, nkeys, keys, keylens, nargs, args, arglens));
    }
    cl->owed += st == 0;
    return st;
}

int sluice__cluster_read_reply(sluice_conn *c, redisReply **out) {
    sluice__cluster *cl = c->cl;
    *out = NULL;
    if (cl->pipe == NULL && cl->npending == 0) {
        snprintf(c->err, sizeof(c->err), "%s: no reply is owed", c->where);
        return SLUICE_ECONN;
    }
    int st = pipe_open(c, -1);
    if (st != 0) {
        return st;
    }
    sluice__node *n = cl->pipe;
    st = watch(cl, n, sluice__node_read(n, out));
    sluice_cluster_redirect rd;
    if (*out != NULL && (*out)->type == REDIS_REPLY_ERROR &&
        sluice__cluster_redirect_parse((*out)->str, (*out)->len, &rd) == SLUICE_REDIRECT_MOVED) {
        cl->stale = 1; /* not followed inside a pipeline; the next call goes right */
    }
    if (*out != NULL && --cl->owed <= 0) {
        pipe_reset(cl);
    }
    return st;
}
