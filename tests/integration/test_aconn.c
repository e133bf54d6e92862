/* SPDX-License-Identifier: MIT */
/*
 * test_aconn.c - the async (libuv) Redis connection against the fixture's redis-server.
 *
 * Covers what a producer or worker relies on: round trips over TCP and the unix socket, 10,000
 * pipelined commands each called back once and in order, sluice function calls (also after
 * the server lost the library, and in EVALSHA mode after SCRIPT FLUSH), a refused connect and
 * a connect that hangs reported within the connect timeout, a command deadline dropping and
 * re-establishing the connection, CLIENT KILL failing in-flight calls with ECONN and
 * reconnecting, close with pending calls (ECANCELED exactly once, also from inside a
 * callback), a wrong password (EAUTH, no password in the message, no retry storm), and a
 * redis+sentinel:// URL whose sentinels do not answer (a clear error naming each; closed
 * cleanly at any point).
 *
 * Every wait runs the loop under a watchdog timer. Commands that stall or change the whole
 * server (DEBUG SLEEP, FUNCTION DELETE, SCRIPT FLUSH) are short and ones the library recovers
 * from, since other tests may share the server.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "sluice/redis.h"
#include "sluice/status.h"

#include "uvwait.h"

typedef struct state {
    int ready; /* state_cb(1) count */
    int lost;  /* state_cb(0) count */
    int last_status;
} state;

static void on_state(sluice_aconn *c, int ready, int status, void *arg) {
    (void)c;
    state *s = arg;
    if (ready) {
        CHECK_EQ(status, 0);
        s->ready++;
    } else {
        CHECK(status < 0);
        s->lost++;
        s->last_status = status;
    }
}

typedef struct result {
    int calls;
    int status;
    int sent;
    int type;
    long long integer;
    char str[256];
} result;

static void on_result(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    result *x = arg;
    x->calls++;
    x->status = status;
    x->sent = sent;
    x->type = r != NULL ? r->type : -1;
    x->str[0] = '\0';
    if (r != NULL) {
        x->integer = r->integer;
        if (r->str != NULL) {
            snprintf(x->str, sizeof(x->str), "%.*s", (int)r->len, r->str);
        }
    }
}

static void on_closed(void *arg) {
    (*(int *)arg)++;
}

static sluice_aconn *open_url(const char *u, const sluice_conn_options *o, state *s, int wait) {
    sluice_url url;
    char err[256];
    CHECK_OK(sluice_url_parse(&url, u, err, sizeof(err)), err);
    memset(s, 0, sizeof(*s));
    sluice_aconn *c = sluice_aconn_new(&loop, &url, o, on_state, s);
    CHECK(c != NULL);
    if (wait) {
        WAIT(s->ready == 1 || s->lost > 0);
        CHECK_OK(s->ready == 1 ? 0 : s->last_status, sluice_aconn_errstr(c));
        CHECK(sluice_aconn_ready(c));
    }
    return c;
}

static void close_conn(sluice_aconn *c) {
    int closed = 0;
    sluice_aconn_close(c, on_closed, &closed);
    WAIT(closed == 1);
}

static int cmd(sluice_aconn *c, const char *a0, const char *a1, const char *a2, int timeout_ms,
               result *x) {
    const char *argv[] = {a0, a1, a2};
    int argc = a2 != NULL ? 3 : a1 != NULL ? 2 : 1;
    memset(x, 0, sizeof(*x));
    return sluice_aconn_command(c, argc, argv, NULL, timeout_ms, on_result, x);
}

/* Sends a command and waits for its reply; returns the status. */
static int roundtrip(sluice_aconn *c, const char *a0, const char *a1, const char *a2, result *x) {
    CHECK_OK(cmd(c, a0, a1, a2, 0, x), sluice_aconn_errstr(c));
    WAIT(x->calls == 1);
    return x->status;
}

typedef struct chain {
    result first, second;
    int submit;
} chain;

/* Submits the next command from inside a reply callback. */
static void on_chain(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    chain *k = arg;
    on_result(c, status, sent, r, &k->first);
    const char *argv[] = {"ECHO", "second"};
    k->submit = sluice_aconn_command(c, 2, argv, NULL, 0, on_result, &k->second);
}

