/* SPDX-License-Identifier: MIT */
/*
 * test_tls.c - the TLS context and the I/O-free TLS stream (sluice/tls.h) against an OpenSSL
 * server in the same process, bytes shuttled between them in memory: no socket. A private CA,
 * a server certificate (DNS:localhost, IP:127.0.0.1) and a client certificate are made here at
 * start into a temporary directory. Asserts: handshake and data both ways; the server name and
 * IP checks; each verification failure named ("certificate verify failed: <reason>", ETLS);
 * client certificates; TLS 1.1 and renegotiation refused; session reuse; the buffer caps; the
 * options' copies.
 */
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "sluice/status.h"
#include "sluice/tls.h"

static char dir[] = "/tmp/sluice-test-tls-XXXXXX";
static char ca_pem[128], other_ca_pem[128], client_crt[128], client_key[128];

typedef struct pair {
    X509 *crt;
    EVP_PKEY *key;
} pair;

static pair ca, other_ca, server, expired, client;

/* A certificate for `cn` signed by `issuer` (NULL: self-signed CA), valid from now + from_s to
 * now + to_s, with the given subjectAltName (NULL: none). */
static pair make_cert(const char *cn, const pair *issuer, const char *san, long from_s, long to_s) {
    pair p = {X509_new(), EVP_EC_gen("P-256")};
    X509V3_CTX v3;
    CHECK(p.crt != NULL && p.key != NULL);
    X509_set_version(p.crt, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(p.crt), (long)(rand() & 0x7fffffff));
    X509_gmtime_adj(X509_getm_notBefore(p.crt), from_s);
    X509_gmtime_adj(X509_getm_notAfter(p.crt), to_s);
    X509_NAME *name = X509_get_subject_name(p.crt);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(p.crt, issuer != NULL ? X509_get_subject_name(issuer->crt) : name);
    X509_set_pubkey(p.crt, p.key);
    X509V3_set_ctx(&v3, issuer != NULL ? issuer->crt : p.crt, p.crt, NULL, NULL, 0);
    const char *exts[][2] = {
        {"basicConstraints", issuer == NULL ? "critical,CA:TRUE" : "CA:FALSE"},
        {"keyUsage", issuer == NULL ? "critical,keyCertSign,cRLSign" : "digitalSignature"},
        {"subjectAltName", san},
    };
    for (size_t i = 0; i < 3; i++) {
        if (exts[i][1] != NULL) {
            X509_EXTENSION *ext = X509V3_EXT_conf(NULL, &v3, exts[i][0], exts[i][1]);
            CHECK(ext != NULL);
            X509_add_ext(p.crt, ext, -1);
            X509_EXTENSION_free(ext);
        }
    }
    CHECK(X509_sign(p.crt, issuer != NULL ? issuer->key : p.key, EVP_sha256()) > 0);
    return p;
}

static void write_pem(const char *path, X509 *crt, EVP_PKEY *key) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    CHECK(crt == NULL || PEM_write_X509(f, crt) == 1);
    CHECK(key == NULL || PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1);
    fclose(f);
}

static void free_pair(pair *p) {
    X509_free(p->crt);
    EVP_PKEY_free(p->key);
}

static void setup(void) {
    CHECK(mkdtemp(dir) != NULL);
    snprintf(ca_pem, sizeof(ca_pem), "%s/ca.pem", dir);
    snprintf(other_ca_pem, sizeof(other_ca_pem), "%s/other-ca.pem", dir);
    snprintf(client_crt, sizeof(client_crt), "%s/client.crt", dir);
    snprintf(client_key, sizeof(client_key), "%s/client.key", dir);
    ca = make_cert("sluice test CA", NULL, NULL, -60, 86400);
    other_ca = make_cert("another CA", NULL, NULL, -60, 86400);
    server = make_cert("localhost", &ca, "DNS:localhost,IP:127.0.0.1", -60, 86400);
    expired = make_cert("localhost", &ca, "DNS:localhost", -7200, -3600);
    client = make_cert("sluice client", &ca, NULL, -60, 86400);
    write_pem(ca_pem, ca.crt, NULL);
    write_pem(other_ca_pem, other_ca.crt, NULL);
    write_pem(client_crt, client.crt, NULL);
    write_pem(client_key, NULL, client.key);
}

