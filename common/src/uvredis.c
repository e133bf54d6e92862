/* SPDX-License-Identifier: MIT */
/*
 * uvredis.c - the async (libuv) Redis connection of redis.h.
 *
 * One sluice_aconn owns at most one hiredis redisAsyncContext at a time (a "link", watched by
 * the adapter of uvredis_adapter.c). A link goes: connect (bounded by connect_timeout_ms) ->
 * handshake (the plan of handshake.h: AUTH, CLUSTER MYID, SELECT, FCALL sluice_version,
 * FUNCTION LOAD or SCRIPT LOADs, pipelined) -> ready. Any failure lets go of the link, fails
 * what was pending on it and arms a reconnect after a capped exponential backoff with jitter.
 *
 * Every request, internal or the caller's, is a `request` on the pending list (send order) and
 * the privdata of its hiredis callback, so hiredis hands it back exactly once: with the reply,
 * or with NULL when the context is freed. The caller's callback runs from that single place,
 * which is what keeps "exactly once" true across timeouts, connection loss and close.
 *
 * Re-entrancy: a caller may submit or close from any callback. hiredis runs the pending
 * callbacks of a context synchronously inside redisAsyncFree (or right after the reply
 * callback it is in returns), so before freeing a context the link is detached (c->link =
 * NULL, link->data = NULL); everything that then comes back from hiredis is recognised as
 * belonging to a link we let go of. The connection's memory is freed only once its four
 * timers and every poll handle it ever had are closed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <uv.h>

#include "sluice/cluster.h"
#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/lua.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/status.h"

#include "conn_internal.h"
#include "uvredis_internal.h"

/* Command bytes buffered but not yet written to the socket, at most: a stalled server must
 * not make a busy producer buffer without bound (the call then fails with ETOOBIG). */
#define ACONN_MAX_UNSENT ((size_t)64 << 20)

/* Cluster nodes a connection remembers besides its seeds (the primaries of the last map read,
 * the nodes MOVEDs named): more than enough to find one that answers. */
#define KNOWN_MAX 32

/* A node of the cluster answered (MOVED, CLUSTERDOWN, TRYAGAIN): the attempt count goes back to
 * at most this, so the next wait is the backoff's third step (200-400 ms with the default
 * backoff_min_ms) and the end of a failover is seen within about that, while a cluster no node
 * of which answers still backs off fully. */
#define CLUSTER_ANSWERED_ATTEMPT 2

/* A call answered TRYAGAIN is sent again after a pause of 10 ms doubling up to this (with
 * jitter), as the blocking cluster client does, while its deadline leaves room for one. */
#define AGAIN_PAUSE_MAX_MS 200

typedef struct request request;

/* Handles the reply to an internal request (handshake step or library reload). */
typedef void (*step_fn)(sluice_aconn *c, redisReply *r, int fn);

struct request {
    request *prev, *next;     /* the pending list, in send order */
    sluice_aconn *conn;       /* whose pending list it is on */
    sluice_aconn *caller;     /* where the caller submitted it (its ask link may send it on) */
    sluice_aconn_reply_cb cb; /* a caller's request (cb != NULL) ... */
    void *arg;
    step_fn step;      /* ... or an internal one */
    sds cmd;           /* the caller's formatted command, kept for the one re-send */
    uint64_t deadline; /* loop time in ms; 0 = none (internal: bounded by the connect timer
                          during the handshake, by the re-sent call's deadline afterwards) */
    uint64_t start;    /* offset of the command in the link's output stream */
    uint64_t end;      /* offset just after it: sent for sure once written >= end */
    int fn;            /* sluice_fn of an fcall or a SCRIPT LOAD, else -1 */
    int resent;
    int timed_out;
    int asked;      /* sent on once after an ASK */
    int wait;       /* a WAIT: its answer is about the writes sent before it on its connection */
    int follow;     /* FOLLOW_*: the call ahead of this WAIT was sent again; so is the WAIT */
    int tries;      /* TRYAGAIN answers so far */
    uint64_t born;  /* loop time in ms when the caller submitted it */
    uint64_t due;   /* on the again list: when it is sent again */
    request *trail; /* on the again list: the WAIT sent right behind it, going with it */
    request *lead;  /* a WAIT marked FOLLOW_AGAIN: the call it goes with (NULL: it gave up) */
};

/* Where the call just ahead of a WAIT went when it was sent again (see follow_send). */
enum { FOLLOW_NONE, FOLLOW_HERE, FOLLOW_ASK, FOLLOW_MOVED, FOLLOW_AGAIN };

