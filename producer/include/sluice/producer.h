/* SPDX-License-Identifier: MIT */
/*
 * producer.h - admitting messages into a sluice queue (blocking API).
 *
 * A producer owns one blocking Redis connection and admits messages with one atomic server-side
 * call each (or one call per batch): if the bucket already holds `capacity` entries the message
 * is rejected at once (SLUICE_FULL) instead of being queued without bound. Capacity stored in
 * sluice:{Q}:meta (`sluice-admin capacity`) overrides the producer's default at run time.
 *
 * Outcomes are honest: SLUICE_ADMITTED only when Redis replied that it appended the message. A
 * call whose reply was lost (connection died or deadline passed after sending) fails with
 * SLUICE_EUNKNOWN: it may or may not have been admitted. Retry those with an idempotency key to
 * have them counted once.
 *
 * A producer is for one thread at a time. The async producer for libuv loops is in
 * sluice/aproducer.h.
 */
#ifndef SLUICE_PRODUCER_H
#define SLUICE_PRODUCER_H

#include <stddef.h>

#include "sluice/envelope.h"
#include "sluice/export.h"
#include "sluice/queue.h"
#include "sluice/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_ID_MAX 48

typedef enum sluice_outcome {
    SLUICE_ADMITTED = 0,  /* appended; `id` is set */
    SLUICE_FULL = 1,      /* rejected: the bucket held `capacity` entries */
    SLUICE_DUPLICATE = 2, /* the idempotency key was admitted before (`id` = that entry) */
    SLUICE_FAILED = 3,    /* not admitted because of `status`, or unknown if EUNKNOWN */
    SLUICE_OPEN = 4,      /* fail-open: redis unreachable, nothing queued, caller may proceed */
    SLUICE_LIMITED = 5,   /* refused by the queue's rate limit `limit` (sluice-admin limit) */
} sluice_outcome;

#define SLUICE_LIMIT_NAME_MAX 64 /* a limit's name: 1..64 of A-Z a-z 0-9 _ . - */

typedef struct sluice_admit_result {
    sluice_outcome outcome;
    int status;               /* 0 unless FAILED/OPEN */
    long long depth;          /* entries in the bucket after the call; -1 unknown */
    long long capacity;       /* capacity in force; -1 unknown */
    unsigned retry_after_s;   /* FULL: seconds until there is likely room (1..max); LIMITED: the
                                 limit's retry-after rounded up to seconds */
    char id[SLUICE_ID_MAX];   /* ADMITTED/DUPLICATE: stream entry id (list: sequence number) */
    long long retry_after_ms; /* FULL, LIMITED: retry_after in ms (LIMITED: exact,
                                 rounded up: the same message passes then) */
    char limit[SLUICE_LIMIT_NAME_MAX + 1];  /* LIMITED: the refusing limit's name */
    long long limit_count, limit_period_ms; /* LIMITED: its rate, N per period */
} sluice_admit_result;

/* The longest idempotency key, in bytes (every producer and the gateway apply it). */
#define SLUICE_IDEMPOTENCY_KEY_MAX 200

/* A message with optional envelope fields. Only `payload`/`len` are required. */
typedef struct sluice_message {
    const void *payload;
    size_t len;
    const sluice_header *headers; /* nheaders entries, borrowed */
    size_t nheaders;
    const char *tenant;          /* NUL-terminated, NULL = none */
    const char *idempotency_key; /* NUL-terminated, 1..SLUICE_IDEMPOTENCY_KEY_MAX bytes, NULL =
                                    none; single admissions, stream backend only */
    const char *client;          /* NUL-terminated caller key for `client` limits, NULL = none */
} sluice_message;

