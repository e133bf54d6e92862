/* SPDX-License-Identifier: MIT */
/*
 * jobs.c - one entry's way through the worker: decode, hand to the handler, take its verdict,
 * then settle it in Redis. DONE entries are acknowledged in batches, one sluice_ack call per
 * loop iteration (XACK + XDEL + counters in one atomic step, so depth never leaks); RETRY and
 * FAIL have their own calls. A job keeps its slot until Redis confirmed the settle call: "in
 * flight" means pending in Redis, and that never exceeds the concurrency.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "sluice/buf.h"
#include "sluice/clock.h"
#include "sluice/keys.h"
#include "sluice/log.h"

#include "http_delivery.h"
#include "worker_internal.h"

const double sluice_worker_latency_bounds[SLUICE_WORKER_LATENCY_BUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0};

static void list_unlink(job *j) {
    j->prev->next = j->next;
    j->next->prev = j->prev;
    j->prev = j->next = j;
}

job *sluice__job_new(sluice_worker *w, const char *id, size_t idlen, const char *raw, size_t rawlen,
                     long long deliveries) {
    job *j = w->free_jobs;
    if (j != NULL) {
        w->free_jobs = j->next;
    } else if ((j = malloc(sizeof(*j))) == NULL) {
        return NULL;
    }
    memset(j, 0, offsetof(job, hdrs));
    j->w = w;
    if (idlen >= sizeof(j->id)) {
        idlen = sizeof(j->id) - 1;
    }
    memcpy(j->id, id, idlen);
    j->id[idlen] = '\0';
    j->pub.id = j->id;
    j->pub.deliveries = deliveries;
    j->pub.admitted_ms = w->o.backend == SLUICE_BACKEND_STREAM ? strtoull(j->id, NULL, 10) : 0;
    if (raw == NULL) {
        j->cleanup = 1;
    } else if ((j->raw = malloc(rawlen ? rawlen : 1)) == NULL) {
        free(j);
        return NULL;
    } else {
        memcpy(j->raw, raw, rawlen);
        j->raw_len = rawlen;
    }
    j->next = w->in_flight.next;
    j->prev = &w->in_flight;
    w->in_flight.next->prev = j;
    w->in_flight.next = j;
    w->n_in_flight++;
    sluice__worker_count_taken(w);
    return j;
}

int sluice__job_set_lane(job *j, const char *tenant, size_t len) {
    if ((j->lane = malloc(len + 1)) == NULL) {
        return SLUICE_ENOMEM;
    }
    memcpy(j->lane, tenant, len);
    j->lane[len] = '\0';
    j->lane_len = len;
    return 0;
}

const char *sluice__job_stream(const job *j, size_t *len, int *owned) {
    *owned = 0;
    if (j->lane == NULL || j->lane_len == 0) {
        *len = strlen(j->w->keys.stream);
        return j->w->keys.stream;
    }
    char *k = sluice__key_new(&j->w->keys, SLUICE_KEY_LANE, j->lane, j->lane_len, len);
    *owned = k != NULL;
    return k;
}

/* Back to the free list (after its settle call and, when it timed out, its handler's end). */
static void job_recycle(job *j) {
    sluice_worker *w = j->w;
    free(j->raw);
    j->raw = NULL;
    free(j->lane);
    j->lane = NULL;
    j->next = w->free_jobs;
    w->free_jobs = j;
}

void sluice__job_release(job *j) {
    sluice_worker *w = j->w;
    list_unlink(j);
    w->n_in_flight--;
    if (j->handler_out) { /* timed out: its slot is free, its memory the handler's for now */
        j->parked = 1;
        j->next = w->expired.next;
        j->prev = &w->expired;
        w->expired.next->prev = j;
        w->expired.next = j;
        return;
    }
    job_recycle(j);
}

