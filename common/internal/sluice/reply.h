/* SPDX-License-Identifier: MIT */
/*
 * reply.h - reading Redis replies: error replies mapped to sluice statuses, integers that
 * arrive as integers or as decimal strings, and fields of the flat name/value arrays Redis
 * returns for HGETALL and XINFO and of stream entries (XRANGE). Internal to sluice (the library,
 * its binaries and tests). Pure: no I/O; thread-safe.
 */
#ifndef SLUICE_REPLY_H
#define SLUICE_REPLY_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Maps an error reply's text ("NOPERM ...", "OOM ...") to a status; EREDIS when unknown. */
int sluice_reply_error_status(const char *str, size_t len);

/* 1 when `r` is the error of a command the server does not know ("ERR unknown command"). */
int sluice_reply_unknown_command(const redisReply *r);

/* An integer reply, or a string holding only a decimal integer; `dflt` for anything else
 * (NULL, nil, an error, "12abc"). */
long long sluice_reply_ll(const redisReply *r, long long dflt);

/* The value after the name `name` in a flat array of name, value pairs (HGETALL, one group or
 * consumer of XINFO); NULL when absent or `r` is not an array. */
const redisReply *sluice_reply_field(const redisReply *r, const char *name);

/* The string value of field `name` of a stream entry as XRANGE returns it, [id, [f, v, ...]];
 * NULL when absent, not a string, or `e` is not such an entry. */
const redisReply *sluice_reply_entry_field(const redisReply *e, const char *name);

/* 1 when `r` is the reply of sluice_replay / sluice_list_replay for n ids: {replayed, not_fit,
 * skipped, missing, depth, capacity, outcomes}, six integers and one outcome per id (0 replayed,
 * 1 did not fit, 2 skipped: no body, 3 missing); else 0. */
int sluice_reply_replay_ok(const redisReply *r, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_REPLY_H */
