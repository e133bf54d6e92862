/* SPDX-License-Identifier: MIT */
/*
 * http_delivery.c - the worker's HTTP delivery handler (sluice/worker_http.h, http_delivery.h):
 * the target, and per worker a libcurl multi handle driven by the worker's libuv loop (the
 * multi-socket API: CURLMOPT_SOCKETFUNCTION watches each socket with a uv_poll_t,
 * CURLMOPT_TIMERFUNCTION arms one uv_timer_t), so no request ever blocks the loop; libcurl's
 * threaded resolver keeps DNS off it too. Connections are kept alive and reused, at most the
 * worker's concurrency of them.
 *
 * A job goes: dispatch -> waiting (until the hold check answered and no hold lasts) -> a
 * transfer in the multi handle -> its answer's verdict (http_message.c) -> sluice_job_finish.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <hiredis/hiredis.h>

#include "sluice/clock.h"
#include "sluice/log.h"
#include "sluice/options.h"

#include "http_delivery.h"
#include "http_message.h"

#define HOLD_FRESH_MS   100      /* an answer of the hold check is trusted this long */
#define HOLD_LATE_MS    100      /* a hold SET answered later than this set the rest again */
#define HOLD_MAX_MS     86400000 /* Retry-After is capped at a day */
#define BODY_KEEP       200      /* bytes of an answer's body kept for a dead letter's reason */
#define VALUE_MAX       1024     /* bytes of a header value taken from a message */
#define LOG_EVERY_MS    1000     /* failures: one line a second, with the count since */
#define SECRET_MAX      512      /* bytes of a decoded signing secret */
#define TARGET_MAX      300
#define CONNECT_DEFAULT 5000
#define PAUSE_MAX_MS    5000 /* an unreachable target pauses a worker at most this long */

struct sluice_http {
    const sluice__http_ops *ops; /* first: http_delivery.h */
    char *url;
    char target[TARGET_MAX];    /* HOST:PORT: the hold key's suffix */
    char origin[TARGET_MAX];    /* SCHEME://HOST:PORT, for logs (the path may hold secrets) */
    struct curl_slist *headers; /* the extra headers and "Expect:", read by every transfer */
    unsigned char key[SECRET_MAX];
    size_t keylen; /* 0: unsigned */
    char *ca_file;
    int follow;
    int connect_timeout_ms;
    atomic_ullong counts[SLUICE__HTTP_RESULTS];
    atomic_ullong holds, held_ms;
    pthread_mutex_t mu;                  /* guards clients and held_* */
    struct sluice__http_client *clients; /* the running clients (a pool's partitions), linked */
    /* The latest hold told to the clients (hold_share), for a partition's client that starts
     * while it lasts: its end (monotonic ms), the queue and key of the client that got it. */
    uint64_t held_until;
    char held_queue[SLUICE_QUEUE_NAME_MAX + 1];
    char held_key[SLUICE_KEY_MAX + TARGET_MAX];
};

typedef struct sluice__http_client client;

typedef struct xfer {
    client *c;
    job *j;
    CURL *e;
    struct xfer *prev, *next; /* the client's waiting or active list, or its free list */
    struct curl_slist *hdrs;  /* this request's own headers; the last links to the target's */
    struct curl_slist *last;
    size_t body_len;
    char body[BODY_KEEP];
    char err[CURL_ERROR_SIZE];
} xfer;

typedef struct sock {
    uv_poll_t poll;
    curl_socket_t fd;
    client *c;
} sock;

struct sluice__http_client {
    sluice_worker *w;
    sluice_http *h;
    CURLM *multi;
    uv_timer_t timer;      /* libcurl's timeout */
    uv_timer_t hold_timer; /* the end of a hold */
    uv_async_t shared;     /* another partition's worker in this process got a hold */
    int handles;           /* uv handles not yet closed (the timers, the async, the polls) */
    xfer waiting;          /* sentinel: jobs not started yet */
    xfer active;           /* sentinel: transfers in the multi handle */
    xfer *free_xfers;
    uint64_t hold_until; /* monotonic ms; 0 none */
    uint64_t checked_ms; /* when the last hold check answered */
    uint64_t set_until;  /* the end of the last hold set on the key (monotonic ms) */
    uint64_t set_asked;  /* when the hold SET under way was asked (monotonic ms) */
    int setting;         /* a hold SET is under way (held while the connection is down) */
    int set_stale;       /* ... and set_until changed since: set again once it is answered */
    long long pause_ms;  /* the last pause for an unreachable target; 0 after a success */
    int checking;        /* a PTTL is outstanding */
    int closing;
    void (*done)(void *);
    void *done_arg;
    uint64_t log_ms;   /* the last failure line */
    unsigned unlogged; /* failures since */
    char hold_key[SLUICE_KEY_MAX + TARGET_MAX];
    size_t base_len;            /* the queue's name without its partition suffix ~i */
    client *sibling;            /* the next in h->clients */
    atomic_ullong shared_until; /* that hold's end (monotonic ms), 0 none: read by `shared` */
    atomic_int shared_write;    /* ... to be written to this client's own key too */
};

