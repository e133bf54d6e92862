/* SPDX-License-Identifier: MIT */
/*
 * queue.c - queue name checks and the Redis keys of a queue (data model version 1): the public
 * builders, which take every name from the one table of keys (keys.c).
 *
 * A name is checked before it reaches any key or command, so a name can never inject a second
 * hash tag, a glob character or a key separator. The check looks at no more than
 * SLUICE_QUEUE_NAME_MAX + 1 bytes of the name, whatever its length.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sluice/keys.h"
#include "sluice/queue.h"
#include "sluice/status.h"

static int name_char_ok(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

static void set_err(char *err, size_t errlen, const char *msg) {
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s", msg);
    }
}

static void bad_char_err(char *err, size_t errlen, unsigned char c, size_t pos) {
    char what[16];
    if (err == NULL || errlen == 0) {
        return;
    }
    if (c > 0x20 && c < 0x7f) {
        snprintf(what, sizeof(what), "'%c' (0x%02x)", c, c);
    } else if (c == ' ') {
        snprintf(what, sizeof(what), "' ' (0x20)");
    } else {
        snprintf(what, sizeof(what), "byte 0x%02x", c);
    }
    snprintf(err, errlen,
             "queue name has %s at position %zu; allowed: A-Z a-z 0-9 _ . - (and ~N at the "
             "end: partition N of a queue, 1..%d)",
             what, pos, SLUICE_PARTITIONS_MAX - 1);
}

/* The length of a partition suffix "~N" (N 1..SLUICE_PARTITIONS_MAX-1, no leading zero) ending
 * name[0..n), or 0. */
static size_t partition_suffix(const char *name, size_t n) {
    size_t d = 0;
    while (d < n && d < 3 && name[n - 1 - d] >= '0' && name[n - 1 - d] <= '9') {
        d++;
    }
    if (d == 0 || d > 2 || n < d + 2 || name[n - 1 - d] != '~' || name[n - d] == '0') {
        return 0;
    }
    int v = name[n - d] - '0';
    if (d == 2) {
        v = v * 10 + (name[n - 1] - '0');
    }
    return v < SLUICE_PARTITIONS_MAX ? d + 1 : 0;
}

int sluice_queue_name_check(const char *name, char *err, size_t errlen) {
    size_t n;
    if (name == NULL) {
        set_err(err, errlen, "queue name is missing");
        return SLUICE_EINVAL;
    }
    /* bounded: a 10 KB (or unterminated) name is never scanned past the limit */
    n = strnlen(name, SLUICE_QUEUE_NAME_MAX + 1);
    if (n == 0) {
        set_err(err, errlen, "queue name is empty");
        return SLUICE_EINVAL;
    }
    if (n > SLUICE_QUEUE_NAME_MAX) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "queue name is longer than %d characters; the limit is %d",
                     SLUICE_QUEUE_NAME_MAX, SLUICE_QUEUE_NAME_MAX);
        }
        return SLUICE_EINVAL;
    }
    n -= partition_suffix(name, n); /* "Q~3": partition 3 of Q */
    for (size_t i = 0; i < n; i++) {
        if (!name_char_ok((unsigned char)name[i])) {
            bad_char_err(err, errlen, (unsigned char)name[i], i);
            return SLUICE_EINVAL;
        }
    }
    return 0;
}

int sluice_keys_init(sluice_keys *k, const char *queue, char *err, size_t errlen) {
    int rc;
    if (k == NULL) {
        set_err(err, errlen, "NULL keys argument");
        return SLUICE_EINVAL;
    }
    rc = sluice_queue_name_check(queue, err, errlen);
    if (rc != 0) {
        return rc;
    }
    sluice__keys_fill(k, queue); /* the names come from the one table of keys (keys.c) */
    return 0;
}

int sluice_backend_parse(const char *s, sluice_backend *out) {
    if (s == NULL || out == NULL) {
        return SLUICE_EINVAL;
    }
    if (strcmp(s, "stream") == 0) {
        *out = SLUICE_BACKEND_STREAM;
        return 0;
    }
    if (strcmp(s, "list") == 0) {
        *out = SLUICE_BACKEND_LIST;
        return 0;
    }
    return SLUICE_EINVAL;
}

