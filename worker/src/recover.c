/* SPDX-License-Identifier: MIT */
/*
 * recover.c - nothing stuck (stream backend).
 *
 * Reclaim: every visibility_timeout/4 (at most 5 s, at least 50 ms) a worker claims entries
 * idle longer than the visibility timeout (XAUTOCLAIM through sluice_reclaim,
 * which also returns each entry's delivery count), following the cursor until it wraps. This is
 * how the entries of a crashed worker, and entries whose retry backoff passed, come back.
 * A pass that finds no free slot (the normal state under overload: every freed slot would be
 * refilled by the next read) is marked due and takes the next free slot before any new read
 * (docs/faults.md F22), so a crashed worker's entries come back within about the visibility
 * timeout plus one reclaim interval even while producers keep the bucket full.
 *
 * A queue's drain limits count redeliveries as reads (docs/faults.md F35): a pass claims no more
 * than they allow; when they allow nothing while entries are due, the reply says when the next unit
 * comes, and the worker holds its reads until then and gives that unit to the pass (reclaim_first).
 *
 * Heartbeat: every visibility_timeout/3 the owner re-claims (JUSTID: no delivery counted) the
 * entries its handlers are still working on, so nobody steals a long job while its owner lives.
 */
#include <stdlib.h>
#include <string.h>

#include "sluice/clock.h"
#include "sluice/log.h"
#include "sluice/reply.h"

#include "worker_internal.h"

static uint64_t reclaim_interval(const sluice_worker *w) {
    uint64_t t = (uint64_t)w->o.visibility_timeout_ms / 4;
    if (t < 50) {
        t = 50;
    }
    return t > 5000 ? 5000 : t;
}

static void claimed_entry(sluice_worker *w, redisReply *e, const redisReply *lane) {
    /* {id, body or nil, deliveries} */
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 3 ||
        e->element[0]->type != REDIS_REPLY_STRING) {
        return;
    }
    redisReply *body = e->element[1];
    int has_body = body->type == REDIS_REPLY_STRING;
    long long deliveries = e->element[2]->type == REDIS_REPLY_INTEGER ? e->element[2]->integer : 1;
    job *j = sluice__job_new(w, e->element[0]->str, e->element[0]->len, has_body ? body->str : NULL,
                             has_body ? body->len : 0, deliveries);
    if (j != NULL && lane != NULL && sluice__job_set_lane(j, lane->str, lane->len) != 0) {
        sluice__job_release(j); /* stays pending: the next pass takes it */
        j = NULL;
    }
    if (j == NULL) {
        return;
    }
    w->st.reclaimed++;
    SLUICE_LOG(SLUICE_LOG_INFO, "event=reclaimed id=%s deliveries=%lld", j->id, deliveries);
    sluice__job_dispatch(j);
}

/* The drain limits allowed no unit to a pass for `ms`: the next allowance is the pass's. */
static uint64_t pass_held(sluice_worker *w, long long ms) {
    w->reclaim_first = 1;
    sluice__worker_hold(w, ms, 0);
    return reclaim_interval(w);
}

/* sluice_reclaim: {cursor, {entry, ...}, deleted[, held_ms]}. Returns the delay of the next
 * pass. */
static uint64_t stream_pass(sluice_worker *w, redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->elements > 4 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
        return reclaim_interval(w);
    }
    if (r->elements == 4 && sluice_reply_ll(r->element[3], 0) > 0) {
        return pass_held(w, sluice_reply_ll(r->element[3], 0));
    }
    redisReply *entries = r->element[1];
    for (size_t i = 0; entries->type == REDIS_REPLY_ARRAY && i < entries->elements; i++) {
        claimed_entry(w, entries->element[i], NULL);
    }
    snprintf(w->cursor, sizeof(w->cursor), "%.*s", (int)r->element[0]->len, r->element[0]->str);
    if (strcmp(w->cursor, "0-0") != 0 && entries->elements > 0) {
        return 0; /* more to look at: go on at once */
    }
    if (w->fair && strcmp(w->cursor, "0-0") == 0) {
        w->lane_pass = 1; /* the stream is done: the lanes next, at once */
        snprintf(w->lane_cursor, sizeof(w->lane_cursor), "0");
        return 0;
    }
    return reclaim_interval(w);
}

/* sluice_lane_reclaim: {cursor, {lane, entries, ...}[, held_ms]}. Returns the delay of the
 * next pass. */
static uint64_t lane_pass(sluice_worker *w, redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY) {
        w->lane_pass = 0;
        return reclaim_interval(w);
    }
    if (r->elements == 3 && sluice_reply_ll(r->element[2], 0) > 0) {
        return pass_held(w, sluice_reply_ll(r->element[2], 0)); /* the walk goes on from here */
    }
    redisReply *lanes = r->element[1];
    for (size_t i = 0; i + 1 < lanes->elements; i += 2) {
        redisReply *lane = lanes->element[i], *entries = lanes->element[i + 1];
        for (size_t k = 0; lane->type == REDIS_REPLY_STRING && entries->type == REDIS_REPLY_ARRAY &&
                           k < entries->elements;
             k++) {
            claimed_entry(w, entries->element[k], lane->len > 0 ? lane : NULL);
        }
    }
    snprintf(w->lane_cursor, sizeof(w->lane_cursor), "%.*s", (int)r->element[0]->len,
             r->element[0]->str);
    if (strcmp(w->lane_cursor, "0") != 0) {
        return 0;
    }
    w->lane_pass = 0; /* the walk is complete */
    return reclaim_interval(w);
}

