/* SPDX-License-Identifier: MIT */
/*
 * admin_limit.c - `sluice-admin limit`: the rate limits a queue's admission checks.
 *
 *   limit QUEUE set NAME SCOPE RATE [--algorithm A]   SCOPE queue | tenant | client | drain |
 *                                                     drain-tenant
 *   limit QUEUE set NAME inflight|inflight-tenant N   entries in flight across the workers
 *                                                     (in all, or per tenant)
 *   limit QUEUE list                                  the limits and how often each refused
 *   limit QUEUE del NAME
 *   limit QUEUE show NAME [VALUE]                     the state of one limit key (VALUE: the
 *                                                     tenant or client; none for `queue`)
 *
 * Limits are written only through the function sluice_limits_config, which validates them and
 * keeps meta `limits` (the count admission reads) in step with the limits hash.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/limit.h"
#include "sluice/status.h"

#include "admin.h"

int admin_limits_config(admin *a, const sluice_keys *k, int nargs, const char **args) {
    const char *keys[] = {k->limits, k->meta};
    redisReply *r = NULL;
    int st = sluice_conn_fcall(a->conn, SLUICE_FN_LIMITS_CONFIG, 2, keys, NULL, nargs, args, NULL,
                               &r, NULL);
    if (st != 0) {
        admin_err(a, "%s",
                  r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : sluice_conn_errstr(a->conn));
        freeReplyObject(r);
        return st == SLUICE_ECONFIG ? SLUICE_EXIT_USAGE : SLUICE_EXIT_REDIS;
    }
    freeReplyObject(r);
    return 0;
}

/* `set NAME SCOPE SPEC` or `del NAME` on every partition (one: a queue not partitioned); a
 * whole-queue scope gets each partition's share, and QUEUE's meta keeps the whole. */
static int config_all(admin *a, const char *act, const char *name, const char *scope,
                      const char *spec, long long *parts) {
    char what[48];
    int drain =
        scope != NULL && (strncmp(scope, "drain", 5) == 0 || strncmp(scope, "inflight", 8) == 0);
    snprintf(what, sizeof(what), "a %s limit", scope != NULL ? scope : "");
    int rc = admin_parts_count(a, parts);
    if (rc == 0 && *parts > 1) { /* every partition first: a failed call changes nothing */
        rc = admin_parts_check(a, *parts, drain ? what : NULL);
    }
    for (long long i = 0; rc == 0 && i < *parts; i++) {
        sluice_keys k;
        char share[96];
        if ((rc = admin_part_keys(a, i, &k)) != 0) {
            break;
        }
        if (scope != NULL) {
            admin_spec_split(spec, admin_scope_split(scope) ? *parts : 1, share, sizeof(share));
            const char *args[] = {act, name, scope, share};
            rc = admin_limits_config(a, &k, 4, args);
        } else {
            const char *args[] = {act, name};
            rc = admin_limits_config(a, &k, 2, args);
        }
        if (rc != 0) {
            admin_parts_stopped(a, i, *parts);
        }
    }
    if (rc == 0 && *parts > 1) {
        char field[128], whole[128];
        snprintf(field, sizeof(field), "limit_whole:%s", name);
        snprintf(whole, sizeof(whole), "%s %s", scope != NULL ? scope : "", spec ? spec : "");
        redisReply *r;
        rc =
            scope != NULL && admin_scope_split(scope)
                ? admin_call(a, &r, "recording the whole limit", "HSET", a->keys.meta, field, whole,
                             NULL)
                : admin_call(a, &r, "recording the whole limit", "HDEL", a->keys.meta, field, NULL);
        if (rc == 0) {
            freeReplyObject(r);
        }
    }
    return rc;
}

/* "gcra:5:1000" as "gcra    5/1s" (the durations as they are written in a RATE); an inflight
 * count or anything else as it is. */
static const char *fmt_rate(const char *spec, char *buf, size_t len) {
    char alg[16], period[32], precision[32];
    long long n, p, prec = 0;
    if (sscanf(spec, "%15[a-z]:%lld:%lld:%lld", alg, &n, &p, &prec) >= 3 &&
        sluice_duration_format(p, period, sizeof(period)) == 0) {
        int k = snprintf(buf, len, "%-7s %lld/%s", alg, n, period);
        if (prec > 0 && k > 0 && (size_t)k < len &&
            sluice_duration_format(prec, precision, sizeof(precision)) == 0) {
            snprintf(buf + k, len - (size_t)k, "~%s", precision);
        }
    } else {
        snprintf(buf, len, "%-7s %s", "leases", spec);
    }
    return buf;
}

