/* SPDX-License-Identifier: MIT */
/*
 * sentinel.h - what both Sentinel routers (the blocking conn_sentinel.c and the async
 * uvredis_sentinel.c) decide about the sentinels' answers, without I/O: the credentials the
 * sentinels get, the reply to SENTINEL GET-MASTER-ADDR-BY-NAME, the reply to ROLE, a reply that
 * says a server is no longer the primary, the +switch-master message, and the one error line of
 * a round in which no sentinel named the primary.
 *
 * Owns: those decisions and their messages. Does not own: connections, deadlines, retries.
 * Internal to sluice; pure, so unit-tested without a server (tests/unit/test_sentinel.c).
 */
#ifndef SLUICE_SENTINEL_H
#define SLUICE_SENTINEL_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "sluice/url.h"

/* What one sentinel answered (SLUICE_SENTINEL_DOWN: no answer at all, decided by the caller). */
enum {
    SLUICE_SENTINEL_FOUND = 0, /* it named an address */
    SLUICE_SENTINEL_DOWN,      /* not reachable, or the connection broke */
    SLUICE_SENTINEL_UNKNOWN,   /* it does not monitor the master name */
    SLUICE_SENTINEL_REFUSED,   /* an error reply, or an answer that is no address */
};

/* The credentials for the sentinels into `auth` (user and password only): the URL's
 * sentinel_user / sentinel_password when given, else its user and password. */
void sluice__sentinel_auth(const sluice_url *u, sluice_url *auth);

/* The reply to SENTINEL GET-MASTER-ADDR-BY-NAME: SLUICE_SENTINEL_FOUND with the address in
 * host (hostlen bytes) and *port, or UNKNOWN / REFUSED with the reason in why. */
int sluice__sentinel_addr_reply(const redisReply *r, char *host, size_t hostlen, int *port,
                                char *why, size_t whylen);

/* The reply to ROLE from `addr` (HOST:PORT, for the message): 0 when it says master, 1 when it
 * says anything else (the reason, naming addr and `where`, in why). */
int sluice__sentinel_role_reply(const redisReply *r, const char *where, const char *addr, char *why,
                                size_t whylen);

/* 1 when a call's error reply (status st) says the server is no longer the primary (READONLY,
 * -REDIRECT, or a blocked call released with "UNBLOCKED ... (master -> replica?)"): the call
 * did not run there. */
int sluice__sentinel_not_primary(int st, const redisReply *r);

/* A +switch-master message "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT": 1 when it is about `master`
 * (the new address in host and *port), 0 when about another master, -1 when malformed. */
int sluice__sentinel_switch_parse(const char *msg, size_t len, const char *master, char *host,
                                  size_t hostlen, int *port);

/* The answers of one round of asking, for its error line. */
typedef struct sluice__sentinel_round {
    int asked, down, unknown;
    size_t used;
    char all[400]; /* "HOST:PORT: why; ..." */
} sluice__sentinel_round;

/* Records what `seed` answered (res, why) in the round. */
void sluice__sentinel_round_add(sluice__sentinel_round *rd, const sluice_url_seed *seed, int res,
                                const char *why);

/* The round found no primary: "WHERE: no sentinel reachable|master name unknown to the
 * sentinels|no sentinel named the primary for master 'M' (answers)" into err. Returns
 * SLUICE_ENOTFOUND when every sentinel that answered did not know the name, else
 * SLUICE_ECONN. */
int sluice__sentinel_round_fail(const sluice__sentinel_round *rd, const char *where,
                                const char *master, char *err, size_t errlen);

#endif
