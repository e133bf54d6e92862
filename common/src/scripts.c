/* SPDX-License-Identifier: MIT */
/*
 * scripts.c - the embedded Lua library (built from scripts/lua/) and the names of its functions.
 *
 * FUNCTION LOAD takes the library as it is. For servers without functions (or when forced),
 * each function is also available as a stand-alone script for EVALSHA: the modules it needs (the
 * "-- @needs <local>:" line of the register module; each module starts at its "-- @module NAME"
 * line, written by the build, and a module may be cut in parts by more such lines in its file:
 * base_fields, base_keys, base_slots, limiter_refund), in that order, plus
 * `return entry(<local>)(KEYS, ARGV)`. Base and its parts stand at the chunk's level and the
 * others inside one function, `local <local> = (function() ... return <local> end)()`: an
 * EVALSHA call makes every closure and table of the script again (Redis keeps nothing a script
 * makes between calls), so a script carries only the parts its function reaches, and a closure
 * made in the chunk looks each chunk-level local it uses up in a list of the chunk's captured
 * locals (as long as the script has them), where one made inside that function copies base's
 * locals from the function's own upvalues.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/lua.h"
#include "sluice/reply.h"
#include "sluice/status.h"

extern const char sluice__lua_library[];
extern const size_t sluice__lua_library_len;

static const struct {
    const char *name;  /* as registered */
    const char *local; /* the Lua local it calls */
} fns[SLUICE_FN_COUNT_] = {
    [SLUICE_FN_ADMIT] = {"sluice_admit", "admit"},
    [SLUICE_FN_ACK] = {"sluice_ack", "ack"},
    [SLUICE_FN_DEAD] = {"sluice_dead", "dead"},
    [SLUICE_FN_RETRY] = {"sluice_retry", "retry"},
    [SLUICE_FN_RECLAIM] = {"sluice_reclaim", "drain_reclaim"},
    [SLUICE_FN_TOUCH] = {"sluice_touch", "touch"},
    [SLUICE_FN_LIST_ADMIT] = {"sluice_list_admit", "list_admit"},
    [SLUICE_FN_LIST_TAKE] = {"sluice_list_take", "list_take"},
    [SLUICE_FN_LIST_ACK] = {"sluice_list_ack", "list_ack"},
    [SLUICE_FN_LIST_DEAD] = {"sluice_list_dead", "list_dead"},
    [SLUICE_FN_LIST_RECOVER] = {"sluice_list_recover", "list_recover"},
    [SLUICE_FN_VERSION] = {"sluice_version", "version"},
    [SLUICE_FN_REPLAY] = {"sluice_replay", "replay"},
    [SLUICE_FN_LIST_REPLAY] = {"sluice_list_replay", "list_replay"},
    [SLUICE_FN_PRUNE] = {"sluice_prune", "prune"},
    [SLUICE_FN_GROUP] = {"sluice_group", "group"},
    [SLUICE_FN_LIMIT] = {"sluice_limit", "limit"},
    [SLUICE_FN_ADMIT2] = {"sluice_admit2", "admit2"},
    [SLUICE_FN_LIST_ADMIT2] = {"sluice_list_admit2", "list_admit2"},
    [SLUICE_FN_LIMITS_CONFIG] = {"sluice_limits_config", "limits_config"},
    [SLUICE_FN_TAKE] = {"sluice_take", "take"},
    [SLUICE_FN_FAIR_TAKE] = {"sluice_fair_take", "fair_take"},
    [SLUICE_FN_LANE_ACK] = {"sluice_lane_ack", "lane_ack"},
    [SLUICE_FN_LANE_RECLAIM] = {"sluice_lane_reclaim", "lane_reclaim"},
    [SLUICE_FN_FAIR_CONFIG] = {"sluice_fair_config", "fair_config"},
    [SLUICE_FN_CLEAR] = {"sluice_clear", "clear"},
    [SLUICE_FN_LIST_CLEAR] = {"sluice_list_clear", "list_clear"},
    [SLUICE_FN_FAIR_GRANT] = {"sluice_fair_grant", "fair_grant"},
    [SLUICE_FN_FAIR_REFUND] = {"sluice_fair_refund", "fair_refund"},
};

const char *sluice_fn_name(sluice_fn fn) {
    if ((unsigned)fn >= SLUICE_FN_COUNT_) {
        return "sluice_unknown";
    }
    return fns[fn].name;
}

const char *sluice_lua_library(size_t *len) {
    if (len != NULL) {
        *len = sluice__lua_library_len;
    }
    return sluice__lua_library;
}

