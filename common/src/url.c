/* SPDX-License-Identifier: MIT */
/*
 * url.c - parsing and redacting Redis server URLs.
 *
 * Accepted forms:
 *   redis://[user[:password]@]host[:port][/db]     host: name, IPv4, or [IPv6]
 *   unix://[user[:password]@]/abs/path[?db=N]
 *   redis+cluster://[user[:password]@]host[:port][,host[:port]...]   seeds of a Redis Cluster
 *   redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/MASTER[?options]
 *       sentinels (default port 26379) and the master's name; options db=N, sentinel_user=U,
 *       sentinel_password=P (each at most once)
 *   rediss://, rediss+cluster://, rediss+sentinel://   the same over TLS
 * In a redis:// URL the credentials end at the last '@' (nothing after the host may contain
 * one), so a password with a raw '/' or '@' still parses; in a unix:// URL they end at the first
 * "@/". User and password are percent-decoded (%XX). Error messages name the bad part but never
 * echo the credentials: they only quote the scheme, host, port, db or what follows the host.
 * Pure: no I/O, no allocation (inet_pton only validates an IPv6 literal).
 */
#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sluice/status.h"
#include "sluice/url.h"

#define URL_PATH_MAX (sizeof(((sluice_url *)0)->path) - 1) /* 107 */

typedef struct url_err {
    char *buf;
    size_t len;
} url_err;

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

static int url_fail(url_err *e, const char *fmt, ...) PRINTF_LIKE(2, 3);

static int url_fail(url_err *e, const char *fmt, ...) {
    if (e->buf != NULL && e->len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->buf, e->len, fmt, ap);
        va_end(ap);
    }
    return SLUICE_EINVAL;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Decodes src[0..len) into dst[0..cap) (NUL-terminated). `what` names it; never echoed. */
static int pct_decode(char *dst, size_t cap, const char *src, size_t len, const char *what,
                      url_err *e) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)src[i];
        if (c == '%') {
            int hi = i + 2 < len ? hex_value(src[i + 1]) : -1;
            int lo = hi >= 0 ? hex_value(src[i + 2]) : -1;
            if (lo < 0) {
                return url_fail(e, "%s has a bad percent-escape (expected %%XX)", what);
            }
            c = hi * 16 + lo;
            i += 2;
            if (c == 0) {
                return url_fail(e, "%s contains %%00", what);
            }
        }
        if (o + 1 >= cap) {
            return url_fail(e, "%s is longer than %zu bytes", what, cap - 1);
        }
        dst[o++] = (char)c;
    }
    dst[o] = '\0';
    return 0;
}

static int parse_userinfo(sluice_url *u, const char *s, size_t len, url_err *e) {
    const char *colon = memchr(s, ':', len);
    size_t ulen = colon != NULL ? (size_t)(colon - s) : len;
    if (pct_decode(u->user, sizeof(u->user), s, ulen, "user", e) != 0) {
        return SLUICE_EINVAL;
    }
    if (colon == NULL) {
        return 0;
    }
    return pct_decode(u->password, sizeof(u->password), colon + 1, len - ulen - 1, "password", e);
}

/* Digits only, saturating at `cap` so a long run of digits cannot overflow. */
static int parse_digits(const char *s, size_t len, long cap, long *out) {
    long v = 0;
    if (len == 0) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (s[i] - '0');
        if (v > cap) {
            v = cap;
        }
    }
    *out = v;
    return 0;
}

static int parse_port(sluice_url *u, const char *s, size_t len, url_err *e) {
    long v;
    if (len == 0) {
        return url_fail(e, "port is empty");
    }
    if (parse_digits(s, len, 65536, &v) != 0) {
        return url_fail(e, "port \"%.*s\" is not a number", (int)len, s);
    }
    if (v < 1 || v > 65535) {
        return url_fail(e, "port %.*s is out of range 1..65535", (int)len, s);
    }
    u->port = (int)v;
    return 0;
}

static int parse_db(sluice_url *u, const char *s, size_t len, url_err *e) {
    long v;
    if (parse_digits(s, len, (long)INT_MAX + 1, &v) != 0) {
        return url_fail(e, "db \"%.*s\" is not a non-negative integer", (int)len, s);
    }
    if (v > INT_MAX) {
        return url_fail(e, "db %.*s is out of range 0..%d", (int)len, s, INT_MAX);
    }
    u->db = (int)v;
    return 0;
}

static int host_char_ok(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_';
}

