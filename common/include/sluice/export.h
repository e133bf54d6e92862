/* SPDX-License-Identifier: MIT */
/*
 * export.h - SLUICE_API, the mark of every function and variable of the public API.
 *
 * The libraries are built with hidden visibility (-fvisibility=hidden): a shared library
 * exports what its installed headers declare with SLUICE_API and nothing else, so sluice's
 * internal functions are never part of the ABI (tests/install/check.sh compares the two).
 * The options structs grow at their end without an ABI break: each opens with struct_size, set
 * by its _init macro to the caller's sizeof (docs/c-api.md, "The ABI").
 */
#ifndef SLUICE_EXPORT_H
#define SLUICE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

#endif /* SLUICE_EXPORT_H */
