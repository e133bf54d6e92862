/* SPDX-License-Identifier: MIT */
/* metrics.c - sluice-worker's Prometheus endpoint (see metrics.h). Not written yet. */
#include <stdio.h>

#include "metrics.h"

int sluice__metrics_start(uv_loop_t *loop, const char *addr, sluice_worker *w, sluice_metrics **out,
                          char *err, size_t errlen) {
    snprintf(err, errlen, "--metrics: not available in this build yet");
    *out = NULL;
    return -1;
}

void sluice__metrics_stop(sluice_metrics *m) {
    (void)m;
}
