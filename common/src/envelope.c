/* SPDX-License-Identifier: MIT */
/*
 * envelope.c - the msgpack envelope codec (data model version 1).
 *
 * The encoder drives msgpack-c's packer into the caller's fixed buffer; its size is computed
 * arithmetically from the same rules the packer follows (smallest header for each length), so
 * sluice_envelope_size() and the encoder can never disagree without the round-trip tests noticing.
 *
 * The decoder is written by hand because msgpack-c's unpacker allocates a zone and builds a tree
 * whose size an attacker controls. Here every byte is hostile: each header is read only after
 * checking that its bytes exist, each declared length or count is compared with the bytes left
 * before it is used (a map of N entries needs at least 2N more bytes, an array N), unknown values
 * are skipped by a bounded walk with an explicit stack of at most SLUICE_ENVELOPE_MAX_DEPTH
 * levels, and nothing is allocated: the result points into the caller's buffer.
 */
#include <msgpack.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sluice/envelope.h"
#include "sluice/status.h"

/* ------------------------------------------------------------------------------------------ */
/* Shared: UTF-8                                                                               */
/* ------------------------------------------------------------------------------------------ */

int sluice_utf8_valid(const void *text, size_t n) {
    const unsigned char *s = text;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t need;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf) {
            need = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            need = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            need = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i - 1 < need) {
            return 0;
        }
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (need == 3 && (cp < 0x10000 || cp > 0x10ffff))) {
            return 0;
        }
        i += need + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Encoder                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Header sizes msgpack-c's packer chooses (msgpack/pack_template.h). */
static size_t str_hdr(size_t n) {
    return n < 32 ? 1 : n < 256 ? 2 : n < 65536 ? 3 : 5;
}

static size_t bin_hdr(size_t n) {
    return n < 256 ? 2 : n < 65536 ? 3 : 5;
}

static size_t map_hdr(size_t n) {
    return n < 16 ? 1 : n < 65536 ? 3 : 5;
}

/* Adds hdr + n to *total; -1 when that would pass the cap. *total never exceeds the cap, so the
 * sum cannot overflow. */
static int add_len(size_t *total, size_t hdr, size_t n) {
    if (n > SLUICE_ENVELOPE_MAX_BYTES || *total + hdr + n > SLUICE_ENVELOPE_MAX_BYTES) {
        return -1;
    }
    *total += hdr + n;
    return 0;
}

/* A NULL pointer is only allowed with a zero length. */
static int fields_present(const sluice_envelope *e) {
    if (e->payload == NULL && e->payload_len > 0) {
        return 0;
    }
    if (e->headers == NULL && e->nheaders > 0) {
        return 0;
    }
    for (size_t i = 0; e->headers != NULL && i < e->nheaders; i++) {
        const sluice_header *h = &e->headers[i];
        if ((h->name == NULL && h->name_len > 0) || (h->value == NULL && h->value_len > 0)) {
            return 0;
        }
    }
    return 1;
}

static size_t top_entries(const sluice_envelope *e) {
    return 2 + (e->nheaders > 0) + (e->tenant != NULL);
}

size_t sluice_envelope_size(const sluice_envelope *e) {
    size_t total = 0;
    if (e == NULL || e->nheaders > SLUICE_ENVELOPE_MAX_HEADERS || !fields_present(e)) {
        return 0;
    }
    /* map header, "v" and its value, then "p" and its bin */
    total = map_hdr(top_entries(e)) + 2 + 1;
    if (add_len(&total, 2 + bin_hdr(e->payload_len), e->payload_len) != 0) {
        return 0;
    }
    if (e->nheaders > 0) {
        total += 2 + map_hdr(e->nheaders);
        for (size_t i = 0; i < e->nheaders; i++) {
            const sluice_header *h = &e->headers[i];
            if (add_len(&total, str_hdr(h->name_len), h->name_len) != 0 ||
                add_len(&total, str_hdr(h->value_len), h->value_len) != 0) {
                return 0;
            }
        }
    }
    if (e->tenant != NULL && add_len(&total, 2 + str_hdr(e->tenant_len), e->tenant_len) != 0) {
        return 0;
    }
    return total;
}

