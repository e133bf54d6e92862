/* SPDX-License-Identifier: MIT */
/*
 * aprod.c - sluice-faultaprod, the fault suite's async producer: one sluice_aproducer on a
 * libuv loop that submits --count unique payloads ("PREFIX-0000001", ...), --per-tick of them
 * every millisecond, while faults are injected, and checks the callback contract: each accepted
 * admission called back exactly once, none later than its deadline (plus --slack-ms).
 *
 *   sluice-faultaprod --redis URL --queue Q --count N --out FILE [options]
 *
 * --out gets one line per callback: "<payload> <outcome> <status-name>" (admitted ones are what
 * Redis must hold). The summary line on stdout counts the outcomes.
 * Exit: 0 the contract held, 1 a callback ran twice, never, or late; 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "sluice/aproducer.h"
#include "sluice/cli.h"
#include "sluice/log.h"
#include "sluice/status.h"

typedef struct slot {
    int calls;
    uint64_t submitted;
} slot;

static uv_loop_t *loop;
static sluice_aproducer *ap;
static slot *slots;
static long long count, per_tick = 1, submitted, called, late, twice, refused, tenants;
static long long slack_ms = 250, timeout_ms = 1000;
static long long close_after = -1; /* close the producer from the Nth callback */
static const char *prefix = "a";
static FILE *out;
static uv_timer_t tick;
static long long by_outcome[8];
static int closed;
static char first_failure[512]; /* the errstr when the first admission failed */

static void on_closed(void *arg) {
    (void)arg;
    closed = 1;
}

static void maybe_done(void) {
    if (!closed && submitted >= count && called + refused >= count) {
        closed = -1; /* closing */
        sluice_aproducer_close(ap, on_closed, NULL);
    }
}

static void on_admit(sluice_aproducer *p, const sluice_admit_result *res, void *arg) {
    slot *s = arg;
    long long i = s - slots;
    uint64_t now = uv_now(loop);
    if (++s->calls > 1) {
        twice++;
        fprintf(stderr, "%s-%07lld called back %d times\n", prefix, i, s->calls);
    }
    if (now > s->submitted + (uint64_t)timeout_ms + (uint64_t)slack_ms) {
        late++;
        fprintf(stderr, "%s-%07lld called back %llu ms after submission (deadline %lld)\n", prefix,
                i, (unsigned long long)(now - s->submitted), timeout_ms);
    }
    called++;
    if ((unsigned)res->outcome < 8) {
        by_outcome[res->outcome]++;
    }
    fprintf(out, "%s-%07lld %d %s\n", prefix, i, (int)res->outcome, sluice_err_name(res->status));
    if (res->outcome != SLUICE_ADMITTED && first_failure[0] == '\0') {
        snprintf(first_failure, sizeof(first_failure), "%s", sluice_aproducer_errstr(p));
    }
    if (close_after >= 0 && called == close_after && !closed) {
        closed = -1; /* closing, from inside a callback: what waits is called back cancelled */
        uv_timer_stop(&tick);
        sluice_aproducer_close(p, on_closed, NULL);
    }
    maybe_done();
}

static void on_tick(uv_timer_t *t) {
    char payload[64], tenant[32];
    for (long long k = 0; k < per_tick && submitted < count; k++) {
        long long i = submitted++;
        snprintf(payload, sizeof(payload), "%s-%07lld", prefix, i);
        snprintf(tenant, sizeof(tenant), "t%lld", tenants > 0 ? i % tenants : 0);
        sluice_message m = {payload, strlen(payload), NULL, 0, tenants > 0 ? tenant : NULL, NULL,
                            NULL};
        slots[i].submitted = uv_now(loop);
        int st = sluice_aproducer_admit(ap, &m, on_admit, &slots[i]);
        if (st != 0) {
            refused++;
            slots[i].calls = -1; /* never called back: refused at once */
        }
    }
    if (submitted >= count) {
        uv_timer_stop(t);
        maybe_done();
    }
}

