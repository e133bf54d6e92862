/* SPDX-License-Identifier: MIT */
/*
 * worker.h - draining a sluice queue: read, process, acknowledge + delete.
 *
 * A worker runs one libuv loop with two Redis connections: one blocks in XREADGROUP (finite
 * BLOCK), the other sends acknowledgements, claims and dead letters. At most `concurrency`
 * entries are in flight (read and not yet acknowledged); each read asks for at most the free
 * slots, so processing speed, not a clock, sets the rate at which the bucket empties.
 *
 * Handlers come in three kinds:
 *   - blocking (`handler`): runs on libuv's thread pool (size it with UV_THREADPOOL_SIZE);
 *   - inline (`handler` + SLUICE_HANDLER_INLINE): runs on the loop thread, must not block;
 *   - async (`async_handler`): starts work on the loop and later calls sluice_job_finish().
 * The verdict: DONE acknowledges and deletes; RETRY leaves the entry pending and lets any
 * worker take it again after a backoff; FAIL moves it to the dead stream. An undecodable
 * envelope and an entry delivered more than `max_deliveries` times go to the dead stream too.
 *
 * Recovery (stream backend): entries idle longer than `visibility_timeout_ms` are claimed by
 * live workers (XAUTOCLAIM); the owner of a long job re-claims its own entries before that so
 * no other worker steals them while it lives.
 *
 * Deadlines (handler_timeout_ms): a job without a verdict by then is retried and its slot freed;
 * the handler is told (abandon_handler, sluice_job_abandoned) and its late verdict ignored.
 * Adaptive concurrency (concurrency_min > 0): the in-flight number follows the handler's
 * latency between concurrency_min and concurrency.
 *
 * Shutdown: sluice_worker_stop() stops reading, lets in-flight work finish within
 * `grace_ms`, acknowledges it, and makes sluice_worker_run() return. Anything still unfinished
 * stays pending in Redis and is reclaimed by another worker.
 */
#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H

#include <stddef.h>
#include <stdint.h>

/* Only pointers to the loop cross this API: no need to pull uv.h (and its feature-test
 * macro needs) into every includer. */
typedef struct uv_loop_s uv_loop_t;

#include "sluice/envelope.h"
#include "sluice/export.h"
#include "sluice/queue.h"
#include "sluice/status.h"
#include "sluice/url.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sluice_verdict {
    SLUICE_DONE = 0,  /* processed: acknowledge and delete */
    SLUICE_RETRY = 1, /* transient failure: deliver again after a backoff */
    SLUICE_FAIL = 2,  /* permanent failure: move to the dead stream */
} sluice_verdict;

typedef struct sluice_worker sluice_worker;
typedef struct sluice_http sluice_http; /* sluice/worker_http.h */

/* One message being processed. Borrowed: valid until the verdict is given. */
typedef struct sluice_job {
    const char *id;               /* stream entry id (list: sequence number) */
    const unsigned char *payload; /* may be NULL when payload_len is 0 */
    size_t payload_len;
    const sluice_header *headers; /* nheaders entries */
    size_t nheaders;
    const char *tenant; /* NULL = none; tenant_len bytes, not NUL-terminated */
    size_t tenant_len;
    long long deliveries; /* 1 on first delivery */
    uint64_t admitted_ms; /* wall-clock admission time from the entry id; 0 unknown */
} sluice_job;

typedef sluice_verdict (*sluice_handler_fn)(const sluice_job *job, void *arg);
typedef void (*sluice_async_handler_fn)(sluice_worker *w, const sluice_job *job, void *arg);

typedef enum sluice_handler_mode {
    SLUICE_HANDLER_POOL = 0,   /* blocking handler on libuv's thread pool (default) */
    SLUICE_HANDLER_INLINE = 1, /* on the loop thread; must not block */
} sluice_handler_mode;

/* A count of messages shared by the workers of one process (a worker pool's workers, one a
 * partition of a queue, share one), so that their max_messages bounds them together.
 * Thread-safe: the workers may run on threads of their own. Free it after every worker given it
 * is freed. */
typedef struct sluice_worker_tally sluice_worker_tally;

/* A tally at 0, or NULL when out of memory. */
SLUICE_API sluice_worker_tally *sluice_worker_tally_new(void);
SLUICE_API void sluice_worker_tally_free(sluice_worker_tally *t);

