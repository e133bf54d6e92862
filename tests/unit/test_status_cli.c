/* SPDX-License-Identifier: MIT */
/*
 * test_status_cli.c - the status table (messages, names, retry advice), the strict option
 * parsers and formatters of cli.h, the TLS settings the binaries take from the environment, the
 * clocks, and the log line format of log.h. No network.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "sluice/cli.h"
#include "sluice/log.h"
#include "sluice/redis.h"
#include "sluice/status.h"

static char err[256];

static void test_status(void) {
    static const struct {
        int code;
        const char *name, *msg;
    } table[] = {
#define ROW(name, code, msg) {code, #name, msg},
        SLUICE_STATUS_MAP(ROW)
#undef ROW
    };
    size_t n = sizeof(table) / sizeof(table[0]);
    for (size_t i = 0; i < n; i++) {
        CHECK(table[i].code < 0);
        CHECK_STREQ(sluice_strerror(table[i].code), table[i].msg);
        CHECK_STREQ(sluice_err_name(table[i].code), table[i].name);
        for (size_t j = i + 1; j < n; j++) {
            CHECK(table[i].code != table[j].code);
        }
    }
    CHECK_STREQ(sluice_err_name(SLUICE_ETIMEDOUT), "ETIMEDOUT");
    CHECK_STREQ(sluice_strerror(SLUICE_ENOPERM), "not permitted by the redis ACL");
    CHECK_STREQ(sluice_err_name(0), "OK");
    CHECK(sluice_strerror(0)[0] != '\0');
    CHECK_STREQ(sluice_strerror(-999), "unknown status");
    CHECK_STREQ(sluice_strerror(3), "unknown status");
    CHECK_STREQ(sluice_err_name(-999), "EUNKNOWNSTATUS");
    static const int transient[] = {SLUICE_ECONN,    SLUICE_ETIMEDOUT, SLUICE_EBUSY,
                                    SLUICE_ELOADING, SLUICE_EOOM,      SLUICE_EMISCONF};
    static const int permanent[] = {0,
                                    SLUICE_EINVAL,
                                    SLUICE_ETOOBIG,
                                    SLUICE_EDECODE,
                                    SLUICE_EAUTH,
                                    SLUICE_ENOPERM,
                                    SLUICE_EUNKNOWN,
                                    SLUICE_EWRONGTYPE,
                                    SLUICE_ETLS,
                                    -999};
    for (size_t i = 0; i < sizeof(transient) / sizeof(transient[0]); i++) {
        CHECK(sluice_status_is_transient(transient[i]));
    }
    for (size_t i = 0; i < sizeof(permanent) / sizeof(permanent[0]); i++) {
        CHECK(!sluice_status_is_transient(permanent[i]));
    }
}

static void ll_ok_at(int line, const char *s, long long min, long long max, long long want) {
    long long v = 0;
    err[0] = '\0';
    if (sluice_parse_ll("--n", s, min, max, &v, err, sizeof(err)) != 0 || v != want) {
        fprintf(stderr, "%s:%d: \"%s\" -> %lld \"%s\", wanted %lld\n", __FILE__, line, s, v, err,
                want);
        exit(1);
    }
}

static void ll_bad_at(int line, const char *s, long long min, long long max, const char *want) {
    long long v = 12345;
    err[0] = '\0';
    if (sluice_parse_ll("--concurrency", s, min, max, &v, err, sizeof(err)) != SLUICE_EINVAL ||
        strcmp(err, want) != 0 || v != 12345) {
        fprintf(stderr, "%s:%d: \"%s\" gave \"%s\", wanted \"%s\"\n", __FILE__, line,
                s ? s : "(null)", err, want);
        exit(1);
    }
}

#define LL_OK(s, min, max, want)  ll_ok_at(__LINE__, s, min, max, want)
#define LL_BAD(s, min, max, want) ll_bad_at(__LINE__, s, min, max, want)

static void test_parse_ll(void) {
    LL_OK("42", 1, 100, 42);
    LL_OK("1", 1, 10000, 1);
    LL_OK("10000", 1, 10000, 10000);
    LL_OK("-5", -10, 10, -5);
    LL_OK("007", 0, 10, 7);
    LL_OK("-0", 0, 0, 0);
    LL_OK("9223372036854775807", 0, LLONG_MAX, LLONG_MAX);
    LL_OK("-9223372036854775808", LLONG_MIN, 0, LLONG_MIN);
    LL_BAD("abc", 1, 10000, "--concurrency: \"abc\" is not a number");
    LL_BAD("0", 1, 10000, "--concurrency: 0 is out of range 1..10000");
    LL_BAD("10001", 1, 10000, "--concurrency: 10001 is out of range 1..10000");
    LL_BAD("-1", 0, 5, "--concurrency: -1 is out of range 0..5");
    LL_BAD("", 1, 10, "--concurrency: \"\" is not a number");
    LL_BAD(" 5", 1, 10, "--concurrency: \" 5\" is not a number");
    LL_BAD("+5", 1, 10, "--concurrency: \"+5\" is not a number");
    LL_BAD("5 ", 1, 10, "--concurrency: \"5 \" is not a number");
    LL_BAD("5x", 1, 10, "--concurrency: \"5x\" is not a number");
    LL_BAD("0x10", 0, 100, "--concurrency: \"0x10\" is not a number");
    LL_BAD("1e3", 0, 10000, "--concurrency: \"1e3\" is not a number");
    LL_BAD("-", 0, 10, "--concurrency: \"-\" is not a number");
    LL_BAD("--5", -10, 10, "--concurrency: \"--5\" is not a number");
    LL_BAD("9223372036854775808", 0, LLONG_MAX,
           "--concurrency: 9223372036854775808 is out of range 0..9223372036854775807");
    LL_BAD(NULL, 0, 10, "--concurrency: missing value");
}

static void test_parse_size(void) {
    size_t v = 0;
    const size_t big = (size_t)1 << 40;
    struct {
        const char *s;
        size_t want;
    } good[] = {{"0", 0},         {"512", 512},       {"4k", 4096},
                {"4K", 4096},     {"2m", 2u << 20},   {"16M", 16u << 20},
                {"1g", 1u << 30}, {"3G", 3ull << 30}, {"0k", 0}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        CHECK_OK(sluice_parse_size("--max", good[i].s, 0, big, &v, err, sizeof(err)), good[i].s);
        CHECK_EQ(v, good[i].want);
    }
    static const char *const bad[] = {"",   "k",   "1kb", "1.5k", "-1",  " 1k",
                                      "+1", "1 k", "1t",  "0x10", "1kk", "1k "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 77;
        CHECK_EQ(sluice_parse_size("--max", bad[i], 0, big, &v, err, sizeof(err)), SLUICE_EINVAL);
        CHECK(strstr(err, "is not a size") != NULL);
        CHECK_EQ(v, 77);
    }
    CHECK_EQ(sluice_parse_size("--max-bytes", "2g", 1, 1u << 30, &v, err, sizeof(err)),
             SLUICE_EINVAL);
    CHECK_STREQ(err, "--max-bytes: 2g is out of range 1..1073741824");
    CHECK_EQ(sluice_parse_size("--max-bytes", "0", 1, 100, &v, err, sizeof(err)), SLUICE_EINVAL);
    CHECK_STREQ(err, "--max-bytes: 0 is out of range 1..100");
    CHECK_EQ(sluice_parse_size("--m", "99999999999999999999", 0, SIZE_MAX, &v, err, sizeof(err)),
             SLUICE_EINVAL);
    CHECK(strstr(err, "out of range") != NULL);
    CHECK_EQ(sluice_parse_size("--m", "17179869184g", 0, SIZE_MAX, &v, err, sizeof(err)),
             SLUICE_EINVAL);
    CHECK(strstr(err, "out of range") != NULL);
    CHECK_EQ(sluice_parse_size("--m", NULL, 0, 10, &v, err, sizeof(err)), SLUICE_EINVAL);
}

static void list_bad_at(int line, const char *s, size_t cap, const char *want) {
    long long out[4];
    size_t n = 99;
    err[0] = '\0';
    if (sluice_parse_ll_list("--sizes", s, 1, 1000, out, cap, &n, err, sizeof(err)) !=
            SLUICE_EINVAL ||
        strcmp(err, want) != 0 || n != 0) {
        fprintf(stderr, "%s:%d: \"%s\" gave \"%s\" n=%zu, wanted \"%s\"\n", __FILE__, line, s, err,
                n, want);
        exit(1);
    }
}

static void test_parse_list(void) {
    long long out[4];
    size_t n = 0;
    CHECK_OK(sluice_parse_ll_list("--sizes", "1,2,4,8", 1, 1000, out, 4, &n, err, sizeof(err)), "");
    CHECK_EQ(n, 4);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 4 && out[3] == 8);
    CHECK_OK(sluice_parse_ll_list("--sizes", "5", 1, 1000, out, 4, &n, err, sizeof(err)), "");
    CHECK_EQ(n, 1);
    CHECK_EQ(out[0], 5);
    list_bad_at(__LINE__, "", 4, "--sizes: empty value 1 in \"\"");
    list_bad_at(__LINE__, "1,,2", 4, "--sizes: empty value 2 in \"1,,2\"");
    list_bad_at(__LINE__, "1,2,", 4, "--sizes: empty value 3 in \"1,2,\"");
    list_bad_at(__LINE__, ",1", 4, "--sizes: empty value 1 in \",1\"");
    list_bad_at(__LINE__, "1, 2", 4, "--sizes: \" 2\" is not a number");
    list_bad_at(__LINE__, "1,x,3", 4, "--sizes: \"x\" is not a number");
    list_bad_at(__LINE__, "1,2x", 4, "--sizes: \"2x\" is not a number");
    list_bad_at(__LINE__, "8,0", 4, "--sizes: 0 is out of range 1..1000");
    list_bad_at(__LINE__, "1,2,3", 2, "--sizes: more than 2 values in \"1,2,3\"");
    list_bad_at(__LINE__, "1,99999999999999999999", 4,
                "--sizes: 99999999999999999999 is out of range 1..1000");
}

static void fmt_is_at(int line, unsigned long long v, const char *want) {
    char buf[32];
    if (strcmp(sluice_fmt_count(buf, sizeof(buf), v), want) != 0) {
        fprintf(stderr, "%s:%d: %llu -> \"%s\", wanted \"%s\"\n", __FILE__, line, v, buf, want);
        exit(1);
    }
}

static void test_fmt_count(void) {
    char small[4];
    fmt_is_at(__LINE__, 0, "0");
    fmt_is_at(__LINE__, 7, "7");
    fmt_is_at(__LINE__, 999, "999");
    fmt_is_at(__LINE__, 1000, "1,000");
    fmt_is_at(__LINE__, 65536, "65,536");
    fmt_is_at(__LINE__, 1234567, "1,234,567");
    fmt_is_at(__LINE__, 100000000, "100,000,000");
    fmt_is_at(__LINE__, ULLONG_MAX, "18,446,744,073,709,551,615");
    CHECK(sluice_fmt_count(small, sizeof(small), 1234567) == small);
    CHECK_STREQ(small, "1,2");
    CHECK(sluice_fmt_count(NULL, 0, 5) == NULL);
}

static void test_clocks(void) {
    uint64_t a = sluice_now_ns(), b = sluice_now_ns();
    CHECK(a > 0 && b >= a);
    CHECK(sluice_now_ms() >= a / 1000000u);
    CHECK(sluice_wall_ms() > 1577836800000ull); /* after 2020-01-01 */
}

