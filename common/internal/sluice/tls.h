/* SPDX-License-Identifier: MIT */
/*
 * tls.h - TLS for rediss:// connections, built on OpenSSL: the client SSL_CTX made from a
 * connection's options (tls.c), and an I/O-free TLS stream (tls_stream.c) that both the
 * blocking connection (with its own socket loop) and the libuv one drive, so there is one code
 * path for the protocol.
 *
 * Owns: verification policy (certificate and host name always checked unless the loudly named
 * test switch is on), TLS 1.2 as the floor, renegotiation refused, a session kept for reuse on
 * reconnect, and the error texts ("certificate verify failed: <reason>", SLUICE_ETLS). Does
 * not own sockets, timeouts or reconnects: the transport feeds ciphertext in and takes it out.
 *
 * Internal to sluice. A context is read-only after creation and may be shared by the streams of
 * one thread; a stream is used by one thread at a time. No printing; the insecure switch logs a
 * warning through SLUICE_LOG at every stream created.
 */
#ifndef SLUICE_TLS_H
#define SLUICE_TLS_H

#include <stddef.h>

#include "sluice/redis.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_session_st SSL_SESSION;

/* ---------------------------------------------------------------------------------------- */
/* Options                                                                                  */

/*
 * The connection's copy of its TLS options: replaces each tls_* string of `o` (a copy the
 * connection owns, e.g. after sluice__conn_options_fill) by a heap copy, "" and NULL both
 * becoming NULL. Returns 0, or SLUICE_ENOMEM with every field NULL. The connection calls
 * sluice__tls_options_release(o) when it is freed (sluice_conn_new and sluice_aconn_new do).
 */
int sluice__tls_options_keep(sluice_conn_options *o);

/* Frees what sluice__tls_options_keep copied; fields become NULL. NULL-safe, idempotent. */
void sluice__tls_options_release(sluice_conn_options *o);

/* ---------------------------------------------------------------------------------------- */
/* Client context                                                                           */

/*
 * A client SSL_CTX for `o`: TLS 1.2 minimum, renegotiation refused, peer verification against
 * tls_ca_file / tls_ca_dir or else the system store, the client certificate and key when given
 * (both or neither), client-side session caching. Returns the context, or NULL with a message
 * in err naming the file and OpenSSL's reason (status SLUICE_ETLS in *status, SLUICE_EINVAL
 * for a certificate without key or the reverse, SLUICE_ENOMEM). Free with SSL_CTX_free.
 */
SSL_CTX *sluice__tls_ctx_new(const sluice_conn_options *o, int *status, char *err, size_t errlen);

/* After a failed handshake (status SLUICE_ETLS, its text in err): a host name mismatch also
 * says which name was checked (`name`: the server name, else the host connected to). */
void sluice__tls_explain(char *err, size_t errlen, const char *name);

/* ---------------------------------------------------------------------------------------- */
/* Stream                                                                                   */

typedef struct sluice__tls_stream sluice__tls_stream;

enum {
    SLUICE__TLS_DONE = 0,       /* handshake complete, nothing waiting to be sent */
    SLUICE__TLS_WANT_READ = 1,  /* feed ciphertext from the server, then step again */
    SLUICE__TLS_WANT_WRITE = 2, /* send sluice__tls_stream_out()'s bytes, then step again */
};

#define SLUICE__TLS_BUF_CAP (4u << 20) /* bytes, default cap of each direction's buffer */
/* bytes at most a TLS record of up to 16 KiB of plaintext adds: header, MAC, padding */
#define SLUICE__TLS_RECORD_OVERHEAD 100

/*
 * A client stream on `ctx` (kept referenced) to `host` (the URL's host). The name checked in
 * the server's certificate and sent as SNI is `server_name`, else `host`; an IP literal is
 * checked against the certificate's IP addresses and sent without SNI. `insecure` skips every
 * check (logged as a warning, with `where`, the redacted URL). `session` (may be NULL) is the
 * caller's slot for session reuse: a session in it is offered to the server, and the stream
 * stores its own resumable session there when freed (the slot's owner frees what it holds with
 * SSL_SESSION_free). `buf_cap` bounds the ciphertext waiting in
 * each direction (0: SLUICE__TLS_BUF_CAP). NULL with a message in err when out of memory.
 */
sluice__tls_stream *sluice__tls_stream_new(SSL_CTX *ctx, const char *host, const char *server_name,
                                           int insecure, const char *where, SSL_SESSION **session,
                                           size_t buf_cap, char *err, size_t errlen);

/* Stores a resumable session in the slot given to _new, then frees. NULL-safe. */
void sluice__tls_stream_free(sluice__tls_stream *s);

/*
 * One step of the client handshake: SLUICE__TLS_DONE, _WANT_READ or _WANT_WRITE (output is
 * waiting: take it with sluice__tls_stream_out and step again), or a negative status: SLUICE_ETLS
 * ("certificate verify failed: <reason>", "TLS handshake failed: <reason>"), SLUICE_ECONN (the
 * server closed), with the text in sluice__tls_stream_errstr.
 */
int sluice__tls_stream_handshake(sluice__tls_stream *s);

/* Ciphertext received from the server. 0, or SLUICE_ETOOBIG past the cap (nothing taken). */
int sluice__tls_stream_feed(sluice__tls_stream *s, const void *data, size_t len);

/*
 * Plaintext out: up to cap bytes into buf, their count in *got (0: feed more ciphertext).
 * Returns 0, or SLUICE_ECONN when the server closed the TLS session, SLUICE_ETLS on a protocol
 * error (text in errstr). Renegotiation requests from the server are refused here.
 */
int sluice__tls_stream_read(sluice__tls_stream *s, void *buf, size_t cap, size_t *got);

/* After a read, a write or a failed step, output may be waiting (an alert, a refusal of
 * renegotiation): send sluice__tls_stream_pending() bytes whenever there are any. */

/* Plaintext to send, all of it encrypted into the output. 0, SLUICE_ETOOBIG when the output
 * would pass the cap (nothing taken: send the output first), or SLUICE_ETLS. */
int sluice__tls_stream_write(sluice__tls_stream *s, const void *data, size_t len);

/* Bytes of ciphertext waiting to be sent. */
size_t sluice__tls_stream_pending(const sluice__tls_stream *s);

/* Takes up to cap bytes of ciphertext to send into buf; returns how many. */
size_t sluice__tls_stream_out(sluice__tls_stream *s, void *buf, size_t cap);

/* The text of the last failure ("" when none). Valid until the next call on s. */
const char *sluice__tls_stream_errstr(const sluice__tls_stream *s);

/* 1 when the handshake resumed a session from the slot (an abbreviated handshake). */
int sluice__tls_stream_resumed(const sluice__tls_stream *s);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_TLS_H */
