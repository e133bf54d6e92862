/* SPDX-License-Identifier: MIT */
/*
 * queue.h - queue names and the Redis keys of a queue (data model version 1).
 *
 * A queue name is 1..64 characters of [A-Za-z0-9_.-]. Every key of queue Q carries the hash tag
 * {Q} so one queue lives in one Redis Cluster slot. Names are checked here, before any Redis
 * call. Pure: no I/O, no allocation, thread-safe. Errors: SLUICE_EINVAL (a name or key that
 * breaks the rule, with a message), SLUICE_ECONFIG (a stored capacity that breaks its rule).
 */
#ifndef SLUICE_QUEUE_H
#define SLUICE_QUEUE_H

#include <stddef.h>

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_QUEUE_NAME_MAX 64
#define SLUICE_KEY_MAX        128
#define SLUICE_DEFAULT_GROUP  "workers"
/* Room for a stream entry id as text, "MS-SEQ": two 64-bit numbers (20 digits each), a dash and
 * the NUL make 42; a list sequence number is shorter. */
#define SLUICE_STREAM_ID_MAX 48

typedef enum sluice_backend {
    SLUICE_BACKEND_STREAM = 0, /* default: a stream read through a consumer group */
    SLUICE_BACKEND_LIST = 1,   /* a list, with per-consumer processing lists (BLMOVE) */
} sluice_backend;

typedef struct sluice_keys {
    char stream[SLUICE_KEY_MAX]; /* sluice:{Q}:stream  the bucket (stream backend) */
    char dead[SLUICE_KEY_MAX];   /* sluice:{Q}:dead    dead letters (both backends) */
    char meta[SLUICE_KEY_MAX];   /* sluice:{Q}:meta    capacity and settings */
    char stats[SLUICE_KEY_MAX];  /* sluice:{Q}:stats   monotonic counters */
    char list[SLUICE_KEY_MAX];   /* sluice:{Q}:list    the bucket (list backend) */
    char procs[SLUICE_KEY_MAX];  /* sluice:{Q}:procs   set of processing-list keys (list) */
    char limits[SLUICE_KEY_MAX]; /* sluice:{Q}:limits  rate limits: name -> "SCOPE SPEC" */
    char prefix[SLUICE_KEY_MAX]; /* sluice:{Q}:        for keys built from it */
} sluice_keys;

/*
 * Returns 0 when `name` is a valid queue name, else SLUICE_EINVAL with a message naming the
 * problem (empty, too long, the first bad character and its 0-based position) written to `err`.
 * Reads at most SLUICE_QUEUE_NAME_MAX + 1 bytes of `name`, so the "too long" message gives the
 * limit, not the full length.
 */
SLUICE_API int sluice_queue_name_check(const char *name, char *err, size_t errlen);

/* Same check, then fills `k`. Returns 0 or SLUICE_EINVAL. */
SLUICE_API int sluice_keys_init(sluice_keys *k, const char *queue, char *err, size_t errlen);

/*
 * Partitioned queues (sluice-admin partitions Q P): partition 0 of Q is Q itself, partition i
 * (1..P-1) is the queue "Q~i" - a queue of its own with its own hash tag, so on a Redis Cluster
 * the partitions spread over the slots (a name with '~' can only be a partition: no other
 * queue name holds one). The number of partitions is in Q's meta (`partitions`).
 */
#define SLUICE_PARTITIONS_MAX 64

/* Writes the name of partition i of `queue` into buf. 0, or SLUICE_EINVAL (i out of range, or
 * the name would be longer than SLUICE_QUEUE_NAME_MAX). */
SLUICE_API int sluice_partition_name(const char *queue, int i, char *buf, size_t len);

/* The partition (0..parts-1) of a tenant's messages: the jump consistent hash (Lamping and
 * Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014, as published, with its
 * double arithmetic) of FNV-1a-32(tenant) over `parts` buckets; 0 when parts <= 1. Every
 * producer uses this one function, so while P stays the same a tenant's messages always go to
 * the same partition and its order and its limits stay in one slot. Growing P to P' moves a
 * tenant only into one of the new partitions P..P'-1 (about (P'-P)/P' of the tenants); the
 * others stay where they were. */
SLUICE_API int sluice_partition_of(const char *tenant, int parts);

/* The keys of a queue with a name part. Every key name of a queue comes from one table inside
 * the library (sluice_keys_init's fields too), so these agree with every key sluice itself
 * sends. Each writes the key into buf and returns 0, or SLUICE_EINVAL when it does not fit in
 * `len` bytes (or the part holds a NUL byte):
 *   sluice:{Q}:proc:CONSUMER   a list-backend consumer's processing list
 *   sluice:{Q}:idem:KEY        an idempotency key's record
 *   sluice:{Q}:lim:KEY         a standalone rate limit's state (Q is the limiter's namespace)
 *   sluice:{Q}:qlim:NAME:ALG:VALUE  the state of queue Q's limit NAME of algorithm ALG ("gcra",
 *                              ...) for VALUE ('' for scopes queue and drain, the tenant, the
 *                              client key; valuelen bytes, NULL = ''): the twin of the function
 *                              library's queue_keys, apart from every standalone key
 *   sluice:{Q}:hold:TARGET     an HTTP target's hold after a 429/503 with Retry-After (TARGET:
 *                              HOST:PORT, targetlen bytes; the key expires with the hold) */
SLUICE_API int sluice_key_proc(const sluice_keys *k, const char *consumer, char *buf, size_t len);
SLUICE_API int sluice_key_idem(const sluice_keys *k, const char *key, size_t keylen, char *buf,
                               size_t len);
SLUICE_API int sluice_key_limit(const sluice_keys *k, const char *key, size_t keylen, char *buf,
                                size_t len);
SLUICE_API int sluice_key_hold(const sluice_keys *k, const char *target, size_t targetlen,
                               char *buf, size_t len);
SLUICE_API int sluice_key_queue_limit(const sluice_keys *k, const char *name, const char *alg,
                                      const char *value, size_t valuelen, char *buf, size_t len);

/* The consumer a processing-list key belongs to (the text after "sluice:{Q}:proc:"), or the
 * key itself when it is not one of this queue's processing lists. */
SLUICE_API const char *sluice_key_proc_consumer(const sluice_keys *k, const char *key);

/* Parses "stream" or "list". Returns 0 or SLUICE_EINVAL. */
SLUICE_API int sluice_backend_parse(const char *s, sluice_backend *out);

/* The largest capacity a queue can have: 2^53, exact in every client language. */
#define SLUICE_CAPACITY_MAX 9007199254740992LL

/* Parses a capacity as stored in the queue's meta hash: decimal digits only, 0..2^53 (0 = a
 * closed bucket: everything is rejected as full). The same rule the server functions apply.
 * Returns 0, or SLUICE_ECONFIG for anything else ("2.5", "1e3", "0x10", "-1", "", "inf"). */
SLUICE_API int sluice_capacity_parse(const char *s, size_t len, long long *out);
SLUICE_API const char *sluice_backend_name(sluice_backend b);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_QUEUE_H */