static void on_reclaim(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)sent;
    sluice_worker *w = arg;
    w->reclaiming = 0;
    if (status == SLUICE_ECANCELED || w->stopping) {
        return;
    }
    uint64_t next = reclaim_interval(w);
    if (status != 0) {
        /* NOGROUP is handled by the reader; others heal with the connection */
        if (status != SLUICE_ENOTFOUND) {
            sluice__worker_error(w, "reclaim_failed", status, sluice_aconn_errstr(c));
        }
        w->lane_pass = 0;
    } else {
        next = w->lane_pass ? lane_pass(w, r) : stream_pass(w, r);
    }
    uv_timer_start(&w->reclaim_timer, sluice__reclaim_tick, next, 0);
    sluice__worker_kick(w); /* reads were held back while the pass ran */
}

void sluice__reclaim_tick(uv_timer_t *t) {
    sluice_worker *w = t->data;
    int free_slots = sluice__worker_free_slots(w);
    if (w->stopping || w->o.backend != SLUICE_BACKEND_STREAM) {
        return;
    }
    if (w->reclaiming || !w->group_ready || !sluice_aconn_ready(w->cmd)) {
        uv_timer_start(&w->reclaim_timer, sluice__reclaim_tick, reclaim_interval(w), 0);
        return;
    }
    if (free_slots <= 0 || w->reading) {
        w->reclaim_due = 1; /* the next free slot is this pass's: see sluice__worker_kick */
        return;
    }
    w->reclaim_due = 0;
    char idle[24], count[24];
    int n = sluice__worker_reserve(w, free_slots < 100 ? free_slots : 100);
    if (n <= 0) { /* the workers sharing the tally have reserved the rest */
        uv_timer_start(&w->reclaim_timer, sluice__reclaim_tick, reclaim_interval(w), 0);
        return;
    }
    snprintf(idle, sizeof(idle), "%d", w->o.visibility_timeout_ms);
    snprintf(count, sizeof(count), "%d", n);
    const char *keys[] = {w->keys.stream, w->keys.stats};
    w->lane_pass = w->lane_pass && w->fair;
    int lanes = w->lane_pass;
    const char *args[] = {w->group, w->consumer, idle, lanes ? w->lane_cursor : w->cursor, count};
    if (sluice_aconn_fcall(w->cmd, lanes ? SLUICE_FN_LANE_RECLAIM : SLUICE_FN_RECLAIM, 2, keys,
                           NULL, 5, args, NULL, 0, on_reclaim, w) == 0) {
        w->reclaiming = 1;
    } else {
        uv_timer_start(&w->reclaim_timer, sluice__reclaim_tick, reclaim_interval(w), 0);
    }
}

int sluice__reclaim_if_due(sluice_worker *w) {
    if (w->reclaiming) {
        return 1; /* no read while a pass is out: both would fill the same free slots */
    }
    if (!w->reclaim_due || sluice__worker_free_slots(w) <= 0) {
        return 0;
    }
    sluice__reclaim_tick(&w->reclaim_timer);
    return w->reclaiming;
}

void sluice__reclaim_start(sluice_worker *w) {
    if (w->o.backend == SLUICE_BACKEND_STREAM && !uv_is_active((uv_handle_t *)&w->reclaim_timer)) {
        uv_timer_start(&w->reclaim_timer, sluice__reclaim_tick, 0, 0);
    }
}

static void on_touched(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_worker *w = arg;
    if (status != 0 || r->type != REDIS_REPLY_ARRAY) {
        return;
    }
    for (size_t i = 0; i < r->elements; i++) {
        SLUICE_LOG(SLUICE_LOG_WARN,
                   "event=entry_lost id=%s note=\"claimed by another worker while in the "
                   "handler; it may run twice\"",
                   r->element[i]->str);
    }
    (void)w;
}

static void touch_lane_job(sluice_worker *w, job *j) {
    int owned;
    size_t len = 0;
    const char *stream = sluice__job_stream(j, &len, &owned);
    if (stream == NULL) {
        return;
    }
    const char *keys[] = {stream};
    const char *args[] = {w->group, w->consumer, j->id};
    sluice_aconn_fcall(w->cmd, SLUICE_FN_TOUCH, 1, keys, &len, 3, args, NULL, 0, on_touched, w);
    if (owned) {
        free((void *)stream);
    }
}

void sluice__touch_tick(uv_timer_t *t) {
    sluice_worker *w = t->data;
    if (w->o.backend != SLUICE_BACKEND_STREAM || !sluice_aconn_ready(w->cmd)) {
        return;
    }
    /* only jobs running long enough to be at risk: a third of the visibility timeout */
    uint64_t old = sluice_now_ns() - (uint64_t)w->o.visibility_timeout_ms * 1000000u / 3;
    size_t n = 0;
    for (job *j = w->in_flight.next; j != &w->in_flight; j = j->next) {
        if (j->state == JOB_HANDLING && j->start_ns <= old && j->lane != NULL) {
            touch_lane_job(w, j); /* a fair queue's lane: its own stream, its own call */
        } else {
            n += j->state == JOB_HANDLING && j->start_ns <= old;
        }
    }
    if (n == 0) {
        return;
    }
    const char **args = malloc((n + 2) * sizeof(*args));
    if (args == NULL) {
        return;
    }
    args[0] = w->group;
    args[1] = w->consumer;
    size_t k = 2;
    for (job *j = w->in_flight.next; j != &w->in_flight && k < n + 2; j = j->next) {
        if (j->state == JOB_HANDLING && j->start_ns <= old && j->lane == NULL) {
            args[k++] = j->id;
        }
    }
    const char *keys[] = {w->keys.stream};
    sluice_aconn_fcall(w->cmd, SLUICE_FN_TOUCH, 1, keys, NULL, (int)k, args, NULL, 0, on_touched,
                       w);
    free((void *)args);
}
