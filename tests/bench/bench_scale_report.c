/* SPDX-License-Identifier: MIT */
/* bench_scale_report.c - the output of `sluice-bench scale`: table, JSON lines, CSV and a
 * gnuplot chart (see bench_scale.h). */
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/cli.h"

#include "bench_scale.h"

extern char **environ;

/* ---- output ---- */

static void print_table(const opts *o, const row *rows, size_t n) {
    char a[32], b[32], c[32], d[32];
    char fair[48] = "";
    if (o->tenants > 0) {
        snprintf(fair, sizeof(fair), ", fair queue over %lld tenant%s", o->tenants,
                 o->tenants == 1 ? "" : "s");
    }
    printf("sluice-bench scale: handler sleep:%lld, concurrency %lld per worker, capacity %lld, "
           "%lld producer thread%s x batch %lld, %llds measured per row%s\n",
           o->work_ms, o->conc, o->capacity, o->producers, o->producers == 1 ? "" : "s", o->batch,
           o->duration_s, fair);
    printf("%7s %12s %12s %12s %8s %8s %12s %9s %6s\n", "workers", "processed/s", "admitted/s",
           "rejected/s", "p50 ms", "p99 ms", "ideal/s", "redis cpu", "cpu");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        printf("%7lld %12s %12s %12s %8.0f %8.0f %12s %8.0f%% %5.0f%%\n", r->workers,
               sluice_fmt_count(a, sizeof(a), (unsigned long long)r->processed),
               sluice_fmt_count(b, sizeof(b), (unsigned long long)r->admitted),
               sluice_fmt_count(c, sizeof(c), (unsigned long long)r->rejected), r->p50, r->p99,
               r->ideal >= 0 ? sluice_fmt_count(d, sizeof(d), (unsigned long long)r->ideal) : "-",
               r->redis_cpu, r->cpu);
    }
    printf("latency: producer send -> handler verdict (ms). ideal: workers x concurrency / work. "
           "redis cpu: %% of one core; cpu: %% of all %ld cores.\n",
           sysconf(_SC_NPROCESSORS_ONLN));
}

static void print_json(const opts *o, const row *r) {
    printf("{\"bench\":\"scale\",\"workers\":%lld,\"processed_per_s\":%.1f,\"admitted_per_s\":%.1f,"
           "\"rejected_per_s\":%.1f,\"p50_ms\":%.0f,\"p99_ms\":%.0f,\"ideal_per_s\":%.0f,"
           "\"redis_cpu_pct\":%.1f,\"cpu_pct\":%.1f,\"samples\":%lld,\"work_ms\":%lld,"
           "\"concurrency\":%lld,\"capacity\":%lld,\"tenants\":%lld}\n",
           r->workers, r->processed, r->admitted, r->rejected, r->p50, r->p99, r->ideal,
           r->redis_cpu, r->cpu, r->samples, o->work_ms, o->conc, o->capacity, o->tenants);
}

static int write_csv(const char *path, const row *rows, size_t n) {
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "sluice-bench scale: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    fprintf(f, "workers,processed_per_s,admitted_per_s,rejected_per_s,p50_ms,p99_ms,ideal_per_s,"
               "redis_cpu_pct,cpu_pct,samples\n");
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        fprintf(f, "%lld,%.1f,%.1f,%.1f,%.0f,%.0f,%.0f,%.1f,%.1f,%lld\n", r->workers, r->processed,
                r->admitted, r->rejected, r->p50, r->p99, r->ideal, r->redis_cpu, r->cpu,
                r->samples);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Path of `prog` in $PATH, the way `command -v` finds it. */
static int find_in_path(const char *prog, char *out, size_t len) {
    const char *path = getenv("PATH");
    while (path != NULL && *path != '\0') {
        size_t n = strcspn(path, ":");
        snprintf(out, len, "%.*s/%s", (int)n, path, prog);
        if (n > 0 && access(out, X_OK) == 0) {
            return 0;
        }
        path += n + (path[n] == ':');
    }
    return -1;
}

