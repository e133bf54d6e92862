/* SPDX-License-Identifier: MIT */
/*
 * worker.c - the worker's life cycle: options, connections, the consumer group, reading
 * (XREADGROUP for streams; LMOVE/BLMOVE into a processing list for lists) and shutdown.
 *
 * Reading asks for at most the free slots; a read is re-issued as soon as a reply was handled
 * and slots are free, and whenever a settled job frees a slot while no read is outstanding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/client.h"
#include "sluice/clock.h"
#include "sluice/keys.h"
#include "sluice/log.h"
#include "sluice/options.h"
#include "sluice/reply.h"
#include "sluice/tls.h"

#include "http_delivery.h"
#include "worker_internal.h"

void sluice_worker_options_init_sized(sluice_worker_options *o, size_t size) {
    sluice_worker_options d;
    memset(&d, 0, sizeof(d));
    d.group = SLUICE_DEFAULT_GROUP;
    d.concurrency = 16;
    d.read_batch = 1000;
    d.block_ms = 1000;
    d.visibility_timeout_ms = 30000;
    d.max_deliveries = 5;
    d.retry_backoff_ms = 1000;
    d.grace_ms = 10000;
    d.connect_timeout_ms = 2000;
    d.command_timeout_ms = 5000;
    sluice__options_give(o, size, &d, sizeof(d));
}

static int check_range(const char *name, long long v, long long lo, long long hi, char *err,
                       size_t errlen) {
    if (v < lo || v > hi) {
        snprintf(err, errlen, "%s %lld is out of range %lld..%lld", name, v, lo, hi);
        return SLUICE_EINVAL;
    }
    return 0;
}

static int check_options(const sluice_worker_options *o, char *err, size_t errlen) {
    if (o->handler == NULL && o->async_handler == NULL && o->http == NULL) {
        snprintf(err, errlen, "no handler given");
        return SLUICE_EINVAL;
    }
    if (check_range("concurrency", o->concurrency, 1, 100000, err, errlen) ||
        check_range("read batch", o->read_batch, 1, 100000, err, errlen) ||
        check_range("block ms", o->block_ms, 1, 600000, err, errlen) ||
        check_range("visibility timeout ms", o->visibility_timeout_ms, 100, 86400000, err,
                    errlen) ||
        check_range("max deliveries", o->max_deliveries, 1, 1000000, err, errlen) ||
        check_range("retry backoff ms", o->retry_backoff_ms, 0, 86400000, err, errlen) ||
        check_range("grace ms", o->grace_ms, 0, 86400000, err, errlen) ||
        check_range("handler timeout ms", o->handler_timeout_ms, 0, 86400000, err, errlen) ||
        check_range("concurrency min", o->concurrency_min, 0, o->concurrency, err, errlen) ||
        check_range("max messages", o->max_messages, 0, (long long)1e15, err, errlen)) {
        return SLUICE_EINVAL;
    }
    return 0;
}

/* Consumer and group names: 1..128 visible characters, no spaces (they appear in logs,
 * metrics labels and XINFO output). */
static int check_name(const char *what, const char *name, char *err, size_t errlen) {
    size_t n = strlen(name);
    int ok = n >= 1 && n <= 128;
    for (size_t i = 0; ok && i < n; i++) {
        ok = name[i] > 0x20 && name[i] < 0x7f;
    }
    if (!ok) {
        snprintf(err, errlen, "%s name \"%.140s\" must be 1-128 visible characters, no spaces",
                 what, name);
        return -1;
    }
    return 0;
}

static void tally_join(sluice_worker_tally *t, int d);

