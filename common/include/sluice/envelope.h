/* SPDX-License-Identifier: MIT */
/*
 * envelope.h - the msgpack envelope of a sluice message (data model version 1).
 *
 * An envelope is a msgpack map with short string keys:
 *   "v"  positive integer, format version, 1                      (required)
 *   "p"  bin (str accepted from producers that cannot emit bin)   (required) the payload
 *   "h"  map of str -> str, e.g. "request-id"                     (optional) headers
 *   "k"  str                                                      (optional) tenant/category
 * Unknown keys are skipped (but must still be well-formed and within the limits), so later
 * versions can add fields. The admission time is the stream entry id, not a field.
 *
 * The decoder treats every byte as hostile and never allocates: it checks the total size cap,
 * the nesting cap, every declared length and count against the bytes left, UTF-8 in header
 * names, the type of each known field, and that the whole buffer is consumed. On success the
 * decoded struct points into the caller's buffer (borrowed: valid while the buffer is).
 * Pure: no I/O, no printing.
 * Thread-safe: no state; a decoded view borrows the caller's buffer.
 */
#ifndef SLUICE_ENVELOPE_H
#define SLUICE_ENVELOPE_H

#include <stddef.h>

#include "sluice/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_ENVELOPE_VERSION     1
#define SLUICE_ENVELOPE_MAX_BYTES   (16u * 1024u * 1024u) /* hard cap on one envelope */
#define SLUICE_ENVELOPE_MAX_DEPTH   16                    /* nesting of arrays/maps */
#define SLUICE_ENVELOPE_MAX_HEADERS 64                    /* entries in "h" */

typedef struct sluice_header {
    const char *name; /* not NUL-terminated */
    size_t name_len;
    const char *value; /* not NUL-terminated */
    size_t value_len;
} sluice_header;

typedef struct sluice_envelope {
    const unsigned char *payload; /* may be NULL when payload_len is 0 */
    size_t payload_len;
    const sluice_header *headers; /* nheaders entries */
    size_t nheaders;
    const char *tenant; /* NULL = none; not NUL-terminated */
    size_t tenant_len;
} sluice_envelope;

/*
 * Exact number of bytes sluice_envelope_encode() writes for `e`. Returns 0 when `e` breaks a
 * limit (more than SLUICE_ENVELOPE_MAX_HEADERS headers, or a size over SLUICE_ENVELOPE_MAX_BYTES).
 */
SLUICE_API size_t sluice_envelope_size(const sluice_envelope *e);

/* 1 when the n bytes are strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
 * above U+10FFFF), the rule for every text field of an envelope; else 0. */
SLUICE_API int sluice_utf8_valid(const void *text, size_t n);

/*
 * Encodes `e` into out[0..cap). Returns 0 and sets *len, SLUICE_ETOOBIG when cap is too small
 * or a limit is broken, SLUICE_EINVAL for a NULL argument. Uses msgpack-c's packer.
 * Also SLUICE_EINVAL for a NULL pointer with a non-zero length, and for header names, header
 * values or a tenant that are not valid UTF-8 (the decoder would refuse them).
 */
SLUICE_API int sluice_envelope_encode(const sluice_envelope *e, unsigned char *out, size_t cap,
                                      size_t *len);

/*
 * Decodes buf[0..len). `max_bytes` is the caller's size cap (0 = SLUICE_ENVELOPE_MAX_BYTES; never
 * more than that). Headers are written to hdrs[0..max_hdrs) and out->headers points there; more
 * headers than max_hdrs is an error. Returns 0, SLUICE_ETOOBIG (over the size cap) or
 * SLUICE_EDECODE with a message naming the field or byte offset written to err (may be NULL).
 * The header limit is min(max_hdrs, SLUICE_ENVELOPE_MAX_HEADERS); header values and "k" must be
 * UTF-8 as well. SLUICE_EINVAL for a NULL buf (with len > 0) or out, or NULL hdrs with
 * max_hdrs > 0. On any error *out is all zero.
 */
SLUICE_API int sluice_envelope_decode(const unsigned char *buf, size_t len, size_t max_bytes,
                                      sluice_envelope *out, sluice_header *hdrs, size_t max_hdrs,
                                      char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* SLUICE_ENVELOPE_H */
