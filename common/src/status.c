/* SPDX-License-Identifier: MIT */
/*
 * status.c - messages, names and retry advice for the status codes of status.h.
 *
 * Both lookups are generated from SLUICE_STATUS_MAP, so a code added to the table gets its
 * message and name here without further edits. Which codes are worth retrying is a judgement
 * about Redis, not part of the table, and is kept next to the lookups.
 */
#include "sluice/status.h"

const char *sluice_strerror(int status) {
    switch (status) {
    case SLUICE_OK:
        return "success";
#define SLUICE_STATUS_MSG(name, code, msg)                                                         \
    case SLUICE_##name:                                                                            \
        return msg;
        SLUICE_STATUS_MAP(SLUICE_STATUS_MSG)
#undef SLUICE_STATUS_MSG
    default:
        return "unknown status";
    }
}

const char *sluice_err_name(int status) {
    switch (status) {
    case SLUICE_OK:
        return "OK";
#define SLUICE_STATUS_NAME(name, code, msg)                                                        \
    case SLUICE_##name:                                                                            \
        return #name;
        SLUICE_STATUS_MAP(SLUICE_STATUS_NAME)
#undef SLUICE_STATUS_NAME
    default:
        return "EUNKNOWNSTATUS";
    }
}

/*
 * Transient: the server or the path to it is temporarily unable to serve (down, slow, busy with
 * a script, loading, out of memory, unable to persist, the queue's slot migrating), and the
 * same call may succeed later.
 * EUNKNOWN is not in this list: the command may already have run, so only a caller holding an
 * idempotency key may retry it, and that is the caller's decision.
 */
int sluice_status_is_transient(int status) {
    switch (status) {
    case SLUICE_ECONN:
    case SLUICE_ETIMEDOUT:
    case SLUICE_EBUSY:
    case SLUICE_ELOADING:
    case SLUICE_EOOM:
    case SLUICE_EMISCONF:
    case SLUICE_EMIGRATING:
        return 1;
    default:
        return 0;
    }
}
