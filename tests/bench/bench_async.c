/* SPDX-License-Identifier: MIT */
/*
 * bench_async.c - `sluice-bench async`: admissions per second of the async producer on one
 * connection.
 *
 * One libuv loop, one sluice_aproducer, a fresh queue with room for everything. A window of
 * --window admissions is kept outstanding: each callback submits the next one, so what one
 * loop iteration submits is coalesced into calls of up to --batch envelopes, pipelined. This is
 * what an event-loop web server embedding the producer sees at saturation. The queue is deleted
 * before and afterwards.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "sluice/aproducer.h"
#include "sluice/cli.h"
#include "sluice/url.h"

#include "bench.h"
#include "bench_util.h"

static const char usage[] =
    "usage: sluice-bench async [--redis URL] [--queue Q] [--count N] [--capacity C]\n"
    "                          [--window W] [--batch K] [--size BYTES] [--json]\n"
    "  --count N      admissions (default 1000000)\n"
    "  --capacity C   queue capacity (default count + 1, so that everything is admitted)\n"
    "  --window W     admissions outstanding at any time (default 20000)\n"
    "  --batch K      most envelopes per admission call, 1..100000 (default 1000)\n"
    "  --size BYTES   payload size (default 64)\n";

typedef struct run {
    uv_loop_t loop;
    uv_timer_t start_timer;
    sluice_aproducer *ap;
    sluice_message m;
    long long count, window, submitted, done, admitted, full, failed;
    int first_error;
    int gave_up;
    uint64_t t0, t1, waited_ms;
    sluice_aproducer_counters k; /* taken just before the producer is closed */
} run;

static void on_admitted(sluice_aproducer *ap, const sluice_admit_result *res, void *arg);

static void submit(run *r) {
    int st = sluice_aproducer_admit(r->ap, &r->m, on_admitted, r);
    if (st != 0) {
        fprintf(stderr, "sluice-bench async: admit: %s\n", sluice_aproducer_errstr(r->ap));
        r->failed++;
        r->done++;
        r->first_error = r->first_error ? r->first_error : st;
    }
    r->submitted++;
}

static void finish(run *r) {
    r->t1 = sluice_now_ns();
    sluice_aproducer_get_counters(r->ap, &r->k);
    sluice_aproducer_close(r->ap, NULL, NULL);
}

static void on_admitted(sluice_aproducer *ap, const sluice_admit_result *res, void *arg) {
    run *r = arg;
    r->done++;
    if (res->outcome == SLUICE_ADMITTED) {
        r->admitted++;
    } else if (res->outcome == SLUICE_FULL) {
        r->full++;
    } else {
        r->failed++;
        if (r->first_error == 0) {
            r->first_error = res->status;
            fprintf(stderr, "sluice-bench async: %s: %s\n", sluice_strerror(res->status),
                    sluice_aproducer_errstr(ap));
        }
    }
    if (r->submitted < r->count && r->first_error == 0) {
        submit(r);
    } else if (r->done == r->submitted && r->t1 == 0) {
        finish(r);
    }
}

/* Polls for the connection (1 ms steps, 5 s at most), then opens the window. */
static void on_start(uv_timer_t *t) {
    run *r = t->data;
    if (!sluice_aproducer_ready(r->ap)) {
        if (++r->waited_ms < 5000) {
            return;
        }
        fprintf(stderr, "sluice-bench async: %s\n", sluice_aproducer_errstr(r->ap));
        r->gave_up = 1;
        sluice_aproducer_close(r->ap, NULL, NULL);
    } else {
        r->t0 = sluice_now_ns();
        for (long long i = 0; i < r->window && r->submitted < r->count; i++) {
            submit(r);
        }
    }
    uv_close((uv_handle_t *)t, NULL);
}

