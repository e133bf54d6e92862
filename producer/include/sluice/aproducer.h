/* SPDX-License-Identifier: MIT */
/*
 * aproducer.h - admitting messages from a libuv event loop (async producer).
 *
 * An async producer owns one async Redis connection (sluice_aconn) on the caller's loop - one per
 * partition when the queue is partitioned (sluice-admin partitions; routed like the blocking
 * producer: a tenant to its partition, others to the emptier of two, the second tried before
 * "full") - and admits messages without blocking it: sluice_aproducer_admit() queues the message
 * and returns; its callback runs exactly once, later, on the loop thread, with the outcome
 * (admitted, full, duplicate, failed or open), the depth and capacity, and on "full" a Retry-After
 * estimate from the measured drain rate.
 *
 * Every admission submitted during one loop iteration (up to max_batch) is coalesced into ONE
 * atomic admission call with several envelopes, sent just before the loop next polls for I/O;
 * several such calls are pipelined on the connection. The server admits a prefix of a call's
 * envelopes while there is room, so admissions are decided in submission order. A message with
 * an idempotency key is sent in a call of its own.
 *
 * Outcomes are honest, as in producer.h: ADMITTED only when Redis replied that it appended the
 * message. A call whose reply was lost (connection dropped or deadline passed after the call was
 * written) gives FAILED with SLUICE_EUNKNOWN: it may or may not have been admitted. Each
 * admission has a deadline (command_timeout_ms from its submission in loop time, uv_now(), also
 * while the connection is still being set up); past it the callback gets SLUICE_ETIMEDOUT (or
 * EUNKNOWN if the call had been written). While Redis is unreachable (the connection failed and is
 * waiting to retry with backoff) admissions fail at once with SLUICE_ECONN, or get OUTCOME OPEN
 * with fail_open.
 *
 * Does not own: the loop (the caller runs it) or the messages (copied at submission).
 * Everything here is for the loop's thread only.
 */
#ifndef SLUICE_APRODUCER_H
#define SLUICE_APRODUCER_H

#include <stddef.h>

/* Only pointers to the loop cross this API: no need to pull uv.h (and its feature-test
 * macro needs) into every includer. */
typedef struct uv_loop_s uv_loop_t;

#include "sluice/export.h"
#include "sluice/producer.h"
#include "sluice/redis.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_aproducer sluice_aproducer;

/* Settings of the async producer beyond sluice_producer_options. Zero fields mean default. */
typedef struct sluice_aproducer_options {
    size_t struct_size;       /* set by _init (sluice/export.h) */
    size_t max_queued;        /* admissions accepted and not yet called back, default 65536;
                                 beyond it sluice_aproducer_admit() fails with ETOOBIG */
    size_t max_inflight;      /* admission calls written and not yet answered, per
                                 connection (partition), default 64 */
    unsigned drain_sample_ms; /* ms between reads of the `acked` counter for the drain-rate
                                 estimate; default 0 = only from the replies to rejections */
    /* NULL = none: called on the loop thread each time a connection is refused for a reason
     * no retry heals - SLUICE_ETLS, a certificate check or the TLS handshake failed (the reason
     * in sluice_aproducer_errstr). The producer keeps retrying; a binary may stop instead. */
    void (*refused_cb)(sluice_aproducer *ap, int status, void *arg);
    void *refused_arg;
} sluice_aproducer_options;

/* Writes the defaults into `o`. */
SLUICE_API void sluice_aproducer_options_init_sized(sluice_aproducer_options *o, size_t size);
#define sluice_aproducer_options_init(o) sluice_aproducer_options_init_sized((o), sizeof(*(o)))

/*
 * The outcome of one admission. `res` is borrowed for the duration of the call. Runs on the loop
 * thread, exactly once per admission sluice_aproducer_admit() accepted. It may submit more
 * admissions and may close the producer.
 */
typedef void (*sluice_aproducer_cb)(sluice_aproducer *ap, const sluice_admit_result *res,
                                    void *arg);

/*
 * Creates a producer on `loop` and starts connecting (no callback runs before the loop does).
 * Copies the options; `ao` may be NULL. Uses o->capacity, max_payload, max_batch,
 * connect_timeout_ms, command_timeout_ms (the deadline of each admission), idempotency_ttl_ms,
 * fail_open, retry_after_max_s and force_eval. Returns 0 and sets *out, or SLUICE_EINVAL with a
 * message naming the bad value in err (queue name, URL, limits), or SLUICE_ENOMEM.
 */
SLUICE_API int sluice_aproducer_new(uv_loop_t *loop, const sluice_producer_options *o,
                                    const sluice_aproducer_options *ao, sluice_aproducer **out,
                                    char *err, size_t errlen);

/*
 * Submits one message. The message (payload, headers, tenant, idempotency key) is copied, so the
 * caller may reuse its buffers at once. Returns 0: `cb` will run exactly once, never before this
 * returns. Returns an error and `cb` never runs: SLUICE_ETOOBIG (payload over max_payload, an
 * envelope over its limits, or max_queued admissions already waiting), SLUICE_EINVAL (NULL
 * argument, bad idempotency key), SLUICE_ENOMEM, SLUICE_ECANCELED (the producer is closing).
 * Detail in sluice_aproducer_errstr().
 */
SLUICE_API int sluice_aproducer_admit(sluice_aproducer *ap, const sluice_message *m,
                                      sluice_aproducer_cb cb, void *arg);