const char *sluice_lua_version(void) {
    static char version[64];
    if (version[0] == '\0') {
        const char *v = strstr(sluice__lua_library, "local VERSION = '");
        if (v != NULL) {
            v += strlen("local VERSION = '");
            size_t n = strcspn(v, "'");
            snprintf(version, sizeof(version), "%.*s", (int)(n < 63 ? n : 63), v);
        }
    }
    return version;
}

/* The text of module `name` (length n) in the library: from its "-- @module NAME" line to the
 * next module's, or NULL. */
static const char *lua_module(const char *name, size_t n, size_t *mlen) {
    static const char mark[] = "\n-- @module ";
    const char *lib = sluice__lua_library;
    for (const char *m = strstr(lib, mark); m != NULL; m = strstr(m + 1, mark)) {
        const char *at = m + strlen(mark);
        if (strncmp(at, name, n) == 0 && at[n] == '\n') {
            const char *end = strstr(at, mark);
            *mlen = end != NULL ? (size_t)(end - m) : strlen(m);
            return m + 1;
        }
    }
    return NULL;
}

/* Calls each(text, len, ud) for every module fn needs, in the order of its "-- @needs" line;
 * returns -1 when the line or a module is missing, else 0. */
static int lua_needs(sluice_fn fn, void (*each)(const char *, size_t, void *), void *ud) {
    char line[64];
    snprintf(line, sizeof(line), "\n-- @needs %s:", fns[fn].local);
    const char *p = strstr(sluice__lua_library, line);
    if (p == NULL) {
        return -1;
    }
    p += strlen(line);
    const char *eol = strchr(p, '\n');
    while (eol != NULL && p < eol) {
        p += strspn(p, " ");
        size_t n = strcspn(p, " \n");
        size_t mlen = 0;
        const char *m = n > 0 ? lua_module(p, n, &mlen) : NULL;
        if (n > 0 && m == NULL) {
            return -1;
        }
        if (m != NULL) {
            each(m, mlen, ud);
        }
        p += n;
    }
    return eol != NULL ? 0 : -1;
}

struct lua_out {
    char *buf; /* NULL: only count */
    size_t n;
    const char *open; /* written before the first module not of base */
    int opened;       /* whether open was written */
};

static void lua_write(struct lua_out *o, const char *text, size_t len) {
    if (o->buf != NULL) {
        memcpy(o->buf + o->n, text, len);
    }
    o->n += len;
}

/* Whether a module's text ("-- @module NAME\n...") is base or one of its parts (base_NAME). */
static int lua_is_base(const char *text) {
    const char *name = text + strlen("-- @module ");
    return strncmp(name, "base", 4) == 0 && (name[4] == '\n' || name[4] == '_');
}

static void lua_append(const char *text, size_t len, void *ud) {
    struct lua_out *o = ud;
    if (!o->opened && !lua_is_base(text)) {
        lua_write(o, o->open, strlen(o->open));
        o->opened = 1;
    }
    lua_write(o, text, len);
}

char *sluice_lua_script(sluice_fn fn, size_t *len) {
    if ((unsigned)fn >= SLUICE_FN_COUNT_) {
        return NULL;
    }
    char open[64];
    snprintf(open, sizeof(open), "local %s = (function()\n", fns[fn].local);
    struct lua_out o = {NULL, 0, open, 0};
    if (lua_needs(fn, lua_append, &o) != 0) {
        return NULL;
    }
    if (!o.opened) {
        o.n += strlen(open); /* a function of base alone: its wrapper is empty */
    }
    size_t cap = o.n + 64 + 2 * strlen(fns[fn].local);
    o.buf = malloc(cap);
    if (o.buf == NULL) {
        return NULL;
    }
    o.n = 0;
    o.opened = 0;
    lua_needs(fn, lua_append, &o);
    if (!o.opened) {
        lua_write(&o, open, strlen(open));
    }
    int tail = snprintf(o.buf + o.n, cap - o.n, "return %s\nend)()\nreturn entry(%s)(KEYS, ARGV)\n",
                        fns[fn].local, fns[fn].local);
    if (len != NULL) {
        *len = o.n + (size_t)tail;
    }
    return o.buf;
}

sluice_lua_action sluice_lua_probe(int status, const redisReply *r, int no_load) {
    if (sluice_reply_unknown_command(r)) {
        return SLUICE_LUA_EVAL;
    }
    if (status == 0 && r != NULL && r->type == REDIS_REPLY_STRING &&
        strcmp(r->str, sluice_lua_version()) == 0) {
        return SLUICE_LUA_USE;
    }
    if (status == SLUICE_ENOPERM) {
        return SLUICE_LUA_USE; /* a restricted user: the calls themselves say what is wrong */
    }
    if (status != 0 && status != SLUICE_ENOSCRIPT) {
        return SLUICE_LUA_FAIL;
    }
    return no_load ? SLUICE_LUA_USE : SLUICE_LUA_LOAD;
}
