/* SPDX-License-Identifier: MIT */
/*
 * load.c - sluice-faultload, the fault suite's producer: one long-lived sluice_producer that
 * admits --count unique payloads ("PREFIX-0000001", ...) while faults are injected, and
 * records every payload it was told is admitted. It relies on the producer library to heal its
 * connection (lazy reconnect with capped backoff): it never reconnects by hand.
 *
 *   sluice-faultload --redis URL --queue Q --count N --out FILE [options]
 *
 * Outcomes, per message (a batch into a partitioned queue is one call per partition, so its
 * messages can come back with different outcomes):
 *   admitted / duplicate   "<id> <payload>\n" appended to --out (one write(2) per call)
 *   full, limited          the same payloads are offered again after a short pause
 *   ECONN, ETIMEDOUT, ...  (transient, the call did not run) offered again after a short pause
 *   EUNKNOWN               the reply was lost: with --idempotent the same payload is offered
 *                          again under the same key (it must then be admitted exactly once);
 *                          without, the payloads go to --unknown and are not offered again
 *   OPEN (--fail-open)     counted; nothing was queued
 *   anything else          (NOPERM, WRONGTYPE, ...) printed, exit 3
 * The summary line on stdout counts each, and the longest single call (max_call_ms): a call
 * that hangs past its deadline shows up there.
 *
 * Exit: 0 all admitted, 2 usage, 3 redis refused, 4 --deadline passed before all were admitted.
 */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sluice/cli.h"
#include "sluice/producer.h"

enum { MAX_BATCH = 1000, PAYLOAD_MAX = 64 };

typedef struct load {
    sluice_producer_options o;
    const char *prefix;
    long long count, batch, rate, deadline_ms, tenants;
    int idempotent, fail_open;
    int out_fd, unknown_fd;
    /* counters */
    unsigned long long admitted, duplicates, full, unknown, open, calls;
    unsigned long long errors[32]; /* by -status */
    uint64_t max_call_ms;
} load;

static const char usage[] =
    "usage: sluice-faultload --redis URL --queue Q --count N --out FILE [options]\n"
    "  --prefix P         payload prefix (default m)\n"
    "  --wait-replicas N  WAIT for N replicas after each call (unconfirmed: unknown)\n"
    "  --tenants N        spread the payloads over tenants t0..t(N-1), round robin (default\n"
    "                     none: no tenant)\n"
    "  --batch N          payloads per call, 1..1000 (default 50; 1 with --idempotent)\n"
    "  --capacity N       default capacity (default 1000000)\n"
    "  --timeout MS       per-call deadline (default 1000)\n"
    "  --connect-timeout MS (default 1000)\n"
    "  --rate N           at most N payloads per second (default unlimited)\n"
    "  --deadline MS      give up after MS (default 60000), exit 4\n"
    "  --idempotent       one payload per call, idempotency key = payload; EUNKNOWN retried\n"
    "  --fail-open        producer fail-open mode (OPEN outcomes are counted)\n"
    "  --unknown FILE     payloads whose outcome is unknown\n"
    "SIGTERM stops offering after the call under way; the summary is printed, exit 0.\n";

