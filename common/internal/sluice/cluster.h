/* SPDX-License-Identifier: MIT */
/*
 * cluster.h - the pure part of Redis Cluster routing: which slot a key lives in, which key of a
 * command decides where it goes, the slot map read from CLUSTER SHARDS (Redis 7.0+) or
 * CLUSTER SLOTS, and the redirections a node answers with (MOVED, ASK, TRYAGAIN, CLUSTERDOWN).
 * Does not own: connections, retries and deadlines (conn_cluster.c, uvredis_route.c). Internal to
 * sluice; no I/O, no allocation; thread-safe (a map belongs to its caller).
 */
#ifndef SLUICE_CLUSTER_H
#define SLUICE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_CLUSTER_SLOTS     16384
#define SLUICE_CLUSTER_NODES_MAX 64 /* primaries a map can name; more is an error */

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0), as the Redis Cluster spec uses. */
uint16_t sluice__crc16(const char *buf, size_t len);

/* The slot of a key: CRC16 of its hash tag (the bytes between the first '{' and the first '}'
 * after it, when there are any) or of the whole key, mod 16384. */
int sluice__cluster_key_slot(const char *key, size_t len);

/*
 * The argument of a command that decides its node: its first key (argv[1] for most; the first
 * key after numkeys for FCALL/EVAL/EVALSHA; the first key after STREAMS for XREAD/XREADGROUP;
 * argv[2] for XINFO/XGROUP subcommands). -1 for commands without keys (PING, TIME, INFO,
 * MULTI, EXEC, FUNCTION, SCRIPT, CLUSTER, ...). lens NULL = strlen.
 */
int sluice__cluster_command_key(int argc, const char **argv, const size_t *lens);

/* The slot a command goes to: its key's slot, the slot of the hash tag of SCAN's MATCH
 * pattern when the tag holds no glob character (all of a queue's keys), or -1 (any node). */
int sluice__cluster_command_slot(int argc, const char **argv, const size_t *lens);

typedef struct sluice_cluster_addr {
    char host[256];
    int port;
} sluice_cluster_addr;

/* Which primary serves each slot. */
typedef struct sluice_cluster_map {
    int nnodes; /* primaries in `nodes` */
    sluice_cluster_addr nodes[SLUICE_CLUSTER_NODES_MAX];
    int16_t slot_node[SLUICE_CLUSTER_SLOTS]; /* index into nodes; -1 = no owner known */
} sluice_cluster_map;

/* An empty map: no node, no slot assigned. */
void sluice__cluster_map_init(sluice_cluster_map *m);

/* The index of host:port in m->nodes, added when absent; -1 when the map is full. */
int sluice__cluster_map_node(sluice_cluster_map *m, const char *host, int port);

/* The primary of `slot` (NULL when unknown). */
const sluice_cluster_addr *sluice__cluster_map_lookup(const sluice_cluster_map *m, int slot);

/*
 * Fills *m (reset first) from a CLUSTER SHARDS reply (RESP2: an array of flat name/value
 * arrays with "slots" as start/end pairs and "nodes"; a shard's primary is its node with role
 * "master") or a CLUSTER SLOTS reply (start, end, primary [host, port, ...], replicas...). An
 * empty or "?" host means the node the reply came from: `from_host`. Returns 0, or
 * SLUICE_EPROTO with the reason in err when the reply is not what the command returns, or
 * SLUICE_ENOTFOUND when it assigns no slot at all.
 */
int sluice__cluster_parse_shards(const redisReply *r, const char *from_host, sluice_cluster_map *m,
                                 char *err, size_t errlen);
int sluice__cluster_parse_slots(const redisReply *r, const char *from_host, sluice_cluster_map *m,
                                char *err, size_t errlen);

typedef enum sluice_cluster_redirect_kind {
    SLUICE_REDIRECT_NONE = 0, /* another error, or not an error */
    SLUICE_REDIRECT_MOVED,    /* the slot has a new owner: update the map, retry there */
    SLUICE_REDIRECT_ASK,      /* the key is being migrated: ASKING + retry once there */
    SLUICE_REDIRECT_TRYAGAIN, /* multi-key command during a migration: retry later */
    SLUICE_REDIRECT_DOWN,     /* CLUSTERDOWN: retry later */
} sluice_cluster_redirect_kind;

typedef struct sluice_cluster_redirect {
    sluice_cluster_redirect_kind kind;
    int slot;                 /* MOVED, ASK */
    sluice_cluster_addr addr; /* MOVED, ASK; host "" = the node that answered */
} sluice_cluster_redirect;

/* Reads an error reply's text ("MOVED 3999 127.0.0.1:6381", "ASK 3999 [::1]:6381" or
 * "ASK 3999 ::1:6381", "TRYAGAIN ...", "CLUSTERDOWN ..."). Returns the kind; a malformed
 * MOVED/ASK is NONE (reported as the error it is). */
sluice_cluster_redirect_kind sluice__cluster_redirect_parse(const char *str, size_t len,
                                                            sluice_cluster_redirect *out);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_CLUSTER_H */
