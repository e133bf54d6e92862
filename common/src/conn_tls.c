/* SPDX-License-Identifier: MIT */
/*
 * conn_tls.c - the TLS transport of the blocking node layer (see conn_tls.h): a non-blocking
 * TCP socket of its own, the I/O-free TLS stream over it, and poll() for every wait, so the
 * connect timeout bounds connect + handshake and the command timeout bounds each wait for a
 * reply, as SO_RCVTIMEO does on hiredis's plain sockets.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sluice/clock.h"
#include "sluice/log.h"
#include "sluice/status.h"

#include "conn_tls.h"

#define IO_CHUNK 16384 /* plaintext bytes per encryption or decryption step (one TLS record) */
#define IO_BUF   (4 * (IO_CHUNK + SLUICE__TLS_RECORD_OVERHEAD)) /* ciphertext per send or recv */

sluice__tls_link *sluice__tls_link_new(void) {
    sluice__tls_link *l = calloc(1, sizeof(*l));
    if (l != NULL) {
        l->fd = -1;
    }
    return l;
}

void sluice__tls_link_close(sluice__tls_link *l) {
    if (l != NULL) {
        sluice__tls_stream_free(l->s); /* keeps the session in l->session */
        l->s = NULL;
        l->fd = -1;
    }
}

void sluice__tls_link_free(sluice__tls_link *l) {
    if (l == NULL) {
        return;
    }
    sluice__tls_link_close(l);
    free(l->io);
    SSL_SESSION_free(l->session);
    SSL_CTX_free(l->ctx);
    free(l);
}

/* ms left before `deadline` (monotonic ms), 0 when past it. */
static int left_ms(uint64_t deadline) {
    uint64_t now = sluice_now_ms();
    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Waits up to ms for `events` on fd: 1 ready, 0 timed out, -1 error (errno). */
static int wait_fd(int fd, short events, int ms) {
    struct pollfd p = {.fd = fd, .events = events};
    int r;
    do {
        r = poll(&p, 1, ms);
    } while (r < 0 && errno == EINTR);
    return r;
}

/* One address: a non-blocking socket connected before `deadline`, or -1 with errno set. */
static int connect_one(const struct addrinfo *a, uint64_t deadline) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
        return -1;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        return fd;
    }
    if (errno == EINPROGRESS) {
        int r = wait_fd(fd, POLLOUT, left_ms(deadline)), soerr = 0;
        socklen_t len = sizeof(soerr);
        if (r > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0) {
            return fd;
        }
        errno = r == 0 ? ETIMEDOUT : soerr != 0 ? soerr : errno;
    }
    int keep = errno;
    close(fd);
    errno = keep;
    return -1;
}

/* A connected socket to host:port, or a status with the text in l->err. */
static int tcp_connect(sluice__tls_link *l, const char *host, int port, uint64_t deadline,
                       int *out) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    int r = getaddrinfo(host, service, &hints, &res);
    if (r != 0) {
        snprintf(l->err, sizeof(l->err), "cannot resolve %s: %s", host, gai_strerror(r));
        return SLUICE_ECONN;
    }
    int fd = -1;
    errno = ECONNREFUSED;
    for (const struct addrinfo *a = res; a != NULL && fd < 0 && left_ms(deadline) > 0;
         a = a->ai_next) {
        fd = connect_one(a, deadline);
    }
    int keep = errno;
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(l->err, sizeof(l->err), "connect to %s:%d: %s", host, port,
                 keep == ETIMEDOUT ? "Connection timed out" : strerror(keep));
        return keep == ETIMEDOUT ? SLUICE_ETIMEDOUT : SLUICE_ECONN;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    *out = fd;
    return 0;
}

/* A failed stream call: its status, its text in l->err. */
static int stream_fail(sluice__tls_link *l, int st) {
    snprintf(l->err, sizeof(l->err), "%s", sluice__tls_stream_errstr(l->s));
    return st;
}

/* The server reset the connection: a TLS alert it sent before (a client certificate it
 * required and did not get) says why better than the socket error `st` in l->err does. */
