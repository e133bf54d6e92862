/* SPDX-License-Identifier: MIT */
/*
 * fuzz_envelope.c - libFuzzer target for the envelope decoder (docs/faults.md B14).
 *
 * Every input is decoded with a small header array. A rejected input must come with a message.
 * An accepted one is re-encoded with our encoder, which must succeed with exactly the predicted
 * size, and the re-encoded bytes must decode to the same fields; encoding those again must give
 * the same bytes (the encoder's output is canonical). Any breach calls abort(). Built only with
 * -DSLUICE_FUZZ=ON and clang; the sanitizers report memory errors and leaks.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/envelope.h"

#define FUZZ_MAX_HDRS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_bytes(const void *a, size_t alen, const void *b, size_t blen) {
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static void check_same(const sluice_envelope *a, const sluice_envelope *b) {
    if (!same_bytes(a->payload, a->payload_len, b->payload, b->payload_len) ||
        a->nheaders != b->nheaders || (a->tenant == NULL) != (b->tenant == NULL)) {
        abort();
    }
    for (size_t i = 0; i < a->nheaders; i++) {
        const sluice_header *x = &a->headers[i], *y = &b->headers[i];
        if (!same_bytes(x->name, x->name_len, y->name, y->name_len) ||
            !same_bytes(x->value, x->value_len, y->value, y->value_len)) {
            abort();
        }
    }
    if (a->tenant != NULL && !same_bytes(a->tenant, a->tenant_len, b->tenant, b->tenant_len)) {
        abort();
    }
}

/* Encodes e into a buffer of exactly the predicted size; aborts on any failure. */
static unsigned char *encode_exact(const sluice_envelope *e, size_t *len) {
    size_t need = sluice_envelope_size(e);
    unsigned char *buf = need > 0 ? malloc(need) : NULL;
    if (buf == NULL || sluice_envelope_encode(e, buf, need, len) != 0 || *len != need) {
        abort();
    }
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sluice_header hdrs[FUZZ_MAX_HDRS], hdrs2[FUZZ_MAX_HDRS];
    sluice_envelope e, e2;
    unsigned char *buf, *again;
    size_t len = 0, len2 = 0;
    char err[256];
    if (sluice_envelope_decode(data, size, 0, &e, hdrs, FUZZ_MAX_HDRS, err, sizeof(err)) != 0) {
        if (err[0] == '\0') {
            abort(); /* every rejection names its cause */
        }
        return 0;
    }
    buf = encode_exact(&e, &len);
    if (sluice_envelope_decode(buf, len, 0, &e2, hdrs2, FUZZ_MAX_HDRS, err, sizeof(err)) != 0) {
        abort();
    }
    check_same(&e, &e2);
    again = encode_exact(&e2, &len2);
    if (!same_bytes(buf, len, again, len2)) {
        abort();
    }
    free(again);
    free(buf);
    return 0;
}