static void test_ping(const char *u) {
    state s;
    result x;
    sluice_aconn *c = open_url(u, NULL, &s, 0);
    /* not ready yet: refused at once, the callback never runs */
    CHECK_EQ(cmd(c, "PING", NULL, NULL, 0, &x), SLUICE_ECONN);
    WAIT(s.ready == 1);
    CHECK_OK(cmd(c, "PING", NULL, NULL, 0, &x), sluice_aconn_errstr(c));
    CHECK_EQ(sluice_aconn_pending(c), 1);
    WAIT(x.calls == 1);
    CHECK_EQ(sluice_aconn_pending(c), 0);
    CHECK_EQ(x.status, 0);
    CHECK_EQ(x.sent, 1);
    CHECK_STREQ(x.str, "PONG");
    chain k = {0};
    const char *argv[] = {"ECHO", "first"};
    CHECK_OK(sluice_aconn_command(c, 2, argv, NULL, 0, on_chain, &k), sluice_aconn_errstr(c));
    WAIT(k.second.calls == 1);
    CHECK_EQ(k.submit, 0);
    CHECK_STREQ(k.first.str, "first");
    CHECK_STREQ(k.second.str, "second");
    /* an error reply: mapped status, and the reply too */
    char key[64];
    th_queue(key, sizeof(key), "aconn-wrongtype");
    CHECK_OK(roundtrip(c, "SET", key, "v", &x), sluice_aconn_errstr(c));
    CHECK_EQ(roundtrip(c, "LPUSH", key, "v", &x), SLUICE_EWRONGTYPE);
    CHECK_EQ(x.type, REDIS_REPLY_ERROR);
    CHECK(strncmp(x.str, "WRONGTYPE", 9) == 0);
    CHECK_OK(roundtrip(c, "DEL", key, NULL, &x), sluice_aconn_errstr(c));
    /* a command that would break one-reply-per-request is refused */
    CHECK_EQ(cmd(c, "SUBSCRIBE", "chan", NULL, 0, &x), SLUICE_EINVAL);
    CHECK_EQ(s.lost, 0);
    close_conn(c);
    CHECK_EQ(x.calls, 0);
}

static void test_select(void) {
    char u[300];
    state s;
    result x;
    snprintf(u, sizeof(u), "%s/3", th_redis_url());
    sluice_aconn *c = open_url(u, NULL, &s, 1);
    CHECK_OK(roundtrip(c, "CLIENT", "INFO", NULL, &x), sluice_aconn_errstr(c));
    CHECK(strstr(x.str, " db=3 ") != NULL);
    close_conn(c);
}

#define PIPELINED 10000

typedef struct pipeline {
    int next;             /* index expected next */
    int calls[PIPELINED]; /* callbacks per command */
    int bad;              /* out of order, failed or wrong reply */
} pipeline;

static void on_echo(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    (void)sent;
    pipeline *p = arg;
    int i = p->next++;
    char want[16];
    snprintf(want, sizeof(want), "%d", i);
    p->calls[i]++;
    if (status != 0 || r == NULL || r->type != REDIS_REPLY_STRING || strcmp(r->str, want) != 0) {
        p->bad++;
    }
}

static void test_pipeline(void) {
    state s;
    static pipeline p;
    sluice_aconn *c = open_url(th_redis_url(), NULL, &s, 1);
    for (int i = 0; i < PIPELINED; i++) {
        char num[16];
        snprintf(num, sizeof(num), "%d", i);
        const char *argv[] = {"ECHO", num};
        CHECK_OK(sluice_aconn_command(c, 2, argv, NULL, 0, on_echo, &p), sluice_aconn_errstr(c));
    }
    CHECK_EQ(sluice_aconn_pending(c), PIPELINED);
    WAIT(p.next == PIPELINED);
    run_for(50); /* nothing more may arrive */
    CHECK_EQ(p.bad, 0);
    for (int i = 0; i < PIPELINED; i++) {
        CHECK_EQ(p.calls[i], 1);
    }
    CHECK_EQ(sluice_aconn_pending(c), 0);
    close_conn(c);
}

static int fcall_version(sluice_aconn *c, result *x) {
    memset(x, 0, sizeof(*x));
    return sluice_aconn_fcall(c, SLUICE_FN_VERSION, 0, NULL, NULL, 0, NULL, NULL, 0, on_result, x);
}

static void check_version(const result *x) {
    CHECK_EQ(x->calls, 1);
    CHECK_EQ(x->status, 0);
    CHECK_EQ(x->type, REDIS_REPLY_STRING);
    CHECK(strncmp(x->str, "1:", 2) == 0);
}