struct sluice_aconn {
    uv_loop_t *loop;
    sluice_url url;
    sluice_conn_options o; /* name and queue point into label below */
    char name[32], queue[80];
    sluice_aconn_state_cb state_cb;
    void *state_arg;
    uv_timer_t retry_timer;    /* backoff before the next connect */
    uv_timer_t connect_timer;  /* bounds connect + handshake */
    uv_timer_t deadline_timer; /* the earliest pending deadline (see arm_deadline) */
    uint64_t armed;            /* deadline deadline_timer is set for; 0 = stopped */
    sluice__uvlink *link;      /* the current context's adapter; NULL while down */
    request *head, *tail;      /* waiting for a reply */
    size_t npending;           /* the caller's requests among them */
    int ready;
    int mode;
    int hs_left;                          /* handshake replies still awaited */
    sluice__hs hs;                        /* the handshake plan of the current link */
    int hs_over;                          /* the plan is done: ready once hs_left is 0 */
    char hs_where[300];                   /* the node, in the plan's CLUSTER MYID refusal */
    int attempt;                          /* failed connects since the last ready */
    unsigned seed;                        /* backoff jitter generator */
    uint64_t loaded_at[SLUICE_FN_COUNT_]; /* output offset after the last reload of fn */
    char sha[SLUICE_FN_COUNT_][41];       /* EVALSHA mode */
    int closing;
    int open_handles; /* timers and poll handles not yet closed */
    void (*closed)(void *arg);
    void *closed_arg;
    char where[300]; /* the redacted URL */
    char err[512];
    /* Redis Cluster (redis+cluster://): every command of a connection is for one queue, so one
     * slot, so one node - the owner of the queue's slot, found by asking a seed (or a node
     * learnt since) and following its MOVED. A MOVED later (the slot moved, a replica was
     * promoted) holds the call and reconnects to the node it names; an ASK sends it on to the
     * node it names, a TRYAGAIN sends it again after a pause (the again list); CLUSTERDOWN
     * fails it as busy (transient). */
    char node_host[256]; /* where to connect next ("" = the next known node or seed) */
    int node_port;
    int next_seed; /* turns over known[] then the URL's seeds */
    /* the nodes learnt (the primaries of the map read at each connect, the nodes MOVEDs named),
     * so the connection finds the cluster again when its node and the seeds are gone */
    sluice_cluster_addr known[KNOWN_MAX];
    int nknown;
    sluice_cluster_addr failed; /* the node that failed last: not the next one tried */
    int redirected;             /* a MOVED named the node to connect to next */
    int redirects; /* MOVEDs followed in a row, each node answering (past 5: with the backoff) */
    /* ASK (the slot is migrating and the keys a call named have moved already): the call is
     * sent once more, after ASKING, on an ask link to the node the ASK names - a connection of
     * the same kind, pinned to that node, that does not ask the seeds who owns the slot. Later
     * calls still go to the slot's owner first. The ask link is let go of when the owner's
     * MOVED says the migration is over (the calls sent on it still get their replies, those
     * held for it go to the new owner), and closed with this connection. */
    sluice_aconn *ask;    /* the ask link, NULL when none */
    sluice_aconn *parent; /* of an ask link: the connection it serves */
    /* Ask links let go of (the migration ended, or the keys went elsewhere) while calls sent on
     * them still wait for their replies - which say what happened to them: each closes once
     * none is left (by ->retired_next), or with this connection. */
    sluice_aconn *retired, *retired_next;
    int retiring;              /* of an ask link: on its parent's retired list */
    request *held, *held_tail; /* calls waiting for the ask link to be ready (by ->next) */
    /* MOVED: the slot has a new owner. The connection stops taking calls (not ready, without a
     * "down" report: it is moving, not failing), the calls still pending on the link get their
     * own MOVED (held) or their reply, the link goes once nothing is pending on it, and the held
     * calls are sent to the new owner as soon as it is ready - each within its deadline. */
    int moving;
    request *moved, *moved_tail; /* calls to send again at the new owner (by ->next) */
    /* TRYAGAIN (a key the call needs is on neither node for sure while the slot migrates): the
     * call did not run; it waits here (by ->next) until its pause is over, then goes to the
     * slot's owner again - with the WAIT that was sent right behind it - within its deadline */
    uv_timer_t again_timer;
    request *again, *again_tail;
};

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);
static void on_retry(uv_timer_t *t);
static void on_again(uv_timer_t *t);

/* ---------------------------------------------------------------------------------------- */
/* Pending list and deadlines                                                               */

static void list_push(sluice_aconn *c, request *q) {
    q->next = NULL;
    q->prev = c->tail;
    if (c->tail != NULL) {
        c->tail->next = q;
    } else {
        c->head = q;
    }
    c->tail = q;
}

static void list_unlink(sluice_aconn *c, request *q) {
    if (q->prev != NULL) {
        q->prev->next = q->next;
    } else {
        c->head = q->next;
    }
    if (q->next != NULL) {
        q->next->prev = q->prev;
    } else {
        c->tail = q->prev;
    }
    q->prev = q->next = NULL;
    if (c->head == NULL && c->held == NULL && c->moved == NULL && c->armed != 0 && !c->closing) {
        uv_timer_stop(&c->deadline_timer);
        c->armed = 0;
    }
}

static void request_free(request *q) {
    if (q->trail != NULL) {
        q->trail->lead = NULL;
    }
    if (q->lead != NULL) {
        q->lead->trail = NULL;
    }
    if (q->cmd != NULL) {
        sdsfree(q->cmd);
    }
    free(q);
}

static void on_deadline(uv_timer_t *t);

/*
 * One timer per connection, set for the earliest pending deadline, instead of one uv_timer_t
 * per request: no handle (and no close callback to wait for) per request, the same semantics.
 * It is only ever moved earlier here; when it fires, on_deadline scans the list and either
 * times out what is due or re-arms for the next deadline, so completed requests cost nothing.
 */