/* ---- lists ---- */

static void xlist_init(xfer *s) {
    s->prev = s->next = s;
}

static void xlist_push(xfer *s, xfer *x) {
    x->prev = s->prev;
    x->next = s;
    s->prev->next = x;
    s->prev = x;
}

static void xlist_unlink(xfer *x) {
    x->prev->next = x->next;
    x->next->prev = x->prev;
    x->prev = x->next = x;
}

/* ---- transfers ---- */

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
    xfer *x = arg;
    size_t len = size * n, room = sizeof(x->body) - x->body_len;
    memcpy(x->body + x->body_len, p, len < room ? len : room);
    x->body_len += len < room ? len : room;
    return len; /* the rest is read and dropped */
}

static void easy_setup(client *c, xfer *x) {
    sluice_http *h = c->h;
    long timeout = c->w->o.handler_timeout_ms > 0 ? c->w->o.handler_timeout_ms
                                                  : SLUICE_HTTP_TIMEOUT_DEFAULT_MS;
    long connect = h->connect_timeout_ms < timeout ? h->connect_timeout_ms : timeout;
    CURL *e = x->e;
    curl_easy_setopt(e, CURLOPT_URL, h->url);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "sluice-worker/" SLUICE_VERSION);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->err);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, connect);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    if (h->ca_file != NULL) {
        curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_file);
    }
    if (h->follow) {
        curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
        /* a webhook stays a POST with its body after a 301 or 302 (303 means: GET elsewhere) */
        curl_easy_setopt(e, CURLOPT_POSTREDIR, (long)(CURL_REDIR_POST_301 | CURL_REDIR_POST_302));
    }
}

static xfer *xfer_get(client *c) {
    xfer *x = c->free_xfers;
    if (x != NULL) {
        c->free_xfers = x->next;
    } else if ((x = calloc(1, sizeof(*x))) == NULL) {
        return NULL;
    } else if ((x->e = curl_easy_init()) == NULL) {
        free(x);
        return NULL;
    } else {
        x->c = c;
        easy_setup(c, x);
    }
    x->prev = x->next = x;
    x->j = NULL;
    x->body_len = 0;
    x->err[0] = '\0';
    return x;
}

static void xfer_headers_free(xfer *x) {
    if (x->last != NULL) {
        x->last->next = NULL; /* the target's own list is not this request's */
    }
    curl_slist_free_all(x->hdrs);
    x->hdrs = x->last = NULL;
}

static void xfer_put(client *c, xfer *x) {
    xfer_headers_free(x);
    x->j = NULL;
    x->next = c->free_xfers;
    c->free_xfers = x;
}

static void xfer_destroy(xfer *x) {
    xfer_headers_free(x);
    curl_easy_cleanup(x->e);
    free(x);
}

/* Appends "Name: value" (value n bytes from a message: control characters become spaces). */
static int add_header(xfer *x, const char *name, const char *v, size_t n) {
    char line[VALUE_MAX + 64], value[VALUE_MAX];
    sluice__http_value(v, n, value, sizeof(value));
    snprintf(line, sizeof(line), "%s: %s", name, value);
    struct curl_slist *l = curl_slist_append(x->hdrs, line);
    if (l == NULL) {
        return -1;
    }
    x->hdrs = l;
    return 0;
}

static const sluice_header *envelope_header(const sluice_job *j, const char *name) {
    for (size_t i = 0; i < j->nheaders; i++) {
        const sluice_header *hd = &j->headers[i];
        if (hd->name_len == strlen(name) && strncasecmp(hd->name, name, hd->name_len) == 0) {
            return hd;
        }
    }
    return NULL;
}

static int sign_headers(xfer *x, const char *queue) {
    const sluice_http *h = x->c->h;
    const sluice_job *j = &x->j->pub;
    char id[SLUICE_QUEUE_NAME_MAX * 3 + SLUICE_STREAM_ID_MAX + 2], ts[24], sig[64];
    long long now = (long long)time(NULL);
    snprintf(ts, sizeof(ts), "%lld", now);
    if (sluice__webhook_id(queue, j->id, id, sizeof(id)) != 0 ||
        sluice__webhook_sign(h->key, h->keylen, id, now, j->payload, j->payload_len, sig,
                             sizeof(sig)) != 0) {
        return -1;
    }
    return add_header(x, "webhook-id", id, strlen(id)) ||
                   add_header(x, "webhook-timestamp", ts, strlen(ts)) ||
                   add_header(x, "webhook-signature", sig, strlen(sig))
               ? -1
               : 0;
}