void sluice__jobs_free_all(sluice_worker *w) {
    while (w->in_flight.next != &w->in_flight) {
        w->in_flight.next->handler_out = 0;
        sluice__job_release(w->in_flight.next);
    }
    while (w->expired.next != &w->expired) {
        job *j = w->expired.next;
        list_unlink(j);
        job_recycle(j);
    }
    while (w->free_jobs != NULL) {
        job *j = w->free_jobs;
        w->free_jobs = j->next;
        free(j);
    }
    free(w->ackq);
    w->ackq = NULL;
}

static void count_latency(sluice_worker *w, job *j) {
    double s = (double)(sluice_now_ns() - j->start_ns) / 1e9;
    size_t i = 0;
    while (i < SLUICE_WORKER_LATENCY_BUCKETS - 1 && s > sluice_worker_latency_bounds[i]) {
        i++;
    }
    w->st.latency_buckets[i]++;
    w->st.latency_sum_s += s;
}

/* The verdict's latency feeds the adaptive limit; its changes are logged at most every 5 s. */
static void adapt(sluice_worker *w, job *j) {
    uint64_t now = sluice_now_ns();
    sluice__adaptive_sample(&w->adaptive, j->start_ns, now, w->n_in_flight);
    int limit = sluice__adaptive_limit(&w->adaptive);
    if (limit != w->adaptive_logged && now / 1000000 - w->adaptive_log_ms >= 5000) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=concurrency limit=%d noload_ms=%.1f in_flight=%d", limit,
                   w->adaptive.noload_ns / 1e6, w->n_in_flight);
        w->adaptive_logged = limit;
        w->adaptive_log_ms = now / 1000000;
    }
}

/* Queues a DONE job for the next ack call. Out of memory: the entry stays pending in Redis and
 * is reclaimed after the visibility timeout; never lost. */
static void ackq_push(sluice_worker *w, job *j) {
    if (w->ackq_n == w->ackq_cap) {
        size_t cap = w->ackq_cap ? w->ackq_cap * 2 : 256;
        job **q = realloc(w->ackq, cap * sizeof(*q));
        if (q == NULL) {
            sluice__job_release(j);
            return;
        }
        w->ackq = q;
        w->ackq_cap = cap;
    }
    w->ackq[w->ackq_n++] = j;
}

static void on_settled(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    job *j = arg;
    sluice_worker *w = j->w;
    if (status != 0 && status != SLUICE_ECANCELED) {
        /* not settled: the entry stays pending and is reclaimed after the visibility timeout */
        w->st.redis_errors++;
        char q[600];
        SLUICE_LOG(SLUICE_LOG_WARN, "event=settle_failed id=%s status=%s detail=%s", j->id,
                   sluice_err_name(status), sluice_log_q(sluice_aconn_errstr(c), q, sizeof(q)));
    } else if (status == 0 && j->verdict != SLUICE_DONE && j->reason[0] != '\0') {
        w->st.dead++;
        char q[sizeof(j->reason) * 4 + 3];
        SLUICE_LOG(SLUICE_LOG_WARN, "event=dead_letter id=%s deliveries=%lld reason=%s", j->id,
                   j->pub.deliveries, sluice_log_q(j->reason, q, sizeof(q)));
    }
    if (status == 0 && j->verdict != SLUICE_RETRY) {
        sluice__worker_released(w); /* a retried entry stays pending: its lease goes on */
    }
    sluice__job_release(j);
    sluice__worker_kick(w);
}