typedef struct sluice_producer_options {
    size_t struct_size;         /* set by _init (sluice/export.h) */
    const char *redis_url;      /* NULL = $SLUICE_REDIS_URL, else redis://127.0.0.1:6379 */
    const char *queue;          /* required: 1..64 of [A-Za-z0-9_.-] */
    sluice_backend backend;     /* default SLUICE_BACKEND_STREAM */
    long long capacity;         /* default 1000 (0 = default), 1..2^53: used when the queue's meta
                                   has none; meta capacity 0 closes the queue */
    size_t max_payload;         /* bytes, default 1 MiB; larger payloads fail with ETOOBIG */
    size_t max_batch;           /* messages per batch call, default 1000 */
    int connect_timeout_ms;     /* ms, default 2000 */
    int command_timeout_ms;     /* ms, default 5000 */
    int idempotency_ttl_ms;     /* ms, default 86400000 (24 h) */
    int fail_open;              /* 1: outcome OPEN instead of FAILED when redis is unreachable */
    unsigned retry_after_max_s; /* ceiling of retry_after_s, default 60 */
    int force_eval;             /* 1: EVALSHA instead of FCALL (tests, old servers) */
    int wait_replicas;          /* 0..SLUICE_WAIT_REPLICAS_MAX: after an admission, WAIT for this
                                   many replicas; fewer within wait_timeout_ms: the admitted
                                   messages are reported FAILED with EUNKNOWN (appended on the
                                   primary, may be lost if it fails over). 0 = do not wait */
    int wait_timeout_ms;        /* ms for WAIT, default 1000, at most command_timeout_ms */
    const struct sluice_conn_options *tls; /* NULL = none; else its tls_* fields (sluice/redis.h)
                                              are used for a rediss:// URL (strings copied by
                                              _new) */
} sluice_producer_options;

#define SLUICE_WAIT_REPLICAS_MAX 16

typedef struct sluice_producer sluice_producer;

/* Writes the defaults into `o`. */
SLUICE_API void sluice_producer_options_init_sized(sluice_producer_options *o, size_t size);
#define sluice_producer_options_init(o) sluice_producer_options_init_sized((o), sizeof(*(o)))

/*
 * Creates a producer (copies the options; connects lazily on the first admission). Returns 0 or
 * SLUICE_EINVAL with a message naming the bad value in err (queue name, URL, limits).
 */
SLUICE_API int sluice_producer_new(const sluice_producer_options *o, sluice_producer **out,
                                   char *err, size_t errlen);

/* Frees the producer and closes its connection. NULL is a no-op. */
SLUICE_API void sluice_producer_free(sluice_producer *p);

/*
 * Admits one payload. Returns 0 when Redis answered (res->outcome ADMITTED, FULL or
 * DUPLICATE), else the status (also in res->status, with res->outcome FAILED or OPEN): ETOOBIG
 * before any Redis call when the payload is over max_payload; ECONN/ETIMEDOUT when the call
 * certainly did not run; EUNKNOWN when the reply was lost; EOOM, EMISCONF, ENOPERM, ... for
 * the server's refusals. Detail in sluice_producer_errstr().
 */
SLUICE_API int sluice_producer_admit(sluice_producer *p, const void *payload, size_t len,
                                     sluice_admit_result *res);

/* The same with headers, tenant and idempotency key. */
SLUICE_API int sluice_producer_admit_msg(sluice_producer *p, const sluice_message *m,
                                         sluice_admit_result *res);

/*
 * Admits up to max_batch messages in one round trip: the first ones are admitted while there is
 * room, the rest get FULL (or LIMITED by a rate limit). res[i] is the outcome of msgs[i];
 * *admitted (may be NULL) counts the admitted ones. Idempotency keys are not allowed here
 * (EINVAL). Returns as admit. On a partitioned queue the batch is one call per partition used:
 * when one of them fails, the status is that failure and its messages are FAILED, while the
 * other partitions' outcomes in res[] stand (read every res[i], not only the status).
 */
SLUICE_API int sluice_producer_admit_batch(sluice_producer *p, const sluice_message *msgs, size_t n,
                                           sluice_admit_result *res, size_t *admitted);

/* Detail of the last failure ("payload is 2000000 bytes; the limit is 1048576"). */
SLUICE_API const char *sluice_producer_errstr(const sluice_producer *p);

/* The queue's partitions as last read (at most once a second, by the admissions): 1 when it is
 * not partitioned or nothing was admitted yet. */
SLUICE_API int sluice_producer_partitions(const sluice_producer *p);

/*
 * Reads the queue's depth (waiting + in flight) and capacity now; for a partitioned queue their
 * sums over every partition (a partition without a capacity set counts the producer's default,
 * as its admissions do). Blocking, one round trip per figure and partition. Returns 0, or the
 * status of the first read that failed (detail in sluice_producer_errstr(); *depth and
 * *capacity are then -1).
 */
SLUICE_API int sluice_producer_queue_figures(sluice_producer *p, long long *depth,
                                             long long *capacity);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_PRODUCER_H */
