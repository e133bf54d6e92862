/* SPDX-License-Identifier: MIT */
/* bench_scale_fleet.c - the worker processes of `sluice-bench scale` and their latency records
 * (see bench_scale.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/cli.h"

#include "bench_scale.h"
#include "bench_util.h"

extern char **environ;

/* ---- worker processes ---- */

static pid_t spawn_worker(const opts *o, const char *exe, const char *queue, const char *dir,
                          int i) {
    char handler[32], conc[24], rec[PATH_MAX + 32], log[PATH_MAX + 32], name[48];
    snprintf(handler, sizeof(handler), "sleep:%lld", o->work_ms);
    snprintf(conc, sizeof(conc), "%lld", o->conc);
    snprintf(rec, sizeof(rec), "%s/worker-%d.rec", dir, i);
    snprintf(log, sizeof(log), "%s/worker-%d.log", dir, i);
    snprintf(name, sizeof(name), "scale-%d-%d", (int)getpid(), i);
    const char *argv[] = {exe,     "--queue",       queue,  "--redis",     o->url, "--handler",
                          handler, "--concurrency", conc,   "--record",    rec,    "--consumer",
                          name,    "--grace",       "2000", "--log-level", "warn", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid = -1;
    if (posix_spawn(&pid, exe, &fa, NULL, (char *const *)argv, environ) != 0) {
        pid = -1;
    }
    posix_spawn_file_actions_destroy(&fa);
    return pid;
}

void fleet_stop(fleet *f) {
    for (int i = 0; i < f->n; i++) {
        kill(f->pids[i], SIGTERM);
    }
    uint64_t until = sluice_now_ms() + 5000;
    for (int i = 0; i < f->n; i++) {
        while (waitpid(f->pids[i], NULL, WNOHANG) == 0) {
            if (sluice_now_ms() > until) {
                kill(f->pids[i], SIGKILL);
                waitpid(f->pids[i], NULL, 0);
                break;
            }
            bench_scale_nap_ms(10);
        }
    }
    f->n = 0;
}

int fleet_alive(const fleet *f) {
    for (int i = 0; i < f->n; i++) {
        int status;
        if (waitpid(f->pids[i], &status, WNOHANG) == f->pids[i]) {
            fprintf(stderr,
                    "\nsluice-bench scale: worker %d exited early (status %d); see %s/"
                    "worker-%d.log\n",
                    i, status, f->dir, i);
            return -1;
        }
    }
    return 0;
}

int fleet_recording(const fleet *f) {
    int n = 0;
    for (int i = 0; i < f->n; i++) {
        char path[PATH_MAX + 32];
        struct stat st;
        snprintf(path, sizeof(path), "%s/worker-%d.rec", f->dir, i);
        n += stat(path, &st) == 0 && st.st_size > 0;
    }
    return n;
}

int fleet_spawn(fleet *f, const opts *o, const char *queue, long long n) {
    char exe[PATH_MAX];
    if (bench_sibling_path("sluice-worker", exe, sizeof(exe)) != 0) {
        fprintf(stderr, "sluice-bench scale: no sluice-worker next to this binary (%s)\n", exe);
        return SLUICE_EXIT_USAGE;
    }
    for (f->n = 0; f->n < n; f->n++) {
        if ((f->pids[f->n] = spawn_worker(o, exe, queue, f->dir, f->n)) < 0) {
            fprintf(stderr, "sluice-bench scale: cannot start %s\n", exe);
            return SLUICE_EXIT_REDIS;
        }
    }
    return 0;
}

/* ---- latency from the workers' records ---- */

static void lat_add(lat *l, unsigned ms) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 65536;
        unsigned *v = cap <= MAX_SAMPLES ? realloc(l->v, cap * sizeof(*v)) : NULL;
        if (v == NULL) {
            return; /* keep what we have: a bounded sample */
        }
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = ms;
}

void read_records(const char *dir, int nworkers, uint64_t w0, uint64_t w1, lat *l) {
    for (int i = 0; i < nworkers; i++) {
        char path[PATH_MAX + 32], id[64];
        unsigned long long sent, done;
        snprintf(path, sizeof(path), "%s/worker-%d.rec", dir, i);
        FILE *f = fopen(path, "r");
        while (f != NULL && fscanf(f, "%63s %llu %llu", id, &sent, &done) == 3) {
            if (done >= w0 && done <= w1 && done >= sent) {
                lat_add(l, (unsigned)(done - sent));
            }
        }
        if (f != NULL) {
            fclose(f);
        }
        unlink(path);
    }
}

static int cmp_unsigned(const void *a, const void *b) {
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

void lat_sort(lat *l) {
    qsort(l->v, l->n, sizeof(*l->v), cmp_unsigned);
}

double percentile(const lat *l, double q) {
    if (l->n == 0) {
        return -1;
    }
    size_t i = (size_t)(q * (double)l->n);
    return (double)l->v[i < l->n ? i : l->n - 1];
}
