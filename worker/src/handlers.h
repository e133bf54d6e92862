/* SPDX-License-Identifier: MIT */
/* handlers.h - the built-in handlers of sluice-worker (see handlers.c). Functions of the
 * sluice-worker binary carry the prefix sw_; sluice__ is the libraries' own. */
#ifndef SLUICE_WORKER_HANDLERS_H
#define SLUICE_WORKER_HANDLERS_H

#include <stddef.h>

#include <uv.h>

#include "sluice/worker.h"
#include "sluice/worker_http.h"

/* Sets o->async_handler from "noop", "sleep:MS", "exec:CMD" or "crash-on:TEXT"; an http:// or
 * https:// URL sets none (the caller builds the target: sw_http_new). Returns 0 or -1 with a
 * message naming the value. `spec` and `queue` must outlive the worker. */
int sw_handler_parse(const char *spec, const char *queue, sluice_worker_options *o, char *err,
                     size_t errlen);

/* The HTTP handler's command line: --handler http(s)://..., --http-header (repeatable),
 * --http-header-file, --sign-secret-file, --http-ca, --http-follow. */
#define SW_HTTP_HEADERS_MAX 64
typedef struct sw_http_args {
    const char *url; /* NULL: another handler */
    const char *headers[SW_HTTP_HEADERS_MAX];
    size_t nheaders;
    const char *header_file, *secret_file, *ca_file;
    int follow;
} sw_http_args;

/* Builds the target from the arguments (reads the files). 0, or -1 with a message naming the
 * bad value (never a secret) in err. */
int sw_http_new(const sw_http_args *a, sluice_http **out, char *err, size_t errlen);

/* Opens FILE for --record. Returns 0 or -errno. */
int sw_handlers_record(const char *path);

/* The worker options' on_verdict hook of --record: a DONE verdict's line (see handlers.c). */
void sw_handlers_record_verdict(const sluice_job *job, sluice_verdict v, const char *reason,
                                void *arg);

/* After the grace period: stops every sleep (no verdict) and kills every exec child, so the
 * loop can end; their entries stay pending and are reclaimed by other workers. */
void sw_handlers_abandon(uv_loop_t *loop);

/* environ plus `n` extra "K=V" strings (malloc'ed array, strings borrowed). */
char **sw_handlers_env(char extra[][160], size_t n);

#endif
