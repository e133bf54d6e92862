/* SPDX-License-Identifier: MIT */
/*
 * url.h - Redis server addresses.
 *
 * Parses `redis://[user[:password]@]host[:port][/db]` (IPv6 hosts in brackets) and
 * `unix:///path/to/socket[?db=N]` (user and password as in `unix://user:pass@/path`), and the
 * Redis Cluster form `redis+cluster://[user[:password]@]host[:port][,host[:port]...]`: up to
 * SLUICE_URL_SEEDS_MAX seed nodes, db 0 only (a cluster has no other). `rediss://` and
 * `rediss+cluster://` are the same over TLS (is_tls). Sentinel:
 * `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/MASTER[?options]` (and
 * `rediss+sentinel://` over TLS to sentinels and data nodes): up to SLUICE_URL_SEEDS_MAX
 * sentinels (default port 26379) in `seeds`, the master's name, and the query options `db=N`,
 * `sentinel_user=U` and `sentinel_password=P` (credentials of the sentinels when they differ
 * from the data nodes'). Pure: no I/O, no allocation. No password (sentinel_password included)
 * ever appears in sluice_url_redact()'s output, which is what logs and error messages use.
 * Thread-safe: no state (sluice_url_default reads the environment once per call). Errors:
 * SLUICE_EINVAL with a message naming the bad part.
 */
#ifndef SLUICE_URL_H
#define SLUICE_URL_H

#include <stddef.h>

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_DEFAULT_REDIS_URL "redis://127.0.0.1:6379"
#define SLUICE_URL_MAX           1024 /* bytes, whole URL */
#define SLUICE_URL_SEEDS_MAX     16   /* seed nodes of a cluster URL, sentinels of a sentinel URL */
#define SLUICE_SENTINEL_PORT     26379 /* default port of a sentinel in a redis+sentinel:// URL */

/* One seed node of a cluster URL, or one sentinel of a sentinel URL. */
typedef struct sluice_url_seed {
    char host[256]; /* hostname or IP literal, without brackets */
    int port;       /* 1..65535, default 6379 */
} sluice_url_seed;

typedef struct sluice_url {
    int is_unix;        /* 1: `path` is a unix socket; 0: host/port */
    char host[256];     /* hostname or IP literal, without brackets */
    int port;           /* 1..65535, default 6379 */
    char path[108];     /* unix socket path (sun_path limit) */
    char user[128];     /* ACL user, "" = none (default user) */
    char password[256]; /* "" = no AUTH */
    int db;             /* 0..15 by default convention; 0..INT_MAX accepted */
    int is_cluster;     /* 1: redis+cluster://; host/port are then the first seed */
    int nseeds;         /* cluster/sentinel: 1..SLUICE_URL_SEEDS_MAX in `seeds`; else 0 */
    sluice_url_seed seeds[SLUICE_URL_SEEDS_MAX];
    /* since 1.0 (SONAME 1): TLS and Sentinel */
    int is_tls;              /* 1: rediss://, rediss+cluster:// or rediss+sentinel:// */
    int is_sentinel;         /* 1: redis(s)+sentinel://; host/port are then the first sentinel */
    char master_name[256];   /* sentinel: the monitored master's name (percent-decoded) */
    int sentinel_auth;       /* 1: sentinel_user or sentinel_password was given: the sentinels
                                use those (empty = no AUTH); 0: they use user and password */
    char sentinel_user[128]; /* ?sentinel_user=, percent-decoded */
    char sentinel_password[256]; /* ?sentinel_password=, percent-decoded; never shown */
} sluice_url;

/*
 * Parses `s` into `out`. Returns 0, or SLUICE_EINVAL with a message naming the bad part written
 * to `err` (may be NULL). Percent-escapes (%XX) are decoded in user and password. In redis://
 * URLs the credentials end at the last '@', in unix:// URLs at the first "@/". Messages never
 * contain the user or password; on error *out is all zero.
 */
SLUICE_API int sluice_url_parse(sluice_url *out, const char *s, char *err, size_t errlen);

/* Writes the URL with any password (sentinel_password too) replaced by "***" into buf (always
 * NUL-terminated). */
SLUICE_API void sluice_url_redact(const sluice_url *u, char *buf, size_t len);

/*
 * Whether this build of sluice can connect to `u`: 0, or SLUICE_EINVAL with a message in `err`
 * (may be NULL) naming what is missing. Every place that turns a parsed URL into a connection
 * checks it first, so such a URL fails with that message instead of reaching a server the wrong
 * way. The blocking connection (sluice_conn) takes every form this parser accepts (TLS, a
 * cluster or Sentinel, and both together); the async one (sluice_aconn) checks what it can
 * reach itself (sluice_aconn_new returns NULL for the rest). Pure, thread-safe.
 */
SLUICE_API int sluice_url_supported(const sluice_url *u, char *err, size_t errlen);

/* The URL to use when none is given: $SLUICE_REDIS_URL if set and non-empty, else the default. */
SLUICE_API const char *sluice_url_default(void);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_URL_H */