/* The request's own headers, then the target's (linked, not copied). 0 or -1. */
static int build_headers(xfer *x) {
    sluice_worker *w = x->c->w;
    const sluice_job *j = &x->j->pub;
    const sluice_header *ct = envelope_header(j, "content-type");
    const sluice_header *rid = envelope_header(j, "request-id");
    char n[24], idem[SLUICE_QUEUE_NAME_MAX + SLUICE_STREAM_ID_MAX + 2];
    snprintf(n, sizeof(n), "%lld", j->deliveries);
    snprintf(idem, sizeof(idem), "%s:%s", w->queue, j->id);
    static const char dflt[] = "application/octet-stream";
    if (add_header(x, "Content-Type", ct ? ct->value : dflt, ct ? ct->value_len : strlen(dflt)) ||
        (rid != NULL && add_header(x, "X-Request-Id", rid->value, rid->value_len)) ||
        add_header(x, "Sluice-Id", j->id, strlen(j->id)) ||
        add_header(x, "Sluice-Queue", w->queue, strlen(w->queue)) ||
        add_header(x, "Sluice-Deliveries", n, strlen(n)) ||
        (j->tenant != NULL && add_header(x, "Sluice-Tenant", j->tenant, j->tenant_len)) ||
        add_header(x, "Idempotency-Key", idem, strlen(idem)) ||
        (x->c->h->keylen > 0 && sign_headers(x, w->queue) != 0)) {
        return -1;
    }
    for (x->last = x->hdrs; x->last->next != NULL; x->last = x->last->next) {
    }
    x->last->next = x->c->h->headers;
    return 0;
}

static void finish(client *c, xfer *x, sluice_verdict v, const char *reason) {
    job *j = x->j;
    xfer_put(c, x);
    sluice_job_finish_reason(&j->pub, v, reason);
}

static void start(client *c, xfer *x) {
    const sluice_job *j = &x->j->pub;
    if (build_headers(x) != 0) {
        finish(c, x, SLUICE_RETRY, NULL); /* out of memory */
        return;
    }
    curl_easy_setopt(x->e, CURLOPT_POSTFIELDS, j->payload ? (const char *)j->payload : "");
    curl_easy_setopt(x->e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)j->payload_len);
    curl_easy_setopt(x->e, CURLOPT_HTTPHEADER, x->hdrs);
    if (curl_multi_add_handle(c->multi, x->e) != CURLM_OK) {
        finish(c, x, SLUICE_RETRY, NULL);
        return;
    }
    xlist_push(&c->active, x);
}

/* ---- the hold ---- */

static void hold_timer_cb(uv_timer_t *t);
static void gate(client *c);

/* A hold until `until` (monotonic ms) is known: reads and requests wait for it. */
static void hold_extend(client *c, uint64_t until) {
    uint64_t now = sluice_now_ms(), from = c->hold_until > now ? c->hold_until : now;
    if (until <= from) {
        return;
    }
    atomic_fetch_add(&c->h->held_ms, until - from);
    c->hold_until = until;
    uv_timer_start(&c->hold_timer, hold_timer_cb, until - now, 0);
}

static void hold_timer_cb(uv_timer_t *t) {
    client *c = t->data;
    c->hold_until = 0;
    c->checked_ms = 0; /* another worker may have held it longer: ask again */
    gate(c);
    sluice__worker_kick(c->w);
}

static void on_hold_check(sluice_aconn *conn, int status, int sent, redisReply *r, void *arg) {
    (void)conn, (void)sent;
    client *c = arg;
    if (status == SLUICE_ECANCELED) {
        return; /* the connection closed with the worker: the client is closing too */
    }
    c->checking = 0;
    c->checked_ms = sluice_now_ms();
    if (status == 0 && r->type == REDIS_REPLY_INTEGER && r->integer > 0) {
        hold_extend(c, c->checked_ms + (uint64_t)r->integer);
    }
    gate(c); /* an error: deliver rather than stall (the hold is a courtesy to the back end) */
}

static void hold_set(client *c, long long ms);

/*
 * The hold SET answered. Set again, with what is left of the hold (held again while the
 * connection is down), when a later hold came meanwhile, when it landed late (it waited for
 * the connection: the key would outlast the hold by that wait), or when it was written and got
 * no answer (the link was lost: it may not have run). Not after an error reply (it would come
 * again), nor once the hold ended before the connection was back (its deadline); canceled: the
 * client is closing.
 */