static int open_append(const char *path) {
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int parse(load *l, int argc, char **argv, const char **out, const char **unknown) {
    char err[256];
    int i = 1;
    while (i < argc) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int rc = 0;
        if (strcmp(a, "--idempotent") == 0 || strcmp(a, "--fail-open") == 0) {
            if (a[2] == 'i') {
                l->idempotent = 1;
            } else {
                l->fail_open = 1;
            }
            i++; /* a flag: no value */
            continue;
        }
        i += 2;
        if (v == NULL) {
            fprintf(stderr, "sluice-faultload: %s needs a value\n%s", a, usage);
            return -1;
        }
        long long x = 0;
        if (strcmp(a, "--redis") == 0) {
            l->o.redis_url = v;
        } else if (strcmp(a, "--queue") == 0) {
            l->o.queue = v;
        } else if (strcmp(a, "--prefix") == 0) {
            l->prefix = v;
        } else if (strcmp(a, "--out") == 0) {
            *out = v;
        } else if (strcmp(a, "--unknown") == 0) {
            *unknown = v;
        } else if (strcmp(a, "--wait-replicas") == 0) {
            rc = sluice_parse_ll(a, v, 0, SLUICE_WAIT_REPLICAS_MAX, &x, err, sizeof(err));
            l->o.wait_replicas = (int)x;
        } else if (strcmp(a, "--tenants") == 0) {
            rc = sluice_parse_ll(a, v, 1, 100000, &l->tenants, err, sizeof(err));
        } else if (strcmp(a, "--count") == 0) {
            rc = sluice_parse_ll(a, v, 1, 100000000, &l->count, err, sizeof(err));
        } else if (strcmp(a, "--batch") == 0) {
            rc = sluice_parse_ll(a, v, 1, MAX_BATCH, &l->batch, err, sizeof(err));
        } else if (strcmp(a, "--capacity") == 0) {
            rc = sluice_parse_ll(a, v, 0, (long long)1e12, &l->o.capacity, err, sizeof(err));
        } else if (strcmp(a, "--rate") == 0) {
            rc = sluice_parse_ll(a, v, 1, 10000000, &l->rate, err, sizeof(err));
        } else if (strcmp(a, "--deadline") == 0) {
            rc = sluice_parse_ll(a, v, 1, 3600000, &l->deadline_ms, err, sizeof(err));
        } else if (strcmp(a, "--timeout") == 0) {
            rc = sluice_parse_ll(a, v, 1, 3600000, &x, err, sizeof(err));
            l->o.command_timeout_ms = (int)x;
        } else if (strcmp(a, "--connect-timeout") == 0) {
            rc = sluice_parse_ll(a, v, 1, 3600000, &x, err, sizeof(err));
            l->o.connect_timeout_ms = (int)x;
        } else {
            fprintf(stderr, "sluice-faultload: unknown option %s\n%s", a, usage);
            return -1;
        }
        if (rc != 0) {
            fprintf(stderr, "sluice-faultload: %s\n", err);
            return -1;
        }
    }
    if (l->o.queue == NULL || l->count == 0 || *out == NULL) {
        fputs(usage, stderr);
        return -1;
    }
    if (l->idempotent) {
        l->batch = 1;
    }
    return 0;
}

/* Appends "<id> <payload>\n" for each payloads[idx[i]] (i in 0..n) whose outcome in res is
 * ADMITTED or DUPLICATE (or "<payload>\n" for every one when res is NULL), one write. */
static void record(int fd, char (*payloads)[PAYLOAD_MAX], const size_t *idx,
                   const sluice_admit_result *res, size_t n) {
    static char buf[MAX_BATCH * (PAYLOAD_MAX + SLUICE_ID_MAX + 2)];
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (res != NULL && res[i].outcome != SLUICE_ADMITTED &&
            res[i].outcome != SLUICE_DUPLICATE) {
            continue;
        }
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s%s\n", res ? res[i].id : "",
                                res ? " " : "", payloads[idx[i]]);
    }
    if (fd >= 0 && len > 0 && write(fd, buf, len) != (ssize_t)len) {
        perror("sluice-faultload: write");
    }
}

/* Offers payloads [next, next+n) until each has an outcome. Returns 0, 3 fatal, 4 deadline.
 * Each message is judged by its own outcome, not by the call's status: on a partitioned queue
 * one call goes to each partition used, so one batch can come back partly admitted, partly
 * full and partly failed (a partition's primary was down). Admitted and duplicate: recorded;
 * full, limited, transient failures (and EUNKNOWN with --idempotent): offered again; EUNKNOWN
 * otherwise: to --unknown; OPEN: counted. */
