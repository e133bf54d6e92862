/* SPDX-License-Identifier: MIT */
/*
 * conn_internal.h - what the blocking connection (conn.c, conn_node.c, conn_cluster.c) and the
 * async one (uvredis_link.c) share inside libsluice: option defaults, the reconnect backoff,
 * sockets closed on exec, and the FCALL / EVALSHA command text.
 */
#ifndef SLUICE_CONN_INTERNAL_H
#define SLUICE_CONN_INTERNAL_H

#include <stdint.h>

#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "sluice/redis.h"

/* Marks a socket hiredis opened close-on-exec (hiredis 0.14 does not): a child process an
 * exec handler starts must hold no Redis session of ours (docs/faults.md F23). hiredis creates
 * the socket on the calling thread, and sluice starts child processes on the loop thread that
 * connects, so nothing can fork in between. */
void sluice__fd_cloexec(int fd);

/* Copies `src` (NULL = defaults) into `dst`, replacing zero fields by their defaults. */
void sluice__conn_options_fill(sluice_conn_options *dst, const sluice_conn_options *src);

/* Reconnect attempts are counted up to this and no further: the backoff reached its cap long
 * before (100 ms doubled 16 times is past any sane cap), and the count must not overflow. */
#define SLUICE_ATTEMPT_MAX 30

/* Delay before reconnect attempt number `attempt` (1-based): min * 2^(attempt-1) capped at
 * max, with jitter in [d/2, d] drawn from the caller's generator state `seed`. */
int sluice__backoff_ms(const sluice_conn_options *o, int attempt, unsigned *seed);

/* Formats `VERB TARGET nkeys keys... args...` (FCALL name / EVALSHA sha) into *out (an sds the
 * caller frees). NULL length arrays mean strlen. Returns 0 or SLUICE_ENOMEM. */
int sluice__format_fcall(const char *verb, const char *target, int nkeys, const char **keys,
                         const size_t *keylens, int nargs, const char **args, const size_t *arglens,
                         sds *out);

#endif