static int evaluated;

static int count_eval(void) {
    return ++evaluated;
}

/* Captures what one SLUICE_LOG writes to fd 2. */
static void capture(char *buf, size_t len, int level, const char *msg) {
    char path[] = "/tmp/sluice-test-log-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ssize_t n;
    CHECK(fd >= 0 && saved >= 0);
    CHECK(dup2(fd, 2) == 2);
    SLUICE_LOG(level, "event=test %s n=%d", msg, 3);
    CHECK(dup2(saved, 2) == 2);
    close(saved);
    n = pread(fd, buf, len - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
}

static void test_log(void) {
    char line[4096];
    CHECK_EQ(sluice_log_level, SLUICE_LOG_OFF);
    CHECK_EQ(sluice_log_level_parse("debug"), SLUICE_LOG_DEBUG);
    CHECK_EQ(sluice_log_level_parse("INFO"), SLUICE_LOG_INFO);
    CHECK_EQ(sluice_log_level_parse("warn"), SLUICE_LOG_WARN);
    CHECK_EQ(sluice_log_level_parse("error"), SLUICE_LOG_ERROR);
    CHECK_EQ(sluice_log_level_parse("off"), SLUICE_LOG_OFF);
    CHECK_EQ(sluice_log_level_parse("verbose"), -2);
    CHECK_EQ(sluice_log_level_parse(NULL), -2);
    /* below the threshold the arguments are not evaluated */
    SLUICE_LOG(SLUICE_LOG_ERROR, "n=%d", count_eval());
    CHECK_EQ(evaluated, 0);
    capture(line, sizeof(line), SLUICE_LOG_ERROR, "off");
    CHECK_STREQ(line, "");
    sluice_log_set_level(SLUICE_LOG_INFO, "test-prog");
    SLUICE_LOG(SLUICE_LOG_DEBUG, "n=%d", count_eval());
    CHECK_EQ(evaluated, 0);
    capture(line, sizeof(line), SLUICE_LOG_INFO, "two\nlines");
    /* 2026-11-22T03:48:12.123Z level=info prog=test-prog event=test two lines n=3 */
    CHECK_EQ(strlen(line), 24 + strlen(" level=info prog=test-prog event=test two lines n=3\n"));
    CHECK(line[4] == '-' && line[10] == 'T' && line[19] == '.' && line[23] == 'Z');
    CHECK_STREQ(line + 24, " level=info prog=test-prog event=test two lines n=3\n");
    /* an over-long message is cut, still one line */
    char big[3000];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    capture(line, sizeof(line), SLUICE_LOG_ERROR, big);
    CHECK(strlen(line) < 2100 && strchr(line, '\n') == line + strlen(line) - 1);
    CHECK(strstr(line, "...\n") != NULL);
    sluice_log_set_level(SLUICE_LOG_WARN, NULL);
    capture(line, sizeof(line), SLUICE_LOG_WARN, "x");
    CHECK_STREQ(line + 24, " level=warn event=test x n=3\n");
    sluice_log_set_level(SLUICE_LOG_OFF, NULL);
}

/* One listening-address parser for --listen and --metrics: the forms both accept. */
static void test_listen_addr(void) {
    struct sockaddr_storage ss;
    char msg[256];
    static const struct {
        const char *s;
        int family, port;
        const char *ip;
    } good[] = {
        {"127.0.0.1:8080", AF_INET, 8080, "127.0.0.1"},
        {"localhost:9", AF_INET, 9, "127.0.0.1"},
        {":9100", AF_INET, 9100, "0.0.0.0"},
        {"*:0", AF_INET, 0, "0.0.0.0"},
        {"[::1]:8080", AF_INET6, 8080, "::1"},
        {"[::]:1", AF_INET6, 1, "::"},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char ip[64] = "";
        CHECK_EQ(sluice_listen_addr_parse("--listen", good[i].s, &ss, msg, sizeof(msg)), 0);
        CHECK_EQ(ss.ss_family, good[i].family);
        int port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                           : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        CHECK_EQ(port, good[i].port);
        ss.ss_family == AF_INET ? uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip))
                                : uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        CHECK_STREQ(ip, good[i].ip);
    }
    static const struct {
        const char *s, *needle;
    } bad[] = {
        {"8080", "\"8080\" is not HOST:PORT"},
        {"127.0.0.1:65536", "--metrics port"},
        {"127.0.0.1:x", "--metrics port"},
        {"example.com:80", "\"example.com\" is not an IP address"},
        {"[::1:80", "is not an IP address"},
        {"[nope]:80", "\"nope\" is not an IP address"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        msg[0] = '\0';
        CHECK_EQ(sluice_listen_addr_parse("--metrics", bad[i].s, &ss, msg, sizeof(msg)), -1);
        if (strstr(msg, bad[i].needle) == NULL) {
            fprintf(stderr, "%s: \"%s\" lacks \"%s\"\n", bad[i].s, msg, bad[i].needle);
            exit(1);
        }
    }
}

