/* SPDX-License-Identifier: MIT */
/*
 * aproducer.c - the async producer (see aproducer.h).
 *
 * Admissions wait on a FIFO list until the prepare handle - which runs once per loop iteration,
 * just before the loop polls for I/O - routes them to the queue's partitions and turns runs of
 * consecutive ones into calls of up to max_batch envelopes (sluice__admit_call_build, the same
 * call the blocking producer makes) written on each partition's connection. A request is at any
 * moment on the unrouted list, on one partition's waiting list or in exactly one call, and its
 * callback runs only from deliver(), which frees it: that is what keeps "exactly once" true
 * across replies, deadlines, connection loss and close.
 *
 * Partitions (sluice-admin partitions Q P): a queue that is not partitioned has one, Q itself.
 * The count comes from Q's meta (`partitions`), read before the first admission is routed and
 * again every PARTS_CHECK_MS; each partition gets its own connection (on a Redis Cluster a
 * connection serves one slot, and the partitions are on different slots). Routing is the
 * blocking producer's: a tenant's messages to sluice_partition_of(tenant), a message with an
 * idempotency key to partition 0 (one place to look for the key), any other to the emptier of
 * two partitions picked at random (depths from earlier replies), and when that one answers full,
 * once to the other before the caller hears "full".
 *
 * Deadlines: a waiting request is failed by the wait timer at its deadline; a written call
 * carries the remaining time of its oldest request as its aconn deadline. Every list is kept in
 * deadline order (all requests of a producer have the same timeout; a request sent on to its
 * second partition is inserted at its place).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/aproducer.h"
#include "sluice/client.h"
#include "sluice/clock.h"
#include "sluice/figures.h"
#include "sluice/options.h"
#include "sluice/reply.h"
#include "sluice/tls.h"
#include "sluice/url.h"

#include "admit.h"
#include "route.h"

#define DEFAULT_MAX_QUEUED   65536
#define DEFAULT_MAX_INFLIGHT 64
#define PARTS_CHECK_MS       1000 /* how often meta `partitions` is read again */

_Static_assert(SLUICE_QUEUE_INFO_PARTS == SLUICE_PARTITIONS_MAX,
               "one info slot per possible partition");

typedef struct areq areq;
typedef struct apart apart;

/* One admission: the caller's callback and a private copy of its message. */
struct areq {
    areq *next;
    sluice_aproducer_cb cb;
    void *arg;
    uint64_t deadline;    /* loop time in ms */
    size_t bytes;         /* of the message's payload, headers, tenant and key */
    int part, alt;        /* the partition it goes to, and the one it tries when that is full */
    sluice_message m;     /* points into hdrs[] and the bytes after it */
    sluice_header hdrs[]; /* m.nheaders, then payload, names, values, tenant, key */
};

/* One admission call on the wire: its requests (linked, in order) and their results. */
typedef struct acall {
    apart *pt;
    areq *first;
    size_t n;
    int replies;        /* still to come: the admission's, and the WAIT's (--wait-replicas) */
    long long replicas; /* the WAIT's answer; -1 none */
    int filled;         /* res[] holds each message's outcome from the admission's reply */
    sluice_admit_result res[];
} acall;

/* One partition of the queue: its connection, its admission settings, its drain-rate estimate
 * and the requests routed to it. */
struct apart {
    sluice_aproducer *ap;
    int index;
    sluice__admit_cfg cfg;
    sluice_aconn *conn;
    sluice_drain drain;
    areq *head, *tail; /* routed here, waiting, in deadline order */
    size_t inflight;   /* calls written, not yet answered */
    int down;          /* the connection failed and waits to retry: fail fast */
    int sampling;      /* a read of the acked counter is in flight */
    char name[SLUICE_QUEUE_NAME_MAX + 1];
};

enum { PARTS_UNKNOWN, PARTS_READING, PARTS_KNOWN };

struct sluice_aproducer {
    uv_loop_t *loop;
    sluice_producer_options o; /* kept to build each partition's settings */
    sluice_url url;            /* kept to connect partitions added later */
    sluice_conn_options co;    /* its tls_* strings are copies (sluice__tls_options_keep) */
    void (*refused_cb)(sluice_aproducer *ap, int status, void *arg);
    void *refused_arg;
    apart *part[SLUICE_PARTITIONS_MAX]; /* created when first used; part[0] at once */
    int nmade;                          /* part[nmade..] were never created */
    int nparts;                         /* partitions admissions are routed to */
    int parts_state;                    /* PARTS_*: nothing is routed before the first read */
    int parts_reading;                  /* a read of meta `partitions` is in flight */
    uv_prepare_t flusher;               /* routes and sends what waits, once per loop iteration */
    uv_timer_t wait_timer;              /* the oldest waiting request's deadline */
    uv_timer_t drain_timer;             /* periodic read of the acked counters (unref'd) */
    uv_timer_t parts_timer;             /* periodic read of meta `partitions` (unref'd) */
    areq *head, *tail;                  /* accepted, not yet routed, in submission order */
    size_t queued;                      /* accepted, not yet called back */
    size_t max_queued, max_inflight;
    sluice_message *scratch; /* max_batch entries, for building one call */
    int timeout_ms;
    int fail_open;
    int closing;
    int open; /* handles and connections not yet closed */
    unsigned rnd;
    long long depth[SLUICE_PARTITIONS_MAX]; /* each partition's in its last admission reply */
    void (*closed_cb)(void *arg);
    void *closed_arg;
    sluice_aproducer_counters counters;
    char queue[SLUICE_QUEUE_NAME_MAX + 1];
    char err[512];
};

static void flush(sluice_aproducer *ap);

static void on_flush(uv_prepare_t *h) {
    flush(h->data);
}

