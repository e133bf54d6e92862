/* SPDX-License-Identifier: MIT */
/*
 * tls.c - the client SSL_CTX made from a connection's TLS options (tls.h; the copies of the
 * options a connection keeps are client.c's, built into every library).
 *
 * Verification is on unless tls_insecure_skip_verify: the server's chain against the given CA
 * file or directory, else the system store (SSL_CTX_set_default_verify_paths, which also honours
 * OpenSSL's SSL_CERT_FILE / SSL_CERT_DIR); the host name is checked per stream (tls_stream.c).
 * TLS 1.2 is the floor and renegotiation is refused (SSL_OP_NO_RENEGOTIATION): a server cannot
 * take a connection back into a handshake the transport does not expect.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/status.h"
#include "sluice/tls.h"

/* "what: OpenSSL's reason" for the last error on this thread's queue; clears the queue. */
static void ssl_fail(char *err, size_t errlen, const char *what) {
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    snprintf(err, errlen, "%s: %s", what, reason != NULL ? reason : "unknown OpenSSL error");
    ERR_clear_error();
}

/* Loads the CA store (given files, else the system's) and, when given, the client's key pair. */
static int ctx_load(SSL_CTX *ctx, const sluice_conn_options *o, char *err, size_t errlen) {
    char what[600];
    if (o->tls_ca_file != NULL || o->tls_ca_dir != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, o->tls_ca_file, o->tls_ca_dir) != 1) {
            snprintf(what, sizeof(what), "cannot load the CA certificates from %s",
                     o->tls_ca_file != NULL ? o->tls_ca_file : o->tls_ca_dir);
            ssl_fail(err, errlen, what);
            return SLUICE_ETLS;
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        ssl_fail(err, errlen, "cannot load the system's CA certificates");
        return SLUICE_ETLS;
    }
    if (o->tls_cert_file == NULL) {
        return 0;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert_file) != 1) {
        snprintf(what, sizeof(what), "cannot load the client certificate %s", o->tls_cert_file);
        ssl_fail(err, errlen, what);
        return SLUICE_ETLS;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key_file, SSL_FILETYPE_PEM) != 1) {
        snprintf(what, sizeof(what), "cannot load the client key %s", o->tls_key_file);
        ssl_fail(err, errlen, what);
        return SLUICE_ETLS;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(what, sizeof(what), "the client key %s does not match the certificate %s",
                 o->tls_key_file, o->tls_cert_file);
        ssl_fail(err, errlen, what);
        return SLUICE_ETLS;
    }
    return 0;
}

SSL_CTX *sluice__tls_ctx_new(const sluice_conn_options *o, int *status, char *err, size_t errlen) {
    int dummy;
    int *st = status != NULL ? status : &dummy;
    int has_cert = o->tls_cert_file != NULL && o->tls_cert_file[0] != '\0';
    int has_key = o->tls_key_file != NULL && o->tls_key_file[0] != '\0';
    if (has_cert != has_key) {
        snprintf(err, errlen, "a TLS client %s needs its %s too (tls_cert_file and tls_key_file)",
                 has_cert ? "certificate" : "key", has_cert ? "key" : "certificate");
        *st = SLUICE_EINVAL;
        return NULL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        ssl_fail(err, errlen, "cannot create a TLS context");
        *st = SLUICE_ENOMEM;
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_set_verify(ctx, o->tls_insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    if ((*st = ctx_load(ctx, o, err, errlen)) != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

void sluice__tls_explain(char *err, size_t errlen, const char *name) {
    if (strstr(err, "mismatch") != NULL) {
        size_t used = strlen(err);
        snprintf(err + used, errlen - used, " (the certificate does not name %s)", name);
    }
}
