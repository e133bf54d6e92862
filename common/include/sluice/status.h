/* SPDX-License-Identifier: MIT */
/*
 * status.h - the one table of sluice status codes.
 *
 * Every fallible sluice call returns 0 on success or one of the negative codes below. The table
 * generates both the enum and sluice_strerror()/sluice_err_name(), the way libuv's errno map
 * does. Detail about the last failure (the Redis error text, the offending value) lives on the
 * handle that failed, e.g. sluice_producer_errstr(). Every function here is pure and
 * thread-safe (the strings are static).
 */
#ifndef SLUICE_STATUS_H
#define SLUICE_STATUS_H

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, code, message) */
#define SLUICE_STATUS_MAP(XX)                                                                      \
    XX(EINVAL, -1, "invalid argument")                                                             \
    XX(ENOMEM, -2, "out of memory")                                                                \
    XX(ETOOBIG, -3, "too large")                                                                   \
    XX(EDECODE, -4, "malformed envelope")                                                          \
    XX(ECONN, -5, "redis unavailable")                                                             \
    XX(ETIMEDOUT, -6, "timed out")                                                                 \
    XX(EUNKNOWN, -7, "outcome unknown: may or may not be done")                                    \
    XX(EAUTH, -8, "redis authentication failed")                                                   \
    XX(ENOPERM, -9, "not permitted by the redis ACL")                                              \
    XX(EOOM, -10, "redis is out of memory")                                                        \
    XX(EMISCONF, -11, "redis cannot persist to disk (MISCONF)")                                    \
    XX(EBUSY, -12, "redis is busy running a script")                                               \
    XX(EWRONGTYPE, -13, "a sluice key holds the wrong type")                                       \
    XX(EPROTO, -14, "unexpected reply from redis")                                                 \
    XX(EREDIS, -15, "redis returned an error")                                                     \
    XX(ECANCELED, -16, "canceled")                                                                 \
    XX(ENOSCRIPT, -17, "sluice functions are not loaded on the server")                            \
    XX(ELOADING, -18, "redis is loading its dataset")                                              \
    XX(EREADONLY, -19, "redis is a read-only replica")                                             \
    XX(ENOTFOUND, -20, "not found")                                                                \
    XX(ECONFIG, -21, "invalid queue setting in redis")                                             \
    XX(ECLUSTER, -22, "the server's cluster mode does not match the URL")                          \
    XX(EMIGRATING, -23, "the queue's cluster slot is being migrated to another node")              \
    XX(ETLS, -24, "TLS handshake or certificate verification failed")

typedef enum sluice_status {
    SLUICE_OK = 0,
#define SLUICE_STATUS_ENUM(name, code, msg) SLUICE_##name = (code),
    SLUICE_STATUS_MAP(SLUICE_STATUS_ENUM)
#undef SLUICE_STATUS_ENUM
} sluice_status;

/* A static, human-readable message for a status code; "unknown status" for anything else. */
SLUICE_API const char *sluice_strerror(int status);

/* The symbolic name ("ETIMEDOUT"), "OK" for 0; "EUNKNOWNSTATUS" for anything else. */
SLUICE_API const char *sluice_err_name(int status);

/* Non-zero when retrying the same call later may succeed (connection, timeout, busy, loading,
 * OOM, MISCONF). EUNKNOWN is retryable only with an idempotency key, so this returns 0 for it
 * and leaves that decision to the caller. */
SLUICE_API int sluice_status_is_transient(int status);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_STATUS_H */