/* "[v6]" at s; returns the bytes used or -1. */
static int parse_ipv6(sluice_url *u, const char *s, size_t *used, url_err *e) {
    const char *close = strchr(s, ']');
    unsigned char addr[16];
    size_t len;
    if (close == NULL) {
        return url_fail(e, "IPv6 host has no closing ']'");
    }
    len = (size_t)(close - s - 1);
    if (len == 0) {
        return url_fail(e, "empty host");
    }
    if (len >= sizeof(u->host)) {
        return url_fail(e, "host is longer than %zu bytes", sizeof(u->host) - 1);
    }
    memcpy(u->host, s + 1, len);
    u->host[len] = '\0';
    if (inet_pton(AF_INET6, u->host, addr) != 1) {
        return url_fail(e, "host \"[%s]\" is not an IPv6 address", u->host);
    }
    *used = len + 2;
    return 0;
}

/* An IPv6 address written without brackets ("::1:7000", "fe80::1"), up to the stops other than
 * ':': refused with the bracketed form to write instead. Returns 0 when s is no such thing. */
static int bare_ipv6(const char *s, const char *stops, url_err *e) {
    char nocolon[8], text[64], head[64];
    size_t k = 0, len;
    for (; *stops != '\0' && k + 1 < sizeof(nocolon); stops++) {
        if (*stops != ':') {
            nocolon[k++] = *stops;
        }
    }
    nocolon[k] = '\0';
    len = strcspn(s, nocolon);
    const char *first = memchr(s, ':', len);
    if (first == NULL || memchr(first + 1, ':', len - (size_t)(first + 1 - s)) == NULL ||
        len >= sizeof(text)) {
        return 0; /* at most one ':' - host:port */
    }
    memcpy(text, s, len);
    text[len] = '\0';
    unsigned char addr[16];
    char *last = strrchr(text, ':');
    size_t hlen = (size_t)(last - text);
    memcpy(head, text, hlen);
    head[hlen] = '\0';
    /* "::1:7000" is most likely [::1]:7000; "::1" and "2001:db8::1" have no port */
    if (last[1] != '\0' && strspn(last + 1, "0123456789") == strlen(last + 1) &&
        strlen(last + 1) <= 5 && hlen > 0 && head[hlen - 1] != ':' &&
        inet_pton(AF_INET6, head, addr) == 1) {
        return url_fail(e,
                        "host \"%s\" looks like an IPv6 address: write it in brackets, as in "
                        "[%s]:%s",
                        text, head, last + 1);
    }
    if (inet_pton(AF_INET6, text, addr) == 1) {
        return url_fail(e,
                        "host \"%s\" looks like an IPv6 address: write it in brackets, as in [%s]",
                        text, text);
    }
    return 0;
}

/* A host name or IP literal at s, ending at any of `stops`. */
static int parse_host(sluice_url *u, const char *s, const char *stops, size_t *used, url_err *e) {
    size_t len;
    if (s[0] == '[') {
        return parse_ipv6(u, s, used, e);
    }
    if (bare_ipv6(s, stops, e) != 0) {
        return SLUICE_EINVAL;
    }
    len = strcspn(s, stops);
    if (len == 0) {
        return url_fail(e, "empty host");
    }
    if (len >= sizeof(u->host)) {
        return url_fail(e, "host is longer than %zu bytes", sizeof(u->host) - 1);
    }
    for (size_t i = 0; i < len; i++) {
        if (!host_char_ok((unsigned char)s[i])) {
            return url_fail(e, "host \"%.*s\" has '%c' at position %zu", (int)len, s, s[i], i);
        }
    }
    memcpy(u->host, s, len);
    u->host[len] = '\0';
    *used = len;
    return 0;
}

/* After "redis://". */

/* The rest of a URL for an error message, with every query value replaced by "***": a
 * "?password=..." must not be echoed (B11: errors name the bad part, never a secret). */
static const char *redacted(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    int in_value = 0;
    for (; *s != '\0' && n + 4 < cap; s++) {
        if (in_value && *s != '&' && *s != '#') {
            continue;
        }
        in_value = 0;
        buf[n++] = *s;
        if (*s == '=') {
            memcpy(buf + n, "***", 3);
            n += 3;
            in_value = 1;
        }
    }
    buf[n] = '\0';
    return buf;
}

