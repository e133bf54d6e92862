/* SPDX-License-Identifier: MIT */
/*
 * bench_admit.c - `sluice-bench admit`: blocking admissions per second on one connection.
 *
 * Two runs on a fresh queue with room for everything: one admission per round trip (what a
 * thread-per-request web handler does), then batches of --batch payloads per round trip. The
 * queue is deleted afterwards. With --keep-config only its data is deleted, before and after:
 * its settings and rate limits (sluice-admin capacity / limit) stay in force, so a queue with
 * limits is measured with them, and a partitioned queue (sluice-admin partitions) is admitted to
 * as the blocking producer spreads it. --keep-data leaves what was admitted in the queue for a
 * drain to follow (scripts/bench-cluster).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/producer.h"
#include "sluice/redis.h"
#include "sluice/url.h"

#include "bench.h"
#include "bench_util.h"

static const char usage[] =
    "usage: sluice-bench admit [--redis URL] [--queue Q] [--count N] [--batch-count N]\n"
    "                          [--batch K] [--size BYTES] [--keep-config [--keep-data]]\n"
    "                          [--json]\n"
    "  --count N        single admissions (default 50000)\n"
    "  --batch-count N  payloads admitted in batches (default 1000000)\n"
    "  --batch K        payloads per batch call, 1..10000 (default 100)\n"
    "  --size BYTES     payload size (default 64)\n"
    "  --keep-config    keep the queue's settings and limits (sluice-admin capacity, limit):\n"
    "                   only its data is deleted, before and after (stream, dead letters,\n"
    "                   counters; not the limiter state). Without it the queue is deleted\n"
    "                   whole, and limits set on it are gone before the first admission.\n"
    "                   Set the limits before, delete the queue after (sluice-admin purge).\n"
    "                   A partitioned queue (sluice-admin partitions) keeps its partitions and\n"
    "                   is admitted to as the producer spreads it (their data is deleted too).\n"
    "  --keep-data      with --keep-config: what was admitted stays in the queue afterwards\n"
    "                   (to drain it next); only what was there before is deleted\n";

static int run_single(sluice_producer *p, long long count, const char *payload, size_t size,
                      double *rate) {
    sluice_admit_result res;
    uint64_t t0 = sluice_now_ns();
    for (long long i = 0; i < count; i++) {
        if (sluice_producer_admit(p, payload, size, &res) != 0 || res.outcome != SLUICE_ADMITTED) {
            fprintf(stderr, "sluice-bench admit: admission %lld failed: %s\n", i,
                    sluice_producer_errstr(p));
            return SLUICE_EXIT_REDIS;
        }
    }
    *rate = (double)count / ((double)(sluice_now_ns() - t0) / 1e9);
    return 0;
}

static int run_batched(sluice_producer *p, long long count, long long batch, const char *payload,
                       size_t size, double *rate) {
    sluice_message *msgs = calloc((size_t)batch, sizeof(*msgs));
    sluice_admit_result *res = calloc((size_t)batch, sizeof(*res));
    int rc = 0;
    if (msgs == NULL || res == NULL) {
        rc = 1;
        goto out;
    }
    for (long long i = 0; i < batch; i++) {
        msgs[i].payload = payload;
        msgs[i].len = size;
    }
    uint64_t t0 = sluice_now_ns();
    for (long long done = 0; done < count; done += batch) {
        size_t n = (size_t)(count - done < batch ? count - done : batch), admitted = 0;
        if (sluice_producer_admit_batch(p, msgs, n, res, &admitted) != 0 || admitted != n) {
            fprintf(stderr, "sluice-bench admit: batch at %lld failed: %s\n", done,
                    sluice_producer_errstr(p));
            rc = SLUICE_EXIT_REDIS;
            goto out;
        }
    }
    *rate = (double)count / ((double)(sluice_now_ns() - t0) / 1e9);
out:
    free(msgs);
    free(res);
    return rc;
}

int bench_admit(int argc, char **argv) {
    static const struct option opts[] = {
        {"redis", 1, NULL, 'r'},       {"queue", 1, NULL, 'q'}, {"count", 1, NULL, 'n'},
        {"batch-count", 1, NULL, 'N'}, {"batch", 1, NULL, 'b'}, {"size", 1, NULL, 's'},
        {"json", 0, NULL, 'j'},        {"help", 0, NULL, 'h'},  {"keep-config", 0, NULL, 'k'},
        {"keep-data", 0, NULL, 'K'},   {NULL, 0, NULL, 0}};
    const char *url = sluice_url_default();
    char queue[80], err[256];
    long long count = 50000, bcount = 1000000, batch = 100, size = 64;
    int json = 0, keep_config = 0, keep_data = 0, ch, rc = 0;
    snprintf(queue, sizeof(queue), "bench-admit-%d", (int)getpid());
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        rc = 0;
        switch (ch) {
        case 'r':
            url = optarg;
            break;
        case 'q':
            snprintf(queue, sizeof(queue), "%s", optarg);
            break;
        case 'n':
            rc = sluice_parse_ll("--count", optarg, 1, (long long)1e9, &count, err, sizeof(err));
            break;
        case 'N':
            rc = sluice_parse_ll("--batch-count", optarg, 1, (long long)1e10, &bcount, err,
                                 sizeof(err));
            break;
        case 'b':
            rc = sluice_parse_ll("--batch", optarg, 1, 10000, &batch, err, sizeof(err));
            break;
        case 's':
            rc = sluice_parse_ll("--size", optarg, 0, 1 << 20, &size, err, sizeof(err));
            break;
        case 'j':
            json = 1;
            break;
        case 'k':
            keep_config = 1;
            break;
        case 'K':
            keep_data = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        default:
            fputs(usage, stderr);
            return SLUICE_EXIT_USAGE;
        }
        if (rc != 0) {
            fprintf(stderr, "sluice-bench admit: %s\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    if (keep_data && !keep_config) {
        fprintf(stderr, "sluice-bench admit: --keep-data needs --keep-config (see --help)\n");
        return SLUICE_EXIT_USAGE;
    }
    sluice_producer_options o;
    sluice_producer_options_init(&o);
    o.redis_url = url;
    o.tls = bench_conn_options(); /* SLUICE_TLS_* for a rediss:// URL */
    o.queue = queue;
    o.capacity = count + bcount + 1;
    o.max_batch = (size_t)batch;
    sluice_producer *p;
    if (sluice_producer_new(&o, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench admit: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    char *payload = malloc((size_t)size + 1);
    memset(payload, 'x', (size_t)size);
    double single = 0, batched = 0;
    int (*purge)(const char *, const char *) = keep_config ? bench_purge_data : bench_purge;
    rc = purge(url, queue);
    if (rc == 0) {
        rc = run_single(p, count, payload, (size_t)size, &single);
    }
    if (rc == 0) {
        rc = run_batched(p, bcount, batch, payload, (size_t)size, &batched);
    }
    if (!keep_data || rc != 0) {
        purge(url, queue);
    }
    sluice_producer_free(p);
    free(payload);
    if (rc != 0) {
        return rc;
    }
    char a[32], b[32];
    if (json) {
        printf("{\"bench\":\"admit\",\"single_per_s\":%.0f,\"batched_per_s\":%.0f,\"batch\":%lld,"
               "\"size\":%lld}\n",
               single, batched, batch, size);
    } else {
        printf("admit, one per round trip: %s msg/s (%lld admissions, %lld-byte payloads)\n",
               sluice_fmt_count(a, sizeof(a), (unsigned long long)single), count, size);
        printf("admit, batches of %lld:     %s msg/s (%lld admissions)\n", batch,
               sluice_fmt_count(b, sizeof(b), (unsigned long long)batched), bcount);
    }
    return 0;
}
