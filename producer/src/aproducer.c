/* SPDX-License-Identifier: MIT */
/*
 * aproducer.c - the async producer (see aproducer.h).
 *
 * Admissions wait on a FIFO list until the prepare handle - which runs once per loop iteration,
 * just before the loop polls for I/O - turns runs of consecutive ones into calls of up to
 * max_batch envelopes (sluice__admit_call_build, the same call the blocking producer makes) and
 * writes them on the connection. A request is at any moment either on the waiting list or in
 * exactly one call, and its callback runs only from deliver(), which frees it: that is what keeps
 * "exactly once" true across replies, deadlines, connection loss and close.
 *
 * Deadlines: a waiting request is failed by the wait timer at its deadline; a written call
 * carries the remaining time of its oldest request as its aconn deadline (all requests of a
 * producer have the same timeout, so the list is in deadline order).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/aproducer.h"
#include "sluice/cli.h"
#include "sluice/client.h"
#include "sluice/figures.h"
#include "sluice/reply.h"
#include "sluice/url.h"

#include "admit.h"

#define DEFAULT_MAX_QUEUED   65536
#define DEFAULT_MAX_INFLIGHT 64

typedef struct areq areq;

/* One admission: the caller's callback and a private copy of its message. */
struct areq {
    areq *next;
    sluice_aproducer_cb cb;
    void *arg;
    uint64_t deadline;    /* loop time in ms */
    size_t bytes;         /* of the message's payload, headers, tenant and key */
    sluice_message m;     /* points into hdrs[] and the bytes after it */
    sluice_header hdrs[]; /* m.nheaders, then payload, names, values, tenant, key */
};

/* One admission call on the wire: its requests (linked, in order) and their results. */
typedef struct acall {
    sluice_aproducer *ap;
    areq *first;
    size_t n;
    int replies;        /* still to come: the admission's, and the WAIT's (--wait-replicas) */
    long long replicas; /* the WAIT's answer; -1 none */
    int filled;         /* res[] holds each message's outcome from the admission's reply */
    sluice_admit_result res[];
} acall;

struct sluice_aproducer {
    uv_loop_t *loop;
    sluice__admit_cfg cfg;
    sluice_aconn *conn;
    sluice_drain drain;
    uv_prepare_t flusher;   /* sends what waits, once per loop iteration */
    uv_timer_t wait_timer;  /* the oldest waiting request's deadline */
    uv_timer_t drain_timer; /* periodic read of the acked counter (unref'd) */
    areq *head, *tail;      /* waiting, in submission order */
    size_t queued;          /* accepted, not yet called back */
    size_t inflight;        /* calls written, not yet answered */
    size_t max_queued, max_inflight;
    sluice_message *scratch; /* max_batch entries, for building one call */
    int timeout_ms;
    int fail_open;
    int down;     /* the connection failed and waits to retry: fail fast */
    int sampling; /* a read of the acked counter is in flight */
    int closing;
    int open; /* handles and the connection not yet closed */
    void (*closed_cb)(void *arg);
    void *closed_arg;
    sluice_aproducer_counters counters;
    char queue[SLUICE_QUEUE_NAME_MAX + 1];
    char err[512];
};

static void flush(sluice_aproducer *ap);

void sluice_aproducer_options_init(sluice_aproducer_options *o) {
    memset(o, 0, sizeof(*o));
    o->max_queued = DEFAULT_MAX_QUEUED;
    o->max_inflight = DEFAULT_MAX_INFLIGHT;
}

/* ---------------------------------------------------------------------------------------- */
/* Requests                                                                                 */

