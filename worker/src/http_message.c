/* SPDX-License-Identifier: MIT */
/*
 * http_message.c - the HTTP delivery's pure parts (see http_message.h): verdicts, header
 * checks, the webhook id, Standard Webhooks secrets and signatures.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>

#include "http_message.h"

/* ---- verdicts ---- */

static int tls_code(int c) {
    switch (c) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_USE_SSL_FAILED:
        return 1;
    default:
        return 0;
    }
}

sluice__http_result sluice__http_classify(int curl_code, long status) {
    if (curl_code == CURLE_OPERATION_TIMEDOUT) {
        return SLUICE__HTTP_TIMEOUT;
    }
    if (tls_code(curl_code)) {
        return SLUICE__HTTP_TLS_ERROR;
    }
    if (curl_code == CURLE_TOO_MANY_REDIRECTS || curl_code == CURLE_UNSUPPORTED_PROTOCOL) {
        return SLUICE__HTTP_REDIRECT; /* followed into a loop or to a scheme other than http(s) */
    }
    if (curl_code != CURLE_OK) {
        return SLUICE__HTTP_CONNECT_ERROR;
    }
    if (status >= 200 && status <= 299) {
        return SLUICE__HTTP_OK;
    }
    if (status == 429 || status == 503) {
        return SLUICE__HTTP_THROTTLED;
    }
    if (status >= 300 && status <= 399) {
        return SLUICE__HTTP_REDIRECT;
    }
    if (status >= 400 && status <= 499 && status != 408 && status != 425) {
        return SLUICE__HTTP_REJECTED;
    }
    return SLUICE__HTTP_SERVER_ERROR; /* 408, 425, 5xx, and a status no RFC gives */
}

sluice_verdict sluice__http_verdict(sluice__http_result r) {
    switch (r) {
    case SLUICE__HTTP_OK:
        return SLUICE_DONE;
    case SLUICE__HTTP_REJECTED:
    case SLUICE__HTTP_REDIRECT:
        return SLUICE_FAIL;
    default:
        return SLUICE_RETRY;
    }
}

const char *sluice__http_result_name(sluice__http_result r) {
    static const char *const names[SLUICE__HTTP_RESULTS] = {
        "ok",       "throttled",     "server_error", "rejected",
        "redirect", "connect_error", "tls_error",    "timeout"};
    return (unsigned)r < SLUICE__HTTP_RESULTS ? names[r] : "unknown";
}

/* ---- headers ---- */

static int token_char(unsigned char c) {
    return isalnum(c) || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Headers the handler writes itself: a second copy would make the request ambiguous. */
static const char *const own_headers[] = {"content-type",
                                          "content-length",
                                          "host",
                                          "transfer-encoding",
                                          "sluice-id",
                                          "sluice-queue",
                                          "sluice-tenant",
                                          "sluice-deliveries",
                                          "idempotency-key",
                                          "webhook-id",
                                          "webhook-timestamp",
                                          "webhook-signature",
                                          "x-request-id",
                                          "expect",
                                          "connection"};

int sluice__http_header_check(const char *line, char *err, size_t errlen) {
    size_t n = 0;
    while (token_char((unsigned char)line[n])) {
        n++;
    }
    if (n == 0 || line[n] != ':') {
        snprintf(err, errlen,
                 "header \"%.80s\" is not \"Name: value\" (a name of letters, digits "
                 "and !#$%%&'*+-.^_`|~, then a colon)",
                 line);
        return -1;
    }
    for (const char *v = line + n + 1; *v != '\0'; v++) {
        if (*v == '\r' || *v == '\n') {
            snprintf(err, errlen, "header \"%.*s\" has a line break in its value", (int)n, line);
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof(own_headers) / sizeof(own_headers[0]); i++) {
        if (strlen(own_headers[i]) == n && strncasecmp(own_headers[i], line, n) == 0) {
            snprintf(err, errlen, "header \"%.*s\" is set by the handler itself", (int)n, line);
            return -1;
        }
    }
    return 0;
}

void sluice__http_value(const char *v, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)v[i];
        out[k++] = (c < 0x20 && c != '\t') || c == 0x7f ? ' ' : (char)c;
    }
    out[k] = '\0';
}

/* ---- Standard Webhooks ---- */

int sluice__webhook_id(const char *queue, const char *id, char *out, size_t cap) {
    size_t k = 0;
    for (const char *q = queue; *q != '\0'; q++) {
        const char *piece = *q == '.' ? "%2E" : NULL;
        size_t len = piece ? 3 : 1;
        if (k + len >= cap) {
            return -1;
        }
        if (piece) {
            memcpy(out + k, piece, 3);
        } else {
            out[k] = *q;
        }
        k += len;
    }
    int m = snprintf(out + k, cap - k, ":%s", id);
    return m < 0 || (size_t)m >= cap - k ? -1 : 0;
}

int sluice__webhook_secret(const char *text, unsigned char *key, size_t cap, size_t *keylen,
                           char *err, size_t errlen) {
    while (isspace((unsigned char)*text)) {
        text++;
    }
    if (strncmp(text, "whsec_", 6) == 0) {
        text += 6;
    }
    size_t n = strlen(text);
    while (n > 0 && isspace((unsigned char)text[n - 1])) {
        n--;
    }
    size_t pad = n > 0 && text[n - 1] == '=' ? (n > 1 && text[n - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < n - pad; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!isalnum(c) && c != '+' && c != '/') {
            snprintf(err, errlen, "signing secret is not base64 (a byte 0x%02x at %zu)", c, i);
            return -1;
        }
    }
    if (n == 0 || n % 4 != 0 || n / 4 * 3 > cap) {
        snprintf(err, errlen,
                 "signing secret must be base64 (optionally prefixed whsec_) of 1..%zu bytes, "
                 "its length a multiple of 4",
                 cap);
        return -1;
    }
    int got = EVP_DecodeBlock(key, (const unsigned char *)text, (int)n);
    if (got < 0 || (size_t)got < pad) {
        snprintf(err, errlen, "signing secret is not base64");
        return -1;
    }
    *keylen = (size_t)got - pad; /* EVP_DecodeBlock counts the padding as zero bytes */
    return 0;
}

int sluice__webhook_sign(const unsigned char *key, size_t keylen, const char *id,
                         long long timestamp, const void *body, size_t n, char *out, size_t cap) {
    char ts[32];
    int tl = snprintf(ts, sizeof(ts), ".%lld.", timestamp);
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t maclen = 0;
    EVP_MAC *alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = alg != NULL ? EVP_MAC_CTX_new(alg) : NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    int ok = ctx != NULL && EVP_MAC_init(ctx, key, keylen, params) == 1 &&
             EVP_MAC_update(ctx, (const unsigned char *)id, strlen(id)) == 1 &&
             EVP_MAC_update(ctx, (const unsigned char *)ts, (size_t)tl) == 1 &&
             (n == 0 || EVP_MAC_update(ctx, body, n) == 1) &&
             EVP_MAC_final(ctx, mac, &maclen, sizeof(mac)) == 1;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(alg);
    if (!ok || cap < 3 + (maclen + 2) / 3 * 4 + 1) {
        return -1;
    }
    memcpy(out, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)out + 3, mac, (int)maclen);
    return 0;
}
