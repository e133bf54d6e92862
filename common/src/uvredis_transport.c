/* SPDX-License-Identifier: MIT */
/*
 * uvredis_transport.c - the async connection's transport (see uvredis_transport.h): a
 * non-blocking socket under a uv_poll_t, optionally a TLS stream, a redisReader.
 *
 * The socket is made by hiredis (redisConnectNonBlock / redisConnectUnixNonBlock: the same
 * resolution, TCP_NODELAY and keepalive as before) and taken from it; from then on the reads and
 * writes are this file's. Like hiredis's async context, the output is written when the socket
 * is writable (so the commands of one loop turn go out together), and one read per readable
 * event is parsed into as many replies as it completes.
 *
 * A poll error (a failed non-blocking connect shows up as POLLERR, which libuv reports as
 * status < 0 after stopping the handle) is handled as the event it stands for: the connect's
 * result is read from SO_ERROR, a read afterwards reports the error or EOF.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "sluice/status.h"

#include "conn_internal.h"
#include "uvredis_transport.h"

#define READ_CHUNK    16384        /* bytes read per readable event, as hiredis */
#define ENCRYPT_CHUNK 65536        /* plaintext handed to the TLS stream at a time */
#define WIRE_HIGH     (256u << 10) /* ciphertext waiting above which no more is encrypted */

static void on_poll(uv_poll_t *handle, int status, int events);

/* ---------------------------------------------------------------------------------------- */
/* Buffers                                                                                  */

