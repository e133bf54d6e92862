/* SPDX-License-Identifier: MIT */
/*
 * figures.h - what a queue holds, with one meaning for every reader.
 *
 * The producer's info call, the worker's /metrics, `sluice-admin stats` and the benchmarks all
 * read the same figures: this module builds the commands (send them in order, pipelined or in
 * MULTI/EXEC, on any connection) and parses each reply into one struct. Pure: no I/O; a
 * sluice_figures is used by one thread at a time.
 *
 * Meanings, both backends (depth = waiting + in_flight always holds):
 *   depth      entries in the bucket, waiting + in flight: what capacity bounds.
 *              stream: XLEN of the stream + meta `lane_depth` (the entries in the tenant lanes
 *              of a fair queue); list: meta `list_depth` (kept by the functions).
 *   in_flight  delivered to a worker and not yet acknowledged, dead-lettered or retried.
 *              stream: the consumer group's pending count (XINFO GROUPS) + meta `lane_depth`
 *              - `lane_wait` (the lanes' delivered entries); list: depth - waiting.
 *   waiting    admitted and not yet delivered to any worker.
 *              stream: depth - in_flight (Redis's own `lag` is unknown after deletions, and
 *              sluice deletes every acknowledged entry); list: LLEN of the list.
 *   consumers  stream: consumers of the group; list: processing lists (one per consumer).
 *   dead       dead letters held (XLEN of the dead-letter stream).
 *   capacity   meta `capacity`: SLUICE_FIGURE_UNSET when never set (producers use their own
 *              default), SLUICE_FIGURE_INVALID when it breaks the capacity rule.
 *   paused     meta `paused` = 1 (`sluice-admin pause`: workers take no new entries); a sum
 *              over partitions counts the partitions paused.
 *   counters   the monotonic counters of the stats hash (0 when absent).
 * A missing stream or group (nothing admitted yet) reads as an empty queue.
 */
#ifndef SLUICE_FIGURES_H
#define SLUICE_FIGURES_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "sluice/queue.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_FIGURE_UNSET   (-1LL)
#define SLUICE_FIGURE_INVALID (-2LL)

typedef enum sluice_counter {
    SLUICE_COUNTER_ADMITTED = 0,
    SLUICE_COUNTER_REJECTED,
    SLUICE_COUNTER_ACKED,
    SLUICE_COUNTER_RETRIED,
    SLUICE_COUNTER_DEAD,
    SLUICE_COUNTER_RECLAIMED,
    SLUICE_COUNTER_LIMITED, /* admissions refused by a rate limit (not counted in rejected) */
    SLUICE_COUNTER_COUNT_
} sluice_counter;

/* "admitted", "rejected", ... as the fields of the stats hash. */
const char *sluice_counter_name(sluice_counter c);

typedef struct sluice_figures {
    long long depth, in_flight, waiting, consumers, dead, capacity;
    long long paused; /* 1 paused (meta `paused`); summed: the partitions paused */
    int group_exists; /* stream: the group exists (list: 1) */
    long long lanes_depth, lanes_in_flight; /* stream: the tenant lanes of a fair queue */
    long long counters[SLUICE_COUNTER_COUNT_];
} sluice_figures;

#define SLUICE_FIGURES_MAX_CMDS 6

typedef struct sluice_figures_cmd {
    int argc;
    const char *argv[2 + SLUICE_COUNTER_COUNT_]; /* borrowed from the keys and static text */
} sluice_figures_cmd;

/* Fills cmds[] with the commands to send, in order; returns how many (<= MAX_CMDS). */
size_t sluice_figures_commands(const sluice_keys *k, sluice_backend b,
                               sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS]);

/* Zeroes the figures (capacity UNSET) before the replies are parsed. */
void sluice_figures_init(sluice_figures *f);

/*
 * Parses the reply to command i. `group` is the consumer group to report (stream backend);
 * NULL sums every group (sluice keeps one group per queue, so that is the queue's group).
 * Returns 0, or SLUICE_EPROTO when the reply is not of the command's shape. Error replies
 * other than a missing stream ("no such key") return their mapped status.
 */
int sluice_figures_parse(sluice_figures *f, sluice_backend b, const char *group, size_t i,
                         const redisReply *r);

/* Derives what the replies do not give directly (waiting or in_flight); call once all are in. */
void sluice_figures_finish(sluice_figures *f, sluice_backend b);

/*
 * init, parse and finish in one, for replies that arrived together (an EXEC array):
 * replies[i] answers command i of sluice_figures_commands, n of them. Every reply is parsed;
 * returns 0, or the status of the first that failed with its index in *bad (may be NULL).
 */
int sluice_figures_read(sluice_figures *f, sluice_backend b, const char *group,
                        redisReply *const *replies, size_t n, size_t *bad);

/* Adds a partition's figures into `sum` (start from a zeroed struct: the sum of none). The
 * capacity is the sum while every capacity added is set, else SLUICE_FIGURE_UNSET. */
void sluice_figures_add(sluice_figures *sum, const sluice_figures *f);

/* The queue's own stream apart from a fair queue's tenant lanes (the lane '' of `sluice-admin
 * fair`): its entries and, of those, the ones waiting (after sluice_figures_finish). */
void sluice_figures_stream_lane(const sluice_figures *f, long long *depth, long long *waiting);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_FIGURES_H */