int sluice_worker_new(const sluice_worker_options *in, sluice_worker **out, char *err,
                      size_t errlen) {
    char ebuf[256];
    sluice_worker_options o; /* the caller's options as this library lays them out */
    sluice_worker_options_init(&o);
    sluice__options_take(&o, sizeof(o), in);
    sluice_worker_options d;
    sluice_worker_options_init(&d);
    *out = NULL;
    if (err == NULL) {
        err = ebuf;
        errlen = sizeof(ebuf);
    }
    int *fields[] = {&o.concurrency,           &o.read_batch,     &o.block_ms,
                     &o.visibility_timeout_ms, &o.max_deliveries, &o.connect_timeout_ms,
                     &o.command_timeout_ms};
    const int defaults[] = {d.concurrency,           d.read_batch,     d.block_ms,
                            d.visibility_timeout_ms, d.max_deliveries, d.connect_timeout_ms,
                            d.command_timeout_ms};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (*fields[i] == 0) { /* zero means "default" */
            *fields[i] = defaults[i];
        }
    }
    if (o.group == NULL) { /* "" is refused below, not taken for the default */
        o.group = SLUICE_DEFAULT_GROUP;
    }
    sluice_keys keys;
    sluice_url url;
    if (o.queue == NULL) {
        snprintf(err, errlen, "no queue name given");
        return SLUICE_EINVAL;
    }
    if (sluice_keys_init(&keys, o.queue, err, errlen) != 0 || check_options(&o, err, errlen) ||
        sluice_url_parse(&url, o.redis_url ? o.redis_url : sluice_url_default(), err, errlen) !=
            0 ||
        sluice_client_async_supported(&url, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    char consumer[200];
    if (o.consumer == NULL || o.consumer[0] == '\0') {
        char host[128] = "worker";
        gethostname(host, sizeof(host) - 1);
        host[sizeof(host) - 1] = '\0';
        snprintf(consumer, sizeof(consumer), "%s-%d", host, (int)getpid());
        o.consumer = consumer;
    } else if (check_name("consumer", o.consumer, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    if (check_name("group", o.group, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    sluice_worker *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return SLUICE_ENOMEM;
    }
    w->o = o;
    w->queue = strdup(o.queue);
    w->group = strdup(o.group);
    w->consumer = strdup(o.consumer);
    if (w->queue == NULL || w->group == NULL || w->consumer == NULL) {
        sluice_worker_free(w);
        return SLUICE_ENOMEM;
    }
    w->o.queue = w->queue;
    w->o.group = w->group;
    w->o.consumer = w->consumer;
    w->o.redis_url = NULL; /* parsed into w->url; the caller's string is not kept */
    sluice__client_tls(&w->tls, o.tls);
    w->o.tls = NULL;
    if (sluice__tls_options_keep(&w->tls) != 0) {
        sluice_worker_free(w);
        return SLUICE_ENOMEM;
    }
    w->url = url;
    w->keys = keys;
    if (sluice_key_proc(&keys, w->consumer, w->proc_key, sizeof(w->proc_key)) != 0) {
        snprintf(err, errlen, "consumer name too long for a processing-list key");
        sluice_worker_free(w);
        return SLUICE_EINVAL;
    }
    w->in_flight.next = w->in_flight.prev = &w->in_flight;
    w->expired.next = w->expired.prev = &w->expired;
    snprintf(w->cursor, sizeof(w->cursor), "0-0");
    if (w->o.tally != NULL) {
        tally_join(w->o.tally, 1);
        w->tally_joined = 1;
    }
    *out = w;
    return 0;
}

void sluice_worker_free(sluice_worker *w) {
    if (w == NULL) {
        return;
    }
    sluice__jobs_free_all(w);
    if (w->tally_joined) {
        tally_join(w->o.tally, -1);
    }
    free(w->queue);
    free(w->group);
    free(w->consumer);
    sluice__tls_options_release(&w->tls);
    free(w);
}

uv_loop_t *sluice_worker_loop(sluice_worker *w) {
    return w->loop;
}

const char *sluice_worker_errstr(const sluice_worker *w) {
    return w->err;
}

void sluice_worker_get_stats(const sluice_worker *w, sluice_worker_stats *s) {
    *s = w->st;
    s->in_flight = w->n_in_flight;
}

int sluice__worker_limit(const sluice_worker *w) {
    return w->o.concurrency_min > 0 ? sluice__adaptive_limit(&w->adaptive) : w->o.concurrency;
}

int sluice_worker_concurrency_limit(const sluice_worker *w) {
    return sluice__worker_limit(w);
}

static int tallied(const sluice_worker *w) {
    return w->o.tally != NULL && w->o.max_messages > 0;
}

struct sluice_worker_tally {
    atomic_llong taken;    /* entries read or claimed by the workers sharing it */
    atomic_llong verdicts; /* verdicts they gave */
    atomic_int workers;    /* workers created with it and not freed yet */
};

/* A tally shared with other workers right now: an empty read polls (TALLY_POLL_MS) instead of
 * blocking with what it reserved. A worker alone with its tally (a plain queue, or a
 * partitioned one down to one partition) blocks as it would without one. */
static void tally_join(sluice_worker_tally *t, int d) {
    atomic_fetch_add(&t->workers, d);
}

static int tally_shared(const sluice_worker *w) {
    return tallied(w) && atomic_load(&w->o.tally->workers) > 1;
}

sluice_worker_tally *sluice_worker_tally_new(void) {
    sluice_worker_tally *t = malloc(sizeof(*t));
    if (t != NULL) {
        atomic_init(&t->taken, 0);
        atomic_init(&t->verdicts, 0);
        atomic_init(&t->workers, 0);
    }
    return t;
}

void sluice_worker_tally_free(sluice_worker_tally *t) {
    free(t);
}

void sluice__worker_count_taken(sluice_worker *w) {
    w->taken++;
    if (w->o.tally != NULL && w->held > 0) {
        w->held--; /* reserved by the read that brought it */
    } else if (w->o.tally != NULL) {
        atomic_fetch_add(&w->o.tally->taken, 1);
    }
}

int sluice__worker_reserve(sluice_worker *w, int n) {
    if (w->o.tally == NULL || w->o.max_messages <= 0) {
        return n;
    }
    long long cur = atomic_load(&w->o.tally->taken), k;
    do {
        k = w->o.max_messages - cur < n ? w->o.max_messages - cur : n;
        if (k <= 0) {
            return 0;
        }
    } while (!atomic_compare_exchange_weak(&w->o.tally->taken, &cur, cur + k));
    w->held += k;
    return (int)k;
}

/* What the last read or reclaim reserved and did not bring goes back to the tally. */
static void tally_release(sluice_worker *w) {
    if (w->o.tally != NULL && w->held > 0 && !w->reading && !w->reclaiming) {
        atomic_fetch_sub(&w->o.tally->taken, w->held);
        w->held = 0;
    }
}

int sluice__worker_count_verdict(sluice_worker *w) {
    long long v = ++w->verdicts;
    if (w->o.tally != NULL) { /* one worker gives the last: the others stop in their kick */
        v = atomic_fetch_add(&w->o.tally->verdicts, 1) + 1;
        return w->o.max_messages > 0 && v == w->o.max_messages;
    }
    return w->o.max_messages > 0 && v >= w->o.max_messages;
}

int sluice__worker_free_slots(const sluice_worker *w) {
    long long free_slots = sluice__worker_limit(w) - w->n_in_flight;
    long long taken = w->o.tally != NULL ? atomic_load(&w->o.tally->taken) : w->taken;
    if (w->o.max_messages > 0 && w->o.max_messages - taken < free_slots) {
        free_slots = w->o.max_messages - taken;
    }
    return free_slots > 0 ? (int)free_slots : 0;
}

/* Counts and records a failed call; logs it unless `quiet` (a repeat, see read_failed), and
 * with the failures not logged since the last line when `unlogged` > 0. */
static void worker_error(sluice_worker *w, const char *what, int status, const char *detail,
                         int quiet, int unlogged) {
    w->st.redis_errors++;
    snprintf(w->err, sizeof(w->err), "%s: %s: %s", what, sluice_strerror(status), detail);
    char q[600];
    if (!quiet && unlogged > 0) {
        SLUICE_LOG(SLUICE_LOG_WARN, "event=%s status=%s repeats=%d detail=%s", what,
                   sluice_err_name(status), unlogged, sluice_log_q(detail, q, sizeof(q)));
    } else if (!quiet) {
        SLUICE_LOG(SLUICE_LOG_WARN, "event=%s status=%s detail=%s", what, sluice_err_name(status),
                   sluice_log_q(detail, q, sizeof(q)));
    }
    /* a wrong key type, a missing permission, credentials refused or a queue set up for another
     * group or backend does not heal by retrying */
    if (status == SLUICE_EWRONGTYPE || status == SLUICE_ENOPERM || status == SLUICE_EAUTH ||
        status == SLUICE_ECONFIG || status == SLUICE_ETLS) {
        w->fatal = status;
        sluice_worker_stop(w);
    }
}

void sluice__worker_error(sluice_worker *w, const char *what, int status, const char *detail) {
    worker_error(w, what, status, detail, 0, 0);
}

static void check_done(sluice_worker *w);

/* ---- the consumer group ---- */

static void read_retry_cb(uv_timer_t *t);

/* Drain limits on a list queue (set before its first admission made it one; later ones are
 * refused) are not honoured by LMOVE reads: said at start, not silently ignored (docs/faults.md
 * B32). */
static void on_list_drain(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    sluice_worker *w = arg;
    if (status == 0 && sluice_reply_ll(r, 0) > 0) {
        SLUICE_LOG(SLUICE_LOG_WARN,
                   "event=drain_limits_ignored queue=%s note=\"a list queue's workers do not "
                   "honour drain or inflight limits; use the stream backend\"",
                   w->queue);
    }
}

static void on_group(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_worker *w = arg;
    w->creating_group = 0;
    if (status == 0 && (w->o.backend != SLUICE_BACKEND_STREAM ||
                        (r->type == REDIS_REPLY_INTEGER && r->integer == 1))) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=group_created queue=%s group=%s", w->queue, w->group);
    }
    /* sluice_group answers an existing group with 0, not BUSYGROUP. At maxmemory Redis refuses
     * the call with OOM even when the group exists: go on; if it really is missing, the read
     * says NOGROUP and we come back here after a pause. */
    if (status == 0 || status == SLUICE_EOOM) {
        w->group_ready = 1;
        if (w->o.backend == SLUICE_BACKEND_LIST) {
            const char *argv[] = {"HGET", w->keys.meta, "drain"};
            sluice_aconn_command(w->cmd, 3, argv, NULL, 0, on_list_drain, w);
        }
        sluice__worker_kick(w);
        sluice__reclaim_start(w);
    } else if (status != SLUICE_ECANCELED) {
        sluice__worker_error(w, "group_create_failed", status, sluice_aconn_errstr(c));
        uv_timer_start(&w->retry_timer, read_retry_cb, 500, 0); /* kick creates it again */
    }
}

static void create_group(sluice_worker *w) {
    if (w->creating_group || w->stopping || !sluice_aconn_ready(w->cmd)) {
        return;
    }
    w->creating_group = 1;
    int st;
    if (w->o.backend == SLUICE_BACKEND_STREAM) {
        const char *keys[] = {w->keys.stream, w->keys.meta};
        const char *args[] = {w->group, w->consumer};
        st = sluice_aconn_fcall(w->cmd, SLUICE_FN_GROUP, 2, keys, NULL, 2, args, NULL, 0, on_group,
                                w);
    } else {
        /* a restarted consumer of the same name takes back what it was processing */
        const char *keys[] = {w->keys.list, w->proc_key, w->keys.procs};
        st = sluice_aconn_fcall(w->cmd, SLUICE_FN_LIST_RECOVER, 3, keys, NULL, 0, NULL, NULL, 0,
                                on_group, w);
    }
    if (st != 0) {
        w->creating_group = 0;
    }
}

/* ---- reading ---- */

static void on_read(sluice_aconn *c, int status, int sent, redisReply *r, void *arg);

static void read_retry_cb(uv_timer_t *t) {
    sluice__worker_kick(t->data);
}

/* A failed read: the next waits READ_RETRY_MIN_MS, doubling while reads keep failing up to
 * READ_RETRY_MAX_MS (sluice__worker_kick sends nothing while the retry timer runs), so an
 * outage that answers at once (CLUSTERDOWN, LOADING, OOM) costs a few reads a second, not a
 * busy loop. The same failure again is logged once per READ_LOG_MS, with the count since. */
#define READ_RETRY_MIN_MS 100
#define READ_RETRY_MAX_MS 1000
#define READ_LOG_MS       5000

static void read_failed(sluice_worker *w, int status, const char *detail) {
    uint64_t now = sluice_now_ms();
    int repeat = w->read_fails > 0 && status == w->read_fail_status;
    int quiet = repeat && now - w->read_log_ms < READ_LOG_MS;
    worker_error(w, "read_failed", status, detail, quiet, repeat ? w->read_unlogged + 1 : 0);
    if (quiet) {
        w->read_unlogged++;
    } else {
        w->read_unlogged = 0;
        w->read_log_ms = now;
    }
    w->read_fail_status = status;
    uint64_t delay = READ_RETRY_MIN_MS;
    for (int i = 0; i < w->read_fails && delay < READ_RETRY_MAX_MS; i++) {
        delay *= 2;
    }
    w->read_fails++;
    uv_timer_start(&w->retry_timer, read_retry_cb,
                   delay < READ_RETRY_MAX_MS ? delay : READ_RETRY_MAX_MS, 0);
}

/* A read succeeded: after failures say so (info), and the next failure waits the least again. */
static void read_ok(sluice_worker *w) {
    if (w->read_fails > 0) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=read_resumed failed_reads=%d", w->read_fails);
    }
    w->read_fails = 0;
    w->read_unlogged = 0;
}

/* Dispatches entries [[id, [field, value, ...]], ...] read from the queue's stream (lane NULL)
 * or from a fair queue's lane (lane_len bytes). */
void sluice__worker_entries(sluice_worker *w, redisReply *list, const char *lane, size_t lane_len) {
    for (size_t i = 0; list->type == REDIS_REPLY_ARRAY && i < list->elements; i++) {
        redisReply *e = list->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 2) {
            continue;
        }
        const char *body = NULL;
        size_t blen = 0;
        redisReply *f = e->element[1];
        for (size_t k = 0; f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2) {
            if (f->element[k]->len == 1 && f->element[k]->str[0] == 'm') {
                body = f->element[k + 1]->str;
                blen = f->element[k + 1]->len;
            }
        }
        job *j =
            sluice__job_new(w, e->element[0]->str, e->element[0]->len, body ? body : "", blen, 1);
        if (j != NULL && lane != NULL && sluice__job_set_lane(j, lane, lane_len) != 0) {
            sluice__job_release(j); /* stays pending: reclaimed after the visibility timeout */
            j = NULL;
        }
        if (j != NULL) {
            w->st.read++;
            sluice__job_dispatch(j);
        }
    }
}

static void stream_entries(sluice_worker *w, redisReply *r) {
    /* [[stream, [[id, [field, value, ...]], ...]]] */
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 2) {
        return;
    }
    sluice__worker_entries(w, r->element[0]->element[1], NULL, 0);
}