/* fcall works; after FUNCTION DELETE the library is reloaded and each call re-sent once. */
static void test_fcall_reload(void) {
    state s;
    result x[3];
    sluice_aconn *c = open_url(th_redis_url(), NULL, &s, 1);
    CHECK_OK(fcall_version(c, &x[0]), sluice_aconn_errstr(c));
    WAIT(x[0].calls == 1);
    check_version(&x[0]);

    redisContext *rc = th_redis();
    freeReplyObject(redisCommand(rc, "FUNCTION DELETE sluice"));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(fcall_version(c, &x[i]), sluice_aconn_errstr(c));
    }
    WAIT(x[0].calls + x[1].calls + x[2].calls == 3);
    run_for(50);
    for (int i = 0; i < 3; i++) {
        check_version(&x[i]);
    }
    redisReply *r = redisCommand(rc, "FUNCTION LIST LIBRARYNAME sluice");
    CHECK(r != NULL && r->type == REDIS_REPLY_ARRAY);
    CHECK_EQ(r->elements, 1);
    freeReplyObject(r);
    redisFree(rc);
    CHECK_EQ(s.lost, 0);
    close_conn(c);
}

/* EVALSHA mode: SCRIPT FLUSH between calls is repaired by SCRIPT LOAD + re-send. */
static void test_force_eval(void) {
    state s;
    result x[2];
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.force_eval = 1;
    sluice_aconn *c = open_url(th_redis_url(), &o, &s, 1);
    CHECK_OK(fcall_version(c, &x[0]), sluice_aconn_errstr(c));
    WAIT(x[0].calls == 1);
    check_version(&x[0]);
    redisContext *rc = th_redis();
    freeReplyObject(redisCommand(rc, "SCRIPT FLUSH"));
    redisFree(rc);
    for (int i = 0; i < 2; i++) {
        CHECK_OK(fcall_version(c, &x[i]), sluice_aconn_errstr(c));
    }
    WAIT(x[0].calls + x[1].calls == 2);
    check_version(&x[0]);
    check_version(&x[1]);
    close_conn(c);
}

/* no_load: a server without the library is not given one; calls say ENOSCRIPT. */
static void test_no_load(void) {
    state s;
    result x;
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.no_load = 1;
    redisContext *rc = th_redis();
    freeReplyObject(redisCommand(rc, "FUNCTION DELETE sluice"));
    redisFree(rc);
    sluice_aconn *c = open_url(th_redis_url(), &o, &s, 1);
    CHECK_OK(fcall_version(c, &x), sluice_aconn_errstr(c));
    WAIT(x.calls == 1);
    CHECK_EQ(x.status, SLUICE_ENOSCRIPT);
    CHECK_EQ(x.type, REDIS_REPLY_ERROR);
    close_conn(c);
    /* an ordinary connection puts the library back while connecting */
    c = open_url(th_redis_url(), NULL, &s, 1);
    CHECK_OK(fcall_version(c, &x), sluice_aconn_errstr(c));
    WAIT(x.calls == 1);
    check_version(&x);
    close_conn(c);
}

/* The hiredis libuv adapter bug: a refused connect must be reported, and soon. */
static void test_refused(void) {
    char u[64];
    state s;
    result x;
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.connect_timeout_ms = 3000;
    snprintf(u, sizeof(u), "redis://127.0.0.1:%d", th_free_port());
    uint64_t t0 = uv_hrtime();
    sluice_aconn *c = open_url(u, &o, &s, 0);
    WAIT(s.lost >= 1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    CHECK_EQ(s.last_status, SLUICE_ECONN);
    CHECK(ms < 3000);
    CHECK(strstr(sluice_aconn_errstr(c), "refused") != NULL);
    CHECK_EQ(s.ready, 0);
    CHECK_EQ(cmd(c, "PING", NULL, NULL, 0, &x), SLUICE_ECONN);
    WAIT(s.lost >= 2); /* keeps retrying */
    close_conn(c);
    CHECK_EQ(x.calls, 0);

    /* a unix socket that is not there fails at once, reported from the loop */
    snprintf(u, sizeof(u), "unix:///nonexistent/sluice-%d.sock", (int)getpid());
    c = open_url(u, &o, &s, 0);
    CHECK_EQ(s.lost, 0);
    WAIT(s.lost >= 1);
    CHECK_EQ(s.last_status, SLUICE_ECONN);
    CHECK(strstr(sluice_aconn_errstr(c), "No such file") != NULL);
    close_conn(c);
}

/* A listening socket on a free loopback port (its address in *a) that never accepts. */
static int listen_loopback(int backlog, struct sockaddr_in *a) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    socklen_t len = sizeof(*a);
    *a = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = 0};
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(bind(lfd, (struct sockaddr *)a, sizeof(*a)), 0);
    CHECK_EQ(getsockname(lfd, (struct sockaddr *)a, &len), 0);
    CHECK_EQ(listen(lfd, backlog), 0);
    return lfd;
}