void sluice__job_dead(job *j, const char *reason) {
    sluice_worker *w = j->w;
    char deliveries[24];
    snprintf(deliveries, sizeof(deliveries), "%lld", j->pub.deliveries);
    if (j->reason != reason) {
        snprintf(j->reason, sizeof(j->reason), "%s", reason);
    }
    if (j->verdict == SLUICE_DONE) {
        j->verdict = SLUICE_FAIL;
    }
    j->state = JOB_SETTLING;
    int st;
    if (w->o.backend == SLUICE_BACKEND_STREAM) {
        int owned;
        size_t len = 0;
        const char *stream = sluice__job_stream(j, &len, &owned);
        const char *keys[] = {stream, w->keys.dead, w->keys.stats};
        size_t klens[] = {len, strlen(w->keys.dead), strlen(w->keys.stats)};
        const char *args[] = {w->group, j->id, w->consumer, deliveries, j->reason};
        st = stream == NULL ? SLUICE_ENOMEM
                            : sluice_aconn_fcall(w->cmd, SLUICE_FN_DEAD, 3, keys, klens, 5, args,
                                                 NULL, 0, on_settled, j);
        if (owned) {
            free((void *)stream);
        }
    } else {
        const char *keys[] = {w->proc_key, w->keys.dead, w->keys.meta, w->keys.stats};
        const char *args[] = {(const char *)j->raw, w->consumer, deliveries, j->reason};
        size_t lens[] = {j->raw_len, strlen(w->consumer), strlen(deliveries), strlen(j->reason)};
        st = sluice_aconn_fcall(w->cmd, SLUICE_FN_LIST_DEAD, 4, keys, NULL, 4, args, lens, 0,
                                on_settled, j);
    }
    if (st != 0) {
        on_settled(w->cmd, st, 0, NULL, j);
    }
}

static void job_retry(job *j) {
    sluice_worker *w = j->w;
    if (j->pub.deliveries >= w->o.max_deliveries || w->o.backend != SLUICE_BACKEND_STREAM) {
        snprintf(j->reason, sizeof(j->reason), "%s",
                 w->o.backend == SLUICE_BACKEND_STREAM
                     ? "handler asked for a retry; max deliveries reached"
                     : "handler asked for a retry; the list backend has no redelivery");
        sluice__job_dead(j, j->reason);
        return;
    }
    /* backoff = base * 2^(deliveries-1), expressed as the idle time the entry is given so
     * that any worker's reclaim pass takes it once `backoff` has passed */
    long long backoff = w->o.retry_backoff_ms;
    for (long long i = 1; i < j->pub.deliveries && backoff < w->o.visibility_timeout_ms; i++) {
        backoff *= 2;
    }
    if (j->retry_after_ms > 0) { /* the back end said when (Retry-After) */
        backoff = j->retry_after_ms;
    }
    long long idle = w->o.visibility_timeout_ms - backoff;
    if (idle < 0) {
        idle = 0;
    }
    char idle_s[24];
    snprintf(idle_s, sizeof(idle_s), "%lld", idle);
    int owned;
    size_t len = 0;
    const char *stream = sluice__job_stream(j, &len, &owned);
    const char *keys[] = {stream, w->keys.stats};
    size_t klens[] = {len, strlen(w->keys.stats)};
    const char *args[] = {w->group, w->consumer, j->id, idle_s};
    j->state = JOB_SETTLING;
    w->st.retried++;
    if (stream == NULL || sluice_aconn_fcall(w->cmd, SLUICE_FN_RETRY, 2, keys, klens, 4, args, NULL,
                                             0, on_settled, j) != 0) {
        on_settled(w->cmd, stream == NULL ? SLUICE_ENOMEM : SLUICE_ECONN, 0, NULL, j);
    }
    if (owned) {
        free((void *)stream);
    }
}

static void job_verdict(job *j, sluice_verdict v, const char *reason) {
    sluice_worker *w = j->w;
    if (w->closing) {
        /* docs/faults.md F28: the connections are closed (or being freed) and the verdict
         * of a job that outlived the grace period says nothing about the message (its
         * handler was killed). The entry stays pending; another worker reclaims it. */
        w->st.abandoned++;
        SLUICE_LOG(SLUICE_LOG_INFO, "event=abandoned id=%s note=\"left pending\"", j->id);
        sluice__job_release(j);
        return;
    }
    if (w->o.on_verdict != NULL) {
        w->o.on_verdict(&j->pub, v, reason, w->o.on_verdict_arg);
    }
    count_latency(w, j);
    if (w->o.concurrency_min > 0) {
        adapt(w, j);
    }
    j->verdict = v;
    j->state = JOB_SETTLING;
    int last = sluice__worker_count_verdict(w);
    if (v == SLUICE_DONE) {
        ackq_push(w, j);
    } else if (v == SLUICE_RETRY) {
        job_retry(j);
    } else {
        w->st.failed++;
        sluice__job_dead(j, reason != NULL && reason[0] != '\0' ? reason : "handler failed");
    }
    if (last && !w->stopping) {
        sluice_worker_stop(w);
    }
}