static void list_entries(sluice_worker *w, redisReply *r) {
    redisReply *one[1] = {r};
    redisReply **el = r->type == REDIS_REPLY_ARRAY ? r->element : one;
    size_t n = r->type == REDIS_REPLY_ARRAY ? r->elements : (r->type == REDIS_REPLY_STRING);
    for (size_t i = 0; i < n; i++) {
        if (el[i]->type != REDIS_REPLY_STRING) {
            continue;
        }
        const char *sep = memchr(el[i]->str, ':', el[i]->len);
        size_t idlen = sep ? (size_t)(sep - el[i]->str) : 0;
        job *j = sluice__job_new(w, el[i]->str, idlen, el[i]->str, el[i]->len, 1);
        if (j != NULL) {
            w->st.read++;
            sluice__job_dispatch(j);
        }
    }
}

/* ---- pacing ---- */

#define PACE_CHECK_MS 1000 /* how often a worker asks whether its queue has drain limits */
/* The longest one answer holds the reads back: the wait of a limit that was lowered, raised or
 * deleted since (docs/faults.md B31), or of a lane another lane's arrival does not wake (F36), is
 * asked again by then. A hold that long costs one call a second per worker. */
#define PACE_HOLD_MAX_MS 1000
/* A fair worker held at least this long waits on sluice:{Q}:wake instead of a timer, so a new
 * tenant's lane wakes it at once; shorter holds keep the timer (no call more per hold). Redis
 * ends a BLPOP's timeout only at its next `hz` tick (serverCron, 10 a second by default), up
 * to 1/hz late, which a gate never makes up: the BLPOP waits the hold less that slack
 * (HZ_SLACK_MS until CONFIG GET hz has answered, or for good when the ACL refuses it) and the
 * pace timer the exact rest. A hold not longer than the slack is all timer. */
#define FAIR_WAKE_MIN_MS 100
#define HZ_SLACK_MS      100 /* 1000 / Redis's default hz */

static void pace_timer_cb(uv_timer_t *t);
static void pace_end(sluice_worker *w);

static void on_hz(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    sluice_worker *w = arg;
    if (status != 0 || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_STRING) {
        return; /* refused (an ACL without +config|get) or cancelled: keep HZ_SLACK_MS */
    }
    int hz = atoi(r->element[1]->str);
    if (hz >= 1 && hz <= 500) { /* Redis accepts 1..500 */
        w->hz_slack_ms = (1000 + hz - 1) / hz;
    }
}