/* The one quoting rule of log values. */
static void test_log_quote(void) {
    char b[64];
    CHECK_STREQ(sluice_log_q("plain", b, sizeof(b)), "\"plain\"");
    CHECK_STREQ(sluice_log_q("a \"q\" \\ b\nc\033", b, sizeof(b)),
                "\"a \\\"q\\\" \\\\ b\\nc\\x1b\"");
    CHECK_STREQ(sluice_log_q(NULL, b, sizeof(b)), "\"\"");
    CHECK_STREQ(sluice_log_q("abcdefgh", b, 6), "\"abc\""); /* cut to fit, still closed */
    CHECK_STREQ(sluice_log_q("\n\n", b, 5), "\"\\n\"");
    CHECK_STREQ(sluice_log_q("\n\n", b, 4), "\"\""); /* an escape is never cut */
}

static void test_tls_env(void) {
    static const char *const vars[] = {"SLUICE_TLS_CA_FILE",     "SLUICE_TLS_CA_DIR",
                                       "SLUICE_TLS_CERT_FILE",   "SLUICE_TLS_KEY_FILE",
                                       "SLUICE_TLS_SERVER_NAME", "SLUICE_TLS_INSECURE_SKIP_VERIFY"};
    sluice_conn_options co;
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
    sluice_conn_options_init(&co);
    co.tls_ca_file = "/given.pem";
    CHECK_OK(sluice_cli_tls_env(&co, err, sizeof(err)), err);
    CHECK_STREQ(co.tls_ca_file, "/given.pem"); /* unset: left alone */
    CHECK(co.tls_cert_file == NULL && co.tls_server_name == NULL);
    CHECK_EQ(co.tls_insecure_skip_verify, 0);
    setenv("SLUICE_TLS_CA_FILE", "/ca.pem", 1);
    setenv("SLUICE_TLS_CA_DIR", "/certs", 1);
    setenv("SLUICE_TLS_CERT_FILE", "/c.crt", 1);
    setenv("SLUICE_TLS_KEY_FILE", "/c.key", 1);
    setenv("SLUICE_TLS_SERVER_NAME", "redis.internal", 1);
    setenv("SLUICE_TLS_INSECURE_SKIP_VERIFY", "1", 1);
    CHECK_OK(sluice_cli_tls_env(&co, err, sizeof(err)), err);
    CHECK_STREQ(co.tls_ca_file, "/ca.pem");
    CHECK_STREQ(co.tls_ca_dir, "/certs");
    CHECK_STREQ(co.tls_cert_file, "/c.crt");
    CHECK_STREQ(co.tls_key_file, "/c.key");
    CHECK_STREQ(co.tls_server_name, "redis.internal");
    CHECK_EQ(co.tls_insecure_skip_verify, 1);
    setenv("SLUICE_TLS_INSECURE_SKIP_VERIFY", "0", 1);
    CHECK_OK(sluice_cli_tls_env(&co, err, sizeof(err)), err);
    CHECK_EQ(co.tls_insecure_skip_verify, 0);
    setenv("SLUICE_TLS_INSECURE_SKIP_VERIFY", "yes", 1);
    CHECK_EQ(sluice_cli_tls_env(&co, err, sizeof(err)), SLUICE_EINVAL);
    CHECK_STREQ(err, "SLUICE_TLS_INSECURE_SKIP_VERIFY: \"yes\" is not 0 or 1");
    unsetenv("SLUICE_TLS_INSECURE_SKIP_VERIFY");
    setenv("SLUICE_TLS_KEY_FILE", "", 1); /* empty is unset */
    CHECK_EQ(sluice_cli_tls_env(&co, err, sizeof(err)), SLUICE_EINVAL);
    CHECK_STREQ(err, "SLUICE_TLS_CERT_FILE is set but SLUICE_TLS_KEY_FILE is not: a client "
                     "certificate needs both");
    unsetenv("SLUICE_TLS_CERT_FILE");
    setenv("SLUICE_TLS_KEY_FILE", "/c.key", 1);
    CHECK_EQ(sluice_cli_tls_env(&co, err, sizeof(err)), SLUICE_EINVAL);
    CHECK(strstr(err, "SLUICE_TLS_KEY_FILE is set but SLUICE_TLS_CERT_FILE is not") == err);
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
}

int main(void) {
    test_tls_env();
    test_log_quote();
    test_listen_addr();
    test_status();
    test_parse_ll();
    test_parse_size();
    test_parse_list();
    test_fmt_count();
    test_clocks();
    test_log();
    printf("test_status_cli: 10 groups passed\n");
    return 0;
}
