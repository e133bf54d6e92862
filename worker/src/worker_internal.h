/* SPDX-License-Identifier: MIT */
/*
 * worker_internal.h - the worker's state, shared by its modules:
 *   worker.c  life cycle, connections, reading (both backends), shutdown
 *   jobs.c    jobs: decode, dispatch to the handler, verdicts, batched acks, dead letters,
 *             retries
 *   recover.c reclaiming idle entries of dead consumers and the owner's heartbeat
 *   fair_read.c  a fair queue's lanes read with XREADGROUP after sluice_fair_grant, and refunds
 */
#ifndef SLUICE_WORKER_INTERNAL_H
#define SLUICE_WORKER_INTERNAL_H

#include <stdatomic.h>

#include <uv.h>

#include "sluice/queue.h"
#include "sluice/redis.h"
#include "sluice/url.h"
#include "sluice/worker.h"

#include "adaptive.h"

typedef struct job job;

enum job_state {
    JOB_HANDLING = 0, /* in the handler */
    JOB_SETTLING = 1, /* verdict given; its ack / retry / dead call is queued or in flight */
};

struct job {
    sluice_job pub; /* first: sluice_job_finish() casts back */
    sluice_worker *w;
    job *prev, *next; /* the worker's list of in-flight jobs */
    uv_work_t work;
    enum job_state state;
    sluice_verdict verdict;
    int decoded; /* the envelope was valid */
    int cleanup; /* an entry with no body: only acknowledge it */
    /* handler_timeout_ms passed: the entry is retried while the handler still holds the job
     * (handler_out) until it gives its ignored verdict; settled, it waits in w->expired */
    atomic_int abandoned;
    int handler_out;
    int parked;                  /* in w->expired */
    sluice_verdict pool_verdict; /* a blocking handler's, written on its thread */
    uint64_t start_ns;
    char id[SLUICE_STREAM_ID_MAX];
    unsigned char *raw; /* stream: the envelope; list: the whole element "<seq>:<envelope>" */
    size_t raw_len;
    char *lane; /* fair queue: the tenant whose lane holds the entry; NULL: the queue's stream */
    size_t lane_len;          /* its length in bytes (a tenant is a byte string) */
    char reason[200];         /* why it goes to the dead stream */
    long long retry_after_ms; /* > 0: a RETRY comes back after this, not after the backoff */
    sluice_header hdrs[SLUICE_ENVELOPE_MAX_HEADERS];
};

struct sluice_worker {
    sluice_worker_options o; /* o.tls is NULL: the copy is tls below */
    sluice_conn_options tls; /* the tls_* options, copied (sluice__tls_options_keep) */
    char *queue, *group, *consumer;
    sluice_url url;
    sluice_keys keys;
    char proc_key[SLUICE_KEY_MAX + 160]; /* list backend: this consumer's processing list */
    uv_loop_t own_loop;
    uv_loop_t *loop;
    sluice_aconn *rd;  /* reads (blocking) */
    sluice_aconn *cmd; /* acks, claims, dead letters */
    uv_async_t stop_async;
    /* sluice_worker_stop() may run on any thread or in a signal handler, before, during or
     * after sluice_worker_run(): it only counts the request and, while stop_async is open
     * (async_live), wakes the loop; stop_cb reads the count. */
    atomic_int stop_requests;
    atomic_int async_live;
    uv_check_t flush_check;
    uv_timer_t reclaim_timer;
    uv_timer_t touch_timer;
    uv_timer_t grace_timer;
    uv_timer_t retry_timer;   /* re-arms reading after an error */
    uv_timer_t pace_timer;    /* a paced queue: waits for the next allowance */
    uv_timer_t timeout_timer; /* handler_timeout_ms: the earliest deadline of a job */
    int handles;              /* uv handles not yet closed */
    int running;

