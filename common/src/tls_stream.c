/* SPDX-License-Identifier: MIT */
/*
 * tls_stream.c - the I/O-free TLS client stream of tls.h: an SSL between two memory BIOs.
 *
 * The transport feeds the ciphertext it received into `in` and sends what collects in `out`;
 * the application's plaintext goes through SSL_write / SSL_read. Nothing here touches a socket
 * or a clock, so the libuv side (bytes from a read callback) and the blocking side (its own
 * poll loop) share the protocol code, and the tests run a client and a server in memory.
 * Each direction's buffer is capped at creation.
 */
#include <arpa/inet.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/log.h"
#include "sluice/status.h"
#include "sluice/tls.h"

struct sluice__tls_stream {
    SSL *ssl;
    BIO *in;            /* ciphertext from the server (owned by ssl) */
    BIO *out;           /* ciphertext to the server (owned by ssl) */
    SSL_SESSION **slot; /* the caller's session for reuse, or NULL */
    size_t cap;         /* bytes, each direction */
    char err[320];
};

static int is_ip_literal(const char *name) {
    unsigned char addr[16];
    return inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
}

/* The name to check (and send as SNI when it is not an IP address); 0 or -1 out of memory. */
static int set_peer_name(SSL *ssl, const char *name, int verify) {
    if (is_ip_literal(name)) {
        return !verify || X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) == 1 ? 0 : -1;
    }
    if (SSL_set_tlsext_host_name(ssl, name) != 1) {
        return -1;
    }
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return !verify || SSL_set1_host(ssl, name) == 1 ? 0 : -1;
}

sluice__tls_stream *sluice__tls_stream_new(SSL_CTX *ctx, const char *host, const char *server_name,
                                           int insecure, const char *where, SSL_SESSION **session,
                                           size_t buf_cap, char *err, size_t errlen) {
    const char *name = server_name != NULL && server_name[0] != '\0' ? server_name : host;
    sluice__tls_stream *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->ssl = SSL_new(ctx)) == NULL || (s->in = BIO_new(BIO_s_mem())) == NULL ||
        (s->out = BIO_new(BIO_s_mem())) == NULL) {
        snprintf(err, errlen, "out of memory creating a TLS stream");
        goto fail;
    }
    BIO_set_mem_eof_return(s->in, -1); /* empty: "want read", not end of stream */
    BIO_set_mem_eof_return(s->out, -1);
    SSL_set_bio(s->ssl, s->in, s->out);
    SSL_set_connect_state(s->ssl);
    if (name != NULL && name[0] != '\0' && set_peer_name(s->ssl, name, !insecure) != 0) {
        snprintf(err, errlen, "cannot set the TLS server name \"%s\"", name);
        goto fail;
    }
    if (insecure) {
        SSL_set_verify(s->ssl, SSL_VERIFY_NONE, NULL);
        SLUICE_LOG(SLUICE_LOG_WARN,
                   "event=tls_insecure_skip_verify server=%s detail=\"the server's certificate and "
                   "name are NOT verified: for tests only\"",
                   where != NULL ? where : "-");
    }
    if (session != NULL && *session != NULL) {
        SSL_set_session(s->ssl, *session);
    }
    s->slot = session;
    s->cap = buf_cap > 0 ? buf_cap : SLUICE__TLS_BUF_CAP;
    if (s->cap > INT_MAX) {
        s->cap = INT_MAX;
    }
    return s;
fail:
    if (s != NULL) {
        if (s->ssl == NULL || SSL_get_rbio(s->ssl) == NULL) {
            BIO_free(s->in);
            BIO_free(s->out);
        }
        SSL_free(s->ssl);
        free(s);
    }
    ERR_clear_error();
    return NULL;
}

void sluice__tls_stream_free(sluice__tls_stream *s) {
    if (s == NULL) {
        return;
    }
    /* a copy: SSL_free marks the session of a connection closed without close_notify as not
     * resumable, and a lost connection is exactly when the next one wants to resume */
    SSL_SESSION *sess = s->slot != NULL ? SSL_get0_session(s->ssl) : NULL;
    if (sess != NULL && SSL_SESSION_is_resumable(sess)) {
        SSL_SESSION *copy = SSL_SESSION_dup(sess);
        if (copy != NULL) {
            SSL_SESSION_free(*s->slot);
            *s->slot = copy;
        }
    }
    SSL_free(s->ssl); /* frees both BIOs */
    free(s);
}

