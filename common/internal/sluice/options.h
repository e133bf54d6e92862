/* SPDX-License-Identifier: MIT */
/*
 * options.h - how the public options structs grow without breaking the ABI.
 *
 * Each options struct opens with `size_t struct_size`, which its _init macro sets to the size
 * the caller was compiled with (sizeof at the call site). A library built with more fields
 * than the caller knows writes and reads only the caller's bytes and takes its own defaults
 * for the rest; a library older than the caller's headers ignores the bytes it does not know.
 * Internal to sluice; pure, thread-safe.
 */
#ifndef SLUICE_OPTIONS_H
#define SLUICE_OPTIONS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* _init: the library's defaults (lib_size bytes, struct_size first) into the caller's struct of
 * caller_size bytes; bytes beyond lib_size zeroed; dst's struct_size = caller_size. */
void sluice__options_give(void *dst, size_t caller_size, const void *defaults, size_t lib_size);

/* _new: dst (lib_size bytes, holding the defaults) takes the caller's struct src up to its
 * struct_size (0: not from _init, read as the current layout); dst's struct_size = lib_size. */
void sluice__options_take(void *dst, size_t lib_size, const void *src);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_OPTIONS_H */
