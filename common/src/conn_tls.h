/* SPDX-License-Identifier: MIT */
/*
 * conn_tls.h - the TLS transport of the blocking node layer (conn_node.c), for rediss:// URLs.
 *
 * Owns: the TCP socket (getaddrinfo, a non-blocking connect within the connect timeout, TCP
 * keepalive and no delay, close-on-exec), the TLS handshake of the I/O-free stream (tls.h)
 * driven with poll() within the same timeout, the client SSL_CTX (made at the first connect)
 * and the session offered again at reconnect, and moving bytes: the commands hiredis formatted
 * into the node's redisContext output buffer are encrypted and sent, the decrypted replies are
 * fed to that context's redisReader. The node keeps a redisContext (made on the socket with
 * redisConnectFd, closing it when freed) so its append paths and its "connected" test are the
 * same as over plain TCP; only the calls that do I/O branch to this transport.
 *
 * Does not own: the handshake plan, backoff or reconnects (the node's). Internal to sluice.
 */
#ifndef SLUICE_CONN_TLS_H
#define SLUICE_CONN_TLS_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "sluice/redis.h"
#include "sluice/tls.h"

typedef struct sluice__tls_link {
    SSL_CTX *ctx;          /* made at the first connect, kept for the next ones */
    SSL_SESSION *session;  /* the last resumable session, offered at reconnect */
    sluice__tls_stream *s; /* the stream of the open connection, or NULL */
    int fd;                /* its socket (closed by the node's redisContext), or -1 */
    int timeout_ms;        /* ms a reply may take between two reads (the command timeout) */
    char *io;              /* ciphertext on its way to or from the socket (IO_BUF bytes) */
    char err[400];         /* the last failure */
} sluice__tls_link;

/* A link with no connection (NULL out of memory). Free with sluice__tls_link_free. */
sluice__tls_link *sluice__tls_link_new(void);

/*
 * Connects to host:port within o->connect_timeout_ms and runs the TLS handshake (names and
 * verification from o's tls_* fields, `where` the redacted URL for the insecure warning). On
 * success *ctx is a blocking-flagged redisContext on the socket (redisConnectFd) and the link
 * is open. Returns 0, or SLUICE_ETLS ("certificate verify failed: <reason>", "TLS handshake
 * failed: ..."), SLUICE_ECONN, SLUICE_ETIMEDOUT, SLUICE_ENOMEM, SLUICE_EINVAL (a client
 * certificate without its key) with the text in l->err and nothing left open.
 */
int sluice__tls_link_open(sluice__tls_link *l, const sluice_conn_options *o, const char *host,
                          int port, const char *where, redisContext **ctx);

/*
 * The next reply on ctx (opened by this link): sends what waits in ctx's output buffer, then
 * reads and decrypts until ctx's reader holds a whole reply, each wait on the socket at most
 * l->timeout_ms. Returns 0 with *reply set, or a status with the text in l->err:
 * SLUICE_ETIMEDOUT, SLUICE_ECONN (closed), SLUICE_ETLS, SLUICE_EPROTO, SLUICE_ENOMEM; the
 * connection is then unusable (the node drops it).
 */
int sluice__tls_link_reply(sluice__tls_link *l, redisContext *ctx, void **reply);

/* Ends the connection's stream, keeping its session for the next connect (the socket is
 * closed with the redisContext). NULL-safe. */
void sluice__tls_link_close(sluice__tls_link *l);

/* Closes and frees the link, its context and session. NULL-safe. */
void sluice__tls_link_free(sluice__tls_link *l);

#endif