/* How late the server may end a BLPOP; asks its hz the first time. */
static int hz_slack(sluice_worker *w) {
    if (!w->hz_asked) {
        w->hz_asked = 1;
        w->hz_slack_ms = HZ_SLACK_MS;
        const char *argv[] = {"CONFIG", "GET", "hz"};
        sluice_aconn_command(w->cmd, 3, argv, NULL, 0, on_hz, w);
    }
    return w->hz_slack_ms;
}

/* ---- pause ---- */

/* While the queue is paused a worker asks again this often (the pacing answer, PACE_CHECK_MS
 * apart, brings the field): a resume reaches it within about a second, and a paused worker
 * makes one call a second. */
#define PAUSE_POLL_MS 1000

/* The paused state from meta `paused` (an answer, or a read function's 'paused'): a resume
 * ends the wait at once. */
static void pause_set(sluice_worker *w, int paused) {
    if (paused == w->paused) {
        return;
    }
    SLUICE_LOG(SLUICE_LOG_INFO, "event=%s queue=%s", paused ? "paused" : "resumed", w->queue);
    w->paused = paused;
    if (!paused && w->pace_waiting && !w->pace_lease) {
        uv_timer_stop(&w->pace_timer); /* a rate's hold ends too: the next take says it again */
        pace_end(w);
    }
}

/* HGET meta paused (the list backend, or an ACL without HMGET): the answer of the pause check.
 * An error reads as not paused, as before the field existed. */
static void on_pause_check(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    sluice_worker *w = arg;
    if (status == SLUICE_ECANCELED) {
        return;
    }
    pause_set(w, status == 0 && sluice_reply_ll(r, 0) == 1);
    if (w->o.backend == SLUICE_BACKEND_LIST) {
        w->pace_checking = 0;
        w->paced_known = 1;
        w->pace_check_ms = sluice_now_ms();
    }
    sluice__worker_kick(w);
}

/* A paused worker takes nothing: it waits PAUSE_POLL_MS, then asks again (kick). */
static void pause_hold(sluice_worker *w) {
    w->pace_waiting = 1;
    w->pace_lease = 0;
    uv_timer_start(&w->pace_timer, pace_timer_cb, PAUSE_POLL_MS, 0);
}

static void on_pace_check(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    sluice_worker *w = arg;
    w->pace_checking = 0;
    if (status == SLUICE_ECANCELED) {
        return;
    }
    if (status == SLUICE_ENOPERM && !w->meta_hget_only) {
        /* an ACL from before fair queues (+hget, no +hmget): pacing still works, fairness
         * needs the rights docs/guarantees.md lists */
        SLUICE_LOG(SLUICE_LOG_WARN,
                   "event=fair_unavailable queue=%s note=\"the worker's ACL "
                   "lacks HMGET: reading meta drain only\"",
                   w->queue);
        w->meta_hget_only = 1;
        return; /* the next kick asks again, with HGET */
    }
    /* {drain, fair, lane_depth, paused} (or drain alone); an error: read as before rather than
     * not at all */
    int arr = status == 0 && r->type == REDIS_REPLY_ARRAY && r->elements == 4;
    if (arr) {
        pause_set(w, sluice_reply_ll(r->element[3], 0) == 1);
    }
    int paced = status == 0 && sluice_reply_ll(arr ? r->element[0] : r, 0) > 0;
    int fair =
        arr && (sluice_reply_ll(r->element[1], 0) == 1 || sluice_reply_ll(r->element[2], 0) > 0);
    if (paced != w->paced || !w->paced_known) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=%s queue=%s", paced ? "paced" : "unpaced", w->queue);
    }
    if (fair != w->fair || (!w->paced_known && fair)) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=%s queue=%s", fair ? "fair" : "unfair", w->queue);
    }
    w->paced = paced;
    w->fair = fair;
    w->paced_known = 1;
    w->pace_block = 0;
    w->pace_check_ms = sluice_now_ms();
    sluice__worker_kick(w);
}

/* Asks (at most once per PACE_CHECK_MS) whether the queue has drain limits, whether it is
 * fair and whether it is paused (the list backend: paused only): a change made with
 * sluice-admin limit, fair or pause reaches every worker within about a second. */
static void pace_check(sluice_worker *w) {
    if (w->pace_checking ||
        (w->paced_known && sluice_now_ms() - w->pace_check_ms < PACE_CHECK_MS)) {
        return;
    }
    const char *paused[] = {"HGET", w->keys.meta, "paused"};
    if (w->o.backend != SLUICE_BACKEND_STREAM) { /* the list backend: whether it is paused */
        if (sluice_aconn_command(w->cmd, 3, paused, NULL, 0, on_pause_check, w) == 0) {
            w->pace_checking = 1;
        }
        return;
    }
    const char *argv[] = {w->meta_hget_only ? "HGET" : "HMGET",
                          w->keys.meta,
                          "drain",
                          "fair",
                          "lane_depth",
                          "paused"};
    if (sluice_aconn_command(w->cmd, w->meta_hget_only ? 3 : 6, argv, NULL, 0, on_pace_check, w) ==
        0) {
        w->pace_checking = 1;
        if (w->meta_hget_only) { /* pipelined: its answer follows the pacing one */
            sluice_aconn_command(w->cmd, 3, paused, NULL, 0, on_pause_check, w);
        }
    }
}

/* The hold ended: a reclaim pass that the drain rates held back goes before the next read (so
 * redeliveries take their units between the reads, not after the backlog). */
static void pace_end(sluice_worker *w) {
    w->pace_waiting = 0;
    w->pace_lease = 0;
    if (w->reclaim_first) {
        w->reclaim_first = 0;
        w->reclaim_due = 1;
    }
}

static void pace_timer_cb(uv_timer_t *t) {
    sluice_worker *w = t->data;
    pace_end(w);
    sluice__worker_kick(w);
}

void sluice__worker_hold(sluice_worker *w, long long wait, int lease) {
    if (w->pace_waiting) {
        return; /* a hold is on: it ends by then and the next call says more */
    }
    if (lease && w->released != w->released_read) {
        return; /* an entry of ours was settled while the read was out: ask again at once */
    }
    if (wait > PACE_HOLD_MAX_MS) {
        wait = PACE_HOLD_MAX_MS;
    }
    if (lease && w->o.concurrency_min > 0) {
        /* the queue's inflight limit holds this worker at what it has: no higher limit */
        sluice__adaptive_cap(&w->adaptive, w->n_in_flight);
    }
    w->pace_waiting = 1;
    w->pace_lease = lease;
    w->st.paced_wait_ms += (unsigned long long)wait;
    uv_timer_start(&w->pace_timer, pace_timer_cb, (uint64_t)wait, 0);
}

void sluice__worker_released(sluice_worker *w) {
    w->released++;
    if (w->pace_waiting && w->pace_lease) {
        uv_timer_stop(&w->pace_timer);
        pace_end(w);
    }
}

/* The third element of a take's hold: 'lease' when an `inflight` count held it back, 'paused'
 * when the queue is paused. */