/* A server that never completes the TCP handshake (accept queue full): ETIMEDOUT in time. */
static void test_connect_timeout(void) {
    struct sockaddr_in a;
    int lfd = listen_loopback(0, &a);
    int fill[2];
    for (int i = 0; i < 2; i++) { /* fill the accept queue; later SYNs are dropped */
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fill[i], (struct sockaddr *)&a, sizeof(a));
    }
    run_for(50);
    char u[64];
    state s;
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.connect_timeout_ms = 300;
    snprintf(u, sizeof(u), "redis://127.0.0.1:%d", ntohs(a.sin_port));
    uint64_t t0 = uv_hrtime();
    sluice_aconn *c = open_url(u, &o, &s, 0);
    WAIT(s.lost >= 1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    CHECK_EQ(s.last_status, SLUICE_ETIMEDOUT);
    CHECK(ms >= 250 && ms < 2000);
    CHECK(strstr(sluice_aconn_errstr(c), "300 ms") != NULL);
    close_conn(c);
    for (int i = 0; i < 2; i++) {
        close(fill[i]);
    }
    close(lfd);
}

/* A deadline passing: ETIMEDOUT, the connection is dropped and comes back by itself. */
static void test_deadline(void) {
    state s;
    result slow, behind, x;
    sluice_aconn *c = open_url(th_redis_url(), NULL, &s, 1);
    CHECK_OK(cmd(c, "DEBUG", "SLEEP", "0.3", 100, &slow), sluice_aconn_errstr(c));
    CHECK_OK(cmd(c, "PING", NULL, NULL, 0, &behind), sluice_aconn_errstr(c));
    uint64_t t0 = uv_hrtime();
    WAIT(slow.calls == 1 && behind.calls == 1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    CHECK_EQ(slow.status, SLUICE_ETIMEDOUT);
    CHECK_EQ(slow.sent, 1);
    CHECK(ms >= 90); /* not before its deadline */
    CHECK_EQ(behind.status, SLUICE_ECONN);
    CHECK_EQ(behind.sent, 1);
    CHECK_EQ(s.lost, 1);
    CHECK_EQ(s.last_status, SLUICE_ETIMEDOUT);
    CHECK(!sluice_aconn_ready(c));
    WAIT(s.ready == 2);
    CHECK_OK(roundtrip(c, "PING", NULL, NULL, &x), sluice_aconn_errstr(c));
    CHECK_STREQ(x.str, "PONG");
    run_for(50);
    CHECK_EQ(slow.calls, 1);
    CHECK_EQ(behind.calls, 1);
    close_conn(c);
}

/* CLIENT KILL: the in-flight call fails with ECONN (it was sent), then the link comes back. */
static void test_client_kill(void) {
    state s;
    result id, blocked, x;
    char key[64], idstr[32];
    th_queue(key, sizeof(key), "aconn-blpop");
    sluice_aconn *c = open_url(th_redis_url(), NULL, &s, 1);
    CHECK_OK(roundtrip(c, "CLIENT", "ID", NULL, &id), sluice_aconn_errstr(c));
    CHECK_EQ(id.type, REDIS_REPLY_INTEGER);
    CHECK_OK(cmd(c, "BLPOP", key, "5", 10000, &blocked), sluice_aconn_errstr(c));
    run_for(100);
    CHECK_EQ(blocked.calls, 0);
    redisContext *rc = th_redis();
    snprintf(idstr, sizeof(idstr), "%lld", id.integer);
    CHECK_EQ(th_int(rc, "CLIENT KILL ID %s", idstr), 1);
    WAIT(blocked.calls == 1);
    CHECK_EQ(blocked.status, SLUICE_ECONN);
    CHECK_EQ(blocked.sent, 1);
    CHECK_EQ(s.lost, 1);
    CHECK_EQ(s.last_status, SLUICE_ECONN);
    WAIT(s.ready == 2);
    CHECK_OK(roundtrip(c, "PING", NULL, NULL, &x), sluice_aconn_errstr(c));
    CHECK_OK(roundtrip(c, "CLIENT", "ID", NULL, &x), sluice_aconn_errstr(c));
    CHECK(x.integer != id.integer);
    redisFree(rc);
    close_conn(c);
    CHECK_EQ(blocked.calls, 1);
}

/* close with calls pending: each gets ECANCELED exactly once; unwritten ones sent=0. */
static void test_close_pending(void) {
    state s;
    result x[3];
    int closed = 0;
    sluice_aconn *c = open_url(th_redis_url(), NULL, &s, 1);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(cmd(c, "PING", NULL, NULL, 0, &x[i]), sluice_aconn_errstr(c));
    }
    sluice_aconn_close(c, on_closed, &closed);
    WAIT(closed == 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(x[i].calls, 1);
        CHECK_EQ(x[i].status, SLUICE_ECANCELED);
        CHECK_EQ(x[i].sent, 0);
    }
    CHECK_EQ(s.lost, 0);
}

