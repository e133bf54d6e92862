/* SPDX-License-Identifier: MIT */
/* bench_async.c - placeholder until this benchmark is written. */
#include <stdio.h>

#include "bench.h"

int bench_async(int argc, char **argv) {
    fprintf(stderr, "sluice-bench async: not written yet\n");
    return 2;
}
