/* SPDX-License-Identifier: MIT */
/*
 * sentinel.c - the I/O-free decisions of both Sentinel routers (sentinel.h): credentials, the
 * replies to SENTINEL GET-MASTER-ADDR-BY-NAME and ROLE, "no longer the primary", the
 * +switch-master message, and the error line of a round without an answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/log.h"
#include "sluice/sentinel.h"
#include "sluice/status.h"

void sluice__sentinel_auth(const sluice_url *u, sluice_url *auth) {
    memset(auth, 0, sizeof(*auth));
    const char *user = u->sentinel_auth ? u->sentinel_user : u->user;
    const char *pass = u->sentinel_auth ? u->sentinel_password : u->password;
    snprintf(auth->user, sizeof(auth->user), "%s", user);
    snprintf(auth->password, sizeof(auth->password), "%s", pass);
}

/* A port number in decimal, 1..65535; 0 otherwise. */
static int port_of(const char *s, size_t len) {
    int port = 0;
    if (len == 0 || len > 5) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return 0;
        }
        port = port * 10 + (s[i] - '0');
    }
    return port <= 65535 ? port : 0;
}

/* The first byte of a host a sentinel named that no host name or IP address has (anything but
 * letters, digits, '.', '-', '_' and the ':' of IPv6), or -1: such a host would be connected to
 * cut short at a NUL, or break the log lines that name it. */
static long bad_host_byte(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == ':')) {
            return (long)i;
        }
    }
    return -1;
}

/* Why the address named (host h, port p) is none, into why. */
static void not_an_address(const redisReply *h, const redisReply *p, size_t hostlen, char *why,
                           size_t whylen) {
    static const char what[] = "SENTINEL GET-MASTER-ADDR-BY-NAME: not an address";
    char text[80], q[sizeof(text) * 4 + 3];
    long bad = bad_host_byte(h->str, h->len);
    if (h->len == 0 || h->len >= hostlen) {
        snprintf(why, whylen, "%s (a host of %zu bytes)", what, h->len);
    } else if (bad >= 0) {
        snprintf(text, sizeof(text), "%.*s", (int)h->len, h->str); /* up to a NUL */
        snprintf(why, whylen, "%s (host %s: byte %ld is 0x%02x)", what,
                 sluice_log_q(text, q, sizeof(q)), bad, (unsigned char)h->str[bad]);
    } else {
        snprintf(text, sizeof(text), "%.*s", (int)p->len, p->str);
        snprintf(why, whylen, "%s (port %s)", what, sluice_log_q(text, q, sizeof(q)));
    }
}

int sluice__sentinel_addr_reply(const redisReply *r, char *host, size_t hostlen, int *port,
                                char *why, size_t whylen) {
    if (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ARRAY && r->elements == 0)) {
        snprintf(why, whylen, "master name unknown");
        return SLUICE_SENTINEL_UNKNOWN;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, whylen, "SENTINEL GET-MASTER-ADDR-BY-NAME: %s", r->str);
        return SLUICE_SENTINEL_REFUSED;
    }
    int p = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(why, whylen, "SENTINEL GET-MASTER-ADDR-BY-NAME: not an address");
        return SLUICE_SENTINEL_REFUSED;
    }
    if (r->element[0]->len == 0 || r->element[0]->len >= hostlen ||
        bad_host_byte(r->element[0]->str, r->element[0]->len) >= 0 ||
        (p = port_of(r->element[1]->str, r->element[1]->len)) == 0) {
        not_an_address(r->element[0], r->element[1], hostlen, why, whylen);
        return SLUICE_SENTINEL_REFUSED;
    }
    snprintf(host, hostlen, "%s", r->element[0]->str);
    *port = p;
    return SLUICE_SENTINEL_FOUND;
}

int sluice__sentinel_role_reply(const redisReply *r, const char *where, const char *addr, char *why,
                                size_t whylen) {
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
        r->element[0]->type == REDIS_REPLY_STRING) {
        if (strcmp(r->element[0]->str, "master") == 0) {
            return 0;
        }
        snprintf(why, whylen, "%s: %s answered ROLE %s (not the primary)", where, addr,
                 r->element[0]->str);
        return 1;
    }
    snprintf(why, whylen, "%s: %s: ROLE: unexpected answer", where, addr);
    return 1;
}

int sluice__sentinel_not_primary(int st, const redisReply *r) {
    if (r == NULL || r->type != REDIS_REPLY_ERROR) {
        return 0;
    }
    /* a blocked call (XREADGROUP BLOCK) released by the demotion, without running */
    static const char unblocked[] = "UNBLOCKED ";
    if (r->len >= sizeof(unblocked) - 1 && strncmp(r->str, unblocked, sizeof(unblocked) - 1) == 0 &&
        strstr(r->str, "master -> replica") != NULL) {
        return 1;
    }
    return st == SLUICE_EREADONLY || (r->len >= 9 && strncmp(r->str, "REDIRECT ", 9) == 0);
}

int sluice__sentinel_switch_parse(const char *msg, size_t len, const char *master, char *host,
                                  size_t hostlen, int *port) {
    const char *w[5];
    size_t wl[5];
    size_t i = 0;
    int n = 0;
    while (i < len && n < 6) {
        while (i < len && msg[i] == ' ') {
            i++;
        }
        if (i == len) {
            break;
        }
        size_t start = i;
        while (i < len && msg[i] != ' ') {
            i++;
        }
        if (n < 5) {
            w[n] = msg + start;
            wl[n] = i - start;
        }
        n++;
    }
    if (n != 5 || port_of(w[4], wl[4]) == 0 || wl[3] >= hostlen ||
        bad_host_byte(w[3], wl[3]) >= 0) {
        return -1;
    }
    if (wl[0] != strlen(master) || memcmp(w[0], master, wl[0]) != 0) {
        return 0;
    }
    memcpy(host, w[3], wl[3]);
    host[wl[3]] = '\0';
    *port = port_of(w[4], wl[4]);
    return 1;
}

void sluice__sentinel_round_add(sluice__sentinel_round *rd, const sluice_url_seed *seed, int res,
                                const char *why) {
    rd->down += res == SLUICE_SENTINEL_DOWN;
    rd->unknown += res == SLUICE_SENTINEL_UNKNOWN;
    if (rd->used < sizeof(rd->all)) {
        int w = snprintf(rd->all + rd->used, sizeof(rd->all) - rd->used, "%s%s:%d: %s",
                         rd->asked > 0 ? "; " : "", seed->host, seed->port, why);
        rd->used += w > 0 ? (size_t)w : 0;
    }
    rd->asked++;
}

int sluice__sentinel_round_fail(const sluice__sentinel_round *rd, const char *where,
                                const char *master, char *err, size_t errlen) {
    const char *what = rd->down == rd->asked ? "no sentinel reachable"
                       : rd->unknown + rd->down == rd->asked
                           ? "master name unknown to the sentinels"
                           : "no sentinel named the primary";
    snprintf(err, errlen, "%s: %s for master '%s' (%s)", where, what, master, rd->all);
    return rd->unknown > 0 && rd->unknown + rd->down == rd->asked ? SLUICE_ENOTFOUND : SLUICE_ECONN;
}