typedef struct closer {
    result first;
    result rest[4];
    int submit_after_close;
    int closed;
} closer;

static void on_first_close(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    closer *k = arg;
    on_result(c, status, sent, r, &k->first);
    sluice_aconn_close(c, on_closed, &k->closed);
    sluice_aconn_close(c, on_closed, &k->closed); /* a second close is ignored */
    const char *argv[] = {"PING"};
    k->submit_after_close = sluice_aconn_command(c, 1, argv, NULL, 0, on_result, &k->first);
}

/* close from inside a reply callback with more replies pending. */
static void test_close_in_callback(void) {
    state s;
    static closer k;
    sluice_aconn *c = open_url(th_redis_url(), NULL, &s, 1);
    const char *argv[] = {"PING"};
    CHECK_OK(sluice_aconn_command(c, 1, argv, NULL, 0, on_first_close, &k), "");
    for (int i = 0; i < 4; i++) {
        CHECK_OK(cmd(c, "PING", NULL, NULL, 0, &k.rest[i]), sluice_aconn_errstr(c));
    }
    WAIT(k.closed == 1);
    CHECK_EQ(k.first.calls, 1);
    CHECK_EQ(k.first.status, 0);
    CHECK_EQ(k.submit_after_close, SLUICE_ECONN);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(k.rest[i].calls, 1);
        CHECK_EQ(k.rest[i].status, SLUICE_ECANCELED);
    }
    run_for(20);
    CHECK_EQ(k.closed, 1);
    CHECK_EQ(s.lost, 0);
}

/* ACL user: the right password works, a wrong one is EAUTH without the password in errstr. */
static void test_auth(void) {
    char user[64], u[400];
    const char *base = th_redis_url() + strlen("redis://");
    redisContext *rc = th_redis();
    snprintf(user, sizeof(user), "sluicetest_%d", (int)getpid());
    redisReply *r = redisCommand(rc, "ACL SETUSER %s on >pw ~* +@all", user);
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);

    state s;
    result x;
    snprintf(u, sizeof(u), "redis://%s:pw@%s", user, base);
    sluice_aconn *c = open_url(u, NULL, &s, 1);
    CHECK_OK(roundtrip(c, "ACL", "WHOAMI", NULL, &x), sluice_aconn_errstr(c));
    CHECK_STREQ(x.str, user);
    close_conn(c);

    snprintf(u, sizeof(u), "redis://%s:wrong-secret@%s", user, base);
    c = open_url(u, NULL, &s, 0);
    WAIT(s.lost >= 1);
    CHECK_EQ(s.last_status, SLUICE_EAUTH);
    CHECK_EQ(s.ready, 0);
    const char *e = sluice_aconn_errstr(c);
    CHECK(strstr(e, "WRONGPASS") != NULL);
    CHECK(strstr(e, ":***@") != NULL);
    CHECK(strstr(e, "wrong-secret") == NULL);
    run_for(1000); /* backoff from 100 ms doubling: a handful of attempts, not a storm */
    CHECK(s.lost >= 2 && s.lost <= 8);
    close_conn(c);

    r = redisCommand(rc, "ACL DELUSER %s", user);
    CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);
    redisFree(rc);
}

