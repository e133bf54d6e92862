/* SPDX-License-Identifier: MIT */
/* bench_e2e.c - placeholder until this benchmark is written. */
#include <stdio.h>

#include "bench.h"

int bench_e2e(int argc, char **argv) {
    fprintf(stderr, "sluice-bench e2e: not written yet\n");
    return 2;
}