static void on_hold_set(sluice_aconn *conn, int status, int sent, redisReply *r, void *arg) {
    (void)conn;
    client *c = arg;
    if (status == SLUICE_ECANCELED) {
        return; /* the connection closed with the worker: the client is closing too */
    }
    uint64_t now = sluice_now_ms();
    int again = c->set_stale || (status == 0 && now - c->set_asked > HOLD_LATE_MS) ||
                (r == NULL && (sent || status != SLUICE_ETIMEDOUT));
    c->setting = c->set_stale = 0;
    if (again && !c->closing && c->set_until > now) {
        hold_set(c, (long long)(c->set_until - now));
    }
}

/* Sets the hold key (which expires with the hold). The workers of other processes learn of the
 * hold from it alone: while the connection is down (not ready, lost, a cluster redirect under
 * way) the SET waits for it (sluice_aconn_command_held) until the hold ends; one is under way
 * at a time, the last hold's end set once it is answered. */
static void hold_set(client *c, long long ms) {
    uint64_t now = sluice_now_ms();
    c->set_until = now + (uint64_t)ms;
    if (c->setting) {
        c->set_stale = 1;
        return;
    }
    char px[24];
    snprintf(px, sizeof(px), "%lld", ms);
    const char *argv[] = {"SET", c->hold_key, px, "PX", px};
    int held = !sluice_aconn_ready(c->w->cmd); /* then it may wait as long as the hold lasts */
    int st =
        sluice_aconn_command_held(c->w->cmd, 5, argv, NULL, held ? (int)ms : 0, on_hold_set, c);
    SLUICE_LOG(SLUICE_LOG_DEBUG, "event=http_hold_set queue=%s target=%s ms=%lld held=%d status=%s",
               c->w->queue, c->h->origin, ms, held, sluice_err_name(st));
    c->setting = st == 0;
    c->set_asked = now;
}

/* Tells s (on its loop) of a hold until `until` that the client of `queue` (a partition of s's
 * queue, or another queue: nothing) got, set on `key`. With h->mu held. */
static void hold_tell(client *s, const char *queue, const char *key, uint64_t until) {
    if (strcspn(queue, "~") != s->base_len || strncmp(s->w->queue, queue, s->base_len) != 0) {
        return;
    }
    unsigned long long had = atomic_load(&s->shared_until);
    while (had < until && !atomic_compare_exchange_weak(&s->shared_until, &had, until)) {
    }
    if (strcmp(s->hold_key, key) != 0) {
        atomic_store(&s->shared_write, 1);
    }
    uv_async_send(&s->shared);
}

/* The other partitions' workers of the queue in this process hold too, at once: each is told on
 * its own loop (on_shared), and sets the hold on its own key where that is not this one's (on a
 * Redis Cluster, where a worker's connection reaches its partition's slot only), so that the
 * workers of its partition in other processes learn of the hold from the key they read. */
static void hold_share(client *c, uint64_t until) {
    pthread_mutex_lock(&c->h->mu);
    for (client *s = c->h->clients; s != NULL; s = s->sibling) {
        if (s != c) {
            hold_tell(s, c->w->queue, c->hold_key, until);
        }
    }
    c->h->held_until = until;
    snprintf(c->h->held_queue, sizeof(c->h->held_queue), "%s", c->w->queue);
    snprintf(c->h->held_key, sizeof(c->h->held_key), "%s", c->hold_key);
    pthread_mutex_unlock(&c->h->mu);
}

static void on_shared(uv_async_t *a) {
    client *c = a->data;
    uint64_t until = atomic_exchange(&c->shared_until, 0), now = sluice_now_ms();
    int write = atomic_exchange(&c->shared_write, 0);
    if (c->closing || until <= now) {
        return;
    }
    if (write && until > c->hold_until) {
        hold_set(c, (long long)(until - now));
    }
    hold_extend(c, until);
}

/* This worker got Retry-After: hold here at once, and every worker of the queue through the
 * key and the other partitions in this process (hold_share). */
static void hold_start(client *c, long long ms) {
    uint64_t until = sluice_now_ms() + (uint64_t)ms;
    hold_set(c, ms);
    atomic_fetch_add(&c->h->holds, 1);
    SLUICE_LOG(SLUICE_LOG_INFO, "event=http_hold queue=%s target=%s ms=%lld", c->w->queue,
               c->h->origin, ms);
    hold_share(c, until);
    hold_extend(c, until);
}

/* Retries what waits, after the hold (a stopping worker does not wait for it). */
static void release_waiting(client *c) {
    uint64_t now = sluice_now_ms();
    long long rest = c->hold_until > now ? (long long)(c->hold_until - now) : 0;
    while (c->waiting.next != &c->waiting) {
        xfer *x = c->waiting.next;
        xlist_unlink(x);
        x->j->retry_after_ms = rest;
        finish(c, x, SLUICE_RETRY, NULL);
    }
}

