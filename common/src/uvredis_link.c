/* SPDX-License-Identifier: MIT */
/*
 * uvredis_link.c - the async (libuv) Redis connection of redis.h: its link.
 *
 * With a redis+cluster:// URL the routing of redirections (which node, MOVED, ASK, TRYAGAIN) is
 * uvredis_route.c's, with a redis+sentinel:// URL finding the primary is uvredis_sentinel.c's;
 * this file reaches them only through the hooks the router installed (c->route, uvredis_link.h).
 *
 * One sluice_aconn owns at most one transport at a time (a "link", uvredis_transport.c: the
 * socket, plain or TLS, and hiredis's reply reader). A link goes: connect and, for rediss://,
 * the TLS handshake (bounded by connect_timeout_ms) -> handshake (the plan of handshake.h: AUTH,
 * CLUSTER MYID, SELECT, FCALL sluice_version, FUNCTION LOAD or SCRIPT LOADs, pipelined) -> ready.
 * Any failure lets go of the link, fails what was pending on it and arms a reconnect after a capped
 * exponential backoff with jitter.
 *
 * Every request, internal or the caller's, is a `request` on the pending list (send order) and
 * the privdata of its command on the link, which hands it back exactly once: with the reply,
 * or with NULL when the link is freed. The caller's callback runs from that single place,
 * which is what keeps "exactly once" true across timeouts, connection loss and close. A call not
 * written to any link yet waits on the held (moved) list instead: a MOVED's, a Sentinel
 * failover's, or one made with sluice_aconn_command_held while not ready; become_ready sends
 * them first, on_deadline answers those past their deadline, close answers the rest.
 *
 * Re-entrancy: a caller may submit or close from any callback. The transport runs the pending
 * callbacks of a link synchronously inside sluice__uvlink_free (or right after the reply
 * callback it is in returns), so before freeing a link it is detached (c->link = NULL,
 * link->data = NULL); everything that then comes back from it is recognised as belonging to a
 * link we let go of. The connection's memory is freed only once its four
 * timers and every poll handle it ever had are closed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/ssl.h>
#include <uv.h>

#include "sluice/cluster.h"
#include "sluice/handshake.h"
#include "sluice/log.h"
#include "sluice/lua.h"
#include "sluice/redis.h"
#include "sluice/reply.h"
#include "sluice/status.h"
#include "sluice/tls.h"

#include "conn_internal.h"
#include "uvredis_link.h"

/* Command bytes buffered but not yet written to the socket, at most: a stalled server must
 * not make a busy producer buffer without bound (the call then fails with ETOOBIG). */
#define ACONN_MAX_UNSENT ((size_t)64 << 20)

static void on_reply(sluice__uvlink *l, redisReply *reply, void *privdata);
static void on_retry(uv_timer_t *t);

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
/* Held calls (ASK, MOVED, sluice_aconn_command_held): not written anywhere, waiting for a     */
/* link, bounded by deadlines                                                                   */

/* A call held by sluice_aconn_command_held leaves the held state (sent, or answered). */
static void unhold(sluice_aconn *c, request *q) {
    if (q->patient) {
        c->held_bytes -= sdslen(q->cmd);
        q->patient = 0;
    }
}

