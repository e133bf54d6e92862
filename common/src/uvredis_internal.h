/* SPDX-License-Identifier: MIT */
/*
 * uvredis_internal.h - the libuv event adapter for one hiredis 0.14 redisAsyncContext, shared by
 * uvredis_link.c (the async connection's link) and uvredis_adapter.c (the adapter itself).
 *
 * Owns: the uv_poll_t watching the context's socket and the ac->ev hooks hiredis calls. Unlike
 * the stock adapters/libuv.h it hands a poll error (a failed non-blocking connect shows up as
 * POLLERR, which libuv reports as status < 0) to hiredis, so the connect callback does run, and
 * it tells its owner when the poll handle is closed. Does not own: the redisAsyncContext (its
 * owner frees it; hiredis calls the cleanup hook from redisAsyncFree).
 */
#ifndef SLUICE_UVREDIS_INTERNAL_H
#define SLUICE_UVREDIS_INTERNAL_H

#include <stdint.h>

#include <hiredis/async.h>
#include <uv.h>

typedef struct sluice__uvlink sluice__uvlink;

/* Called once the poll handle is closed, just before the link's memory is freed. */
typedef void (*sluice__uvlink_closed_cb)(sluice__uvlink *l);

struct sluice__uvlink {
    uv_poll_t poll;        /* watches ac->c.fd; freed with the link in its close callback */
    redisAsyncContext *ac; /* NULL once hiredis has called the cleanup hook */
    int events;            /* UV_READABLE | UV_WRITABLE hiredis currently wants */
    void *owner;           /* the sluice_aconn; stays set until the link is freed */
    void *data;            /* the sluice_aconn while it still uses this link, else NULL */
    uint64_t appended;     /* bytes of commands appended to ac->c.obuf since connect */
    sluice__uvlink_closed_cb closed;
};

/*
 * Attaches a new link to `ac` on `loop`: sets ac->ev and ac->data. Returns NULL (and leaves ac
 * untouched) when out of memory or when libuv refuses the descriptor.
 */
sluice__uvlink *sluice__uvlink_attach(uv_loop_t *loop, redisAsyncContext *ac, void *owner,
                                      sluice__uvlink_closed_cb closed);

/* Bytes of the output written to the socket so far (appended minus what is still buffered). */
uint64_t sluice__uvlink_written(const sluice__uvlink *l, const redisAsyncContext *ac);

#endif
