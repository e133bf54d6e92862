/* SPDX-License-Identifier: MIT */
/*
 * uvredis_transport.h - the async connection's transport: one non-blocking socket to one Redis
 * server (TCP or unix), watched by a uv_poll_t on the connection's loop, plain or TLS (the
 * I/O-free stream of sluice/tls.h between the socket and the bytes), with hiredis kept for what
 * it does well: the commands come formatted, the replies are parsed by a redisReader.
 *
 * Owns: the socket, the poll handle, the output buffer, the TLS stream handed to it, the order
 * of the requests written (one privdata per command; each reply goes to the oldest one, a reply
 * beyond them to the `push` hook when the owner set one: a subscription) and the
 * count of bytes written. Every privdata is handed back exactly once: with its reply, or with
 * NULL when the link is freed (by its owner or after an I/O failure), like hiredis's async
 * context, whose semantics the link (uvredis_link.c) was written for: a free asked for inside
 * a reply callback is done once the callback returns.
 *
 * Does not own: deadlines, reconnects, the handshake plan (the link's), the TLS context and the
 * session slot (the connection's).
 */
#ifndef SLUICE_UVREDIS_TRANSPORT_H
#define SLUICE_UVREDIS_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "sluice/tls.h"

typedef struct sluice__uvlink sluice__uvlink;

/* What the owner hears from its link; every hook is set but `push`. */
typedef struct sluice__uvlink_hooks {
    /* The connect (and the TLS handshake) is over: status 0, or a negative status (reason in
     * sluice__uvlink_errstr) after which the link frees itself. */
    void (*connected)(sluice__uvlink *l, int status);
    /* The reply to the request whose privdata this is (borrowed for the call), or NULL when the
     * link is freed before the reply came. */
    void (*reply)(sluice__uvlink *l, redisReply *r, void *privdata);
    /* A link that had connected is freed (after every pending reply hook ran with NULL). */
    void (*disconnected)(sluice__uvlink *l);
    /* The poll handle is closed: the last call, just before the link's memory is freed. */
    void (*closed)(sluice__uvlink *l);
    /* A reply no request waits for (borrowed for the call): a pub/sub message after SUBSCRIBE's
     * own reply. NULL: such a reply fails the link as a lost connection (a server's
     * "ERR max number of clients reached" sent to a new connection). */
    void (*push)(sluice__uvlink *l, redisReply *r);
} sluice__uvlink_hooks;

/* Bytes waiting to be written: p[off..len). */
typedef struct sluice__uvbuf {
    char *p;
    size_t len, off, cap;
} sluice__uvbuf;

enum { SLUICE__UVLINK_CONNECTING, SLUICE__UVLINK_HANDSHAKE, SLUICE__UVLINK_UP };

struct sluice__uvlink {
    uv_poll_t poll; /* watches fd; freed with the link in its close callback */
    int fd;
    int open;  /* 1 until freed: appends are refused after */
    int stage; /* SLUICE__UVLINK_*: the TCP connect, the TLS handshake, connected */
    int events;
    int in_callback, freeing; /* a free asked for in a reply hook waits for its return */
    redisReader *reader;
    sluice__uvbuf out;       /* command bytes not yet written (plain) or encrypted (TLS) */
    sluice__uvbuf wire;      /* TLS: ciphertext taken from the stream, not yet written */
    sluice__tls_stream *tls; /* NULL: plain */
    void **ring;             /* the privdata of the requests written, oldest at ring_head */
    size_t ring_cap, ring_head, ring_len;
    const sluice__uvlink_hooks *hooks;
    void *owner;       /* the sluice_aconn; stays set until the link is freed */
    void *data;        /* the sluice_aconn while it still uses this link, else NULL */
    uint64_t appended; /* bytes of commands appended since connect */
    uint64_t written;  /* of those, bytes written to the socket (TLS: encrypted for it) */
    uint64_t answered; /* replies read (the first may be the server turning us away) */
    int status;        /* why the link failed, a status (0: its owner freed it) */
    char errstr[256];  /* why, in words ("" when its owner freed it) */
};

/* rediss://: what a link's TLS stream is made of. The context and the session slot belong to
 * the connection, kept across its links: the context is made at the first link (from o), the
 * slot's session is offered at each and replaced by the link's own when it is freed. */
typedef struct sluice__uvlink_tls {
    const sluice_conn_options *o; /* tls_* fields */
    SSL_CTX **ctx;
    SSL_SESSION **session;
    const char *where; /* the redacted URL, for the insecure switch's warning */
} sluice__uvlink_tls;

/*
 * Starts a non-blocking connect to `path` (a unix socket) or else host:port on `loop`, TLS over
 * it when `tls` is not NULL (the name checked is o->tls_server_name, else `host`). Returns the
 * link, whose `connected` hook runs later from the loop, or NULL with a status in *status
 * (SLUICE_ECONN; SLUICE_ETLS or SLUICE_EINVAL when the TLS context cannot be made from the
 * options; SLUICE_ENOMEM) and the reason in err. hiredis resolves a host name with a blocking
 * getaddrinfo: use IP literals on busy loops.
 */
sluice__uvlink *sluice__uvlink_open(uv_loop_t *loop, const char *host, int port, const char *path,
                                    const sluice__uvlink_tls *tls,
                                    const sluice__uvlink_hooks *hooks, void *owner, int *status,
                                    char *err, size_t errlen);

/* Queues a formatted command whose reply goes to `privdata`. 0, or -1 once the link is being
 * freed or out of memory (the privdata is not kept). */
int sluice__uvlink_append(sluice__uvlink *l, const char *cmd, size_t len, void *privdata);

/* Frees the link: every pending privdata gets NULL, then `disconnected` (when it had
 * connected), then `closed` from the loop. Inside a reply hook: once that returns. */
void sluice__uvlink_free(sluice__uvlink *l);

/* Bytes of the output written to the socket so far (TLS: handed to the stream to encrypt, an
 * over-count, so "written >= end" stays "may have reached the server"). */
uint64_t sluice__uvlink_written(const sluice__uvlink *l);

/* Command bytes queued and not yet written. */
size_t sluice__uvlink_unsent(const sluice__uvlink *l);

/* 1 when the TLS handshake resumed a session. */
int sluice__uvlink_resumed(const sluice__uvlink *l);

#endif