/* Starts the waiting jobs' requests once no hold lasts and the last check is fresh. */
static void gate(client *c) {
    if (c->closing || c->waiting.next == &c->waiting) {
        return;
    }
    uint64_t now = sluice_now_ms();
    if (c->hold_until > now) {
        if (c->w->stopping) {
            release_waiting(c);
        }
        return; /* hold_timer ends it */
    }
    if (c->checked_ms == 0 || now - c->checked_ms >= HOLD_FRESH_MS) {
        if (!c->checking) {
            const char *argv[] = {"PTTL", c->hold_key};
            if (sluice_aconn_command(c->w->cmd, 2, argv, NULL, 0, on_hold_check, c) == 0) {
                c->checking = 1;
                return;
            }
            c->checked_ms = now; /* cannot ask: deliver */
        } else {
            return;
        }
    }
    while (c->waiting.next != &c->waiting) {
        xfer *x = c->waiting.next;
        xlist_unlink(x);
        start(c, x);
    }
}

/* ---- answers ---- */

/* One line per failure, at most one a LOG_EVERY_MS with the number left out since. */
static void log_failure(client *c, xfer *x, sluice__http_result r, long status) {
    uint64_t now = sluice_now_ms();
    if (c->log_ms != 0 && now - c->log_ms < LOG_EVERY_MS) {
        c->unlogged++;
        return;
    }
    char q[CURL_ERROR_SIZE * 4 + 3];
    const char *detail = x->err[0] != '\0' ? x->err : "";
    SLUICE_LOG(SLUICE_LOG_WARN,
               "event=http_failed id=%s target=%s result=%s status=%ld deliveries=%lld "
               "unlogged=%u detail=%s",
               x->j->pub.id, c->h->origin, sluice__http_result_name(r), status,
               x->j->pub.deliveries, c->unlogged, sluice_log_q(detail, q, sizeof(q)));
    c->log_ms = now;
    c->unlogged = 0;
}

/* The target is unreachable (refused, reset, TLS), not this message: this worker pauses its
 * reads and requests for the first backoff, doubling while tries keep failing (at most
 * PAUSE_MAX_MS), instead of failing its whole backlog at once (a refused connect takes no
 * time). The failures of one try count once. */
static void unreachable(client *c) {
    uint64_t now = sluice_now_ms();
    if (c->hold_until > now) {
        return;
    }
    long long p = c->pause_ms > 0 ? 2 * c->pause_ms : c->w->o.retry_backoff_ms;
    c->pause_ms = p < PAUSE_MAX_MS ? p : PAUSE_MAX_MS;
    hold_extend(c, now + (uint64_t)c->pause_ms);
}

static void answered(client *c, xfer *x, CURLcode code) {
    long status = 0;
    curl_off_t retry_after = 0;
    curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &status);
    sluice__http_result r = sluice__http_classify(code, code == CURLE_OK ? status : 0);
    atomic_fetch_add(&c->h->counts[r], 1);
    sluice_verdict v = sluice__http_verdict(r);
    char reason[200] = "";
    if (r != SLUICE__HTTP_OK && r != SLUICE__HTTP_THROTTLED) {
        log_failure(c, x, r, status);
    } else if (r == SLUICE__HTTP_OK) {
        c->pause_ms = 0; /* reachable again */
    }
    if (r == SLUICE__HTTP_THROTTLED &&
        curl_easy_getinfo(x->e, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK &&
        retry_after > 0) {
        long long ms = retry_after > HOLD_MAX_MS / 1000 ? HOLD_MAX_MS : retry_after * 1000;
        x->j->retry_after_ms = ms;
        hold_start(c, ms);
    } else if (r == SLUICE__HTTP_CONNECT_ERROR || r == SLUICE__HTTP_TLS_ERROR) {
        unreachable(c);
    } else if (r == SLUICE__HTTP_REDIRECT && code == CURLE_OK) {
        char *to = NULL;
        curl_easy_getinfo(x->e, CURLINFO_REDIRECT_URL, &to);
        snprintf(reason, sizeof(reason), "http %ld: redirect to %.120s not followed", status,
                 to != NULL ? to : "(no Location)");
    } else if (v == SLUICE_FAIL && code == CURLE_OK) {
        char body[BODY_KEEP + 1];
        sluice__http_value(x->body, x->body_len, body, sizeof(body));
        snprintf(reason, sizeof(reason), "http %ld: %.*s", status, (int)(sizeof(reason) - 12),
                 body);
    } else if (v == SLUICE_FAIL) {
        snprintf(reason, sizeof(reason), "http: %.180s",
                 x->err[0] ? x->err : curl_easy_strerror(code));
    }
    curl_multi_remove_handle(c->multi, x->e);
    xlist_unlink(x);
    finish(c, x, v, reason);
}

static void check_done(client *c) {
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
        if (m->msg != CURLMSG_DONE) {
            continue;
        }
        xfer *x = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        answered(c, x, m->data.result);
    }
}

