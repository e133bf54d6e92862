/* SPDX-License-Identifier: MIT */
/*
 * uvredis_adapter.c - the libuv event adapter for a hiredis 0.14 redisAsyncContext (see
 * uvredis_internal.h).
 *
 * What hiredis' own adapters/libuv.h gets wrong, and what this one does instead:
 *  - a non-blocking connect that fails makes the socket report POLLERR; libuv then stops the
 *    poll handle and calls back with status < 0. The stock adapter returns, so hiredis never
 *    notices and the connect callback never runs. Here the error is handed to hiredis
 *    (redisAsyncHandleWrite before the connect completed: it reads SO_ERROR and calls the
 *    connect callback with REDIS_ERR; redisAsyncHandleRead afterwards: the read reports the
 *    error or EOF), and the handle is restarted if the context survives.
 *  - its attach leaks the adapter struct when uv_poll_init fails; its owner is never told when
 *    the handle is closed. Here the owner gets a callback, so a connection can wait for every
 *    handle before it frees itself.
 */
#include <stdlib.h>

#include <uv.h>

#include "uvredis_internal.h"

static void on_poll(uv_poll_t *handle, int status, int events) {
    sluice__uvlink *l = handle->data;
    if (l->ac == NULL) {
        return;
    }
    if (status < 0) {
        if (l->ac->c.flags & REDIS_CONNECTED) {
            redisAsyncHandleRead(l->ac);
        } else {
            redisAsyncHandleWrite(l->ac);
        }
        /* libuv stopped the handle when it reported the error */
        if (l->ac != NULL && l->events != 0) {
            uv_poll_start(&l->poll, l->events, on_poll);
        }
        return;
    }
    if (events & UV_READABLE) {
        redisAsyncHandleRead(l->ac);
    }
    /* the read may have freed the context (EOF, or a callback freed it) */
    if (l->ac != NULL && (events & UV_WRITABLE)) {
        redisAsyncHandleWrite(l->ac);
    }
}

static void set_events(sluice__uvlink *l, int events) {
    if (l->ac == NULL || events == l->events) {
        return;
    }
    l->events = events;
    if (events != 0) {
        uv_poll_start(&l->poll, events, on_poll);
    } else {
        uv_poll_stop(&l->poll);
    }
}

static void add_read(void *privdata) {
    sluice__uvlink *l = privdata;
    set_events(l, l->events | UV_READABLE);
}

static void del_read(void *privdata) {
    sluice__uvlink *l = privdata;
    set_events(l, l->events & ~UV_READABLE);
}

static void add_write(void *privdata) {
    sluice__uvlink *l = privdata;
    set_events(l, l->events | UV_WRITABLE);
}

static void del_write(void *privdata) {
    sluice__uvlink *l = privdata;
    set_events(l, l->events & ~UV_WRITABLE);
}

static void on_close(uv_handle_t *handle) {
    sluice__uvlink *l = handle->data;
    if (l->closed != NULL) {
        l->closed(l);
    }
    free(l);
}

/* Called by hiredis from redisAsyncFree, before it closes the descriptor: uv_close stops the
 * watcher (removing the fd from epoll) at once, so closing the fd right after is safe. */
static void cleanup(void *privdata) {
    sluice__uvlink *l = privdata;
    l->ac = NULL;
    l->events = 0;
    uv_close((uv_handle_t *)&l->poll, on_close);
}

sluice__uvlink *sluice__uvlink_attach(uv_loop_t *loop, redisAsyncContext *ac, void *owner,
                                      sluice__uvlink_closed_cb closed) {
    sluice__uvlink *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return NULL;
    }
    /* uv_poll_init does not initialise the handle when it fails: no close needed then */
    if (uv_poll_init(loop, &l->poll, ac->c.fd) != 0) {
        free(l);
        return NULL;
    }
    l->poll.data = l;
    l->ac = ac;
    l->owner = owner;
    l->data = owner;
    l->closed = closed;
    ac->data = l;
    ac->ev.data = l;
    ac->ev.addRead = add_read;
    ac->ev.delRead = del_read;
    ac->ev.addWrite = add_write;
    ac->ev.delWrite = del_write;
    ac->ev.cleanup = cleanup;
    return l;
}

uint64_t sluice__uvlink_written(const sluice__uvlink *l, const redisAsyncContext *ac) {
    size_t buffered = ac->c.obuf != NULL ? sdslen(ac->c.obuf) : 0;
    return l->appended - (uint64_t)buffered;
}