typedef struct sluice_worker_options {
    size_t struct_size;        /* set by _init (sluice/export.h) */
    const char *redis_url;     /* NULL = $SLUICE_REDIS_URL, else redis://127.0.0.1:6379 */
    const char *queue;         /* required */
    const char *group;         /* consumer group, NULL = "workers"; 1-128 visible characters */
    const char *consumer;      /* consumer name, default "<hostname>-<pid>" */
    sluice_backend backend;    /* default stream */
    int concurrency;           /* max in-flight entries, default 16, 1..100000 */
    int read_batch;            /* max entries per read, default 1000 (capped by free slots) */
    int block_ms;              /* XREADGROUP BLOCK, ms, default 1000 */
    int visibility_timeout_ms; /* ms, default 30000: idle time after which others may claim */
    int max_deliveries;        /* default 5: more deliveries go to the dead stream */
    int retry_backoff_ms;      /* ms, default 1000: first retry delay, doubled each delivery */
    int grace_ms;              /* ms, default 10000: shutdown waits this long for handlers */
    int connect_timeout_ms;    /* ms, default 2000 */
    int command_timeout_ms;    /* ms, default 5000 */
    long long max_messages;    /* stop after this many verdicts; 0 = never */
    sluice_handler_fn handler; /* blocking or inline handler */
    sluice_handler_mode handler_mode;
    sluice_async_handler_fn async_handler; /* takes precedence over `handler` */
    void *handler_arg;
    int force_eval; /* 1: EVALSHA instead of FCALL (tests) */
    /* NULL: max_messages counts this worker's verdicts; else the verdicts of every worker given
     * this tally (borrowed) */
    sluice_worker_tally *tally;
    /* ms, default 0 = none: a job whose verdict has not come this long after it went to the
     * handler is given up: its entry is retried (as a RETRY verdict, with the backoff), its slot
     * is free again, and the handler is told (abandon_handler, sluice_job_abandoned); whatever
     * verdict the handler gives later is ignored. The HTTP handler's request deadline (0 there:
     * SLUICE_HTTP_TIMEOUT_DEFAULT_MS). 0..86400000 */
    int handler_timeout_ms;
    /* NULL = none: called on the loop thread when a job passes handler_timeout_ms, so the
     * handler can stop its work (kill a child, cancel a request). The job stays valid until the
     * handler gives its (ignored) verdict, which it must still do, now or later. */
    sluice_async_handler_fn abandon_handler;
    /* 0 = fixed concurrency (default); 1..concurrency: adaptive concurrency, a limit between
     * concurrency_min and concurrency that follows the handler's latency (see
     * sluice_worker_concurrency_limit) */
    int concurrency_min;
    /* non-NULL: the built-in HTTP handler posts each message to this target
     * (sluice/worker_http.h; borrowed, may be shared by workers on other threads);
     * `handler` and `async_handler` are then not used */
    sluice_http *http;
    /* NULL = none: called on the worker's loop thread with each verdict a job gets, from any
     * handler (the HTTP handler's too), before the worker acts on it (a DONE: before its
     * acknowledgement is sent). `job` and `reason` (NULL or the dead letter's reason) are
     * borrowed for the call. Not called for a verdict that is ignored (a second one, or one
     * after handler_timeout_ms retried the entry, whose RETRY it was told) nor for jobs left
     * pending at a close past grace_ms. A worker pool calls it on each partition's thread. */
    void (*on_verdict)(const sluice_job *job, sluice_verdict v, const char *reason, void *arg);
    void *on_verdict_arg;
    /* NULL = none; else its tls_* fields (sluice/redis.h) are used for a rediss:// URL (strings
     * copied by _new). A certificate check that fails stops the worker with SLUICE_ETLS. */
    const struct sluice_conn_options *tls;
} sluice_worker_options;

/* Counters of one worker since it started. */
/* Handler latency buckets: 0.5 ms to 30 s in about doubling steps, then +Inf. */
#define SLUICE_WORKER_LATENCY_BUCKETS 16

typedef struct sluice_worker_stats {
    unsigned long long processed; /* DONE and acknowledged */
    unsigned long long failed;    /* FAIL verdicts */
    unsigned long long retried;   /* RETRY verdicts */
    unsigned long long dead;      /* entries this worker moved to the dead stream */
    unsigned long long reclaimed; /* entries claimed from other consumers */
    unsigned long long abandoned; /* verdicts after the grace period: left pending */
    unsigned long long read;      /* entries read */
    unsigned long long redis_errors;
    unsigned long long paced_wait_ms; /* time reads waited for a drain limit's next allowance */
    int in_flight;
    /* handler latency histogram: bucket i counts latencies <= sluice_worker_latency_bounds[i]
     * seconds; the last bucket is +Inf */
    unsigned long long latency_buckets[SLUICE_WORKER_LATENCY_BUCKETS];
    double latency_sum_s;
} sluice_worker_stats;

