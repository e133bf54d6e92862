/* SPDX-License-Identifier: MIT */
/* bench_gateway.c - placeholder until this benchmark is written. */
#include <stdio.h>

#include "bench.h"

int bench_gateway(int argc, char **argv) {
    fprintf(stderr, "sluice-bench gateway: not written yet\n");
    return 2;
}
