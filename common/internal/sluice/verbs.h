/* SPDX-License-Identifier: MIT */
/*
 * verbs.h - the operator's verbs on a queue's waiting entries as commands: pause / resume (meta
 * `paused`) and clear (the functions sluice_clear / sluice_list_clear, a batch a call).
 *
 * `sluice-admin pause | resume | clear` sends them on its blocking connection and the gateway's
 * admin actions (POST /v1/admin/queues/{q}/pause ...) on its asynchronous one: this module builds
 * each call and reads each reply, so both do the same thing; the loop over partitions and calls
 * stays with the caller. Not here: reading the figures (figures.h). Pure: no I/O, thread-safe.
 */
#ifndef SLUICE_VERBS_H
#define SLUICE_VERBS_H

#include <hiredis/hiredis.h>

#include "sluice/queue.h"
#include "sluice/redis.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_CLEAR_BATCH     1000    /* entries a clear call deletes at most (its bound) */
#define SLUICE_CLEAR_MAX_CALLS 1000000 /* a bound on a caller's loop: 10^9 entries a queue */

/* Fills argv with the command pausing (on = 1: HSET meta paused 1) or resuming (HDEL meta
 * paused) the queue of `k` (argv borrows k); returns argc. Its reply is an integer, 0 when the
 * queue already was so (sluice__pause_unchanged). */
int sluice__pause_command(const sluice_keys *k, int on, const char *argv[4]);

/* 1 when the reply of the pause command says the queue already was so, else 0. */
int sluice__pause_unchanged(const redisReply *r);

/* One clear call of the queue of `k`: the function, its keys and arguments (borrowed from `k`,
 * `group` and the struct itself: do not copy it while in use). */
typedef struct sluice__clear_call {
    sluice_fn fn;
    int nkeys, nargs;
    const char *keys[2], *args[2];
    char batch[24];
} sluice__clear_call;

/* Fills `c` for a queue of backend `b` (group: the stream backend's consumer group). */
void sluice__clear_call_init(sluice__clear_call *c, const sluice_keys *k, sluice_backend b,
                             const char *group);

/* Reads the reply of one clear call: adds the entries deleted to *cleared; returns 1 when the
 * call stopped at its bound (call again), 0 when the queue has no waiting entry left, -1 when
 * the reply is not a clear reply (an error reply among them). */
int sluice__clear_reply(const redisReply *r, long long *cleared);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_VERBS_H */
