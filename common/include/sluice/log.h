/* SPDX-License-Identifier: MIT */
/*
 * log.h - one logging macro with levels, key=value lines on stderr.
 *
 * Library code logs through SLUICE_LOG; nothing is written until a binary calls
 * sluice_log_set_level() (the default level is SLUICE_LOG_OFF), so the libraries never print on
 * their own. Arguments are not evaluated below the threshold. Never pass a password: use
 * sluice_url_redact().
 */
#ifndef SLUICE_LOG_H
#define SLUICE_LOG_H

#include <stddef.h>

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    SLUICE_LOG_OFF = -1,
    SLUICE_LOG_ERROR = 0,
    SLUICE_LOG_WARN = 1,
    SLUICE_LOG_INFO = 2,
    SLUICE_LOG_DEBUG = 3,
};

extern SLUICE_API int sluice_log_level;

/* Sets the threshold; `prog` prefixes each line (may be NULL). Not thread-safe: call early. */
SLUICE_API void sluice_log_set_level(int level, const char *prog);

/* Parses "error", "warn", "info", "debug", "off". Returns the level or -2 when unknown. */
SLUICE_API int sluice_log_level_parse(const char *s);

/* The line behind SLUICE_LOG (call the macro, not this). */
#if defined(__GNUC__)
SLUICE_API void sluice__log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#else
SLUICE_API void sluice__log(int level, const char *fmt, ...);
#endif

/* A log value in double quotes, with quote, backslash and control characters escaped (\", \\,
 * \n, \xNN) so that a value (an error text, a reason) can never break the one-line key=value
 * format; cut to fit cap. The one quoting rule of every log line: `detail=%s` with
 * sluice_log_q(text, buf, sizeof(buf)). Returns buf. */
SLUICE_API const char *sluice_log_q(const char *s, char *buf, size_t cap);

#define SLUICE_LOG(level, ...)                                                                     \
    do {                                                                                           \
        if ((level) <= sluice_log_level) {                                                         \
            sluice__log((level), __VA_ARGS__);                                                     \
        }                                                                                          \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_LOG_H */