static void teardown(void) {
    const char *files[] = {ca_pem, other_ca_pem, client_crt, client_key};
    for (size_t i = 0; i < 4; i++) {
        unlink(files[i]);
    }
    rmdir(dir);
    free_pair(&ca);
    free_pair(&other_ca);
    free_pair(&server);
    free_pair(&expired);
    free_pair(&client);
}

/* ---------------------------------------------------------------------------------------- */
/* The server side: an SSL between memory BIOs, as the client's.                            */

typedef struct peer {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *in, *out;
} peer;

static SSL_CTX *server_ctx(const pair *cert, int max_version, int need_client_cert) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    CHECK(ctx != NULL);
    CHECK(SSL_CTX_use_certificate(ctx, cert->crt) == 1);
    CHECK(SSL_CTX_use_PrivateKey(ctx, cert->key) == 1);
    if (max_version != 0) {
        SSL_CTX_set_security_level(ctx, 0); /* let it offer TLS 1.1 at all */
        SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
        SSL_CTX_set_max_proto_version(ctx, max_version);
    }
    if (need_client_cert) {
        X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca.crt);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    return ctx;
}

static void server_new(peer *p, SSL_CTX *ctx) {
    memset(p, 0, sizeof(*p));
    p->ctx = ctx;
    CHECK((p->ssl = SSL_new(ctx)) != NULL);
    p->in = BIO_new(BIO_s_mem());
    p->out = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(p->in, -1);
    BIO_set_mem_eof_return(p->out, -1);
    SSL_set_bio(p->ssl, p->in, p->out);
    SSL_set_accept_state(p->ssl);
}

static void server_free(peer *p) {
    SSL_free(p->ssl);
    SSL_CTX_free(p->ctx);
}

/* Moves every waiting byte client -> server and server -> client. */
static void shuttle(sluice__tls_stream *c, peer *p) {
    char buf[16384];
    size_t n;
    int k;
    while ((n = sluice__tls_stream_out(c, buf, sizeof(buf))) > 0) {
        CHECK_EQ(BIO_write(p->in, buf, (int)n), (int)n);
    }
    while ((k = BIO_read(p->out, buf, sizeof(buf))) > 0) {
        CHECK_OK(sluice__tls_stream_feed(c, buf, (size_t)k), sluice__tls_stream_errstr(c));
    }
}

/* Runs both handshakes to the end: the client's result (0 or its error status). */
static int handshake(sluice__tls_stream *c, peer *p) {
    int rc = SLUICE__TLS_WANT_WRITE;
    for (int i = 0; i < 50; i++) {
        rc = sluice__tls_stream_handshake(c);
        shuttle(c, p);
        SSL_do_handshake(p->ssl);
        ERR_clear_error();
        shuttle(c, p);
        if (rc < 0 || (rc == SLUICE__TLS_DONE && SSL_is_init_finished(p->ssl))) {
            return rc;
        }
    }
    return rc;
}

/* ---------------------------------------------------------------------------------------- */
/* Client contexts and streams                                                              */

static SSL_CTX *client_ctx(const char *ca_file, int insecure, int with_cert) {
    sluice_conn_options o;
    char err[512] = "";
    int st = 0;
    sluice_conn_options_init(&o);
    o.tls_ca_file = ca_file;
    o.tls_insecure_skip_verify = insecure;
    if (with_cert) {
        o.tls_cert_file = client_crt;
        o.tls_key_file = client_key;
    }
    SSL_CTX *ctx = sluice__tls_ctx_new(&o, &st, err, sizeof(err));
    if (ctx == NULL) {
        fprintf(stderr, "client context: %d %s\n", st, err);
        exit(1);
    }
    return ctx;
}

static sluice__tls_stream *client_new(SSL_CTX *ctx, const char *host, const char *server_name,
                                      int insecure, SSL_SESSION **slot) {
    char err[256];
    sluice__tls_stream *s = sluice__tls_stream_new(ctx, host, server_name, insecure,
                                                   "rediss://test", slot, 0, err, sizeof(err));
    CHECK(s != NULL);
    return s;
}

/* What a client-server pair is made of; zero fields take the defaults: the CA that signed the
 * server's certificate, that certificate, host "localhost", any TLS version, no client check. */
typedef struct spec {
    const char *ca_file;
    const pair *cert;
    const char *host, *server_name;
    int insecure, with_cert, max_version, need_client_cert;
} spec;

/* A client (its context and stream) and a server, in memory. */
typedef struct duo {
    SSL_CTX *ctx;
    peer p;
    sluice__tls_stream *c;
} duo;