void sluice_aproducer_options_init_sized(sluice_aproducer_options *o, size_t size) {
    sluice_aproducer_options d;
    memset(&d, 0, sizeof(d));
    d.max_queued = DEFAULT_MAX_QUEUED;
    d.max_inflight = DEFAULT_MAX_INFLIGHT;
    sluice__options_give(o, size, &d, sizeof(d));
}

/* ---------------------------------------------------------------------------------------- */
/* Requests                                                                                 */

/* Checks what sluice__admit_call_build would refuse, so that admit() can refuse it at once. */
static int check_msg(sluice_aproducer *ap, const sluice_message *m) {
    return sluice__admit_check_msg(&ap->part[0]->cfg, m, ap->err, sizeof(ap->err));
}

static char *copy_bytes(char *p, const void *src, size_t len) {
    if (len > 0) {
        memcpy(p, src, len);
    }
    return p + len;
}

/* A request holding a copy of `m` in one allocation; NULL when out of memory. */
static areq *req_new(const sluice_message *m) {
    size_t tl = m->tenant ? strlen(m->tenant) + 1 : 0;
    size_t kl = m->idempotency_key ? strlen(m->idempotency_key) + 1 : 0;
    size_t cl = m->client ? strlen(m->client) + 1 : 0;
    size_t bytes = m->len + tl + kl + cl;
    for (size_t i = 0; i < m->nheaders; i++) {
        bytes += m->headers[i].name_len + m->headers[i].value_len;
    }
    areq *q = malloc(sizeof(*q) + m->nheaders * sizeof(sluice_header) + bytes);
    if (q == NULL) {
        return NULL;
    }
    q->bytes = bytes;
    q->part = q->alt = 0;
    char *p = (char *)&q->hdrs[m->nheaders];
    memset(&q->m, 0, sizeof(q->m));
    q->m.payload = p;
    q->m.len = m->len;
    p = copy_bytes(p, m->payload, m->len);
    for (size_t i = 0; i < m->nheaders; i++) {
        q->hdrs[i].name = p;
        q->hdrs[i].name_len = m->headers[i].name_len;
        p = copy_bytes(p, m->headers[i].name, m->headers[i].name_len);
        q->hdrs[i].value = p;
        q->hdrs[i].value_len = m->headers[i].value_len;
        p = copy_bytes(p, m->headers[i].value, m->headers[i].value_len);
    }
    q->m.headers = m->nheaders > 0 ? q->hdrs : NULL;
    q->m.nheaders = m->nheaders;
    if (tl > 0) {
        q->m.tenant = p;
        p = copy_bytes(p, m->tenant, tl);
    }
    if (kl > 0) {
        q->m.idempotency_key = p;
        p = copy_bytes(p, m->idempotency_key, kl);
    }
    if (cl > 0) {
        q->m.client = p;
        copy_bytes(p, m->client, cl);
    }
    q->next = NULL;
    return q;
}

static void count(sluice_aproducer *ap, const sluice_admit_result *res) {
    switch (res->outcome) {
    case SLUICE_ADMITTED:
        ap->counters.admitted++;
        break;
    case SLUICE_DUPLICATE:
        ap->counters.duplicate++;
        break;
    case SLUICE_FULL:
        ap->counters.full++;
        break;
    case SLUICE_LIMITED:
        ap->counters.limited++;
        break;
    default:
        ap->counters.failed++;
        ap->counters.unknown += res->status == SLUICE_EUNKNOWN;
        break;
    }
}

/* The one place a request's callback runs; frees the request. */
static void deliver(sluice_aproducer *ap, areq *q, const sluice_admit_result *res) {
    ap->queued--;
    count(ap, res);
    q->cb(ap, res, q->arg);
    free(q);
}

/* Fails one request that was never written (fail-open applies). */
static void fail_unsent(sluice_aproducer *ap, areq *q, int status) {
    sluice_admit_result res;
    sluice__admit_fail(&res, 1, status, 0, ap->fail_open);
    deliver(ap, q, &res);
}

/* Takes the whole list *head..*tail off and fails each of its requests (not those that callbacks
 * add meanwhile). */
static void fail_list(sluice_aproducer *ap, areq **head, areq **tail, int status) {
    areq *q = *head;
    *head = *tail = NULL;
    while (q != NULL) {
        areq *next = q->next;
        fail_unsent(ap, q, status);
        q = next;
    }
}

/* Fails the requests of the list whose deadline has passed. */
static void expire_list(sluice_aproducer *ap, areq **head, areq **tail, int ready) {
    uint64_t now = uv_now(ap->loop);
    while (*head != NULL && (*head)->deadline <= now) {
        areq *q = *head;
        *head = q->next;
        if (*head == NULL) {
            *tail = NULL;
        }
        snprintf(ap->err, sizeof(ap->err), "no reply within %d ms (%s)", ap->timeout_ms,
                 ready ? "too many calls in flight" : "redis not connected yet");
        fail_unsent(ap, q, SLUICE_ETIMEDOUT);
    }
}