/* Checks what sluice__admit_call_build would refuse, so that admit() can refuse it at once. */
static int check_msg(sluice_aproducer *ap, const sluice_message *m) {
    return sluice__admit_check_msg(&ap->cfg, m, ap->err, sizeof(ap->err));
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

/* Fails every request waiting now (not those that callbacks submit meanwhile). */
static void fail_waiting(sluice_aproducer *ap, int status) {
    areq *q = ap->head;
    ap->head = ap->tail = NULL;
    while (q != NULL) {
        areq *next = q->next;
        fail_unsent(ap, q, status);
        q = next;
    }
}

/* Fails the waiting requests whose deadline has passed. */
static void expire(sluice_aproducer *ap) {
    uint64_t now = uv_now(ap->loop);
    while (ap->head != NULL && ap->head->deadline <= now) {
        areq *q = ap->head;
        ap->head = q->next;
        if (ap->head == NULL) {
            ap->tail = NULL;
        }
        snprintf(ap->err, sizeof(ap->err), "no reply within %d ms (%s)", ap->timeout_ms,
                 sluice_aproducer_ready(ap) ? "too many calls in flight"
                                            : "redis not connected yet");
        fail_unsent(ap, q, SLUICE_ETIMEDOUT);
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Calls                                                                                    */

static void finish_call(sluice_aproducer *ap, acall *k) {
    areq *q = k->first;
    for (size_t i = 0; i < k->n && q != NULL; i++) {
        areq *next = q->next;
        deliver(ap, q, &k->res[i]);
        q = next;
    }
    free(k);
}

static void on_flush(uv_prepare_t *h) {
    flush(h->data);
}

/* Makes the next loop iteration send what waits. */
static void kick(sluice_aproducer *ap) {
    if (!ap->closing && ap->head != NULL) {
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
        sluice__admit_confirm(&ap->cfg, k->replicas, k->res, k->n, ap->err, sizeof(ap->err));
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
    call_done(k->ap, k);
}

static void on_call_reply(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    acall *k = arg;
    sluice_aproducer *ap = k->ap;
    ap->inflight--;
    if (status == 0) {
        size_t admitted;
        if (sluice__admit_parse(r, k->n, &ap->drain, sluice_now_ms(), k->res, &admitted) != 0) {
            snprintf(ap->err, sizeof(ap->err), "unexpected reply to the admission call");
            sluice__admit_fail(k->res, k->n, SLUICE_EPROTO, 1, 0);
        } else {
            k->filled = 1;
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

/* Takes the next run of requests off the waiting list: up to max_batch and ACALL_MAX_BYTES
 * without idempotency keys, or one with a key. Returns the first; *n is set. */
static areq *take_batch(sluice_aproducer *ap, size_t *n) {
    areq *first = ap->head, *last = first;
    size_t k = 1, bytes = first->bytes;
    if (first->m.idempotency_key == NULL) {
        while (k < ap->cfg.max_batch && last->next != NULL &&
               last->next->m.idempotency_key == NULL &&
               bytes + last->next->bytes <= ACALL_MAX_BYTES) {
            last = last->next;
            bytes += last->bytes;
            k++;
        }
    }
    ap->head = last->next;
    if (ap->head == NULL) {
        ap->tail = NULL;
    }
    last->next = NULL;
    *n = k;
    return first;
}

/* Builds and writes one call. Returns 0, or a status after failing its requests. */
static int send_call(sluice_aproducer *ap) {
    size_t n;
    areq *first = take_batch(ap, &n);
    acall *k = malloc(sizeof(*k) + n * sizeof(k->res[0]));
    if (k == NULL) {
        while (first != NULL) {
            areq *next = first->next;
            fail_unsent(ap, first, SLUICE_ENOMEM);
            first = next;
        }
        return SLUICE_ENOMEM;
    }
    k->ap = ap;
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
    int st = sluice__admit_call_build(&call, &ap->cfg, ap->scratch, n, ap->err, sizeof(ap->err));
    if (st == 0) {
        uint64_t now = uv_now(ap->loop);
        int left = first->deadline > now ? (int)(first->deadline - now) : 1;
        st = sluice_aconn_fcall(ap->conn, call.fn, call.nkeys, call.keys, call.keylens, call.nargs,
                                call.args, call.arglens, left, on_call_reply, k);
        if (st == SLUICE_ETOOBIG) {
            /* the connection's send buffer is full: Redis cannot take more now, the
             * messages themselves are fine - a transient refusal (503, not 500) */
            st = SLUICE_EBUSY;
        }
        if (st != 0) {
            snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(ap->conn));
        } else if (ap->cfg.wait_replicas > 0) {
            /* right behind it on the same connection: the replicas confirm it (or not) */
            const char *argv[] = {"WAIT", ap->cfg.wait_n, ap->cfg.wait_ms};
            if (sluice_aconn_command(ap->conn, 3, argv, NULL, left + ap->cfg.wait_timeout_ms,
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
    ap->inflight++;
    ap->counters.calls++;
    return 0;
}

static void on_wait_timer(uv_timer_t *t) {
    flush(t->data);
}

/* Arms the wait timer for the oldest waiting request's deadline. */
static void arm_wait(sluice_aproducer *ap) {
    if (ap->closing || ap->head == NULL) {
        return;
    }
    uint64_t now = uv_now(ap->loop);
    uint64_t due = ap->head->deadline > now ? ap->head->deadline - now : 0;
    uv_timer_start(&ap->wait_timer, on_wait_timer, due, 0);
}

static void flush(sluice_aproducer *ap) {
    uv_prepare_stop(&ap->flusher);
    uv_timer_stop(&ap->wait_timer);
    if (ap->closing) {
        return;
    }
    expire(ap);
    if (ap->closing) {
        return;
    }
    if (!sluice_aconn_ready(ap->conn)) {
        if (ap->down) {
            snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(ap->conn));
            fail_waiting(ap, SLUICE_ECONN);
        }
        arm_wait(ap);
        return;
    }
    while (!ap->closing && ap->head != NULL && ap->inflight < ap->max_inflight &&
           sluice_aconn_ready(ap->conn)) {
        if (send_call(ap) == SLUICE_ENOMEM) {
            break;
        }
    }
    arm_wait(ap);
}

/* ---------------------------------------------------------------------------------------- */
/* Drain-rate sampling                                                                      */

static void on_acked(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_aproducer *ap = arg;
    ap->sampling = 0;
    if (status == 0 && r != NULL && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL)) {
        sluice_drain_sample(&ap->drain, sluice_now_ms(), r->str ? atoll(r->str) : 0);
    }
}

static void on_drain_timer(uv_timer_t *t) {
    sluice_aproducer *ap = t->data;
    if (ap->sampling || ap->closing || !sluice_aconn_ready(ap->conn)) {
        return;
    }
    const char *argv[] = {"HGET", ap->cfg.keys.stats, "acked"};
    if (sluice_aconn_command(ap->conn, 3, argv, NULL, 0, on_acked, ap) == 0) {
        ap->sampling = 1;
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Life cycle                                                                               */

static void on_state(sluice_aconn *c, int ready, int status, void *arg) {
    sluice_aproducer *ap = arg;
    ap->down = !ready;
    if (!ready) {
        snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(c));
    }
    kick(ap);
}

static int start_conn(sluice_aproducer *ap, const sluice_producer_options *o, char *err,
                      size_t errlen) {
    sluice_url url;
    sluice_conn_options co;
    if (sluice_client_setup(o->redis_url, o->connect_timeout_ms, o->command_timeout_ms,
                            o->force_eval, "producer", &url, &co, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    co.queue = o->queue;
    ap->conn = sluice_aconn_new(ap->loop, &url, &co, on_state, ap);
    memset(&url, 0, sizeof(url)); /* the password */
    return ap->conn != NULL ? 0 : SLUICE_ENOMEM;
}

static void init_handles(sluice_aproducer *ap, unsigned drain_sample_ms) {
    uv_prepare_init(ap->loop, &ap->flusher);
    uv_timer_init(ap->loop, &ap->wait_timer);
    uv_timer_init(ap->loop, &ap->drain_timer);
    ap->flusher.data = ap->wait_timer.data = ap->drain_timer.data = ap;
    ap->open = 4; /* three handles and the connection */
    if (drain_sample_ms > 0) {
        uv_timer_start(&ap->drain_timer, on_drain_timer, drain_sample_ms, drain_sample_ms);
        uv_unref((uv_handle_t *)&ap->drain_timer);
    }
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
    sluice_aproducer_options_init(&dao);
    if (ao == NULL) {
        ao = &dao;
    }
    sluice_aproducer *ap = calloc(1, sizeof(*ap));
    if (ap == NULL) {
        return SLUICE_ENOMEM;
    }
    ap->loop = loop;
    int st = sluice__admit_cfg_init(&ap->cfg, o, err, errlen);
    if (st == 0) {
        ap->scratch = calloc(ap->cfg.max_batch, sizeof(*ap->scratch));
        st = ap->scratch != NULL ? start_conn(ap, o, err, errlen) : SLUICE_ENOMEM;
    }
    if (st != 0) {
        free(ap->scratch);
        free(ap);
        return st;
    }
    snprintf(ap->queue, sizeof(ap->queue), "%s", o->queue);
    ap->max_queued = ao->max_queued > 0 ? ao->max_queued : DEFAULT_MAX_QUEUED;
    ap->max_inflight = ao->max_inflight > 0 ? ao->max_inflight : DEFAULT_MAX_INFLIGHT;
    ap->timeout_ms = o->command_timeout_ms > 0 ? o->command_timeout_ms : 5000;
    ap->fail_open = o->fail_open;
    sluice_drain_init(&ap->drain);
    if (o->retry_after_max_s > 0) {
        ap->drain.max_s = o->retry_after_max_s;
    }
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
    snprintf(ap->err, sizeof(ap->err), "the producer was closed");
    fail_waiting(ap, SLUICE_ECANCELED);
    sluice_aconn_close(ap->conn, on_conn_closed, ap); /* in-flight calls: ECANCELED */
}

/* ---------------------------------------------------------------------------------------- */
/* Accessors                                                                                */

int sluice_aproducer_ready(const sluice_aproducer *ap) {
    return ap != NULL && !ap->closing && sluice_aconn_ready(ap->conn);
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
    return ap->cfg.capacity;
}

double sluice_aproducer_drain_rate(const sluice_aproducer *ap) {
    return ap->drain.rate;
}

unsigned sluice_aproducer_retry_after(const sluice_aproducer *ap, long long depth,
                                      long long capacity) {
    return sluice_drain_retry_after(&ap->drain, depth, capacity);
}

void sluice_aproducer_get_counters(const sluice_aproducer *ap, sluice_aproducer_counters *out) {
    *out = ap->counters;
}

/* ---------------------------------------------------------------------------------------- */
/* Queue info                                                                               */

typedef struct ainfo ainfo;

/* One command of the info round: which reply slot of the figures it fills. */
typedef struct ainfo_part {
    ainfo *ai;
    size_t i;
} ainfo_part;

struct ainfo {
    sluice_aproducer *ap;
    sluice_aproducer_info_cb cb;
    void *arg;
    int left;   /* replies still awaited */
    int status; /* the first failure */
    sluice_figures fig;
    ainfo_part parts[SLUICE_FIGURES_MAX_CMDS + 2];
    sluice_queue_info info; /* the limits, filled as their replies come */
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

static void info_part_done(ainfo *ai, int status) {
    if (status != 0 && ai->status == 0) {
        ai->status = status;
    }
    if (--ai->left > 0) {
        return;
    }
    sluice_aproducer *ap = ai->ap;
    const sluice_figures *f = &ai->fig;
    if (ai->status == 0 && f->capacity == SLUICE_FIGURE_INVALID) {
        snprintf(ap->err, sizeof(ap->err), "invalid capacity in %s", ap->cfg.keys.meta);
        ai->status = SLUICE_ECONFIG;
    }
    sluice_queue_info *info = &ai->info;
    if (ai->status == 0) {
        sluice_figures_finish(&ai->fig, ap->cfg.backend);
        sluice_drain_sample(&ap->drain, sluice_now_ms(), f->counters[SLUICE_COUNTER_ACKED]);
        info->depth = f->depth;
        info->capacity = f->capacity >= 0 ? f->capacity : ap->cfg.capacity;
        info->pending = f->in_flight;
        info->consumers = f->consumers;
        info->admitted = f->counters[SLUICE_COUNTER_ADMITTED];
        info->rejected = f->counters[SLUICE_COUNTER_REJECTED];
        info->acked = f->counters[SLUICE_COUNTER_ACKED];
        info->retried = f->counters[SLUICE_COUNTER_RETRIED];
        info->dead = f->counters[SLUICE_COUNTER_DEAD];
        info->limited = f->counters[SLUICE_COUNTER_LIMITED];
        info->drain_rate = ap->drain.rate;
    }
    ai->cb(ap, ai->status, ai->status == 0 ? info : NULL, ai->arg);
    free(ai);
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
        status = sluice_figures_parse(&ai->fig, ai->ap->cfg.backend, NULL, part->i, r);
    }
    info_part_done(ai, status);
}

int sluice_aproducer_info(sluice_aproducer *ap, sluice_aproducer_info_cb cb, void *arg) {
    if (ap == NULL || cb == NULL) {
        return SLUICE_EINVAL;
    }
    if (ap->closing) {
        return SLUICE_ECANCELED;
    }
    if (!sluice_aconn_ready(ap->conn)) {
        snprintf(ap->err, sizeof(ap->err), "%s", sluice_aconn_errstr(ap->conn));
        return SLUICE_ECONN;
    }
    ainfo *ai = calloc(1, sizeof(*ai));
    if (ai == NULL) {
        return SLUICE_ENOMEM;
    }
    ai->ap = ap;
    ai->cb = cb;
    ai->arg = arg;
    ai->left = 1; /* held until every command is queued */
    sluice_figures_init(&ai->fig);
    sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS + 2];
    size_t n = sluice_figures_commands(&ap->cfg.keys, ap->cfg.backend, cmds);
    cmds[n] = (sluice_figures_cmd){2, {"HGETALL", ap->cfg.keys.limits}};
    cmds[n + 1] = (sluice_figures_cmd){2, {"HGETALL", ap->cfg.keys.stats}};
    for (size_t i = 0; i < n + 2; i++) {
        size_t slot = i < n ? i : SLUICE_FIGURES_MAX_CMDS + (i - n); /* the limit reads */
        ai->parts[i] = (ainfo_part){ai, slot};
        int st = sluice_aconn_command(ap->conn, cmds[i].argc, cmds[i].argv, NULL, 0, on_info_reply,
                                      &ai->parts[i]);
        if (st == 0) {
            ai->left++;
        } else if (ai->status == 0) {
            ai->status = st;
        }
    }
    if (--ai->left == 0) { /* nothing was queued: no callback will come */
        int st = ai->status;
        free(ai);
        return st;
    }
    return 0;
}
