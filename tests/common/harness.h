/* SPDX-License-Identifier: MIT */
/*
 * harness.h - what every sluice C test shares: assertion macros that print both sides, the URL
 * of the fixture's private redis-server, unique queue names, and a raw hiredis connection for
 * checking what is really in Redis.
 *
 * A failed CHECK prints file:line, the expression and both values, and exits 1.
 */
#ifndef SLUICE_HARNESS_H
#define SLUICE_HARNESS_H

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include "sluice/queue.h"
#include "sluice/worker.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "%s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, __LINE__,  \
                    #a, #b, a_, b_);                                                               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#define CHECK_STREQ(a, b)                                                                          \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0) {                                     \
            fprintf(stderr, "%s:%d: CHECK_STREQ(%s, %s) failed: \"%s\" != \"%s\"\n", __FILE__,     \
                    __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* CHECK that a status is 0; on failure prints sluice_strerror() and the detail string. */
#define CHECK_OK(expr, detail)                                                                     \
    do {                                                                                           \
        int s_ = (expr);                                                                           \
        if (s_ != 0) {                                                                             \
            fprintf(stderr, "%s:%d: %s returned %d (%s): %s\n", __FILE__, __LINE__, #expr, s_,     \
                    sluice_strerror(s_), th_str(detail));                                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* `s`, or "" for NULL. */
static inline const char *th_str(const char *s) {
    return s ? s : "";
}

/* URL of the fixture's redis-server (redis://127.0.0.1:PORT). Exits 1 if there is none. */
const char *th_redis_url(void);

/* unix:// URL of the same server. */
const char *th_redis_unix_url(void);

/* A queue name unique to this process and call: "<prefix>-<pid>-<n>". */
void th_queue(char *buf, size_t len, const char *prefix);

/* A reply made by hiredis' own reader from RESP text, as it arrives from a server (exits 1
 * when the text is not one whole reply). Free with freeReplyObject. */
redisReply *th_resp(const char *text);

/* A raw blocking connection to the fixture server (exits 1 on failure). Free with redisFree. */
redisContext *th_redis(void);

/* Runs a command on `c`, CHECKs it is not an error, returns the integer reply (or 0). */
long long th_int(redisContext *c, const char *fmt, ...);

/* Deletes every key of queue `q` (both backends). */
void th_cleanup_queue(redisContext *c, const char *q);

/* Admits `n` messages with body `body` into queue `q` of backend `b` (capacity 100000) on the
 * fixture server; every admission must succeed. */
void th_fill(const char *q, sluice_backend b, int n, const char *body);

/* A worker run on a thread of its own (sluice_worker_run with its own loop). */
typedef struct th_worker_run {
    sluice_worker *w; /* set by the test */
    pthread_t thread;
    int rc; /* what sluice_worker_run returned, after th_worker_join */
} th_worker_run;

void th_worker_start(th_worker_run *r);
/* Joins the thread (after sluice_worker_stop, or a worker that ends by itself); returns rc. */
int th_worker_join(th_worker_run *r);

/* A loopback TCP port nothing listens on now (bound, then closed; exits 1 on failure). */
int th_free_port(void);

/* Directory binaries live in ($SLUICE_BIN_DIR). */
const char *th_bin_dir(void);

#endif