typedef struct fixed_buf {
    unsigned char *p;
    size_t cap;
    size_t len;
} fixed_buf;

/* msgpack_packer_write into a fixed buffer: fails instead of writing past the end. */
static int fixed_write(void *data, const char *buf, size_t len) {
    fixed_buf *b = data;
    if (len > b->cap - b->len) {
        return -1;
    }
    if (len > 0) {
        memcpy(b->p + b->len, buf, len);
        b->len += len;
    }
    return 0;
}

static int pack_str(msgpack_packer *pk, const char *s, size_t n) {
    return msgpack_pack_str(pk, n) != 0 || msgpack_pack_str_body(pk, s, n) != 0 ? -1 : 0;
}

static int pack_fields(msgpack_packer *pk, const sluice_envelope *e) {
    if (msgpack_pack_map(pk, top_entries(e)) != 0 || pack_str(pk, "v", 1) != 0 ||
        msgpack_pack_uint8(pk, SLUICE_ENVELOPE_VERSION) != 0 || pack_str(pk, "p", 1) != 0 ||
        msgpack_pack_bin(pk, e->payload_len) != 0 ||
        msgpack_pack_bin_body(pk, e->payload, e->payload_len) != 0) {
        return -1;
    }
    if (e->nheaders > 0) {
        if (pack_str(pk, "h", 1) != 0 || msgpack_pack_map(pk, e->nheaders) != 0) {
            return -1;
        }
        for (size_t i = 0; i < e->nheaders; i++) {
            const sluice_header *h = &e->headers[i];
            if (pack_str(pk, h->name, h->name_len) != 0 ||
                pack_str(pk, h->value, h->value_len) != 0) {
                return -1;
            }
        }
    }
    if (e->tenant != NULL &&
        (pack_str(pk, "k", 1) != 0 || pack_str(pk, e->tenant, e->tenant_len) != 0)) {
        return -1;
    }
    return 0;
}

/* The decoder refuses text that is not UTF-8, so the encoder must not produce it. */
static int text_valid(const sluice_envelope *e) {
    for (size_t i = 0; i < e->nheaders; i++) {
        const sluice_header *h = &e->headers[i];
        if (!sluice_utf8_valid((const unsigned char *)h->name, h->name_len) ||
            !sluice_utf8_valid((const unsigned char *)h->value, h->value_len)) {
            return 0;
        }
    }
    return e->tenant == NULL || sluice_utf8_valid((const unsigned char *)e->tenant, e->tenant_len);
}