/* The status and text of a failed SSL call that returned r. */
static int fail(sluice__tls_stream *s, int r, const char *during) {
    int e = SSL_get_error(s->ssl, r);
    long v = SSL_get_verify_result(s->ssl);
    unsigned long code = ERR_peek_last_error();
    int st = SLUICE_ETLS;
    if (e == SSL_ERROR_ZERO_RETURN) {
        snprintf(s->err, sizeof(s->err), "the server closed the TLS session");
        st = SLUICE_ECONN;
    } else if (v != X509_V_OK) {
        snprintf(s->err, sizeof(s->err), "certificate verify failed: %s",
                 X509_verify_cert_error_string(v));
    } else if (code != 0) {
        const char *reason = ERR_reason_error_string(code);
        snprintf(s->err, sizeof(s->err), "%s: %s", during,
                 reason != NULL ? reason : "unknown OpenSSL error");
    } else {
        snprintf(s->err, sizeof(s->err), "%s: the TLS session ended unexpectedly", during);
        st = SLUICE_ECONN;
    }
    ERR_clear_error();
    return st;
}

int sluice__tls_stream_handshake(sluice__tls_stream *s) {
    ERR_clear_error();
    int r = SSL_do_handshake(s->ssl);
    int want_write = BIO_ctrl_pending(s->out) > 0;
    if (r == 1) {
        return want_write ? SLUICE__TLS_WANT_WRITE : SLUICE__TLS_DONE;
    }
    switch (SSL_get_error(s->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        return want_write ? SLUICE__TLS_WANT_WRITE : SLUICE__TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return SLUICE__TLS_WANT_WRITE;
    default:
        return fail(s, r, "TLS handshake failed");
    }
}

int sluice__tls_stream_feed(sluice__tls_stream *s, const void *data, size_t len) {
    if (len > s->cap - BIO_ctrl_pending(s->in) || len > INT_MAX) {
        snprintf(s->err, sizeof(s->err), "more than %zu bytes of TLS input waiting", s->cap);
        return SLUICE_ETOOBIG;
    }
    if (len > 0 && BIO_write(s->in, data, (int)len) != (int)len) {
        snprintf(s->err, sizeof(s->err), "out of memory buffering TLS input");
        ERR_clear_error();
        return SLUICE_ENOMEM;
    }
    return 0;
}

int sluice__tls_stream_read(sluice__tls_stream *s, void *buf, size_t cap, size_t *got) {
    *got = 0;
    ERR_clear_error();
    int r = SSL_read_ex(s->ssl, buf, cap, got);
    if (r == 1) {
        return 0;
    }
    *got = 0;
    switch (SSL_get_error(s->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 0;
    default:
        return fail(s, r, "TLS read failed");
    }
}

int sluice__tls_stream_write(sluice__tls_stream *s, const void *data, size_t len) {
    size_t written = 0;
    size_t need = len + (len / 16384 + 1) * SLUICE__TLS_RECORD_OVERHEAD;
    if (need < len || need > s->cap - BIO_ctrl_pending(s->out)) {
        snprintf(s->err, sizeof(s->err), "more than %zu bytes of TLS output waiting", s->cap);
        return SLUICE_ETOOBIG;
    }
    if (len == 0) {
        return 0;
    }
    ERR_clear_error();
    int r = SSL_write_ex(s->ssl, data, len, &written);
    if (r == 1 && written == len) {
        return 0;
    }
    return fail(s, r, "TLS write failed");
}

size_t sluice__tls_stream_pending(const sluice__tls_stream *s) {
    return BIO_ctrl_pending(s->out);
}

size_t sluice__tls_stream_out(sluice__tls_stream *s, void *buf, size_t cap) {
    int n = BIO_read(s->out, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    return n > 0 ? (size_t)n : 0;
}

const char *sluice__tls_stream_errstr(const sluice__tls_stream *s) {
    return s->err;
}

int sluice__tls_stream_resumed(const sluice__tls_stream *s) {
    return SSL_session_reused(s->ssl) == 1;
}
