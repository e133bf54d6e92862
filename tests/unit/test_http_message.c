/* SPDX-License-Identifier: MIT */
/*
 * test_http_message.c - the HTTP delivery's pure parts (worker/src/http_message.h): the verdict
 * of every kind of answer (docs/delivery.md's table), header checks, header values from a
 * message, the webhook id, and Standard Webhooks secrets and signatures against the scheme's
 * published example (its libraries' test vector, recomputed with Python's hmac). No network.
 */
#include <curl/curl.h>

#include "harness.h"
#include "http_message.h"

static void verdicts(void) {
    static const struct {
        int code;
        long status;
        sluice__http_result r;
        sluice_verdict v;
    } t[] = {
        {CURLE_OK, 200, SLUICE__HTTP_OK, SLUICE_DONE},
        {CURLE_OK, 204, SLUICE__HTTP_OK, SLUICE_DONE},
        {CURLE_OK, 299, SLUICE__HTTP_OK, SLUICE_DONE},
        {CURLE_OK, 429, SLUICE__HTTP_THROTTLED, SLUICE_RETRY},
        {CURLE_OK, 503, SLUICE__HTTP_THROTTLED, SLUICE_RETRY},
        {CURLE_OK, 408, SLUICE__HTTP_SERVER_ERROR, SLUICE_RETRY},
        {CURLE_OK, 425, SLUICE__HTTP_SERVER_ERROR, SLUICE_RETRY},
        {CURLE_OK, 500, SLUICE__HTTP_SERVER_ERROR, SLUICE_RETRY},
        {CURLE_OK, 502, SLUICE__HTTP_SERVER_ERROR, SLUICE_RETRY},
        {CURLE_OK, 599, SLUICE__HTTP_SERVER_ERROR, SLUICE_RETRY},
        {CURLE_OK, 100, SLUICE__HTTP_SERVER_ERROR, SLUICE_RETRY},
        {CURLE_OK, 400, SLUICE__HTTP_REJECTED, SLUICE_FAIL},
        {CURLE_OK, 404, SLUICE__HTTP_REJECTED, SLUICE_FAIL},
        {CURLE_OK, 410, SLUICE__HTTP_REJECTED, SLUICE_FAIL},
        {CURLE_OK, 499, SLUICE__HTTP_REJECTED, SLUICE_FAIL},
        {CURLE_OK, 301, SLUICE__HTTP_REDIRECT, SLUICE_FAIL},
        {CURLE_OK, 308, SLUICE__HTTP_REDIRECT, SLUICE_FAIL},
        {CURLE_TOO_MANY_REDIRECTS, 0, SLUICE__HTTP_REDIRECT, SLUICE_FAIL},
        {CURLE_COULDNT_CONNECT, 0, SLUICE__HTTP_CONNECT_ERROR, SLUICE_RETRY},
        {CURLE_RECV_ERROR, 0, SLUICE__HTTP_CONNECT_ERROR, SLUICE_RETRY},
        {CURLE_SEND_ERROR, 0, SLUICE__HTTP_CONNECT_ERROR, SLUICE_RETRY},
        {CURLE_GOT_NOTHING, 0, SLUICE__HTTP_CONNECT_ERROR, SLUICE_RETRY},
        {CURLE_COULDNT_RESOLVE_HOST, 0, SLUICE__HTTP_CONNECT_ERROR, SLUICE_RETRY},
        {CURLE_PEER_FAILED_VERIFICATION, 0, SLUICE__HTTP_TLS_ERROR, SLUICE_RETRY},
        {CURLE_SSL_CONNECT_ERROR, 0, SLUICE__HTTP_TLS_ERROR, SLUICE_RETRY},
        {CURLE_OPERATION_TIMEDOUT, 0, SLUICE__HTTP_TIMEOUT, SLUICE_RETRY},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        sluice__http_result r = sluice__http_classify(t[i].code, t[i].status);
        if (r != t[i].r || sluice__http_verdict(r) != t[i].v) {
            fprintf(stderr, "curl code %d, status %ld: result %s verdict %d, wanted %s %d\n",
                    t[i].code, t[i].status, sluice__http_result_name(r), sluice__http_verdict(r),
                    sluice__http_result_name(t[i].r), t[i].v);
            exit(1);
        }
    }
    CHECK_STREQ(sluice__http_result_name(SLUICE__HTTP_TLS_ERROR), "tls_error");
    CHECK_STREQ(sluice__http_result_name(SLUICE__HTTP_RESULTS), "unknown");
}

