/* SPDX-License-Identifier: MIT */
/* harness.c - see harness.h. */
#include "harness.h"
#include "sluice/producer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

static char url_buf[256];
static char unix_buf[512];

static void read_file(const char *name, char *out, size_t len) {
    const char *dir = getenv("SLUICE_TEST_REDIS_DIR");
    char path[512];
    if (dir == NULL) {
        fprintf(stderr, "harness: SLUICE_TEST_REDIS_DIR is not set (run through ctest)\n");
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(out, (int)len, f) == NULL) {
        fprintf(stderr, "harness: cannot read %s (is the redis fixture running?)\n", path);
        exit(1);
    }
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

const char *th_redis_url(void) {
    if (url_buf[0] == '\0') {
        read_file("url", url_buf, sizeof(url_buf));
    }
    return url_buf;
}

const char *th_redis_unix_url(void) {
    if (unix_buf[0] == '\0') {
        char sock[400];
        read_file("sock", sock, sizeof(sock));
        snprintf(unix_buf, sizeof(unix_buf), "unix://%s", sock);
    }
    return unix_buf;
}

void th_queue(char *buf, size_t len, const char *prefix) {
    static int n;
    snprintf(buf, len, "%s-%d-%d", prefix, (int)getpid(), n++);
}

redisReply *th_resp(const char *text) {
    redisReader *rd = redisReaderCreate();
    void *out = NULL;
    CHECK(rd != NULL);
    CHECK(redisReaderFeed(rd, text, strlen(text)) == REDIS_OK);
    CHECK(redisReaderGetReply(rd, &out) == REDIS_OK && out != NULL);
    redisReaderFree(rd);
    return out;
}

redisContext *th_redis(void) {
    const char *u = th_redis_url();
    const char *colon = strrchr(u, ':');
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", atoi(colon + 1), tv);
    if (c == NULL || c->err) {
        fprintf(stderr, "harness: cannot connect to %s: %s\n", u, c ? c->errstr : "oom");
        exit(1);
    }
    redisSetTimeout(c, tv);
    return c;
}

long long th_int(redisContext *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "harness: command '%s' failed: %s\n", fmt, r ? r->str : c->errstr);
        exit(1);
    }
    long long v = 0;
    if (r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    } else if (r->type == REDIS_REPLY_STRING) {
        v = atoll(r->str);
    }
    freeReplyObject(r);
    return v;
}

void th_cleanup_queue(redisContext *c, const char *q) {
    static const char *suffix[] = {"stream", "dead", "meta", "stats", "list", "procs"};
    for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
        th_int(c, "DEL sluice:{%s}:%s", q, suffix[i]);
    }
}

const char *th_bin_dir(void) {
    const char *d = getenv("SLUICE_BIN_DIR");
    return d ? d : ".";
}

void th_fill(const char *q, sluice_backend b, int n, const char *body) {
    sluice_producer_options o;
    sluice_producer *p;
    sluice_admit_result res;
    char err[256];
    sluice_producer_options_init(&o);
    o.redis_url = th_redis_url();
    o.queue = q;
    o.backend = b;
    o.capacity = 100000;
    CHECK_OK(sluice_producer_new(&o, &p, err, sizeof(err)), err);
    for (int i = 0; i < n; i++) {
        CHECK_OK(sluice_producer_admit(p, body, strlen(body), &res), sluice_producer_errstr(p));
        CHECK_EQ(res.outcome, SLUICE_ADMITTED);
    }
    sluice_producer_free(p);
}

static void *worker_thread(void *arg) {
    th_worker_run *r = arg;
    r->rc = sluice_worker_run(r->w, NULL);
    return NULL;
}

void th_worker_start(th_worker_run *r) {
    CHECK(pthread_create(&r->thread, NULL, worker_thread, r) == 0);
}

int th_worker_join(th_worker_run *r) {
    CHECK(pthread_join(r->thread, NULL) == 0);
    return r->rc;
}

int th_free_port(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(fd >= 0);
    CHECK_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    CHECK_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd); /* nothing listens there now */
    return ntohs(a.sin_port);
}