static int hold_is(const redisReply *r, const char *why) {
    return r->elements >= 3 && r->element[2]->type == REDIS_REPLY_STRING &&
           strcmp(r->element[2]->str, why) == 0;
}

static int lease_held(const redisReply *r) {
    return hold_is(r, "lease");
}

static int paced_granted_read(sluice_worker *w, long long grant, const redisReply *token);

/* sluice_take: {entries, wait_ms, last_delivered_id}; its reserve form adds a grant and its
 * token ({{}, 0, '', grant, token}): the worker reads that many itself (paced_granted_read). */
static void on_take(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_worker *w = arg;
    if (status != 0 || r->type != REDIS_REPLY_ARRAY || (r->elements != 3 && r->elements != 5)) {
        on_read(c, status == 0 ? SLUICE_EPROTO : status, sent, r, arg);
        return;
    }
    w->reading = 0;
    long long wait = sluice_reply_ll(r->element[1], 0);
    long long grant = r->elements == 5 ? sluice_reply_ll(r->element[3], 0) : 0;
    if (hold_is(r, "paused")) {
        pause_set(w, 1);   /* the kick below waits */
    } else if (wait > 0) { /* a drain limit holds the reads back until its next allowance */
        sluice__worker_hold(w, wait, lease_held(r));
    } else if (grant > 0) {
        if (paced_granted_read(w, grant, r->element[4]) == 0) {
            w->reading = 1;
            return; /* its reply goes on */
        }
    } else if (wait < 0 && r->element[2]->type == REDIS_REPLY_STRING) {
        w->pace_block = 1; /* nothing to read: wait for an entry without reading it */
        snprintf(w->pace_last_id, sizeof(w->pace_last_id), "%s", r->element[2]->str);
    } else {
        stream_entries(w, r->element[0]);
    }
    sluice__worker_kick(w); /* stopping: it checks whether the worker is done */
}

/* ---- the paced read's reserve form: the worker reads what was granted, gives back the rest ----
 * sluice_take 'reserve' counted the grant in the drain rates; the worker reads with its own
 * XREADGROUP COUNT grant (the entries never pass through Lua) and gives back, with sluice_take
 * 'refund' and the reservation's token, what it did not get. The refund goes on the read
 * connection before the next reserve, so that reserve sees it. A worker stopped or cut off in
 * between gives nothing back: the rate under-delivers for as long as those units count. */

static size_t reply_entries(const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 ||
        r->element[0]->type != REDIS_REPLY_ARRAY || r->element[0]->elements != 2 ||
        r->element[0]->element[1]->type != REDIS_REPLY_ARRAY) {
        return 0;
    }
    return r->element[0]->element[1]->elements;
}

/* sluice_take 'refund': the group's last delivered id when nothing of the grant was read (an
 * idle worker waits on it, XREAD BLOCK), else ''. An error (a slot migrating: TRYAGAIN) gives
 * nothing back and the read goes on. */
static void on_paced_refund(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)sent;
    sluice_worker *w = arg;
    w->reading = 0;
    if (status == 0 && r->type == REDIS_REPLY_STRING && r->len > 0) {
        w->pace_block = 1;
        snprintf(w->pace_last_id, sizeof(w->pace_last_id), "%s", r->str);
    } else if (status != 0 && status != SLUICE_ECANCELED) {
        SLUICE_LOG(SLUICE_LOG_DEBUG, "event=pace_refund_failed queue=%s detail=\"%s\"", w->queue,
                   sluice_aconn_errstr(c));
    }
    sluice__worker_kick(w);
}

static void on_refund_done(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c, (void)status, (void)sent, (void)r, (void)arg;
}

/* Gives back k units of the reservation in w->pace_token; cb NULL: nobody waits for it. */
static int paced_refund(sluice_worker *w, long long k, sluice_aconn_reply_cb cb) {
    if (w->pace_token[0] == '\0') {
        return -1; /* a token too long to keep: its units stay counted */
    }
    char count[24];
    snprintf(count, sizeof(count), "%lld", k);
    const char *keys[] = {w->keys.stream, w->keys.meta};
    const char *args[] = {w->group, w->consumer, count, "refund", w->pace_token};
    return sluice_aconn_fcall(w->rd, SLUICE_FN_TAKE, 2, keys, NULL, 5, args, NULL, 0,
                              cb != NULL ? cb : on_refund_done, w);
}

static void on_paced_entries(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_worker *w = arg;
    long long got = status == 0 ? (long long)reply_entries(r) : 0;
    long long rest = w->pace_grant - got;
    if (status != 0) {
        if (status != SLUICE_ECANCELED && rest > 0) {
            paced_refund(w, rest, NULL);
        }
        on_read(c, status, sent, r, arg);
        return;
    }
    read_ok(w);
    stream_entries(w, r);
    if (rest > 0 && paced_refund(w, rest, on_paced_refund) == 0) {
        return; /* still reading: the refund's reply ends it */
    }
    w->reading = 0;
    sluice__worker_kick(w); /* stopping: it checks whether the worker is done */
}

/* Reads up to `grant` new entries of the stream for the group (no BLOCK: what is there now). */
static int paced_granted_read(sluice_worker *w, long long grant, const redisReply *token) {
    w->pace_grant = grant;
    w->pace_token[0] = '\0';
    if (token->type == REDIS_REPLY_STRING && token->len < sizeof(w->pace_token)) {
        memcpy(w->pace_token, token->str, token->len + 1);
    }
    char count[24];
    snprintf(count, sizeof(count), "%lld", grant);
    const char *argv[] = {"XREADGROUP", "GROUP",   w->group,       w->consumer, "COUNT",
                          count,        "STREAMS", w->keys.stream, ">"};
    return sluice_aconn_command(w->rd, 9, argv, NULL, w->o.command_timeout_ms, on_paced_entries, w);
}

/* The wait of an idle paced or fair worker ended: XREAD BLOCK on the stream past the group's
 * last delivered id (reads nothing for the group: sluice_take does), or BLPOP on the wake-up
 * list of a fair queue. New work, or backlog another worker left, may be there. */
static void on_wake(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_worker *w = arg;
    uint64_t end = w->fair_hold_end, now = sluice_now_ms();
    w->pace_block = 0;
    w->fair_block = 0;
    w->fair_hold_ms = 0;
    w->fair_hold_end = 0;
    if (status != 0 && status != SLUICE_ECANCELED) {
        on_read(c, status, sent, r, arg);
        return;
    }
    w->reading = 0;
    if (status == 0 && r->type == REDIS_REPLY_NIL && end > now) {
        sluice__worker_hold(w, (long long)(end - now), 0); /* no new lane: the rest of the hold */
    }
    sluice__worker_kick(w); /* stopping: it checks whether the worker is done */
}

/* sluice_fair_take: {{lane, entries, ...}, wait_ms[, 'lease' | '']}; sluice_fair_grant: the same
 * with counts in place of entries and, after a grant, {..., 0, '', its time} (grant: the lanes
 * are then read here, fair_read.c), or fair_take's reply when the queue counts entries in flight
 * (inflight, inflight-tenant: the function reads them itself) */