/* 1 when the queue is fair (meta `fair`); 0 when not, or when that cannot be read. */
static int queue_fair(admin *a) {
    const char *argv[] = {"HGET", a->keys.meta, "fair"};
    redisReply *r = NULL;
    int fair = sluice_conn_command(a->conn, 3, argv, NULL, &r, NULL) == 0 &&
               r->type == REDIS_REPLY_STRING && strcmp(r->str, "1") == 0;
    freeReplyObject(r);
    return fair;
}

static int limit_set(admin *a) {
    char spec[96], rate[300], err[300];
    if (a->nargs != 5) {
        admin_err(a, "usage: limit QUEUE set NAME SCOPE RATE|COUNT [--algorithm A]");
        return SLUICE_EXIT_USAGE;
    }
    const char *name = a->args[2], *scope = a->args[3];
    static const char *const scopes[] = {"queue",    "tenant",       "client",         "drain",
                                         "inflight", "drain-tenant", "inflight-tenant"};
    size_t si = 0;
    while (si < sizeof(scopes) / sizeof(scopes[0]) && strcmp(scope, scopes[si]) != 0) {
        si++;
    }
    if (si == sizeof(scopes) / sizeof(scopes[0])) {
        admin_err(a,
                  "scope '%s' is not queue, tenant, client, drain, drain-tenant, inflight or "
                  "inflight-tenant",
                  scope);
        return SLUICE_EXIT_USAGE;
    }
    int count = strncmp(scope, "inflight", 8) == 0; /* entries in flight, not a rate */
    if (count) {
        long long n;
        if (sluice_parse_ll(scope, a->args[4], 1, SLUICE_LIMIT_COUNT_MAX, &n, err, sizeof(err)) !=
            0) {
            admin_err(a, "%s", err);
            return SLUICE_EXIT_USAGE;
        }
        snprintf(spec, sizeof(spec), "%lld", n);
    } else {
        sluice_limit l;
        snprintf(rate, sizeof(rate), "%s=%s", name, a->args[4]);
        if (sluice_limit_parse(rate, (sluice_limit_alg)a->algorithm, &l, err, sizeof(err)) != 0 ||
            sluice_limit_spec(&l, spec, sizeof(spec)) != 0) {
            admin_err(a, "%s", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    long long parts = 1;
    int rc = admin_connect(a);
    if (rc == 0 && (rc = config_all(a, "set", name, scope, spec, &parts)) == 0) {
        printf("limit %s on %s: %s %s %s\n", name, a->queue, scope,
               count ? "leases" : sluice_limit_alg_name((sluice_limit_alg)a->algorithm),
               a->args[4]);
        if (parts > 1) {
            char share[96], shown[80];
            admin_spec_split(spec, admin_scope_split(scope) ? parts : 1, share, sizeof(share));
            printf("in each of its %lld partitions: %s (%s)\n", parts,
                   fmt_rate(share, shown, sizeof(shown)),
                   !admin_scope_split(scope)        ? "as it is: a tenant lives in one partition"
                   : strncmp(spec, "gate:", 5) == 0 ? "a gate: one per interval in each partition"
                                                    : "its share of the whole, like the capacity");
        }
        if (strstr(scope, "-tenant") != NULL && !queue_fair(a)) {
            printf("note: %s applies to fair queues (sluice-admin fair %s on): a plain queue "
                   "is one line, where holding one tenant back would hold back all behind it\n",
                   scope, a->queue);
        }
    }
    return rc;
}

static int limit_del(admin *a) {
    if (a->nargs != 3) {
        admin_err(a, "usage: limit QUEUE del NAME");
        return SLUICE_EXIT_USAGE;
    }
    long long parts = 1;
    int rc = admin_connect(a);
    if (rc == 0 && (rc = config_all(a, "del", a->args[2], NULL, NULL, &parts)) == 0) {
        printf("limit %s on %s deleted\n", a->args[2], a->queue);
    }
    return rc;
}

/* A stats counter summed over the partitions' stats hashes. */
static long long counted(redisReply *const *st, long long parts, const char *field) {
    long long n = 0;
    for (long long i = 0; i < parts; i++) {
        n += sluice_reply_ll(sluice_reply_field(st[i], field), 0);
    }
    return n;
}

static int limit_list(admin *a) {
    redisReply *r, *st[SLUICE_PARTITIONS_MAX] = {NULL};
    long long parts = 1;
    int rc = admin_connect(a);
    if (rc != 0 || (rc = admin_parts_count(a, &parts)) != 0 ||
        (rc = admin_call(a, &r, "HGETALL", "HGETALL", a->keys.limits, NULL)) != 0) {
        return rc;
    }
    for (long long i = 0; rc == 0 && i < parts; i++) { /* refusals: in every partition */
        sluice_keys k;
        if ((rc = admin_part_keys(a, i, &k)) == 0) {
            rc = admin_call(a, &st[i], "HGETALL", "HGETALL", k.stats, NULL);
        }
    }
    if (rc != 0) {
        freeReplyObject(r);
        for (long long i = 0; i < parts; i++) {
            freeReplyObject(st[i]);
        }
        return rc;
    }
    if (a->json) {
        printf("{\"queue\":\"%s\",\"limits\":[", a->queue);
    } else if (r->elements == 0) {
        printf("queue %s has no limits\n", a->queue);
    } else {
        printf("%-24s %-15s %-32s %12s\n", "NAME", "SCOPE", "ALG     RATE", "REFUSED");
    }
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        char field[128], scope[24] = "?", spec[96] = "?";
        snprintf(field, sizeof(field), "limited:%s", r->element[i]->str);
        long long refused = counted(st, parts, field);
        sscanf(r->element[i + 1]->str, "%23s %95s", scope, spec);
        if (a->json) {
            printf("%s{\"name\":\"%s\",\"scope\":\"%s\",\"spec\":\"%s\",\"refused\":%lld}",
                   i ? "," : "", r->element[i]->str, scope, spec, refused);
        } else {
            char rate[80];
            printf("%-24s %-15s %-32s %12lld\n", r->element[i]->str, scope,
                   fmt_rate(spec, rate, sizeof(rate)), refused);
        }
    }
    if (a->json) {
        printf("],\"limited\":%lld}\n", counted(st, parts, "limited"));
    }
    freeReplyObject(r);
    for (long long i = 0; i < parts; i++) {
        freeReplyObject(st[i]);
    }
    return 0;
}

/* A gcra value "TAT_US COUNT PERIOD_MS" (a whole TAT) or "TAT_US FRAC COUNT PERIOD_MS" at Redis
 * time now_us, in words. */
static void show_gcra(const char *v, long long now_us) {
    long long tat, n, p;
    double frac = 0;
    int end = 0;
    if (sscanf(v, "%lld %lld %lld%n", &tat, &n, &p, &end) != 3 || v[end] != '\0') {
        end = 0;
        if (sscanf(v, "%lld %lf %lld %lld%n", &tat, &frac, &n, &p, &end) != 4 || v[end] != '\0') {
            end = -1;
        }
    }
    if (end < 0 || n < 1 || p < 1) {
        printf("  not gcra state: %s\n", v);
        return;
    }
    double debt = (double)(tat - now_us) + frac, t = (double)p * 1000.0 / (double)n;
    debt = debt < 0 ? 0 : debt;
    long long left = (long long)(((double)p * 1000.0 - debt) / t + 1e-9);
    printf("  %lld of %lld left now (written for %lld/%lldms); full again in %.0f ms\n",
           left < 0 ? 0 : left, n, n, p, debt / 1000.0 + 0.4999);
}

/* A window hash's fields "P:PREC:" (total), "P:PREC:l" (last block), "P:PREC:BLOCK", or a
 * fixed window's {s, c} (the layout before a fixed window was one integer), in words. */
static void show_hash(const redisReply *v, long long now_us) {
    long long s = -1, c = -1;
    for (size_t i = 0; i + 1 < v->elements; i += 2) {
        const char *f = v->element[i]->str, *x = v->element[i + 1]->str;
        size_t fl = strlen(f);
        if (strcmp(f, "s") == 0) {
            s = atoll(x);
        } else if (strcmp(f, "c") == 0) {
            c = atoll(x);
        } else if (fl > 0 && f[fl - 1] == ':') {
            printf("  window %.*s: %s counted in the window\n", (int)(fl - 1), f, x);
        } else if (fl > 0 && f[fl - 1] != 'l') {
            printf("    block %s: %s\n", f, x);
        }
    }
    if (s >= 0 && c >= 0) {
        printf("  fixed window from %lld ms ago: %lld counted\n", (now_us - s) / 1000, c);
    }
}

/* A fixed window's integer TAG * 2^31 + COUNT (TAG the window's index modulo 2^21) at Redis time
 * now_us for a period of period_ms, in words. */
static void show_fixed(const char *v, long long now_us, long long period_ms, long long ttl) {
    long long x = atoll(v), span = 2147483648LL;
    if (period_ms < 1 || x < 0) {
        printf("  not fixed window state: %s\n", v);
    } else if (x / span == (now_us / (period_ms * 1000)) % 2097152) {
        printf("  fixed window: %lld counted, ends in %lld ms\n", x % span, ttl < 0 ? 0 : ttl);
    } else {
        printf("  an earlier fixed window: nothing counted in this one\n");
    }
}

/* The state of one limit key as Redis holds it, in words: enough to see why a request was
 * refused. The key is the limit's (sluice_key_queue_limit), found from its configuration. */
static int limit_show(admin *a) {
    char key[SLUICE_KEY_MAX + 300], alg[16] = "";
    long long period_ms = 0;
    if (a->nargs != 3 && a->nargs != 4) {
        admin_err(a, "usage: limit QUEUE show NAME [TENANT|CLIENT]");
        return SLUICE_EXIT_USAGE;
    }
    const char *name = a->args[2], *value = a->nargs == 4 ? a->args[3] : "";
    redisReply *cfg, *t, *ttl, *now, *v;
    int rc = admin_connect(a);
    if (rc != 0 || (rc = admin_call(a, &cfg, "HGET", "HGET", a->keys.limits, name, NULL)) != 0) {
        return rc;
    }
    int found = cfg->type == REDIS_REPLY_STRING, parsed = 0;
    if (found) {
        parsed = sscanf(cfg->str, "%*s %15[a-z]:", alg) == 1;
        (void)sscanf(cfg->str, "%*s fixed:%*d:%lld", &period_ms);
        printf("limit %s on %s: %s\n", name, a->queue, cfg->str);
    }
    freeReplyObject(cfg);
    if (!found) {
        admin_err(a, "queue %s has no limit '%s' (see: limit %s list)", a->queue, name, a->queue);
        return SLUICE_EXIT_USAGE;
    }
    if (!parsed) {
        printf("  a count of entries in flight: no state of its own\n");
        return 0;
    }
    if (sluice_key_queue_limit(&a->keys, name, alg, value, strlen(value), key, sizeof(key)) != 0) {
        admin_err(a, "NAME or VALUE too long");
        return SLUICE_EXIT_USAGE;
    }
    if ((rc = admin_call(a, &t, "TYPE", "TYPE", key, NULL)) != 0) {
        return rc;
    }
    if ((rc = admin_call(a, &ttl, "PTTL", "PTTL", key, NULL)) != 0) {
        freeReplyObject(t);
        return rc;
    }
    if ((rc = admin_call(a, &now, "TIME", "TIME", NULL)) != 0) {
        freeReplyObject(t);
        freeReplyObject(ttl);
        return rc;
    }
    long long now_us = now->type == REDIS_REPLY_ARRAY && now->elements == 2
                           ? atoll(now->element[0]->str) * 1000000 + atoll(now->element[1]->str)
                           : 0;
    freeReplyObject(now);
    const char *type = t->type == REDIS_REPLY_STATUS ? t->str : "none";
    if (ttl->integer >= 0) {
        printf("%s: %s, expires in %lld ms\n", key, type, ttl->integer);
    } else {
        printf("%s: %s\n", key, type);
    }
    if (strcmp(type, "string") == 0 && admin_call(a, &v, "GET", "GET", key, NULL) == 0) {
        if (strcmp(alg, "gate") == 0) {
            printf("  gate closed for %lld ms more\n", ttl->integer < 0 ? 0 : ttl->integer);
        } else if (strcmp(alg, "fixed") == 0) {
            show_fixed(v->str, now_us, period_ms, ttl->integer);
        } else {
            show_gcra(v->str, now_us);
        }
        freeReplyObject(v);
    } else if (strcmp(type, "hash") == 0 &&
               admin_call(a, &v, "HGETALL", "HGETALL", key, NULL) == 0) {
        show_hash(v, now_us);
        freeReplyObject(v);
    } else if (strcmp(type, "zset") == 0 && admin_call(a, &v, "ZCARD", "ZCARD", key, NULL) == 0) {
        printf("  %lld requests in the log (some may have expired since the last check)\n",
               v->integer);
        freeReplyObject(v);
    } else if (strcmp(type, "none") == 0) {
        printf("  no state: nothing counted within the limit's period\n");
    }
    freeReplyObject(t);
    freeReplyObject(ttl);
    return 0;
}

int admin_limit(admin *a) {
    const char *act = a->nargs >= 2 ? a->args[1] : "";
    if (strcmp(act, "set") == 0) {
        return limit_set(a);
    }
    if (strcmp(act, "del") == 0) {
        return limit_del(a);
    }
    if (strcmp(act, "list") == 0 && a->nargs == 2) {
        return limit_list(a);
    }
    if (strcmp(act, "show") == 0) {
        return limit_show(a);
    }
    admin_err(a, "usage: limit QUEUE set|list|del|show ... (see --help)");
    return SLUICE_EXIT_USAGE;
}
