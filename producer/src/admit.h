/* SPDX-License-Identifier: MIT */
/*
 * admit.h - building one admission call and reading its reply, shared by the blocking and the
 * async producer.
 *
 * A call is: KEYS (bucket, meta, stats[, idempotency key]) and ARGV (default capacity, TTL,
 * envelope...). The envelopes are encoded into one arena owned by the call; the argument
 * arrays point into it. The reply {admitted, depth, capacity, duplicate, acked, ids...} is
 * turned into per-message results. No I/O here.
 */
#ifndef SLUICE_PRODUCER_ADMIT_H
#define SLUICE_PRODUCER_ADMIT_H

#include <hiredis/hiredis.h>

#include "drain.h"
#include "sluice/producer.h"
#include "sluice/redis.h"

typedef struct sluice__admit_call {
    sluice_fn fn;
    int nkeys;
    const char *keys[4];
    size_t keylens[4];
    char idem_key[SLUICE_KEY_MAX + 256];
    int nargs;
    const char **args; /* nargs entries */
    size_t *arglens;
    int stride; /* ARGV per message: 1 (envelope) or 3 (tenant, client, envelope) */
    char cap_arg[24];
    char ttl_arg[24];
    unsigned char *arena; /* encoded envelopes */
    size_t arena_len;
} sluice__admit_call;

/* Settings of one producer that a call needs. */
typedef struct sluice__admit_cfg {
    sluice_keys keys;
    sluice_backend backend;
    long long capacity;
    size_t max_payload;
    size_t max_batch;
    int idempotency_ttl_ms;
    int wait_replicas, wait_timeout_ms; /* WAIT after each admission call (0: none) */
    char wait_n[16], wait_ms[16];       /* their WAIT arguments */
} sluice__admit_cfg;

/* Checks the options' values; fills cfg. Returns 0 or EINVAL with a message. */
int sluice__admit_cfg_init(sluice__admit_cfg *cfg, const sluice_producer_options *o, char *err,
                           size_t errlen);

/* The rules one message must follow whatever the batch (payload and header pointers, payload
 * size, idempotency key length and backend, envelope limits). Returns 0, EINVAL or ETOOBIG
 * with a message in err. The async producer checks each message with it when it is queued. */
int sluice__admit_check_msg(const sluice__admit_cfg *cfg, const sluice_message *m, char *err,
                            size_t errlen);

/* Makes a built call tentative: a message it finds full is not counted in the queue's
 * `rejected`, because the producer tries another partition for it and that one counts its final
 * outcome (each message is counted once). Only for calls whose every message has a second
 * partition to try. */
void sluice__admit_call_tentative(sluice__admit_call *call);

/*
 * Validates and encodes msgs[0..n) into `call`. Returns 0, ETOOBIG (a payload over the limit or
 * a batch over max_batch) or EINVAL, with a message in err. Free with sluice__admit_call_free.
 */
int sluice__admit_call_build(sluice__admit_call *call, const sluice__admit_cfg *cfg,
                             const sluice_message *msgs, size_t n, char *err, size_t errlen);
void sluice__admit_call_free(sluice__admit_call *call);

/*
 * Fills res[0..n) from a successful reply; samples `drain` (required) with the acked counter when
 * some were rejected. Returns 0 or EPROTO. *admitted counts ADMITTED + DUPLICATE.
 */
int sluice__admit_parse(const redisReply *r, size_t n, sluice_drain *drain, uint64_t now_ms,
                        sluice_admit_result *res, size_t *admitted);

/* Sets res[0..n) to FAILED (or OPEN when fail_open and the call never ran) with `status`. */
void sluice__admit_fail(sluice_admit_result *res, size_t n, int status, int sent, int fail_open);

/*
 * A WAIT after an admission call confirmed `replicas` of the cfg's wait_replicas (-1: the WAIT
 * failed or its reply was lost). Short of them, every ADMITTED result of the call becomes FAILED
 * with EUNKNOWN: appended on the primary, not known to be on the replicas, so a failover may
 * lose it. Returns 0 (all confirmed, or nothing to confirm) or SLUICE_EUNKNOWN, with a message.
 */
int sluice__admit_confirm(const sluice__admit_cfg *cfg, long long replicas,
                          sluice_admit_result *res, size_t n, char *err, size_t errlen);

#endif