/* Appends q to a list in deadline order (from its end: nearly always right there). */
static void list_insert(areq **head, areq **tail, areq *q) {
    areq *prev = NULL;
    for (areq *p = *head; p != NULL && p->deadline <= q->deadline; p = p->next) {
        prev = p;
    }
    q->next = prev != NULL ? prev->next : *head;
    if (prev != NULL) {
        prev->next = q;
    } else {
        *head = q;
    }
    if (q->next == NULL) {
        *tail = q;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Partitions                                                                               */

static void on_state(sluice_aconn *c, int ready, int status, void *arg);

/* Partition i, created (settings and a connection that starts connecting) on first use. NULL
 * when out of memory or when its name would be too long (err says). */
static apart *part_get(sluice_aproducer *ap, int i) {
    if (ap->part[i] != NULL) {
        return ap->part[i];
    }
    apart *pt = calloc(1, sizeof(*pt));
    if (pt == NULL) {
        snprintf(ap->err, sizeof(ap->err), "out of memory");
        return NULL;
    }
    pt->ap = ap;
    pt->index = i;
    sluice_drain_init(&pt->drain);
    if (ap->o.retry_after_max_s > 0) {
        pt->drain.max_s = ap->o.retry_after_max_s;
    }
    sluice_producer_options o = ap->o;
    o.queue = pt->name;
    sluice_conn_options co = ap->co;
    co.queue = pt->name;
    if (sluice_partition_name(ap->queue, i, pt->name, sizeof(pt->name)) != 0 ||
        sluice__admit_cfg_init(&pt->cfg, &o, ap->err, sizeof(ap->err)) != 0) {
        snprintf(ap->err, sizeof(ap->err), "partition %d of %s: no valid queue name", i, ap->queue);
        free(pt);
        return NULL;
    }
    pt->conn = sluice_aconn_new(ap->loop, &ap->url, &co, on_state, pt);
    if (pt->conn == NULL) {
        snprintf(ap->err, sizeof(ap->err), "out of memory");
        free(pt);
        return NULL;
    }
    ap->open++;
    ap->part[i] = pt;
    if (i >= ap->nmade) {
        ap->nmade = i + 1;
    }
    return pt;
}

static int part_ready(const apart *pt) {
    return pt != NULL && sluice_aconn_ready(pt->conn);
}

static void on_parts(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    sluice_aproducer *ap = arg;
    ap->parts_reading = 0;
    if (status == 0) {
        long long v = sluice_reply_ll(r, 1);
        ap->nparts = v < 1 ? 1 : v > SLUICE_PARTITIONS_MAX ? SLUICE_PARTITIONS_MAX : (int)v;
    }
    if (status == 0 || !sluice_status_is_transient(status)) {
        ap->parts_state = PARTS_KNOWN; /* an ACL without HGET: what was known stays */
        for (int i = 1; i < ap->nparts && !ap->closing; i++) {
            part_get(ap, i); /* connected before the first admission for it */
        }
    } else if (ap->parts_state == PARTS_READING) {
        ap->parts_state = PARTS_UNKNOWN; /* asked again by the next flush */
    }
    if (!ap->closing && ap->head != NULL) {
        uv_prepare_start(&ap->flusher, on_flush);
    }
}

/* Reads meta `partitions` on partition 0's connection (once at a time). */
static void parts_read(sluice_aproducer *ap) {
    apart *p0 = ap->part[0];
    if (ap->parts_reading || !part_ready(p0)) {
        return;
    }
    const char *argv[] = {"HGET", p0->cfg.keys.meta, "partitions"};
    if (sluice_aconn_command(p0->conn, 3, argv, NULL, ap->timeout_ms, on_parts, ap) == 0) {
        ap->parts_reading = 1;
        if (ap->parts_state == PARTS_UNKNOWN) {
            ap->parts_state = PARTS_READING;
        }
    }
}

static void on_parts_timer(uv_timer_t *t) {
    parts_read(t->data);
}

/* Sets q->part and q->alt: the blocking producer's rule (route.h; see the top of the file). */
static void route(sluice_aproducer *ap, areq *q) {
    sluice__route r = sluice__route_message(&q->m, ap->nparts, ap->depth, &ap->rnd);
    q->part = r.part;
    q->alt = r.alt;
}

/* Moves every unrouted request to its partition's list. */
static void route_waiting(sluice_aproducer *ap) {
    while (ap->head != NULL) {
        areq *q = ap->head;
        ap->head = q->next;
        if (ap->head == NULL) {
            ap->tail = NULL;
        }
        route(ap, q);
        apart *pt = part_get(ap, q->part);
        if (pt == NULL && q->alt != q->part && (pt = part_get(ap, q->alt)) != NULL) {
            q->part = q->alt;
        }
        if (pt == NULL) {
            fail_unsent(ap, q, SLUICE_ENOMEM);
            continue;
        }
        list_insert(&pt->head, &pt->tail, q);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Calls                                                                                    */

/* Delivers each request of a call, except one answered full that has a second partition to try:
 * that one goes there, once. */
static void finish_call(sluice_aproducer *ap, acall *k) {
    areq *q = k->first;
    for (size_t i = 0; i < k->n && q != NULL; i++) {
        areq *next = q->next;
        apart *alt = NULL;
        if (k->res[i].outcome == SLUICE_FULL && q->alt != q->part && !ap->closing &&
            (alt = part_get(ap, q->alt)) != NULL) {
            q->part = q->alt;
            list_insert(&alt->head, &alt->tail, q);
        } else {
            deliver(ap, q, &k->res[i]);
        }
        q = next;
    }
    free(k);
}

/* Makes the next loop iteration send what waits. */
static void kick(sluice_aproducer *ap) {
    if (!ap->closing) {
        uv_prepare_start(&ap->flusher, on_flush);
    }
}

/* Both replies of a call are in: with --wait-replicas, what the replicas did not confirm
 * becomes EUNKNOWN. */
static void call_done(sluice_aproducer *ap, acall *k) {
    if (--k->replies > 0) {
        return;
    }
    if (k->filled) {
        sluice__admit_confirm(&k->pt->cfg, k->replicas, k->res, k->n, ap->err, sizeof(ap->err));
    }
    finish_call(ap, k);
    kick(ap);
}

static void on_wait_reply(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    acall *k = arg;
    if (status == 0 && r->type == REDIS_REPLY_INTEGER) {
        k->replicas = r->integer;
    }
    call_done(k->pt->ap, k);
}

static void on_call_reply(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    acall *k = arg;
    apart *pt = k->pt;
    sluice_aproducer *ap = pt->ap;
    pt->inflight--;
    if (status == 0) {
        size_t admitted;
        if (sluice__admit_parse(r, k->n, &pt->drain, sluice_now_ms(), k->res, &admitted) != 0) {
            snprintf(ap->err, sizeof(ap->err), "unexpected reply to the admission call");
            sluice__admit_fail(k->res, k->n, SLUICE_EPROTO, 1, 0);
        } else {
            k->filled = 1;
            for (size_t i = 0; i < k->n; i++) {
                if (k->res[i].depth >= 0) {
                    ap->depth[pt->index] = k->res[i].depth;
                }
            }
        }
    } else {
        if (r != NULL && r->type == REDIS_REPLY_ERROR) {
            snprintf(ap->err, sizeof(ap->err), "%.*s", (int)r->len, r->str);
        } else {
            snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(c));
        }
        if (sent && (status == SLUICE_ECONN || status == SLUICE_ETIMEDOUT)) {
            status = SLUICE_EUNKNOWN; /* it may have run: never claim either way */
        }
        sluice__admit_fail(k->res, k->n, status, sent, ap->fail_open);
    }
    call_done(ap, k);
}

/* Bytes of one call's messages, at most (one message alone may be larger): coalescing many
 * callers' large bodies into one call must not make that call too big for the connection's
 * send buffer, which would fail the small requests next to them (docs/faults.md B18). */
#define ACALL_MAX_BYTES ((size_t)4 << 20)

/* Takes the next run of requests off the partition's list: up to max_batch and ACALL_MAX_BYTES
 * without idempotency keys, all with another partition to try or none, or one with a key.
 * Returns the first; *n is set. */
static areq *take_batch(apart *pt, size_t *n) {
    areq *first = pt->head, *last = first;
    size_t k = 1, bytes = first->bytes;
    if (first->m.idempotency_key == NULL) {
        while (k < pt->cfg.max_batch && last->next != NULL &&
               last->next->m.idempotency_key == NULL &&
               (last->next->alt != last->next->part) == (first->alt != first->part) &&
               bytes + last->next->bytes <= ACALL_MAX_BYTES) {
            last = last->next;
            bytes += last->bytes;
            k++;
        }
    }
    pt->head = last->next;
    if (pt->head == NULL) {
        pt->tail = NULL;
    }
    last->next = NULL;
    *n = k;
    return first;
}

/* Builds and writes one call on the partition's connection. Returns 0, or a status after
 * failing its requests. */
static int send_call(apart *pt) {
    sluice_aproducer *ap = pt->ap;
    size_t n;
    areq *first = take_batch(pt, &n);
    acall *k = malloc(sizeof(*k) + n * sizeof(k->res[0]));
    if (k == NULL) {
        while (first != NULL) {
            areq *next = first->next;
            fail_unsent(ap, first, SLUICE_ENOMEM);
            first = next;
        }
        return SLUICE_ENOMEM;
    }
    k->pt = pt;
    k->first = first;
    k->n = n;
    k->replies = 1;
    k->replicas = -1;
    k->filled = 0;
    size_t i = 0;
    for (areq *q = first; q != NULL; q = q->next) {
        ap->scratch[i++] = q->m;
    }
    sluice__admit_call call;
    int st = sluice__admit_call_build(&call, &pt->cfg, ap->scratch, n, ap->err, sizeof(ap->err));
    if (st == 0 && first->alt != first->part) {
        sluice__admit_call_tentative(&call); /* a full one is counted where its second try ends */
    }
    if (st == 0) {
        uint64_t now = uv_now(ap->loop);
        int left = first->deadline > now ? (int)(first->deadline - now) : 1;
        st = sluice_aconn_fcall(pt->conn, call.fn, call.nkeys, call.keys, call.keylens, call.nargs,
                                call.args, call.arglens, left, on_call_reply, k);
        if (st == SLUICE_ETOOBIG) {
            /* the connection's send buffer is full: Redis cannot take more now, the
             * messages themselves are fine - a transient refusal (503, not 500) */
            st = SLUICE_EBUSY;
        }
        if (st != 0) {
            snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(pt->conn));
        } else if (pt->cfg.wait_replicas > 0) {
            /* right behind it on the same connection: the replicas confirm it (or not) */
            const char *argv[] = {"WAIT", pt->cfg.wait_n, pt->cfg.wait_ms};
            if (sluice_aconn_command(pt->conn, 3, argv, NULL, left + pt->cfg.wait_timeout_ms,
                                     on_wait_reply, k) == 0) {
                k->replies++;
            } /* else replicas stays -1: what is admitted is reported unknown */
        }
        sluice__admit_call_free(&call);
    }
    if (st != 0) {
        sluice__admit_fail(k->res, n, st, 0, ap->fail_open);
        finish_call(ap, k);
        return st;
    }
    pt->inflight++;
    ap->counters.calls++;
    return 0;
}

static void on_wait_timer(uv_timer_t *t) {
    flush(t->data);
}

/* Arms the wait timer for the earliest deadline of a waiting request. */
static void arm_wait(sluice_aproducer *ap) {
    if (ap->closing) {
        return;
    }
    uint64_t due = ap->head != NULL ? ap->head->deadline : UINT64_MAX;
    for (int i = 0; i < ap->nmade; i++) {
        if (ap->part[i] != NULL && ap->part[i]->head != NULL && ap->part[i]->head->deadline < due) {
            due = ap->part[i]->head->deadline;
        }
    }
    if (due != UINT64_MAX) {
        uint64_t now = uv_now(ap->loop);
        uv_timer_start(&ap->wait_timer, on_wait_timer, due > now ? due - now : 0, 0);
    }
}

/* Fails what waits for a partition that is down; sends what waits for a ready one. */
static void part_flush(apart *pt) {
    sluice_aproducer *ap = pt->ap;
    if (pt->head == NULL) {
        return;
    }
    if (!part_ready(pt)) {
        if (pt->down) {
            snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(pt->conn));
            fail_list(ap, &pt->head, &pt->tail, SLUICE_ECONN);
        }
        return;
    }
    while (!ap->closing && pt->head != NULL && pt->inflight < ap->max_inflight && part_ready(pt)) {
        if (send_call(pt) == SLUICE_ENOMEM) {
            break;
        }
    }
}

static void flush(sluice_aproducer *ap) {
    uv_prepare_stop(&ap->flusher);
    uv_timer_stop(&ap->wait_timer);
    apart *p0 = ap->part[0];
    for (int i = 0; i < ap->nmade && !ap->closing; i++) {
        if (ap->part[i] != NULL) {
            expire_list(ap, &ap->part[i]->head, &ap->part[i]->tail, part_ready(ap->part[i]));
        }
    }
    if (!ap->closing) {
        expire_list(ap, &ap->head, &ap->tail, part_ready(p0));
    }
    if (!ap->closing && ap->head != NULL) {
        if (ap->parts_state == PARTS_KNOWN) {
            route_waiting(ap);
        } else if (part_ready(p0)) {
            parts_read(ap); /* routed once the count is known */
        } else if (p0->down) {
            snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(p0->conn));
            fail_list(ap, &ap->head, &ap->tail, SLUICE_ECONN);
        }
    }
    for (int i = 0; i < ap->nmade && !ap->closing; i++) {
        if (ap->part[i] != NULL) {
            part_flush(ap->part[i]);
        }
    }
    arm_wait(ap);
}

