/* SPDX-License-Identifier: MIT */
/* bench_scale.c - placeholder until this benchmark is written. */
#include <stdio.h>

#include "bench.h"

int bench_scale(int argc, char **argv) {
    fprintf(stderr, "sluice-bench scale: not written yet\n");
    return 2;
}
