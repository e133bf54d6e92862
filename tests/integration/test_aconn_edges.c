/* SPDX-License-Identifier: MIT */
/*
 * test_aconn_edges.c - the async connection's transport at its edges, against a redis-server of
 * its own (killed, restarted, limited): multi-MB requests and replies (partial reads and
 * writes), a server paused while megabytes wait to be written, thousands of calls in flight when
 * the connection is killed (each answered exactly once, and none reported "not sent" that ran),
 * a server killed with SIGKILL mid-pipeline and restarted, maxclients reached (the unasked error
 * reply), a peer that closes right after accepting, the connection closed from its state
 * callback, and sluice_aconn_command_held: a call made while the server is down is sent once it
 * is up again (held calls in their order, each exactly once), a held call whose deadline passes
 * is answered ETIMEDOUT and never sent, one made after the link was lost reaches the restarted
 * server, closing answers the held calls ECANCELED (the sanitizer build checks they are freed),
 * and the bytes held are bounded.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "sluice/redis.h"
#include "sluice/status.h"

#include "uvwait.h"

static int port;
static pid_t server;
static char url[300];
static char sock[200];        /* the server's unix socket */
static const char *ca = NULL; /* --tls: the CA of a rediss:// URL */

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

static void server_start(void) {
    char p[16];
    snprintf(p, sizeof(p), "%d", port);
    server = fork();
    CHECK(server >= 0);
    if (server == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execlp("redis-server", "redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--unixsocket", sock, "--enable-debug-command", "yes",
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) { /* up to 10 s */
        redisContext *rc = direct();
        if (rc != NULL) {
            redisFree(rc);
            return;
        }
        usleep(50000);
    }
    CHECK(!"redis-server did not start");
}

static void server_kill(void) {
    if (server <= 0) {
        return;
    }
    kill(server, SIGKILL);
    waitpid(server, NULL, 0);
    server = 0;
}

typedef struct state {
    int ready, lost, last_status;
    int close_on_lost;
    int closed;
} state;

static void on_closed(void *arg) {
    (*(int *)arg)++;
}

static void on_state(sluice_aconn *c, int ready, int status, void *arg) {
    state *s = arg;
    if (ready) {
        s->ready++;
        return;
    }
    s->lost++;
    s->last_status = status;
    if (s->close_on_lost) {
        sluice_aconn_close(c, on_closed, &s->closed);
    }
}

static sluice_aconn *open_conn(state *s, int wait) {
    sluice_url u;
    char err[256];
    sluice_conn_options o;
    sluice_conn_options_init(&o);
    o.no_load = 1;
    o.command_timeout_ms = 15000;
    o.connect_timeout_ms = 2000;
    o.tls_ca_file = ca;
    CHECK_OK(sluice_url_parse(&u, url, err, sizeof(err)), err);
    memset(s, 0, sizeof(*s));
    sluice_aconn *c = sluice_aconn_new(&loop, &u, &o, on_state, s);
    CHECK(c != NULL);
    if (wait) {
        WAIT(s->ready == 1);
    }
    return c;
}

static void close_conn(sluice_aconn *c) {
    int closed = 0;
    sluice_aconn_close(c, on_closed, &closed);
    WAIT(closed == 1);
}

/* ---- big requests and replies ---- */

typedef struct big {
    int calls, status;
    size_t len;
    int intact;
} big;

static void on_big(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    (void)sent;
    big *b = arg;
    b->calls++;
    b->status = status;
    b->len = r != NULL && r->type == REDIS_REPLY_STRING ? r->len : 0;
    b->intact = 1;
    for (size_t i = 0; i < b->len; i++) {
        if (r->str[i] != (char)('a' + i % 26)) {
            b->intact = 0;
            break;
        }
    }
}

#define BIG_LEN ((size_t)8 << 20) /* six of them stay under the 64 MB unsent cap */

static void test_big(void) {
    state s;
    sluice_aconn *c = open_conn(&s, 1);
    char *v = malloc(BIG_LEN);
    CHECK(v != NULL);
    for (size_t i = 0; i < BIG_LEN; i++) {
        v[i] = (char)('a' + i % 26);
    }
    /* the server asleep while 3 x 12 MB wait: the writes go out in parts */
    redisContext *rc = port != 0 ? direct() : NULL;
    if (rc != NULL) {
        redisAppendCommand(rc, "DEBUG SLEEP 0.3");
    }
    big b[3] = {{0}};
    big got[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        const char *argv[] = {"ECHO", v};
        size_t lens[] = {4, BIG_LEN};
        CHECK_OK(sluice_aconn_command(c, 2, argv, lens, 0, on_big, &b[i]), "");
        const char *sargv[] = {"SET", "big", v};
        size_t slens[] = {3, 3, BIG_LEN};
        CHECK_OK(sluice_aconn_command(c, 3, sargv, slens, 0, on_big, &got[i]), "");
    }
    free(v);
    WAIT(b[2].calls == 1 && got[2].calls == 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(b[i].calls, 1);
        CHECK_OK(b[i].status, sluice_aconn_errstr(c));
        CHECK(b[i].len == BIG_LEN && b[i].intact);
        CHECK_OK(got[i].status, sluice_aconn_errstr(c));
    }
    big g = {0};
    const char *argv[] = {"GET", "big"};
    CHECK_OK(sluice_aconn_command(c, 2, argv, NULL, 0, on_big, &g), "");
    WAIT(g.calls == 1);
    CHECK(g.len == BIG_LEN && g.intact);
    CHECK_EQ(s.lost, 0);
    redisFree(rc);
    close_conn(c);
}

/* ---- "not sent" means it did not run ---- */

#define UNSENT_CALLS 60
#define UNSENT_LEN   ((size_t)512 << 10)

typedef struct unsent_call {
    int calls, status, sent;
} unsent_call;

static void on_unsent(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    (void)r;
    unsent_call *u = arg;
    u->calls++;
    u->status = status;
    u->sent = sent;
}

/* 30 MB of SETs to a server asleep: part of it fills the socket buffers, the rest waits; the
 * deadline drops the link. Every call reported not sent must not have run once the server
 * woke up and read what did reach it. */
static void test_unsent(void) {
    state s;
    sluice_aconn *c = open_conn(&s, 1);
    redisContext *rc = direct();
    CHECK(rc != NULL);
    freeReplyObject(redisCommand(rc, "FLUSHALL"));
    redisAppendCommand(rc, "DEBUG SLEEP 1.5");
    for (int done = 0; !done;) {
        CHECK_EQ(redisBufferWrite(rc, &done), REDIS_OK);
    }
    run_for(100);
    char *v = malloc(UNSENT_LEN);
    CHECK(v != NULL);
    memset(v, 'v', UNSENT_LEN);
    static unsent_call u[UNSENT_CALLS];
    memset(u, 0, sizeof(u));
    for (int i = 0; i < UNSENT_CALLS; i++) {
        char key[32];
        snprintf(key, sizeof(key), "unsent:%d", i);
        const char *argv[] = {"SET", key, v};
        size_t lens[] = {3, strlen(key), UNSENT_LEN};
        CHECK_OK(sluice_aconn_command(c, 3, argv, lens, 400, on_unsent, &u[i]), "");
    }
    free(v);
    WAIT(u[UNSENT_CALLS - 1].calls == 1);
    redisReply *r = NULL;
    CHECK_EQ(redisGetReply(rc, (void **)&r), REDIS_OK); /* the sleep is over */
    freeReplyObject(r);
    int unsent = 0;
    for (int i = 0; i < UNSENT_CALLS; i++) {
        CHECK_EQ(u[i].calls, 1);
        CHECK_EQ(u[i].status, SLUICE_ETIMEDOUT);
        if (!u[i].sent) {
            unsent++;
            char key[32];
            snprintf(key, sizeof(key), "unsent:%d", i);
            CHECK_EQ(th_int(rc, "EXISTS %s", key), 0);
        }
    }
    CHECK(unsent > 0);
    redisFree(rc);
    close_conn(c);
}

/* ---- thousands in flight when the link is cut ---- */

#define FLIGHT 20000

typedef struct flight {
    int calls[FLIGHT];
    int ok, sent_failed, unsent, after; /* after: answered after an unsent one (out of order) */
    int n;                              /* answers */
    int kill_at;                        /* answers before the cut */
    int how;                            /* 0: CLIENT KILL, 1: SIGKILL, 2: close */
    int closed;
    int killed;
    long long id;
} flight;

typedef struct call {
    flight *f;
    int i;
} call;

static call calls[FLIGHT];

static void on_flight(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)r;
    call *k = arg;
    flight *f = k->f;
    f->calls[k->i]++;
    f->n++;
    if (status == 0) {
        f->ok++;
        if (f->unsent > 0) {
            f->after++;
        }
    } else if (sent) {
        f->sent_failed++;
    } else {
        f->unsent++;
    }
    if (f->n == f->kill_at && !f->killed) {
        f->killed = 1;
        if (f->how == 2) {
            sluice_aconn_close(c, on_closed, &f->closed);
        } else if (f->how == 1) {
            server_kill();
        } else {
            redisContext *rc = direct();
            CHECK(rc != NULL);
            redisReply *x = redisCommand(rc, "CLIENT KILL ID %lld", f->id);
            CHECK(x != NULL && x->type == REDIS_REPLY_INTEGER && x->integer == 1);
            freeReplyObject(x);
            redisFree(rc);
        }
    }
}

