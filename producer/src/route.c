/* SPDX-License-Identifier: MIT */
/*
 * route.c - a message's partition on a partitioned queue (see route.h): idempotency key to
 * partition 0, tenant to its partition, else the emptier of two drawn at random.
 */
#include <stdlib.h>

#include "sluice/queue.h"

#include "route.h"

sluice__route sluice__route_message(const sluice_message *m, int parts, const long long *depth,
                                    unsigned *rnd) {
    if (parts <= 1 || m->idempotency_key != NULL) {
        return (sluice__route){0, 0};
    }
    if (m->tenant != NULL) {
        int p = sluice_partition_of(m->tenant, parts);
        return (sluice__route){p, p};
    }
    int a = (int)(rand_r(rnd) % (unsigned)parts);
    int b = (int)(rand_r(rnd) % (unsigned)parts);
    return depth[a] <= depth[b] ? (sluice__route){a, b} : (sluice__route){b, a};
}
