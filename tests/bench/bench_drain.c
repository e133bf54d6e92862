/* SPDX-License-Identifier: MIT */
/*
 * bench_drain.c - `sluice-bench drain`: how fast one worker empties a full queue.
 *
 * Fills a fresh queue with --count messages, then runs one in-process worker with an inline
 * no-op handler and --max-messages count, and times it from start until every message was
 * acknowledged and deleted (the stream is checked empty afterwards). This is the cost of
 * sluice itself per message: read, decode, verdict, batched ack + delete.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/redis.h"
#include "sluice/url.h"
#include "sluice/worker.h"

#include "bench.h"
#include "bench_util.h"

static const char usage[] =
    "usage: sluice-bench drain [--redis URL] [--queue Q] [--count N] [--concurrency C]\n"
    "                          [--read-batch B] [--size BYTES] [--json]\n"
    "  --count N        messages to pre-fill and drain (default 300000)\n"
    "  --concurrency C  worker in-flight limit (default 2000)\n"
    "  --read-batch B   entries per XREADGROUP (default 1000)\n";

static sluice_verdict noop(const sluice_job *job, void *arg) {
    return SLUICE_DONE;
}

int bench_drain(int argc, char **argv) {
    static const struct option opts[] = {
        {"redis", 1, NULL, 'r'},       {"queue", 1, NULL, 'q'},      {"count", 1, NULL, 'n'},
        {"concurrency", 1, NULL, 'c'}, {"read-batch", 1, NULL, 'b'}, {"size", 1, NULL, 's'},
        {"json", 0, NULL, 'j'},        {"help", 0, NULL, 'h'},       {NULL, 0, NULL, 0}};
    const char *url = sluice_url_default();
    char queue[80], err[256];
    long long count = 300000, conc = 2000, batch = 1000, size = 64;
    int json = 0, ch, rc = 0;
    snprintf(queue, sizeof(queue), "bench-drain-%d", (int)getpid());
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
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
        case 'c':
            rc = sluice_parse_ll("--concurrency", optarg, 1, 100000, &conc, err, sizeof(err));
            break;
        case 'b':
            rc = sluice_parse_ll("--read-batch", optarg, 1, 100000, &batch, err, sizeof(err));
            break;
        case 's':
            rc = sluice_parse_ll("--size", optarg, 0, 1 << 20, &size, err, sizeof(err));
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
        if (rc != 0) {
            fprintf(stderr, "sluice-bench drain: %s\n", err);
            return SLUICE_EXIT_USAGE;
        }
    }
    if ((rc = bench_purge(url, queue)) != 0 || (rc = bench_fill(url, queue, count, (size_t)size))) {
        return rc;
    }
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.redis_url = url;
    o.queue = queue;
    o.concurrency = (int)conc;
    o.read_batch = (int)batch;
    o.max_messages = count;
    o.handler = noop;
    o.handler_mode = SLUICE_HANDLER_INLINE;
    sluice_worker *w;
    if (sluice_worker_new(&o, &w, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-bench drain: %s\n", err);
        return SLUICE_EXIT_USAGE;
    }
    uint64_t t0 = sluice_now_ns();
    rc = sluice_worker_run(w, NULL);
    double secs = (double)(sluice_now_ns() - t0) / 1e9;
    sluice_worker_stats st;
    sluice_worker_get_stats(w, &st);
    sluice_worker_free(w);
    bench_purge(url, queue);
    if (rc != 0 || st.processed != (unsigned long long)count) {
        fprintf(stderr, "sluice-bench drain: processed %llu of %lld (status %s)\n", st.processed,
                count, sluice_err_name(rc));
        return SLUICE_EXIT_REDIS;
    }
    double rate = (double)count / secs;
    char a[32];
    if (json) {
        printf("{\"bench\":\"drain\",\"per_s\":%.0f,\"count\":%lld,\"concurrency\":%lld}\n", rate,
               count, conc);
    } else {
        printf("drain, one worker, no-op handler: %s msg/s (%lld messages in %.2f s, "
               "concurrency %lld)\n",
               sluice_fmt_count(a, sizeof(a), (unsigned long long)rate), count, secs, conc);
    }
    return 0;
}