static void duo_open(duo *d, spec sp) {
    d->ctx = client_ctx(sp.ca_file != NULL ? sp.ca_file : ca_pem, sp.insecure, sp.with_cert);
    server_new(&d->p, server_ctx(sp.cert != NULL ? sp.cert : &server, sp.max_version,
                                 sp.need_client_cert));
    d->c = client_new(d->ctx, sp.host != NULL ? sp.host : "localhost", sp.server_name, sp.insecure,
                      NULL);
}

static void duo_close(duo *d) {
    sluice__tls_stream_free(d->c);
    server_free(&d->p);
    SSL_CTX_free(d->ctx);
}

/* The client's handshake status for `sp`, its text in text. */
static int try_handshake(spec sp, char *text, size_t len) {
    duo d;
    duo_open(&d, sp);
    int rc = handshake(d.c, &d.p);
    snprintf(text, len, "%s", sluice__tls_stream_errstr(d.c));
    duo_close(&d);
    return rc;
}

/* The client sends `ask`, the server answers `reply`, both arrive whole. */
static void exchange(sluice__tls_stream *c, peer *p, const char *ask, const char *reply) {
    char buf[256];
    size_t got = 0, n = 0;
    CHECK_OK(sluice__tls_stream_write(c, ask, strlen(ask)), sluice__tls_stream_errstr(c));
    shuttle(c, p);
    CHECK_EQ(SSL_read_ex(p->ssl, buf, sizeof(buf), &n), 1);
    CHECK_EQ(n, strlen(ask));
    CHECK(memcmp(buf, ask, n) == 0);
    CHECK_EQ(SSL_write_ex(p->ssl, reply, strlen(reply), &n), 1);
    shuttle(c, p);
    CHECK_OK(sluice__tls_stream_read(c, buf, sizeof(buf), &got), sluice__tls_stream_errstr(c));
    CHECK_EQ(got, strlen(reply));
    CHECK(memcmp(buf, reply, got) == 0);
    /* nothing more: a read says so with 0 bytes, not an error */
    CHECK_OK(sluice__tls_stream_read(c, buf, sizeof(buf), &got), sluice__tls_stream_errstr(c));
    CHECK_EQ(got, 0);
}

static void test_handshake_and_data(void) {
    duo d;
    char buf[64];
    size_t got;
    duo_open(&d, (spec){0});
    CHECK_EQ(sluice__tls_stream_handshake(d.c), SLUICE__TLS_WANT_WRITE); /* the ClientHello */
    CHECK(sluice__tls_stream_pending(d.c) > 0);
    CHECK_OK(handshake(d.c, &d.p), sluice__tls_stream_errstr(d.c));
    CHECK_EQ(sluice__tls_stream_handshake(d.c), SLUICE__TLS_DONE);
    CHECK_STREQ(SSL_get_servername(d.p.ssl, TLSEXT_NAMETYPE_host_name), "localhost"); /* SNI */
    CHECK(SSL_version(d.p.ssl) >= TLS1_2_VERSION);
    exchange(d.c, &d.p, "*1\r\n$4\r\nPING\r\n", "+PONG\r\n");
    exchange(d.c, &d.p, "*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n", "$2\r\nhi\r\n");
    /* the server closes: the client hears ECONN, not a TLS error */
    SSL_shutdown(d.p.ssl);
    shuttle(d.c, &d.p);
    CHECK_EQ(sluice__tls_stream_read(d.c, buf, sizeof(buf), &got), SLUICE_ECONN);
    CHECK_STREQ(sluice__tls_stream_errstr(d.c), "the server closed the TLS session");
    duo_close(&d);
}

/* The client's handshake for `sp` fails with "certificate verify failed: " and X509's text of
 * `reason`. */
static void verify_fails(spec sp, long reason) {
    char text[320], want[320];
    snprintf(want, sizeof(want), "certificate verify failed: %s",
             X509_verify_cert_error_string(reason));
    CHECK_EQ(try_handshake(sp, text, sizeof(text)), SLUICE_ETLS);
    CHECK_STREQ(text, want);
}

static void test_names(void) {
    char text[320];
    CHECK_OK(try_handshake((spec){.host = "127.0.0.1"}, text, sizeof(text)), text);
    /* the server name option wins over the URL's host */
    CHECK_OK(
        try_handshake((spec){.host = "10.1.2.3", .server_name = "localhost"}, text, sizeof(text)),
        text);
    verify_fails((spec){.host = "redis.example.com"}, X509_V_ERR_HOSTNAME_MISMATCH);
    verify_fails((spec){.server_name = "other.example"}, X509_V_ERR_HOSTNAME_MISMATCH);
    /* an IP is checked as an IP, not as a name */
    verify_fails((spec){.host = "127.0.0.2"}, X509_V_ERR_IP_ADDRESS_MISMATCH);
}

