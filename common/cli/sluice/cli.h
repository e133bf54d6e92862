/* SPDX-License-Identifier: MIT */
/*
 * cli.h - small helpers shared by the sluice binaries: strict number parsing, exit codes, the
 * common options (--version, --log-level, listen addresses), JSON text; and the clocks of
 * clock.h. The sluice_cli static library: the binaries and tests link it, the libraries never.
 *
 * Every parser rejects empty strings, signs where not allowed, trailing garbage and values out of
 * [min, max], and writes a message naming the option and the bad value. No printing here.
 */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "sluice/clock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes shared by every sluice binary. */
#define SLUICE_EXIT_OK       0 /* done */
#define SLUICE_EXIT_REJECTED 1 /* rejected (queue full) or nothing to do */
#define SLUICE_EXIT_USAGE    2 /* usage error or bad input */
#define SLUICE_EXIT_REDIS                                                                          \
    3 /* redis unavailable, timed out or refused the command, or TLS                               \
         failed (SLUICE_ETLS: "certificate verify failed: ...") */

struct sluice_conn_options;
/*
 * The TLS settings every binary takes from its environment, into co's tls_* fields:
 * SLUICE_TLS_CA_FILE, SLUICE_TLS_CA_DIR, SLUICE_TLS_CERT_FILE, SLUICE_TLS_KEY_FILE,
 * SLUICE_TLS_SERVER_NAME (unset or empty: the field is left alone) and
 * SLUICE_TLS_INSECURE_SKIP_VERIFY (1: no certificate or name check, for tests only; 0 or unset:
 * verify). The strings point into the environment (valid while it is not changed; the
 * connection copies them). Returns 0, or SLUICE_EINVAL with a message naming the variable in err: a
 * certificate without its key or the reverse, a skip-verify value other than 0 or 1.
 */
int sluice_cli_tls_env(struct sluice_conn_options *co, char *err, size_t errlen);

/* Parses a decimal integer in [min, max] (k/m/g suffixes not accepted). Returns 0 or EINVAL. */
/* Prints "PROG VERSION (data model 1; hiredis X.Y.Z, libuv X.Y.Z)" on stdout; returns
 * SLUICE_EXIT_OK, for `return sluice_cli_version("sluice-x");` in an option switch. */
int sluice_cli_version(const char *prog);

/* --log-level LEVEL, the same in every binary: parses error, warn, info, debug or off and sets
 * the threshold of the key=value log lines on stderr, prefixed prog=PROG. Call while parsing
 * the options (before any thread starts). Returns 0, or -1 with a message naming the value in
 * err. */
int sluice_cli_log_level(const char *level, const char *prog, char *err, size_t errlen);

struct sockaddr_storage;
/* A listening address for the binaries (--listen, --metrics), one set of forms for all:
 * "HOST:PORT" with an IPv4 literal or "localhost", "[IPv6]:PORT", and ":PORT" or "*:PORT"
 * for all IPv4 interfaces; PORT 0..65535 (0: any free port). Returns 0, or -1 with a message
 * naming `opt` and the bad part in err. */
int sluice_listen_addr_parse(const char *opt, const char *s, struct sockaddr_storage *out,
                             char *err, size_t errlen);

int sluice_parse_ll(const char *opt, const char *s, long long min, long long max, long long *out,
                    char *err, size_t errlen);

/* Parses a size with an optional suffix k/K (1024), m/M, g/G, or plain bytes. */
int sluice_parse_size(const char *opt, const char *s, size_t min, size_t max, size_t *out,
                      char *err, size_t errlen);

/* Parses a comma-separated list of integers in [min, max] into out[0..cap). Sets *n. */
int sluice_parse_ll_list(const char *opt, const char *s, long long min, long long max,
                         long long *out, size_t cap, size_t *n, char *err, size_t errlen);

/* Formats a count the way a person reads it: 1234567 -> "1,234,567". Returns buf. */
char *sluice_fmt_count(char *buf, size_t len, unsigned long long v);

/* Writes len bytes of s to f as a JSON value (the one writer of user text in JSON output):
 * valid UTF-8 as a JSON string (only quote, backslash and control characters escaped);
 * anything else as {"base64":"..."}, so bytes are never shown as other characters than they
 * are and the output stays valid JSON. */
void sluice_cli_json_str(FILE *f, const char *s, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_CLI_H */
