/* SPDX-License-Identifier: MIT */
/*
 * url.h - Redis server addresses.
 *
 * Parses `redis://[user[:password]@]host[:port][/db]` (IPv6 hosts in brackets) and
 * `unix:///path/to/socket[?db=N]` (user and password as in `unix://user:pass@/path`), and the
 * Redis Cluster form `redis+cluster://[user[:password]@]host[:port][,host[:port]...]`: up to
 * SLUICE_URL_SEEDS_MAX seed nodes, db 0 only (a cluster has no other). Pure: no
 * I/O, no allocation. The password never appears in sluice_url_redact()'s output, which is what
 * logs and error messages use. Thread-safe: no state (sluice_url_default reads the
 * environment once per call). Errors: SLUICE_EINVAL with a message naming the bad part.
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
#define SLUICE_URL_SEEDS_MAX     16   /* seed nodes of a redis+cluster:// URL */

/* One seed node of a cluster URL. */
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
    int nseeds;         /* cluster: 1..SLUICE_URL_SEEDS_MAX seeds in `seeds`; else 0 */
    sluice_url_seed seeds[SLUICE_URL_SEEDS_MAX];
} sluice_url;

/*
 * Parses `s` into `out`. Returns 0, or SLUICE_EINVAL with a message naming the bad part written
 * to `err` (may be NULL). Percent-escapes (%XX) are decoded in user and password. In redis://
 * URLs the credentials end at the last '@', in unix:// URLs at the first "@/". Messages never
 * contain the user or password; on error *out is all zero.
 */
SLUICE_API int sluice_url_parse(sluice_url *out, const char *s, char *err, size_t errlen);

/* Writes the URL with any password replaced by "***" into buf (always NUL-terminated). */
SLUICE_API void sluice_url_redact(const sluice_url *u, char *buf, size_t len);

/* The URL to use when none is given: $SLUICE_REDIS_URL if set and non-empty, else the default. */
SLUICE_API const char *sluice_url_default(void);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_URL_H */
