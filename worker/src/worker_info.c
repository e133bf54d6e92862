/* SPDX-License-Identifier: MIT */
/*
 * worker_info.c - sluice_worker_get_info(): what a worker drains and whether it is stopping,
 * for code on the same loop that reports about it (sluice-worker's metrics endpoint). Kept apart
 * from worker.c so that the life cycle there stays the only writer of the state read here.
 */
#include "worker_internal.h"

void sluice_worker_get_info(const sluice_worker *w, sluice_worker_info *out) {
    out->queue = w->queue;
    out->group = w->group;
    out->consumer = w->consumer;
    out->backend = w->o.backend;
    out->url = &w->url;
    out->stopping = w->closing ? 2 : w->stopping ? 1 : 0;
}