static int parse_tcp(sluice_url *u, const char *s, url_err *e) {
    const char *at = strrchr(s, '@');
    const char *p = s;
    size_t used = 0, len;
    if (at != NULL) {
        if (parse_userinfo(u, s, (size_t)(at - s), e) != 0) {
            return SLUICE_EINVAL;
        }
        p = at + 1;
    }
    if (parse_host(u, p, ":/?#", &used, e) != 0) {
        return SLUICE_EINVAL;
    }
    p += used;
    if (*p == ':') {
        len = strcspn(p + 1, "/?#");
        if (parse_port(u, p + 1, len, e) != 0) {
            return SLUICE_EINVAL;
        }
        p += 1 + len;
    }
    if (*p == '/') {
        len = strcspn(p + 1, "/?#");
        if (len > 0 && parse_db(u, p + 1, len, e) != 0) {
            return SLUICE_EINVAL;
        }
        p += 1 + len;
    }
    if (*p != '\0') {
        char safe[128];
        return url_fail(e, "unexpected \"%s\" after the %s", redacted(p, safe, sizeof(safe)),
                        used > 0 ? "address" : "host");
    }
    return 0;
}

/* One seed "host[:port]" at s, ending at ',' or the end; appended to u->seeds. */
static int parse_seed(sluice_url *u, const char *s, int default_port, size_t *used, url_err *e) {
    size_t n = 0, len;
    if (u->nseeds == SLUICE_URL_SEEDS_MAX) {
        return url_fail(e, "more than %d seed nodes", SLUICE_URL_SEEDS_MAX);
    }
    if (u->nseeds > 0 && (*s == '\0' || strchr(",/?#", *s) != NULL)) {
        return url_fail(e, "seed %d is empty (%s)", u->nseeds + 1,
                        *s == ',' ? "two commas in a row" : "a comma at the end");
    }
    u->port = default_port;
    if (parse_host(u, s, ":/?#,", &n, e) != 0) {
        return SLUICE_EINVAL;
    }
    if (s[n] == ':') {
        len = strcspn(s + n + 1, "/?#,");
        if (parse_port(u, s + n + 1, len, e) != 0) {
            return SLUICE_EINVAL;
        }
        n += 1 + len;
    }
    for (int i = 0; i < u->nseeds; i++) { /* a node named twice: a typo, another port meant */
        if (u->seeds[i].port == u->port && strcasecmp(u->seeds[i].host, u->host) == 0) {
            int v6 = strchr(u->host, ':') != NULL;
            return url_fail(e, "seed %d (%s%s%s:%d) is seed %d again", u->nseeds + 1, v6 ? "[" : "",
                            u->host, v6 ? "]" : "", u->port, i + 1);
        }
    }
    sluice_url_seed *seed = &u->seeds[u->nseeds++];
    memcpy(seed->host, u->host, sizeof(seed->host));
    seed->port = u->port;
    *used = n;
    return 0;
}

/* Credentials, then seeds separated by ',' (each defaulting to `default_port`); host/port are
 * then the first seed's. Returns where the seeds end in *rest. */
static int parse_seeds(sluice_url *u, const char *s, int default_port, const char **rest,
                       url_err *e) {
    const char *at = strrchr(s, '@');
    const char *p = s;
    if (at != NULL) {
        if (parse_userinfo(u, s, (size_t)(at - s), e) != 0) {
            return SLUICE_EINVAL;
        }
        p = at + 1;
    }
    for (;;) {
        size_t used = 0;
        if (parse_seed(u, p, default_port, &used, e) != 0) {
            return SLUICE_EINVAL;
        }
        p += used;
        if (*p != ',') {
            break;
        }
        p++;
    }
    memcpy(u->host, u->seeds[0].host, sizeof(u->host));
    u->port = u->seeds[0].port;
    *rest = p;
    return 0;
}

/* After "redis+cluster://" (or "rediss+cluster://", named by `scheme`): db 0 only. */
static int parse_cluster(sluice_url *u, const char *s, const char *scheme, url_err *e) {
    const char *p;
    u->is_cluster = 1;
    if (parse_seeds(u, s, 6379, &p, e) != 0) {
        return SLUICE_EINVAL;
    }
    if (*p == '/' && (p[1] == '\0' || (p[1] == '0' && p[2] == '\0'))) {
        return 0; /* "/" and "/0" name the only db there is */
    }
    if (*p == '/' || strncmp(p, "?db=", 4) == 0) {
        return url_fail(e, "a %s URL takes no db (Redis Cluster has only db 0)", scheme);
    }
    if (*p != '\0') {
        char safe[128];
        return url_fail(e, "unexpected \"%s\" after the seed nodes",
                        redacted(p, safe, sizeof(safe)));
    }
    return 0;
}

