/* SPDX-License-Identifier: MIT */
/* A program outside the tree, built against an installed sluice: admits the arguments to a
 * queue. `producer URL QUEUE PAYLOAD...`; exit 0 when every payload was admitted. */
#include <stdio.h>
#include <string.h>

#include <sluice/producer.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: producer URL QUEUE PAYLOAD...\n");
        return 2;
    }
    sluice_producer_options o;
    sluice_producer_options_init(&o);
    o.redis_url = argv[1];
    o.queue = argv[2];
    sluice_producer *p;
    char err[256];
    if (sluice_producer_new(&o, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "producer: %s\n", err);
        return 2;
    }
    int rc = 0;
    for (int i = 3; i < argc; i++) {
        sluice_admit_result res;
        if (sluice_producer_admit(p, argv[i], strlen(argv[i]), &res) != 0 ||
            res.outcome != SLUICE_ADMITTED) {
            fprintf(stderr, "producer: %s not admitted: %s\n", argv[i], sluice_producer_errstr(p));
            rc = 1;
        }
    }
    sluice_producer_free(p);
    return rc;
}