static void fair_reply(sluice_aconn *c, int status, int sent, redisReply *r, sluice_worker *w,
                       int grant) {
    if (status != 0 || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
        r->elements > (grant ? 4 : 3) || r->element[0]->type != REDIS_REPLY_ARRAY) {
        on_read(c, status == 0 ? SLUICE_EPROTO : status, sent, r, w);
        return;
    }
    w->reading = 0;
    long long wait = sluice_reply_ll(r->element[1], 0);
    redisReply *lanes = r->element[0];
    long long hold = wait < PACE_HOLD_MAX_MS ? wait : PACE_HOLD_MAX_MS;
    if (hold_is(r, "paused")) {
        pause_set(w, 1); /* the kick below waits */
    } else if (wait > 0 && !lease_held(r) && wait >= FAIR_WAKE_MIN_MS && hold > hz_slack(w)) {
        /* every lane with backlog is held back by its rate: a new lane may go now */
        w->fair_block = 1;
        w->fair_hold_ms = (int)(hold - w->hz_slack_ms);
        w->fair_hold_end = sluice_now_ms() + (uint64_t)hold;
    } else if (wait > 0) { /* held back briefly, or by a lease that a settle of ours ends */
        sluice__worker_hold(w, wait, lease_held(r));
    } else if (wait < 0) {
        w->fair_block = 1; /* nothing undelivered: wait for the wake-up token */
    }
    grant = grant && lanes->elements >= 2 && lanes->element[1]->type == REDIS_REPLY_INTEGER;
    if (grant) {
        int timed = r->elements == 4 && r->element[3]->type == REDIS_REPLY_STRING;
        int rc = sluice__fair_read_grant(w, lanes, timed ? r->element[3]->str : "0");
        if (rc == 0) {
            w->reading = 1; /* until the lanes' reads are in: sluice__worker_grant_read */
            return;
        }
        read_failed(w, rc, "the lanes granted could not be read");
    }
    for (size_t i = 0; !grant && i + 1 < lanes->elements; i += 2) {
        redisReply *lane = lanes->element[i], *list = lanes->element[i + 1];
        if (lane->type == REDIS_REPLY_STRING && list->type == REDIS_REPLY_ARRAY) {
            sluice__worker_entries(w, list, lane->len > 0 ? lane->str : NULL, lane->len);
        }
    }
    sluice__worker_kick(w); /* stopping: it checks whether the worker is done */
}

static void on_fair_take(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    fair_reply(c, status, sent, r, arg, 0);
}

static void on_fair_grant(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    fair_reply(c, status, sent, r, arg, 1);
}

void sluice__worker_grant_read(sluice_worker *w, int status, const char *detail) {
    w->reading = 0;
    if (status == SLUICE_ENOTFOUND) { /* a lane without the group: sluice_fair_take makes it */
        SLUICE_LOG(SLUICE_LOG_INFO,
                   "event=lane_group_missing queue=%s action=read_through_fair_take detail=\"%s\"",
                   w->queue, detail);
        w->fair_take_next = 1;
    } else if (status != 0 && status != SLUICE_ECANCELED) {
        read_failed(w, status, detail);
    } else if (status == 0) {
        read_ok(w);
    }
    sluice__worker_kick(w); /* stopping: it checks whether the worker is done */
}

static int send_fair_read(sluice_worker *w, int n) {
    if (w->fair_block) {
        char key[SLUICE_KEY_MAX], block[24];
        int ms = w->fair_hold_ms > 0 ? w->fair_hold_ms : w->o.block_ms;
        sluice__key(&w->keys, SLUICE_KEY_WAKE, NULL, 0, key, sizeof(key));
        snprintf(block, sizeof(block), "%.3f", ms / 1000.0);
        const char *argv[] = {"BLPOP", key, block};
        return sluice_aconn_command(w->rd, 3, argv, NULL, ms + w->o.command_timeout_ms, on_wake, w);
    }
    char count[24];
    snprintf(count, sizeof(count), "%d", n);
    const char *keys[] = {w->keys.stream, w->keys.meta};
    const char *args[] = {w->group, w->consumer, count};
    if (w->fair_take_next) { /* one read that makes the lanes' groups, as before grants */
        w->fair_take_next = 0;
        return sluice_aconn_fcall(w->rd, SLUICE_FN_FAIR_TAKE, 2, keys, NULL, 3, args, NULL, 0,
                                  on_fair_take, w);
    }
    return sluice_aconn_fcall(w->rd, SLUICE_FN_FAIR_GRANT, 2, keys, NULL, 3, args, NULL, 0,
                              on_fair_grant, w);
}

static int send_paced_read(sluice_worker *w, int n) {
    int timeout = w->o.block_ms + w->o.command_timeout_ms;
    if (w->pace_block) {
        char block[24];
        snprintf(block, sizeof(block), "%d", w->o.block_ms);
        const char *argv[] = {"XREAD",        "COUNT",        "1", "BLOCK", block, "STREAMS",
                              w->keys.stream, w->pace_last_id};
        return sluice_aconn_command(w->rd, 8, argv, NULL, timeout, on_wake, w);
    }
    char count[24];
    snprintf(count, sizeof(count), "%d", n);
    const char *keys[] = {w->keys.stream, w->keys.meta};
    const char *args[] = {w->group, w->consumer, count, "reserve"};
    return sluice_aconn_fcall(w->rd, SLUICE_FN_TAKE, 2, keys, NULL, 4, args, NULL, 0, on_take, w);
}

/* A worker sharing a tally (options) with others reserves what a read may bring; it never holds
 * that through a blocking read, which would starve the others: an empty read waits TALLY_POLL_MS
 * instead. (The waits of a fair or paced worker read no entries and reserve nothing.) */
#define TALLY_POLL_MS 50

static int send_read(sluice_worker *w, int free_slots, int blocking) {
    char count[24], block[24];
    int n = free_slots < w->o.read_batch ? free_slots : w->o.read_batch;
    int waits = w->o.backend == SLUICE_BACKEND_STREAM &&
                (w->fair ? w->fair_block : w->paced && w->pace_block);
    if (!waits && (n = sluice__worker_reserve(w, n)) <= 0) {
        return -1; /* the workers sharing the tally have reserved the rest */
    }
    snprintf(count, sizeof(count), "%d", n);
    int timeout = w->o.block_ms + w->o.command_timeout_ms;
    if (w->o.backend == SLUICE_BACKEND_STREAM && w->fair) {
        return send_fair_read(w, n);
    }
    if (w->o.backend == SLUICE_BACKEND_STREAM && w->paced) {
        return send_paced_read(w, n);
    }
    if (w->o.backend == SLUICE_BACKEND_STREAM && tally_shared(w)) {
        const char *argv[] = {"XREADGROUP", "GROUP",   w->group,       w->consumer, "COUNT",
                              count,        "STREAMS", w->keys.stream, ">"};
        return sluice_aconn_command(w->rd, 9, argv, NULL, timeout, on_read, w);
    }
    if (w->o.backend == SLUICE_BACKEND_STREAM) {
        snprintf(block, sizeof(block), "%d", w->o.block_ms);
        const char *argv[] = {"XREADGROUP", "GROUP", w->group,  w->consumer,    "COUNT", count,
                              "BLOCK",      block,   "STREAMS", w->keys.stream, ">"};
        return sluice_aconn_command(w->rd, 11, argv, NULL, timeout, on_read, w);
    }
    if (blocking) {
        snprintf(block, sizeof(block), "%.3f", w->o.block_ms / 1000.0);
        const char *argv[] = {"BLMOVE", w->keys.list, w->proc_key, "RIGHT", "LEFT", block};
        return sluice_aconn_command(w->rd, 6, argv, NULL, timeout, on_read, w);
    }
    const char *keys[] = {w->keys.list, w->proc_key, w->keys.procs};
    const char *args[] = {count};
    return sluice_aconn_fcall(w->rd, SLUICE_FN_LIST_TAKE, 3, keys, NULL, 1, args, NULL, 0, on_read,
                              w);
}

