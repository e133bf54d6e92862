/* SPDX-License-Identifier: MIT */
/*
 * client.h - what every sluice client (blocking producer, async producer, limiter) does with
 * its user's options before it connects: the Redis URL and the connection options, in one
 * place. Internal to sluice; pure, thread-safe.
 */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include <stddef.h>

#include "sluice/redis.h"
#include "sluice/url.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The URL (NULL = $SLUICE_REDIS_URL, else redis://127.0.0.1:6379) parsed into *url, and *co
 * filled with the defaults and the given values (0 = default; `name` for log lines, borrowed).
 * Returns 0 or SLUICE_EINVAL with a message naming the bad URL in err. */
int sluice_client_setup(const char *redis_url, int connect_timeout_ms, int command_timeout_ms,
                        int force_eval, const char *name, sluice_url *url, sluice_conn_options *co,
                        char *err, size_t errlen);

/* Copies the tls_* fields of `tls` (NULL: none) into *co: the TLS options a client's user gave
 * in its own options struct. */
void sluice__client_tls(sluice_conn_options *co, const sluice_conn_options *tls);

/* sluice_url_supported for a client on the async connection (sluice_aconn), which does not
 * speak TLS (rediss://) nor follow redis+sentinel:// yet: 0 or SLUICE_EINVAL with the reason in
 * err. */
int sluice_client_async_supported(const sluice_url *url, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_CLIENT_H */