int sluice_partition_name(const char *queue, int i, char *buf, size_t len) {
    int n = i == 0 ? snprintf(buf, len, "%s", queue) : snprintf(buf, len, "%s~%d", queue, i);
    if (i < 0 || i >= SLUICE_PARTITIONS_MAX || n < 0 || (size_t)n >= len ||
        sluice_queue_name_check(buf, NULL, 0) != 0) {
        return SLUICE_EINVAL;
    }
    return 0;
}

int sluice_partition_of(const char *tenant, int parts) {
    uint32_t h = 2166136261u;
    for (const char *t = tenant; *t != '\0'; t++) {
        h = (h ^ (unsigned char)*t) * 16777619u;
    }
    /* jump consistent hash (Lamping and Veach, 2014) of h, as published: going from P to P + 1
     * partitions moves a tenant only into the new one, about 1 in P + 1 of them */
    uint64_t key = h;
    int64_t b = -1, j = 0;
    while (j < parts) {
        b = j;
        key = key * 2862933555777941757ull + 1;
        j = (int64_t)((double)(b + 1) * ((double)(1ll << 31) / (double)((key >> 33) + 1)));
    }
    return b > 0 ? (int)b : 0;
}

const char *sluice_backend_name(sluice_backend b) {
    switch (b) {
    case SLUICE_BACKEND_STREAM:
        return "stream";
    case SLUICE_BACKEND_LIST:
        return "list";
    default:
        return "unknown";
    }
}

int sluice_capacity_parse(const char *s, size_t len, long long *out) {
    if (s == NULL || len == 0 || len > 16) {
        return SLUICE_ECONFIG;
    }
    long long n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return SLUICE_ECONFIG;
        }
        n = n * 10 + (s[i] - '0');
    }
    if (n > SLUICE_CAPACITY_MAX) {
        return SLUICE_ECONFIG;
    }
    *out = n;
    return 0;
}

/* The keys with a name part: built by the table of keys (keys.c), like every other. */

int sluice_key_proc(const sluice_keys *k, const char *consumer, char *buf, size_t len) {
    return sluice__key(k, SLUICE_KEY_PROC, consumer, strlen(consumer), buf, len);
}

int sluice_key_idem(const sluice_keys *k, const char *key, size_t keylen, char *buf, size_t len) {
    return sluice__key(k, SLUICE_KEY_IDEM, key, keylen, buf, len);
}

int sluice_key_limit(const sluice_keys *k, const char *key, size_t keylen, char *buf, size_t len) {
    return sluice__key(k, SLUICE_KEY_LIM, key, keylen, buf, len);
}

/* qlim:NAME:ALG:VALUE, the twin of the function library's qlim_key */
int sluice_key_queue_limit(const sluice_keys *k, const char *name, const char *alg,
                           const char *value, size_t valuelen, char *buf, size_t len) {
    if (sluice__key(k, SLUICE_KEY_QLIM, NULL, 0, buf, len) != 0) {
        return SLUICE_EINVAL;
    }
    size_t at = strlen(buf);
    int n = snprintf(buf + at, len - at, "%s:%s:%.*s", name, alg, (int)valuelen,
                     value != NULL ? value : "");
    return n >= 0 && (size_t)n < len - at &&
                   (value == NULL || memchr(value, '\0', valuelen) == NULL)
               ? 0
               : SLUICE_EINVAL;
}

const char *sluice_key_proc_consumer(const sluice_keys *k, const char *key) {
    const char *consumer = sluice__key_part(k, SLUICE_KEY_PROC, key);
    return consumer != NULL ? consumer : key;
}

int sluice_key_hold(const sluice_keys *k, const char *target, size_t targetlen, char *buf,
                    size_t len) {
    return sluice__key(k, SLUICE_KEY_HOLD, target, targetlen, buf, len);
}
