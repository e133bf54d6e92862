/* SPDX-License-Identifier: MIT */
/*
 * test_aconn_held.c - sluice_aconn_command_held against a redis-server of its own that is
 * started late and killed: a call made while the connection is down is sent once it is ready
 * (held calls in their order, each exactly once); a held call whose deadline passes is answered
 * ETIMEDOUT, not sent, and never sent later; a held call survives a lost link; closing answers
 * the held calls ECANCELED (the sanitizer build checks they are freed); held bytes are bounded.
 */
#include <signal.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "sluice/redis.h"
#include "sluice/status.h"

#include "uvwait.h"

static int port;
static char url[64];
static char pidfile[256];

/* A blocking connection to our server, or NULL while it is not up. */
static redisContext *direct(void) {
    struct timeval tv = {1, 0};
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (rc == NULL || rc->err) {
        redisFree(rc);
        return NULL;
    }
    return rc;
}

/* Waits (at most 10 s) until our server answers (`up`) or refuses connections. */
static void await_server(int up) {
    for (int i = 0; i < 200; i++) {
        redisContext *rc = direct();
        redisFree(rc);
        if ((rc != NULL) == up) {
            return;
        }
        usleep(50000);
    }
    CHECK(!"redis-server did not start or stop in time");
}

static void server_up(void) {
    char cmd[600];
    snprintf(cmd, sizeof(cmd),
             "redis-server --port %d --bind 127.0.0.1 --save '' --appendonly no --daemonize yes "
             "--pidfile %s --logfile /dev/null",
             port, pidfile);
    CHECK_EQ(system(cmd), 0);
    await_server(1);
}

static void server_down(void) {
    FILE *f = fopen(pidfile, "r");
    int pid = 0;
    if (f == NULL) {
        return;
    }
    if (fscanf(f, "%d", &pid) == 1 && pid > 0) {
        kill(pid, SIGKILL);
        await_server(0);
    }
    fclose(f);
    unlink(pidfile);
}

typedef struct state {
    int ready, lost;
} state;

static void on_state(sluice_aconn *c, int ready, int status, void *arg) {
    (void)c, (void)status;
    state *s = arg;
    if (ready) {
        s->ready++;
    } else {
        s->lost++;
    }
}

static void on_closed(void *arg) {
    (*(int *)arg)++;
}

static sluice_aconn *open_conn(state *s) {
    sluice_url u;
    char err[256];
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.no_load = 1;
    o.connect_timeout_ms = 1000;
    o.backoff_max_ms = 300; /* back soon after the server is */
    CHECK_OK(sluice_url_parse(&u, url, err, sizeof(err)), err);
    memset(s, 0, sizeof(*s));
    sluice_aconn *c = sluice_aconn_new(&loop, &u, &o, on_state, s);
    CHECK(c != NULL);
    return c;
}

static void close_conn(sluice_aconn *c) {
    int closed = 0;
    sluice_aconn_close(c, on_closed, &closed);
    WAIT(closed == 1);
}

/* One call's answers. */
typedef struct call {
    int calls, status, sent;
    long long integer;
    char err[256];
} call;

static void on_call(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    call *k = arg;
    k->calls++;
    k->status = status;
    k->sent = sent;
    k->integer = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    snprintf(k->err, sizeof(k->err), "%s", sluice_aconn_errstr(c));
}

static int held(sluice_aconn *c, const char *cmd, const char *key, const char *arg, int ms,
                call *k) {
    const char *argv[] = {cmd, key, arg};
    return sluice_aconn_command_held(c, arg != NULL ? 3 : 2, argv, NULL, ms, on_call, k);
}

static char *get(redisContext *rc, const char *fmt, const char *key) {
    redisReply *r = redisCommand(rc, fmt, key);
    CHECK(r != NULL);
    char *s = strdup(r->type == REDIS_REPLY_STRING ? r->str : "(nil)");
    freeReplyObject(r);
    return s;
}

/* Made while nothing listens: sent when the server is up, in order, once; the one whose
 * deadline passed first never. */
