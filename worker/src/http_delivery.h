/* SPDX-License-Identifier: MIT */
/*
 * http_delivery.h - the worker's side of the HTTP delivery handler (sluice/worker_http.h): the
 * target object and the calls the worker makes into it.
 *
 * The worker reaches the handler only through the ops table of its target (o.http->ops), never
 * by name: a program that links libsluice_worker.a without ever creating a target does not
 * pull http_delivery.o, and so not libcurl either.
 *
 * Per worker, on its loop: a client (a libcurl multi handle driven by uv_poll and uv_timer
 * handles), the jobs waiting for the hold check or a hold, and the hold itself. The hold: a
 * 429 or 503 with Retry-After sets sluice:{Q}:hold:TARGET (sluice_key_hold) with that expiry,
 * Q the queue as a whole for every partition (on a Redis Cluster: the partition's own); the
 * other partitions' clients of the target in this process are told at once, and one started
 * while the hold lasts as it starts, and hold (on a Redis Cluster each also sets its own key; a
 * SET that got no answer is sent again while the hold lasts); every worker asks its PTTL before
 * it starts the requests of entries it took (an answer is trusted for HOLD_FRESH_MS), holds them
 * until the key expires, and reads nothing new while a hold it knows of lasts. A refused
 * connection or a TLS failure holds this worker alone for a pause (its backoff, doubling while
 * tries fail).
 */
#ifndef SLUICE_WORKER_HTTP_DELIVERY_H
#define SLUICE_WORKER_HTTP_DELIVERY_H

#include "sluice/worker_http.h"

#include "worker_internal.h"

typedef struct sluice__http_ops {
    /* Creates the worker's client on w->loop (w->http_client). 0 or SLUICE_ENOMEM. */
    int (*start)(sluice_worker *w);
    /* The worker is closing: every job still in the client gets RETRY (abandoned: w->closing),
     * the handles close, and done(arg) runs once the last one is closed. */
    void (*close)(sluice_worker *w, void (*done)(void *), void *arg);
    /* A stop was asked: jobs held by a hold are retried after it now, not at its end. */
    void (*stopping)(sluice_worker *w);
    /* Delivers the job (decoded); its verdict comes through sluice_job_finish_reason. */
    void (*dispatch)(job *j);
    /* 1 while a hold keeps reads back (its end kicks the worker again), else 0. */
    int (*held)(sluice_worker *w);
    /* Gives up the job's request (waiting or under way) and finishes it with RETRY: for a
     * worker that settled the job already (its handler deadline passed), the verdict it must
     * still get. No-op for a job the handler does not hold. */
    void (*abandon)(job *j);
} sluice__http_ops;

/* The ops of a target: the first member of struct sluice_http (defined in http_delivery.c). */
static inline const sluice__http_ops *sluice__http_ops_of(const sluice_http *h) {
    return *(const sluice__http_ops *const *)(const void *)h;
}

#endif
