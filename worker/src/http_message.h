/* SPDX-License-Identifier: MIT */
/*
 * http_message.h - what one HTTP delivery sends and what its answer means, free of I/O: the
 * verdict of an answer (status and transfer outcome), header lines and values, the webhook id,
 * and Standard Webhooks signing (HMAC-SHA256 with OpenSSL). The transfers themselves are
 * http_delivery.c's. Thread-safe: no state.
 */
#ifndef SLUICE_WORKER_HTTP_MESSAGE_H
#define SLUICE_WORKER_HTTP_MESSAGE_H

#include <stddef.h>

#include "sluice/worker.h"

/* What an answer was; each counts in one field of sluice_http_stats. */
typedef enum sluice__http_result {
    SLUICE__HTTP_OK = 0,        /* 2xx */
    SLUICE__HTTP_THROTTLED,     /* 429, 503 */
    SLUICE__HTTP_SERVER_ERROR,  /* 408, 425, other 5xx (and any other status not below) */
    SLUICE__HTTP_REJECTED,      /* other 4xx */
    SLUICE__HTTP_REDIRECT,      /* 3xx not followed, too many redirects, a bad redirect */
    SLUICE__HTTP_CONNECT_ERROR, /* refused, reset, no answer, DNS, a broken answer */
    SLUICE__HTTP_TLS_ERROR,     /* handshake, certificate */
    SLUICE__HTTP_TIMEOUT,       /* the request deadline */
    SLUICE__HTTP_RESULTS
} sluice__http_result;

/* The result of a transfer that ended with libcurl's code `curl_code` (a CURLcode) and, when
 * it is CURLE_OK, the answer's `status`. */
sluice__http_result sluice__http_classify(int curl_code, long status);

/* DONE for OK; FAIL for REJECTED and REDIRECT; RETRY for the rest. */
sluice_verdict sluice__http_verdict(sluice__http_result r);

/* "ok", "throttled", "server_error", "rejected", "redirect", "connect_error", "tls_error",
 * "timeout": the metrics label and summary field of a result. */
const char *sluice__http_result_name(sluice__http_result r);

/* Checks an extra header line "Name: value": a token name (RFC 9110), a colon, a value without
 * CR, LF or NUL, and not one of the headers the handler sets itself. 0, or -1 with a message
 * naming the line in err. */
int sluice__http_header_check(const char *line, char *err, size_t errlen);

/* Copies n bytes of a header value from a message into out (cap bytes, NUL-terminated, cut to
 * fit), control characters (CR, LF, NUL, ...) as spaces: a message cannot add a header. */
void sluice__http_value(const char *v, size_t n, char *out, size_t cap);

/* The webhook id of entry `id` of `queue`: "QUEUE:ID" with each '.' of the queue name as "%2E"
 * (the signed content "ID.TIMESTAMP.BODY" must hold no other full stop). 0, or -1 when it does
 * not fit in cap bytes. */
int sluice__webhook_id(const char *queue, const char *id, char *out, size_t cap);

/* Decodes a Standard Webhooks secret (base64, optionally prefixed "whsec_"; surrounding
 * whitespace ignored) into key[0..*keylen). 0, or -1 with a message in err (never the secret). */
int sluice__webhook_secret(const char *text, unsigned char *key, size_t cap, size_t *keylen,
                           char *err, size_t errlen);

/* Writes "v1,<base64 of HMAC-SHA256(key, ID.TIMESTAMP.BODY)>" into out (cap >= 48). 0 or -1. */
int sluice__webhook_sign(const unsigned char *key, size_t keylen, const char *id,
                         long long timestamp, const void *body, size_t n, char *out, size_t cap);

#endif