static int offer(load *l, sluice_producer *p, long long next, size_t n, uint64_t t0) {
    static char payloads[MAX_BATCH][PAYLOAD_MAX];
    static char tenants[MAX_BATCH][24];
    static sluice_message msgs[MAX_BATCH];
    static sluice_admit_result res[MAX_BATCH];
    static size_t idx[MAX_BATCH]; /* msgs[i] is payloads[idx[i]] */
    for (size_t i = 0; i < n; i++) {
        snprintf(payloads[i], PAYLOAD_MAX, "%s-%07lld", l->prefix, next + (long long)i);
        if (l->tenants > 0) {
            snprintf(tenants[i], sizeof(tenants[i]), "t%lld", (next + (long long)i) % l->tenants);
        }
        idx[i] = i;
    }
    size_t left = n; /* messages still without an outcome: idx[0..left) */
    while (left > 0) {
        if (sluice_now_ms() - t0 > (uint64_t)l->deadline_ms) {
            return 4;
        }
        for (size_t i = 0; i < left; i++) {
            const char *pl = payloads[idx[i]];
            msgs[i] = (sluice_message){.payload = pl,
                                       .len = strlen(pl),
                                       .tenant = l->tenants > 0 ? tenants[idx[i]] : NULL,
                                       .idempotency_key = l->idempotent ? pl : NULL};
        }
        uint64_t c0 = sluice_now_ms();
        int st = sluice_producer_admit_batch(p, msgs, left, res, NULL);
        uint64_t took = sluice_now_ms() - c0;
        l->calls++;
        if (took > l->max_call_ms) {
            l->max_call_ms = took;
        }
        if (st != 0 && -st > 0 && -st < 32) {
            l->errors[-st]++;
        }
        record(l->out_fd, payloads, idx, res, left);
        static size_t unk[MAX_BATCH]; /* payloads whose outcome is unknown */
        size_t keep = 0, nunk = 0;
        int fatal = 0;
        for (size_t i = 0; i < left; i++) {
            const sluice_admit_result *r = &res[i];
            if (r->outcome == SLUICE_ADMITTED || r->outcome == SLUICE_DUPLICATE) {
                l->admitted++;
                l->duplicates += r->outcome == SLUICE_DUPLICATE;
            } else if (r->outcome == SLUICE_OPEN) {
                l->open++;
            } else if (r->outcome == SLUICE_FAILED && r->status == SLUICE_EUNKNOWN &&
                       !l->idempotent) {
                unk[nunk++] = idx[i];
                l->unknown++;
            } else if (r->outcome == SLUICE_FULL || r->outcome == SLUICE_LIMITED ||
                       r->status == SLUICE_EUNKNOWN || sluice_status_is_transient(r->status)) {
                l->full += r->outcome == SLUICE_FULL || r->outcome == SLUICE_LIMITED;
                idx[keep++] = idx[i]; /* offered again */
            } else {
                fatal = r->status != 0 ? r->status : st != 0 ? st : SLUICE_EINVAL;
            }
        }
        record(l->unknown_fd, payloads, unk, NULL, nunk);
        if (fatal != 0) {
            fprintf(stderr, "sluice-faultload: %s: %s\n", sluice_strerror(fatal),
                    sluice_producer_errstr(p));
            return 3;
        }
        left = keep;
        if (left > 0) {
            sleep_ms(20);
        }
    }
    return 0;
}

static void summary(const load *l, uint64_t elapsed) {
    printf("admitted=%llu duplicates=%llu full=%llu unknown=%llu open=%llu calls=%llu "
           "max_call_ms=%llu elapsed_ms=%llu",
           l->admitted, l->duplicates, l->full, l->unknown, l->open, l->calls,
           (unsigned long long)l->max_call_ms, (unsigned long long)elapsed);
    for (int i = 1; i < 32; i++) {
        if (l->errors[i] > 0) {
            printf(" %s=%llu", sluice_err_name(-i), l->errors[i]);
        }
    }
    printf("\n");
}

/* SIGTERM: stop offering after the call under way, print the summary, exit 0. */
static volatile sig_atomic_t stop_requested;
static void on_term(int sig) {
    (void)sig;
    stop_requested = 1;
}

int main(int argc, char **argv) {
    static load l;
    signal(SIGTERM, on_term);
    const char *out = NULL, *unknown = NULL;
    char err[512];
    sluice_producer_options_init(&l.o);
    l.o.capacity = 1000000;
    l.o.command_timeout_ms = 1000;
    l.o.connect_timeout_ms = 1000;
    l.prefix = "m";
    l.batch = 50;
    l.deadline_ms = 60000;
    if (parse(&l, argc, argv, &out, &unknown) != 0) {
        return 2;
    }
    l.o.fail_open = l.fail_open;
    l.out_fd = open_append(out);
    l.unknown_fd = unknown ? open_append(unknown) : -1;
    if (l.out_fd < 0 || (unknown != NULL && l.unknown_fd < 0)) {
        perror("sluice-faultload: open");
        return 2;
    }
    sluice_producer *p;
    if (sluice_producer_new(&l.o, &p, err, sizeof(err)) != 0) {
        fprintf(stderr, "sluice-faultload: %s\n", err);
        return 2;
    }
    uint64_t t0 = sluice_now_ms();
    int rc = 0;
    for (long long next = 0; next < l.count && rc == 0 && !stop_requested;) {
        size_t n = (size_t)(l.count - next < l.batch ? l.count - next : l.batch);
        rc = offer(&l, p, next, n, t0);
        next += (long long)n;
        if (l.rate > 0) {
            uint64_t due = t0 + (uint64_t)(next * 1000 / l.rate);
            uint64_t now = sluice_now_ms();
            if (due > now) {
                sleep_ms((long)(due - now));
            }
        }
    }
    summary(&l, sluice_now_ms() - t0);
    if (rc == 4) {
        fprintf(stderr, "sluice-faultload: deadline of %lld ms passed\n", l.deadline_ms);
    }
    sluice_producer_free(p);
    close(l.out_fd);
    if (l.unknown_fd >= 0) {
        close(l.unknown_fd);
    }
    return rc;
}