/* One "name=value" of a sentinel URL's query at q (ending at '&' or the end). */
static int parse_sentinel_option(sluice_url *u, const char *q, size_t len, unsigned *seen,
                                 url_err *e) {
    static const char *const names[] = {"db", "sentinel_user", "sentinel_password"};
    const char *eq = memchr(q, '=', len);
    size_t nlen = eq != NULL ? (size_t)(eq - q) : len;
    const char *v = eq != NULL ? eq + 1 : q + len;
    size_t vlen = len - nlen - (eq != NULL);
    unsigned i = 0;
    while (i < 3 && (strlen(names[i]) != nlen || strncmp(q, names[i], nlen) != 0)) {
        i++;
    }
    if (i == 3) {
        return url_fail(e,
                        "unknown option \"%.*s\" (expected db, sentinel_user or "
                        "sentinel_password)",
                        (int)nlen, q);
    }
    if (eq == NULL) {
        return url_fail(e, "option %s has no '=' (expected %s=VALUE)", names[i], names[i]);
    }
    if (*seen & (1u << i)) {
        return url_fail(e, "option %s is given twice", names[i]);
    }
    *seen |= 1u << i;
    if (i == 0) {
        return parse_db(u, v, vlen, e);
    }
    u->sentinel_auth = 1;
    if (i == 1) {
        return pct_decode(u->sentinel_user, sizeof(u->sentinel_user), v, vlen, "sentinel_user", e);
    }
    return pct_decode(u->sentinel_password, sizeof(u->sentinel_password), v, vlen,
                      "sentinel_password", e);
}

/* After "redis+sentinel://": sentinels, "/MASTER", then "?name=value&..." options. */
static int parse_sentinel(sluice_url *u, const char *s, const char *scheme, url_err *e) {
    const char *p;
    size_t len;
    unsigned seen = 0;
    u->is_sentinel = 1;
    /* the credentials end at the last '@' before the query, so a raw '@' in a query value
     * (a sentinel password) is not taken for theirs; an '@' in the master name is written %40 */
    char head[SLUICE_URL_MAX + 1];
    len = strcspn(s, "?#");
    memcpy(head, s, len);
    head[len] = '\0';
    if (parse_seeds(u, head, SLUICE_SENTINEL_PORT, &p, e) != 0) {
        return SLUICE_EINVAL;
    }
    p = s + (p - head);
    if (*p != '/' || p[1] == '\0' || p[1] == '?' || p[1] == '#') {
        return url_fail(e,
                        "a %s URL needs the master's name after the sentinels, as in "
                        "%shost:26379/mymaster",
                        scheme, scheme);
    }
    p++;
    len = strcspn(p, "/?#");
    if (pct_decode(u->master_name, sizeof(u->master_name), p, len, "master name", e) != 0) {
        return SLUICE_EINVAL;
    }
    for (const char *c = u->master_name; *c != '\0'; c++) {
        if ((unsigned char)*c <= ' ' || *c == 0x7f) {
            return url_fail(e, "master name has a space or control character");
        }
    }
    p += len;
    if (*p == '?') {
        do {
            p++;
            len = strcspn(p, "&#");
            if (parse_sentinel_option(u, p, len, &seen, e) != 0) {
                return SLUICE_EINVAL;
            }
            p += len;
        } while (*p == '&');
    }
    if (*p != '\0') {
        char safe[128];
        return url_fail(e, "unexpected \"%s\" after the master name%s",
                        redacted(p, safe, sizeof(safe)),
                        *p == '/' ? " (a db is given as ?db=N)" : "");
    }
    return 0;
}

/* "?db=N" (or nothing) after a unix socket path. */
static int parse_unix_query(sluice_url *u, const char *q, url_err *e) {
    size_t len;
    if (*q == '\0') {
        return 0;
    }
    if (*q != '?') {
        char safe[128];
        return url_fail(e, "unexpected \"%s\" after the socket path",
                        redacted(q, safe, sizeof(safe)));
    }
    q++;
    if (strncmp(q, "db=", 3) != 0) {
        return url_fail(e, "unknown query parameter \"%.*s\" (only db=N is accepted)",
                        (int)strcspn(q, "=&#"), q);
    }
    q += 3;
    len = strcspn(q, "&#");
    if (parse_db(u, q, len, e) != 0) {
        return SLUICE_EINVAL;
    }
    if (q[len] != '\0') {
        char safe[128];
        return url_fail(e, "unexpected \"%s\" after db=%.*s", redacted(q + len, safe, sizeof(safe)),
                        (int)len, q);
    }
    return 0;
}