static int peer_alert(sluice__tls_link *l, int st) {
    char buf[IO_CHUNK];
    ssize_t r;
    while ((r = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0 &&
           sluice__tls_stream_feed(l->s, buf, (size_t)r) == 0) {
    }
    size_t got = 0;
    int rs = sluice__tls_stream_read(l->s, buf, sizeof(buf), &got);
    return rs == SLUICE_ETLS ? stream_fail(l, rs) : st;
}

/* Sends every byte of ciphertext the stream holds, up to IO_BUF per send (loopback and the
 * peer pay per call: a batch's records go in one), each wait before `deadline`. */
static int send_out(sluice__tls_link *l, uint64_t deadline) {
    char *buf = l->io;
    while (sluice__tls_stream_pending(l->s) > 0) {
        size_t n = sluice__tls_stream_out(l->s, buf, IO_BUF), off = 0;
        while (off < n) {
            ssize_t w = send(l->fd, buf + off, n - off, MSG_NOSIGNAL);
            if (w > 0) {
                off += (size_t)w;
                continue;
            }
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                snprintf(l->err, sizeof(l->err), "%s", strerror(errno));
                return peer_alert(l, SLUICE_ECONN);
            }
            if (w < 0 && errno != EINTR && wait_fd(l->fd, POLLOUT, left_ms(deadline)) <= 0) {
                snprintf(l->err, sizeof(l->err), "timed out sending over TLS");
                return SLUICE_ETIMEDOUT;
            }
        }
    }
    return 0;
}

/* Reads what the server sent into the stream, waiting until `deadline`. */
static int recv_in(sluice__tls_link *l, uint64_t deadline) {
    for (;;) {
        ssize_t r = recv(l->fd, l->io, IO_BUF, 0);
        if (r > 0) {
            int st = sluice__tls_stream_feed(l->s, l->io, (size_t)r);
            if (st != 0) {
                snprintf(l->err, sizeof(l->err), "%s", sluice__tls_stream_errstr(l->s));
            }
            return st;
        }
        if (r == 0) {
            snprintf(l->err, sizeof(l->err), "Server closed the connection");
            return SLUICE_ECONN;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            snprintf(l->err, sizeof(l->err), "%s", strerror(errno));
            return peer_alert(l, SLUICE_ECONN);
        }
        int w = wait_fd(l->fd, POLLIN, left_ms(deadline));
        if (w <= 0) {
            snprintf(l->err, sizeof(l->err), "%s",
                     w == 0 ? "timed out waiting for the server over TLS" : strerror(errno));
            return w == 0 ? SLUICE_ETIMEDOUT : SLUICE_ECONN;
        }
    }
}

/* The client handshake, every wait before `deadline`. */
static int handshake(sluice__tls_link *l, uint64_t deadline) {
    for (int steps = 0; steps < 64; steps++) {
        int st = sluice__tls_stream_handshake(l->s);
        if (st < 0) {
            (void)send_out(l, deadline); /* the alert, so the server logs why */
            return stream_fail(l, st);
        }
        int io = sluice__tls_stream_pending(l->s) > 0 ? send_out(l, deadline) : 0;
        if (io == 0 && st == SLUICE__TLS_WANT_READ) {
            io = recv_in(l, deadline);
        }
        if (io != 0 || st == SLUICE__TLS_DONE) {
            return io;
        }
    }
    snprintf(l->err, sizeof(l->err), "TLS handshake failed: too many steps");
    return SLUICE_ETLS;
}

