/* SPDX-License-Identifier: MIT */
/*
 * client.c - the URL and connection options of every sluice client (client.h). Internal: the
 * producer library is built with its own copy (pure, no state), see common/CMakeLists.txt.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/client.h"
#include "sluice/status.h"
#include "sluice/tls.h"

int sluice_client_setup(const char *redis_url, int connect_timeout_ms, int command_timeout_ms,
                        int force_eval, const char *name, sluice_url *url, sluice_conn_options *co,
                        char *err, size_t errlen) {
    if (sluice_url_parse(url, redis_url ? redis_url : sluice_url_default(), err, errlen) != 0 ||
        sluice_url_supported(url, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    sluice_conn_options_init(co);
    co->connect_timeout_ms = connect_timeout_ms;
    co->command_timeout_ms = command_timeout_ms;
    co->force_eval = force_eval;
    co->name = name;
    return 0;
}

int sluice_client_async_supported(const sluice_url *url, char *err, size_t errlen) {
    if (sluice_url_supported(url, err, errlen) != 0) {
        return SLUICE_EINVAL;
    }
    return 0;
}

void sluice__client_tls(sluice_conn_options *co, const sluice_conn_options *tls) {
    if (tls == NULL) {
        return;
    }
    co->tls_ca_file = tls->tls_ca_file;
    co->tls_ca_dir = tls->tls_ca_dir;
    co->tls_cert_file = tls->tls_cert_file;
    co->tls_key_file = tls->tls_key_file;
    co->tls_server_name = tls->tls_server_name;
    co->tls_insecure_skip_verify = tls->tls_insecure_skip_verify;
}

/* The tls_* string fields of sluice_conn_options, in one list. */
#define TLS_STRING_FIELDS(o)                                                                       \
    {                                                                                              \
        &(o)->tls_ca_file, &(o)->tls_ca_dir, &(o)->tls_cert_file, &(o)->tls_key_file,              \
            &(o)->tls_server_name                                                                  \
    }
#define TLS_NSTRINGS 5

int sluice__tls_options_keep(sluice_conn_options *o) {
    const char **f[TLS_NSTRINGS] = TLS_STRING_FIELDS(o);
    int st = 0;
    for (int i = 0; i < TLS_NSTRINGS; i++) {
        const char *v = *f[i];
        *f[i] = NULL;
        if (v != NULL && v[0] != '\0' && st == 0 && (*f[i] = strdup(v)) == NULL) {
            st = SLUICE_ENOMEM;
        }
    }
    if (st != 0) {
        sluice__tls_options_release(o);
    }
    return st;
}

void sluice__tls_options_release(sluice_conn_options *o) {
    if (o == NULL) {
        return;
    }
    const char **f[TLS_NSTRINGS] = TLS_STRING_FIELDS(o);
    for (int i = 0; i < TLS_NSTRINGS; i++) {
        free((char *)*f[i]);
        *f[i] = NULL;
    }
}
