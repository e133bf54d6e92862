/* SPDX-License-Identifier: MIT */
/*
 * options.c - the copies behind the options structs' struct_size (options.h).
 */
#include <string.h>

#include "sluice/options.h"

void sluice__options_give(void *dst, size_t caller_size, const void *defaults, size_t lib_size) {
    size_t n = caller_size < lib_size ? caller_size : lib_size;
    memcpy(dst, defaults, n);
    if (caller_size > lib_size) {
        memset((char *)dst + lib_size, 0, caller_size - lib_size);
    }
    *(size_t *)dst = caller_size;
}

void sluice__options_take(void *dst, size_t lib_size, const void *src) {
    size_t n = *(const size_t *)src;
    if (n == 0 || n > lib_size) {
        n = lib_size;
    }
    memcpy(dst, src, n);
    *(size_t *)dst = lib_size;
}
