/* SPDX-License-Identifier: MIT */
/*
 * cli.c - strict option parsing and number formatting for the sluice binaries (the sluice_cli
 * static library: linked by the binaries and tests only, never part of libsluice).
 *
 * The parsers accept exactly one spelling of a number: optional '-' (integers only), decimal
 * digits, and for sizes one k/m/g suffix. Leading whitespace, '+', hex, empty strings and
 * trailing characters are refused, because a typo in a capacity or a concurrency should stop
 * the program with a message naming the option, not silently become another value.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "sluice/cli.h"
#include "sluice/envelope.h"
#include "sluice/log.h"
#include "sluice/redis.h"
#include "sluice/status.h"

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

static int usage_err(char *err, size_t errlen, const char *fmt, ...) PRINTF_LIKE(3, 4);

static int usage_err(char *err, size_t errlen, const char *fmt, ...) {
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return SLUICE_EINVAL;
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

static const char *opt_name(const char *opt) {
    return opt != NULL ? opt : "value";
}

/*
 * Parses the item s[0..len), which is followed by '\0' or ','. strtoll stops at either, so the
 * end check is exact without copying the item.
 */
static int parse_ll_item(const char *opt, const char *s, size_t len, long long min, long long max,
                         long long *out, char *err, size_t errlen) {
    char *end = NULL;
    long long v;
    int shown = len > 200 ? 200 : (int)len; /* for messages only */
    int digits_first = len > 0 && (is_digit(s[0]) || (s[0] == '-' && len > 1 && is_digit(s[1])));
    if (!digits_first) {
        return usage_err(err, errlen, "%s: \"%.*s\" is not a number", opt_name(opt), shown, s);
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (end != s + len) {
        return usage_err(err, errlen, "%s: \"%.*s\" is not a number", opt_name(opt), shown, s);
    }
    if (errno == ERANGE || v < min || v > max) {
        return usage_err(err, errlen, "%s: %.*s is out of range %lld..%lld", opt_name(opt), shown,
                         s, min, max);
    }
    *out = v;
    return 0;
}

int sluice_parse_ll(const char *opt, const char *s, long long min, long long max, long long *out,
                    char *err, size_t errlen) {
    if (s == NULL || out == NULL) {
        return usage_err(err, errlen, "%s: missing value", opt_name(opt));
    }
    return parse_ll_item(opt, s, strlen(s), min, max, out, err, errlen);
}

static size_t size_multiplier(char c) {
    switch (c) {
    case 'k':
    case 'K':
        return 1024u;
    case 'm':
    case 'M':
        return 1024u * 1024u;
    case 'g':
    case 'G':
        return 1024u * 1024u * 1024u;
    default:
        return 0;
    }
}

int sluice_parse_size(const char *opt, const char *s, size_t min, size_t max, size_t *out,
                      char *err, size_t errlen) {
    char *end = NULL;
    unsigned long long v;
    size_t mult = 1;
    if (s == NULL || out == NULL) {
        return usage_err(err, errlen, "%s: missing value", opt_name(opt));
    }
    /* strtoull would accept (and negate) a '-'; insist on a digit first */
    if (!is_digit(s[0])) {
        return usage_err(err, errlen, "%s: \"%s\" is not a size", opt_name(opt), s);
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (*end != '\0') {
        mult = size_multiplier(*end);
        if (mult == 0 || end[1] != '\0') {
            return usage_err(err, errlen,
                             "%s: \"%s\" is not a size (bytes, or a number with k, m "
                             "or g)",
                             opt_name(opt), s);
        }
    }
    if (errno == ERANGE || v > SIZE_MAX / mult || v * mult < min || v * mult > max) {
        return usage_err(err, errlen, "%s: %s is out of range %zu..%zu", opt_name(opt), s, min,
                         max);
    }
    *out = (size_t)(v * mult);
    return 0;
}

int sluice_parse_ll_list(const char *opt, const char *s, long long min, long long max,
                         long long *out, size_t cap, size_t *n, char *err, size_t errlen) {
    size_t count = 0;
    if (s == NULL || out == NULL || n == NULL) {
        return usage_err(err, errlen, "%s: missing value", opt_name(opt));
    }
    *n = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        if (count == cap) {
            return usage_err(err, errlen, "%s: more than %zu values in \"%s\"", opt_name(opt), cap,
                             s);
        }
        if (len == 0) {
            return usage_err(err, errlen, "%s: empty value %zu in \"%s\"", opt_name(opt), count + 1,
                             s);
        }
        if (parse_ll_item(opt, p, len, min, max, &out[count], err, errlen) != 0) {
            return SLUICE_EINVAL;
        }
        count++;
        p += len;
        if (*p == '\0') {
            break;
        }
    }
    *n = count;
    return 0;
}

char *sluice_fmt_count(char *buf, size_t len, unsigned long long v) {
    char tmp[32]; /* 20 digits and 6 separators */
    size_t i = sizeof(tmp) - 1;
    int digits = 0;
    if (buf == NULL || len == 0) {
        return buf;
    }
    tmp[i] = '\0';
    do {
        if (digits > 0 && digits % 3 == 0) {
            tmp[--i] = ',';
        }
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
        digits++;
    } while (v > 0);
    snprintf(buf, len, "%s", tmp + i);
    return buf;
}

int sluice_cli_version(const char *prog) {
    printf("%s %s (data model 1; hiredis %d.%d.%d, libuv %s)\n", prog, SLUICE_VERSION,
           HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH, uv_version_string());
    return SLUICE_EXIT_OK;
}

int sluice_cli_log_level(const char *level, const char *prog, char *err, size_t errlen) {
    int l = sluice_log_level_parse(level);
    if (l < SLUICE_LOG_OFF) {
        snprintf(err, errlen, "--log-level: \"%s\" is not error, warn, info, debug or off", level);
        return -1;
    }
    sluice_log_set_level(l, prog);
    return 0;
}

int sluice_listen_addr_parse(const char *opt, const char *s, struct sockaddr_storage *out,
                             char *err, size_t errlen) {
    char host[64], what[64];
    const char *colon = strrchr(s, ':');
    long long port;
    size_t hl = colon != NULL ? (size_t)(colon - s) : 0;
    if (colon == NULL || hl >= sizeof(host)) {
        snprintf(err, errlen,
                 "%s: \"%s\" is not HOST:PORT (e.g. 127.0.0.1:8080, [::1]:8080, :8080)", opt, s);
        return -1;
    }
    snprintf(what, sizeof(what), "%s port", opt);
    if (sluice_parse_ll(what, colon + 1, 0, 65535, &port, err, errlen) != 0) {
        return -1;
    }
    memset(out, 0, sizeof(*out));
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
        snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), s + 1);
        if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)out) == 0) {
            return 0;
        }
    } else {
        snprintf(host, sizeof(host), "%.*s", (int)hl, s);
        const char *ip = hl == 0 || strcmp(host, "*") == 0 ? "0.0.0.0"
                         : strcmp(host, "localhost") == 0  ? "127.0.0.1"
                                                           : host;
        if (uv_ip4_addr(ip, (int)port, (struct sockaddr_in *)out) == 0) {
            return 0;
        }
    }
    snprintf(err, errlen, "%s: \"%s\" is not an IP address (use 127.0.0.1, [::1] or :PORT)", opt,
             host);
    return -1;
}