static void arm_deadline(sluice_aconn *c, uint64_t deadline) {
    if (deadline == 0 || c->closing || (c->armed != 0 && c->armed <= deadline)) {
        return;
    }
    uint64_t now = uv_now(c->loop);
    c->armed = deadline;
    uv_timer_start(&c->deadline_timer, on_deadline, deadline > now ? deadline - now : 0, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Held calls (ASK, MOVED): not written anywhere, waiting for a link, bounded by deadlines      */

static void complete(sluice_aconn *c, request *q, int status, int sent, redisReply *reply);

static void held_push(sluice_aconn *c, request **head, request **tail, request *q) {
    q->prev = q->next = NULL;
    if (*tail != NULL) {
        (*tail)->next = q;
    } else {
        *head = q;
    }
    *tail = q;
    arm_deadline(c, q->deadline);
}

/* Answers every call of a held list with `status` (none of them ran). */
static void held_fail(sluice_aconn *c, request **head, request **tail, int status) {
    request *q = *head;
    *head = *tail = NULL;
    while (q != NULL) {
        request *next = q->next;
        complete(c, q, status, 0, NULL);
        q = next;
    }
}

/* Moves the calls of a held list whose deadline is past onto *late; *next becomes the earliest
 * deadline left (0: none). */
static void held_expire(request **head, request **tail, uint64_t now, request **late,
                        uint64_t *next) {
    request *keep = NULL, *keep_tail = NULL, *q = *head;
    while (q != NULL) {
        request *n = q->next;
        q->next = NULL;
        if (q->deadline <= now) {
            q->next = *late;
            *late = q;
        } else {
            if (*next == 0 || q->deadline < *next) {
                *next = q->deadline;
            }
            if (keep_tail != NULL) {
                keep_tail->next = q;
            } else {
                keep = q;
            }
            keep_tail = q;
        }
        q = n;
    }
    *head = keep;
    *tail = keep_tail;
}

/* Arms the deadline timer for the held calls (after a link was let go). */
static void held_arm(sluice_aconn *c) {
    request *lists[] = {c->held, c->moved};
    for (int i = 0; i < 2; i++) {
        for (request *q = lists[i]; q != NULL; q = q->next) {
            arm_deadline(c, q->deadline);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Losing a link, reconnecting                                                              */

/* Capped exponential backoff with jitter, from this connection's own generator (see
 * sluice__backoff_ms), so a crowd of clients reconnecting after a restart spreads out. */
static void schedule_retry(sluice_aconn *c) {
    if (c->redirected) {
        /* a MOVED named the node: go there next - at once, unless the nodes keep sending us
         * around (a failover under way): then after the backoff */
        c->redirected = 0;
        if (c->redirects <= 5) {
            uv_timer_start(&c->retry_timer, on_retry, 0, 0);
            return;
        }
    } else if (c->url.is_cluster && c->parent == NULL) {
        snprintf(c->failed.host, sizeof(c->failed.host), "%s", c->node_host);
        c->failed.port = c->node_port;
        c->node_host[0] = '\0'; /* that node failed us: ask the next known node */
        c->redirects = 0;       /* not a ping-pong: the MOVED was followed to a dead node */
    }
    if (c->attempt < SLUICE_ATTEMPT_MAX) {
        c->attempt++;
    }
    uint64_t delay = (uint64_t)sluice__backoff_ms(&c->o, c->attempt, &c->seed);
    uv_timer_start(&c->retry_timer, on_retry, delay, 0);
}

static void report_down(sluice_aconn *c, int status, int moved) {
    char q[sizeof(c->err) + 64];
    char node[300] = ""; /* cluster: the node this attempt went to (the URL names the seeds) */
    const sluice_cluster_addr *at = &c->failed;
    if (c->url.is_cluster && !moved && (c->parent != NULL || at->port != 0)) {
        const char *host = c->parent != NULL ? c->node_host : at->host;
        snprintf(node, sizeof(node), strchr(host, ':') != NULL ? " node=[%s]:%d" : " node=%s:%d",
                 host, c->parent != NULL ? c->node_port : at->port);
    }
    /* the one line of a failed attempt: the owner's state callback does not log it again (a
     * cluster connection that follows a MOVED to its slot's owner is not a failure) */
    SLUICE_LOG(moved ? SLUICE_LOG_INFO : SLUICE_LOG_WARN,
               "event=%s conn=%s queue=%s status=%s attempt=%d retry_in_ms=%llu%s detail=%s",
               moved ? "cluster_redirect" : "redis_down", c->name, c->queue,
               sluice_err_name(status), c->attempt,
               (unsigned long long)uv_timer_get_due_in(&c->retry_timer), node,
               sluice_log_q(c->err, q, sizeof(q)));
    if (moved) {
        return; /* not down: on its way to the slot's owner */
    }
    held_fail(c, &c->moved, &c->moved_tail, status);
    if (c->state_cb != NULL) {
        c->state_cb(c, 0, status, c->state_arg);
    }
}

/*
 * Lets go of link `l` (once): the connection is down, a reconnect is armed, and the state
 * callback learns why. `detail` (may be NULL: c->err already says it) goes into the errstr.
 */
static void link_lost(sluice_aconn *c, sluice__uvlink *l, int status, const char *detail) {
    if (l->data != c) {
        return;
    }
    l->data = NULL;
    c->link = NULL;
    c->ready = 0;
    c->moving = 0;
    uv_timer_stop(&c->connect_timer);
    uv_timer_stop(&c->deadline_timer);
    c->armed = 0;
    if (c->closing) {
        return;
    }
    held_arm(c);
    if (detail != NULL) {
        snprintf(c->err, sizeof(c->err), "%s: %s", c->where, detail);
    }
    int moved = c->redirected;
    schedule_retry(c);
    report_down(c, status, moved);
}

/*
 * Drops the current link and frees its context: hiredis calls every pending callback with a
 * NULL reply, at once, or right after the reply callback we are in returns.
 */
static void drop(sluice_aconn *c, int status, const char *detail) {
    sluice__uvlink *l = c->link;
    redisAsyncContext *ac = l->ac;
    link_lost(c, l, status, detail);
    if (ac != NULL) {
        redisAsyncFree(ac);
    }
}

static void on_deadline(uv_timer_t *t) {
    sluice_aconn *c = t->data;
    uint64_t now = uv_now(c->loop);
    uint64_t next = 0;
    int expired = 0;
    c->armed = 0;
    request *late = NULL; /* held calls past their deadline: never sent */
    held_expire(&c->held, &c->held_tail, now, &late, &next);
    held_expire(&c->moved, &c->moved_tail, now, &late, &next);
    while (late != NULL) {
        request *q = late;
        late = q->next;
        snprintf(c->err, sizeof(c->err), "%s: %s", c->where,
                 c->ask != NULL ? "the ask link was not ready in time"
                                : "the slot's new owner was not ready in time");
        complete(c, q, SLUICE_ETIMEDOUT, 0, NULL);
    }
    for (request *q = c->head; q != NULL; q = q->next) {
        if (q->deadline == 0) {
            continue;
        }
        if (q->deadline <= now) {
            q->timed_out = 1;
            expired++;
        } else if (next == 0 || q->deadline < next) {
            next = q->deadline;
        }
    }
    if (expired == 0 || c->link == NULL) {
        arm_deadline(c, next);
        return;
    }
    /* A reply overdue on a FIFO connection holds up every reply behind it, and the server may
     * be gone: drop the connection rather than wait on it. */
    char detail[96];
    snprintf(detail, sizeof(detail), "%d request(s) timed out; reconnecting", expired);
    drop(c, SLUICE_ETIMEDOUT, detail);
}

static void maybe_finish(sluice_aconn *c) {
    if (!c->closing || c->open_handles > 0) {
        return;
    }
    void (*closed)(void *) = c->closed;
    void *arg = c->closed_arg;
    memset(&c->url, 0, sizeof(c->url)); /* the password */
    sluice__hs_free(&c->hs);
    free(c);
    if (closed != NULL) {
        closed(arg);
    }
}

static void on_handle_closed(uv_handle_t *h) {
    sluice_aconn *c = h->data;
    c->open_handles--;
    maybe_finish(c);
}

static void on_link_closed(sluice__uvlink *l) {
    sluice_aconn *c = l->owner;
    c->open_handles--;
    maybe_finish(c);
}

/* ---------------------------------------------------------------------------------------- */
/* Sending                                                                                  */

/* Appends a formatted command for `q` to the link; 0 or ECONN (hiredis is disconnecting). */
static int append(sluice_aconn *c, sluice__uvlink *l, request *q, const char *cmd, size_t len) {
    if (redisAsyncFormattedCommand(l->ac, on_reply, q, cmd, len) != REDIS_OK) {
        return SLUICE_ECONN;
    }
    q->start = l->appended;
    l->appended += len;
    q->end = l->appended;
    list_push(c, q);
    arm_deadline(c, q->deadline);
    return 0;
}

/* Sends an internal request; during the handshake it counts as a step to wait for. */
static int send_step(sluice_aconn *c, int argc, const char **argv, const size_t *lens, step_fn step,
                     int fn) {
    sds cmd = NULL;
    request *q = calloc(1, sizeof(*q));
    if (q == NULL || redisFormatSdsCommandArgv(&cmd, argc, argv, lens) < 0) {
        free(q);
        return SLUICE_ENOMEM;
    }
    q->conn = c;
    q->step = step;
    q->fn = fn;
    int st = append(c, c->link, q, cmd, sdslen(cmd));
    sdsfree(cmd);
    if (st != 0) {
        free(q);
        return st;
    }
    if (!c->ready) {
        c->hs_left++;
    }
    return 0;
}

static int send_function_load(sluice_aconn *c, step_fn step) {
    size_t len;
    const char *lib = sluice_lua_library(&len);
    const char *argv[] = {"FUNCTION", "LOAD", "REPLACE", lib};
    const size_t lens[] = {8, 4, 7, len};
    return send_step(c, 4, argv, lens, step, -1);
}

static int send_script_load(sluice_aconn *c, sluice_fn fn, step_fn step) {
    size_t len;
    char *text = sluice_lua_script(fn, &len);
    if (text == NULL) {
        return SLUICE_ENOMEM;
    }
    const char *argv[] = {"SCRIPT", "LOAD", text};
    const size_t lens[] = {6, 4, len};
    int st = send_step(c, 3, argv, lens, step, (int)fn);
    free(text);
    return st;
}

/* ---------------------------------------------------------------------------------------- */
/* Handshake                                                                                */

static void become_ready(sluice_aconn *c) {
    uv_timer_stop(&c->connect_timer);
    c->ready = 1;
    c->attempt = 0;
    c->redirects = 0;
    request *q = c->moved; /* the calls a MOVED held go first, in their order */
    c->moved = c->moved_tail = NULL;
    while (q != NULL) {
        request *next = q->next;
        q->next = NULL;
        if (c->closing || c->link == NULL) { /* a callback below closed the connection */
            complete(c, q, SLUICE_ECANCELED, 0, NULL);
        } else if (append(c, c->link, q, q->cmd, sdslen(q->cmd)) != 0) {
            complete(c, q, SLUICE_ECONN, 0, NULL);
        }
        q = next;
    }
    if (c->url.is_cluster) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=redis_ready server=%s node=%s:%d mode=%s", c->where,
                   c->node_host, c->node_port,
                   c->mode == SLUICE_HS_MODE_EVAL ? "evalsha" : "function");
    } else {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=redis_ready server=%s mode=%s", c->where,
                   c->mode == SLUICE_HS_MODE_EVAL ? "evalsha" : "function");
    }
    if (c->state_cb != NULL) {
        c->state_cb(c, 1, 0, c->state_arg);
    }
}

static void step_done(sluice_aconn *c) {
    if (--c->hs_left == 0 && c->link != NULL && c->hs_over) {
        become_ready(c);
    }
}

static void fail_handshake(sluice_aconn *c, int status, const char *what, const redisReply *r) {
    snprintf(c->err, sizeof(c->err), "%s: %s%s%.*s", c->where, what ? what : "", what ? ": " : "",
             (int)r->len, r->str);
    drop(c, status, NULL);
}

static int reply_status(const redisReply *r) {
    if (r->type != REDIS_REPLY_ERROR) {
        return 0;
    }
    return sluice_reply_error_status(r->str, r->len);
}

/* FUNCTION LOAD again after NOSCRIPT (the connection is ready): only the errstr records a
 * failure (the re-sent call reports). */
static void step_fload(sluice_aconn *c, redisReply *r, int fn) {
    (void)fn;
    int mode = c->mode;
    sluice__hs_load_reply(r, c->where, &mode, c->err, sizeof(c->err));
}

/* SCRIPT LOAD of one function again: a failure leaves its sha empty; calls of it then fail. */
static void step_sload(sluice_aconn *c, redisReply *r, int fn) {
    sluice__hs_script_reply(r, (sluice_fn)fn, c->where, c->sha[fn], c->err, sizeof(c->err));
}

/* ---------------------------------------------------------------------------------------- */
/* Cluster: the nodes to find the slot's owner through                                      */

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

static int send_map_query(sluice_aconn *c, int slots);

/* CLUSTER SHARDS (fn 0; CLUSTER SLOTS, fn 1, before Redis 7): the primaries it names replace
 * the known nodes. Not being allowed to ask (an ACL) only leaves the seeds to fall back on. */
static void step_map(sluice_aconn *c, redisReply *r, int fn) {
    if (fn == 0 && r->type == REDIS_REPLY_ERROR && send_map_query(c, 1) == 0) {
        step_done(c);
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
    step_done(c);
}

static int send_map_query(sluice_aconn *c, int slots) {
    const char *argv[] = {"CLUSTER", slots ? "SLOTS" : "SHARDS"};
    return send_step(c, 2, argv, NULL, step_map, slots);
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
        fail_handshake(c, SLUICE_ECONN, "the queue's slot is served by another node", r);
        return;
    }
    int st = reply_status(r);
    if (st != 0 && !(r->type == REDIS_REPLY_ERROR &&
                     sluice__cluster_redirect_parse(r->str, r->len, &rd) == SLUICE_REDIRECT_ASK)) {
        fail_handshake(c, st, "EXISTS (cluster routing)", r);
        return;
    }
    step_done(c);
}

static void hs_pump(sluice_aconn *c, int in_connect);

/* A reply to a step of the plan. */
static void step_plan(sluice_aconn *c, redisReply *r, int fn) {
    (void)fn;
    int st = sluice__hs_feed(&c->hs, r);
    if (st != 0) {
        drop(c, st, NULL); /* the plan wrote c->err */
        return;
    }
    c->hs_left--;
    hs_pump(c, 0);
}

/* The router's steps, in the plan's place for them: is this node the owner of the queue's slot
 * (EXISTS on its meta), and the nodes to come back through (the map). */
static int route_steps(sluice_aconn *c) {
    char key[sizeof(c->queue) + 16];
    snprintf(key, sizeof(key), "sluice:{%s}:meta", c->o.queue);
    const char *argv[] = {"EXISTS", key};
    int st = send_step(c, 2, argv, NULL, step_route, -1);
    return st | send_map_query(c, 0);
}

/*
 * Sends what the handshake plan yields until it waits for a reply or ends; AUTH, CLUSTER MYID,
 * SELECT, the router's steps and the probe go out pipelined. `in_connect`: inside hiredis'
 * connect callback, where the context must not be freed (hiredis touches it after the callback
 * returns): a step that cannot even be queued leaves the link to the connect timer.
 */
static void hs_pump(sluice_aconn *c, int in_connect) {
    for (;;) {
        sluice__hs_cmd cmd;
        int st = 0;
        switch (sluice__hs_next(&c->hs, &cmd)) {
        case SLUICE_HS_SEND:
            st = send_step(c, cmd.argc, cmd.argv, cmd.lens, step_plan, -1);
            break;
        case SLUICE_HS_ROUTE:
            st = route_steps(c);
            break;
        case SLUICE_HS_WAIT:
            return;
        case SLUICE_HS_DONE:
            c->mode = c->hs.mode;
            c->hs_over = 1;
            if (c->hs_left == 0 && c->link != NULL) {
                become_ready(c);
            }
            return;
        case SLUICE_HS_FAILED:
            if (!in_connect) {
                drop(c, c->hs.status, NULL);
            }
            return;
        }
        if (st != 0) {
            snprintf(c->err, sizeof(c->err), "%s: out of memory starting the handshake", c->where);
            return;
        }
    }
}

/* The handshake plan (handshake.h) for this link: a cluster node is checked against the URL's
 * kind (not an ask link's: the cluster named it), and in EVALSHA mode every script is loaded
 * now. */
static void handshake_start(sluice_aconn *c) {
    if (c->url.is_cluster) {
        snprintf(c->hs_where, sizeof(c->hs_where),
                 strchr(c->node_host, ':') != NULL ? "[%s]:%d" : "%s:%d", c->node_host,
                 c->node_port);
    } else {
        snprintf(c->hs_where, sizeof(c->hs_where), "%s", c->where);
    }
    sluice__hs_config cfg = {.url = &c->url,
                             .kind = c->parent != NULL   ? SLUICE_HS_MEMBER
                                     : c->url.is_cluster ? SLUICE_HS_SEED
                                                         : SLUICE_HS_SINGLE,
                             .route = c->url.is_cluster && c->parent == NULL,
                             .preload_scripts = 1,
                             .force_eval = c->o.force_eval,
                             .no_load = c->o.no_load,
                             .where = c->where,
                             .mode_where = c->hs_where,
                             .sha = c->sha,
                             .err = c->err,
                             .errlen = sizeof(c->err)};
    sluice__hs_free(&c->hs);
    sluice__hs_start(&c->hs, &cfg);
    c->hs_over = 0;
    hs_pump(c, 1);
}

static void on_connect(const redisAsyncContext *ac, int status) {
    sluice__uvlink *l = ac->data;
    sluice_aconn *c = l->data;
    if (c == NULL) {
        return;
    }
    if (status != REDIS_OK) {
        /* hiredis frees the context when this returns */
        link_lost(c, l, SLUICE_ECONN, ac->c.errstr);
        return;
    }
    handshake_start(c);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
    (void)status;
    sluice__uvlink *l = ac->data;
    sluice_aconn *c = l->data;
    if (c != NULL) {
        link_lost(c, l, SLUICE_ECONN, ac->c.errstr[0] ? ac->c.errstr : "connection closed");
    }
}

static void on_connect_timeout(uv_timer_t *t) {
    sluice_aconn *c = t->data;
    if (c->link == NULL || c->link->ac == NULL) {
        return;
    }
    char detail[128];
    snprintf(detail, sizeof(detail), "%s within %d ms",
             (c->link->ac->c.flags & REDIS_CONNECTED) ? "no reply to the handshake"
                                                      : "could not connect",
             c->o.connect_timeout_ms);
    drop(c, SLUICE_ETIMEDOUT, detail);
}

/* A connect failing at once (unix socket missing, out of memory) is reported like any other,
 * from this timer callback, never from inside sluice_aconn_new. hiredis 0.14 resolves a host
 * name with a blocking getaddrinfo here; use IP literals or unix sockets on busy loops. */
static void on_retry(uv_timer_t *t) {
    sluice_aconn *c = t->data;
    if (c->url.is_cluster && c->o.queue == NULL) {
        snprintf(c->err, sizeof(c->err),
                 "%s: an async connection to a Redis Cluster serves one queue, and none was given",
                 c->where);
        schedule_retry(c);
        report_down(c, SLUICE_EINVAL, 0);
        return;
    }
    const char *host = c->url.host;
    int port = c->url.port;
    if (c->url.is_cluster) {
        if (c->node_host[0] == '\0') {
            next_node(c);
        }
        host = c->node_host;
        port = c->node_port;
    }
    redisAsyncContext *ac =
        c->url.is_unix ? redisAsyncConnectUnix(c->url.path) : redisAsyncConnect(host, port);
    sluice__uvlink *l = NULL;
    if (ac != NULL) {
        sluice__fd_cloexec(ac->c.fd);
    }
    if (ac == NULL) {
        snprintf(c->err, sizeof(c->err), "%s: out of memory", c->where);
    } else if (ac->err) {
        snprintf(c->err, sizeof(c->err), "%s: %s", c->where, ac->c.errstr);
    } else if ((l = sluice__uvlink_attach(c->loop, ac, c, on_link_closed)) == NULL) {
        snprintf(c->err, sizeof(c->err), "%s: cannot watch the socket", c->where);
    }
    if (l == NULL) {
        if (ac != NULL) {
            redisAsyncFree(ac);
        }
        schedule_retry(c);
        report_down(c, SLUICE_ECONN, 0);
        return;
    }
    if (!c->url.is_unix) {
        redisEnableKeepAlive(&ac->c); /* notices a vanished peer on an idle connection */
    }
    c->open_handles++;
    c->link = l;
    c->hs_left = 0;
    memset(c->loaded_at, 0, sizeof(c->loaded_at));
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    uv_timer_start(&c->connect_timer, on_connect_timeout, (uint64_t)c->o.connect_timeout_ms, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* ASK: the ask link                                                                        */

static void step_asking(sluice_aconn *c, redisReply *r, int fn) {
    (void)c, (void)r, (void)fn; /* an error shows in the reply to the command behind it */
}

/* ASKING, the one-command permission an importing node needs, in front of a call. */
static int send_asking(sluice_aconn *c) {
    const char *argv[] = {"ASKING"};
    return send_step(c, 1, argv, NULL, step_asking, -1);
}

static void on_ask_closed(void *arg) {
    sluice_aconn *c = arg;
    c->open_handles--;
    maybe_finish(c);
}

/* Answers the calls held for the ask link with `status` (they did not run). */
static void ask_fail_held(sluice_aconn *c, int status) {
    held_fail(c, &c->held, &c->held_tail, status);
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
    if (append(a, a->link, q, q->cmd, sdslen(q->cmd)) != 0) {
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
            complete(c, q, SLUICE_EBUSY, 0, NULL);
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
        sluice_aconn *a = sluice_aconn_new(c->loop, &c->url, &c->o, on_ask_state, c);
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
    held_push(c, &c->held, &c->held_tail, q);
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
    char key[sizeof(c->queue) + 2], node[300] = "";
    snprintf(key, sizeof(key), "{%s}", c->queue);
    if (at != NULL) {
        snprintf(node, sizeof(node),
                 strchr(at->node_host, ':') != NULL ? " by [%s]:%d" : " by %s:%d", at->node_host,
                 at->node_port);
    }
    snprintf(c->err, sizeof(c->err),
             "%s: slot %d (the queue's) is being migrated between nodes; the call did not run "
             "(%d tries in %llu ms, the last answered%s with %s)",
             c->where, sluice__cluster_key_slot(key, strlen(key)), tries,
             (unsigned long long)(uv_now(c->loop) - q->born), node, answer);
    request *w = q->trail != NULL && q->trail->follow == FOLLOW_NONE ? q->trail : NULL;
    complete(c, q, SLUICE_EMIGRATING, 0, NULL);
    if (w != NULL) { /* its answer was about other writes */
        complete(c, w, SLUICE_EBUSY, 0, NULL);
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
    held_push(c, &c->again, &c->again_tail, q);
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
            complete(c, r, SLUICE_ECANCELED, 0, NULL);
        } else if (r->deadline <= uv_now(c->loop)) { /* a WAIT whose own deadline passed */
            complete(c, r, SLUICE_ETIMEDOUT, 0, NULL);
        } else if (!c->ready || c->link == NULL) {
            held_push(c, &c->moved, &c->moved_tail, r);
        } else if (append(c, c->link, r, r->cmd, sdslen(r->cmd)) != 0) {
            complete(c, r, SLUICE_ECONN, 0, NULL);
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
            held_push(c, &go, &go_tail, q);
        } else {
            held_push(c, &c->again, &c->again_tail, q);
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
        complete(c, q, status, 0, NULL);
        if (with) {
            complete(c, w, status, 0, NULL);
        }
        q = next;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Replies                                                                                  */

static void complete(sluice_aconn *c, request *q, int status, int sent, redisReply *reply) {
    (void)c;
    sluice_aconn *caller = q->caller;
    sluice_aconn_reply_cb cb = q->cb;
    void *arg = q->arg;
    caller->npending--;
    request_free(q);
    cb(caller, status, sent, reply, arg);
}

/*
 * The server lost the library (FUNCTION DELETE, restart without persistence, SCRIPT FLUSH), so
 * the call did not run: reload unless a reload was already sent after this call, and send the
 * same bytes once more. 0 when re-sent.
 */
static int resend(sluice_aconn *c, sluice__uvlink *l, request *q) {
    if (q->fn < 0 || q->resent || l->data != c || !c->ready ||
        (c->mode == SLUICE_HS_MODE_FUNCTION && c->o.no_load)) {
        return -1;
    }
    if (c->loaded_at[q->fn] <= q->start) {
        if (c->mode == SLUICE_HS_MODE_FUNCTION) {
            if (send_function_load(c, step_fload) != 0) {
                return -1;
            }
            for (int i = 0; i < SLUICE_FN_COUNT_; i++) {
                c->loaded_at[i] = l->appended;
            }
        } else {
            if (send_script_load(c, (sluice_fn)q->fn, step_sload) != 0) {
                return -1;
            }
            c->loaded_at[q->fn] = l->appended;
        }
        SLUICE_LOG(SLUICE_LOG_WARN, "event=library_missing server=%s fn=%s action=reload", c->where,
                   sluice_fn_name((sluice_fn)q->fn));
    }
    q->resent = 1;
    return (c->parent != NULL ? send_asking(c) : 0) == 0 &&
                   append(c, l, q, q->cmd, sdslen(q->cmd)) == 0
               ? 0
               : -1;
}

/*
 * A WAIT pipelined right behind a call (--wait-replicas) counts the replicas that have the
 * writes sent before it on its connection. When that call is sent again - on the ask link
 * (ASK), to the slot's new owner (MOVED) or here after the library was reloaded - the answer
 * the WAIT gets where it is would be about other writes, and say "confirmed" for a write the
 * replicas never saw. So the WAIT is marked (follow_mark), and when its first answer comes it
 * is sent after the call instead (follow_send); where it cannot be, the caller hears EBUSY (not
 * confirmed).
 */
static request *follow_mark(sluice_aconn *c, int kind) {
    request *w = c->head; /* the call was unlinked: what was sent right behind it */
    if (w != NULL && w->cb != NULL && w->wait && w->follow == FOLLOW_NONE) {
        w->follow = kind;
        return w;
    }
    return NULL;
}

/* Sends the WAIT w where the call ahead of it went. 0, or -1 (the caller hears EBUSY). */
static int follow_send(sluice_aconn *c, sluice__uvlink *l, request *w) {
    int kind = w->follow;
    w->follow = FOLLOW_NONE;
    if (kind == FOLLOW_AGAIN) {
        if (w->lead == NULL) {
            return -1; /* the call gave up */
        }
        again_arm(w->caller); /* it goes with its call (which may be due already) */
        return 0;
    }
    if (kind == FOLLOW_HERE) {
        return l->data == c && c->ready && append(c, l, w, w->cmd, sdslen(w->cmd)) == 0 ? 0 : -1;
    }
    if (kind == FOLLOW_MOVED && c->moving) {
        held_push(c, &c->moved, &c->moved_tail, w); /* after the call, to the new owner */
        return 0;
    }
    sluice_aconn *a = c->ask;
    if (kind != FOLLOW_ASK || a == NULL) {
        return -1;
    }
    if (c->held != NULL || !sluice_aconn_ready(a) || a->link == NULL) {
        held_push(c, &c->held, &c->held_tail, w); /* the call waits for the link: behind it */
        return 0;
    }
    return ask_send(a, w);
}

/* Moving to a slot's new owner: once everything sent on the old link is answered, let it go
 * (the reconnect to the new owner starts at once). */
static void moved_maybe_drop(sluice_aconn *c, sluice__uvlink *l) {
    if (c->moving && c->head == NULL && c->link == l && l->ac != NULL && !c->closing) {
        drop(c, SLUICE_ECONN, "the queue's slot moved");
    }
    retired_maybe_close(c); /* a retired ask link, once its last call is answered */
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata) {
    request *q = privdata;
    sluice_aconn *c = q->conn;
    sluice__uvlink *l = ac->data;
    redisReply *reply = r;
    list_unlink(c, q);
    if (reply == NULL) {
        /* hiredis is freeing the context: if we did not ask for it, the connection broke */
        link_lost(c, l, SLUICE_ECONN, ac->c.errstr[0] ? ac->c.errstr : "connection lost");
        if (q->cb == NULL) {
            request_free(q);
            return;
        }
        int st = q->timed_out ? SLUICE_ETIMEDOUT : c->closing ? SLUICE_ECANCELED : SLUICE_ECONN;
        complete(c, q, st, q->end <= sluice__uvlink_written(l, ac), NULL);
        retired_maybe_close(c);
        return;
    }
    if (q->cb == NULL) {
        if (l->data == c) {
            q->step(c, reply, q->fn);
        }
        request_free(q);
        moved_maybe_drop(c, l);
        return;
    }
    if (q->follow != FOLLOW_NONE) {
        if (follow_send(c, l, q) != 0) {
            snprintf(c->err, sizeof(c->err), "%s: the call ahead of a WAIT was sent elsewhere",
                     c->where);
            complete(c, q, SLUICE_EBUSY, 0, NULL);
        }
        moved_maybe_drop(c, l);
        return;
    }
    int st = reply_status(reply);
    if (st == SLUICE_ENOSCRIPT && resend(c, l, q) == 0) {
        follow_mark(c, FOLLOW_HERE);
        return;
    }
    if (c->url.is_cluster && reply->type == REDIS_REPLY_ERROR) {
        sluice_cluster_redirect rd;
        sluice_cluster_redirect_kind k =
            sluice__cluster_redirect_parse(reply->str, reply->len, &rd);
        if (k == SLUICE_REDIRECT_ASK && ask_forward(c, q, &rd) == 0) {
            follow_mark(c, FOLLOW_ASK);
            return; /* sent on, after ASKING, to the node the keys moved to */
        }
        if (k == SLUICE_REDIRECT_MOVED && c->parent == NULL && !c->closing && c->link == l) {
            if (!c->moving) {
                follow_moved(c, reply);
                c->moving = 1;
                c->ready = 0;     /* new calls wait for the new owner */
                ask_retire(c, 1); /* the migration is over (or was undone) */
            }
            held_push(c, &c->moved, &c->moved_tail, q); /* it did not run: sent again there */
            follow_mark(c, FOLLOW_MOVED);
            moved_maybe_drop(c, l);
            return;
        }
        if (k == SLUICE_REDIRECT_TRYAGAIN && again_hold(c, q) == 0) {
            request *w = follow_mark(c, FOLLOW_AGAIN);
            if (w != NULL) {
                w->lead = q;
                q->trail = w;
            }
            moved_maybe_drop(c, l);
            return; /* sent again after a pause */
        }
        if (k == SLUICE_REDIRECT_TRYAGAIN || k == SLUICE_REDIRECT_ASK) {
            /* TRYAGAIN past the deadline, an ASK not followed: the queue's slot is migrating (a
             * key the call needs is on neither node for sure yet); the call did not run */
            again_gave_up(c, q, q->tries + 1, k == SLUICE_REDIRECT_ASK ? "an ASK" : "TRYAGAIN");
            moved_maybe_drop(c, l);
            return;
        }
        if (k != SLUICE_REDIRECT_NONE) {
            /* CLUSTERDOWN, a MOVED on an ask link: the command did not run; the caller may send
             * it again */
            snprintf(c->err, sizeof(c->err), "%s: %.*s", c->where, (int)reply->len, reply->str);
            complete(c, q, SLUICE_EBUSY, 0, reply);
            moved_maybe_drop(c, l);
            return;
        }
    }
    if (reply->type == REDIS_REPLY_ERROR) { /* the errstr tells the caller what Redis said */
        snprintf(c->err, sizeof(c->err), "%s: %.*s", c->where, (int)reply->len, reply->str);
    }
    complete(c, q, st, 1, reply);
    moved_maybe_drop(c, l);
}

/* ---------------------------------------------------------------------------------------- */
/* Public API                                                                               */

sluice_aconn *sluice_aconn_new(uv_loop_t *loop, const sluice_url *url, const sluice_conn_options *o,
                               sluice_aconn_state_cb state_cb, void *state_arg) {
    if (loop == NULL || url == NULL) {
        return NULL;
    }
    sluice_aconn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->loop = loop;
    c->url = *url;
    sluice__conn_options_fill(&c->o, o);
    snprintf(c->name, sizeof(c->name), "%s", c->o.name != NULL ? c->o.name : "redis");
    snprintf(c->queue, sizeof(c->queue), "%s", c->o.queue != NULL ? c->o.queue : "-");
    c->o.name = c->name;
    c->o.queue = c->queue;
    c->state_cb = state_cb;
    c->state_arg = state_arg;
    sluice_url_redact(url, c->where, sizeof(c->where));
    c->seed = (unsigned)(uv_hrtime() ^ (uint64_t)getpid() ^ (uint64_t)(uintptr_t)c);
    snprintf(c->err, sizeof(c->err), "%s: connecting", c->where);
    uv_timer_t *timers[] = {&c->retry_timer, &c->connect_timer, &c->deadline_timer,
                            &c->again_timer};
    for (int i = 0; i < 4; i++) {
        uv_timer_init(loop, timers[i]); /* cannot fail */
        timers[i]->data = c;
        c->open_handles++;
    }
    uv_timer_start(&c->retry_timer, on_retry, 0, 0);
    return c;
}

int sluice_aconn_ready(const sluice_aconn *c) {
    return c != NULL && c->ready && !c->closing;
}

size_t sluice_aconn_pending(const sluice_aconn *c) {
    return c != NULL ? c->npending : 0;
}

const char *sluice_aconn_errstr(const sluice_aconn *c) {
    return c != NULL ? c->err : "";
}

/* Queues the formatted `cmd` (taken over) as the caller's request. */
static int submit(sluice_aconn *c, sds cmd, int fn, int wait, int timeout_ms,
                  sluice_aconn_reply_cb cb, void *arg) {
    sluice__uvlink *l = c->link;
    size_t unsent = l->ac->c.obuf != NULL ? sdslen(l->ac->c.obuf) : 0;
    if (unsent + sdslen(cmd) > ACONN_MAX_UNSENT) {
        snprintf(c->err, sizeof(c->err), "%s: %zu bytes waiting to be written; refusing more",
                 c->where, unsent);
        sdsfree(cmd);
        return SLUICE_ETOOBIG;
    }
    request *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        sdsfree(cmd);
        return SLUICE_ENOMEM;
    }
    q->conn = c;
    q->caller = c;
    q->cb = cb;
    q->arg = arg;
    q->cmd = cmd;
    q->fn = fn;
    q->wait = wait;
    q->born = uv_now(c->loop);
    q->deadline = q->born + (uint64_t)(timeout_ms > 0 ? timeout_ms : c->o.command_timeout_ms);
    if (append(c, l, q, cmd, sdslen(cmd)) != 0) {
        request_free(q);
        return SLUICE_ECONN;
    }
    c->npending++;
    return 0;
}

/* Commands after which the server does not answer one reply per request, which the callback
 * contract (exactly once, in order) and hiredis 0.14's bookkeeping depend on. */
static int one_reply_each(int argc, const char **argv, const size_t *lens) {
    static const char *const bad[] = {"SUBSCRIBE",    "PSUBSCRIBE",   "SSUBSCRIBE", "UNSUBSCRIBE",
                                      "PUNSUBSCRIBE", "SUNSUBSCRIBE", "MONITOR"};
    size_t n = lens != NULL ? lens[0] : strlen(argv[0]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (n == strlen(bad[i]) && strncasecmp(argv[0], bad[i], n) == 0) {
            return 0;
        }
    }
    /* CLIENT REPLY OFF|SKIP silences replies */
    return !(argc >= 2 && n == 6 && strncasecmp(argv[0], "CLIENT", 6) == 0 &&
             (lens != NULL ? lens[1] : strlen(argv[1])) == 5 &&
             strncasecmp(argv[1], "REPLY", 5) == 0);
}

int sluice_aconn_command(sluice_aconn *c, int argc, const char **argv, const size_t *lens,
                         int timeout_ms, sluice_aconn_reply_cb cb, void *arg) {
    if (c == NULL || argc <= 0 || argv == NULL || cb == NULL) {
        return SLUICE_EINVAL;
    }
    if (!one_reply_each(argc, argv, lens)) {
        snprintf(c->err, sizeof(c->err), "%.*s is not supported on an async connection",
                 (int)(lens != NULL ? lens[0] : strlen(argv[0])), argv[0]);
        return SLUICE_EINVAL;
    }
    if (!sluice_aconn_ready(c) || c->link == NULL) {
        return SLUICE_ECONN;
    }
    sds cmd = NULL;
    if (redisFormatSdsCommandArgv(&cmd, argc, argv, lens) < 0) {
        return SLUICE_ENOMEM;
    }
    size_t n0 = lens != NULL ? lens[0] : strlen(argv[0]);
    return submit(c, cmd, -1, n0 == 4 && strncasecmp(argv[0], "WAIT", 4) == 0, timeout_ms, cb, arg);
}

/* FCALL name nkeys keys... args... or EVALSHA sha nkeys keys... args... */
static int format_fcall(const sluice_aconn *c, sluice_fn fn, int nkeys, const char **keys,
                        const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                        sds *out) {
    int eval = c->mode == SLUICE_HS_MODE_EVAL;
    return sluice__format_fcall(eval ? "EVALSHA" : "FCALL", eval ? c->sha[fn] : sluice_fn_name(fn),
                                nkeys, keys, keylens, nargs, args, arglens, out);
}

int sluice_aconn_fcall(sluice_aconn *c, sluice_fn fn, int nkeys, const char **keys,
                       const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                       int timeout_ms, sluice_aconn_reply_cb cb, void *arg) {
    if (c == NULL || cb == NULL || (unsigned)fn >= SLUICE_FN_COUNT_ || nkeys < 0 || nargs < 0 ||
        (nkeys > 0 && keys == NULL) || (nargs > 0 && args == NULL)) {
        return SLUICE_EINVAL;
    }
    if (!sluice_aconn_ready(c) || c->link == NULL) {
        return SLUICE_ECONN;
    }
    if (c->mode == SLUICE_HS_MODE_EVAL && c->sha[fn][0] == '\0') {
        /* c->err says why SCRIPT LOAD failed */
        return SLUICE_ENOSCRIPT;
    }
    sds cmd = NULL;
    int st = format_fcall(c, fn, nkeys, keys, keylens, nargs, args, arglens, &cmd);
    if (st != 0) {
        return st;
    }
    return submit(c, cmd, (int)fn, 0, timeout_ms, cb, arg);
}

void sluice_aconn_close(sluice_aconn *c, void (*closed)(void *arg), void *arg) {
    if (c == NULL || c->closing) {
        return;
    }
    c->closing = 1;
    c->ready = 0;
    c->closed = closed;
    c->closed_arg = arg;
    ask_close(c, SLUICE_ECANCELED);
    held_fail(c, &c->moved, &c->moved_tail, SLUICE_ECANCELED);
    again_fail(c, SLUICE_ECANCELED);
    uv_close((uv_handle_t *)&c->retry_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->again_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->connect_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->deadline_timer, on_handle_closed);
    c->armed = 0;
    sluice__uvlink *l = c->link;
    c->link = NULL;
    if (l != NULL) {
        l->data = NULL;
        if (l->ac != NULL) {
            /* pending callbacks run with ECANCELED now, or right after the hiredis callback
             * we are inside of returns */
            redisAsyncFree(l->ac);
        }
    }
}