static void on_read(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_worker *w = arg;
    w->reading = 0;
    if (status == SLUICE_ENOTFOUND) { /* NOGROUP: the stream or group vanished */
        SLUICE_LOG(SLUICE_LOG_ERROR,
                   "event=group_missing queue=%s group=%s action=recreate_at_0 "
                   "note=\"the stream or its group was deleted or Redis lost its data\"",
                   w->queue, w->group);
        w->group_ready = 0;
        uv_timer_start(&w->retry_timer, read_retry_cb, 200, 0); /* kick creates it again */
    } else if (status != 0 && status != SLUICE_ECANCELED) {
        read_failed(w, status, sluice_aconn_errstr(c));
    } else if (status == 0) {
        read_ok(w);
        size_t before = w->st.read;
        if (w->o.backend == SLUICE_BACKEND_STREAM) {
            stream_entries(w, r);
        } else {
            list_entries(w, r);
        }
        w->list_idle = w->st.read == before;
        w->tally_idle = tally_shared(w) && w->st.read == before;
    }
    sluice__worker_kick(w); /* stopping: it checks whether the worker is done */
}

void sluice__worker_kick(sluice_worker *w) {
    tally_release(w);
    if (tallied(w) && atomic_load(&w->stop_requests) == 0 &&
        atomic_load(&w->o.tally->verdicts) >= w->o.max_messages) {
        sluice_worker_stop(w); /* the workers sharing the tally gave all the verdicts (once: a
                                  second request would not wait for the acknowledgements) */
    }
    if (w->stopping) {
        check_done(w);
        return;
    }
    if (uv_is_active((uv_handle_t *)&w->retry_timer)) {
        return; /* after a failed read or group call: the timer kicks again */
    }
    if (!w->group_ready) {
        create_group(w);
        return;
    }
    /* no new work while the command connection is down: it could be processed but not
     * acknowledged, and another worker would reclaim it after the visibility timeout */
    if (w->reading || !sluice_aconn_ready(w->rd) || !sluice_aconn_ready(w->cmd)) {
        return;
    }
    if (sluice__reclaim_if_due(w)) {
        return; /* entries due for reclaim go before new ones */
    }
    pace_check(w);
    if (!w->paced_known || w->pace_waiting) {
        return; /* the first answer about pacing, or the next allowance, comes first */
    }
    if (w->paused) {
        pause_hold(w);
        return; /* paused: no new entry (reclaims above go on) */
    }
    if (w->http_client != NULL && sluice__http_ops_of(w->o.http)->held(w)) {
        return; /* a back end's Retry-After holds the reads: its end kicks again */
    }
    int polling = uv_is_active((uv_handle_t *)&w->retry_timer);
    if (tally_shared(w) && w->tally_idle) {
        if (!polling) {
            uv_timer_start(&w->retry_timer, read_retry_cb, TALLY_POLL_MS, 0);
        }
        w->tally_idle = 0;
        return; /* the last read found nothing: poll, see send_read */
    }
    int free_slots = sluice__worker_free_slots(w);
    int blocking = w->o.backend == SLUICE_BACKEND_LIST && w->list_idle && !tally_shared(w);
    if (free_slots > 0 && send_read(w, blocking ? 1 : free_slots, blocking) == 0) {
        w->reading = 1;
        w->list_idle = 0;
        w->released_read = w->released;
    } else if (tally_shared(w) && w->n_in_flight < sluice__worker_limit(w) && !polling) {
        /* what the workers sharing the tally reserved may come back, or their verdicts end it */
        uv_timer_start(&w->retry_timer, read_retry_cb, TALLY_POLL_MS, 0);
    }
}

/* ---- connections ---- */

static void on_state(sluice_aconn *c, int ready, int status, void *arg) {
    sluice_worker *w = arg;
    if (!ready) {
        if (c == w->cmd) {
            w->creating_group = 0;
        }
        if (status == SLUICE_ECLUSTER &&
            !w->fatal) { /* the URL's scheme is wrong: no retry heals it */
            snprintf(w->err, sizeof(w->err), "%s", sluice_aconn_errstr(c));
            w->fatal = status;
            sluice_worker_stop(w);
        } else if ((status == SLUICE_ENOPERM || status == SLUICE_EAUTH || status == SLUICE_ETLS) &&
                   !w->fatal) {
            /* the ACL refused the connection's set-up (e.g. EXISTS or CLUSTER on a cluster),
             * AUTH refused the credentials, or a TLS check failed: no retry heals that */
            sluice__worker_error(w, "connect_refused", status, sluice_aconn_errstr(c));
        }
        return; /* the connection logged it (event=redis_down conn=read|cmd queue=Q) */
    }
    SLUICE_LOG(SLUICE_LOG_INFO, "event=redis_up conn=%s", c == w->rd ? "read" : "cmd");
    if (c == w->cmd && !w->group_ready) {
        create_group(w);
    }
    sluice__worker_kick(w);
}

static void flush_cb(uv_check_t *h) {
    sluice__jobs_flush(h->data);
}

static void handle_closed(uv_handle_t *h) {
    sluice_worker *w = h->data;
    w->handles--;
}

static void conn_closed(void *arg) {
    sluice_worker *w = arg;
    w->handles--;
}

static void close_all(sluice_worker *w) {
    if (w->closing) {
        return;
    }
    w->closing = 1;
    atomic_store(&w->async_live, 0);
    SLUICE_LOG(SLUICE_LOG_INFO, "event=stopping in_flight=%d", w->n_in_flight);
    uv_handle_t *hs[] = {(uv_handle_t *)&w->stop_async,    (uv_handle_t *)&w->flush_check,
                         (uv_handle_t *)&w->reclaim_timer, (uv_handle_t *)&w->touch_timer,
                         (uv_handle_t *)&w->grace_timer,   (uv_handle_t *)&w->retry_timer,
                         (uv_handle_t *)&w->pace_timer,    (uv_handle_t *)&w->timeout_timer};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
        uv_close(hs[i], handle_closed);
    }
    if (w->http_client != NULL) {
        sluice__http_ops_of(w->o.http)->close(w, conn_closed, w); /* its jobs are abandoned */
    }
    sluice_aconn_close(w->rd, conn_closed, w);
    sluice_aconn_close(w->cmd, conn_closed, w);
}

static void check_done(sluice_worker *w);

