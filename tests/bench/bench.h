/* SPDX-License-Identifier: MIT */
/*
 * bench.h - sluice-bench: benchmark programs, one subcommand per file.
 *
 * Each subcommand is `int bench_NAME(int argc, char **argv)` (argv[0] is the subcommand name)
 * returning an exit code, and prints human-readable figures (messages per second with thousands
 * separators) and, with --json, one JSON object per line.
 */
#ifndef SLUICE_BENCH_H
#define SLUICE_BENCH_H

int bench_admit(int argc, char **argv);     /* blocking admission: single and batched */
int bench_drain(int argc, char **argv);     /* one worker, no-op handler, N pre-filled */
int bench_async(int argc, char **argv);     /* async producer on one connection */
int bench_scale(int argc, char **argv);     /* throughput vs number of worker processes */
int bench_e2e(int argc, char **argv);       /* admit -> handler-start latency at a fixed rate */
int bench_gateway(int argc, char **argv);   /* HTTP load generator against sluice-gateway */
int bench_limit(int argc, char **argv);     /* rate-limit checks per second, memory per key */
int bench_deliver(int argc, char **argv);   /* HTTP deliveries per second from one worker */
int bench_reconnect(int argc, char **argv); /* (re)connect cost: new object, or resumed */

#endif