/*
 * Closes the producer: every admission not yet answered gets its callback with outcome FAILED
 * and status SLUICE_ECANCELED (those still queued before this returns; those already written to
 * Redis now or on the next loop iteration - they may or may not have been admitted), no other
 * callback runs afterwards, and once libuv has closed every handle the memory is freed and
 * `closed_cb` (may be NULL) runs. Safe to call from any of the producer's callbacks. To let
 * pending admissions complete first, wait until sluice_aproducer_pending() is 0.
 */
SLUICE_API void sluice_aproducer_close(sluice_aproducer *ap, void (*closed_cb)(void *arg),
                                       void *arg);

/* 1 when the connection is ready for admissions (and the queue's partition count is known). */
SLUICE_API int sluice_aproducer_ready(const sluice_aproducer *ap);

/* Admissions accepted whose callback has not run yet. */
SLUICE_API size_t sluice_aproducer_pending(const sluice_aproducer *ap);

/* Detail of the last failure ("redis://127.0.0.1:6379: Connection refused"). */
SLUICE_API const char *sluice_aproducer_errstr(const sluice_aproducer *ap);

/* The queue this producer admits into. */
SLUICE_API const char *sluice_aproducer_queue(const sluice_aproducer *ap);

/* The default capacity given at creation (the queue's meta `capacity` overrides it). */
SLUICE_API long long sluice_aproducer_capacity(const sluice_aproducer *ap);

/* The smoothed drain rate in acks per second; negative while unknown. */
SLUICE_API double sluice_aproducer_drain_rate(const sluice_aproducer *ap);

/* Seconds until there is likely room when `depth` entries are queued against `capacity`:
 * (depth - capacity + 1) / drain rate, rounded up, 1..retry_after_max_s (see drain.h). */
SLUICE_API unsigned sluice_aproducer_retry_after(const sluice_aproducer *ap, long long depth,
                                                 long long capacity);

/* Running totals since creation, for metrics. */
typedef struct sluice_aproducer_counters {
    unsigned long long calls;     /* admission calls written to Redis */
    unsigned long long admitted;  /* outcomes ADMITTED */
    unsigned long long duplicate; /* outcomes DUPLICATE */
    unsigned long long full;      /* outcomes FULL */
    unsigned long long limited;   /* outcomes LIMITED */
    unsigned long long failed;    /* outcomes FAILED and OPEN */
    unsigned long long unknown;   /* of those, status EUNKNOWN */
} sluice_aproducer_counters;

SLUICE_API void sluice_aproducer_get_counters(const sluice_aproducer *ap,
                                              sluice_aproducer_counters *out);

/* Limits described in sluice_queue_info (the first, by name). */
#define SLUICE_QUEUE_INFO_LIMITS 16

/* One rate limit of a queue (sluice-admin limit): its configuration and how often it refused. */
typedef struct sluice_queue_limit {
    char name[65];
    char scope[16]; /* queue, tenant, client */
    char spec[96];  /* as the function library spells it: "gcra:5:1000" */
    long long refused;
} sluice_queue_limit;

/* Partitions described in sluice_queue_info (as many as a queue can have). */
#define SLUICE_QUEUE_INFO_PARTS 64

/* One partition of a partitioned queue (sluice-admin partitions). */
typedef struct sluice_queue_part {
    long long depth, capacity, pending;
    int status; /* 0, or why the partition could not be read (its figures are then 0) */
} sluice_queue_part;

/* What GET /v1/queues/{q} shows; the "Queue figures" of docs/operations.md, both backends.
 * For a partitioned queue the figures are the totals of its partitions (consumers: the most of
 * any partition; limits: as partition 0 has them, refusals counted over all partitions); a
 * partition that cannot be read (its primary down) has parts[i].status set, is counted in
 * `unavailable` and is left out of the totals. */
typedef struct sluice_queue_info {
    long long depth;     /* entries in the bucket: waiting + in flight */
    long long capacity;  /* meta `capacity`, else the producer's default */
    long long pending;   /* in flight: delivered to a worker, not yet acked */
    long long consumers; /* stream: consumers of the group; list: processing lists */
    long long admitted, rejected, acked, retried, dead; /* the stats counters */
    double drain_rate;                                  /* acks per second, smoothed; < 0 unknown */
    long long limited;                                  /* admissions refused by a rate limit */
    size_t nlimits;                                     /* limits configured (all of them) */
    sluice_queue_limit limits[SLUICE_QUEUE_INFO_LIMITS]; /* the first, by name; a user whose ACL
                                                            cannot read them sees none */
    int partitions;                                      /* 1, or the queue's partitions */
    int unavailable;                                     /* of those, not read: see parts[] */
    sluice_queue_part parts[SLUICE_QUEUE_INFO_PARTS];    /* each partition's, [0, partitions) */
    int paused; /* meta `paused` (sluice-admin pause): 1, or of partitions, how many are paused */
} sluice_queue_info;

/* `info` is borrowed for the call; valid only when status is 0. */
typedef void (*sluice_aproducer_info_cb)(sluice_aproducer *ap, int status,
                                         const sluice_queue_info *info, void *arg);

/*
 * Reads the queue's depth, capacity, consumer-group state and counters with pipelined commands
 * (the queue-figures commands: depth, capacity, group or list state, dead letters, counters)
 * and feeds the `acked` counter to the
 * drain-rate estimate. Returns 0 (cb runs exactly once, with status 0 or the first failure:
 * ECONN, ETIMEDOUT, ECANCELED, ...) or an error (cb never runs: ECONN when not connected,
 * ECANCELED when closing, ENOMEM).
 */
SLUICE_API int sluice_aproducer_info(sluice_aproducer *ap, sluice_aproducer_info_cb cb, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_APRODUCER_H */
