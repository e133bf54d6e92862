/* SPDX-License-Identifier: MIT */
/*
 * reply.c - reading Redis replies (see sluice/reply.h): error replies mapped to statuses.
 *
 * Redis prefixes every error with a code word ("NOPERM", "OOM", ...); errors raised inside a
 * function carry the code of the command that failed. Anything without a known code is EREDIS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/reply.h"
#include "sluice/status.h"

static int has_prefix(const char *s, size_t len, const char *p) {
    size_t n = strlen(p);
    return len >= n && memcmp(s, p, n) == 0;
}

static int contains(const char *s, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; n <= len && i <= len - n; i++) {
        if (memcmp(s + i, needle, n) == 0) {
            return 1;
        }
    }
    return 0;
}

int sluice_reply_error_status(const char *str, size_t len) {
    static const struct {
        const char *prefix;
        int status;
    } map[] = {
        {"NOSCRIPT", SLUICE_ENOSCRIPT},
        {"NOPERM", SLUICE_ENOPERM},
        {"WRONGPASS", SLUICE_EAUTH},
        {"NOAUTH", SLUICE_EAUTH},
        {"OOM", SLUICE_EOOM},
        {"MISCONF", SLUICE_EMISCONF},
        {"BUSY", SLUICE_EBUSY},
        {"WRONGTYPE", SLUICE_EWRONGTYPE},
        {"LOADING", SLUICE_ELOADING},
        {"READONLY", SLUICE_EREADONLY},
        {"MASTERDOWN", SLUICE_ECONN},
        {"NOGROUP", SLUICE_ENOTFOUND},
        {"SLUICECONFIG", SLUICE_ECONFIG},
        /* a migration the call could not be served through (TRYAGAIN; an ASK not followed) */
        {"TRYAGAIN", SLUICE_EMIGRATING},
        {"ASK ", SLUICE_EMIGRATING},
    };
    if (str == NULL) {
        return SLUICE_EREDIS;
    }
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (has_prefix(str, len, map[i].prefix)) {
            return map[i].status;
        }
    }
    /* FCALL of a function the server does not have: it lost the library. */
    if (has_prefix(str, len, "ERR") && contains(str, len, "unction not found")) {
        return SLUICE_ENOSCRIPT;
    }
    /* Redis 7.0 refusing a command inside a function: "ERR The user executing the script can't
     * run this command or subcommand" */
    if (contains(str, len, "no permissions") || contains(str, len, "NOPERM") ||
        contains(str, len, "can't run this command")) {
        return SLUICE_ENOPERM;
    }
    return SLUICE_EREDIS;
}

int sluice_reply_unknown_command(const redisReply *r) {
    return r != NULL && r->type == REDIS_REPLY_ERROR && r->str != NULL &&
           contains(r->str, r->len, "unknown command");
}

long long sluice_reply_ll(const redisReply *r, long long dflt) {
    if (r == NULL) {
        return dflt;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        return r->integer;
    }
    if ((r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) || r->len == 0 ||
        r->len > 20) {
        return dflt;
    }
    char *end;
    errno = 0;
    long long v = strtoll(r->str, &end, 10);
    return errno == 0 && end == r->str + r->len ? v : dflt;
}

const redisReply *sluice_reply_field(const redisReply *r, const char *name) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        return NULL;
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const redisReply *k = r->element[i];
        if ((k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS) &&
            strcmp(k->str, name) == 0) {
            return r->element[i + 1];
        }
    }
    return NULL;
}

const redisReply *sluice_reply_entry_field(const redisReply *e, const char *name) {
    if (e == NULL || e->type != REDIS_REPLY_ARRAY || e->elements != 2) {
        return NULL;
    }
    const redisReply *v = sluice_reply_field(e->element[1], name);
    return v != NULL && v->type == REDIS_REPLY_STRING ? v : NULL;
}

int sluice_reply_replay_ok(const redisReply *r, size_t n) {
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 7 ||
        r->element[6]->type != REDIS_REPLY_ARRAY || r->element[6]->elements != n) {
        return 0;
    }
    for (size_t i = 0; i < 6; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER) {
            return 0;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *o = r->element[6]->element[i];
        if (o->type != REDIS_REPLY_INTEGER || o->integer < 0 || o->integer > 3) {
            return 0;
        }
    }
    return 1;
}
