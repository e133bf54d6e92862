/* SPDX-License-Identifier: MIT */
/*
 * buf.h - the two buffers sluice's code kept writing twice: text that grows up to a hard cap
 * (HTTP bodies, Prometheus pages) and a command's argument array, on the stack while it is
 * small and on the heap beyond. Internal to sluice; one buffer is used by one thread.
 */
#ifndef SLUICE_BUF_H
#define SLUICE_BUF_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Text that grows by doubling up to `max` bytes; past it (or out of memory) `failed` is set and
 * later writes are ignored, so a page is either whole or known to be cut. Zero-initialize with
 * a max: sluice_text t = {.max = 65536}. */
typedef struct sluice_text {
    char *p;
    size_t len, cap, max;
    int failed;
} sluice_text;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void sluice_text_printf(sluice_text *t, const char *fmt, ...);
void sluice_text_free(sluice_text *t);

#define SLUICE_ARGV_STACK 260 /* on the stack: an ack batch (256 ids and the group) fits */

/* The argument array of one command: v[0..n) and lens[0..n). */
typedef struct sluice_argv {
    const char **v;
    size_t *lens;
    int n;
    const char *stack_v[SLUICE_ARGV_STACK];
    size_t stack_lens[SLUICE_ARGV_STACK];
} sluice_argv;

/* Makes room for n arguments. Returns 0 or SLUICE_ENOMEM (then nothing to free). */
int sluice_argv_init(sluice_argv *a, int n);
void sluice_argv_free(sluice_argv *a);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_BUF_H */