/* ---- libcurl on the loop ---- */

static void client_gone(client *c);

static void on_poll(uv_poll_t *p, int status, int events) {
    sock *s = p->data;
    client *c = s->c;
    int flags = status < 0 ? CURL_CSELECT_ERR : 0;
    flags |= (events & UV_READABLE) ? CURL_CSELECT_IN : 0;
    flags |= (events & UV_WRITABLE) ? CURL_CSELECT_OUT : 0;
    int running;
    curl_multi_socket_action(c->multi, s->fd, flags, &running);
    check_done(c);
}

static void sock_closed(uv_handle_t *hd) {
    sock *s = hd->data;
    client *c = s->c;
    free(s);
    client_gone(c);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *arg, void *sockp) {
    (void)e;
    client *c = arg;
    sock *s = sockp;
    if (what == CURL_POLL_REMOVE) {
        if (s != NULL) {
            curl_multi_assign(c->multi, fd, NULL);
            uv_close((uv_handle_t *)&s->poll, sock_closed);
        }
        return 0;
    }
    if (s == NULL) {
        if ((s = calloc(1, sizeof(*s))) == NULL) {
            return -1;
        }
        s->fd = fd;
        s->c = c;
        if (uv_poll_init_socket(c->w->loop, &s->poll, fd) != 0) {
            free(s);
            return -1;
        }
        s->poll.data = s;
        c->handles++;
        curl_multi_assign(c->multi, fd, s);
    }
    int ev = ((what & CURL_POLL_IN) ? UV_READABLE : 0) | ((what & CURL_POLL_OUT) ? UV_WRITABLE : 0);
    uv_poll_start(&s->poll, ev, on_poll);
    return 0;
}

static void on_timeout(uv_timer_t *t) {
    client *c = t->data;
    int running;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(c);
    /* Transfers on kept-alive connections often finish inside this call (loop's timer phase);
     * the flush that runs after the poll phase would then wait for the next event, up to a
     * second later, with every slot settled: send their acknowledgements now. */
    if (!c->w->closing) {
        sluice__jobs_flush(c->w);
    }
}

static int on_timer(CURLM *m, long timeout_ms, void *arg) {
    (void)m;
    client *c = arg;
    if (timeout_ms < 0) {
        uv_timer_stop(&c->timer);
    } else {
        uv_timer_start(&c->timer, on_timeout, (uint64_t)timeout_ms, 0);
    }
    return 0;
}

/* ---- the worker's calls (sluice__http_ops) ---- */

/* The hold key: for every partition of a partitioned queue, the queue's as a whole (partition
 * 0's), so a hold set by one partition's worker holds them all. On a Redis Cluster a worker's
 * connection reaches only its own partition's slot: there each partition has its own, set by
 * every partition's worker of the process that got the answer (hold_share). */
static int hold_key_of(const sluice_worker *w, const char *target, char *buf, size_t len) {
    const char *tilde = strchr(w->queue, '~');
    if (tilde == NULL || w->url.is_cluster) {
        return sluice_key_hold(&w->keys, target, strlen(target), buf, len);
    }
    char whole[SLUICE_QUEUE_NAME_MAX + 1];
    sluice_keys k;
    snprintf(whole, sizeof(whole), "%.*s", (int)(tilde - w->queue), w->queue);
    if (sluice_keys_init(&k, whole, NULL, 0) != 0) {
        return SLUICE_EINVAL;
    }
    return sluice_key_hold(&k, target, strlen(target), buf, len);
}

static int client_start(sluice_worker *w) {
    client *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->multi = curl_multi_init()) == NULL) {
        free(c);
        return SLUICE_ENOMEM;
    }
    c->w = w;
    c->h = w->o.http;
    xlist_init(&c->waiting);
    xlist_init(&c->active);
    if (hold_key_of(w, c->h->target, c->hold_key, sizeof(c->hold_key)) != 0) {
        curl_multi_cleanup(c->multi);
        free(c);
        return SLUICE_EINVAL;
    }
    uv_timer_init(w->loop, &c->timer);
    uv_timer_init(w->loop, &c->hold_timer);
    uv_async_init(w->loop, &c->shared, on_shared);
    c->timer.data = c->hold_timer.data = c;
    c->shared.data = c;
    c->handles = 3;
    c->base_len = strcspn(w->queue, "~");
    pthread_mutex_lock(&c->h->mu);
    c->sibling = c->h->clients;
    c->h->clients = c;
    if (c->h->held_until > sluice_now_ms()) { /* a partition started during a hold */
        hold_tell(c, c->h->held_queue, c->h->held_key, c->h->held_until);
    }
    pthread_mutex_unlock(&c->h->mu);
    long conns = w->o.concurrency;
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, conns);
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, conns);
    w->http_client = c;
    SLUICE_LOG(SLUICE_LOG_INFO, "event=http_target queue=%s target=%s signed=%s connections=%ld",
               w->queue, c->h->origin, c->h->keylen > 0 ? "yes" : "no", conns);
    return 0;
}