/* Room for len more bytes at b->p + b->len: 0, or -1 out of memory. */
static int buf_reserve(sluice__uvbuf *b, size_t len) {
    if (b->off > 0 && (b->off == b->len || b->len + len > b->cap)) {
        memmove(b->p, b->p + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (b->len + len > b->cap) {
        size_t cap = b->cap > 0 ? b->cap : 4096;
        while (cap < b->len + len) {
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    return 0;
}

static int buf_add(sluice__uvbuf *b, const void *data, size_t len) {
    if (buf_reserve(b, len) != 0) {
        return -1;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
    return 0;
}

static size_t buf_size(const sluice__uvbuf *b) {
    return b->len - b->off;
}

static void buf_take(sluice__uvbuf *b, size_t n) {
    b->off += n;
    if (b->off == b->len) {
        b->off = b->len = 0;
    }
}

static int ring_push(sluice__uvlink *l, void *privdata) {
    if (l->ring_len == l->ring_cap) {
        size_t cap = l->ring_cap > 0 ? l->ring_cap * 2 : 64;
        void **ring = malloc(cap * sizeof(*ring));
        if (ring == NULL) {
            return -1;
        }
        for (size_t i = 0; i < l->ring_len; i++) {
            ring[i] = l->ring[(l->ring_head + i) % l->ring_cap];
        }
        free(l->ring);
        l->ring = ring;
        l->ring_cap = cap;
        l->ring_head = 0;
    }
    l->ring[(l->ring_head + l->ring_len) % l->ring_cap] = privdata;
    l->ring_len++;
    return 0;
}

static void *ring_pop(sluice__uvlink *l) {
    void *privdata = l->ring[l->ring_head];
    l->ring_head = (l->ring_head + 1) % l->ring_cap;
    l->ring_len--;
    return privdata;
}

/* ---------------------------------------------------------------------------------------- */
/* Freeing                                                                                  */

static void on_close(uv_handle_t *handle) {
    sluice__uvlink *l = handle->data;
    l->hooks->closed(l);
    free(l);
}

static void do_free(sluice__uvlink *l) {
    int was_up = l->stage == SLUICE__UVLINK_UP;
    l->open = 0;
    l->freeing = 0;
    /* uv_close stops the watcher (the fd leaves epoll) at once: closing the fd next is safe */
    uv_close((uv_handle_t *)&l->poll, on_close);
    close(l->fd);
    l->fd = -1;
    while (l->ring_len > 0) {
        void *privdata = ring_pop(l);
        l->in_callback = 1;
        l->hooks->reply(l, NULL, privdata);
        l->in_callback = 0;
    }
    if (was_up) {
        l->hooks->disconnected(l);
    }
    free(l->ring);
    free(l->out.p);
    free(l->wire.p);
    l->ring = NULL;
    l->out = l->wire = (sluice__uvbuf){0};
    redisReaderFree(l->reader);
    l->reader = NULL;
    sluice__tls_stream_free(l->tls); /* stores its session in the connection's slot */
    l->tls = NULL;
}

void sluice__uvlink_free(sluice__uvlink *l) {
    if (l == NULL || !l->open) {
        return;
    }
    if (l->in_callback) {
        l->freeing = 1;
        return;
    }
    do_free(l);
}

/* The link failed: the reason is kept, the owner hears it (as a failed connect before it was
 * up), and the link is freed. */
static void fail(sluice__uvlink *l, int status, const char *why) {
    if (!l->open) {
        return;
    }
    l->status = status;
    snprintf(l->errstr, sizeof(l->errstr), "%s", why);
    if (l->stage != SLUICE__UVLINK_UP) {
        l->hooks->connected(l, status);
        if (!l->open) { /* the hook freed it */
            return;
        }
    }
    do_free(l);
}

static void fail_errno(sluice__uvlink *l, int err) {
    char why[128];
    snprintf(why, sizeof(why), "%s", strerror(err));
    fail(l, SLUICE_ECONN, why);
}

/* ---------------------------------------------------------------------------------------- */
/* Writing                                                                                  */

static void update_events(sluice__uvlink *l) {
    if (!l->open) {
        return;
    }
    int want = UV_WRITABLE;
    if (l->stage != SLUICE__UVLINK_CONNECTING) {
        want = UV_READABLE;
        if (buf_size(&l->wire) > 0 || (l->stage == SLUICE__UVLINK_UP && buf_size(&l->out) > 0)) {
            want |= UV_WRITABLE;
        }
    }
    if (want != l->events) {
        l->events = want;
        uv_poll_start(&l->poll, want, on_poll);
    }
}

/* Moves the stream's ciphertext into wire, read straight into its free room. 0, or -1
 * (failed: out of memory). */
static int take_cipher(sluice__uvlink *l) {
    size_t pending;
    while ((pending = sluice__tls_stream_pending(l->tls)) > 0) {
        if (buf_reserve(&l->wire, pending) != 0) {
            fail(l, SLUICE_ENOMEM, "out of memory");
            return -1;
        }
        l->wire.len += sluice__tls_stream_out(l->tls, l->wire.p + l->wire.len, pending);
    }
    return 0;
}

/* Writes what it can of b. 0, or -1 (failed). */
static int write_buf(sluice__uvlink *l, sluice__uvbuf *b, uint64_t *count) {
    while (buf_size(b) > 0) {
        ssize_t n = send(l->fd, b->p + b->off, buf_size(b), MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 0;
            }
            fail_errno(l, errno);
            return -1;
        }
        buf_take(b, (size_t)n);
        if (count != NULL) {
            *count += (uint64_t)n;
        }
    }
    return 0;
}

/* Encrypts the output in chunks while the ciphertext waiting is small, writing as it goes. */
static void write_tls(sluice__uvlink *l) {
    while (l->stage == SLUICE__UVLINK_UP && buf_size(&l->out) > 0 &&
           buf_size(&l->wire) < WIRE_HIGH) {
        size_t n = buf_size(&l->out) < ENCRYPT_CHUNK ? buf_size(&l->out) : ENCRYPT_CHUNK;
        int st = sluice__tls_stream_write(l->tls, l->out.p + l->out.off, n);
        if (st == SLUICE_ETOOBIG) {
            break;
        }
        if (st != 0) {
            fail(l, st, sluice__tls_stream_errstr(l->tls));
            return;
        }
        buf_take(&l->out, n);
        l->written += n;
        if (take_cipher(l) != 0) {
            return;
        }
    }
    write_buf(l, &l->wire, NULL);
}

int sluice__uvlink_append(sluice__uvlink *l, const char *cmd, size_t len, void *privdata) {
    if (!l->open || l->freeing || ring_push(l, privdata) != 0) {
        return -1;
    }
    if (buf_add(&l->out, cmd, len) != 0) {
        l->ring_len--; /* the privdata just pushed */
        return -1;
    }
    l->appended += len;
    update_events(l);
    return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Connecting                                                                               */

/* Steps the TLS handshake as far as it goes without reading; tells the owner when it is over. */
static void tls_step(sluice__uvlink *l) {
    for (int i = 0; i < 16 && l->open; i++) {
        int rc = sluice__tls_stream_handshake(l->tls);
        if (take_cipher(l) != 0) {
            return;
        }
        if (rc == SLUICE__TLS_WANT_WRITE) {
            continue;
        }
        if (write_buf(l, &l->wire, NULL) != 0) {
            return;
        }
        if (rc == SLUICE__TLS_DONE) {
            l->stage = SLUICE__UVLINK_UP;
            l->hooks->connected(l, 0);
        } else if (rc != SLUICE__TLS_WANT_READ) {
            fail(l, rc, sluice__tls_stream_errstr(l->tls));
        }
        return;
    }
}

static void connect_done(sluice__uvlink *l) {
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(l->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        err = errno;
    }
    if (err != 0) {
        fail_errno(l, err);
        return;
    }
    if (l->tls != NULL) {
        l->stage = SLUICE__UVLINK_HANDSHAKE;
        tls_step(l);
        return;
    }
    l->stage = SLUICE__UVLINK_UP;
    l->hooks->connected(l, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Reading                                                                                  */

/*
 * A server that turns a connection away (maxclients reached, protected mode) sends an error
 * unasked as soon as it accepts, then closes. It arrives as the first reply, where it would
 * answer the first request written (the handshake's AUTH, taken for bad credentials, or its
 * CLUSTER MYID, whose refusal is no failure): it is the link's failure instead.
 */
static int refused(const redisReply *r) {
    static const char *const refusals[] = {"ERR max number of clients reached", "DENIED "};
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
        size_t n = strlen(refusals[i]);
        if (r->type == REDIS_REPLY_ERROR && r->len >= n && memcmp(r->str, refusals[i], n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Hands each complete reply to the oldest request, or to the push hook when none waits. */
static void process_replies(sluice__uvlink *l) {
    while (l->open) {
        void *reply = NULL;
        /* both fail the link as a lost connection (ECONN), as hiredis's async context did */
        if (redisReaderGetReply(l->reader, &reply) != REDIS_OK) {
            fail(l, SLUICE_ECONN, l->reader->errstr);
            return;
        }
        if (reply == NULL) {
            return;
        }
        int pushed = l->ring_len == 0; /* no request waits for it: a pub/sub message */
        if ((pushed && l->hooks->push == NULL) || (l->answered++ == 0 && refused(reply))) {
            /* e.g. "ERR max number of clients reached", sent to a new connection */
            redisReply *r = reply;
            char why[200];
            snprintf(why, sizeof(why), "%s",
                     r->type == REDIS_REPLY_ERROR ? r->str : "a reply to no request");
            freeReplyObject(reply);
            fail(l, SLUICE_ECONN, why);
            return;
        }
        void *privdata = pushed ? NULL : ring_pop(l);
        l->in_callback = 1;
        if (pushed) {
            l->hooks->push(l, reply);
        } else {
            l->hooks->reply(l, reply, privdata);
        }
        l->in_callback = 0;
        freeReplyObject(reply);
        if (l->freeing) {
            do_free(l);
        }
    }
}

/* The plaintext of what was fed: into the reader; the failure (the server ended the session, a
 * protocol error) after the replies before it were handed out. */
static void read_tls(sluice__uvlink *l) {
    char buf[READ_CHUNK];
    int st = 0;
    for (;;) {
        size_t got = 0;
        st = sluice__tls_stream_read(l->tls, buf, sizeof(buf), &got);
        if (take_cipher(l) != 0) {
            return;
        }
        if (got > 0) {
            redisReaderFeed(l->reader, buf, got);
        }
        if (st != 0 || got == 0) {
            break;
        }
    }
    process_replies(l);
    if (st != 0) {
        fail(l, st,
             st == SLUICE_ECONN ? "Server closed the connection"
                                : sluice__tls_stream_errstr(l->tls));
    }
}

static void handle_read(sluice__uvlink *l) {
    char buf[READ_CHUNK];
    ssize_t n;
    do {
        n = read(l->fd, buf, sizeof(buf));
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        int err = errno;
        size_t got = 0;
        if (err == EAGAIN || err == EWOULDBLOCK) {
            return;
        }
        /* reset by the server: an alert it sent before (a client certificate it required and
         * did not get) says why better than the socket error */
        if (l->tls != NULL &&
            sluice__tls_stream_read(l->tls, buf, sizeof(buf), &got) == SLUICE_ETLS) {
            fail(l, SLUICE_ETLS, sluice__tls_stream_errstr(l->tls));
            return;
        }
        fail_errno(l, err);
        return;
    }
    if (n == 0) {
        fail(l, SLUICE_ECONN, "Server closed the connection");
        return;
    }
    if (l->tls == NULL) {
        redisReaderFeed(l->reader, buf, (size_t)n);
        process_replies(l);
        return;
    }
    int st = sluice__tls_stream_feed(l->tls, buf, (size_t)n);
    if (st != 0) {
        fail(l, st, "TLS input over its cap");
        return;
    }
    if (l->stage == SLUICE__UVLINK_HANDSHAKE) {
        tls_step(l);
        if (!l->open || l->stage != SLUICE__UVLINK_UP) {
            return;
        }
    }
    read_tls(l);
}

static void on_poll(uv_poll_t *handle, int status, int events) {
    sluice__uvlink *l = handle->data;
    if (!l->open) {
        return;
    }
    if (status < 0) {
        /* libuv stopped the handle: the error is the event it stands for */
        l->events = 0;
        events = l->stage == SLUICE__UVLINK_CONNECTING ? UV_WRITABLE : UV_READABLE;
    }
    if (l->stage == SLUICE__UVLINK_CONNECTING) {
        if (events & UV_WRITABLE) {
            connect_done(l);
        }
    } else {
        if (events & UV_READABLE) {
            handle_read(l);
        }
        if (l->open && (events & UV_WRITABLE)) {
            if (l->tls != NULL) {
                write_tls(l);
            } else if (l->stage == SLUICE__UVLINK_UP) {
                write_buf(l, &l->out, &l->written);
            }
        }
    }
    update_events(l);
}

/* The TLS stream of a new link, or NULL with *status and err. */
static sluice__tls_stream *stream_new(const sluice__uvlink_tls *t, const char *host, int *status,
                                      char *err, size_t errlen) {
    *status = SLUICE_ENOMEM;
    if (*t->ctx == NULL && (*t->ctx = sluice__tls_ctx_new(t->o, status, err, errlen)) == NULL) {
        return NULL;
    }
    *status = SLUICE_ENOMEM;
    return sluice__tls_stream_new(*t->ctx, host, t->o->tls_server_name,
                                  t->o->tls_insecure_skip_verify, t->where, t->session, 0, err,
                                  errlen);
}

sluice__uvlink *sluice__uvlink_open(uv_loop_t *loop, const char *host, int port, const char *path,
                                    const sluice__uvlink_tls *t, const sluice__uvlink_hooks *hooks,
                                    void *owner, int *status, char *err, size_t errlen) {
    sluice__tls_stream *tls = NULL;
    if (t != NULL && (tls = stream_new(t, host, status, err, errlen)) == NULL) {
        return NULL;
    }
    *status = SLUICE_ECONN;
    redisContext *rc =
        path != NULL ? redisConnectUnixNonBlock(path) : redisConnectNonBlock(host, port);
    if (rc == NULL || rc->err) {
        snprintf(err, errlen, "%s", rc != NULL ? rc->errstr : "out of memory");
        redisFree(rc);
        sluice__tls_stream_free(tls);
        return NULL;
    }
    if (path == NULL) {
        redisEnableKeepAlive(rc); /* notices a vanished peer on an idle connection */
    }
    int fd = rc->fd;
    rc->fd = -1; /* ours now: redisFree leaves it open */
    redisFree(rc);
    sluice__fd_cloexec(fd);
    sluice__uvlink *l = calloc(1, sizeof(*l));
    redisReader *reader = redisReaderCreate();
    /* uv_poll_init does not initialise the handle when it fails: no close needed then */
    if (l == NULL || reader == NULL || uv_poll_init(loop, &l->poll, fd) != 0) {
        snprintf(err, errlen, "%s",
                 l == NULL || reader == NULL ? "out of memory" : "cannot watch the socket");
        *status = l == NULL || reader == NULL ? SLUICE_ENOMEM : SLUICE_ECONN;
        redisReaderFree(reader);
        free(l);
        close(fd);
        sluice__tls_stream_free(tls);
        return NULL;
    }
    l->poll.data = l;
    l->fd = fd;
    l->open = 1;
    l->reader = reader;
    l->tls = tls;
    l->hooks = hooks;
    l->owner = owner;
    l->data = owner;
    update_events(l); /* writable: the connect is over */
    return l;
}

uint64_t sluice__uvlink_written(const sluice__uvlink *l) {
    return l->written;
}

size_t sluice__uvlink_unsent(const sluice__uvlink *l) {
    return buf_size(&l->out);
}

int sluice__uvlink_resumed(const sluice__uvlink *l) {
    return l->tls != NULL && sluice__tls_stream_resumed(l->tls);
}
