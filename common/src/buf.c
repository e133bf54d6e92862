/* SPDX-License-Identifier: MIT */
/* buf.c - capped growable text and argument arrays (see sluice/buf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "sluice/buf.h"
#include "sluice/status.h"

#define TEXT_FIRST_CAP 4096

void sluice_text_printf(sluice_text *t, const char *fmt, ...) {
    for (int attempt = 0; attempt < 2 && !t->failed; attempt++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if (t->p != NULL && (size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : TEXT_FIRST_CAP;
        while (cap < t->len + (size_t)n + 1) {
            cap *= 2;
        }
        char *p = cap <= t->max ? realloc(t->p, cap) : NULL;
        if (p == NULL) {
            t->failed = 1;
            return;
        }
        t->p = p;
        t->cap = cap;
    }
}

void sluice_text_free(sluice_text *t) {
    free(t->p);
    t->p = NULL;
    t->len = t->cap = 0;
}

int sluice_argv_init(sluice_argv *a, int n) {
    a->n = n;
    if (n <= SLUICE_ARGV_STACK) {
        a->v = a->stack_v;
        a->lens = a->stack_lens;
        return 0;
    }
    a->v = malloc(sizeof(*a->v) * (size_t)n);
    a->lens = malloc(sizeof(*a->lens) * (size_t)n);
    if (a->v == NULL || a->lens == NULL) {
        free((void *)a->v);
        free(a->lens);
        return SLUICE_ENOMEM;
    }
    return 0;
}

void sluice_argv_free(sluice_argv *a) {
    if (a->v != a->stack_v) {
        free((void *)a->v);
        free(a->lens);
    }
}