/* `test_aconn --cluster URL QUEUE OTHER`, run by test_cluster_async.sh on a Redis Cluster of its
 * own (QUEUE's and OTHER's slots on two primaries): a connection serving QUEUE, given a key of
 * OTHER's slot, fails that call with EINVAL long before its deadline (the MOVED is not followed:
 * a connection sent from node to node would loop until then), stays up in QUEUE's slot and
 * answers the next call there. */
static void test_cluster_foreign_slot(const char *u, const char *queue, const char *other) {
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.queue = queue;
    o.no_load = 1;
    o.command_timeout_ms = 60000; /* "at once" below: well within it */
    state s;
    sluice_aconn *c = open_url(u, &o, &s, 1);
    char key[SLUICE_QUEUE_NAME_MAX + 32];
    snprintf(key, sizeof(key), "sluice:{%s}:meta", other);
    result x;
    uint64_t t0 = uv_now(&loop);
    CHECK_EQ(roundtrip(c, "HGET", key, "capacity", &x), SLUICE_EINVAL);
    CHECK(uv_now(&loop) - t0 < WAIT_MS);
    CHECK_EQ(x.sent, 0);
    CHECK(strstr(sluice_aconn_errstr(c), "serves its queue's slot only") != NULL);
    CHECK_EQ(s.lost, 0);
    snprintf(key, sizeof(key), "sluice:{%s}:meta", queue);
    CHECK_OK(roundtrip(c, "HGET", key, "capacity", &x), sluice_aconn_errstr(c));
    close_conn(c);
}

/* redis+sentinel:// with sentinels that do not answer: one that accepts and stays silent (the
 * question bounded by the connect timeout), one refused, the fixture's server (no SENTINEL
 * command); the attempt fails naming each, and the connection closes cleanly right after it
 * was made, while a question is under way, and after a failed round. */
static void test_sentinel_unanswered(void) {
    struct sockaddr_in a;
    int lfd = listen_loopback(16, &a); /* connects complete; nothing is ever read */
    sluice_url fx;
    char err[256], u[512];
    CHECK_OK(sluice_url_parse(&fx, th_redis_url(), err, sizeof(err)), err);
    snprintf(u, sizeof(u), "redis+sentinel://127.0.0.1:%d,127.0.0.1:%d,%s:%d/m", ntohs(a.sin_port),
             th_free_port(), fx.host, fx.port);
    state s;
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.connect_timeout_ms = 300;
    close_conn(open_url(u, &o, &s, 0)); /* before its first attempt */
    sluice_aconn *c = open_url(u, &o, &s, 0);
    run_for(100); /* the silent sentinel is being asked */
    CHECK_EQ(s.lost, 0);
    close_conn(c);
    uint64_t t0 = uv_hrtime();
    c = open_url(u, &o, &s, 0);
    WAIT(s.lost >= 1);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    CHECK_EQ(s.last_status, SLUICE_ECONN);
    CHECK(ms >= 250 && ms < 3000);
    const char *e = sluice_aconn_errstr(c);
    CHECK(strstr(e, "no sentinel named the primary for master 'm'") != NULL);
    CHECK(strstr(e, "no answer within 300 ms") != NULL);
    CHECK(strstr(e, "refused") != NULL);
    CHECK(strstr(e, "SENTINEL GET-MASTER-ADDR-BY-NAME: ") != NULL);
    CHECK_EQ(s.ready, 0);
    close_conn(c);
    close(lfd);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* hiredis writes with write(2) */
    CHECK_EQ(uv_loop_init(&loop), 0);
    CHECK_EQ(uv_timer_init(&loop, &watchdog), 0);
    if (argc == 5 && strcmp(argv[1], "--cluster") == 0) {
        test_cluster_foreign_slot(argv[2], argv[3], argv[4]);
        uv_close((uv_handle_t *)&watchdog, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        CHECK_EQ(uv_loop_close(&loop), 0);
        printf("test_aconn --cluster: ok\n");
        return 0;
    }
    test_ping(th_redis_url());
    test_ping(th_redis_unix_url());
    test_select();
    test_pipeline();
    test_fcall_reload();
    test_force_eval();
    test_no_load();
    test_refused();
    test_connect_timeout();
    test_deadline();
    test_client_kill();
    test_close_pending();
    test_close_in_callback();
    test_auth();
    test_sentinel_unanswered();
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    printf("test_aconn: ok\n");
    return 0;
}
