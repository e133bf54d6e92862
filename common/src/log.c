/* SPDX-License-Identifier: MIT */
/*
 * log.c - the SLUICE_LOG sink: one key=value line per event on stderr.
 *
 * A line looks like `2026-11-22T03:48:12.123Z level=info prog=sluice-worker msg...` (UTC). It is
 * formatted whole into a stack buffer and handed to a single write(2), so lines from different
 * threads do not interleave (each is well under PIPE_BUF). Newlines inside a message are turned
 * into spaces to keep one event per line; a message too long for the buffer ends in "...".
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "sluice/log.h"

#define LOG_LINE_MAX 2048

int sluice_log_level = SLUICE_LOG_OFF;

static char log_prog[64];

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void sluice_log_set_level(int level, const char *prog) {
    if (level < SLUICE_LOG_OFF) {
        level = SLUICE_LOG_OFF;
    } else if (level > SLUICE_LOG_DEBUG) {
        level = SLUICE_LOG_DEBUG;
    }
    sluice_log_level = level;
    snprintf(log_prog, sizeof(log_prog), "%s", prog != NULL ? prog : "");
}

int sluice_log_level_parse(const char *s) {
    if (s == NULL) {
        return -2;
    }
    if (strcasecmp(s, "off") == 0) {
        return SLUICE_LOG_OFF;
    }
    for (int i = 0; i <= SLUICE_LOG_DEBUG; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            return i;
        }
    }
    return -2;
}

/* Writes the timestamp, level and program fields; returns the bytes used. */
static size_t log_prefix(char *line, size_t cap, int level) {
    struct timespec ts;
    struct tm tm;
    size_t n;
    int m;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = strftime(line, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    m = snprintf(line + n, cap - n, ".%03ldZ level=%s", ts.tv_nsec / 1000000L, level_names[level]);
    n += m > 0 ? (size_t)m : 0;
    if (log_prog[0] != '\0') {
        m = snprintf(line + n, cap - n, " prog=%s", log_prog);
        n += m > 0 ? (size_t)m : 0;
    }
    line[n++] = ' ';
    return n;
}

void sluice__log(int level, const char *fmt, ...) {
    char line[LOG_LINE_MAX];
    size_t n, end;
    va_list ap;
    int m;
    ssize_t w;
    if (level < SLUICE_LOG_ERROR || level > SLUICE_LOG_DEBUG || fmt == NULL) {
        return;
    }
    n = log_prefix(line, sizeof(line) - 1, level);
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    end = m < 0 ? n : n + (size_t)m;
    if (end > sizeof(line) - 2) {
        end = sizeof(line) - 2;
        memcpy(line + end - 3, "...", 3);
    }
    for (size_t i = n; i < end; i++) {
        if (line[i] == '\n' || line[i] == '\r') {
            line[i] = ' ';
        }
    }
    line[end++] = '\n';
    do {
        w = write(STDERR_FILENO, line, end);
    } while (w < 0 && errno == EINTR);
}

const char *sluice_log_q(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    if (cap < 3) {
        return cap > 0 ? (buf[0] = '\0', buf) : buf;
    }
    buf[n++] = '"';
    for (; s != NULL && *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        char esc[5];
        size_t k;
        if (ch == '"' || ch == '\\') {
            esc[0] = '\\', esc[1] = (char)ch, k = 2;
        } else if (ch == '\n') {
            esc[0] = '\\', esc[1] = 'n', k = 2;
        } else if (ch < 0x20 || ch == 0x7f) {
            snprintf(esc, sizeof(esc), "\\x%02x", ch);
            k = 4;
        } else {
            esc[0] = (char)ch, k = 1;
        }
        if (n + k + 2 > cap) {
            break;
        }
        memcpy(buf + n, esc, k);
        n += k;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}