/* After "unix://". */
static int parse_unix(sluice_url *u, const char *s, url_err *e) {
    const char *path = s;
    size_t len;
    u->is_unix = 1;
    if (s[0] != '/') {
        const char *at = strstr(s, "@/");
        if (at != NULL) {
            if (parse_userinfo(u, s, (size_t)(at - s), e) != 0) {
                return SLUICE_EINVAL;
            }
            path = at + 1;
        }
    }
    len = strcspn(path, "?#");
    if (len == 0) {
        return url_fail(e, "unix socket path is empty (expected unix:///path/to/socket)");
    }
    /* the relative "path" may be credentials missing their '@/': do not echo it */
    if (path[0] != '/') {
        return url_fail(e, "unix socket path is relative (expected unix:///path/to/socket)");
    }
    if (len > URL_PATH_MAX) {
        return url_fail(e, "unix socket path is %zu bytes; the limit is %zu", len, URL_PATH_MAX);
    }
    memcpy(u->path, path, len);
    u->path[len] = '\0';
    return parse_unix_query(u, path + len, e);
}

/* Refuses spaces and control characters anywhere: they are typos or injection attempts. */
static int check_chars(const char *s, size_t n, url_err *e) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ') {
            return url_fail(e, "URL has a space at position %zu (percent-encode it as %%20)", i);
        }
        if (c < 0x20 || c == 0x7f) {
            return url_fail(e, "URL has control character 0x%02x at position %zu", c, i);
        }
    }
    return 0;
}

enum { FORM_TCP, FORM_UNIX, FORM_CLUSTER, FORM_SENTINEL };

static const struct scheme {
    const char *name;
    int form, tls;
} schemes[] = {
    {"redis://", FORM_TCP, 0},
    {"rediss://", FORM_TCP, 1},
    {"unix://", FORM_UNIX, 0},
    {"redis+cluster://", FORM_CLUSTER, 0},
    {"rediss+cluster://", FORM_CLUSTER, 1},
    {"redis+sentinel://", FORM_SENTINEL, 0},
    {"rediss+sentinel://", FORM_SENTINEL, 1},
};

static int parse_scheme(sluice_url *u, const char *s, url_err *e) {
    const char *sep;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        const struct scheme *k = &schemes[i];
        size_t n = strlen(k->name);
        if (strncasecmp(s, k->name, n) != 0) {
            continue;
        }
        u->is_tls = k->tls;
        switch (k->form) {
        case FORM_TCP:
            return parse_tcp(u, s + n, e);
        case FORM_UNIX:
            return parse_unix(u, s + n, e);
        case FORM_CLUSTER:
            return parse_cluster(u, s + n, k->name, e);
        default:
            return parse_sentinel(u, s + n, k->name, e);
        }
    }
    sep = strstr(s, "://");
    if (sep != NULL && strcspn(s, ":@/") == (size_t)(sep - s)) {
        return url_fail(e,
                        "unknown scheme \"%.*s\" (expected redis://, rediss://, unix://, "
                        "redis+cluster://, rediss+cluster://, redis+sentinel:// or "
                        "rediss+sentinel://)",
                        (int)(sep - s), s);
    }
    return url_fail(e, "URL has no scheme (expected redis://host[:port][/db] or unix:///path)");
}

int sluice_url_parse(sluice_url *out, const char *s, char *err, size_t errlen) {
    url_err e = {err, errlen};
    size_t n;
    int rc;
    if (out != NULL) {
        memset(out, 0, sizeof(*out));
    }
    if (out == NULL || s == NULL) {
        return url_fail(&e, "missing URL");
    }
    out->port = 6379;
    n = strnlen(s, SLUICE_URL_MAX + 1);
    if (n > SLUICE_URL_MAX) {
        return url_fail(&e, "URL is longer than %d bytes", SLUICE_URL_MAX);
    }
    if (n == 0) {
        return url_fail(&e, "URL is empty");
    }
    rc = check_chars(s, n, &e);
    if (rc == 0) {
        rc = parse_scheme(out, s, &e);
    }
    if (rc != 0) {
        memset(out, 0, sizeof(*out)); /* no half-parsed password left behind */
    }
    return rc;
}

