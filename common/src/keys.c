/* SPDX-License-Identifier: MIT */
/* keys.c - the one table of a queue's Redis keys and their builder (see sluice/keys.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/keys.h"
#include "sluice/status.h"

/* Every key of queue Q is KEY_PREFIX_FMT (with Q) followed by one of these. */
#define KEY_PREFIX_FMT "sluice:{%s}:"
#define NO_FIELD       ((size_t)-1)

static const struct key_def {
    const char *suffix;
    int named;    /* 1: one key per name, the name follows the suffix */
    size_t field; /* its field in sluice_keys, or NO_FIELD */
} key_table[SLUICE_KEY_KINDS_] = {
    [SLUICE_KEY_STREAM] = {"stream", 0, offsetof(sluice_keys, stream)},
    [SLUICE_KEY_DEAD] = {"dead", 0, offsetof(sluice_keys, dead)},
    [SLUICE_KEY_META] = {"meta", 0, offsetof(sluice_keys, meta)},
    [SLUICE_KEY_STATS] = {"stats", 0, offsetof(sluice_keys, stats)},
    [SLUICE_KEY_LIST] = {"list", 0, offsetof(sluice_keys, list)},
    [SLUICE_KEY_PROCS] = {"procs", 0, offsetof(sluice_keys, procs)},
    [SLUICE_KEY_LIMITS] = {"limits", 0, offsetof(sluice_keys, limits)},
    [SLUICE_KEY_TDEPTH] = {"tdepth", 0, NO_FIELD},
    [SLUICE_KEY_LANES] = {"lanes", 0, NO_FIELD},
    [SLUICE_KEY_LWAIT] = {"lwait", 0, NO_FIELD},
    [SLUICE_KEY_SERVED] = {"served", 0, NO_FIELD},
    [SLUICE_KEY_RING] = {"ring", 0, NO_FIELD},
    [SLUICE_KEY_DEFICIT] = {"deficit", 0, NO_FIELD},
    [SLUICE_KEY_WEIGHTS] = {"weights", 0, NO_FIELD},
    [SLUICE_KEY_WAKE] = {"wake", 0, NO_FIELD},
    [SLUICE_KEY_LANE] = {"lane:", 1, NO_FIELD},
    [SLUICE_KEY_PROC] = {"proc:", 1, NO_FIELD},
    [SLUICE_KEY_IDEM] = {"idem:", 1, NO_FIELD},
    [SLUICE_KEY_QLIM] = {"qlim:", 1, NO_FIELD},
    [SLUICE_KEY_LIM] = {"lim:", 1, NO_FIELD},
    [SLUICE_KEY_HOLD] = {"hold:", 1, NO_FIELD},
};

const char *sluice__key_suffix(sluice_key_kind kind) {
    return (unsigned)kind < SLUICE_KEY_KINDS_ ? key_table[kind].suffix : NULL;
}

int sluice__key_named(sluice_key_kind kind) {
    return (unsigned)kind < SLUICE_KEY_KINDS_ && key_table[kind].named;
}

void sluice__keys_fill(sluice_keys *k, const char *queue) {
    /* a valid name (64 bytes) makes at most 64 + 15: every key fits SLUICE_KEY_MAX */
    snprintf(k->prefix, sizeof(k->prefix), KEY_PREFIX_FMT, queue);
    for (int i = 0; i < SLUICE_KEY_KINDS_; i++) {
        if (key_table[i].field == NO_FIELD) {
            continue;
        }
        char *field = (char *)k + key_table[i].field;
        if (sluice__key(k, (sluice_key_kind)i, NULL, 0, field, SLUICE_KEY_MAX) != 0) {
            field[0] = '\0'; /* a name far too long: never a key of another queue */
        }
    }
}

/* Writes prefix, suffix and part into buf (binary-safe: a part may hold NUL bytes) and NUL;
 * returns the key's length, or -1 when it does not fit in len bytes or the kind takes no part. */
static long key_build(const sluice_keys *k, sluice_key_kind kind, const char *part, size_t partlen,
                      char *buf, size_t len) {
    if ((unsigned)kind >= SLUICE_KEY_KINDS_ || (partlen > 0 && !key_table[kind].named)) {
        return -1;
    }
    size_t p = strlen(k->prefix), s = strlen(key_table[kind].suffix);
    if (part == NULL) {
        partlen = 0;
    }
    if (p + s + partlen >= len) {
        return -1;
    }
    memcpy(buf, k->prefix, p);
    memcpy(buf + p, key_table[kind].suffix, s);
    if (partlen > 0) {
        memcpy(buf + p + s, part, partlen);
    }
    buf[p + s + partlen] = '\0';
    return (long)(p + s + partlen);
}

int sluice__key(const sluice_keys *k, sluice_key_kind kind, const char *part, size_t partlen,
                char *buf, size_t len) {
    /* a C string: a NUL in the part would cut the key short */
    if (part != NULL && partlen > 0 && memchr(part, '\0', partlen) != NULL) {
        return SLUICE_EINVAL;
    }
    return key_build(k, kind, part, partlen, buf, len) >= 0 ? 0 : SLUICE_EINVAL;
}

char *sluice__key_new(const sluice_keys *k, sluice_key_kind kind, const char *part, size_t partlen,
                      size_t *keylen) {
    if ((unsigned)kind >= SLUICE_KEY_KINDS_) {
        return NULL;
    }
    size_t len = strlen(k->prefix) + strlen(key_table[kind].suffix) + partlen + 1;
    char *key = malloc(len);
    long n = key != NULL ? key_build(k, kind, part, partlen, key, len) : -1;
    if (n < 0) {
        free(key);
        return NULL;
    }
    if (keylen != NULL) {
        *keylen = (size_t)n;
    }
    return key;
}

const char *sluice__key_part(const sluice_keys *k, sluice_key_kind kind, const char *key) {
    const char *suffix = sluice__key_suffix(kind);
    size_t n = strlen(k->prefix), s = suffix != NULL ? strlen(suffix) : 0;
    if (!sluice__key_named(kind) || strncmp(key, k->prefix, n) != 0 ||
        strncmp(key + n, suffix, s) != 0) {
        return NULL;
    }
    return key + n + s;
}

int sluice__partition_keys(const char *queue, int i, sluice_keys *k) {
    char name[SLUICE_QUEUE_NAME_MAX + 1];
    if (sluice_partition_name(queue, i, name, sizeof(name)) != 0) {
        return SLUICE_EINVAL;
    }
    return sluice_keys_init(k, name, NULL, 0);
}