    job in_flight; /* sentinel of the in-flight list */
    job expired;   /* sentinel: settled jobs whose timed-out handler still holds them */
    int n_in_flight;
    job **ackq; /* settled DONE jobs waiting for the next ack call */
    size_t ackq_n, ackq_cap;
    job *free_jobs;
    uint64_t ack_pause_until_ms; /* after a refused ack: wait before sending again */

    /* reads refused in a row (the retry waits longer each time, up to 1 s) and their logging */
    int read_fails;
    int read_fail_status; /* status of the last refused read */
    int read_unlogged;    /* refused reads since the last read_failed line */
    uint64_t read_log_ms; /* when that line was written (monotonic ms) */

    int reading;     /* a read is outstanding on rd */
    int list_idle;   /* list backend: the last LMOVE batch found nothing: block next */
    int reclaiming;  /* a reclaim call is outstanding */
    int reclaim_due; /* a reclaim pass waits for a free slot: it goes before the next read */
    int group_ready;
    int creating_group;
    int stopping;
    int leaving; /* stopping: the call deregistering the consumer is outstanding */
    int left;    /* stopping: that call was made (or cannot be), once */
    int closing;
    long long taken;                   /* entries read or claimed (bounded by max_messages) */
    long long verdicts;                /* verdicts given */
    long long held;                    /* tally units reserved by the read or reclaim out */
    int tally_idle;                    /* with a tally: the last read found nothing */
    int tally_joined;                  /* counted in the tally's workers */
    char cursor[SLUICE_STREAM_ID_MAX]; /* XAUTOCLAIM cursor */
    /* pacing (stream backend): a queue with drain limits (meta `drain` > 0) is read through
     * sluice_take's reserve form, which grants rate before the worker reads (XREADGROUP) */
    int paced;         /* the last answer of meta `drain`: reads go through sluice_take */
    int paced_known;   /* that answer came (the first read waits for it) */
    int pace_checking; /* HMGET meta drain ... paused outstanding */
    /* a paused queue (meta `paused`, `sluice-admin pause`): read with the pacing answer (both
     * backends), no new entry is taken while it is set; reclaims and settles go on */
    int paused;
    uint64_t pace_check_ms; /* when it was last asked */
    int pace_waiting;       /* pace_timer runs: a rate holds the reads back */
    int pace_lease;         /* ... or a count (`inflight`): a settle of ours ends the wait */
    unsigned released;      /* settles that ended a lease (an ack, a dead letter) */
    unsigned released_read; /* `released` when the last read was sent */
    int reclaim_first;      /* a pass held by the drain rates takes the next allowance */
    int pace_block;         /* sluice_take found nothing: XREAD BLOCK on pace_last_id next */
    char pace_last_id[SLUICE_STREAM_ID_MAX];
    /* the reservation being read (sluice_take 'reserve'): its grant and token, for the refund
     * of what the read did not get ('' when the token was longer: nothing is given back) */
    long long pace_grant;
    char pace_token[1024];
    /* fair queues (meta `fair`, or tenant lanes still holding entries): reads go through
     * sluice_fair_take; an idle worker waits with BLPOP on sluice:{Q}:wake */
    int fair;
    int fair_block;       /* sluice_fair_take found nothing: BLPOP next */
    int fair_take_next;   /* a lane read after a grant had no group: one sluice_fair_take next */
    int fair_hold_ms;     /* ... or every lane is held: BLPOP this long (a new lane ends it) */
    int meta_hget_only;   /* the ACL refuses HMGET: pacing read with HGET, no fairness */
    int lane_pass;        /* the reclaim pass walks the lanes (sluice_lane_reclaim) */
    char lane_cursor[32]; /* its HSCAN cursor */
    /* a held fair worker's BLPOP ends by the hold less the server's lateness; a timer the rest */
    uint64_t fair_hold_end; /* when the hold ends (monotonic ms), 0 for none */
    int hz_slack_ms;        /* 1000 / the server's hz: how late it may end a BLPOP */
    int hz_asked;           /* CONFIG GET hz sent (once) */
    struct sluice__http_client *http_client; /* o.http: its client on this loop */
    sluice_worker_stats st;
    /* concurrency_min > 0: the adaptive limit, fed by every verdict's latency (jobs.c) */
    sluice__adaptive adaptive;
    uint64_t adaptive_log_ms; /* when its limit was last logged */
    int adaptive_logged;      /* ... and what it was */
    int fatal;
    char err[512];
};

