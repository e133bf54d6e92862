/* SPDX-License-Identifier: MIT */
/*
 * test_envelope.c - the envelope codec: round trips, exact sizes, limits, and every malformed
 * input of docs/faults.md B4-B9 (truncation, trailing bytes, 0xc1, huge declared counts, deep
 * nesting, wrong schema, bad UTF-8), plus a cross-check against msgpack-c in both directions so
 * we know the bytes are real msgpack. No network.
 */
#include <msgpack.h>
#include <stdint.h>

#include "harness.h"
#include "sluice/envelope.h"
#include "sluice/status.h"

/* Fragments of hand-written envelopes. Adjacent literals keep \x escapes from eating letters. */
#define KV   "\xa1v\x01"     /* "v": 1 */
#define KP   "\xa1p\xc4\x00" /* "p": empty bin */
#define MINI "\x82" KV KP    /* the smallest valid envelope */
#define HDR_AB                                                                                     \
    "\xa1h\x81\xa1"                                                                                \
    "a"                                                                                            \
    "\xa1"                                                                                         \
    "b" /* "h": {"a": "b"} */

#define LIT(s) (s), sizeof(s) - 1

static char err[512];
static sluice_header hdrs[8];

/* CHECK_OK's detail argument must be a pointer, not an array (GCC's -Waddress). */
static const char *errstr(void) {
    return err;
}

static int decode(const char *buf, size_t len, sluice_envelope *e) {
    err[0] = '\0';
    return sluice_envelope_decode((const unsigned char *)buf, len, 0, e, hdrs, 8, err, sizeof(err));
}

static void expect_fail_at(int line, const char *buf, size_t len, int status, const char *needle) {
    sluice_envelope e;
    int rc = decode(buf, len, &e);
    if (rc != status || strstr(err, needle) == NULL) {
        fprintf(stderr, "%s:%d: decode returned %d \"%s\"; wanted %d and \"%s\"\n", __FILE__, line,
                rc, err, status, needle);
        exit(1);
    }
    CHECK(e.payload == NULL && e.nheaders == 0 && e.tenant == NULL);
}