int sluice__tls_link_open(sluice__tls_link *l, const sluice_conn_options *o, const char *host,
                          int port, const char *where, redisContext **ctx) {
    *ctx = NULL;
    sluice__tls_link_close(l);
    int st = 0;
    if (l->ctx == NULL && (l->ctx = sluice__tls_ctx_new(o, &st, l->err, sizeof(l->err))) == NULL) {
        return st;
    }
    if (l->io == NULL && (l->io = malloc(IO_BUF)) == NULL) {
        snprintf(l->err, sizeof(l->err), "out of memory");
        return SLUICE_ENOMEM;
    }
    uint64_t deadline = sluice_now_ms() + (uint64_t)o->connect_timeout_ms;
    int fd = -1;
    if ((st = tcp_connect(l, host, port, deadline, &fd)) != 0) {
        return st;
    }
    l->fd = fd;
    l->timeout_ms = o->command_timeout_ms;
    l->s = sluice__tls_stream_new(l->ctx, host, o->tls_server_name, o->tls_insecure_skip_verify,
                                  where, &l->session, 0, l->err, sizeof(l->err));
    if (l->s == NULL) {
        close(fd);
        l->fd = -1;
        return SLUICE_ENOMEM;
    }
    st = handshake(l, deadline);
    if (st == SLUICE_ETLS) {
        sluice__tls_explain(l->err, sizeof(l->err),
                            o->tls_server_name != NULL ? o->tls_server_name : host);
    }
    if (st == 0 && (*ctx = redisConnectFd(fd)) == NULL) {
        snprintf(l->err, sizeof(l->err), "out of memory");
        st = SLUICE_ENOMEM;
    }
    if (st != 0) {
        sluice__tls_link_close(l);
        close(fd);
        return st;
    }
    SLUICE_LOG(SLUICE_LOG_DEBUG, "event=tls_connected server=%s resumed=%d", where,
               sluice__tls_stream_resumed(l->s));
    return 0;
}

/* Encrypts and sends ctx's output buffer, a record per IO_CHUNK, in sends of up to IO_BUF. */
static int flush(sluice__tls_link *l, redisContext *ctx, uint64_t deadline) {
    size_t len = sdslen(ctx->obuf), done = 0;
    while (done < len) {
        size_t n = len - done < IO_CHUNK ? len - done : IO_CHUNK;
        size_t pending = sluice__tls_stream_pending(l->s);
        int st = 0;
        if (pending > 0 && pending + n + SLUICE__TLS_RECORD_OVERHEAD > IO_BUF &&
            (st = send_out(l, deadline)) != 0) {
            return st;
        }
        st = sluice__tls_stream_write(l->s, ctx->obuf + done, n);
        if (st == SLUICE_ETOOBIG) {
            st = send_out(l, deadline);
            if (st != 0) {
                return st;
            }
            continue;
        }
        if (st != 0) {
            return stream_fail(l, st);
        }
        done += n;
    }
    sdsclear(ctx->obuf);
    return send_out(l, deadline);
}

int sluice__tls_link_reply(sluice__tls_link *l, redisContext *ctx, void **reply) {
    *reply = NULL;
    if (redisReaderGetReply(ctx->reader, reply) != REDIS_OK) {
        snprintf(l->err, sizeof(l->err), "Protocol error: %s", ctx->reader->errstr);
        return SLUICE_EPROTO;
    }
    if (*reply != NULL) {
        return 0;
    }
    int st = flush(l, ctx, sluice_now_ms() + (uint64_t)l->timeout_ms);
    char buf[IO_CHUNK];
    while (st == 0) {
        size_t got = 0;
        st = sluice__tls_stream_read(l->s, buf, sizeof(buf), &got);
        if (st != 0) {
            st = stream_fail(l, st);
            break;
        }
        if (sluice__tls_stream_pending(l->s) > 0 &&
            (st = send_out(l, sluice_now_ms() + (uint64_t)l->timeout_ms)) != 0) {
            break; /* a key update or an alert the read produced */
        }
        if (got == 0) {
            st = recv_in(l, sluice_now_ms() + (uint64_t)l->timeout_ms);
            continue;
        }
        if (redisReaderFeed(ctx->reader, buf, got) != REDIS_OK ||
            redisReaderGetReply(ctx->reader, reply) != REDIS_OK) {
            snprintf(l->err, sizeof(l->err), "Protocol error: %s", ctx->reader->errstr);
            return SLUICE_EPROTO;
        }
        if (*reply != NULL) {
            return 0;
        }
    }
    return st;
}