static void gnuplot_script(FILE *f, const opts *o, const char *csv, const row *rows, size_t n) {
    double ymax = 1;
    for (size_t i = 0; i < n; i++) {
        ymax = rows[i].processed > ymax ? rows[i].processed : ymax;
        ymax = rows[i].admitted > ymax ? rows[i].admitted : ymax;
    }
    fprintf(f, "set terminal pngcairo size 900,700 font 'sans,10'\nset output '%s'\n", o->plot);
    fprintf(f,
            "set datafile separator ','\nset multiplot layout 2,1 title "
            "'sluice-bench scale: sleep:%lld ms handler, concurrency %lld per worker, "
            "capacity %lld'\n",
            o->work_ms, o->conc, o->capacity);
    fprintf(f, "set lmargin 12\nset rmargin 10\nset logscale x 2\nset grid\nset key left top\n"
               "set xtics (");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s'%lld' %lld", i ? ", " : "", rows[i].workers, rows[i].workers);
    }
    fprintf(f, ")\nset xrange [%g:%g]\n", (double)rows[0].workers * 0.8,
            (double)rows[n - 1].workers * 1.25);
    fprintf(f,
            "set ylabel 'messages / s'\nset yrange [0:%.0f]\n"
            "set y2label 'cpu %%'\nset y2range [0:100]\nset y2tics 25\n"
            "plot '%s' every ::1 using 1:2 with linespoints lw 2 title 'processed/s', \\\n"
            "     '' every ::1 using 1:3 with linespoints title 'admitted/s', \\\n"
            "     '' every ::1 using 1:7 with lines dt 2 title 'ideal (workers x C / work)', \\\n"
            "     '' every ::1 using 1:9 axes x1y2 with linespoints dt 3 title "
            "'machine cpu %% (right)'\n",
            ymax * 1.4, csv);
    fprintf(f,
            "unset y2label\nunset y2tics\nset key right top\nset xlabel 'worker processes'\n"
            "set ylabel 'end-to-end latency, ms'\nset yrange [0:*]\n"
            "plot '%s' every ::1 using 1:5 with linespoints lw 2 title 'p50', \\\n"
            "     '' every ::1 using 1:6 with linespoints title 'p99'\n"
            "unset multiplot\n",
            csv);
}

static void plot(const opts *o, const char *csv, const char *dir, const row *rows, size_t n) {
    char gp[PATH_MAX], script[PATH_MAX + 16];
    if (find_in_path("gnuplot", gp, sizeof(gp)) != 0) {
        fprintf(stderr, "sluice-bench scale: plot skipped: gnuplot is not installed "
                        "(apt-get install gnuplot-nox)\n");
        return;
    }
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    FILE *f = fopen(script, "w");
    if (f == NULL) {
        return;
    }
    gnuplot_script(f, o, csv, rows, n);
    fclose(f);
    pid_t pid;
    int status = -1;
    const char *argv[] = {gp, script, NULL};
    if (posix_spawn(&pid, gp, NULL, NULL, (char *const *)argv, environ) == 0) {
        waitpid(pid, &status, 0);
    }
    if (status == 0) {
        fprintf(stderr, "sluice-bench scale: plot written to %s\n", o->plot);
    } else {
        fprintf(stderr, "sluice-bench scale: gnuplot failed (script %s)\n", script);
    }
    unlink(script);
}

void report(const opts *o, const char *dir, const row *rows, size_t n) {
    char csv[PATH_MAX + 16];
    if (o->json) {
        for (size_t i = 0; i < n; i++) {
            print_json(o, &rows[i]);
        }
    } else {
        print_table(o, rows, n);
    }
    if (o->csv != NULL && write_csv(o->csv, rows, n) == 0) {
        fprintf(stderr, "sluice-bench scale: CSV written to %s\n", o->csv);
    }
    if (o->plot != NULL && n > 0) {
        snprintf(csv, sizeof(csv), "%s/scale.csv", dir);
        if (write_csv(o->csv != NULL ? o->csv : csv, rows, n) == 0) {
            plot(o, o->csv != NULL ? o->csv : csv, dir, rows, n);
        }
        unlink(csv);
    }
}