#define EXPECT_FAIL(lit, needle) expect_fail_at(__LINE__, LIT(lit), SLUICE_EDECODE, needle)
#define EXPECT_OK(lit)                                                                             \
    do {                                                                                           \
        sluice_envelope e_;                                                                        \
        int rc_ = decode(LIT(lit), &e_);                                                           \
        if (rc_ != 0) {                                                                            \
            fprintf(stderr, "%s:%d: decode failed: %s\n", __FILE__, __LINE__, err);                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int same_bytes(const void *a, size_t alen, const void *b, size_t blen) {
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static void check_same(const sluice_envelope *a, const sluice_envelope *b) {
    CHECK(same_bytes(a->payload, a->payload_len, b->payload, b->payload_len));
    CHECK_EQ(a->nheaders, b->nheaders);
    for (size_t i = 0; i < a->nheaders; i++) {
        CHECK(same_bytes(a->headers[i].name, a->headers[i].name_len, b->headers[i].name,
                         b->headers[i].name_len));
        CHECK(same_bytes(a->headers[i].value, a->headers[i].value_len, b->headers[i].value,
                         b->headers[i].value_len));
    }
    CHECK_EQ(a->tenant == NULL, b->tenant == NULL);
    if (a->tenant != NULL) {
        CHECK(same_bytes(a->tenant, a->tenant_len, b->tenant, b->tenant_len));
    }
}

/* Encodes into a fresh buffer, checks the size prediction, decodes, compares. */
static void round_trip(const sluice_envelope *in) {
    size_t need = sluice_envelope_size(in), len = 0;
    unsigned char *buf = malloc(need + 1);
    sluice_header *h = malloc(sizeof(*h) * SLUICE_ENVELOPE_MAX_HEADERS);
    sluice_envelope out;
    CHECK(need > 0 && buf != NULL && h != NULL);
    CHECK_OK(sluice_envelope_encode(in, buf, need, &len), "encode");
    CHECK_EQ(len, need);
    CHECK_OK(sluice_envelope_decode(buf, len, len, &out, h, SLUICE_ENVELOPE_MAX_HEADERS, err,
                                    sizeof(err)),
             errstr());
    check_same(in, &out);
    /* one byte short of the exact size: refused, nothing written past the end */
    buf[need - 1] = 0x5a;
    CHECK_EQ(sluice_envelope_encode(in, buf, need - 1, &len), SLUICE_ETOOBIG);
    CHECK_EQ(buf[need - 1], 0x5a);
    free(h);
    free(buf);
}

static void test_empty_payload(void) {
    static const unsigned char want[] = {0x82, 0xa1, 'v', 0x01, 0xa1, 'p', 0xc4, 0x00};
    sluice_envelope e = {0};
    unsigned char buf[32];
    size_t len = 0;
    CHECK_EQ(sluice_envelope_size(&e), sizeof(want));
    CHECK_OK(sluice_envelope_encode(&e, buf, sizeof(buf), &len), "encode");
    CHECK(same_bytes(buf, len, want, sizeof(want)));
    round_trip(&e);
    EXPECT_OK(MINI);
}

static void test_full_round_trip(void) {
    unsigned char payload[256];
    sluice_header h[3] = {{"request-id", 10, "4f1c-9a", 7},
                          {"", 0, "", 0},
                          {"x-caf\xc3\xa9", 7, "\xf0\x9f\x98\x80", 4}};
    sluice_envelope e = {payload, sizeof(payload), h, 3, "tenant-a", 8};
    for (int i = 0; i < 256; i++) {
        payload[i] = (unsigned char)i;
    }
    round_trip(&e);
    e.tenant_len = 0; /* "k": "" is a tenant, not the absence of one */
    round_trip(&e);
    e.tenant = NULL;
    e.nheaders = 0;
    round_trip(&e);
}

/* Every header-size boundary of str, bin and map, so the size arithmetic matches the packer. */
static void test_size_boundaries(void) {
    static const size_t lens[] = {0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536, 70000};
    char *text = malloc(70000);
    sluice_header *h = calloc(SLUICE_ENVELOPE_MAX_HEADERS + 1, sizeof(*h));
    CHECK(text != NULL && h != NULL);
    memset(text, 'a', 70000);
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        sluice_header one = {text, lens[i], text, lens[i]};
        sluice_envelope e = {(const unsigned char *)text, lens[i], &one, 1, text, lens[i]};
        round_trip(&e);
    }
    for (size_t i = 0; i <= SLUICE_ENVELOPE_MAX_HEADERS; i++) {
        h[i] = (sluice_header){text, i % 40, text, 1};
    }
    for (size_t n = 14; n <= SLUICE_ENVELOPE_MAX_HEADERS; n++) {
        sluice_envelope e = {NULL, 0, h, n, NULL, 0};
        round_trip(&e);
    }
    sluice_envelope over = {NULL, 0, h, SLUICE_ENVELOPE_MAX_HEADERS + 1, NULL, 0};
    unsigned char buf[64];
    size_t len;
    CHECK_EQ(sluice_envelope_size(&over), 0);
    CHECK_EQ(sluice_envelope_encode(&over, buf, sizeof(buf), &len), SLUICE_ETOOBIG);
    free(h);
    free(text);
}

static void test_encode_bad_args(void) {
    unsigned char buf[64];
    size_t len;
    sluice_header bad_utf8 = {"\xc3\x28", 2, "v", 1};
    sluice_header null_name = {NULL, 3, "v", 1};
    sluice_envelope e = {0};
    CHECK_EQ(sluice_envelope_encode(NULL, buf, sizeof(buf), &len), SLUICE_EINVAL);
    CHECK_EQ(sluice_envelope_encode(&e, buf, sizeof(buf), NULL), SLUICE_EINVAL);
    CHECK_EQ(sluice_envelope_encode(&e, NULL, 10, &len), SLUICE_EINVAL);
    CHECK_EQ(sluice_envelope_encode(&e, buf, 7, &len), SLUICE_ETOOBIG);
    CHECK_EQ(sluice_envelope_size(NULL), 0);
    e.payload_len = 5; /* NULL payload with a length */
    CHECK_EQ(sluice_envelope_encode(&e, buf, sizeof(buf), &len), SLUICE_EINVAL);
    CHECK_EQ(sluice_envelope_size(&e), 0);
    e.payload_len = 0;
    e.nheaders = 1; /* NULL headers with a count */
    CHECK_EQ(sluice_envelope_encode(&e, buf, sizeof(buf), &len), SLUICE_EINVAL);
    e.headers = &null_name;
    CHECK_EQ(sluice_envelope_encode(&e, buf, sizeof(buf), &len), SLUICE_EINVAL);
    /* the decoder would refuse it, so the encoder does too */
    e.headers = &bad_utf8;
    CHECK_EQ(sluice_envelope_encode(&e, buf, sizeof(buf), &len), SLUICE_EINVAL);
    e.nheaders = 0;
    e.tenant = "\xff";
    e.tenant_len = 1;
    CHECK_EQ(sluice_envelope_encode(&e, buf, sizeof(buf), &len), SLUICE_EINVAL);
}

/* B1/B3: a payload exactly at a cap is accepted, one byte more is not. */
static void test_caps(void) {
    const size_t max = SLUICE_ENVELOPE_MAX_BYTES;
    const size_t overhead = 11; /* fixmap, "v", 1, "p", bin32 header */
    unsigned char *buf = malloc(max + 1);
    sluice_envelope e = {NULL, 0, NULL, 0, NULL, 0}, out;
    size_t len = 0;
    CHECK(buf != NULL);
    memset(buf, 0, max + 1);
    e.payload = buf + 16; /* any bytes; encode copies them to the start of buf */
    e.payload_len = max - overhead - 16;
    CHECK_EQ(sluice_envelope_size(&e), max - 16);
    e.payload_len = max - overhead;
    e.payload = calloc(1, e.payload_len + 1);
    CHECK(e.payload != NULL);
    CHECK_EQ(sluice_envelope_size(&e), max);
    CHECK_OK(sluice_envelope_encode(&e, buf, max + 1, &len), "encode at the cap");
    CHECK_EQ(len, max);
    CHECK_OK(sluice_envelope_decode(buf, len, 0, &out, NULL, 0, err, sizeof(err)), errstr());
    CHECK_EQ(out.payload_len, max - overhead);
    /* a caller's own cap: exactly at it is fine, one byte under it is not */
    CHECK_OK(sluice_envelope_decode(buf, len, len, &out, NULL, 0, err, sizeof(err)), errstr());
    CHECK_EQ(sluice_envelope_decode(buf, len, len - 1, &out, NULL, 0, err, sizeof(err)),
             SLUICE_ETOOBIG);
    CHECK(strstr(err, "the limit is") != NULL);
    /* one byte over the hard cap: neither encoded nor decoded, whatever max_bytes says */
    e.payload_len++;
    CHECK_EQ(sluice_envelope_size(&e), 0);
    CHECK_EQ(sluice_envelope_encode(&e, buf, max + 1, &len), SLUICE_ETOOBIG);
    CHECK_EQ(sluice_envelope_decode(buf, max + 1, 0, &out, NULL, 0, err, sizeof(err)),
             SLUICE_ETOOBIG);
    CHECK_EQ(sluice_envelope_decode(buf, max + 1, 2 * (size_t)max, &out, NULL, 0, err, sizeof(err)),
             SLUICE_ETOOBIG);
    free((void *)e.payload);
    free(buf);
}

/* B4: every proper prefix of a valid envelope is refused, with a message, without a crash. */
static void test_truncated(void) {
    static const char full[] = "\x85" KV "\xa1p\xc4\x03"
                               "abc" HDR_AB "\xa1k\xa3"
                               "t-1"
                               "\xa5"
                               "extra"
                               "\x93\xcb\x40\x09\x21\xfb\x54\x44\x2d\x18"
                               "\x81\xc0\xc3"
                               "\xd4\x01\x7f";
    sluice_envelope e;
    CHECK_OK(decode(LIT(full), &e), errstr());
    CHECK_EQ(e.payload_len, 3);
    CHECK_EQ(e.nheaders, 1);
    CHECK_EQ(e.tenant_len, 3);
    for (size_t n = 0; n < sizeof(full) - 1; n++) {
        /* a private copy of exactly n bytes, so ASan sees any read past the end */
        char *copy = malloc(n > 0 ? n : 1);
        memcpy(copy, full, n);
        expect_fail_at(__LINE__, copy, n, SLUICE_EDECODE, n == 0 ? "empty" : "");
        CHECK(err[0] != '\0');
        free(copy);
    }
    expect_fail_at(__LINE__,
                   LIT("\x82" KV "\xa1p\xc4\x05"
                       "ab"),
                   SLUICE_EDECODE, "declared bin length 5 exceeds remaining 2 bytes at offset 6");
    expect_fail_at(__LINE__, LIT("\x82" KV "\xa1p\xc5\x01"), SLUICE_EDECODE,
                   "truncated bin header at offset 6");
    EXPECT_FAIL("\x82" KV, "declared map size 2 exceeds remaining 3 bytes at offset 0");
}

/* B5, B6, B7 */
static void test_framing(void) {
    EXPECT_FAIL(MINI "\x00", "trailing bytes after envelope at offset 8");
    EXPECT_FAIL(MINI MINI, "trailing bytes after envelope at offset 8");
    EXPECT_FAIL("\xc1", "invalid type byte 0xc1 at offset 0");
    EXPECT_FAIL("\x83" KV KP "\xa1x\xc1", "invalid type byte 0xc1 at offset 10");
    EXPECT_FAIL("\x83" KV KP "\xa1x\x92\x01\xc1", "invalid type byte 0xc1 at offset 12");
    EXPECT_FAIL("\xdd\xff\xff\xff\xff", "declared array size 4294967295 exceeds remaining 0");
    EXPECT_FAIL("\xdf\xff\xff\xff\xff", "declared map size 4294967295 exceeds remaining 0");
    EXPECT_FAIL("\x81\xdf\xff\xff\xff\xff\x00\x00\x00",
                "declared map size 4294967295 exceeds remaining 3 bytes at offset 1");
    EXPECT_FAIL("\x83" KV KP "\xa1x\xdd\xff\xff\xff\xff", "declared array size 4294967295");
    EXPECT_FAIL("\x83" KV KP "\xa1x\xdf\xff\xff\xff\xff", "declared map size 4294967295");
    EXPECT_FAIL("\x83" KV KP "\xa1h\xdf\xff\xff\xff\xff", "declared map size 4294967295");
    EXPECT_FAIL("\x82" KV "\xa1p\xc6\xff\xff\xff\xff", "declared bin length 4294967295");
    EXPECT_FAIL("\x83" KV KP "\xa1x\xdb\xff\xff\xff\xff", "declared str length 4294967295");
    EXPECT_FAIL("\x83" KV KP "\xa1x\xc9\xff\xff\xff\xff\x01", "declared ext length 4294967296");
    EXPECT_FAIL("\x83" KV KP "\xa1x\xd8\x01", "declared ext length 17");
    /* 2N bytes for a map of N, N bytes for an array of N */
    EXPECT_FAIL("\x83" KV KP "\xa1x\x82\x01\x01\x01", "declared map size 2 exceeds remaining 3");
    EXPECT_OK("\x83" KV KP "\xa1x\x82\x01\x01\x01\x01");
    EXPECT_FAIL("\x83" KV KP "\xa1x\x93\x01\x01", "declared array size 3 exceeds remaining 2");
    expect_fail_at(__LINE__, "", 0, SLUICE_EDECODE, "envelope is empty");
}

/* B8: nesting inside an unknown key, up to the limit and past it. */
static void test_nesting(void) {
    char buf[2048];
    const char head[] = "\x83" KV KP "\xa1x";
    size_t h = sizeof(head) - 1;
    sluice_envelope e;
    memcpy(buf, head, h);
    /* the envelope map is level 1, so 15 nested arrays reach the limit of 16 */
    for (int levels = 1; levels <= 17; levels++) {
        memset(buf + h, 0x91, (size_t)levels - 1);
        buf[h + (size_t)levels - 1] = (char)0x90;
        int rc = decode(buf, h + (size_t)levels, &e);
        if (levels + 1 <= SLUICE_ENVELOPE_MAX_DEPTH) {
            CHECK_OK(rc, errstr());
        } else {
            CHECK_EQ(rc, SLUICE_EDECODE);
            CHECK(strstr(err, "nests deeper than 16 levels") != NULL);
        }
    }
    /* maps nest too, and a very deep input is refused without recursion */
    for (size_t i = 0; i < 1000; i++) {
        buf[h + 2 * i] = (char)0x81;
        buf[h + 2 * i + 1] = (char)0xc0;
    }
    buf[h + 2000] = (char)0xc0;
    CHECK_EQ(decode(buf, h + 2001, &e), SLUICE_EDECODE);
    CHECK(strstr(err, "nests deeper") != NULL);
    /* wide is fine: 1000 siblings at one level */
    buf[h] = (char)0xdc;
    buf[h + 1] = (char)0x03;
    buf[h + 2] = (char)0xe8;
    memset(buf + h + 3, 0x90, 1000);
    CHECK_OK(decode(buf, h + 1003, &e), errstr());
}

/* "v": any integer encoding of 1; everything else named. */
static void test_version(void) {
    EXPECT_FAIL("\x82\xa1v\xa1"
                "1" KP,
                "field \"v\": expected a positive integer, got str");
    EXPECT_FAIL("\x82\xa1v\xc0" KP, "field \"v\": expected a positive integer, got nil");
    EXPECT_FAIL("\x82\xa1v\x02" KP, "field \"v\": unsupported version 2");
    EXPECT_FAIL("\x82\xa1v\x00" KP, "unsupported version 0");
    EXPECT_FAIL("\x82\xa1v\xff" KP, "unsupported version -1");
    EXPECT_FAIL("\x82\xa1v\xcf\xff\xff\xff\xff\xff\xff\xff\xff" KP,
                "unsupported version 18446744073709551615");
    EXPECT_OK("\x82\xa1v\xcd\x00\x01" KP);                         /* uint16 1 */
    EXPECT_OK("\x82\xa1v\xd0\x01" KP);                             /* int8 1 */
    EXPECT_OK("\x82\xa1v\xd1\x00\x01" KP);                         /* int16 1 */
    EXPECT_OK("\x82\xa1v\xcf\x00\x00\x00\x00\x00\x00\x00\x01" KP); /* uint64 1 */
    EXPECT_FAIL("\x82\xa1v\xd1\xff\xfe" KP, "unsupported version -2");
    EXPECT_FAIL("\x82\xa1v\xd3\x80\x00\x00\x00\x00\x00\x00\x00" KP,
                "unsupported version -9223372036854775808");
    EXPECT_FAIL("\x82\xa1v\xd3\x7f\xff\xff\xff\xff\xff\xff\xff" KP,
                "unsupported version 9223372036854775807");
    EXPECT_FAIL("\x82\xa1v\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00" KP,
                "field \"v\": expected a positive integer, got float");
}

/* B9: the shape of the map and of each known field. */
static void test_schema(void) {
    EXPECT_FAIL("\x92" KV, "envelope is not a map: array");
    EXPECT_FAIL("\xa1v", "envelope is not a map: str");
    EXPECT_FAIL("\x01", "envelope is not a map: int");
    EXPECT_FAIL("\xc0", "envelope is not a map: nil");
    EXPECT_FAIL("\x82\x01\x01" KP, "key 0 of the envelope is not a string (int at offset 1)");
    EXPECT_FAIL("\x82" KV "\xc4\x01p\xc4\x00", "key 1 of the envelope is not a string (bin");
    EXPECT_FAIL("\x82" KV "\xa1p\x05", "field \"p\": expected bin or str, got int");
    EXPECT_FAIL("\x82" KV "\xa1p\x80", "field \"p\": expected bin or str, got map");
    EXPECT_FAIL("\x82" KV "\xa1p\xd4\x01\x00", "field \"p\": expected bin or str, got ext");
    EXPECT_OK("\x82" KV "\xa1p\xa2"
              "hi"); /* str payloads from producers without bin */
    EXPECT_FAIL("\x83" KV KP "\xa1h\x90", "field \"h\": expected a map, got array");
    EXPECT_FAIL("\x83" KV KP "\xa1h\x81\x01\xa1"
                "b",
                "field \"h\": name of header 0 is not a st");
    EXPECT_FAIL("\x83" KV KP "\xa1h\x84\xa1"
                "a\xa1"
                "b\xa1"
                "c\xa1"
                "d\xa1"
                "e\xa1"
                "f\xa1"
                "g\xc4\x01"
                "h",
                "field \"h\": value of header 3 is not a string (bin at offset 25)");
    EXPECT_FAIL("\x83" KV KP "\xa1k\x07", "field \"k\": the tenant is not a string (int");
    EXPECT_FAIL("\x83" KV KP "\xa1k\xc4\x01"
                "t",
                "field \"k\": the tenant is not a string (bin");
    EXPECT_FAIL("\x81" KP, "missing field \"v\"");
    EXPECT_FAIL("\x81" KV, "missing field \"p\"");
    EXPECT_FAIL("\x80", "missing field \"v\"");
    EXPECT_FAIL("\x83" KV KV KP, "duplicate key \"v\" at offset 4");
    EXPECT_FAIL("\x83" KV KP KP, "duplicate key \"p\" at offset 8");
    EXPECT_FAIL("\x84" KV KP HDR_AB HDR_AB, "duplicate key \"h\"");
    EXPECT_FAIL("\x84" KV KP "\xa1k\xa0\xa1k\xa0", "duplicate key \"k\"");
    /* unknown keys, even repeated, may hold anything well-formed, ext included */
    EXPECT_OK("\x86" KV KP "\xa2xx\xd4\x01\x00"
              "\xa2xx\xc7\x02\x05\xaa\xbb"
              "\xa1y\x82\x01\xca\x00\x00\x00\x00\xc2\x92\xe0\xd3\x80\x00\x00\x00\x00\x00\x00\x00"
              "\xa4long\xc0");
}

static void test_utf8(void) {
    EXPECT_FAIL("\x83" KV KP "\xa1h\x81\xa2\xc3\x28\xa1"
                "b",
                "field \"h\": name of header 0 is not valid UTF-8");
    EXPECT_FAIL("\x83" KV KP "\xa1h\x81\xa1"
                "a\xa1\xff",
                "field \"h\": value of header 0 is not valid UTF-8");
    EXPECT_FAIL("\x83" KV KP "\xa1k\xa2\xc0\xaf", "field \"k\": the tenant is not valid UTF-8");
    EXPECT_FAIL("\x83" KV KP "\xa2\xc3\x28\x01", "key 2 of the envelope is not valid UTF-8");
    /* surrogate, above U+10FFFF, overlong 3-byte, truncated sequence */
    EXPECT_FAIL("\x83" KV KP "\xa1k\xa3\xed\xa0\x80", "not valid UTF-8");
    EXPECT_FAIL("\x83" KV KP "\xa1k\xa4\xf4\x90\x80\x80", "not valid UTF-8");
    EXPECT_FAIL("\x83" KV KP "\xa1k\xa3\xe0\x80\xaf", "not valid UTF-8");
    EXPECT_FAIL("\x83" KV KP "\xa1k\xa2\xe2\x82", "not valid UTF-8");
    EXPECT_OK("\x84" KV KP "\xa1k\xa4\xf0\x9f\x98\x80"
              "\xa1h\x81\xa2\xc3\xa9\xa3\xe2\x82\xac");
}

static void test_decode_args(void) {
    sluice_envelope e;
    sluice_header few[2];
    const char three[] = "\x83" KV KP "\xa1h\x83\xa1"
                         "a\xa0\xa1"
                         "b\xa0\xa1"
                         "c\xa0";
    CHECK_EQ(sluice_envelope_decode(NULL, 3, 0, &e, NULL, 0, err, sizeof(err)), SLUICE_EINVAL);
    CHECK_EQ(sluice_envelope_decode((const unsigned char *)MINI, 8, 0, NULL, NULL, 0, NULL, 0),
             SLUICE_EINVAL);
    CHECK_EQ(sluice_envelope_decode((const unsigned char *)MINI, 8, 0, &e, NULL, 2, NULL, 0),
             SLUICE_EINVAL);
    /* no header space: fine without "h", an error with it; err may be NULL */
    CHECK_OK(sluice_envelope_decode((const unsigned char *)MINI, 8, 0, &e, NULL, 0, NULL, 0), "");
    CHECK_EQ(sluice_envelope_decode((const unsigned char *)three, sizeof(three) - 1, 0, &e, few, 2,
                                    err, sizeof(err)),
             SLUICE_EDECODE);
    CHECK(strstr(err, "field \"h\": 3 headers at offset 10; the limit is 2") != NULL);
    CHECK_OK(sluice_envelope_decode((const unsigned char *)three, sizeof(three) - 1, 0, &e, hdrs, 3,
                                    err, sizeof(err)),
             errstr());
    CHECK_EQ(e.nheaders, 3);
    CHECK(e.headers == hdrs && hdrs[2].name_len == 1 && hdrs[2].name[0] == 'c');
    /* a tiny err buffer is still NUL-terminated */
    char small[8];
    CHECK_EQ(sluice_envelope_decode((const unsigned char *)"\xc1", 1, 0, &e, NULL, 0, small,
                                    sizeof(small)),
             SLUICE_EDECODE);
    CHECK_EQ(strlen(small), sizeof(small) - 1);
}

static void check_str(const msgpack_object *o, const char *want) {
    CHECK_EQ(o->type, MSGPACK_OBJECT_STR);
    CHECK(same_bytes(o->via.str.ptr, o->via.str.size, want, strlen(want)));
}

/* Our bytes, read by msgpack-c: a real msgpack map with the documented keys and types. */
static void test_msgpack_reads_ours(void) {
    sluice_header h[2] = {{"request-id", 10, "r-17", 4}, {"trace", 5, "abc", 3}};
    sluice_envelope e = {(const unsigned char *)"\x00\xffpay", 5, h, 2, "gold", 4};
    unsigned char buf[128];
    size_t len = 0, off = 0;
    msgpack_unpacked u;
    CHECK_OK(sluice_envelope_encode(&e, buf, sizeof(buf), &len), "encode");
    msgpack_unpacked_init(&u);
    CHECK_EQ(msgpack_unpack_next(&u, (const char *)buf, len, &off), MSGPACK_UNPACK_SUCCESS);
    CHECK_EQ(off, len);
    const msgpack_object *m = &u.data;
    CHECK_EQ(m->type, MSGPACK_OBJECT_MAP);
    CHECK_EQ(m->via.map.size, 4);
    const msgpack_object_kv *kv = m->via.map.ptr;
    check_str(&kv[0].key, "v");
    CHECK_EQ(kv[0].val.type, MSGPACK_OBJECT_POSITIVE_INTEGER);
    CHECK_EQ(kv[0].val.via.u64, 1);
    check_str(&kv[1].key, "p");
    CHECK_EQ(kv[1].val.type, MSGPACK_OBJECT_BIN);
    CHECK(same_bytes(kv[1].val.via.bin.ptr, kv[1].val.via.bin.size, "\x00\xffpay", 5));
    check_str(&kv[2].key, "h");
    CHECK_EQ(kv[2].val.type, MSGPACK_OBJECT_MAP);
    CHECK_EQ(kv[2].val.via.map.size, 2);
    check_str(&kv[2].val.via.map.ptr[0].key, "request-id");
    check_str(&kv[2].val.via.map.ptr[0].val, "r-17");
    check_str(&kv[2].val.via.map.ptr[1].key, "trace");
    check_str(&kv[2].val.via.map.ptr[1].val, "abc");
    check_str(&kv[3].key, "k");
    check_str(&kv[3].val, "gold");
    msgpack_unpacked_destroy(&u);
}

static void pack_cstr(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

/* msgpack-c's bytes, read by us: another producer's envelope with its own choices (keys in a
 * different order, a str payload, a map16 of headers, an unknown key). */
static void test_we_read_msgpack(void) {
    msgpack_sbuffer sb;
    msgpack_packer pk;
    sluice_envelope e;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 5);
    pack_cstr(&pk, "k");
    pack_cstr(&pk, "blue");
    pack_cstr(&pk, "future");
    msgpack_pack_array(&pk, 2);
    msgpack_pack_double(&pk, 2.5);
    msgpack_pack_nil(&pk);
    pack_cstr(&pk, "p");
    pack_cstr(&pk, "hello");
    pack_cstr(&pk, "h");
    msgpack_pack_map(&pk, 1);
    pack_cstr(&pk, "id");
    pack_cstr(&pk, "42");
    pack_cstr(&pk, "v");
    msgpack_pack_int64(&pk, 1);
    CHECK_OK(decode(sb.data, sb.size, &e), errstr());
    CHECK(same_bytes(e.payload, e.payload_len, "hello", 5));
    CHECK(same_bytes(e.tenant, e.tenant_len, "blue", 4));
    CHECK_EQ(e.nheaders, 1);
    CHECK(same_bytes(e.headers[0].value, e.headers[0].value_len, "42", 2));
    msgpack_sbuffer_destroy(&sb);
}

int main(void) {
    test_empty_payload();
    test_full_round_trip();
    test_size_boundaries();
    test_encode_bad_args();
    test_caps();
    test_truncated();
    test_framing();
    test_nesting();
    test_version();
    test_schema();
    test_utf8();
    test_decode_args();
    test_msgpack_reads_ours();
    test_we_read_msgpack();
    printf("test_envelope: 14 groups passed\n");
    return 0;
}
