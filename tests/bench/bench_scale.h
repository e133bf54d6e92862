/* SPDX-License-Identifier: MIT */
/*
 * bench_scale.h - what the three files of `sluice-bench scale` share: bench_scale.c measures
 * (options, producers, one step per worker count), bench_scale_fleet.c runs the worker
 * processes and reads their latency records, bench_scale_report.c prints, writes CSV and plots.
 */
#ifndef SLUICE_BENCH_SCALE_H
#define SLUICE_BENCH_SCALE_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MAX_COUNTS  16
#define MAX_WORKERS 64
#define MAX_PROD    16
#define MAX_SAMPLES 20000000 /* latency samples kept per step */

static const char usage[] =
    "usage: sluice-bench scale [--redis URL] [--workers 1,2,4,8] [--work-ms MS] [--duration S]\n"
    "                          [--warmup S] [--concurrency C] [--capacity N] [--producers P]\n"
    "                          [--batch B] [--tenants N] [--csv FILE] [--plot FILE.png] [--json]\n"
    "  --workers LIST    worker process counts to measure (default 1,2,4,8; each 1..64)\n"
    "  --work-ms MS      simulated work per message: --handler sleep:MS (default 5)\n"
    "  --duration S      measured seconds per count (default 10)\n"
    "  --warmup S        seconds before measuring, to fill the bucket (default 1)\n"
    "  --concurrency C   in-flight messages per worker (default 16)\n"
    "  --capacity N      the queue's capacity (default 1000)\n"
    "  --producers P     producer threads keeping the bucket full (default 2)\n"
    "  --batch B         messages per admission call (default 50)\n"
    "  --tenants N       a fair queue (sluice-admin fair Q on), the producers' messages spread\n"
    "                    round robin over N tenants t0..tN-1, one lane each (1..100000)\n"
    "  --csv FILE        write the table as CSV\n"
    "  --plot FILE.png   draw throughput and latency against workers (needs gnuplot)\n"
    "Latency is end to end: producer send (before the admission call) to the handler's verdict.\n";

typedef struct opts {
    const char *url;
    long long counts[MAX_COUNTS];
    size_t ncounts;
    long long work_ms, duration_s, warmup_s, conc, capacity, producers, batch;
    long long tenants; /* 0: a plain queue */
    const char *csv, *plot;
    int json;
} opts;

typedef struct row {
    long long workers, samples;
    double processed, admitted, rejected, ideal, p50, p99, redis_cpu, cpu;
} row;

/* Set by SIGINT: every loop of the bench stops soon after. */
extern volatile sig_atomic_t bench_scale_interrupted;

/* Sleeps ms, cut short by SIGINT. */
void bench_scale_nap_ms(long long ms);

/* ---- bench_scale_fleet.c: worker processes and their latency records ---- */

typedef struct fleet {
    pid_t pids[MAX_WORKERS];
    int n;
    char dir[PATH_MAX];
} fleet;

/* Starts n sluice-worker processes (next to this binary) on `queue`, recording into f->dir.
 * Returns 0 or an exit code after printing why. */
int fleet_spawn(fleet *f, const opts *o, const char *queue, long long n);
/* SIGTERM, up to 5 s for a clean exit, then SIGKILL. */
void fleet_stop(fleet *f);
/* 0 while every worker runs; else prints which one exited and returns -1. */
int fleet_alive(const fleet *f);
/* How many of the workers have recorded a processed message so far. */
int fleet_recording(const fleet *f);

typedef struct lat {
    unsigned *v; /* ms */
    size_t n, cap;
} lat;

/* Latencies of the records "<id> <send_ms> <done_ms>" finished inside [w0, w1] (the files are
 * removed after); sorted by lat_sort; percentile q of them, -1 when none. */
void read_records(const char *dir, int nworkers, uint64_t w0, uint64_t w1, lat *l);
void lat_sort(lat *l);
double percentile(const lat *l, double q);

/* ---- bench_scale_report.c: table, JSON lines, CSV, plot ---- */

void report(const opts *o, const char *dir, const row *rows, size_t n);

#endif
