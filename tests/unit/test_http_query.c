/* SPDX-License-Identifier: MIT */
/*
 * test_http_query.c - the responder's query parameters (sluice__http_query_param): the first
 * of a name, percent-decoding and '+', a name that is only a prefix of another, a missing
 * parameter, a malformed escape and a value too long for its buffer. No network.
 */
#include <string.h>

#include "harness.h"

#include "sluice/http_responder.h"

static long param(const char *q, const char *name, char *out, size_t cap) {
    return sluice__http_query_param(q, strlen(q), name, out, cap);
}

int main(void) {
    char v[16];
    CHECK_EQ(param("count=5&tenant=acme", "count", v, sizeof(v)), 1);
    CHECK_STREQ(v, "5");
    CHECK_EQ(param("count=5&tenant=acme", "tenant", v, sizeof(v)), 4);
    CHECK_STREQ(v, "acme");
    CHECK_EQ(param("tenant=a%2Fb+c%00d", "tenant", v, sizeof(v)), 7);
    CHECK(memcmp(v, "a/b c\0d", 7) == 0);
    CHECK_EQ(param("tenants=x&tenant=y", "tenant", v, sizeof(v)), 1);
    CHECK_STREQ(v, "y");
    CHECK_EQ(param("count=1&count=2", "count", v, sizeof(v)), 1);
    CHECK_STREQ(v, "1");
    CHECK_EQ(param("tenant=", "tenant", v, sizeof(v)), 0);
    CHECK_STREQ(v, "");
    CHECK_EQ(param("count=5", "tenant", v, sizeof(v)), -1);
    CHECK_EQ(param("", "tenant", v, sizeof(v)), -1);
    CHECK_EQ(sluice__http_query_param(NULL, 0, "tenant", v, sizeof(v)), -1);
    CHECK_EQ(param("tenant=%4", "tenant", v, sizeof(v)), -2);
    CHECK_EQ(param("tenant=%zz", "tenant", v, sizeof(v)), -2);
    CHECK_EQ(param("tenant=0123456789abcdef", "tenant", v, sizeof(v)), -2);
    CHECK_EQ(param("tenant=0123456789abcde", "tenant", v, sizeof(v)), 15);
    puts("test_http_query: ok");
    return 0;
}