static void on_id(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    (void)c;
    (void)sent;
    CHECK_EQ(status, 0);
    ((flight *)arg)->id = r->integer;
}

static void fly(sluice_aconn *c, flight *f) {
    const char *idv[] = {"CLIENT", "ID"};
    CHECK_OK(sluice_aconn_command(c, 2, idv, NULL, 0, on_id, f), "");
    WAIT(f->id != 0);
    for (int i = 0; i < FLIGHT; i++) {
        calls[i] = (call){f, i};
        const char *incr[] = {"INCR", "flight"};
        CHECK_OK(sluice_aconn_command(c, 2, incr, NULL, 0, on_flight, &calls[i]), "");
    }
}

static void check_flight(const flight *f) {
    for (int i = 0; i < FLIGHT; i++) {
        CHECK_EQ(f->calls[i], 1);
    }
    CHECK_EQ(f->ok + f->sent_failed + f->unsent, FLIGHT);
    CHECK_EQ(f->after, 0);
    CHECK(f->ok >= f->kill_at);
}

static void test_client_kill_flight(void) {
    static flight f;
    memset(&f, 0, sizeof(f));
    f.kill_at = 300;
    state s;
    redisContext *rc = direct();
    CHECK(rc != NULL);
    freeReplyObject(redisCommand(rc, "DEL flight"));
    sluice_aconn *c = open_conn(&s, 1);
    fly(c, &f);
    WAIT(f.n == FLIGHT);
    check_flight(&f);
    redisReply *r = redisCommand(rc, "GET flight");
    CHECK(r != NULL && r->type == REDIS_REPLY_STRING);
    long long ran = atoll(r->str);
    freeReplyObject(r);
    /* what ran was answered ok or reported as maybe sent */
    CHECK(ran >= f.ok && ran <= f.ok + f.sent_failed);
    WAIT(s.lost >= 1); /* reported on its own, maybe after the calls failed */
    CHECK_EQ(s.lost, 1);
    WAIT(s.ready == 2);
    redisFree(rc);
    close_conn(c);
}

