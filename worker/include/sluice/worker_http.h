/* SPDX-License-Identifier: MIT */
/*
 * worker_http.h - the worker's built-in HTTP delivery handler: each message is one POST to a
 * URL, and the answer is the verdict (docs/delivery.md).
 *
 * A sluice_http is a target: the URL, extra request headers, an optional Standard Webhooks
 * signing secret, TLS settings, and the counters of every delivery made to it. It is immutable
 * after sluice_http_new() apart from its counters (atomic), so one target may be given to
 * several workers, on threads of their own (the partitions of a queue): set
 * sluice_worker_options.http. Each worker then posts on its own loop through libcurl's
 * multi-socket API (keep-alive connections, at most the worker's concurrency; DNS off the
 * loop), and its `handler_timeout_ms` is the deadline of the whole request.
 *
 * The request: body = the payload; Content-Type and X-Request-Id from the envelope's headers
 * `content-type` (default application/octet-stream) and `request-id`; Sluice-Id, Sluice-Queue,
 * Sluice-Deliveries, Sluice-Tenant (when the message has one); Idempotency-Key: QUEUE:ENTRY-ID;
 * the extra headers; with a secret, webhook-id, webhook-timestamp and webhook-signature.
 *
 * The verdict: 2xx done; 429 and 503 retried after Retry-After (seconds or an HTTP date) when
 * given, else the worker's backoff, and every worker of the queue (of every partition of a
 * partitioned queue; on a Redis Cluster through each partition's own key, which the process that
 * got the answer sets for every partition it runs) holds its deliveries to the target until then;
 * 408, 425, other 5xx, a refused or reset connection, a TLS failure or the deadline retried with
 * the backoff; any other 4xx, and a 3xx unless redirects are followed, dead-lettered with the
 * reason "http STATUS: <start of the body>". After a refused connection or a TLS failure the
 * worker pauses for its backoff (doubling while tries fail, at most 5 s).
 *
 * Linking: libsluice_worker needs libcurl and libcrypto. A fully static program that uses this
 * handler adds `pkg-config --static --libs libcurl libcrypto`; one that does not never pulls it.
 */
#ifndef SLUICE_WORKER_HTTP_H
#define SLUICE_WORKER_HTTP_H

#include <stddef.h>

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sluice_http sluice_http;

typedef struct sluice_http_options {
    size_t struct_size; /* set by _init (sluice/export.h) */
    /* required: http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH; no user:password (give an
     * Authorization header instead: it stays off command lines and logs) */
    const char *url;
    const char *const *headers; /* nheaders extra request headers, "Name: value" each */
    size_t nheaders;
    /* Standard Webhooks signing secret: base64, with or without the "whsec_" prefix; NULL or
     * "": requests are not signed */
    const char *sign_secret;
    const char *ca_file;    /* https: PEM file of the CAs to trust; NULL: the system store */
    int follow_redirects;   /* 1: follow up to 5 redirects; default 0: a 3xx is dead-lettered */
    int connect_timeout_ms; /* ms, default 5000 (never more than the request deadline) */
} sluice_http_options;

/* The deadline of one request when the worker's handler_timeout_ms is 0: ms. */
#define SLUICE_HTTP_TIMEOUT_DEFAULT_MS 30000

SLUICE_API void sluice_http_options_init_sized(sluice_http_options *o, size_t size);
#define sluice_http_options_init(o) sluice_http_options_init_sized((o), sizeof(*(o)))

/* Checks and copies the options into a new target. Returns 0, SLUICE_EINVAL with a message
 * naming the bad value in err (the URL, a header, the secret, an unreadable CA file), or
 * SLUICE_ENOMEM. Thread-safe. */
SLUICE_API int sluice_http_new(const sluice_http_options *o, sluice_http **out, char *err,
                               size_t errlen);

/* Frees a target once every worker given it is freed. NULL is a no-op. */
SLUICE_API void sluice_http_free(sluice_http *h);

/* Deliveries to a target by what their answer was, since it was created, summed over the
 * workers given it. */
typedef struct sluice_http_stats {
    unsigned long long ok;            /* 2xx: done */
    unsigned long long throttled;     /* 429, 503: retried after Retry-After or the backoff */
    unsigned long long server_error;  /* 408, 425, other 5xx: retried with the backoff */
    unsigned long long rejected;      /* other 4xx: dead-lettered */
    unsigned long long redirect;      /* 3xx not followed, too many redirects: dead-lettered */
    unsigned long long connect_error; /* refused, reset, no answer, DNS: retried */
    unsigned long long tls_error;     /* handshake or certificate failure: retried */
    unsigned long long timeout;       /* the request deadline passed: retried */
    unsigned long long holds;         /* answers with Retry-After that held the pool */
    /* ms the workers' reads and requests waited for a hold or, after a refused connection or a
     * TLS failure, a pause (summed over the workers) */
    unsigned long long held_ms;
} sluice_http_stats;

/* Fills `s`. Thread-safe (the counters are atomic; the figures are not one snapshot). */
SLUICE_API void sluice_http_get_stats(const sluice_http *h, sluice_http_stats *s);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_WORKER_HTTP_H */