extern SLUICE_API const double sluice_worker_latency_bounds[SLUICE_WORKER_LATENCY_BUCKETS - 1];

SLUICE_API void sluice_worker_options_init_sized(sluice_worker_options *o, size_t size);
#define sluice_worker_options_init(o) sluice_worker_options_init_sized((o), sizeof(*(o)))

/* Creates a worker (copies options). Returns 0 or EINVAL with a message naming the value. */
SLUICE_API int sluice_worker_new(const sluice_worker_options *o, sluice_worker **out, char *err,
                                 size_t errlen);

/*
 * Runs the worker on `loop` (NULL: a loop of its own) until it stops: after
 * sluice_worker_stop(), after max_messages, or on a fatal error. Returns 0 after a clean stop,
 * else a status with the detail in sluice_worker_errstr().
 */
SLUICE_API int sluice_worker_run(sluice_worker *w, uv_loop_t *loop);

/* Asks the worker to stop. Thread-safe and async-signal-safe (an atomic counter and
 * uv_async_send); may be called before sluice_worker_run (which then returns as soon as it has
 * started), during it, or after it returned (no effect), but not concurrently with
 * sluice_worker_free. A second call stops at once, abandoning in-flight work (left pending). */
SLUICE_API void sluice_worker_stop(sluice_worker *w);

/* Gives the verdict of an async handler's job. Call on the loop thread, exactly once. */
SLUICE_API void sluice_job_finish(const sluice_job *job, sluice_verdict v);

/* The same with the reason a FAIL is dead-lettered with (copied; NULL or "" = "handler failed";
 * at most 199 bytes are kept), e.g. "exec: exited with status 3". */
SLUICE_API void sluice_job_finish_reason(const sluice_job *job, sluice_verdict v,
                                         const char *reason);

/* 1 once the job passed handler_timeout_ms (its entry is being retried): a blocking handler
 * may poll it and give up early. Thread-safe; valid until the job's verdict is given. */
SLUICE_API int sluice_job_abandoned(const sluice_job *job);

/* The loop the worker runs on (valid inside handlers and callbacks). */
SLUICE_API uv_loop_t *sluice_worker_loop(sluice_worker *w);

SLUICE_API void sluice_worker_get_stats(const sluice_worker *w, sluice_worker_stats *s);

/* The number of entries the worker lets into the handler at once right now: `concurrency`, or
 * with concurrency_min > 0 the adaptive limit. Call on the loop thread. */
SLUICE_API int sluice_worker_concurrency_limit(const sluice_worker *w);

/* What a worker drains, from where, and how far it is in stopping: for code that watches it
 * on the same loop (the metrics endpoint). Strings are borrowed until sluice_worker_free. */
typedef struct sluice_worker_info {
    const char *queue;
    const char *group;
    const char *consumer;
    sluice_backend backend;
    const sluice_url *url; /* the server it connects to (with credentials: never log it) */
    int stopping;          /* 0 running, 1 stop asked (finishing in-flight work), 2 closing */
} sluice_worker_info;

/* Fills `out`. Call on the loop thread (or before sluice_worker_run). */
SLUICE_API void sluice_worker_get_info(const sluice_worker *w, sluice_worker_info *out);
SLUICE_API const char *sluice_worker_errstr(const sluice_worker *w);

/* Frees a worker that is not running. NULL is a no-op. */
SLUICE_API void sluice_worker_free(sluice_worker *w);

/* ---------------------------------------------------------------------------------------- */
/* Worker pool: a partitioned queue drained as a whole                                      */

/*
 * A partitioned queue (sluice-admin partitions Q P) is P queues, Q and Q~1 .. Q~P-1. A pool
 * runs one worker per partition, each on a thread and a libuv loop of its own, with the same
 * options; every check_ms it reads the partition count again and starts workers for partitions
 * added since (also on a queue that was plain when it started). max_messages counts the whole
 * pool (its workers share one tally: the options' tally, or the pool's own), and a stop reaches
 * them all.
 *
 * On a queue that is plain when sluice_worker_pool_run starts (or whose partition count Redis
 * cannot give then), partition 0's worker runs on the pool's loop, as sluice_worker_run would
 * run it, and the pool ends with it (partitions added meanwhile are stopped then). On a
 * partitioned queue the pool's loop only supervises, and the pool ends when every worker has.
 * A queue name holding '~' is one partition: the pool runs its worker and looks for no others.
 *
 * Handlers: the same handler and handler_arg serve every partition, on several threads at once
 * (async handlers on each partition's loop thread; sluice_worker_loop(w) gives the one of the
 * job's worker).
 */