static void headers(void) {
    char err[200];
    CHECK_EQ(sluice__http_header_check("Authorization: Bearer x", err, sizeof(err)), 0);
    CHECK_EQ(sluice__http_header_check("X-A:", err, sizeof(err)), 0);
    CHECK_EQ(sluice__http_header_check("Bad Name: x", err, sizeof(err)), -1);
    CHECK(strstr(err, "\"Bad Name: x\" is not") != NULL);
    CHECK_EQ(sluice__http_header_check("NoColon", err, sizeof(err)), -1);
    CHECK_EQ(sluice__http_header_check(": x", err, sizeof(err)), -1);
    CHECK_EQ(sluice__http_header_check("X-A: a\r\nX-B: b", err, sizeof(err)), -1);
    CHECK(strstr(err, "line break") != NULL);
    CHECK_EQ(sluice__http_header_check("content-type: text/plain", err, sizeof(err)), -1);
    CHECK(strstr(err, "set by the handler") != NULL);
    CHECK_EQ(sluice__http_header_check("Idempotency-Key: 1", err, sizeof(err)), -1);
    /* a message's value never starts a header of its own */
    char v[16];
    sluice__http_value("a\r\nX: y", 7, v, sizeof(v));
    CHECK_STREQ(v, "a  X: y");
    sluice__http_value("0123456789abcdefXYZ", 19, v, sizeof(v));
    CHECK_STREQ(v, "0123456789abcde");
    sluice__http_value("nul\0x\tok", 8, v, sizeof(v));
    CHECK_STREQ(v, "nul x\tok");
}

static void webhooks(void) {
    char id[64], sig[64], err[200];
    CHECK_EQ(sluice__webhook_id("orders", "1700000000000-3", id, sizeof(id)), 0);
    CHECK_STREQ(id, "orders:1700000000000-3");
    CHECK_EQ(sluice__webhook_id("a.b", "1-0", id, sizeof(id)), 0);
    CHECK_STREQ(id, "a%2Eb:1-0"); /* the signed content has no full stop but its two */
    CHECK_EQ(sluice__webhook_id("orders", "1700000000000-3", id, 10), -1);

    unsigned char key[64];
    size_t n = 0;
    CHECK_EQ(sluice__webhook_secret(" whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n", key, sizeof(key),
                                    &n, err, sizeof(err)),
             0);
    CHECK_EQ(n, 24);
    const char *body = "{\"test\": 2432232314}";
    CHECK_EQ(sluice__webhook_sign(key, n, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body,
                                  strlen(body), sig, sizeof(sig)),
             0);
    CHECK_STREQ(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    /* the same secret without its prefix; padding counted out of the key */
    CHECK_EQ(sluice__webhook_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", key, sizeof(key), &n, err,
                                    sizeof(err)),
             0);
    CHECK_EQ(n, 24);
    CHECK_EQ(sluice__webhook_secret("YWJj", key, sizeof(key), &n, err, sizeof(err)), 0);
    CHECK_EQ(n, 3);
    CHECK_EQ(sluice__webhook_secret("YQ==", key, sizeof(key), &n, err, sizeof(err)), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(sluice__webhook_secret("whsec_not base64!", key, sizeof(key), &n, err, sizeof(err)),
             -1);
    CHECK(strstr(err, "not base64") != NULL && strstr(err, "base64!") == NULL);
    CHECK_EQ(sluice__webhook_secret("abc", key, sizeof(key), &n, err, sizeof(err)), -1);
    CHECK_EQ(sluice__webhook_secret("", key, sizeof(key), &n, err, sizeof(err)), -1);
    /* an empty body signs too */
    CHECK_EQ(sluice__webhook_sign(key, 1, "q:1-0", 1, NULL, 0, sig, sizeof(sig)), 0);
    CHECK(strncmp(sig, "v1,", 3) == 0 && strlen(sig) == 47);
    CHECK_EQ(sluice__webhook_sign(key, 1, "q:1-0", 1, NULL, 0, sig, 40), -1);
}

int main(void) {
    verdicts();
    headers();
    webhooks();
    printf("ok: verdicts, headers and webhook signatures\n");
    return 0;
}