static void test_sigkill_flight(void) {
    static flight f;
    memset(&f, 0, sizeof(f));
    f.kill_at = 300;
    f.how = 1;
    state s;
    sluice_aconn *c = open_conn(&s, 1);
    fly(c, &f);
    WAIT(f.n == FLIGHT);
    check_flight(&f);
    WAIT(s.lost >= 1); /* reported on its own, maybe after the calls failed */
    CHECK_EQ(s.lost, 1);
    server_start();
    WAIT(s.ready == 2);
    close_conn(c);
}

/* closed from inside a reply callback with thousands in flight: the rest ECANCELED, once */
static void test_close_in_flight(void) {
    static flight f;
    memset(&f, 0, sizeof(f));
    f.kill_at = 300;
    f.how = 2;
    state s;
    sluice_aconn *c = open_conn(&s, 1);
    fly(c, &f);
    WAIT(f.closed == 1);
    CHECK_EQ(f.n, FLIGHT);
    check_flight(&f);
    CHECK_EQ(f.sent_failed + f.unsent, FLIGHT - f.ok);
    CHECK_EQ(s.lost, 0);
}

/* ---- closed from the state callback with calls in flight ---- */

static void test_close_from_state(void) {
    static flight f;
    memset(&f, 0, sizeof(f));
    f.kill_at = 100;
    state s;
    sluice_aconn *c = open_conn(&s, 1);
    s.close_on_lost = 1;
    fly(c, &f);
    WAIT(s.closed == 1);
    CHECK_EQ(f.n, FLIGHT);
    check_flight(&f);
    WAIT(s.lost >= 1); /* reported on its own, maybe after the calls failed */
    CHECK_EQ(s.lost, 1);
    run_for(50);
    CHECK_EQ(s.closed, 1);
}