static void on_left(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    sluice_worker *w = arg;
    w->leaving = 0;
    if (status == 0 && r->type == REDIS_REPLY_INTEGER) {
        SLUICE_LOG(SLUICE_LOG_INFO, "event=%s queue=%s group=%s consumer=%s",
                   r->integer == 1 ? "consumer_deleted" : "consumer_kept reason=pending", w->queue,
                   w->group, w->consumer);
    } else if (status != SLUICE_ECANCELED) {
        SLUICE_LOG(SLUICE_LOG_WARN, "event=consumer_kept queue=%s consumer=%s error=\"%s\"",
                   w->queue, w->consumer, sluice_strerror(status));
    }
    check_done(w);
}

/* A clean stop of a stream worker: deletes its consumer from the group when it holds no pending
 * entry (sluice_prune checks it in the same atomic step), so stopped workers do not pile up in
 * the group's consumer list. One try; returns 1 while the call is outstanding. A fair queue's
 * lanes need nothing: a lane's stream goes, with its group, once it is empty. */
static int leave_group(sluice_worker *w) {
    if (w->left || w->fatal || w->o.backend != SLUICE_BACKEND_STREAM || !w->group_ready ||
        !sluice_aconn_ready(w->cmd)) {
        return 0;
    }
    w->left = 1;
    const char *keys[] = {w->keys.stream};
    const char *args[] = {w->group, w->consumer};
    if (sluice_aconn_fcall(w->cmd, SLUICE_FN_PRUNE, 1, keys, NULL, 2, args, NULL, 0, on_left, w) !=
        0) {
        return 0;
    }
    w->leaving = 1;
    return 1;
}

/* Stops once nothing is in flight, no read is outstanding, every ack was sent and the consumer
 * has left the group. */
static void check_done(sluice_worker *w) {
    /* after a fatal error nothing in flight can be settled: do not wait for the grace */
    if (w->stopping && !w->closing &&
        (w->fatal || (w->n_in_flight == 0 && !w->reading && w->expired.next == &w->expired))) {
        if (w->leaving || leave_group(w)) {
            return;
        }
        close_all(w);
    }
}

static void grace_cb(uv_timer_t *t) {
    sluice_worker *w = t->data;
    SLUICE_LOG(SLUICE_LOG_WARN,
               "event=grace_expired in_flight=%d note=\"left pending; reclaimed by others\"",
               w->n_in_flight);
    close_all(w);
}

/* Stops after the first request (stop_requests >= 1), closes at once after the second. */
static void stop_cb(uv_async_t *a) {
    sluice_worker *w = a->data;
    int requests = atomic_load(&w->stop_requests);
    if (w->closing || requests == 0) {
        return;
    }
    if (requests >= 2) {
        close_all(w); /* second request: do not wait for handlers */
        return;
    }
    if (w->stopping) {
        return;
    }
    w->stopping = 1;
    uv_timer_stop(&w->reclaim_timer);
    uv_timer_stop(&w->touch_timer);
    uv_timer_start(&w->grace_timer, grace_cb, (uint64_t)w->o.grace_ms, 0);
    if (w->http_client != NULL) {
        sluice__http_ops_of(w->o.http)->stopping(w);
    }
    check_done(w);
}

void sluice_worker_stop(sluice_worker *w) {
    if (w == NULL) {
        return;
    }
    atomic_fetch_add(&w->stop_requests, 1);
    if (atomic_load(&w->async_live)) {
        uv_async_send(&w->stop_async);
    }
}

static int start_handles(sluice_worker *w) {
    uv_async_init(w->loop, &w->stop_async, stop_cb);
    uv_check_init(w->loop, &w->flush_check);
    uv_timer_init(w->loop, &w->reclaim_timer);
    uv_timer_init(w->loop, &w->touch_timer);
    uv_timer_init(w->loop, &w->grace_timer);
    uv_timer_init(w->loop, &w->retry_timer);
    uv_timer_init(w->loop, &w->pace_timer);
    uv_timer_init(w->loop, &w->timeout_timer);
    w->timeout_timer.data = w;
    w->stop_async.data = w->flush_check.data = w->reclaim_timer.data = w;
    w->touch_timer.data = w->grace_timer.data = w->retry_timer.data = w->pace_timer.data = w;
    w->handles = 8;
    atomic_store(&w->async_live, 1);
    if (atomic_load(&w->stop_requests) > 0) {
        uv_async_send(&w->stop_async); /* asked before the loop ran */
    }
    uv_check_start(&w->flush_check, flush_cb);
    sluice_conn_options co;
    sluice_conn_options_init(&co);
    sluice__client_tls(&co, &w->tls);
    co.connect_timeout_ms = w->o.connect_timeout_ms;
    co.command_timeout_ms = w->o.command_timeout_ms;
    co.force_eval = w->o.force_eval;
    co.queue = w->queue;
    co.name = "cmd";
    w->cmd = sluice_aconn_new(w->loop, &w->url, &co, on_state, w);
    co.name = "read";
    w->rd = sluice_aconn_new(w->loop, &w->url, &co, on_state, w);
    w->handles += (w->cmd != NULL) + (w->rd != NULL);
    if (w->cmd == NULL || w->rd == NULL) {
        return SLUICE_ENOMEM;
    }
    if (w->o.http != NULL) {
        int st = sluice__http_ops_of(w->o.http)->start(w);
        if (st != 0) {
            return st;
        }
        w->handles++; /* the client: conn_closed when it is closed */
    }
    uint64_t tick = (uint64_t)w->o.visibility_timeout_ms / 3;
    uv_timer_start(&w->touch_timer, sluice__touch_tick, tick, tick);
    return 0;
}

int sluice_worker_run(sluice_worker *w, uv_loop_t *loop) {
    if (w->running) {
        return SLUICE_EINVAL;
    }
    w->running = 1;
    if (loop == NULL) {
        uv_loop_init(&w->own_loop);
        loop = &w->own_loop;
    }
    w->loop = loop;
    if (w->o.concurrency_min > 0) {
        sluice__adaptive_init(&w->adaptive, w->o.concurrency_min, w->o.concurrency, sluice_now_ns(),
                              (unsigned)getpid() ^ (unsigned)(uintptr_t)w);
    }
    char where[300];
    sluice_url_redact(&w->url, where, sizeof(where));
    SLUICE_LOG(SLUICE_LOG_INFO,
               "event=start queue=%s group=%s consumer=%s backend=%s concurrency=%d redis=%s",
               w->queue, w->group, w->consumer, sluice_backend_name(w->o.backend), w->o.concurrency,
               where);
    int st = start_handles(w);
    if (st != 0) {
        snprintf(w->err, sizeof(w->err), "out of memory starting the worker");
        close_all(w);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    if (loop == &w->own_loop) {
        uv_loop_close(loop);
    }
    w->running = 0;
    SLUICE_LOG(SLUICE_LOG_INFO,
               "event=stopped processed=%llu failed=%llu retried=%llu dead=%llu abandoned=%llu",
               w->st.processed, w->st.failed, w->st.retried, w->st.dead, w->st.abandoned);
    return st != 0 ? st : w->fatal;
}