/* jobs.c */
job *sluice__job_new(sluice_worker *w, const char *id, size_t idlen, const char *raw, size_t rawlen,
                     long long deliveries);
/* Records the lane (tenant) of a fair queue's entry; 0 or SLUICE_ENOMEM. */
int sluice__job_set_lane(job *j, const char *tenant, size_t len);
/* The key of the stream holding the job's entry: the queue's stream or its lane (a key the
 * caller frees with free() when *owned), *len bytes long. NULL when out of memory. */
const char *sluice__job_stream(const job *j, size_t *len, int *owned);
void sluice__job_dispatch(job *j);
void sluice__job_dead(job *j, const char *reason);
void sluice__jobs_flush(sluice_worker *w);
void sluice__job_release(job *j); /* after its settle call: free, release the slot */
void sluice__jobs_free_all(sluice_worker *w);
/* timeout_timer's callback: gives up the jobs past handler_timeout_ms */
void sluice__jobs_timeout_cb(uv_timer_t *t);

/* worker.c */
void sluice__worker_kick(sluice_worker *w); /* read more if there are free slots */
/* No read for `wait` ms (at most about a second); lease: an `inflight` count holds the reads
 * back, and sluice__worker_released() ends the wait. */
void sluice__worker_hold(sluice_worker *w, long long wait, int lease);
/* An entry of this worker was acked or dead-lettered: its `inflight` unit is free again. */
void sluice__worker_released(sluice_worker *w);
void sluice__worker_error(sluice_worker *w, const char *what, int status, const char *detail);
int sluice__worker_free_slots(const sluice_worker *w);
/* How many jobs may be in flight now: concurrency, or the adaptive limit. */
int sluice__worker_limit(const sluice_worker *w);
/* One entry taken (read or claimed), one verdict given: counted here and in the tally; the
 * second returns 1 when max_messages is reached. */
void sluice__worker_count_taken(sluice_worker *w);
int sluice__worker_count_verdict(sluice_worker *w);
/* With a tally (options), reserves up to n entries in it for a read or reclaim about to be sent,
 * so that workers reading at once never take more than max_messages together; returns how many
 * the call may ask for (n without a tally). The next kick gives back what the reply did not
 * bring. */
int sluice__worker_reserve(sluice_worker *w, int n);

/* Dispatches entries [[id, [field, value, ...]], ...] of the queue's stream (lane NULL) or of a
 * fair queue's lane (lane_len bytes). */
void sluice__worker_entries(sluice_worker *w, struct redisReply *list, const char *lane,
                            size_t lane_len);
/* The lanes' reads after a grant are all answered: status 0, or the first failure (detail). */
void sluice__worker_grant_read(sluice_worker *w, int status, const char *detail);

/* fair_read.c */
/* Reads the lanes a sluice_fair_grant granted ({lane, count, ...}) with XREADGROUP on rd (one
 * command per distinct count, sent together), dispatches their entries and gives what a lane
 * gave less than granted back with sluice_fair_refund (since: the grant's time, from its reply,
 * "0" when it gave none: the rates then get nothing back). Returns 0 when reads are out (then
 * sluice__worker_grant_read runs once they are answered, cancelled included), else an error:
 * nothing is out and what was granted is refunded. */
int sluice__fair_read_grant(sluice_worker *w, const struct redisReply *lanes, const char *since);

/* recover.c */
void sluice__reclaim_start(sluice_worker *w);
void sluice__touch_tick(uv_timer_t *t);
void sluice__reclaim_tick(uv_timer_t *t);
/* Runs the reclaim pass that waits for a free slot, if any; 1 when one was started. */
int sluice__reclaim_if_due(sluice_worker *w);

#endif