typedef struct sluice_worker_pool sluice_worker_pool;

typedef struct sluice_worker_pool_options {
    size_t struct_size; /* set by _init (sluice/export.h) */
    int check_ms;       /* ms between reads of the partition count, default 1000, 10..3600000 */
    /* Runs on a worker's loop thread grace_ms + 50 ms after a stop reached that worker (at once
     * after a second stop): end what the async handlers still run on `loop` (timers, child
     * processes), whose jobs the worker has left pending, so the loop can end. NULL: none. */
    void (*on_grace_expired)(uv_loop_t *loop, void *arg);
    void *arg; /* given to on_grace_expired */
} sluice_worker_pool_options;

SLUICE_API void sluice_worker_pool_options_init_sized(sluice_worker_pool_options *o, size_t size);
#define sluice_worker_pool_options_init(o) sluice_worker_pool_options_init_sized((o), sizeof(*(o)))

/* Creates a pool for the queue o->queue (copies both options; `po` NULL: defaults). Partition
 * 0's worker is created now, so the checks and messages are sluice_worker_new's. No I/O.
 * Returns 0, or EINVAL / ENOMEM with a message naming the value in err (then *out is NULL). */
SLUICE_API int sluice_worker_pool_new(const sluice_worker_options *o,
                                      const sluice_worker_pool_options *po,
                                      sluice_worker_pool **out, char *err, size_t errlen);

/*
 * Reads the partition count (a blocking call of at most connect_timeout_ms plus
 * command_timeout_ms), starts the workers and runs `loop` (NULL: a loop of its own) until the
 * pool has ended (above) and nothing else keeps the loop alive. Call once. Returns 0 after a
 * clean stop, else the status of the first worker that failed (or EINVAL / ENOMEM when a
 * partition could not be started), with the detail in sluice_worker_pool_errstr().
 */
SLUICE_API int sluice_worker_pool_run(sluice_worker_pool *p, uv_loop_t *loop);

/* Asks every worker of the pool to stop, as sluice_worker_stop does (a second call: at once).
 * Thread-safe and async-signal-safe (an atomic counter and uv_async_send); may be called before
 * sluice_worker_pool_run (which then starts no worker on a partitioned queue, and returns as
 * soon as partition 0's worker has started on a plain one), during it, or after it returned (no
 * effect), but not concurrently with sluice_worker_pool_free. */
SLUICE_API void sluice_worker_pool_stop(sluice_worker_pool *p);

/* The sum of the counters of the pool's workers (those on threads as of their last copy, at
 * most 250 ms old; exact once run returned). Call on the thread of the pool's loop, or while
 * sluice_worker_pool_run is not running. */
SLUICE_API void sluice_worker_pool_get_stats(const sluice_worker_pool *p, sluice_worker_stats *s);

/* The sum of its workers' concurrency limits (sluice_worker_concurrency_limit: fixed, or each
 * worker's adaptive limit), those on threads as of their last copy, as get_stats. Call on the
 * thread of the pool's loop, or while sluice_worker_pool_run is not running. */
SLUICE_API int sluice_worker_pool_concurrency_limit(const sluice_worker_pool *p);

/* The partitions the pool drains (has started a worker for): 1 until run found more. Any
 * thread. */
SLUICE_API int sluice_worker_pool_partitions(const sluice_worker_pool *p);

/* The queue (partition 0), group, consumer, backend and server of the pool; `stopping` is the
 * pool's: 2 once it closes (its last worker returned; on a plain queue, once partition 0's
 * worker closes). Strings are borrowed until sluice_worker_pool_free. Call on the thread of the
 * pool's loop (or before or after sluice_worker_pool_run). */
SLUICE_API void sluice_worker_pool_get_info(const sluice_worker_pool *p, sluice_worker_info *out);

/* Detail of the failure sluice_worker_pool_run returned: a partition's worker's message, prefixed
 * with the partition's name when it ran on a thread ("jobs~2: ..."). */
SLUICE_API const char *sluice_worker_pool_errstr(const sluice_worker_pool *p);

/* Frees a pool that is not running, and its workers. NULL is a no-op. */
SLUICE_API void sluice_worker_pool_free(sluice_worker_pool *p);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_WORKER_H */