void sluice_job_finish_reason(const sluice_job *pub, sluice_verdict v, const char *reason) {
    job *j = (job *)pub;
    if (j->handler_out) { /* the verdict of a timed-out job: its entry is retried already */
        j->handler_out = 0;
        if (j->parked) { /* settled: it waits in w->expired */
            sluice_worker *w = j->w;
            list_unlink(j);
            job_recycle(j);
            if (w->stopping) {
                sluice__worker_kick(w); /* the last one may end the stop */
            }
        }
        return;
    }
    if (j->state != JOB_HANDLING) {
        return; /* a second verdict for one job is ignored */
    }
    job_verdict(j, v, reason);
}

int sluice_job_abandoned(const sluice_job *pub) {
    return atomic_load(&((const job *)pub)->abandoned) != 0;
}

/* ---- handler timeouts ---- */

/* How late a deadline may be noticed, so that jobs read together expire in one pass. */
static uint64_t timeout_slack_ms(const sluice_worker *w) {
    uint64_t s = (uint64_t)w->o.handler_timeout_ms / 16;
    return s < 1 ? 1 : s > 50 ? 50 : s;
}

/* Arms the timer for the earliest deadline of a job in its handler (in_flight runs newest to
 * oldest, but reclaimed jobs join it too: the whole list is looked at). */
static void timeout_arm(sluice_worker *w) {
    if (w->o.handler_timeout_ms <= 0 || w->closing) {
        return;
    }
    uint64_t oldest = 0;
    for (job *j = w->in_flight.next; j != &w->in_flight; j = j->next) {
        if (j->state == JOB_HANDLING && !j->handler_out && (oldest == 0 || j->start_ns < oldest)) {
            oldest = j->start_ns;
        }
    }
    if (oldest == 0) {
        uv_timer_stop(&w->timeout_timer);
        return;
    }
    uint64_t due_ms = (oldest - 1) / 1000000 + (uint64_t)w->o.handler_timeout_ms + 1;
    uint64_t now = sluice_now_ns() / 1000000;
    uv_timer_start(&w->timeout_timer, sluice__jobs_timeout_cb,
                   (due_ms > now ? due_ms - now : 0) + timeout_slack_ms(w), 0);
}

/* The job passed its deadline: retried as if its handler had said RETRY; the handler is told
 * and keeps the job until its own verdict (ignored). */
static void job_expire(job *j) {
    sluice_worker *w = j->w;
    SLUICE_LOG(SLUICE_LOG_WARN, "event=handler_timeout id=%s deliveries=%lld timeout_ms=%d", j->id,
               j->pub.deliveries, w->o.handler_timeout_ms);
    atomic_store(&j->abandoned, 1);
    j->handler_out = 1;
    job_verdict(j, SLUICE_RETRY, NULL);
    if (w->o.http != NULL) {
        sluice__http_ops_of(w->o.http)->abandon(j); /* its request, waiting or under way */
    } else if (w->o.abandon_handler != NULL) {
        w->o.abandon_handler(w, &j->pub, w->o.handler_arg);
    }
}

void sluice__jobs_timeout_cb(uv_timer_t *t) {
    sluice_worker *w = t->data;
    uint64_t limit = (uint64_t)w->o.handler_timeout_ms * 1000000, now = sluice_now_ns();
    /* one job at a time: expiring one may settle (and unlink) it at once */
    for (int n = 0; n <= w->o.concurrency; n++) {
        job *due = NULL;
        for (job *j = w->in_flight.prev; j != &w->in_flight && due == NULL; j = j->prev) {
            if (j->state == JOB_HANDLING && !j->handler_out && now - j->start_ns >= limit) {
                due = j;
            }
        }
        if (due == NULL) {
            break;
        }
        job_expire(due);
    }
    timeout_arm(w);
}

