/* SPDX-License-Identifier: MIT */
/*
 * bench_reconnect.c - `sluice-bench reconnect`: what a blocking connection's (re)connect costs,
 * over plain TCP or TLS (a rediss:// URL, the SLUICE_TLS_* variables).
 *
 * Two figures, each the mean time until the connection is ready for calls (TCP connect, the
 * TLS handshake over rediss://, then sluice's own handshake: AUTH, the library check):
 * - new: a new connection object each time (sluice_conn_new, sluice_conn_ensure, free), so
 *   over TLS a full handshake, with the client's TLS context made again (the CA file read);
 * - reconnect: one connection object whose connection the server closes (CLIENT KILL ID from a
 *   second connection, which the server carries out before it answers; not timed), then
 *   reconnected by sluice_conn_ensure: over TLS it offers its last session, and a
 *   server that resumes it (Redis does by default, tls-session-caching) skips the certificate
 *   exchange and its checks.
 * The difference between the two over TLS, against the same two over plain TCP, is what the
 * handshake costs and what session resumption saves.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "sluice/cli.h"
#include "sluice/clock.h"
#include "sluice/redis.h"
#include "sluice/url.h"

#include "bench.h"
#include "bench_util.h"

static const char usage[] = "usage: sluice-bench reconnect [--redis URL] [--count N] [--json]\n"
                            "  --count N  connects of each kind (default 500)\n";

/* The server's id of c's connection (connecting it if needed), or -1 after printing why. */
static long long client_id(sluice_conn *c) {
    const char *argv[] = {"CLIENT", "ID"};
    redisReply *r = NULL;
    long long id = -1;
    if (sluice_conn_command(c, 2, argv, NULL, &r, NULL) == 0 && r->type == REDIS_REPLY_INTEGER) {
        id = r->integer;
    } else {
        fprintf(stderr, "sluice-bench reconnect: CLIENT ID: %s\n", sluice_conn_errstr(c));
    }
    freeReplyObject(r);
    return id;
}

/* Mean microseconds of `count` connects, each with a new connection object. */
static int run_new(const sluice_url *u, long long count, double *us) {
    uint64_t total = 0;
    for (long long i = 0; i < count; i++) {
        uint64_t t0 = sluice_now_ns();
        sluice_conn *c = sluice_conn_new(u, bench_conn_options());
        int st = c != NULL ? sluice_conn_ensure(c) : -1;
        total += sluice_now_ns() - t0;
        if (st != 0) {
            fprintf(stderr, "sluice-bench reconnect: connect %lld: %s\n", i,
                    c != NULL ? sluice_conn_errstr(c) : "out of memory");
            sluice_conn_free(c);
            return SLUICE_EXIT_REDIS;
        }
        sluice_conn_free(c);
    }
    *us = (double)total / 1e3 / (double)count;
    return 0;
}

/* Mean microseconds of `count` reconnects of one connection object the server closed. */
static int run_reconnect(const sluice_url *u, long long count, double *us) {
    sluice_conn *c = sluice_conn_new(u, bench_conn_options());
    sluice_conn *ctl = sluice_conn_new(u, bench_conn_options()); /* sends the CLIENT KILLs */
    if (c == NULL || ctl == NULL) {
        fprintf(stderr, "sluice-bench reconnect: out of memory\n");
        sluice_conn_free(c);
        sluice_conn_free(ctl);
        return SLUICE_EXIT_REDIS;
    }
    uint64_t total = 0;
    int rc = 0;
    long long id = client_id(c);
    for (long long i = 0; i < count && rc == 0; i++) {
        char ids[32];
        snprintf(ids, sizeof(ids), "%lld", id);
        const char *kill[] = {"CLIENT", "KILL", "ID", ids};
        redisReply *r = NULL;
        if (id < 0 || sluice_conn_command(ctl, 4, kill, NULL, &r, NULL) != 0) {
            fprintf(stderr, "sluice-bench reconnect: CLIENT KILL: %s\n", sluice_conn_errstr(ctl));
            rc = SLUICE_EXIT_REDIS;
        }
        freeReplyObject(r);
        /* the server closed the connection before it answered: on loopback its close arrives
         * well within 1 ms (untimed), so the ensure below sees it and reconnects */
        usleep(1000);
        uint64_t t0 = sluice_now_ns();
        int st = rc == 0 ? sluice_conn_ensure(c) : 0;
        total += sluice_now_ns() - t0;
        long long now = rc == 0 && st == 0 ? client_id(c) : -1;
        if (rc == 0 && (now < 0 || now == id)) {
            fprintf(stderr, "sluice-bench reconnect: reconnect %lld not seen (%s)\n", i,
                    st != 0 ? sluice_conn_errstr(c) : "the same connection");
            rc = SLUICE_EXIT_REDIS;
        }
        id = now;
    }
    sluice_conn_free(c);
    sluice_conn_free(ctl);
    *us = (double)total / 1e3 / (double)count;
    return rc;
}

int bench_reconnect(int argc, char **argv) {
    static const struct option opts[] = {{"redis", 1, NULL, 'r'},
                                         {"count", 1, NULL, 'n'},
                                         {"json", 0, NULL, 'j'},
                                         {"help", 0, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *url = sluice_url_default();
    char err[256];
    long long count = 500;
    int json = 0, ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'r':
            url = optarg;
            break;
        case 'n':
            if (sluice_parse_ll("--count", optarg, 1, 1000000, &count, err, sizeof(err)) != 0) {
                fprintf(stderr, "sluice-bench reconnect: %s\n", err);
                return SLUICE_EXIT_USAGE;
            }
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return SLUICE_EXIT_USAGE;
        }
    }
    sluice_url u;
    if (sluice_url_parse(&u, url, err, sizeof(err)) != 0 ||
        sluice_url_supported(&u, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench reconnect: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    double fresh = 0, again = 0;
    int rc = run_new(&u, count, &fresh);
    if (rc == 0) {
        rc = run_reconnect(&u, count, &again);
    }
    if (rc != 0) {
        return rc;
    }
    if (json) {
        printf("{\"bench\":\"reconnect\",\"tls\":%d,\"new_us\":%.0f,\"reconnect_us\":%.0f,"
               "\"count\":%lld}\n",
               u.is_tls, fresh, again, count);
    } else {
        printf("connect, new connection object: %.0f us (%s, %lld connects)\n", fresh,
               u.is_tls ? "TLS, full handshake" : "plain TCP", count);
        printf("reconnect, same object:         %.0f us (%s)\n", again,
               u.is_tls ? "TLS, the last session offered" : "plain TCP");
    }
    return 0;
}