/* Appends the user, percent-encoding anything outside the unreserved set. */
static size_t encode_user(char *dst, size_t cap, const char *user) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)user; *p != '\0' && o + 4 < cap; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            dst[o++] = (char)*p;
        } else {
            dst[o++] = '%';
            dst[o++] = hex[*p >> 4];
            dst[o++] = hex[*p & 15];
        }
    }
    dst[o] = '\0';
    return o;
}

/* The scheme `u` was parsed from, "redis://" to "rediss+sentinel://". */
static const char *scheme_of(const sluice_url *u) {
    int form = u->is_sentinel  ? FORM_SENTINEL
               : u->is_cluster ? FORM_CLUSTER
               : u->is_unix    ? FORM_UNIX
                               : FORM_TCP;
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        if (schemes[i].form == form && schemes[i].tls == (u->is_tls != 0)) {
            return schemes[i].name;
        }
    }
    return "redis://";
}

/* SCHEME://AUTH@h1:p1,h2:p2 (IPv6 hosts in brackets) of a cluster or sentinel URL; returns the
 * bytes written (may exceed len when cut, as snprintf). */
static size_t redact_seeds(const sluice_url *u, const char *auth, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "%s%s", scheme_of(u), auth);
    for (int i = 0; i < u->nseeds && o < len; i++) {
        const sluice_url_seed *s = &u->seeds[i];
        int v6 = strchr(s->host, ':') != NULL;
        o += (size_t)snprintf(buf + o, len - o, v6 ? "%s[%s]:%d" : "%s%s:%d", i ? "," : "", s->host,
                              s->port);
    }
    return o;
}

/* ...the sentinels' part, then /MASTER?db=N&sentinel_user=U&sentinel_password=*** */
static void redact_sentinel(const sluice_url *u, const char *auth, char *buf, size_t len) {
    char name[3 * sizeof(u->master_name)], suser[3 * sizeof(u->sentinel_user)];
    size_t o = redact_seeds(u, auth, buf, len);
    const char *sep = "?";
    encode_user(name, sizeof(name), u->master_name);
    if (o < len) {
        o += (size_t)snprintf(buf + o, len - o, "/%s", name);
    }
    if (u->db != 0 && o < len) {
        o += (size_t)snprintf(buf + o, len - o, "?db=%d", u->db);
        sep = "&";
    }
    if (u->sentinel_auth && o < len) {
        encode_user(suser, sizeof(suser), u->sentinel_user);
        snprintf(buf + o, len - o, "%ssentinel_user=%s&sentinel_password=%s", sep, suser,
                 u->sentinel_password[0] ? "***" : "");
    }
}

void sluice_url_redact(const sluice_url *u, char *buf, size_t len) {
    char auth[3 * sizeof(u->user) + 8];
    size_t a = 0;
    if (buf == NULL || len == 0) {
        return;
    }
    if (u == NULL) {
        snprintf(buf, len, "(no url)");
        return;
    }
    if (u->user[0] != '\0' || u->password[0] != '\0') {
        a = encode_user(auth, sizeof(auth) - 6, u->user);
        a += (size_t)snprintf(auth + a, sizeof(auth) - a, "%s@", u->password[0] ? ":***" : "");
    }
    auth[a] = '\0';
    if (u->is_sentinel) {
        redact_sentinel(u, auth, buf, len);
    } else if (u->is_cluster) {
        redact_seeds(u, auth, buf, len);
    } else if (u->is_unix) {
        snprintf(buf, len, u->db != 0 ? "unix://%s%s?db=%d" : "unix://%s%s", auth, u->path, u->db);
    } else if (strchr(u->host, ':') != NULL) {
        snprintf(buf, len, u->db != 0 ? "%s%s[%s]:%d/%d" : "%s%s[%s]:%d", scheme_of(u), auth,
                 u->host, u->port, u->db);
    } else {
        snprintf(buf, len, u->db != 0 ? "%s%s%s:%d/%d" : "%s%s%s:%d", scheme_of(u), auth, u->host,
                 u->port, u->db);
    }
}

int sluice_url_supported(const sluice_url *u, char *err, size_t errlen) {
    url_err e = {err, errlen};
    if (u == NULL) {
        return url_fail(&e, "missing URL");
    }
    return 0; /* every parsed form, on the blocking connection (the async one says its own) */
}

const char *sluice_url_default(void) {
    const char *env = getenv("SLUICE_REDIS_URL");
    return env != NULL && env[0] != '\0' ? env : SLUICE_DEFAULT_REDIS_URL;
}
