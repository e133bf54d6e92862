/* SPDX-License-Identifier: MIT */
/* handlers.h - the built-in handlers of sluice-worker (see handlers.c). Functions of the
 * sluice-worker binary carry the prefix sw_; sluice__ is the libraries' own. */
#ifndef SLUICE_WORKER_HANDLERS_H
#define SLUICE_WORKER_HANDLERS_H

#include <stddef.h>

#include <uv.h>

#include "sluice/worker.h"

/* Sets o->async_handler from "noop", "sleep:MS", "exec:CMD" or "crash-on:TEXT". Returns 0 or -1
 * with a message naming the value. `spec` and `queue` must outlive the worker. */
int sw_handler_parse(const char *spec, const char *queue, sluice_worker_options *o, char *err,
                     size_t errlen);

/* Opens FILE for --record. Returns 0 or -errno. */
int sw_handlers_record(const char *path);

/* After the grace period: stops every sleep (no verdict) and kills every exec child, so the
 * loop can end; their entries stay pending and are reclaimed by other workers. */
void sw_handlers_abandon(uv_loop_t *loop);

/* environ plus `n` extra "K=V" strings (malloc'ed array, strings borrowed). */
char **sw_handlers_env(char extra[][160], size_t n);

#endif
