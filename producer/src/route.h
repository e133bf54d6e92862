/* SPDX-License-Identifier: MIT */
/*
 * route.h - where a message goes on a partitioned queue (sluice-admin partitions Q P), the one
 * rule of the blocking and the async producer. It owns the choice only: how many partitions
 * there are and how deep each is are what the producer learnt from Redis (meta `partitions`,
 * the depth in each partition's last admission reply); the random source is the producer's.
 * No I/O, no state of its own.
 */
#ifndef SLUICE_PRODUCER_ROUTE_H
#define SLUICE_PRODUCER_ROUTE_H

#include "sluice/producer.h"

typedef struct sluice__route {
    int part; /* the partition to try first, 0..parts-1 */
    int alt;  /* the one to try once when `part` answers full; == part when there is none */
} sluice__route;

/*
 * The partitions of message m on a queue of `parts` partitions:
 *   - one partition (parts <= 1), or an idempotency key: partition 0, the one place the key is
 *     looked up;
 *   - a tenant: sluice_partition_of(tenant, parts), and only that one (its order and its limits
 *     stay in one partition);
 *   - any other: two partitions drawn with rand_r(rnd) (a, then b, which may be the same);
 *     `part` is the emptier by depth[] (a on a tie), `alt` the other.
 * depth[0..parts) are the depths last seen (0 for one not seen yet); *rnd is advanced by the
 * two draws only in the last case.
 */
sluice__route sluice__route_message(const sluice_message *m, int parts, const long long *depth,
                                    unsigned *rnd);

#endif /* SLUICE_PRODUCER_ROUTE_H */