void sluice__uv_held_push(sluice_aconn *c, request **head, request **tail, request *q) {
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
void sluice__uv_held_fail(sluice_aconn *c, request **head, request **tail, int status) {
    request *q = *head;
    *head = *tail = NULL;
    while (q != NULL) {
        request *next = q->next;
        sluice__uv_complete(c, q, status, 0, NULL);
        q = next;
    }
}

/* The link is down: the calls a MOVED held fail with `status` (none of them ran); those held by
 * sluice_aconn_command_held stay, in their order, for the next link or their deadline. */
static void moved_fail(sluice_aconn *c, int status) {
    request *q = c->moved, *keep = NULL, *keep_tail = NULL;
    c->moved = c->moved_tail = NULL;
    while (q != NULL) {
        request *next = q->next;
        q->next = NULL;
        if (!q->patient) {
            sluice__uv_complete(c, q, status, 0, NULL);
        } else if (keep_tail != NULL) {
            keep_tail->next = q;
            keep_tail = q;
        } else {
            keep = keep_tail = q;
        }
        q = next;
    }
    if (keep != NULL) { /* a callback above may have held more meanwhile: ours go first */
        keep_tail->next = c->moved;
        if (c->moved == NULL) {
            c->moved_tail = keep_tail;
        }
        c->moved = keep;
    }
}

/* A held call's deadline passed before a link was ready for it: answered, never sent. */
static void held_late(sluice_aconn *c, request *q) {
    const char *why = q->patient       ? "the connection was not ready in time"
                      : c->ask != NULL ? "the ask link was not ready in time"
                                       : c->route->held_late;
    snprintf(c->err, sizeof(c->err), "%s: %s", c->where, why);
    sluice__uv_complete(c, q, SLUICE_ETIMEDOUT, 0, NULL);
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
    if (c->route != NULL && c->route->retry(c)) {
        uv_timer_start(&c->retry_timer, on_retry, 0, 0);
        return;
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
    if (c->route != NULL && !moved) {
        c->route->node(c, node, sizeof(node));
    }
    /* the one line of a failed attempt: the owner's state callback does not log it again (a
     * cluster connection that follows a MOVED to its slot's owner is not a failure) */
    SLUICE_LOG(moved ? SLUICE_LOG_INFO : SLUICE_LOG_WARN,
               "event=%s conn=%s queue=%s status=%s attempt=%d retry_in_ms=%llu%s detail=%s",
               moved ? c->route->redirect_event : "redis_down", c->name, c->queue,
               sluice_err_name(status), c->attempt,
               (unsigned long long)uv_timer_get_due_in(&c->retry_timer), node,
               sluice_log_q(c->err, q, sizeof(q)));
    if (moved) {
        return; /* not down: on its way to the slot's owner */
    }
    moved_fail(c, status);
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
    int moved = c->route != NULL && c->route->lost(c);
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
    schedule_retry(c);
    report_down(c, status, moved);
}

/*
 * Drops the current link and frees it: the transport calls every pending callback with a NULL
 * reply, at once, or right after the reply callback we are in returns.
 */
void sluice__uv_drop(sluice_aconn *c, int status, const char *detail) {
    sluice__uvlink *l = c->link;
    link_lost(c, l, status, detail);
    sluice__uvlink_free(l);
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
        held_late(c, q);
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
    sluice__uv_drop(c, SLUICE_ETIMEDOUT, detail);
}

static void maybe_finish(sluice_aconn *c) {
    if (!c->closing || c->open_handles > 0) {
        return;
    }
    void (*closed)(void *) = c->closed;
    void *arg = c->closed_arg;
    memset(&c->url, 0, sizeof(c->url)); /* the password */
    sluice__hs_free(&c->hs);
    sluice__tls_options_release(&c->o);
    SSL_CTX_free(c->tls_ctx);
    SSL_SESSION_free(c->tls_session);
    free(c);
    if (closed != NULL) {
        closed(arg);
    }
}

void sluice__uv_handle_closed(sluice_aconn *c) {
    c->open_handles--;
    maybe_finish(c);
}

static void on_handle_closed(uv_handle_t *h) {
    sluice__uv_handle_closed(h->data);
}

static void on_link_closed(sluice__uvlink *l) {
    sluice__uv_handle_closed(l->owner);
}

/* ---------------------------------------------------------------------------------------- */
/* Sending                                                                                  */

/* Appends a formatted command for `q` to the link; 0 or ECONN (the link is being freed). */
int sluice__uv_append(sluice_aconn *c, sluice__uvlink *l, request *q, const char *cmd, size_t len) {
    q->start = l->appended;
    if (sluice__uvlink_append(l, cmd, len, q) != 0) {
        return SLUICE_ECONN;
    }
    q->end = l->appended;
    list_push(c, q);
    arm_deadline(c, q->deadline);
    return 0;
}

/* Sends an internal request; during the handshake it counts as a step to wait for. */
int sluice__uv_send_step(sluice_aconn *c, int argc, const char **argv, const size_t *lens,
                         step_fn step, int fn) {
    sds cmd = NULL;
    request *q = calloc(1, sizeof(*q));
    if (q == NULL || redisFormatSdsCommandArgv(&cmd, argc, argv, lens) < 0) {
        free(q);
        return SLUICE_ENOMEM;
    }
    q->conn = c;
    q->step = step;
    q->fn = fn;
    int st = sluice__uv_append(c, c->link, q, cmd, sdslen(cmd));
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
    return sluice__uv_send_step(c, 4, argv, lens, step, -1);
}

static int send_script_load(sluice_aconn *c, sluice_fn fn, step_fn step) {
    size_t len;
    char *text = sluice_lua_script(fn, &len);
    if (text == NULL) {
        return SLUICE_ENOMEM;
    }
    const char *argv[] = {"SCRIPT", "LOAD", text};
    const size_t lens[] = {6, 4, len};
    int st = sluice__uv_send_step(c, 3, argv, lens, step, (int)fn);
    free(text);
    return st;
}

/* ---------------------------------------------------------------------------------------- */
/* Handshake                                                                                */

static void become_ready(sluice_aconn *c) {
    uv_timer_stop(&c->connect_timer);
    c->ready = 1;
    c->attempt = 0;
    if (c->route != NULL) {
        c->route->ready(c);
    }
    /* the calls a MOVED held, and those made while it was not ready, go first, in their order;
     * one whose deadline passed (its timer not run yet) is not sent */
    request *q = c->moved;
    c->moved = c->moved_tail = NULL;
    uint64_t now = uv_now(c->loop);
    while (q != NULL) {
        request *next = q->next;
        q->next = NULL;
        if (c->closing || c->link == NULL) { /* a callback below closed the connection */
            sluice__uv_complete(c, q, SLUICE_ECANCELED, 0, NULL);
        } else if (q->deadline != 0 && q->deadline <= now) {
            held_late(c, q);
        } else {
            unhold(c, q);
            if (sluice__uv_append(c, c->link, q, q->cmd, sdslen(q->cmd)) != 0) {
                sluice__uv_complete(c, q, SLUICE_ECONN, 0, NULL);
            }
        }
        q = next;
    }
    if (c->route != NULL) {
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

void sluice__uv_step_done(sluice_aconn *c) {
    if (--c->hs_left == 0 && c->link != NULL && c->hs_over) {
        become_ready(c);
    }
}

void sluice__uv_fail_handshake(sluice_aconn *c, int status, const char *what, const redisReply *r) {
    snprintf(c->err, sizeof(c->err), "%s: %s%s%.*s", c->where, what ? what : "", what ? ": " : "",
             (int)r->len, r->str);
    sluice__uv_drop(c, status, NULL);
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

static void hs_pump(sluice_aconn *c, int in_connect);

/* A reply to a step of the plan. */
static void step_plan(sluice_aconn *c, redisReply *r, int fn) {
    (void)fn;
    int st = sluice__hs_feed(&c->hs, r);
    if (st != 0) {
        sluice__uv_drop(c, st, NULL); /* the plan wrote c->err */
        return;
    }
    c->hs_left--;
    hs_pump(c, 0);
}

/*
 * Sends what the handshake plan yields until it waits for a reply or ends; AUTH, CLUSTER MYID,
 * SELECT, the router's steps and the probe go out pipelined. `in_connect`: inside the
 * transport's connect callback: a step that cannot even be queued leaves the link to the
 * connect timer, rather than freeing it there.
 */
static void hs_pump(sluice_aconn *c, int in_connect) {
    for (;;) {
        sluice__hs_cmd cmd;
        int st = 0;
        switch (sluice__hs_next(&c->hs, &cmd)) {
        case SLUICE_HS_SEND:
            st = sluice__uv_send_step(c, cmd.argc, cmd.argv, cmd.lens, step_plan, -1);
            break;
        case SLUICE_HS_ROUTE:
            st = c->route->steps(c);
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
                sluice__uv_drop(c, c->hs.status, NULL);
            }
            return;
        }
        if (st != 0) {
            snprintf(c->err, sizeof(c->err), "%s: out of memory starting the handshake", c->where);
            return;
        }
    }
}

/* The handshake plan (handshake.h) for this link, as the router sets it (the kind of node, its
 * own steps); in EVALSHA mode every script is loaded now. */
static void handshake_start(sluice_aconn *c) {
    sluice__hs_config cfg = {.url = &c->url,
                             .kind = SLUICE_HS_SINGLE,
                             .preload_scripts = 1,
                             .force_eval = c->o.force_eval,
                             .no_load = c->o.no_load,
                             .where = c->where,
                             .sha = c->sha,
                             .err = c->err,
                             .errlen = sizeof(c->err)};
    if (c->route != NULL) {
        c->route->plan(c, &cfg);
    }
    sluice__hs_free(&c->hs);
    sluice__hs_start(&c->hs, &cfg);
    c->hs_over = 0;
    hs_pump(c, 1);
}

static void on_connect(sluice__uvlink *l, int status) {
    sluice_aconn *c = l->data;
    if (c == NULL) {
        return;
    }
    if (status != 0) {
        /* the link frees itself when this returns */
        char detail[sizeof(l->errstr) + 80];
        snprintf(detail, sizeof(detail), "%s", l->errstr);
        if (status == SLUICE_ETLS) {
            sluice__tls_explain(detail, sizeof(detail),
                                c->o.tls_server_name != NULL ? c->o.tls_server_name
                                : c->route != NULL           ? c->node_host
                                                             : c->url.host);
        }
        link_lost(c, l, status, detail);
        return;
    }
    if (l->tls != NULL) {
        SLUICE_LOG(SLUICE_LOG_DEBUG, "event=tls_connected server=%s resumed=%d", c->where,
                   sluice__uvlink_resumed(l));
    }
    handshake_start(c);
}

static void on_disconnect(sluice__uvlink *l) {
    sluice_aconn *c = l->data;
    if (c != NULL) {
        link_lost(c, l, l->status != 0 ? l->status : SLUICE_ECONN,
                  l->errstr[0] ? l->errstr : "connection closed");
    }
}

void sluice__uv_reconnect(sluice_aconn *c) {
    if (!c->closing && c->link == NULL) {
        uv_timer_start(&c->retry_timer, on_retry, 0, 0);
    }
}

static void on_connect_timeout(uv_timer_t *t) {
    sluice_aconn *c = t->data;
    if (c->link == NULL || !c->link->open) {
        return;
    }
    static const char *const what[] = {"could not connect", "the TLS handshake did not finish",
                                       "no reply to the handshake"};
    char detail[128];
    snprintf(detail, sizeof(detail), "%s within %d ms", what[c->link->stage],
             c->o.connect_timeout_ms);
    sluice__uv_drop(c, SLUICE_ETIMEDOUT, detail);
}

static const sluice__uvlink_hooks link_hooks = {
    .connected = on_connect,
    .reply = on_reply,
    .disconnected = on_disconnect,
    .closed = on_link_closed,
};

/* A connect failing at once (unix socket missing, out of memory, a TLS file unreadable) is
 * reported like any other, from this timer callback, never from inside sluice_aconn_new. hiredis
 * 0.14 resolves a host name with a blocking getaddrinfo here; use IP literals or unix sockets on
 * busy loops. */
static void on_retry(uv_timer_t *t) {
    sluice_aconn *c = t->data;
    const char *host = c->url.host;
    int port = c->url.port;
    if (c->route != NULL) { /* the router names the node */
        int st = c->route->pick(c);
        if (st > 0) {
            return; /* the router connects when it knows the node (sluice__uv_reconnect) */
        }
        if (st != 0) {
            schedule_retry(c);
            report_down(c, st, 0);
            return;
        }
        host = c->node_host;
        port = c->node_port;
    }
    sluice__uvlink_tls tls = {&c->o, &c->tls_ctx, &c->tls_session, c->where};
    char err[256];
    int st = 0;
    sluice__uvlink *l =
        sluice__uvlink_open(c->loop, host, port, c->url.is_unix ? c->url.path : NULL,
                            c->url.is_tls ? &tls : NULL, &link_hooks, c, &st, err, sizeof(err));
    if (l == NULL) {
        snprintf(c->err, sizeof(c->err), "%s: %.200s", c->where, err);
        schedule_retry(c);
        report_down(c, st, 0);
        return;
    }
    c->open_handles++;
    c->link = l;
    c->hs_left = 0;
    memset(c->loaded_at, 0, sizeof(c->loaded_at));
    uv_timer_start(&c->connect_timer, on_connect_timeout, (uint64_t)c->o.connect_timeout_ms, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Replies                                                                                  */

void sluice__uv_complete(sluice_aconn *c, request *q, int status, int sent, redisReply *reply) {
    (void)c;
    sluice_aconn *caller = q->caller;
    sluice_aconn_reply_cb cb = q->cb;
    void *arg = q->arg;
    unhold(caller, q);
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
    return (c->route != NULL ? c->route->before_resend(c) : 0) == 0 &&
                   sluice__uv_append(c, l, q, q->cmd, sdslen(q->cmd)) == 0
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
request *sluice__uv_follow_mark(sluice_aconn *c, int kind) {
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
    if (kind == FOLLOW_HERE) {
        return l->data == c && c->ready && sluice__uv_append(c, l, w, w->cmd, sdslen(w->cmd)) == 0
                   ? 0
                   : -1;
    }
    return c->route != NULL ? c->route->follow(c, l, w, kind) : -1;
}

/* The router's look at the state after a reply on l was handled. */
static void after_reply(sluice_aconn *c, sluice__uvlink *l) {
    if (c->route != NULL) {
        c->route->after(c, l);
    }
}

static void on_reply(sluice__uvlink *l, redisReply *reply, void *privdata) {
    request *q = privdata;
    sluice_aconn *c = q->conn;
    list_unlink(c, q);
    if (reply == NULL) {
        /* the link is being freed: if we did not ask for it, the connection broke */
        link_lost(c, l, l->status != 0 ? l->status : SLUICE_ECONN,
                  l->errstr[0] ? l->errstr : "connection lost");
        if (q->cb == NULL) {
            request_free(q);
            return;
        }
        int st = q->timed_out ? SLUICE_ETIMEDOUT : c->closing ? SLUICE_ECANCELED : SLUICE_ECONN;
        sluice__uv_complete(c, q, st, q->end <= sluice__uvlink_written(l), NULL);
        after_reply(c, l);
        return;
    }
    if (q->cb == NULL) {
        if (l->data == c) {
            q->step(c, reply, q->fn);
        }
        request_free(q);
        after_reply(c, l);
        return;
    }
    if (q->follow != FOLLOW_NONE) {
        if (follow_send(c, l, q) != 0) {
            snprintf(c->err, sizeof(c->err), "%s: the call ahead of a WAIT was sent elsewhere",
                     c->where);
            sluice__uv_complete(c, q, SLUICE_EBUSY, 0, NULL);
        }
        after_reply(c, l);
        return;
    }
    int st = reply_status(reply);
    if (st == SLUICE_ENOSCRIPT && resend(c, l, q) == 0) {
        sluice__uv_follow_mark(c, FOLLOW_HERE);
        return;
    }
    if (c->route != NULL && reply->type == REDIS_REPLY_ERROR && c->route->reply(c, l, q, reply)) {
        return; /* a redirection: the router has it */
    }
    if (reply->type == REDIS_REPLY_ERROR) { /* the errstr tells the caller what Redis said */
        snprintf(c->err, sizeof(c->err), "%s: %.*s", c->where, (int)reply->len, reply->str);
    }
    sluice__uv_complete(c, q, st, 1, reply);
    after_reply(c, l);
}

/* ---------------------------------------------------------------------------------------- */
/* Public API                                                                               */

sluice_aconn *sluice__uv_new(uv_loop_t *loop, const sluice_url *url, const sluice_conn_options *o,
                             sluice_aconn_state_cb state_cb, void *state_arg,
                             const sluice__uvroute_ops *route) {
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
    if (sluice__tls_options_keep(&c->o) != 0) {
        free(c);
        return NULL;
    }
    snprintf(c->name, sizeof(c->name), "%s", c->o.name != NULL ? c->o.name : "redis");
    snprintf(c->queue, sizeof(c->queue), "%s", c->o.queue != NULL ? c->o.queue : "-");
    c->o.name = c->name;
    c->o.queue = c->queue;
    c->state_cb = state_cb;
    c->state_arg = state_arg;
    c->route = route;
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

/* Queues the formatted `cmd` (taken over) as the caller's request: on the link, or with `hold`
 * while there is no ready link, on the moved list until there is (sluice_aconn_command_held). */
static int submit(sluice_aconn *c, sds cmd, int fn, int wait, int timeout_ms, int hold,
                  sluice_aconn_reply_cb cb, void *arg) {
    sluice__uvlink *l = c->link;
    size_t unsent = hold ? c->held_bytes : sluice__uvlink_unsent(l);
    if (unsent + sdslen(cmd) > ACONN_MAX_UNSENT) {
        snprintf(c->err, sizeof(c->err), "%s: %zu bytes waiting to be %s; refusing more", c->where,
                 unsent, hold ? "sent once connected" : "written");
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
    if (hold) {
        q->patient = 1;
        c->held_bytes += sdslen(cmd);
        sluice__uv_held_push(c, &c->moved, &c->moved_tail, q);
    } else if (sluice__uv_append(c, l, q, cmd, sdslen(cmd)) != 0) {
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

/* sluice_aconn_command; `hold`: sluice_aconn_command_held. */
static int command(sluice_aconn *c, int argc, const char **argv, const size_t *lens, int timeout_ms,
                   int hold, sluice_aconn_reply_cb cb, void *arg) {
    if (c == NULL || argc <= 0 || argv == NULL || cb == NULL) {
        return SLUICE_EINVAL;
    }
    if (!one_reply_each(argc, argv, lens)) {
        snprintf(c->err, sizeof(c->err), "%.*s is not supported on an async connection",
                 (int)(lens != NULL ? lens[0] : strlen(argv[0])), argv[0]);
        return SLUICE_EINVAL;
    }
    int ready = sluice_aconn_ready(c) && c->link != NULL;
    if (c->closing || (!ready && !hold)) {
        return SLUICE_ECONN;
    }
    sds cmd = NULL;
    if (redisFormatSdsCommandArgv(&cmd, argc, argv, lens) < 0) {
        return SLUICE_ENOMEM;
    }
    size_t n0 = lens != NULL ? lens[0] : strlen(argv[0]);
    return submit(c, cmd, -1, n0 == 4 && strncasecmp(argv[0], "WAIT", 4) == 0, timeout_ms, !ready,
                  cb, arg);
}

int sluice_aconn_command(sluice_aconn *c, int argc, const char **argv, const size_t *lens,
                         int timeout_ms, sluice_aconn_reply_cb cb, void *arg) {
    return command(c, argc, argv, lens, timeout_ms, 0, cb, arg);
}

int sluice_aconn_command_held(sluice_aconn *c, int argc, const char **argv, const size_t *lens,
                              int timeout_ms, sluice_aconn_reply_cb cb, void *arg) {
    return command(c, argc, argv, lens, timeout_ms, 1, cb, arg);
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
    return submit(c, cmd, (int)fn, 0, timeout_ms, 0, cb, arg);
}

void sluice_aconn_close(sluice_aconn *c, void (*closed)(void *arg), void *arg) {
    if (c == NULL || c->closing) {
        return;
    }
    c->closing = 1;
    c->ready = 0;
    c->closed = closed;
    c->closed_arg = arg;
    if (c->route != NULL) {
        c->route->close(c, SLUICE_ECANCELED);
    }
    sluice__uv_held_fail(c, &c->moved, &c->moved_tail, SLUICE_ECANCELED); /* held while down */
    uv_close((uv_handle_t *)&c->retry_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->again_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->connect_timer, on_handle_closed);
    uv_close((uv_handle_t *)&c->deadline_timer, on_handle_closed);
    c->armed = 0;
    sluice__uvlink *l = c->link;
    c->link = NULL;
    if (l != NULL) {
        l->data = NULL;
        /* pending callbacks run with ECANCELED now, or right after the reply callback we are
         * inside of returns */
        sluice__uvlink_free(l);
    }
}
