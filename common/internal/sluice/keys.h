/* SPDX-License-Identifier: MIT */
/*
 * keys.h - every Redis key of a queue, named in one table (data model version 1).
 *
 * Queue Q's keys are "sluice:{Q}:" (its prefix: the hash tag keeps the queue in one Cluster
 * slot) followed by the suffix of one kind below and, for the kinds that name one of many (a
 * tenant's lane, a consumer's processing list...), a part after it. keys.c holds the table of
 * suffixes; every key sluice's C code sends is built from it: sluice_keys_init (sluice/queue.h)
 * fills the keys every component uses, sluice__key builds the others, and the public
 * sluice_key_* builders go through it. The function library (scripts/lua/, queue_keys) derives the
 * same names from the same prefix; docs/data-model.md is the contract for both, and
 * tests/unit/test_queue.c asserts every name. A partition i of Q is the queue "Q~i"
 * (sluice_partition_name) with keys of its own: sluice__partition_keys.
 *
 * Not here: a standalone limiter's namespace NS is a prefix of its own ("sluice:{NS}:lim:KEY",
 * the kind SLUICE_KEY_LIM of the namespace's keys). Pure: no I/O, thread-safe.
 */
#ifndef SLUICE_KEYS_H
#define SLUICE_KEYS_H

#include <stddef.h>

#include "sluice/queue.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sluice_key_kind {
    /* one of each per queue (the first seven are fields of sluice_keys) */
    SLUICE_KEY_STREAM,  /* stream: the bucket (stream backend), a fair queue's lane '' */
    SLUICE_KEY_DEAD,    /* stream: dead letters */
    SLUICE_KEY_META,    /* hash: capacity and settings */
    SLUICE_KEY_STATS,   /* hash: monotonic counters */
    SLUICE_KEY_LIST,    /* list: the bucket (list backend) */
    SLUICE_KEY_PROCS,   /* set: the processing lists (list backend) */
    SLUICE_KEY_LIMITS,  /* hash: rate limits, NAME -> "SCOPE SPEC" */
    SLUICE_KEY_TDEPTH,  /* hash: per-tenant share, tenant -> entries held */
    SLUICE_KEY_LANES,   /* hash: fair, lane -> entries held */
    SLUICE_KEY_LWAIT,   /* hash: fair, lane -> entries not yet delivered */
    SLUICE_KEY_SERVED,  /* hash: fair, lane -> delivered since the lane last held nothing */
    SLUICE_KEY_RING,    /* list: fair, the lanes with undelivered entries in turn */
    SLUICE_KEY_DEFICIT, /* hash: fair, each lane's credit in its turn */
    SLUICE_KEY_WEIGHTS, /* hash: fair, tenant -> weight */
    SLUICE_KEY_WAKE,    /* list: fair, the idle workers' wake-up token */
    /* one per name: the part follows the suffix */
    SLUICE_KEY_LANE,  /* stream: fair, lane:TENANT */
    SLUICE_KEY_PROC,  /* list: proc:CONSUMER, a consumer's processing list (list backend) */
    SLUICE_KEY_IDEM,  /* string: idem:KEY, an idempotency key's record */
    SLUICE_KEY_QLIM,  /* qlim:NAME:ALG:VALUE, the state of the queue's limit NAME */
    SLUICE_KEY_LIM,   /* lim:KEY, a standalone limit's state (the queue is its namespace) */
    SLUICE_KEY_HOLD,  /* string: hold:HOST:PORT, an HTTP target's hold after a Retry-After */
    SLUICE_KEY_KINDS_ /* how many */
} sluice_key_kind;

/* The suffix of a kind ("stream", "lane:"...), or NULL for a kind out of range. */
const char *sluice__key_suffix(sluice_key_kind kind);

/* 1 when a kind names one of many (a part follows its suffix), else 0. */
int sluice__key_named(sluice_key_kind kind);

/* Fills every field of `k` for `queue`, unchecked (sluice_keys_init checks the name first; a
 * key that a name far too long would not fit into SLUICE_KEY_MAX is left empty). */
void sluice__keys_fill(sluice_keys *k, const char *queue);

/*
 * Writes the key of `kind` of the queue of `k` into buf: the prefix, the suffix and, for a
 * named kind, `part` (partlen bytes, no NUL among them; NULL = ""). Returns 0, or SLUICE_EINVAL
 * when it does not fit in `len` bytes, the part holds a NUL, or a kind of one per queue is
 * given a part.
 */
int sluice__key(const sluice_keys *k, sluice_key_kind kind, const char *part, size_t partlen,
                char *buf, size_t len);

/* The same into a new string of its own length (a part of any length, binary-safe: a tenant's
 * lane, whose name may hold any byte); *keylen (may be NULL) is its length. NULL when out of
 * memory or `kind` takes no part. Free with free(). */
char *sluice__key_new(const sluice_keys *k, sluice_key_kind kind, const char *part, size_t partlen,
                      size_t *keylen);

/* The part of `key` when it is a key of `kind` of this queue (the consumer of
 * "sluice:{Q}:proc:C"), else NULL. */
const char *sluice__key_part(const sluice_keys *k, sluice_key_kind kind, const char *key);

/* The keys of partition i of `queue` (i = 0: the queue itself). 0, or SLUICE_EINVAL when i is
 * out of range or the partition's name would not be a valid queue name. */
int sluice__partition_keys(const char *queue, int i, sluice_keys *k);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_KEYS_H */