/* One of the client's handles closed; the last frees it and tells the worker. */
static void client_gone(client *c) {
    if (--c->handles > 0) {
        return;
    }
    void (*done)(void *) = c->done;
    void *arg = c->done_arg;
    free(c);
    if (done != NULL) {
        done(arg);
    }
}

static void handle_closed(uv_handle_t *hd) {
    client_gone(hd->data);
}

static void client_close(sluice_worker *w, void (*done)(void *), void *arg) {
    client *c = w->http_client;
    if (c == NULL || c->closing) {
        return;
    }
    c->closing = 1;
    c->done = done;
    c->done_arg = arg;
    w->http_client = NULL;
    pthread_mutex_lock(&c->h->mu); /* no sibling tells it of a hold any more */
    for (client **p = &c->h->clients; *p != NULL; p = &(*p)->sibling) {
        if (*p == c) {
            *p = c->sibling;
            break;
        }
    }
    pthread_mutex_unlock(&c->h->mu);
    while (c->waiting.next != &c->waiting) { /* left pending: reclaimed by other workers */
        xfer *x = c->waiting.next;
        xlist_unlink(x);
        finish(c, x, SLUICE_RETRY, NULL);
    }
    while (c->active.next != &c->active) {
        xfer *x = c->active.next;
        xlist_unlink(x);
        curl_multi_remove_handle(c->multi, x->e);
        finish(c, x, SLUICE_RETRY, NULL);
    }
    while (c->free_xfers != NULL) {
        xfer *x = c->free_xfers;
        c->free_xfers = x->next;
        xfer_destroy(x);
    }
    curl_multi_cleanup(c->multi); /* closes the pooled connections: their polls close */
    c->multi = NULL;
    uv_close((uv_handle_t *)&c->timer, handle_closed);
    uv_close((uv_handle_t *)&c->hold_timer, handle_closed);
    uv_close((uv_handle_t *)&c->shared, handle_closed);
}

static void client_stopping(sluice_worker *w) {
    client *c = w->http_client;
    if (c != NULL && c->hold_until > sluice_now_ms()) {
        release_waiting(c);
    }
}

static void client_dispatch(job *j) {
    client *c = j->w->http_client;
    xfer *x = c != NULL ? xfer_get(c) : NULL;
    if (x == NULL) {
        sluice_job_finish(&j->pub, SLUICE_RETRY);
        return;
    }
    x->j = j;
    xlist_push(&c->waiting, x);
    gate(c);
}

static int client_held(sluice_worker *w) {
    client *c = w->http_client;
    return c != NULL && c->hold_until > sluice_now_ms();
}

static xfer *find(xfer *list, const job *j) {
    for (xfer *x = list->next; x != list; x = x->next) {
        if (x->j == j) {
            return x;
        }
    }
    return NULL;
}

static void client_abandon(job *j) {
    client *c = j->w->http_client;
    xfer *x = NULL;
    if (c == NULL) {
        return;
    }
    if ((x = find(&c->active, j)) != NULL) {
        curl_multi_remove_handle(c->multi, x->e);
    } else if ((x = find(&c->waiting, j)) == NULL) {
        return;
    }
    xlist_unlink(x);
    finish(c, x, SLUICE_RETRY, NULL);
}

static const sluice__http_ops http_ops = {client_start,    client_close, client_stopping,
                                          client_dispatch, client_held,  client_abandon};

/* ---- the target ---- */