static void test_verify_failures(void) {
    duo d;
    verify_fails((spec){.ca_file = other_ca_pem}, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    verify_fails((spec){.cert = &expired}, X509_V_ERR_CERT_HAS_EXPIRED);
    /* the insecure switch takes both: wrong CA and wrong name */
    duo_open(&d, (spec){.ca_file = other_ca_pem, .host = "redis.example.com", .insecure = 1});
    CHECK_OK(handshake(d.c, &d.p), sluice__tls_stream_errstr(d.c));
    exchange(d.c, &d.p, "PING", "PONG");
    duo_close(&d);
}

static void test_client_cert(void) {
    for (int with = 0; with <= 1; with++) {
        duo d;
        char buf[64];
        size_t got = 0;
        duo_open(&d, (spec){.with_cert = with, .need_client_cert = 1});
        int rc = handshake(d.c, &d.p);
        if (with) {
            CHECK_OK(rc, sluice__tls_stream_errstr(d.c));
            exchange(d.c, &d.p, "PING", "PONG");
        } else {
            /* TLS 1.3: the client finishes first and hears the refusal on its first read */
            if (rc == 0) {
                rc = sluice__tls_stream_read(d.c, buf, sizeof(buf), &got);
            }
            CHECK_EQ(rc, SLUICE_ETLS);
            CHECK(strstr(sluice__tls_stream_errstr(d.c), "certificate required") != NULL);
        }
        duo_close(&d);
    }
}

static void test_old_protocol_refused(void) {
    char text[320];
    CHECK_EQ(try_handshake((spec){.max_version = TLS1_1_VERSION}, text, sizeof(text)), SLUICE_ETLS);
    CHECK(strncmp(text, "TLS handshake failed: ", 22) == 0);
    CHECK(strstr(text, "protocol") != NULL);
}

static void test_renegotiation_refused(void) {
    duo d;
    char buf[64];
    size_t got = 0, n = 0;
    duo_open(&d, (spec){.max_version = TLS1_2_VERSION});
    CHECK_OK(handshake(d.c, &d.p), sluice__tls_stream_errstr(d.c));
    CHECK_EQ(SSL_version(d.p.ssl), TLS1_2_VERSION);
    /* the server asks for a new handshake (HelloRequest); the client must not start one */
    CHECK_EQ(SSL_renegotiate(d.p.ssl), 1);
    SSL_do_handshake(d.p.ssl);
    ERR_clear_error();
    shuttle(d.c, &d.p);
    CHECK_OK(sluice__tls_stream_read(d.c, buf, sizeof(buf), &got), sluice__tls_stream_errstr(d.c));
    CHECK_EQ(got, 0);
    /* its answer is a no_renegotiation alert, not a ClientHello: the server gives up */
    CHECK(sluice__tls_stream_pending(d.c) > 0);
    shuttle(d.c, &d.p);
    CHECK_EQ(SSL_read_ex(d.p.ssl, buf, sizeof(buf), &n), 0);
    CHECK_EQ(ERR_GET_REASON(ERR_peek_last_error()), SSL_R_NO_RENEGOTIATION);
    ERR_clear_error();
    duo_close(&d);
}

static void test_session_reuse(void) {
    SSL_CTX *ctx = client_ctx(ca_pem, 0, 0);
    SSL_CTX *sctx = server_ctx(&server, 0, 0);
    SSL_SESSION *slot = NULL;
    for (int i = 0; i < 2; i++) {
        peer p;
        SSL_CTX_up_ref(sctx);
        server_new(&p, sctx);
        sluice__tls_stream *c = client_new(ctx, "localhost", NULL, 0, &slot);
        CHECK_OK(handshake(c, &p), sluice__tls_stream_errstr(c));
        exchange(c, &p, "PING", "PONG"); /* a TLS 1.3 ticket arrives after the handshake */
        CHECK_EQ(sluice__tls_stream_resumed(c), i == 1);
        sluice__tls_stream_free(c);
        CHECK(slot != NULL);
        server_free(&p);
    }
    SSL_SESSION_free(slot);
    SSL_CTX_free(sctx);
    SSL_CTX_free(ctx);
}

static void test_caps(void) {
    SSL_CTX *ctx = client_ctx(ca_pem, 0, 0);
    char err[128];
    static char big[8192];
    sluice__tls_stream *c =
        sluice__tls_stream_new(ctx, "localhost", NULL, 0, NULL, NULL, 4096, err, sizeof(err));
    CHECK(c != NULL);
    CHECK_EQ(sluice__tls_stream_feed(c, big, 4096), 0);
    CHECK_EQ(sluice__tls_stream_feed(c, big, 1), SLUICE_ETOOBIG);
    CHECK_STREQ(sluice__tls_stream_errstr(c), "more than 4096 bytes of TLS input waiting");
    CHECK_EQ(sluice__tls_stream_write(c, big, sizeof(big)), SLUICE_ETOOBIG);
    sluice__tls_stream_free(c);
    SSL_CTX_free(ctx);
}

static void test_ctx_errors(void) {
    sluice_conn_options o;
    char err[512];
    char missing[160];
    int st = 0;
    snprintf(missing, sizeof(missing), "%s/nope.pem", dir);
    sluice_conn_options_init(&o);
    o.tls_ca_file = missing;
    CHECK(sluice__tls_ctx_new(&o, &st, err, sizeof(err)) == NULL);
    CHECK_EQ(st, SLUICE_ETLS);
    CHECK(strstr(err, "cannot load the CA certificates from ") != NULL);
    CHECK(strstr(err, "nope.pem: ") != NULL);
    sluice_conn_options_init(&o);
    o.tls_cert_file = client_crt;
    CHECK(sluice__tls_ctx_new(&o, &st, err, sizeof(err)) == NULL);
    CHECK_EQ(st, SLUICE_EINVAL);
    CHECK_STREQ(err, "a TLS client certificate needs its key too (tls_cert_file and tls_key_file)");
    o.tls_cert_file = NULL;
    o.tls_key_file = client_key;
    CHECK(sluice__tls_ctx_new(&o, &st, err, sizeof(err)) == NULL);
    CHECK_EQ(st, SLUICE_EINVAL);
    o.tls_cert_file = client_key; /* a key is no certificate */
    CHECK(sluice__tls_ctx_new(&o, &st, err, sizeof(err)) == NULL);
    CHECK_EQ(st, SLUICE_ETLS);
    CHECK(strstr(err, "cannot load the client certificate ") != NULL);
    /* the system store loads without any file given */
    sluice_conn_options_init(&o);
    SSL_CTX *ctx = sluice__tls_ctx_new(&o, &st, err, sizeof(err));
    CHECK(ctx != NULL);
    SSL_CTX_free(ctx);
}

static void test_options_copy(void) {
    sluice_conn_options o;
    char ca_path[] = "/etc/ca.pem";
    sluice_conn_options_init(&o);
    CHECK(o.tls_ca_file == NULL && o.tls_server_name == NULL);
    CHECK_EQ(o.tls_insecure_skip_verify, 0);
    o.tls_ca_file = ca_path;
    o.tls_server_name = "redis.internal";
    o.tls_cert_file = "";
    CHECK_OK(sluice__tls_options_keep(&o), "keep");
    ca_path[1] = 'x'; /* the copy does not follow the caller's buffer */
    CHECK_STREQ(o.tls_ca_file, "/etc/ca.pem");
    CHECK(o.tls_ca_file != ca_path);
    CHECK_STREQ(o.tls_server_name, "redis.internal");
    CHECK(o.tls_cert_file == NULL); /* "" is unset */
    CHECK(o.tls_key_file == NULL && o.tls_ca_dir == NULL);
    sluice__tls_options_release(&o);
    CHECK(o.tls_ca_file == NULL && o.tls_server_name == NULL);
    sluice__tls_options_release(&o);
    sluice__tls_options_release(NULL);
    CHECK_STREQ(sluice_err_name(SLUICE_ETLS), "ETLS");
    CHECK_EQ(sluice_status_is_transient(SLUICE_ETLS), 0);
}

int main(void) {
    setup();
    test_handshake_and_data();
    test_names();
    test_verify_failures();
    test_client_cert();
    test_old_protocol_refused();
    test_renegotiation_refused();
    test_session_reuse();
    test_caps();
    test_ctx_errors();
    test_options_copy();
    teardown();
    printf("test_tls: 10 groups passed\n");
    return 0;
}