static int parse(int argc, char **argv, const char **url, char *queue, size_t qlen,
                 long long *v /* count, capacity, window, batch, size, json */) {
    static const struct option opts[] = {{"redis", 1, NULL, 'r'},  {"queue", 1, NULL, 'q'},
                                         {"count", 1, NULL, 'n'},  {"capacity", 1, NULL, 'C'},
                                         {"window", 1, NULL, 'w'}, {"batch", 1, NULL, 'b'},
                                         {"size", 1, NULL, 's'},   {"json", 0, NULL, 'j'},
                                         {"help", 0, NULL, 'h'},   {NULL, 0, NULL, 0}};
    char err[256];
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        rc = 0;
        switch (ch) {
        case 'r':
            *url = optarg;
            break;
        case 'q':
            snprintf(queue, qlen, "%s", optarg);
            break;
        case 'n':
            rc = sluice_parse_ll("--count", optarg, 1, (long long)1e10, &v[0], err, sizeof(err));
            break;
        case 'C':
            rc = sluice_parse_ll("--capacity", optarg, 1, (long long)1e12, &v[1], err, sizeof(err));
            break;
        case 'w':
            rc = sluice_parse_ll("--window", optarg, 1, 1000000, &v[2], err, sizeof(err));
            break;
        case 'b':
            rc = sluice_parse_ll("--batch", optarg, 1, 100000, &v[3], err, sizeof(err));
            break;
        case 's':
            rc = sluice_parse_ll("--size", optarg, 0, 1 << 20, &v[4], err, sizeof(err));
            break;
        case 'j':
            v[5] = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return -1;
        default:
            fputs(usage, stderr);
            return SLUICE_EXIT_USAGE;
        }
        if (rc != 0) {
            fprintf(stderr, "sluice-bench async: %s\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    return 0;
}

static void report(const run *r, long long batch, long long size, int json) {
    const sluice_aproducer_counters k = r->k;
    double secs = (double)(r->t1 - r->t0) / 1e9;
    double rate = (double)r->done / secs;
    double per_call = k.calls ? (double)r->done / (double)k.calls : 0;
    char a[32];
    if (json) {
        printf("{\"bench\":\"async\",\"admissions_per_s\":%.0f,\"count\":%lld,\"admitted\":%lld,"
               "\"full\":%lld,\"failed\":%lld,\"calls\":%llu,\"per_call\":%.1f,\"window\":%lld,"
               "\"batch\":%lld,\"size\":%lld,\"seconds\":%.3f}\n",
               rate, r->done, r->admitted, r->full, r->failed, k.calls, per_call, r->window, batch,
               size, secs);
    } else {
        printf("async producer, one connection: %s admissions/s (%lld in %.2f s; admitted %lld, "
               "full %lld, failed %lld)\n",
               sluice_fmt_count(a, sizeof(a), (unsigned long long)rate), r->done, secs, r->admitted,
               r->full, r->failed);
        printf("  %llu admission calls, %.1f envelopes per call; window %lld, batch %lld, "
               "%lld-byte payloads\n",
               k.calls, per_call, r->window, batch, size);
    }
}

int bench_async(int argc, char **argv) {
    const char *url = sluice_url_default();
    char queue[80], err[256];
    long long v[6] = {1000000, 0, 20000, 1000, 64, 0};
    snprintf(queue, sizeof(queue), "bench-async-%d", (int)getpid());
    int rc = parse(argc, argv, &url, queue, sizeof(queue), v);
    if (rc != 0) {
        return rc < 0 ? 0 : rc;
    }
    static run r;
    sluice_producer_options o;
    sluice_producer_options_init(&o);
    o.redis_url = url;
    o.tls = bench_conn_options(); /* SLUICE_TLS_* for a rediss:// URL */
    o.queue = queue;
    o.capacity = v[1] > 0 ? v[1] : v[0] + 1;
    o.max_batch = (size_t)v[3];
    o.max_payload = (size_t)v[4] + 1;
    sluice_aproducer_options ao;
    sluice_aproducer_options_init(&ao);
    ao.max_queued = (size_t)v[2] + 1;
    uv_loop_init(&r.loop);
    if (sluice_aproducer_new(&r.loop, &o, &ao, &r.ap, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench async: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    if ((rc = bench_purge(url, queue)) != 0) {
        sluice_aproducer_close(r.ap, NULL, NULL);
        uv_run(&r.loop, UV_RUN_DEFAULT);
        return rc;
    }
    char *payload = malloc((size_t)v[4] + 1);
    memset(payload, 'x', (size_t)v[4]);
    r.m = (sluice_message){payload, (size_t)v[4], NULL, 0, NULL, NULL, NULL};
    r.count = v[0];
    r.window = v[2];
    uv_timer_init(&r.loop, &r.start_timer);
    r.start_timer.data = &r;
    uv_timer_start(&r.start_timer, on_start, 1, 1);
    uv_run(&r.loop, UV_RUN_DEFAULT); /* until the producer is closed */
    rc = r.gave_up || r.first_error ? SLUICE_EXIT_REDIS : 0;
    if (!r.gave_up) {
        report(&r, v[3], v[4], (int)v[5]);
    }
    bench_purge(url, queue);
    free(payload);
    uv_loop_close(&r.loop);
    return rc;
}