void sluice_http_options_init_sized(sluice_http_options *o, size_t size) {
    sluice_http_options d;
    memset(&d, 0, sizeof(d));
    d.connect_timeout_ms = CONNECT_DEFAULT;
    sluice__options_give(o, size, &d, sizeof(d));
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_init_rc;

static void curl_init(void) {
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

/* Checks the URL (http or https, a host, no credentials) and fills target and origin. */
static int parse_url(sluice_http *h, const char *url, char *err, size_t errlen) {
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL, *pass = NULL;
    int rc = -1;
    if (u == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0' ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
        snprintf(err, errlen, "\"%.200s\" is not an http://HOST[:PORT]/PATH or https:// URL", url);
    } else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
               curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK) {
        snprintf(err, errlen,
                 "the URL holds a user or password: send credentials as a header from a file "
                 "(--http-header-file) instead");
    } else if (strlen(host) + strlen(port) + 12 > TARGET_MAX) {
        snprintf(err, errlen, "the URL's host is too long");
    } else {
        for (char *p = host; *p != '\0'; p++) {
            *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        }
        snprintf(h->target, sizeof(h->target), "%s:%s", host, port);
        snprintf(h->origin, sizeof(h->origin), "%s://%s:%s", scheme, host, port);
        rc = 0;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(user);
    curl_free(pass);
    curl_url_cleanup(u);
    return rc;
}

static int add_static_headers(sluice_http *h, const sluice_http_options *o, char *err,
                              size_t errlen) {
    for (size_t i = 0; i < o->nheaders; i++) {
        if (o->headers[i] == NULL || sluice__http_header_check(o->headers[i], err, errlen) != 0) {
            if (o->headers[i] == NULL) {
                snprintf(err, errlen, "header %zu is NULL", i);
            }
            return SLUICE_EINVAL;
        }
        struct curl_slist *l = curl_slist_append(h->headers, o->headers[i]);
        if (l == NULL) {
            return SLUICE_ENOMEM;
        }
        h->headers = l;
    }
    /* no "Expect: 100-continue" round trip before a larger body */
    struct curl_slist *l = curl_slist_append(h->headers, "Expect:");
    if (l == NULL) {
        return SLUICE_ENOMEM;
    }
    h->headers = l;
    return 0;
}

int sluice_http_new(const sluice_http_options *in, sluice_http **out, char *err, size_t errlen) {
    char ebuf[256];
    sluice_http_options o;
    sluice_http_options_init(&o);
    sluice__options_take(&o, sizeof(o), in);
    *out = NULL;
    if (err == NULL) {
        err = ebuf;
        errlen = sizeof(ebuf);
    }
    if (o.url == NULL) {
        snprintf(err, errlen, "no URL given");
        return SLUICE_EINVAL;
    }
    if (o.connect_timeout_ms < 0 || o.connect_timeout_ms > 86400000) {
        snprintf(err, errlen, "connect timeout ms %d is out of range 0..86400000",
                 o.connect_timeout_ms);
        return SLUICE_EINVAL;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != 0) {
        snprintf(err, errlen, "libcurl failed to initialise");
        return SLUICE_ENOMEM;
    }
    sluice_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return SLUICE_ENOMEM;
    }
    h->ops = &http_ops;
    pthread_mutex_init(&h->mu, NULL);
    h->follow = o.follow_redirects != 0;
    h->connect_timeout_ms = o.connect_timeout_ms > 0 ? o.connect_timeout_ms : CONNECT_DEFAULT;
    int rc = SLUICE_EINVAL;
    if (parse_url(h, o.url, err, errlen) != 0) {
        goto fail;
    }
    if (o.sign_secret != NULL && o.sign_secret[0] != '\0' &&
        sluice__webhook_secret(o.sign_secret, h->key, sizeof(h->key), &h->keylen, err, errlen) !=
            0) {
        goto fail;
    }
    if (o.ca_file != NULL && access(o.ca_file, R_OK) != 0) {
        snprintf(err, errlen, "CA file \"%.200s\" cannot be read", o.ca_file);
        goto fail;
    }
    if ((rc = add_static_headers(h, &o, err, errlen)) != 0) {
        goto fail;
    }
    rc = SLUICE_ENOMEM;
    h->url = strdup(o.url);
    h->ca_file = o.ca_file != NULL ? strdup(o.ca_file) : NULL;
    if (h->url == NULL || (o.ca_file != NULL && h->ca_file == NULL)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    *out = h;
    return 0;
fail:
    sluice_http_free(h);
    return rc;
}

void sluice_http_free(sluice_http *h) {
    if (h == NULL) {
        return;
    }
    curl_slist_free_all(h->headers);
    free(h->url);
    free(h->ca_file);
    memset(h->key, 0, sizeof(h->key));
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void sluice_http_get_stats(const sluice_http *h, sluice_http_stats *s) {
    sluice_http *m = (sluice_http *)h; /* atomic loads of a const object */
    s->ok = atomic_load(&m->counts[SLUICE__HTTP_OK]);
    s->throttled = atomic_load(&m->counts[SLUICE__HTTP_THROTTLED]);
    s->server_error = atomic_load(&m->counts[SLUICE__HTTP_SERVER_ERROR]);
    s->rejected = atomic_load(&m->counts[SLUICE__HTTP_REJECTED]);
    s->redirect = atomic_load(&m->counts[SLUICE__HTTP_REDIRECT]);
    s->connect_error = atomic_load(&m->counts[SLUICE__HTTP_CONNECT_ERROR]);
    s->tls_error = atomic_load(&m->counts[SLUICE__HTTP_TLS_ERROR]);
    s->timeout = atomic_load(&m->counts[SLUICE__HTTP_TIMEOUT]);
    s->holds = atomic_load(&m->holds);
    s->held_ms = atomic_load(&m->held_ms);
}