/* Text as a JSON value: valid UTF-8 as a JSON string (as is, only quote, backslash and control
 * characters escaped); anything else as {"base64":"..."}, so bytes are never shown as other
 * characters than they are. */
void sluice_cli_json_str(FILE *f, const char *s, size_t len) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (!sluice_utf8_valid(s, len)) {
        const unsigned char *u = (const unsigned char *)s;
        fputs("{\"base64\":\"", f);
        for (size_t i = 0; i < len; i += 3) {
            unsigned v = (unsigned)u[i] << 16 | (i + 1 < len ? (unsigned)u[i + 1] << 8 : 0) |
                         (i + 2 < len ? u[i + 2] : 0);
            fputc(b64[v >> 18 & 63], f);
            fputc(b64[v >> 12 & 63], f);
            fputc(i + 1 < len ? b64[v >> 6 & 63] : '=', f);
            fputc(i + 2 < len ? b64[v & 63] : '=', f);
        }
        fputs("\"}", f);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            fputc('\\', f);
            fputc(ch, f);
        } else if (ch == '\n') {
            fputs("\\n", f);
        } else if (ch == '\t') {
            fputs("\\t", f);
        } else if (ch < 0x20 || ch == 0x7f) {
            fprintf(f, "\\u%04x", ch);
        } else {
            fputc(ch, f); /* UTF-8 bytes as they are */
        }
    }
    fputc('"', f);
}

/* $name, or NULL when unset or empty. */
static const char *env_value(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0' ? v : NULL;
}

int sluice_cli_tls_env(sluice_conn_options *co, char *err, size_t errlen) {
    static const char *const names[] = {"SLUICE_TLS_CA_FILE", "SLUICE_TLS_CA_DIR",
                                        "SLUICE_TLS_CERT_FILE", "SLUICE_TLS_KEY_FILE",
                                        "SLUICE_TLS_SERVER_NAME"};
    const char **fields[] = {&co->tls_ca_file, &co->tls_ca_dir, &co->tls_cert_file,
                             &co->tls_key_file, &co->tls_server_name};
    const char *cert = env_value("SLUICE_TLS_CERT_FILE"), *key = env_value("SLUICE_TLS_KEY_FILE");
    const char *skip = env_value("SLUICE_TLS_INSECURE_SKIP_VERIFY");
    if ((cert == NULL) != (key == NULL)) {
        return usage_err(err, errlen, "%s is set but %s is not: a client certificate needs both",
                         cert != NULL ? "SLUICE_TLS_CERT_FILE" : "SLUICE_TLS_KEY_FILE",
                         cert != NULL ? "SLUICE_TLS_KEY_FILE" : "SLUICE_TLS_CERT_FILE");
    }
    if (skip != NULL && strcmp(skip, "0") != 0 && strcmp(skip, "1") != 0) {
        return usage_err(err, errlen, "SLUICE_TLS_INSECURE_SKIP_VERIFY: \"%s\" is not 0 or 1",
                         skip);
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = env_value(names[i]);
        if (v != NULL) {
            *fields[i] = v;
        }
    }
    if (skip != NULL) {
        co->tls_insecure_skip_verify = skip[0] == '1';
    }
    return 0;
}
