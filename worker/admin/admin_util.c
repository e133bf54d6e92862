/* SPDX-License-Identifier: MIT */
/*
 * admin_util.c - sluice-admin's Redis calls, reply helpers and output helpers (see admin.h).
 *
 * Every Redis call goes through admin_callv(), which turns any failure (unreachable, timeout,
 * an error reply) into one line on stderr and exit code 3, so the subcommands read as a list of
 * steps. No retries: an operator's command either does what it says or says why not.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/cli.h"
#include "sluice/envelope.h"
#include "sluice/queue.h"
#include "sluice/status.h"

#include "admin.h"

void admin_err(const admin *a, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "sluice-admin %s: ", a->cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int admin_connect(admin *a) {
    int st = sluice_conn_ensure(a->conn);
    if (st != 0) {
        admin_err(a, "%s: %s", sluice_strerror(st), sluice_conn_errstr(a->conn));
        return SLUICE_EXIT_REDIS;
    }
    return 0;
}

int admin_callv(admin *a, redisReply **out, const char *what, int argc, const char **argv,
                const size_t *lens) {
    redisReply *r = NULL;
    int st = sluice_conn_command(a->conn, argc, argv, lens, &r, NULL);
    if (st != 0) {
        if (r != NULL && r->type == REDIS_REPLY_ERROR) {
            admin_err(a, "%s: redis replied: %s", what, r->str);
        } else {
            admin_err(a, "%s: %s: %s", what, sluice_strerror(st), sluice_conn_errstr(a->conn));
        }
        freeReplyObject(r);
        *out = NULL;
        return SLUICE_EXIT_REDIS;
    }
    *out = r;
    return 0;
}

int admin_call(admin *a, redisReply **out, const char *what, ...) {
    const char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, what);
    for (const char *s = va_arg(ap, const char *); s != NULL && argc < 32;
         s = va_arg(ap, const char *)) {
        argv[argc++] = s;
    }
    va_end(ap);
    return admin_callv(a, out, what, argc, argv, NULL);
}

/* TYPE of `key` into buf ("none", "stream", ...). */
static int key_type(admin *a, const char *key, char *buf, size_t len) {
    redisReply *r;
    int rc = admin_call(a, &r, "TYPE", "TYPE", key, NULL);
    if (rc != 0) {
        return rc;
    }
    snprintf(buf, len, "%s", r->type == REDIS_REPLY_STATUS ? r->str : "none");
    freeReplyObject(r);
    return 0;
}

/*
 * The stream key exists as soon as a worker created the group (MKSTREAM); the list backend
 * has its list, or at least meta.list_depth once anything was admitted. A queue with neither
 * is treated as a stream queue, the default.
 */
int admin_detect_backend(admin *a) {
    char t[32];
    int rc;
    if (a->backend_given) {
        return 0;
    }
    a->backend = SLUICE_BACKEND_STREAM;
    if ((rc = key_type(a, a->keys.stream, t, sizeof(t))) != 0 || strcmp(t, "stream") == 0) {
        return rc;
    }
    if ((rc = key_type(a, a->keys.list, t, sizeof(t))) != 0) {
        return rc;
    }
    if (strcmp(t, "list") == 0) {
        a->backend = SLUICE_BACKEND_LIST;
        return 0;
    }
    redisReply *r;
    rc = admin_call(a, &r, "HEXISTS", "HEXISTS", a->keys.meta, "list_depth", NULL);
    if (rc == 0 && sluice_reply_ll(r, 0) == 1) {
        a->backend = SLUICE_BACKEND_LIST;
    }
    freeReplyObject(r);
    return rc;
}

void admin_json_str(FILE *f, const char *s, size_t len) {
    sluice_cli_json_str(f, s, len);
}

const char *admin_safe(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; s[n] != '\0' && n + 1 < cap; n++) {
        unsigned char ch = (unsigned char)s[n];
        buf[n] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    buf[n] = '\0';
    return buf;
}

void admin_print_safe(FILE *f, const char *s, size_t len, size_t max) {
    size_t n = len < max ? len : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f) {
            fputc(ch, f);
        } else {
            fprintf(f, "\\x%02x", ch);
        }
    }
    if (len > n) {
        fputs("...", f);
    }
}

char *admin_fmt_ms(char *buf, size_t len, long long ms) {
    if (ms < 0) {
        snprintf(buf, len, "-");
    } else if (ms < 1000) {
        snprintf(buf, len, "%lldms", ms);
    } else if (ms < 60000) {
        snprintf(buf, len, "%.1fs", (double)ms / 1000.0);
    } else if (ms < 3600000) {
        snprintf(buf, len, "%lldm%02llds", ms / 60000, (ms / 1000) % 60);
    } else {
        snprintf(buf, len, "%lldh%02lldm", ms / 3600000, (ms / 60000) % 60);
    }
    return buf;
}

long long admin_capacity_value(const redisReply *r) {
    long long cap;
    if (r == NULL || r->type == REDIS_REPLY_NIL) {
        return ADMIN_CAPACITY_UNSET;
    }
    if (r->type != REDIS_REPLY_STRING || sluice_capacity_parse(r->str, r->len, &cap) != 0) {
        return ADMIN_CAPACITY_INVALID;
    }
    return cap;
}

/* ---- stream entries and envelopes ---- */

char *admin_id_time(const char *id, char *buf, size_t len) {
    long long ms = strtoll(id, NULL, 10);
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03lld UTC", ms % 1000);
    return buf;
}

void admin_show_envelope(const char *m, size_t len, size_t max_payload) {
    sluice_envelope env;
    sluice_header h[SLUICE_ENVELOPE_MAX_HEADERS];
    char err[200];
    if (sluice_envelope_decode((const unsigned char *)m, len, 0, &env, h,
                               SLUICE_ENVELOPE_MAX_HEADERS, err, sizeof(err)) != 0) {
        printf("  envelope      undecodable (%zu bytes): %s\n", len, err);
        return;
    }
    if (env.tenant != NULL) {
        printf("  tenant        ");
        admin_print_safe(stdout, env.tenant, env.tenant_len, 200);
        printf("\n");
    }
    for (size_t i = 0; i < env.nheaders; i++) {
        printf("  header        ");
        admin_print_safe(stdout, h[i].name, h[i].name_len, 200);
        printf(": ");
        admin_print_safe(stdout, h[i].value, h[i].value_len, 500);
        printf("\n");
    }
    printf("  payload       %zu bytes: ", env.payload_len);
    admin_print_safe(stdout, (const char *)env.payload, env.payload_len, max_payload);
    printf("\n");
}
