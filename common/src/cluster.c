/* SPDX-License-Identifier: MIT */
/*
 * cluster.c - Redis Cluster routing without I/O (see sluice/cluster.h): CRC16 and hash tags,
 * the key of a command, the slot map from CLUSTER SHARDS / CLUSTER SLOTS, and redirections.
 *
 * Every reply is read defensively: a field of the wrong type or a slot out of range makes the
 * whole reply unusable (EPROTO), never a half-built map.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sluice/cluster.h"
#include "sluice/reply.h"
#include "sluice/status.h"

uint16_t sluice__crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
        }
    }
    return crc;
}

int sluice__cluster_key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close != NULL && close > open + 1) {
            key = open + 1;
            len = (size_t)(close - open - 1);
        }
    }
    return sluice__crc16(key, len) & (SLUICE_CLUSTER_SLOTS - 1);
}

/* ---- which key routes a command ---- */

static size_t arg_len(const char **argv, const size_t *lens, int i) {
    return lens != NULL ? lens[i] : strlen(argv[i]);
}

static int arg_is(const char **argv, const size_t *lens, int i, const char *name) {
    size_t n = strlen(name);
    return arg_len(argv, lens, i) == n && strncasecmp(argv[i], name, n) == 0;
}

static int arg_in(const char **argv, const size_t *lens, int i, const char *const *names) {
    for (; *names != NULL; names++) {
        if (arg_is(argv, lens, i, *names)) {
            return 1;
        }
    }
    return 0;
}

/* Commands without keys: they may go to any node. */
static const char *const keyless[] = {
    "PING",      "TIME",     "INFO",      "MULTI",     "EXEC",         "DISCARD", "FUNCTION",
    "SCRIPT",    "CLUSTER",  "CLIENT",    "CONFIG",    "SCAN",         "DBSIZE",  "AUTH",
    "SELECT",    "HELLO",    "ECHO",      "COMMAND",   "DEBUG",        "ROLE",    "WAIT",
    "ASKING",    "READONLY", "READWRITE", "FLUSHALL",  "FLUSHDB",      "SLOWLOG", "LATENCY",
    "ACL",       "PUBLISH",  "KEYS",      "RANDOMKEY", "LASTSAVE",     "SAVE",    "BGSAVE",
    "SHUTDOWN",  "MONITOR",  "QUIT",      "RESET",     "UNWATCH",      "MODULE",  "FAILOVER",
    "REPLICAOF", "SLAVEOF",  "PUBSUB",    "SWAPDB",    "BGREWRITEAOF", NULL};

/* SUBCOMMAND key ...: the key is argv[2] (HELP and the like have none). */
static const char *const sub_then_key[] = {"XINFO", "XGROUP", "OBJECT", "MEMORY", NULL};

static const char *const scripted[] = {"FCALL",   "FCALL_RO",   "EVAL", "EVAL_RO",
                                       "EVALSHA", "EVALSHA_RO", NULL};

int sluice__cluster_command_key(int argc, const char **argv, const size_t *lens) {
    if (argc < 2 || arg_in(argv, lens, 0, keyless)) {
        return -1;
    }
    if (arg_in(argv, lens, 0, scripted)) {
        /* VERB target numkeys key...: keyless when numkeys is 0 */
        return argc > 3 && !(arg_len(argv, lens, 2) == 1 && argv[2][0] == '0') ? 3 : -1;
    }
    if (arg_is(argv, lens, 0, "XREAD") || arg_is(argv, lens, 0, "XREADGROUP")) {
        for (int i = 1; i + 1 < argc; i++) {
            if (arg_is(argv, lens, i, "STREAMS")) {
                return i + 1;
            }
        }
        return -1;
    }
    if (arg_in(argv, lens, 0, sub_then_key)) {
        return argc > 2 && !arg_is(argv, lens, 1, "HELP") ? 2 : -1;
    }
    return 1;
}

/* SCAN ... MATCH pattern: the slot every key the pattern can match hashes to, when the
 * pattern fixes a hash tag (no glob character up to its closing '}'), else -1. */
static int scan_slot(int argc, const char **argv, const size_t *lens) {
    for (int i = 2; i + 1 < argc; i++) {
        if (!arg_is(argv, lens, i, "MATCH")) {
            continue;
        }
        const char *p = argv[i + 1];
        size_t n = arg_len(argv, lens, i + 1);
        const char *open = memchr(p, '{', n);
        const char *close = open ? memchr(open + 1, '}', n - (size_t)(open - p) - 1) : NULL;
        if (close == NULL || close == open + 1) {
            return -1;
        }
        for (const char *c = p; c < close; c++) {
            if (*c == '*' || *c == '?' || *c == '[' || *c == '\\') {
                return -1;
            }
        }
        return sluice__cluster_key_slot(p, (size_t)(close - p) + 1);
    }
    return -1;
}