void sluice_job_finish(const sluice_job *pub, sluice_verdict v) {
    sluice_job_finish_reason(pub, v, NULL);
}

static void work_cb(uv_work_t *req) {
    job *j = req->data;
    j->pool_verdict = j->w->o.handler(&j->pub, j->w->o.handler_arg);
}

static void after_work_cb(uv_work_t *req, int status) {
    job *j = req->data;
    sluice_job_finish(&j->pub, status == UV_ECANCELED ? SLUICE_RETRY : j->pool_verdict);
}

static int decode(job *j) {
    sluice_worker *w = j->w;
    const unsigned char *buf = j->raw;
    size_t len = j->raw_len;
    if (w->o.backend == SLUICE_BACKEND_LIST) {
        const unsigned char *sep = memchr(buf, ':', len);
        if (sep == NULL) {
            snprintf(j->reason, sizeof(j->reason), "list element without an id");
            return -1;
        }
        len -= (size_t)(sep + 1 - buf);
        buf = sep + 1;
    }
    sluice_envelope e;
    char err[160];
    if (sluice_envelope_decode(buf, len, 0, &e, j->hdrs, SLUICE_ENVELOPE_MAX_HEADERS, err,
                               sizeof(err)) != 0) {
        snprintf(j->reason, sizeof(j->reason), "undecodable envelope: %s", err);
        return -1;
    }
    j->pub.payload = e.payload;
    j->pub.payload_len = e.payload_len;
    j->pub.headers = e.headers;
    j->pub.nheaders = e.nheaders;
    j->pub.tenant = e.tenant;
    j->pub.tenant_len = e.tenant_len;
    return 0;
}

void sluice__job_dispatch(job *j) {
    sluice_worker *w = j->w;
    j->start_ns = sluice_now_ns();
    j->state = JOB_HANDLING;
    if (j->cleanup) { /* deleted by an operator while pending: just acknowledge it */
        j->verdict = SLUICE_DONE;
        j->state = JOB_SETTLING;
        ackq_push(w, j);
        return;
    }
    if (decode(j) != 0) {
        w->st.failed++;
        sluice__job_dead(j, j->reason);
        return;
    }
    if (j->pub.deliveries > w->o.max_deliveries) {
        snprintf(j->reason, sizeof(j->reason), "delivered %lld times; max deliveries is %d",
                 j->pub.deliveries, w->o.max_deliveries);
        sluice__job_dead(j, j->reason);
        return;
    }
    if (w->o.handler_timeout_ms > 0 && !uv_is_active((uv_handle_t *)&w->timeout_timer) &&
        (w->o.http != NULL || w->o.async_handler != NULL ||
         w->o.handler_mode != SLUICE_HANDLER_INLINE)) {
        timeout_arm(w);
    }
    if (w->o.http != NULL) {
        sluice__http_ops_of(w->o.http)->dispatch(j);
    } else if (w->o.async_handler != NULL) {
        w->o.async_handler(w, &j->pub, w->o.handler_arg);
    } else if (w->o.handler_mode == SLUICE_HANDLER_INLINE) {
        job_verdict(j, w->o.handler(&j->pub, w->o.handler_arg), NULL);
    } else {
        j->work.data = j;
        if (uv_queue_work(w->loop, &j->work, work_cb, after_work_cb) != 0) {
            job_verdict(j, SLUICE_RETRY, NULL);
        }
    }
}

/* ---- batched acknowledgements ---- */

typedef struct ack_batch {
    sluice_worker *w;
    size_t n;
    job *jobs[];
} ack_batch;

static void on_acked(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    ack_batch *b = arg;
    sluice_worker *w = b->w;
    if (status != 0 && status != SLUICE_ECANCELED && !w->closing) {
        /* keep them: the next flush after the connection is back sends them again; a
         * permission or type error stops the worker (sluice__worker_error) */
        sluice__worker_error(w, "ack_failed", status, sluice_aconn_errstr(c));
        w->ack_pause_until_ms = sluice_now_ms() + 200; /* no storm while Redis refuses */
        for (size_t i = 0; i < b->n; i++) {
            ackq_push(w, b->jobs[i]);
        }
        free(b);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        if (status == 0 && !b->jobs[i]->cleanup) {
            w->st.processed++;
        }
        sluice__job_release(b->jobs[i]);
    }
    free(b);
    if (status == 0) {
        sluice__worker_released(w);
    }
    sluice__worker_kick(w);
}