/* ---------------------------------------------------------------------------------------- */
/* Drain-rate sampling                                                                      */

static void on_acked(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    apart *pt = arg;
    pt->sampling = 0;
    if (status == 0 && r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL)) {
        sluice_drain_sample(&pt->drain, sluice_now_ms(), r->str ? atoll(r->str) : 0);
    }
}

static void on_drain_timer(uv_timer_t *t) {
    sluice_aproducer *ap = t->data;
    for (int i = 0; i < ap->nmade && !ap->closing; i++) {
        apart *pt = ap->part[i];
        if (pt == NULL || pt->sampling || !part_ready(pt)) {
            continue;
        }
        const char *argv[] = {"HGET", pt->cfg.keys.stats, "acked"};
        if (sluice_aconn_command(pt->conn, 3, argv, NULL, 0, on_acked, pt) == 0) {
            pt->sampling = 1;
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Life cycle                                                                               */

static void on_state(sluice_aconn *c, int ready, int status, void *arg) {
    apart *pt = arg;
    sluice_aproducer *ap = pt->ap;
    pt->down = !ready;
    if (!ready) {
        snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(c));
        if (status == SLUICE_ETLS && ap->refused_cb != NULL) {
            ap->refused_cb(ap, status, ap->refused_arg);
        }
    } else if (pt->index == 0 && ap->parts_state == PARTS_UNKNOWN) {
        parts_read(ap);
    }
    kick(ap);
}

static void init_handles(sluice_aproducer *ap, unsigned drain_sample_ms) {
    uv_prepare_init(ap->loop, &ap->flusher);
    uv_timer_init(ap->loop, &ap->wait_timer);
    uv_timer_init(ap->loop, &ap->drain_timer);
    uv_timer_init(ap->loop, &ap->parts_timer);
    ap->flusher.data = ap->wait_timer.data = ap->drain_timer.data = ap->parts_timer.data = ap;
    ap->open += 4;
    if (drain_sample_ms > 0) {
        uv_timer_start(&ap->drain_timer, on_drain_timer, drain_sample_ms, drain_sample_ms);
        uv_unref((uv_handle_t *)&ap->drain_timer);
    }
    uv_timer_start(&ap->parts_timer, on_parts_timer, PARTS_CHECK_MS, PARTS_CHECK_MS);
    uv_unref((uv_handle_t *)&ap->parts_timer);
}

int sluice_aproducer_new(uv_loop_t *loop, const sluice_producer_options *o,
                         const sluice_aproducer_options *ao, sluice_aproducer **out, char *err,
                         size_t errlen) {
    char ebuf[256];
    sluice_aproducer_options dao;
    if (err == NULL) {
        err = ebuf;
        errlen = sizeof(ebuf);
    }
    if (out == NULL || loop == NULL || o == NULL) {
        snprintf(err, errlen, "NULL loop, options or result pointer");
        return SLUICE_EINVAL;
    }
    *out = NULL;
    sluice_producer_options po; /* the caller's options as this library lays them out */
    sluice_producer_options_init(&po);
    sluice__options_take(&po, sizeof(po), o);
    o = &po;
    sluice_aproducer_options_init(&dao);
    if (ao != NULL) {
        sluice__options_take(&dao, sizeof(dao), ao);
    }
    ao = &dao;
    sluice_aproducer *ap = calloc(1, sizeof(*ap));
    if (ap == NULL) {
        return SLUICE_ENOMEM;
    }
    ap->loop = loop;
    sluice__admit_cfg cfg; /* checks the options before anything is started */
    int st = sluice__admit_cfg_init(&cfg, o, err, errlen);
    if (st == 0 &&
        sluice_client_setup(o->redis_url, o->connect_timeout_ms, o->command_timeout_ms,
                            o->force_eval, "producer", &ap->url, &ap->co, err, errlen) != 0) {
        st = SLUICE_EINVAL;
    }
    if (st == 0 && sluice_client_async_supported(&ap->url, err, errlen) != 0) {
        st = SLUICE_EINVAL;
    }
    if (st == 0) {
        sluice__client_tls(&ap->co, o->tls);
        st = sluice__tls_options_keep(&ap->co);
    }
    if (st == 0) {
        ap->scratch = calloc(cfg.max_batch, sizeof(*ap->scratch));
        st = ap->scratch != NULL ? 0 : SLUICE_ENOMEM;
    }
    if (st == 0) {
        snprintf(ap->queue, sizeof(ap->queue), "%s", o->queue);
        ap->o = *o;
        ap->o.queue = ap->queue;
        ap->o.redis_url = NULL; /* parsed into url; the caller's string may go */
        if (part_get(ap, 0) == NULL) {
            snprintf(err, errlen, "%s", ap->err);
            st = SLUICE_ENOMEM;
        }
    }
    if (st != 0) {
        memset(&ap->url, 0, sizeof(ap->url)); /* the password */
        sluice__tls_options_release(&ap->co);
        free(ap->scratch);
        free(ap);
        return st;
    }
    ap->nparts = 1;
    ap->rnd = (unsigned)sluice_now_ns();
    ap->max_queued = ao->max_queued > 0 ? ao->max_queued : DEFAULT_MAX_QUEUED;
    ap->max_inflight = ao->max_inflight > 0 ? ao->max_inflight : DEFAULT_MAX_INFLIGHT;
    ap->timeout_ms = o->command_timeout_ms > 0 ? o->command_timeout_ms : 5000;
    ap->fail_open = o->fail_open;
    ap->refused_cb = ao->refused_cb;
    ap->refused_arg = ao->refused_arg;
    init_handles(ap, ao->drain_sample_ms);
    *out = ap;
    return 0;
}

int sluice_aproducer_admit(sluice_aproducer *ap, const sluice_message *m, sluice_aproducer_cb cb,
                           void *arg) {
    if (ap == NULL || m == NULL || cb == NULL) {
        return SLUICE_EINVAL;
    }
    if (ap->closing) {
        snprintf(ap->err, sizeof(ap->err), "the producer is closing");
        return SLUICE_ECANCELED;
    }
    if (ap->queued >= ap->max_queued) {
        snprintf(ap->err, sizeof(ap->err), "%zu admissions already waiting; the limit is %zu",
                 ap->queued, ap->max_queued);
        return SLUICE_ETOOBIG;
    }
    int st = check_msg(ap, m);
    if (st != 0) {
        return st;
    }
    areq *q = req_new(m);
    if (q == NULL) {
        return SLUICE_ENOMEM;
    }
    q->cb = cb;
    q->arg = arg;
    q->deadline = uv_now(ap->loop) + (uint64_t)ap->timeout_ms;
    if (ap->tail != NULL) {
        ap->tail->next = q;
    } else {
        ap->head = q;
    }
    ap->tail = q;
    ap->queued++;
    uv_prepare_start(&ap->flusher, on_flush);
    return 0;
}

static void maybe_free(sluice_aproducer *ap) {
    if (--ap->open > 0) {
        return;
    }
    void (*closed_cb)(void *) = ap->closed_cb;
    void *arg = ap->closed_arg;
    for (int i = 0; i < ap->nmade; i++) {
        free(ap->part[i]);
    }
    memset(&ap->url, 0, sizeof(ap->url)); /* the password */
    sluice__tls_options_release(&ap->co);
    free(ap->scratch);
    free(ap);
    if (closed_cb != NULL) {
        closed_cb(arg);
    }
}

static void on_handle_closed(uv_handle_t *h) {
    maybe_free(h->data);
}

static void on_conn_closed(void *arg) {
    maybe_free(arg);
}

void sluice_aproducer_close(sluice_aproducer *ap, void (*closed_cb)(void *arg), void *arg) {
    if (ap == NULL || ap->closing) {
        return;
    }
    ap->closing = 1;
    ap->closed_cb = closed_cb;
    ap->closed_arg = arg;
    uv_close((uv_handle_t *)&ap->flusher, on_handle_closed);
    uv_close((uv_handle_t *)&ap->wait_timer, on_handle_closed);
    uv_close((uv_handle_t *)&ap->drain_timer, on_handle_closed);
    uv_close((uv_handle_t *)&ap->parts_timer, on_handle_closed);
    snprintf(ap->err, sizeof(ap->err), "the producer was closed");
    fail_list(ap, &ap->head, &ap->tail, SLUICE_ECANCELED);
    for (int i = 0; i < ap->nmade; i++) {
        if (ap->part[i] != NULL) {
            fail_list(ap, &ap->part[i]->head, &ap->part[i]->tail, SLUICE_ECANCELED);
            sluice_aconn_close(ap->part[i]->conn, on_conn_closed, ap); /* in flight: ECANCELED */
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Accessors                                                                                */

int sluice_aproducer_ready(const sluice_aproducer *ap) {
    return ap != NULL && !ap->closing && part_ready(ap->part[0]) && ap->parts_state == PARTS_KNOWN;
}

size_t sluice_aproducer_pending(const sluice_aproducer *ap) {
    return ap != NULL ? ap->queued : 0;
}

const char *sluice_aproducer_errstr(const sluice_aproducer *ap) {
    return ap != NULL ? ap->err : "";
}

const char *sluice_aproducer_queue(const sluice_aproducer *ap) {
    return ap->queue;
}

long long sluice_aproducer_capacity(const sluice_aproducer *ap) {
    return ap->part[0]->cfg.capacity;
}

/* The drain estimate of the whole queue: the sum of its partitions' known rates. */
static sluice_drain drain_all(const sluice_aproducer *ap) {
    sluice_drain d = ap->part[0]->drain;
    d.rate = -1.0;
    for (int i = 0; i < ap->nmade; i++) {
        if (ap->part[i] != NULL && ap->part[i]->drain.rate >= 0) {
            d.rate = (d.rate < 0 ? 0 : d.rate) + ap->part[i]->drain.rate;
        }
    }
    return d;
}

double sluice_aproducer_drain_rate(const sluice_aproducer *ap) {
    return drain_all(ap).rate;
}

unsigned sluice_aproducer_retry_after(const sluice_aproducer *ap, long long depth,
                                      long long capacity) {
    sluice_drain d = drain_all(ap);
    return sluice_drain_retry_after(&d, depth, capacity);
}

void sluice_aproducer_get_counters(const sluice_aproducer *ap, sluice_aproducer_counters *out) {
    *out = ap->counters;
}

/* ---------------------------------------------------------------------------------------- */
/* Queue info                                                                               */

typedef struct ainfo ainfo;
typedef struct ainfo_all ainfo_all;

/* One command of a partition's info round: which reply slot of the figures it fills. */
typedef struct ainfo_part {
    ainfo *ai;
    size_t i;
} ainfo_part;

/* The info round of one partition. */
struct ainfo {
    ainfo_all *all;
    apart *pt;
    int left;   /* replies still awaited */
    int status; /* the first failure */
    sluice_figures fig;
    ainfo_part parts[SLUICE_FIGURES_MAX_CMDS + 2];
    sluice_queue_info info; /* this partition's figures and limits */
};

/* The rounds of all partitions, and the caller waiting for their totals. */
struct ainfo_all {
    sluice_aproducer *ap;
    sluice_aproducer_info_cb cb;
    void *arg;
    int left;   /* rounds still running */
    int status; /* the first failure */
    int n;
    ainfo round[];
};

static int cmp_limit(const void *a, const void *b) {
    return strcmp(((const sluice_queue_limit *)a)->name, ((const sluice_queue_limit *)b)->name);
}

/* The limits hash (name -> "SCOPE SPEC"): the first SLUICE_QUEUE_INFO_LIMITS by name. */
static void info_limits(sluice_queue_info *in, const redisReply *l) {
    size_t all = l->type == REDIS_REPLY_ARRAY ? l->elements / 2 : 0;
    sluice_queue_limit tmp[64]; /* up to 64 read, sorted; the first SLUICE_QUEUE_INFO_LIMITS kept */
    size_t n = 0;
    for (size_t i = 0; i < all && n < sizeof(tmp) / sizeof(tmp[0]); i++) {
        sluice_queue_limit *q = &tmp[n++];
        memset(q, 0, sizeof(*q));
        snprintf(q->name, sizeof(q->name), "%.64s", l->element[2 * i]->str);
        if (sscanf(l->element[2 * i + 1]->str, "%15s %95s", q->scope, q->spec) != 2) {
            snprintf(q->scope, sizeof(q->scope), "?");
        }
    }
    qsort(tmp, n, sizeof(tmp[0]), cmp_limit);
    in->nlimits = all;
    for (size_t i = 0; i < n && i < SLUICE_QUEUE_INFO_LIMITS; i++) {
        in->limits[i] = tmp[i];
    }
}

/* How often each of them refused: the stats fields limited:NAME. */
static void info_refused(sluice_queue_info *in, const redisReply *stats) {
    for (size_t i = 0; i < in->nlimits && i < SLUICE_QUEUE_INFO_LIMITS; i++) {
        char field[80];
        snprintf(field, sizeof(field), "limited:%.64s", in->limits[i].name);
        in->limits[i].refused = sluice_reply_ll(sluice_reply_field(stats, field), 0);
    }
}

/* The queue as one: the partitions' figures added up (consumers: the most of any partition,
 * since one worker reads them all), the limits as partition 0 has them with each one's
 * refusals over all partitions, and each partition's depth, capacity and in flight. */
static void info_total(ainfo_all *all) {
    sluice_queue_info *t = &all->round[0].info;
    t->partitions = all->n;
    for (int i = 0; i < all->n; i++) {
        const sluice_queue_info *in = &all->round[i].info;
        int st = all->round[i].status;
        t->parts[i] = (sluice_queue_part){in->depth, in->capacity, in->pending, st};
        t->unavailable += st != 0;
        if (i == 0 || st != 0) { /* partition 0's are t's own (0 when it could not be read) */
            continue;
        }
        t->depth += in->depth;
        t->capacity += in->capacity;
        t->pending += in->pending;
        t->consumers = in->consumers > t->consumers ? in->consumers : t->consumers;
        t->admitted += in->admitted;
        t->rejected += in->rejected;
        t->acked += in->acked;
        t->retried += in->retried;
        t->dead += in->dead;
        t->limited += in->limited;
        t->paused += in->paused;
        for (size_t j = 0; j < t->nlimits && j < SLUICE_QUEUE_INFO_LIMITS; j++) {
            for (size_t k = 0; k < in->nlimits && k < SLUICE_QUEUE_INFO_LIMITS; k++) {
                if (strcmp(t->limits[j].name, in->limits[k].name) == 0) {
                    t->limits[j].refused += in->limits[k].refused;
                }
            }
        }
    }
    t->drain_rate = drain_all(all->ap).rate;
}

static void finish_info(ainfo_all *all);

static void info_round_done(ainfo *ai, int status) {
    if (status != 0 && ai->status == 0) {
        ai->status = status;
    }
    if (--ai->left > 0) {
        return;
    }
    ainfo_all *all = ai->all;
    sluice_aproducer *ap = all->ap;
    apart *pt = ai->pt;
    const sluice_figures *f = &ai->fig;
    if (ai->status == 0 && f->capacity == SLUICE_FIGURE_INVALID) {
        snprintf(ap->err, sizeof(ap->err), "invalid capacity in %s", pt->cfg.keys.meta);
        ai->status = SLUICE_ECONFIG;
    }
    sluice_queue_info *info = &ai->info;
    if (ai->status == 0) {
        sluice_figures_finish(&ai->fig, pt->cfg.backend);
        sluice_drain_sample(&pt->drain, sluice_now_ms(), f->counters[SLUICE_COUNTER_ACKED]);
        info->depth = f->depth;
        info->capacity = f->capacity >= 0 ? f->capacity : pt->cfg.capacity;
        info->pending = f->in_flight;
        info->consumers = f->consumers;
        info->admitted = f->counters[SLUICE_COUNTER_ADMITTED];
        info->rejected = f->counters[SLUICE_COUNTER_REJECTED];
        info->acked = f->counters[SLUICE_COUNTER_ACKED];
        info->retried = f->counters[SLUICE_COUNTER_RETRIED];
        info->dead = f->counters[SLUICE_COUNTER_DEAD];
        info->limited = f->counters[SLUICE_COUNTER_LIMITED];
        info->paused = (int)f->paused;
    } else if (all->status == 0) {
        all->status = ai->status;
    }
    if (--all->left > 0) {
        return;
    }
    finish_info(all);
}

/* Every round is over: the totals, or the failure. A partitioned queue with at least one
 * partition read is shown, its unreadable partitions marked (info_total). */
static void finish_info(ainfo_all *all) {
    int ok = 0;
    for (int i = 0; i < all->n; i++) {
        ok += all->round[i].status == 0;
    }
    if (all->n > 1 && ok > 0) {
        all->status = 0;
    }
    if (all->status == 0) {
        info_total(all);
    }
    all->cb(all->ap, all->status, all->status == 0 ? &all->round[0].info : NULL, all->arg);
    free(all);
}

static void on_info_reply(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    (void)sent;
    ainfo_part *part = arg;
    ainfo *ai = part->ai;
    /* the two limit reads come in order on the connection: the limits, then the refusals.
     * Best effort: an ACL without HGETALL shows no limits rather than failing the info. */
    if (part->i == SLUICE_FIGURES_MAX_CMDS) {
        if (status == 0) {
            info_limits(&ai->info, r);
        }
        status = status == SLUICE_ENOPERM ? 0 : status;
    } else if (part->i == SLUICE_FIGURES_MAX_CMDS + 1) {
        if (status == 0) {
            info_refused(&ai->info, r);
        }
        status = status == SLUICE_ENOPERM ? 0 : status;
    } else if (r != NULL && (status == 0 || r->type == REDIS_REPLY_ERROR)) {
        status = sluice_figures_parse(&ai->fig, ai->pt->cfg.backend, NULL, part->i, r);
    }
    info_round_done(ai, status);
}

/* Sends one partition's info round. Returns 0 when at least one command is out (the round ends
 * in info_round_done), else the status. */
static int info_round(ainfo *ai) {
    apart *pt = ai->pt;
    ai->left = 1; /* held until every command is queued */
    sluice_figures_init(&ai->fig);
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS + 2];
    size_t n = sluice_figures_commands(&pt->cfg.keys, pt->cfg.backend, cmds);
    cmds[n] = (sluice_figures_cmd){2, {"HGETALL", pt->cfg.keys.limits}};
    cmds[n + 1] = (sluice_figures_cmd){2, {"HGETALL", pt->cfg.keys.stats}};
    for (size_t i = 0; i < n + 2; i++) {
        size_t slot = i < n ? i : SLUICE_FIGURES_MAX_CMDS + (i - n); /* the limit reads */
        ai->parts[i] = (ainfo_part){ai, slot};
        int st = sluice_aconn_command(pt->conn, cmds[i].argc, cmds[i].argv, NULL, 0, on_info_reply,
                                      &ai->parts[i]);
        if (st == 0) {
            ai->left++;
        } else if (ai->status == 0) {
            ai->status = st;
        }
    }
    if (ai->left == 1) { /* nothing was queued: no reply will come */
        return ai->status;
    }
    info_round_done(ai, 0);
    return 0;
}

int sluice_aproducer_info(sluice_aproducer *ap, sluice_aproducer_info_cb cb, void *arg) {
    if (ap == NULL || cb == NULL) {
        return SLUICE_EINVAL;
    }
    if (ap->closing) {
        return SLUICE_ECANCELED;
    }
    int n = ap->parts_state == PARTS_KNOWN ? ap->nparts : 1, ready = 0;
    for (int i = 0; i < n; i++) {
        apart *pt = part_get(ap, i);
        if (pt == NULL) {
            return SLUICE_ENOMEM;
        }
        if (part_ready(pt)) {
            ready++;
        } else { /* a partitioned queue shows the others, this one marked */
            snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(pt->conn));
        }
    }
    if (ready < n && (n == 1 || ready == 0)) {
        return SLUICE_ECONN;
    }
    ainfo_all *all = calloc(1, sizeof(*all) + (size_t)n * sizeof(all->round[0]));
    if (all == NULL) {
        return SLUICE_ENOMEM;
    }
    all->ap = ap;
    all->cb = cb;
    all->arg = arg;
    all->n = n;
    all->left = n + 1; /* held until every round is sent */
    for (int i = 0; i < n; i++) {
        all->round[i].all = all;
        all->round[i].pt = ap->part[i];
        all->round[i].info.partitions = 1;
        int st = part_ready(ap->part[i]) ? info_round(&all->round[i]) : SLUICE_ECONN;
        if (st != 0) {
            all->round[i].status = st;
            all->status = all->status != 0 ? all->status : st;
            all->left--; /* that round never runs */
        }
    }
    if (--all->left == 0) { /* no round was sent: no callback will come */
        int st = all->status;
        free(all);
        return st;
    }
    return 0;
}