int sluice__cluster_command_slot(int argc, const char **argv, const size_t *lens) {
    if (argc >= 1 && arg_is(argv, lens, 0, "SCAN")) {
        return scan_slot(argc, argv, lens);
    }
    int k = sluice__cluster_command_key(argc, argv, lens);
    return k < 0 ? -1 : sluice__cluster_key_slot(argv[k], arg_len(argv, lens, k));
}

/* ---- the slot map ---- */

void sluice__cluster_map_init(sluice_cluster_map *m) {
    m->nnodes = 0;
    for (int i = 0; i < SLUICE_CLUSTER_SLOTS; i++) {
        m->slot_node[i] = -1;
    }
}

int sluice__cluster_map_node(sluice_cluster_map *m, const char *host, int port) {
    for (int i = 0; i < m->nnodes; i++) {
        if (m->nodes[i].port == port && strcmp(m->nodes[i].host, host) == 0) {
            return i;
        }
    }
    if (m->nnodes == SLUICE_CLUSTER_NODES_MAX || strlen(host) >= sizeof(m->nodes[0].host)) {
        return -1;
    }
    snprintf(m->nodes[m->nnodes].host, sizeof(m->nodes[0].host), "%s", host);
    m->nodes[m->nnodes].port = port;
    return m->nnodes++;
}

const sluice_cluster_addr *sluice__cluster_map_lookup(const sluice_cluster_map *m, int slot) {
    if (slot < 0 || slot >= SLUICE_CLUSTER_SLOTS || m->slot_node[slot] < 0) {
        return NULL;
    }
    return &m->nodes[m->slot_node[slot]];
}

static int map_fail(char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "%s", what);
    return SLUICE_EPROTO;
}

/* Assigns start..end (checked) to the node host:port. */
static int map_assign(sluice_cluster_map *m, long long start, long long end, const char *host,
                      long long port, char *err, size_t errlen) {
    if (start < 0 || end >= SLUICE_CLUSTER_SLOTS || start > end) {
        return map_fail(err, errlen, "slot range out of 0..16383");
    }
    if (port < 1 || port > 65535) {
        return map_fail(err, errlen, "node port out of 1..65535");
    }
    int idx = sluice__cluster_map_node(m, host, (int)port);
    if (idx < 0) {
        return map_fail(err, errlen, "more primaries than the map holds");
    }
    for (long long s = start; s <= end; s++) {
        m->slot_node[s] = (int16_t)idx;
    }
    return 0;
}

/* The host of a node entry: `s` unless empty or "?" (unknown endpoint: the node asked). */
static const char *node_host(const redisReply *s, const char *from_host) {
    if (s == NULL || s->type != REDIS_REPLY_STRING || s->len == 0 || strcmp(s->str, "?") == 0) {
        return from_host;
    }
    return s->str;
}

static int map_done(sluice_cluster_map *m, int st, char *err, size_t errlen) {
    if (st != 0) {
        sluice__cluster_map_init(m);
        return st;
    }
    if (m->nnodes == 0) {
        snprintf(err, errlen, "the cluster serves no slot");
        return SLUICE_ENOTFOUND;
    }
    return 0;
}

/* The primary of one CLUSTER SHARDS shard; NULL when it has none. */
static const redisReply *shard_primary(const redisReply *nodes) {
    for (size_t j = 0; j < nodes->elements; j++) {
        const redisReply *role = sluice_reply_field(nodes->element[j], "role");
        if (role != NULL && role->type == REDIS_REPLY_STRING && strcmp(role->str, "master") == 0) {
            return nodes->element[j];
        }
    }
    return NULL;
}