/* A batch with entries of a fair queue's lanes: one sluice_lane_ack with pairs (lane, id). */
static int send_lane_acks(sluice_worker *w, ack_batch *b) {
    sluice_argv a;
    if (sluice_argv_init(&a, (int)(2 * b->n + 1)) != 0) {
        return SLUICE_ENOMEM;
    }
    size_t k = 0;
    a.v[k] = w->group;
    a.lens[k++] = strlen(w->group);
    for (size_t i = 0; i < b->n; i++) {
        a.v[k] = b->jobs[i]->lane ? b->jobs[i]->lane : "";
        a.lens[k++] = b->jobs[i]->lane ? b->jobs[i]->lane_len : 0;
        a.v[k] = b->jobs[i]->id;
        a.lens[k++] = strlen(b->jobs[i]->id);
    }
    /* meta declared: the function need not derive it (slot_migrating, scripts/lua) */
    const char *keys[] = {w->keys.stream, w->keys.stats, w->keys.meta};
    int st = sluice_aconn_fcall(w->cmd, SLUICE_FN_LANE_ACK, 3, keys, NULL, (int)k, a.v, a.lens, 0,
                                on_acked, b);
    sluice_argv_free(&a);
    return st;
}

static int send_acks(sluice_worker *w, ack_batch *b) {
    size_t n = b->n;
    for (size_t i = 0; i < n; i++) {
        if (b->jobs[i]->lane != NULL) {
            return send_lane_acks(w, b);
        }
    }
    sluice_argv a;
    if (sluice_argv_init(&a, (int)n + 1) != 0) {
        return SLUICE_ENOMEM;
    }
    int stream = w->o.backend == SLUICE_BACKEND_STREAM;
    size_t k = 0;
    if (stream) {
        a.v[k] = w->group;
        a.lens[k++] = strlen(w->group);
    }
    for (size_t i = 0; i < n; i++, k++) {
        a.v[k] = stream ? b->jobs[i]->id : (const char *)b->jobs[i]->raw;
        a.lens[k] = stream ? strlen(b->jobs[i]->id) : b->jobs[i]->raw_len;
    }
    const char *skeys[] = {w->keys.stream, w->keys.stats, w->keys.meta};
    const char *lkeys[] = {w->proc_key, w->keys.meta, w->keys.stats};
    int st = stream ? sluice_aconn_fcall(w->cmd, SLUICE_FN_ACK, 3, skeys, NULL, (int)k, a.v, a.lens,
                                         0, on_acked, b)
                    : sluice_aconn_fcall(w->cmd, SLUICE_FN_LIST_ACK, 3, lkeys, NULL, (int)k, a.v,
                                         a.lens, 0, on_acked, b);
    sluice_argv_free(&a);
    return st;
}

void sluice__jobs_flush(sluice_worker *w) {
    if (w->ackq_n > 0 && w->ack_pause_until_ms > 0 && sluice_now_ms() < w->ack_pause_until_ms) {
        return;
    }
    while (w->ackq_n > 0 && !w->fatal && sluice_aconn_ready(w->cmd)) {
        size_t n = w->ackq_n > 1000 ? 1000 : w->ackq_n;
        ack_batch *b = malloc(sizeof(*b) + n * sizeof(job *));
        if (b == NULL) {
            return;
        }
        b->w = w;
        b->n = n;
        memcpy(b->jobs, w->ackq + (w->ackq_n - n), n * sizeof(job *));
        w->ackq_n -= n;
        if (send_acks(w, b) != 0) {
            w->ackq_n += n; /* still in ackq[]: nothing moved */
            free(b);
            return;
        }
    }
}
