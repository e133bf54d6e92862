/* SPDX-License-Identifier: MIT */
/*
 * client.c - the URL and connection options of every sluice client (client.h). Internal: the
 * producer library is built with its own copy (pure, no state), see common/CMakeLists.txt.
 */
#include <stddef.h>
#include <stdio.h>

#include "sluice/client.h"
#include "sluice/status.h"

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
    if (url->is_tls && url->is_sentinel) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen,
                     "rediss+sentinel:// is not supported by the async connection yet (the "
                     "blocking clients sluice-enqueue, sluice-admin, sluice-limit support it)");
        }
        return SLUICE_EINVAL;
    }
    if (url->is_tls) {
        if (err != NULL && errlen > 0) {
            snprintf(err, errlen, "rediss:// is not supported by the async connection yet");
        }
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