static void test_held_until_up(void) {
    state s;
    sluice_aconn *c = open_conn(&s);
    call late = {0}, first = {0}, second = {0}, count = {0};
    const char *ping[] = {"PING"};
    CHECK_EQ(sluice_aconn_command(c, 1, ping, NULL, 0, on_call, &late), SLUICE_ECONN);
    CHECK_OK(held(c, "INCR", "held:late", NULL, 200, &late), sluice_aconn_errstr(c));
    CHECK_OK(held(c, "RPUSH", "held:order", "first", 20000, &first), sluice_aconn_errstr(c));
    CHECK_OK(held(c, "RPUSH", "held:order", "second", 20000, &second), sluice_aconn_errstr(c));
    CHECK_OK(held(c, "INCR", "held:count", NULL, 20000, &count), sluice_aconn_errstr(c));
    CHECK_EQ(sluice_aconn_pending(c), 4);
    WAIT(late.calls == 1);
    CHECK_EQ(late.status, SLUICE_ETIMEDOUT);
    CHECK_EQ(late.sent, 0);
    CHECK(strstr(late.err, "not ready in time") != NULL);
    CHECK_EQ(first.calls + second.calls + count.calls, 0);
    server_up();
    WAIT(count.calls == 1);
    run_for(300); /* nothing comes twice */
    CHECK_EQ(late.calls, 1);
    CHECK_EQ(first.calls, 1);
    CHECK_EQ(second.calls, 1);
    CHECK_EQ(count.calls, 1);
    CHECK_EQ(first.status, 0);
    CHECK_EQ(first.integer, 1);
    CHECK_EQ(second.integer, 2);
    CHECK_EQ(count.status, 0);
    CHECK_EQ(count.integer, 1);
    CHECK_EQ(sluice_aconn_pending(c), 0);
    redisContext *rc = direct();
    CHECK(rc != NULL);
    char *v = get(rc, "GET %s", "held:late");
    CHECK_STREQ(v, "(nil)"); /* past its deadline: never sent, not even once the link was up */
    free(v);
    v = get(rc, "GET %s", "held:count");
    CHECK_STREQ(v, "1");
    free(v);
    v = get(rc, "LINDEX %s 0", "held:order");
    CHECK_STREQ(v, "first");
    free(v);
    redisFree(rc);
    close_conn(c);
}

/* Made after the link was lost: sent to the restarted server, once. */
static void test_held_across_loss(void) {
    state s;
    sluice_aconn *c = open_conn(&s);
    WAIT(s.ready == 1);
    server_down();
    WAIT(s.lost >= 1);
    call k = {0};
    CHECK_OK(held(c, "INCR", "held:again", NULL, 20000, &k), sluice_aconn_errstr(c));
    run_for(200);
    CHECK_EQ(k.calls, 0); /* still held: no server */
    server_up();
    WAIT(k.calls == 1);
    run_for(300);
    CHECK_EQ(k.calls, 1);
    CHECK_EQ(k.status, 0);
    CHECK_EQ(k.integer, 1);
    CHECK(s.ready >= 2);
    close_conn(c);
}

/* Closed with calls held: each answered ECANCELED, not sent; a call after close is refused. */
static void test_held_close(void) {
    server_down();
    state s;
    sluice_aconn *c = open_conn(&s);
    call a = {0}, b = {0};
    CHECK_OK(held(c, "INCR", "held:closed", NULL, 20000, &a), sluice_aconn_errstr(c));
    CHECK_OK(held(c, "INCR", "held:closed", NULL, 0, &b), sluice_aconn_errstr(c));
    int closed = 0;
    sluice_aconn_close(c, on_closed, &closed);
    WAIT(closed == 1);
    CHECK_EQ(a.calls, 1);
    CHECK_EQ(a.status, SLUICE_ECANCELED);
    CHECK_EQ(a.sent, 0);
    CHECK_EQ(b.calls, 1);
    CHECK_EQ(b.status, SLUICE_ECANCELED);
}

/* The bytes held are bounded (64 MiB, as the bytes not yet written): past it ETOOBIG. */
static void test_held_bound(void) {
    state s;
    sluice_aconn *c = open_conn(&s);
    size_t n = (size_t)40 << 20;
    char *big = malloc(n + 1);
    CHECK(big != NULL);
    memset(big, 'x', n);
    big[n] = '\0';
    call a = {0}, b = {0};
    CHECK_OK(held(c, "SET", "held:big", big, 20000, &a), sluice_aconn_errstr(c));
    CHECK_EQ(held(c, "SET", "held:big2", big, 20000, &b), SLUICE_ETOOBIG);
    CHECK(strstr(sluice_aconn_errstr(c), "sent once connected") != NULL);
    free(big);
    close_conn(c);
    CHECK_EQ(a.calls, 1);
    CHECK_EQ(a.status, SLUICE_ECANCELED);
    CHECK_EQ(b.calls, 0);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    CHECK_EQ(uv_loop_init(&loop), 0);
    CHECK_EQ(uv_timer_init(&loop, &watchdog), 0);
    port = th_free_port();
    const char *tmp = getenv("SLUICE_TEST_TMP");
    snprintf(pidfile, sizeof(pidfile), "%s/aconn-held-%d.pid", tmp != NULL ? tmp : "/tmp",
             (int)getpid());
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    atexit(server_down); /* a failed CHECK exits: no server left behind */
    test_held_until_up();
    test_held_across_loss();
    test_held_close();
    test_held_bound();
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
    printf("test_aconn_held: ok\n");
    return 0;
}
