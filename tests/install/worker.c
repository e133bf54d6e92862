/* SPDX-License-Identifier: MIT */
/* A program outside the tree, built against an installed sluice: processes N messages of a
 * queue, printing each payload on a line. `worker URL QUEUE N`. */
#include <stdio.h>
#include <stdlib.h>

#include <sluice/worker.h>

static sluice_verdict print_job(const sluice_job *job, void *arg) {
    (void)arg;
    printf("%.*s\n", (int)job->payload_len, (const char *)job->payload);
    fflush(stdout);
    return SLUICE_DONE;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: worker URL QUEUE N\n");
        return 2;
    }
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    o.redis_url = argv[1];
    o.queue = argv[2];
    o.max_messages = atoll(argv[3]);
    o.handler = print_job;
    o.handler_mode = SLUICE_HANDLER_INLINE;
    o.block_ms = 100;
    sluice_worker *w;
    char err[256];
    if (sluice_worker_new(&o, &w, err, sizeof(err)) != 0) {
        fprintf(stderr, "worker: %s\n", err);
        return 2;
    }
    int rc = sluice_worker_run(w, NULL);
    if (rc != 0) {
        fprintf(stderr, "worker: %s\n", sluice_worker_errstr(w));
    }
    sluice_worker_free(w);
    return rc == 0 ? 0 : 1;
}