static int parse_shard(const redisReply *sh, const char *from_host, sluice_cluster_map *m,
                       char *err, size_t errlen) {
    const redisReply *slots = sluice_reply_field(sh, "slots");
    const redisReply *nodes = sluice_reply_field(sh, "nodes");
    if (slots == NULL || nodes == NULL || slots->type != REDIS_REPLY_ARRAY ||
        nodes->type != REDIS_REPLY_ARRAY || slots->elements % 2 != 0) {
        return map_fail(err, errlen, "CLUSTER SHARDS: a shard without slots or nodes");
    }
    if (slots->elements == 0) {
        return 0; /* a primary without slots (yet) serves nothing */
    }
    const redisReply *p = shard_primary(nodes);
    if (p == NULL) {
        return map_fail(err, errlen, "CLUSTER SHARDS: a shard with slots has no primary");
    }
    const redisReply *endpoint = sluice_reply_field(p, "endpoint");
    const char *host = node_host(endpoint, NULL);
    if (host == NULL) {
        host = node_host(sluice_reply_field(p, "ip"), from_host);
    }
    long long port = sluice_reply_ll(sluice_reply_field(p, "port"), -1);
    if (port < 0) {
        port = sluice_reply_ll(sluice_reply_field(p, "tls-port"), -1);
    }
    for (size_t k = 0; k < slots->elements; k += 2) {
        const redisReply *a = slots->element[k], *b = slots->element[k + 1];
        if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER) {
            return map_fail(err, errlen, "CLUSTER SHARDS: a slot is not an integer");
        }
        int st = map_assign(m, a->integer, b->integer, host, port, err, errlen);
        if (st != 0) {
            return st;
        }
    }
    return 0;
}

int sluice__cluster_parse_shards(const redisReply *r, const char *from_host, sluice_cluster_map *m,
                                 char *err, size_t errlen) {
    sluice__cluster_map_init(m);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        return map_fail(err, errlen, "CLUSTER SHARDS: the reply is not an array");
    }
    int st = 0;
    for (size_t i = 0; i < r->elements && st == 0; i++) {
        st = parse_shard(r->element[i], from_host, m, err, errlen);
    }
    return map_done(m, st, err, errlen);
}

int sluice__cluster_parse_slots(const redisReply *r, const char *from_host, sluice_cluster_map *m,
                                char *err, size_t errlen) {
    sluice__cluster_map_init(m);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        return map_fail(err, errlen, "CLUSTER SLOTS: the reply is not an array");
    }
    int st = 0;
    for (size_t i = 0; i < r->elements && st == 0; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
            e->element[2]->element[1]->type != REDIS_REPLY_INTEGER) {
            st = map_fail(err, errlen, "CLUSTER SLOTS: an entry is not start, end, [host, port]");
            break;
        }
        const redisReply *n = e->element[2];
        st = map_assign(m, e->element[0]->integer, e->element[1]->integer,
                        node_host(n->element[0], from_host), n->element[1]->integer, err, errlen);
    }
    return map_done(m, st, err, errlen);
}

/* ---- redirections ---- */

/* "SLOT HOST:PORT" (HOST may be [v6], bare v6 or empty) after MOVED/ASK. */
static int parse_target(const char *s, size_t len, sluice_cluster_redirect *out) {
    char buf[300];
    if (len >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    long slot = strtol(buf, &end, 10);
    if (end == buf || *end != ' ' || slot < 0 || slot >= SLUICE_CLUSTER_SLOTS) {
        return -1;
    }
    char *host = end + 1, *colon = strrchr(host, ':');
    if (colon == NULL) {
        return -1;
    }
    *colon = '\0';
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || *end != '\0' || port < 1 || port > 65535) {
        return -1;
    }
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        host++;
    }
    out->slot = (int)slot;
    out->addr.port = (int)port;
    snprintf(out->addr.host, sizeof(out->addr.host), "%s", host);
    return 0;
}

sluice_cluster_redirect_kind sluice__cluster_redirect_parse(const char *str, size_t len,
                                                            sluice_cluster_redirect *out) {
    memset(out, 0, sizeof(*out));
    if (str == NULL) {
        return SLUICE_REDIRECT_NONE;
    }
    if (len > 6 && memcmp(str, "MOVED ", 6) == 0) {
        out->kind =
            parse_target(str + 6, len - 6, out) == 0 ? SLUICE_REDIRECT_MOVED : SLUICE_REDIRECT_NONE;
    } else if (len > 4 && memcmp(str, "ASK ", 4) == 0) {
        out->kind =
            parse_target(str + 4, len - 4, out) == 0 ? SLUICE_REDIRECT_ASK : SLUICE_REDIRECT_NONE;
    } else if (len >= 8 && memcmp(str, "TRYAGAIN", 8) == 0) {
        out->kind = SLUICE_REDIRECT_TRYAGAIN;
    } else if (len >= 11 && memcmp(str, "CLUSTERDOWN", 11) == 0) {
        out->kind = SLUICE_REDIRECT_DOWN;
    }
    if (out->kind == SLUICE_REDIRECT_NONE) {
        memset(out, 0, sizeof(*out));
    }
    return out->kind;
}