static void on_walk(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

int main(int argc, char **argv) {
    sluice_producer_options o;
    sluice_producer_options_init(&o);
    o.capacity = 1000000;
    o.connect_timeout_ms = 1000;
    const char *outp = NULL;
    char err[256];
    long long x = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (v == NULL) {
            fprintf(stderr, "%s needs a value\n", a);
            return 2;
        }
        if (strcmp(a, "--redis") == 0) {
            o.redis_url = v;
        } else if (strcmp(a, "--queue") == 0) {
            o.queue = v;
        } else if (strcmp(a, "--out") == 0) {
            outp = v;
        } else if (strcmp(a, "--log-level") == 0) {
            sluice_log_set_level(sluice_log_level_parse(v), "sluice-faultaprod");
        } else if (strcmp(a, "--prefix") == 0) {
            prefix = v;
        } else if (strcmp(a, "--count") == 0) {
            rc = sluice_parse_ll(a, v, 1, 10000000, &count, err, sizeof(err));
        } else if (strcmp(a, "--per-tick") == 0) {
            rc = sluice_parse_ll(a, v, 1, 100000, &per_tick, err, sizeof(err));
        } else if (strcmp(a, "--timeout") == 0) {
            rc = sluice_parse_ll(a, v, 1, 3600000, &timeout_ms, err, sizeof(err));
        } else if (strcmp(a, "--slack-ms") == 0) {
            rc = sluice_parse_ll(a, v, 0, 3600000, &slack_ms, err, sizeof(err));
        } else if (strcmp(a, "--tenants") == 0) {
            rc = sluice_parse_ll(a, v, 1, 100000, &tenants, err, sizeof(err));
        } else if (strcmp(a, "--capacity") == 0) {
            rc = sluice_parse_ll(a, v, 1, (long long)1e12, &o.capacity, err, sizeof(err));
        } else if (strcmp(a, "--wait-replicas") == 0) {
            rc = sluice_parse_ll(a, v, 1, 16, &x, err, sizeof(err));
            o.wait_replicas = (int)x;
        } else if (strcmp(a, "--wait-timeout") == 0) {
            rc = sluice_parse_ll(a, v, 1, 3600000, &x, err, sizeof(err));
            o.wait_timeout_ms = (int)x;
        } else if (strcmp(a, "--close-after") == 0) {
            rc = sluice_parse_ll(a, v, 0, 10000000, &close_after, err, sizeof(err));
        } else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
        if (rc != 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
    }
    if (o.redis_url == NULL || o.queue == NULL || count == 0 || outp == NULL) {
        fprintf(stderr, "usage: sluice-faultaprod --redis URL --queue Q --count N --out FILE\n");
        return 2;
    }
    o.command_timeout_ms = (int)timeout_ms;
    out = fopen(outp, "w");
    slots = calloc((size_t)count, sizeof(*slots));
    if (out == NULL || slots == NULL) {
        perror(outp);
        return 2;
    }
    loop = uv_default_loop();
    if (sluice_aproducer_new(loop, &o, NULL, &ap, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    uv_timer_init(loop, &tick);
    uv_timer_start(&tick, on_tick, 1, 1);
    uv_run(loop, UV_RUN_DEFAULT); /* the tick, then the callbacks, keep it running */
    uv_walk(loop, on_walk, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    long long never = 0;
    for (long long i = 0; i < submitted; i++) {
        if (slots[i].calls == 0) {
            never++;
            fprintf(stderr, "%s-%07lld never called back\n", prefix, i);
        }
    }
    fclose(out);
    printf("submitted=%lld refused=%lld called=%lld admitted=%lld full=%lld failed=%lld "
           "twice=%lld late=%lld never=%lld\n",
           submitted, refused, called, by_outcome[SLUICE_ADMITTED], by_outcome[SLUICE_FULL],
           by_outcome[SLUICE_FAILED], twice, late, never);
    if (first_failure[0] != '\0') {
        printf("first failure: %s\n", first_failure);
    }
    free(slots);
    return twice || late || never || closed != 1 ? 1 : 0;
}