/* ---- maxclients: the server's unasked error ---- */

static void config_set(redisContext *rc, const char *name, const char *value) {
    redisReply *r = redisCommand(rc, "CONFIG SET %s %s", name, value);
    CHECK(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
}

/* The server refuses a connection over maxclients with an error it sends unasked, then closes:
 * that error answers the handshake's first step (AUTH, CLUSTER MYID), and must be reported as
 * what it is - not swallowed as a refused CLUSTER MYID, nor taken for bad credentials. */
static void test_maxclients(const char *password) {
    redisContext *rc = direct();
    CHECK(rc != NULL);
    char saved[sizeof(url)];
    snprintf(saved, sizeof(saved), "%s", url);
    if (password != NULL) {
        config_set(rc, "requirepass", password);
        snprintf(url, sizeof(url), "redis://:%s@127.0.0.1:%d", password, port);
    }
    config_set(rc, "maxclients", "1");
    state s;
    sluice_aconn *c = open_conn(&s, 0);
    WAIT(s.lost >= 1);
    CHECK_EQ(s.last_status, SLUICE_ECONN);
    CHECK(strstr(sluice_aconn_errstr(c), "max number of clients") != NULL);
    config_set(rc, "maxclients", "100");
    WAIT(s.ready == 1);
    close_conn(c);
    if (password != NULL) {
        config_set(rc, "requirepass", "");
        snprintf(url, sizeof(url), "%s", saved);
    }
    redisFree(rc);
}

/* ---- a peer that closes right after accepting ---- */

static uv_tcp_t listener;
static int accepted;

static void on_peer_closed(uv_handle_t *h) {
    free(h);
}

static void on_accept(uv_stream_t *srv, int status) {
    CHECK_EQ(status, 0);
    uv_tcp_t *peer = malloc(sizeof(*peer));
    CHECK(peer != NULL);
    uv_tcp_init(&loop, peer);
    CHECK_EQ(uv_accept(srv, (uv_stream_t *)peer), 0);
    accepted++;
    uv_close((uv_handle_t *)peer, on_peer_closed);
}

static void test_close_after_accept(void) {
    struct sockaddr_in a;
    int p = th_free_port();
    uv_ip4_addr("127.0.0.1", p, &a);
    CHECK_EQ(uv_tcp_init(&loop, &listener), 0);
    CHECK_EQ(uv_tcp_bind(&listener, (struct sockaddr *)&a, 0), 0);
    CHECK_EQ(uv_listen((uv_stream_t *)&listener, 16, on_accept), 0);
    char saved[sizeof(url)];
    snprintf(saved, sizeof(saved), "%s", url);
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", p);
    state s;
    sluice_aconn *c = open_conn(&s, 0);
    WAIT(s.lost >= 2);
    CHECK_EQ(s.ready, 0);
    CHECK_EQ(s.last_status, SLUICE_ECONN);
    CHECK(accepted >= 2);
    close_conn(c);
    uv_close((uv_handle_t *)&listener, NULL);
    snprintf(url, sizeof(url), "%s", saved);
}

/* ---- calls held while the connection is down (sluice_aconn_command_held) ---- */

/* One held call's answers. */
typedef struct answer {
    int calls, status, sent;
    long long integer;
    char err[256];
} answer;

static void on_answer(sluice_aconn *c, int status, int sent, redisReply *r, void *arg) {
    answer *k = arg;
    k->calls++;
    k->status = status;
    k->sent = sent;
    k->integer = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    snprintf(k->err, sizeof(k->err), "%s", sluice_aconn_errstr(c));
}

static int held(sluice_aconn *c, const char *cmd, const char *key, const char *arg, int ms,
                answer *k) {
    const char *argv[] = {cmd, key, arg};
    return sluice_aconn_command_held(c, arg != NULL ? 3 : 2, argv, NULL, ms, on_answer, k);
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
    server_kill();
    state s;
    sluice_aconn *c = open_conn(&s, 0);
    answer late = {0}, first = {0}, second = {0}, count = {0};
    const char *ping[] = {"PING"};
    CHECK_EQ(sluice_aconn_command(c, 1, ping, NULL, 0, on_answer, &late), SLUICE_ECONN);
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
    server_start();
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
    server_kill(); /* the one the test before started is up: ours from here */
    server_start();
    state s;
    sluice_aconn *c = open_conn(&s, 1);
    server_kill();
    WAIT(s.lost >= 1);
    answer k = {0};
    CHECK_OK(held(c, "INCR", "held:again", NULL, 20000, &k), sluice_aconn_errstr(c));
    run_for(200);
    CHECK_EQ(k.calls, 0); /* still held: no server */
    server_start();
    WAIT(k.calls == 1);
    run_for(300);
    CHECK_EQ(k.calls, 1);
    CHECK_EQ(k.status, 0);
    CHECK_EQ(k.integer, 1);
    CHECK(s.ready >= 2);
    close_conn(c);
}

/* Closed with calls held: each answered ECANCELED, not sent. */
static void test_held_close(void) {
    server_kill();
    state s;
    sluice_aconn *c = open_conn(&s, 0);
    answer a = {0}, b = {0};
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
    sluice_aconn *c = open_conn(&s, 0);
    size_t n = (size_t)40 << 20;
    char *blob = malloc(n + 1);
    CHECK(blob != NULL);
    memset(blob, 'x', n);
    blob[n] = '\0';
    answer a = {0}, b = {0};
    CHECK_OK(held(c, "SET", "held:blob", blob, 20000, &a), sluice_aconn_errstr(c));
    CHECK_EQ(held(c, "SET", "held:big2", blob, 20000, &b), SLUICE_ETOOBIG);
    CHECK(strstr(sluice_aconn_errstr(c), "sent once connected") != NULL);
    free(blob);
    close_conn(c);
    CHECK_EQ(a.calls, 1);
    CHECK_EQ(a.status, SLUICE_ECANCELED);
    CHECK_EQ(b.calls, 0);
}

static void done(void) {
    uv_close((uv_handle_t *)&watchdog, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    CHECK_EQ(uv_loop_init(&loop), 0);
    CHECK_EQ(uv_timer_init(&loop, &watchdog), 0);
    if (argc == 4 && strcmp(argv[1], "--tls") == 0) { /* run by test_tls_async.sh */
        snprintf(url, sizeof(url), "%s", argv[2]);
        ca = argv[3];
        test_big();
        test_close_in_flight();
        done();
        printf("test_aconn_edges --tls: ok\n");
        return 0;
    }
    port = th_free_port();
    const char *tmp = getenv("SLUICE_TEST_TMP");
    snprintf(sock, sizeof(sock), "%s/aconn-edges-%d.sock", tmp != NULL ? tmp : "/tmp",
             (int)getpid());
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    server_start();
    atexit(server_kill); /* a failed CHECK exits: no server left behind */
    test_big();
    snprintf(url, sizeof(url), "unix://%s", sock);
    test_big();
    snprintf(url, sizeof(url), "redis://127.0.0.1:%d", port);
    test_unsent();
    test_client_kill_flight();
    test_close_in_flight();
    test_close_from_state();
    test_maxclients(NULL);
    test_maxclients("pw");
    test_close_after_accept();
    test_sigkill_flight();
    test_held_until_up();
    test_held_across_loss();
    test_held_close();
    test_held_bound();
    server_kill();
    done();
    printf("test_aconn_edges: ok\n");
    return 0;
}
