/* SPDX-License-Identifier: MIT */
/*
 * lua.h - the embedded function library (built from scripts/lua/) and how a connection decides
 * what to load. Internal to sluice: the blocking (conn_node.c) and async (uvredis_link.c)
 * connections use it, and the tests check how it cuts the library for EVALSHA mode. Pure: no I/O.
 * Thread-safe (sluice_lua_version fills a static buffer once; call it before starting threads if in
 * doubt).
 */
#ifndef SLUICE_LUA_H
#define SLUICE_LUA_H

#include <stddef.h>

#include <hiredis/hiredis.h>

#include "sluice/redis.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library text as loaded with FUNCTION LOAD, and the stand-alone script text EVALSHA mode
 * uses for one function: the modules it needs (its "-- @needs" line; all but the first inside
 * `local <local> = (function() ... return <local> end)()`, see scripts.c), then
 * `return entry(<local>)(KEYS, ARGV)` (malloc'ed, caller frees; NULL for an unknown fn, a
 * library without its needs, or when out of memory). */
const char *sluice_lua_library(size_t *len);
char *sluice_lua_script(sluice_fn fn, size_t *len);

/* The version sluice_version returns for this build's library: "1:<hash of the source>". */
const char *sluice_lua_version(void);

/* What a connection does after asking the server FCALL sluice_version 0. */
typedef enum sluice_lua_action {
    SLUICE_LUA_USE = 0,  /* call the functions the server has (current, or we may not load) */
    SLUICE_LUA_LOAD = 1, /* FUNCTION LOAD REPLACE the embedded library, then call */
    SLUICE_LUA_EVAL = 2, /* no functions on this server (Redis < 7): EVALSHA scripts */
    SLUICE_LUA_FAIL = 3, /* the probe failed for another reason: the connection fails */
} sluice_lua_action;

/*
 * The one rule both connections follow, from the probe's status (0 or the mapped error) and
 * reply (may be NULL after an I/O error): an unknown FCALL means EVALSHA mode; the exact
 * version of this build means use; a user without the right to call or load (NOPERM) uses what
 * is there and lets the calls report; a missing or different library is loaded unless
 * `no_load`; any other error fails the handshake.
 */
sluice_lua_action sluice_lua_probe(int status, const redisReply *r, int no_load);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_LUA_H */