int sluice_envelope_encode(const sluice_envelope *e, unsigned char *out, size_t cap, size_t *len) {
    msgpack_packer pk;
    fixed_buf fb = {out, cap, 0};
    size_t need;
    if (e == NULL || len == NULL || (out == NULL && cap > 0) || !fields_present(e)) {
        return SLUICE_EINVAL;
    }
    need = sluice_envelope_size(e);
    if (need == 0 || need > cap) {
        return SLUICE_ETOOBIG;
    }
    if (!text_valid(e)) {
        return SLUICE_EINVAL;
    }
    msgpack_packer_init(&pk, &fb, fixed_write);
    if (pack_fields(&pk, e) != 0 || fb.len != need) {
        return SLUICE_ETOOBIG; /* unreachable while the size rules match the packer */
    }
    *len = fb.len;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Decoder: reading one msgpack header                                                         */
/* ------------------------------------------------------------------------------------------ */

enum kind { K_NIL, K_BOOL, K_UINT, K_INT, K_FLOAT, K_STR, K_BIN, K_ARRAY, K_MAP, K_EXT, K_BAD };

static const char *const kind_names[] = {"nil", "bool",  "int", "int", "float",  "str",
                                         "bin", "array", "map", "ext", "invalid"};

/* The 0xc0..0xdf type bytes: kind, width of the length/value field, fixed data bytes after it
 * (ext type byte, fixext data). */
static const struct {
    unsigned char kind, width, extra;
} type_table[32] = {
    {K_NIL, 0, 0},   {K_BAD, 0, 0},   {K_BOOL, 0, 0}, {K_BOOL, 0, 0}, /* c0..c3 */
    {K_BIN, 1, 0},   {K_BIN, 2, 0},   {K_BIN, 4, 0},                  /* c4..c6 */
    {K_EXT, 1, 1},   {K_EXT, 2, 1},   {K_EXT, 4, 1},                  /* c7..c9 */
    {K_FLOAT, 4, 0}, {K_FLOAT, 8, 0},                                 /* ca..cb */
    {K_UINT, 1, 0},  {K_UINT, 2, 0},  {K_UINT, 4, 0}, {K_UINT, 8, 0}, /* cc..cf */
    {K_INT, 1, 0},   {K_INT, 2, 0},   {K_INT, 4, 0},  {K_INT, 8, 0},  /* d0..d3 */
    {K_EXT, 0, 2},   {K_EXT, 0, 3},   {K_EXT, 0, 5},  {K_EXT, 0, 9},  /* d4..d7 */
    {K_EXT, 0, 17},                                                   /* d8 */
    {K_STR, 1, 0},   {K_STR, 2, 0},   {K_STR, 4, 0},                  /* d9..db */
    {K_ARRAY, 2, 0}, {K_ARRAY, 4, 0}, {K_MAP, 2, 0},  {K_MAP, 4, 0},  /* dc..df */
};

typedef struct reader {
    const unsigned char *buf;
    size_t len;
    size_t pos;
    char *err;
    size_t errlen;
} reader;

typedef struct item {
    enum kind kind;
    size_t off;                /* offset of the type byte */
    uint64_t u;                /* K_UINT value */
    int64_t i;                 /* K_INT value */
    uint64_t n;                /* str/bin/ext data bytes, array/map entries */
    const unsigned char *data; /* str/bin data */
} item;

#if defined(__GNUC__)
#define PRINTF_LIKE(f, a) __attribute__((format(printf, f, a)))
#else
#define PRINTF_LIKE(f, a)
#endif

static int fail(reader *r, const char *fmt, ...) PRINTF_LIKE(2, 3);

static int fail(reader *r, const char *fmt, ...) {
    if (r->err != NULL && r->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    return SLUICE_EDECODE;
}

static uint64_t load_be(const unsigned char *p, size_t width) {
    uint64_t v = 0;
    for (size_t k = 0; k < width; k++) {
        v = (v << 8) | p[k];
    }
    return v;
}

/* Classifies the type byte: fixed ranges first, then the table. Sets kind, and n for the
 * fix-forms; returns the width of the field that follows and the fixed extra bytes. */
static void classify(unsigned char b, item *it, size_t *width, size_t *extra) {
    *width = 0;
    *extra = 0;
    if (b <= 0x7f) {
        it->kind = K_UINT;
        it->u = b;
    } else if (b <= 0x8f) {
        it->kind = K_MAP;
        it->n = b & 0x0f;
    } else if (b <= 0x9f) {
        it->kind = K_ARRAY;
        it->n = b & 0x0f;
    } else if (b <= 0xbf) {
        it->kind = K_STR;
        it->n = b & 0x1f;
    } else if (b >= 0xe0) {
        it->kind = K_INT;
        it->i = (int8_t)b;
    } else {
        it->kind = (enum kind)type_table[b - 0xc0].kind;
        *width = type_table[b - 0xc0].width;
        *extra = type_table[b - 0xc0].extra;
    }
}

/* Interprets the width-byte field after the type byte (a float's field is its value). */
static void load_field(item *it, const unsigned char *p, size_t width) {
    uint64_t v;
    if (width == 0) {
        return;
    }
    v = load_be(p, width);
    if (it->kind == K_UINT) {
        it->u = v;
    } else if (it->kind == K_INT) {
        uint64_t sign = 1ull << (8 * width - 1), mask = 2 * sign - 1; /* mask wraps for 8 */
        /* sign-extend without implementation-defined conversions or shifts */
        it->i = (v & sign) ? -(int64_t)(~v & mask) - 1 : (int64_t)v;
    } else if (it->kind != K_FLOAT) {
        it->n = v;
    }
}

/* Checks the declared length or count against what is left after the header, before use. */
static int check_declared(reader *r, const item *it, size_t left) {
    if (it->kind == K_MAP && it->n > left / 2) {
        return fail(r, "declared map size %llu exceeds remaining %zu bytes at offset %zu",
                    (unsigned long long)it->n, left, it->off);
    }
    if (it->kind == K_ARRAY && it->n > left) {
        return fail(r, "declared array size %llu exceeds remaining %zu bytes at offset %zu",
                    (unsigned long long)it->n, left, it->off);
    }
    if ((it->kind == K_STR || it->kind == K_BIN || it->kind == K_EXT) && it->n > left) {
        return fail(r, "declared %s length %llu exceeds remaining %zu bytes at offset %zu",
                    kind_names[it->kind], (unsigned long long)it->n, left, it->off);
    }
    return 0;
}

/* Reads one header at r->pos. For str, bin and ext it also consumes the data (for ext: the
 * type byte and the data). Containers leave r->pos at their first element. */
static int read_item(reader *r, item *it) {
    size_t width, extra, left;
    unsigned char b;
    memset(it, 0, sizeof(*it));
    it->off = r->pos;
    if (r->pos >= r->len) {
        return fail(r, "envelope ends early at offset %zu", r->pos);
    }
    b = r->buf[r->pos];
    classify(b, it, &width, &extra);
    if (it->kind == K_BAD) {
        return fail(r, "invalid type byte 0x%02x at offset %zu", b, it->off);
    }
    left = r->len - r->pos - 1;
    if (left < width) {
        return fail(r, "truncated %s header at offset %zu: needs %zu bytes, %zu left",
                    kind_names[it->kind], it->off, width, left);
    }
    load_field(it, r->buf + r->pos + 1, width);
    r->pos += 1 + width;
    left -= width;
    if (it->kind == K_EXT) {
        it->n = width == 0 ? extra : it->n + extra;
    }
    if (check_declared(r, it, left) != 0) {
        return SLUICE_EDECODE;
    }
    if (it->kind == K_STR || it->kind == K_BIN || it->kind == K_EXT) {
        it->data = r->buf + r->pos;
        r->pos += (size_t)it->n;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Decoder: unknown values                                                                     */
/* ------------------------------------------------------------------------------------------ */

/*
 * Skips one value of any type whose enclosing container is at nesting level `depth`. The walk
 * keeps, per open container, how many elements are still to come, in a fixed array: no
 * recursion, no allocation. Each step consumes at least one byte, so it ends within len steps.
 */
static int skip_value(reader *r, int depth) {
    uint64_t left[SLUICE_ENVELOPE_MAX_DEPTH + 1];
    int top = 0;
    left[0] = 1;
    while (top >= 0) {
        item it;
        if (left[top] == 0) {
            top--;
            continue;
        }
        left[top]--;
        if (read_item(r, &it) != 0) {
            return SLUICE_EDECODE;
        }
        if (it.kind != K_ARRAY && it.kind != K_MAP) {
            continue;
        }
        if (depth + top + 1 > SLUICE_ENVELOPE_MAX_DEPTH) {
            return fail(r, "%s at offset %zu nests deeper than %d levels", kind_names[it.kind],
                        it.off, SLUICE_ENVELOPE_MAX_DEPTH);
        }
        left[++top] = it.kind == K_MAP ? 2 * it.n : it.n;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Decoder: the known fields                                                                   */
/* ------------------------------------------------------------------------------------------ */

enum { SEEN_V = 1, SEEN_P = 2, SEEN_H = 4, SEEN_K = 8 };

typedef struct decoder {
    reader r;
    sluice_envelope *out;
    sluice_header *hdrs;
    size_t max_hdrs;
    unsigned seen;
} decoder;

static int decode_v(decoder *d) {
    item it;
    if (read_item(&d->r, &it) != 0) {
        return SLUICE_EDECODE;
    }
    /* Some encoders write small positive numbers with a signed type: accept any int form. */
    if ((it.kind == K_UINT && it.u == SLUICE_ENVELOPE_VERSION) ||
        (it.kind == K_INT && it.i == SLUICE_ENVELOPE_VERSION)) {
        return 0;
    }
    if (it.kind == K_UINT) {
        return fail(&d->r,
                    "field \"v\": unsupported version %llu at offset %zu (this build reads "
                    "version %d)",
                    (unsigned long long)it.u, it.off, SLUICE_ENVELOPE_VERSION);
    }
    if (it.kind == K_INT) {
        return fail(&d->r,
                    "field \"v\": unsupported version %lld at offset %zu (this build reads "
                    "version %d)",
                    (long long)it.i, it.off, SLUICE_ENVELOPE_VERSION);
    }
    return fail(&d->r, "field \"v\": expected a positive integer, got %s at offset %zu",
                kind_names[it.kind], it.off);
}

static int decode_p(decoder *d) {
    item it;
    if (read_item(&d->r, &it) != 0) {
        return SLUICE_EDECODE;
    }
    if (it.kind != K_BIN && it.kind != K_STR) {
        return fail(&d->r, "field \"p\": expected bin or str, got %s at offset %zu",
                    kind_names[it.kind], it.off);
    }
    d->out->payload = it.data;
    d->out->payload_len = (size_t)it.n;
    return 0;
}

/* Reads a str that must be UTF-8. Returns 0, SLUICE_EDECODE with the message written, or
 * TEXT_NOT_STR / TEXT_NOT_UTF8 for the caller to name the field. */
enum { TEXT_NOT_STR = 1, TEXT_NOT_UTF8 = 2 };

static int read_text(decoder *d, item *it) {
    if (read_item(&d->r, it) != 0) {
        return SLUICE_EDECODE;
    }
    if (it->kind != K_STR) {
        return TEXT_NOT_STR;
    }
    return sluice_utf8_valid(it->data, (size_t)it->n) ? 0 : TEXT_NOT_UTF8;
}

static const char *text_problem(int rc) {
    return rc == TEXT_NOT_STR ? "is not a string" : "is not valid UTF-8";
}

static int read_header(decoder *d, size_t i) {
    item name, value;
    int rc = read_text(d, &name);
    if (rc > 0) {
        return fail(&d->r, "field \"h\": name of header %zu %s (%s at offset %zu)", i,
                    text_problem(rc), kind_names[name.kind], name.off);
    }
    if (rc == 0) {
        rc = read_text(d, &value);
    }
    if (rc > 0) {
        return fail(&d->r, "field \"h\": value of header %zu %s (%s at offset %zu)", i,
                    text_problem(rc), kind_names[value.kind], value.off);
    }
    if (rc != 0) {
        return rc;
    }
    d->hdrs[i].name = (const char *)name.data;
    d->hdrs[i].name_len = (size_t)name.n;
    d->hdrs[i].value = (const char *)value.data;
    d->hdrs[i].value_len = (size_t)value.n;
    return 0;
}

static int decode_h(decoder *d) {
    item m;
    size_t limit =
        d->max_hdrs < SLUICE_ENVELOPE_MAX_HEADERS ? d->max_hdrs : SLUICE_ENVELOPE_MAX_HEADERS;
    if (read_item(&d->r, &m) != 0) {
        return SLUICE_EDECODE;
    }
    if (m.kind != K_MAP) {
        return fail(&d->r, "field \"h\": expected a map, got %s at offset %zu", kind_names[m.kind],
                    m.off);
    }
    if (m.n > limit) {
        return fail(&d->r, "field \"h\": %llu headers at offset %zu; the limit is %zu",
                    (unsigned long long)m.n, m.off, limit);
    }
    for (size_t i = 0; i < (size_t)m.n; i++) {
        if (read_header(d, i) != 0) {
            return SLUICE_EDECODE;
        }
    }
    d->out->headers = m.n > 0 ? d->hdrs : NULL;
    d->out->nheaders = (size_t)m.n;
    return 0;
}

static int decode_k(decoder *d) {
    item it;
    int rc = read_text(d, &it);
    if (rc > 0) {
        return fail(&d->r, "field \"k\": the tenant %s (%s at offset %zu)", text_problem(rc),
                    kind_names[it.kind], it.off);
    }
    if (rc != 0) {
        return rc;
    }
    d->out->tenant = (const char *)it.data;
    d->out->tenant_len = (size_t)it.n;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Decoder: the top-level map                                                                  */
/* ------------------------------------------------------------------------------------------ */

static int decode_entry(decoder *d, size_t i) {
    static const char known[] = "vphk";
    static int (*const decode_known[])(decoder *) = {decode_v, decode_p, decode_h, decode_k};
    const char *hit;
    unsigned bit;
    item key;
    int rc = read_text(d, &key);
    if (rc > 0) {
        return fail(&d->r, "key %zu of the envelope %s (%s at offset %zu)", i, text_problem(rc),
                    kind_names[key.kind], key.off);
    }
    if (rc != 0) {
        return rc;
    }
    hit = key.n == 1 ? memchr(known, key.data[0], 4) : NULL;
    if (hit == NULL) {
        return skip_value(&d->r, 1); /* a later version's field */
    }
    bit = 1u << (hit - known);
    if (d->seen & bit) {
        return fail(&d->r, "duplicate key \"%c\" at offset %zu", *hit, key.off);
    }
    d->seen |= bit;
    return decode_known[hit - known](d);
}

static int decode_map(decoder *d) {
    item top;
    if (read_item(&d->r, &top) != 0) {
        return SLUICE_EDECODE;
    }
    if (top.kind != K_MAP) {
        return fail(&d->r, "envelope is not a map: %s (type byte 0x%02x) at offset 0",
                    kind_names[top.kind], d->r.buf[0]);
    }
    for (size_t i = 0; i < (size_t)top.n; i++) {
        if (decode_entry(d, i) != 0) {
            return SLUICE_EDECODE;
        }
    }
    if (d->r.pos != d->r.len) {
        return fail(&d->r, "trailing bytes after envelope at offset %zu", d->r.pos);
    }
    if (!(d->seen & SEEN_V)) {
        return fail(&d->r, "missing field \"v\" (format version)");
    }
    if (!(d->seen & SEEN_P)) {
        return fail(&d->r, "missing field \"p\" (payload)");
    }
    return 0;
}

int sluice_envelope_decode(const unsigned char *buf, size_t len, size_t max_bytes,
                           sluice_envelope *out, sluice_header *hdrs, size_t max_hdrs, char *err,
                           size_t errlen) {
    decoder d = {{buf, len, 0, err, errlen}, out, hdrs, max_hdrs, 0};
    size_t cap = max_bytes == 0 || max_bytes > SLUICE_ENVELOPE_MAX_BYTES ? SLUICE_ENVELOPE_MAX_BYTES
                                                                         : max_bytes;
    int rc;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (out != NULL) {
        memset(out, 0, sizeof(*out));
    }
    if (out == NULL || (buf == NULL && len > 0) || (hdrs == NULL && max_hdrs > 0)) {
        fail(&d.r, "NULL argument to sluice_envelope_decode");
        return SLUICE_EINVAL;
    }
    if (len > cap) {
        fail(&d.r, "envelope is %zu bytes; the limit is %zu", len, cap);
        return SLUICE_ETOOBIG;
    }
    if (len == 0) {
        return fail(&d.r, "envelope is empty");
    }
    rc = decode_map(&d);
    if (rc != 0) {
        memset(out, 0, sizeof(*out));
    }
    return rc;
}
