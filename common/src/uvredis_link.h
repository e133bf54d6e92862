/* SPDX-License-Identifier: MIT */
/*
 * uvredis_link.h - the async connection inside libsluice: what its link (uvredis_link.c) and
 * its cluster routing (uvredis_route.c) share.
 *
 * The link is one connection at a time to one server: connect, the handshake plan, write, read,
 * deadlines, reconnect with backoff, and the callers' requests (exactly once each). It never
 * calls the routing: a router installs its hooks (sluice__uvroute_ops) when the connection is
 * made, and the link calls those at the few places where routing decides - which node to
 * connect to, the router's handshake steps, a reply that is a redirection, a lost link, close.
 * A connection without hooks (redis://, unix://) is a link alone; the Sentinel router
 * (uvredis_sentinel.c, redis(s)+sentinel://) installs its own (asks the sentinels in `pick`,
 * checks ROLE in `steps`, follows READONLY and +switch-master). Under the link is its transport
 * (uvredis_transport.h): the socket, plain or TLS, and the reply reader.
 */
#ifndef SLUICE_UVREDIS_LINK_H
#define SLUICE_UVREDIS_LINK_H

#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "sluice/cluster.h"
#include "sluice/handshake.h"
#include "sluice/redis.h"

#include "sluice/tls.h"

#include "uvredis_transport.h"

/* Cluster nodes a connection remembers besides its seeds (the primaries of the last map read,
 * the nodes MOVEDs named): more than enough to find one that answers. */
#define KNOWN_MAX 32

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
    int patient;    /* submitted with sluice_aconn_command_held while not ready: held on the
                       moved list until a link is ready, across losses, within its deadline */
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
    const struct sluice__uvroute_ops *route; /* the router's hooks; NULL: none (one server) */
    uv_timer_t retry_timer;                  /* backoff before the next connect */
    uv_timer_t connect_timer;                /* bounds connect + handshake */
    uv_timer_t deadline_timer;               /* the earliest pending deadline (see arm_deadline) */
    uint64_t armed;                          /* deadline deadline_timer is set for; 0 = stopped */
    sluice__uvlink *link;                    /* the current transport; NULL while down */
    SSL_CTX *tls_ctx;         /* rediss://: made at the first connect, kept for the reconnects */
    SSL_SESSION *tls_session; /* rediss://: the session offered at the next connect */
    request *head, *tail;     /* waiting for a reply */
    size_t npending;          /* the caller's requests among them */
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
    /* ---- the router's state (uvredis_route.c). The link itself uses only node_host/node_port
     * (where it connects), the held and moved lists (their deadlines; the moved ones go first
     * when it is ready, and fail when it is down) and again_timer (a handle it opens and closes
     * for the router). ----
     * Redis Cluster (redis+cluster://): every command of a connection is for one queue, so one
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
    /* The same list holds the calls submitted with sluice_aconn_command_held while the
     * connection is not ready (request.patient): unlike a MOVED's, they stay there when the
     * link is down, until a link is ready or their deadline; their bytes count here, against
     * ACONN_MAX_UNSENT. */
    size_t held_bytes;
    /* TRYAGAIN (a key the call needs is on neither node for sure while the slot migrates): the
     * call did not run; it waits here (by ->next) until its pause is over, then goes to the
     * slot's owner again - with the WAIT that was sent right behind it - within its deadline */
    uv_timer_t again_timer;
    request *again, *again_tail;
    /* Sentinel (redis+sentinel://): the router's own state (uvredis_sentinel.c); it uses
     * node_host/node_port as above, and the held list for the calls a demoted primary refused */
    struct sluice__uvsentinel *sentinel;
};

/* What a router does at the link's decision points (every hook is set). */
typedef struct sluice__uvroute_ops {
    /* Before a connect: sets c->node_host / node_port. 0, or a status (reason in c->err), or
     * 1: the router finds the node first (on the loop) and calls sluice__uv_reconnect. */
    int (*pick)(sluice_aconn *c);
    /* The handshake plan's settings for this link: kind, mode_where, route. */
    void (*plan)(sluice_aconn *c, sluice__hs_config *cfg);
    /* The router's own handshake steps, in the plan's place for them. 0 or a status. */
    int (*steps)(sluice_aconn *c);
    /* A caller's call `q` answered with the error reply `r` on l: 1 when the router took it (a
     * redirection followed or answered), 0 to complete it as it is. */
    int (*reply)(sluice_aconn *c, sluice__uvlink *l, request *q, redisReply *r);
    /* A WAIT whose call ahead was sent again elsewhere (kind FOLLOW_ASK/MOVED/AGAIN): sends or
     * holds it there. 0, or -1 (the caller hears EBUSY). */
    int (*follow)(sluice_aconn *c, sluice__uvlink *l, request *w, int kind);
    /* After each reply on l has been handled. */
    void (*after)(sluice_aconn *c, sluice__uvlink *l);
    /* The link is lost: 1 when that is the way to the node a MOVED named (not a failure). */
    int (*lost)(sluice_aconn *c);
    /* A reconnect is being armed: 1 to connect at once (a MOVED named the node). */
    int (*retry)(sluice_aconn *c);
    /* The node of a failed attempt for the redis_down line (" node=HOST:PORT"), or "". */
    void (*node)(sluice_aconn *c, char *buf, size_t len);
    /* The link is ready. */
    void (*ready)(sluice_aconn *c);
    /* Commands in front of a call re-sent on this link (ASKING on an ask link). 0 or -1. */
    int (*before_resend)(sluice_aconn *c);
    /* The connection closes: the calls the router holds get `status`. */
    void (*close)(sluice_aconn *c, int status);
    const char *redirect_event; /* the log event of a link let go on the way to another node */
    const char *held_late;      /* why a held call failed at its deadline */
} sluice__uvroute_ops;

/* The Sentinel router (uvredis_sentinel.c). */
extern const sluice__uvroute_ops sluice__uvsentinel_route;

/* A new connection on `loop` with the router `route` (NULL: none); see sluice_aconn_new. */
sluice_aconn *sluice__uv_new(uv_loop_t *loop, const sluice_url *url, const sluice_conn_options *o,
                             sluice_aconn_state_cb state_cb, void *state_arg,
                             const sluice__uvroute_ops *route);

/* What the link offers its router. */
int sluice__uv_append(sluice_aconn *c, sluice__uvlink *l, request *q, const char *cmd, size_t len);
int sluice__uv_send_step(sluice_aconn *c, int argc, const char **argv, const size_t *lens,
                         step_fn step, int fn);
void sluice__uv_step_done(sluice_aconn *c);
void sluice__uv_fail_handshake(sluice_aconn *c, int status, const char *what, const redisReply *r);
void sluice__uv_complete(sluice_aconn *c, request *q, int status, int sent, redisReply *reply);
void sluice__uv_drop(sluice_aconn *c, int status, const char *detail);
/* Connects now (pick is asked again): ends a backoff, or follows a pick that answered 1. */
void sluice__uv_reconnect(sluice_aconn *c);
void sluice__uv_held_push(sluice_aconn *c, request **head, request **tail, request *q);
void sluice__uv_held_fail(sluice_aconn *c, request **head, request **tail, int status);
request *sluice__uv_follow_mark(sluice_aconn *c, int kind);
/* One of c's handles (an ask link counts as one) is closed: frees c when it was the last. */
void sluice__uv_handle_closed(sluice_aconn *c);

#endif
