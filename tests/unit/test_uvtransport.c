/* SPDX-License-Identifier: MIT */
/*
 * test_uvtransport.c - the async connection's transport (uvredis_transport.c) against a stand-in
 * server on a unix socket in a temporary directory: the connect is reported, commands are
 * written in order and counted, each reply goes to the oldest request, a free asked for inside
 * a reply callback waits for its return and hands the rest NULL, the server closing or sending
 * a reply nobody asked for (a refusal of a new connection) fails the link with the reason unless
 * the owner takes such replies (a `push` hook: a subscription's messages after SUBSCRIBE's own
 * reply go there in order, the link stays up, a later request still gets its own reply, a free
 * asked for inside one waits for its return),
 * a missing socket fails the open. (TLS under the same transport: test_tls_async.sh against a real
 * server.)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <uv.h>

#include "harness.h"
#include "sluice/status.h"

#include "uvredis_transport.h"

static struct {
    int connected, status, disconnected, closed;
    int nreplies;
    long privdata[8];
    char text[8][16]; /* "" for a NULL reply */
    long free_at;     /* free the link from inside the reply to this privdata */
    int lost_status;  /* the link's status and reason when it was lost, */
    char lost_err[256];
    int append_lost; /* and what an append returned then */
    int npushed;     /* replies to no request, given to the push hook */
    char pushed[4][16];
} ev;

/* What the link says once it is lost (read in its callbacks: its memory goes after). */
static void note_lost(sluice__uvlink *l) {
    ev.lost_status = l->status;
    snprintf(ev.lost_err, sizeof(ev.lost_err), "%s", l->errstr);
    ev.append_lost = sluice__uvlink_append(l, "Y", 1, (void *)9);
}

static void on_connected(sluice__uvlink *l, int status) {
    (void)l;
    ev.connected++;
    ev.status = status;
}

static void on_reply(sluice__uvlink *l, redisReply *r, void *privdata) {
    int i = ev.nreplies++;
    CHECK(i < 8);
    ev.privdata[i] = (long)(intptr_t)privdata;
    snprintf(ev.text[i], sizeof(ev.text[i]), "%s", r != NULL ? r->str : "");
    if (r == NULL) {
        note_lost(l);
    }
    if (r != NULL && ev.free_at == (long)(intptr_t)privdata) {
        sluice__uvlink_free(l);
        CHECK(l->open); /* not yet: once this callback returns */
    }
}

static void on_disconnected(sluice__uvlink *l) {
    note_lost(l);
    ev.disconnected++;
}

static void on_closed(sluice__uvlink *l) {
    (void)l;
    ev.closed++;
}

static void on_push(sluice__uvlink *l, redisReply *r) {
    int i = ev.npushed++;
    CHECK(i < 4);
    snprintf(ev.pushed[i], sizeof(ev.pushed[i]), "%s", r->str);
    if (i == 1) {
        sluice__uvlink_free(l);
        CHECK(l->open); /* not yet: once this callback returns */
    }
}

static const sluice__uvlink_hooks hooks = {on_connected, on_reply, on_disconnected, on_closed,
                                           NULL};
static const sluice__uvlink_hooks push_hooks = {on_connected, on_reply, on_disconnected, on_closed,
                                                on_push};

static uv_loop_t loop;
static char dir[32], path[64];

/* Runs the loop until *flag >= want (2 s at most). */
static void run_until(const int *flag, int want) {
    for (int i = 0; i < 2000 && *flag < want; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    CHECK(*flag >= want);
}

static int listen_unix(void) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    CHECK(fd >= 0);
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    CHECK(listen(fd, 4) == 0);
    return fd;
}

/* A link to the stand-in server, connected; its end of the connection in *peer. */
static sluice__uvlink *connect_link(int lfd, int *peer, const sluice__uvlink_hooks *h) {
    char err[256];
    memset(&ev, 0, sizeof(ev));
    int st = 0;
    sluice__uvlink *l =
        sluice__uvlink_open(&loop, NULL, 0, path, NULL, h, NULL, &st, err, sizeof(err));
    CHECK(l != NULL);
    CHECK_EQ(l->stage, SLUICE__UVLINK_CONNECTING);
    *peer = accept(lfd, NULL, NULL);
    CHECK(*peer >= 0);
    run_until(&ev.connected, 1);
    CHECK_EQ(ev.status, 0);
    CHECK_EQ(l->stage, SLUICE__UVLINK_UP);
    return l;
}

/* Reads exactly n bytes from fd (the loop runs meanwhile, so the link writes). */
static void peer_read(int fd, char *buf, size_t n) {
    size_t got = 0;
    for (int i = 0; i < 2000 && got < n; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
        ssize_t r = recv(fd, buf + got, n - got, MSG_DONTWAIT);
        if (r > 0) {
            got += (size_t)r;
        } else {
            usleep(1000);
        }
    }
    CHECK_EQ(got, n);
}

static void peer_write(int fd, const char *s) {
    CHECK_EQ(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

static void test_order_and_free_in_callback(int lfd) {
    int peer;
    sluice__uvlink *l = connect_link(lfd, &peer, &hooks);
    CHECK_EQ(sluice__uvlink_append(l, "A", 1, (void *)1), 0);
    CHECK_EQ(sluice__uvlink_append(l, "BB", 2, (void *)2), 0);
    CHECK_EQ(sluice__uvlink_append(l, "CCC", 3, (void *)3), 0);
    CHECK_EQ(l->appended, 6);
    CHECK_EQ(sluice__uvlink_unsent(l), 6);
    char buf[8] = "";
    peer_read(peer, buf, 6);
    CHECK(memcmp(buf, "ABBCCC", 6) == 0);
    CHECK_EQ(sluice__uvlink_written(l), 6);
    CHECK_EQ(sluice__uvlink_unsent(l), 0);
    /* two replies and part of a third; the link is freed from the second's callback */
    ev.free_at = 2;
    peer_write(peer, "+one\r\n+two\r\n+thr");
    run_until(&ev.closed, 1);
    CHECK_EQ(ev.nreplies, 3);
    CHECK_EQ(ev.privdata[0], 1);
    CHECK_STREQ(ev.text[0], "one");
    CHECK_EQ(ev.privdata[1], 2);
    CHECK_STREQ(ev.text[1], "two");
    CHECK_EQ(ev.privdata[2], 3); /* handed back once, with NULL */
    CHECK_STREQ(ev.text[2], "");
    CHECK_EQ(ev.disconnected, 1);
    CHECK_EQ(ev.lost_status, 0); /* freed by its owner: no failure */
    close(peer);
}

static void test_server_closes(int lfd) {
    int peer;
    sluice__uvlink *l = connect_link(lfd, &peer, &hooks);
    CHECK_EQ(sluice__uvlink_append(l, "X", 1, (void *)7), 0);
    char c;
    peer_read(peer, &c, 1);
    close(peer);
    run_until(&ev.nreplies, 1);
    CHECK_EQ(ev.privdata[0], 7);
    CHECK_STREQ(ev.text[0], "");
    CHECK_EQ(ev.lost_status, SLUICE_ECONN);
    CHECK_STREQ(ev.lost_err, "Server closed the connection");
    CHECK_EQ(ev.append_lost, -1); /* being freed: refused */
    run_until(&ev.closed, 1);
    CHECK_EQ(ev.disconnected, 1);
}

static void test_reply_to_nothing(int lfd) {
    int peer;
    connect_link(lfd, &peer, &hooks);
    peer_write(peer, "-ERR max number of clients reached\r\n");
    run_until(&ev.disconnected, 1);
    CHECK_EQ(ev.lost_status, SLUICE_ECONN);
    CHECK_STREQ(ev.lost_err, "ERR max number of clients reached");
    CHECK_EQ(ev.nreplies, 0);
    run_until(&ev.closed, 1);
    close(peer);
}

/* With a push hook: the first reply answers the request, the ones after it are pushed in order
 * (the link stays up), a reply while a later request waits is that request's; the link is freed
 * from inside the second push, the third never seen. */
static void test_push(int lfd) {
    int peer;
    sluice__uvlink *l = connect_link(lfd, &peer, &push_hooks);
    CHECK_EQ(sluice__uvlink_append(l, "S", 1, (void *)5), 0);
    char c;
    peer_read(peer, &c, 1);
    peer_write(peer, "+subscribed\r\n+m1\r\n");
    run_until(&ev.npushed, 1);
    CHECK_EQ(ev.nreplies, 1);
    CHECK_EQ(ev.privdata[0], 5);
    CHECK_STREQ(ev.text[0], "subscribed");
    CHECK_STREQ(ev.pushed[0], "m1");
    CHECK_EQ(ev.disconnected, 0);
    CHECK_EQ(l->stage, SLUICE__UVLINK_UP);
    /* a request after the pushes (a PING on the subscription): its reply is its own */
    CHECK_EQ(sluice__uvlink_append(l, "P", 1, (void *)6), 0);
    peer_read(peer, &c, 1);
    peer_write(peer, "+pong\r\n");
    run_until(&ev.nreplies, 2);
    CHECK_EQ(ev.privdata[1], 6);
    CHECK_STREQ(ev.text[1], "pong");
    CHECK_EQ(ev.npushed, 1);
    peer_write(peer, "+m2\r\n+m3\r\n");
    run_until(&ev.closed, 1);
    CHECK_EQ(ev.npushed, 2);
    CHECK_STREQ(ev.pushed[1], "m2");
    CHECK_EQ(ev.nreplies, 2);
    CHECK_EQ(ev.disconnected, 1);
    CHECK_EQ(ev.lost_status, 0); /* freed by its owner: no failure */
    close(peer);
}

static void test_missing_socket(void) {
    char err[256] = "";
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/none.sock", dir);
    memset(&ev, 0, sizeof(ev));
    int st = 0;
    CHECK(sluice__uvlink_open(&loop, NULL, 0, missing, NULL, &hooks, NULL, &st, err, sizeof(err)) ==
          NULL);
    CHECK_EQ(st, SLUICE_ECONN);
    CHECK(strstr(err, "No such file") != NULL);
    CHECK_EQ(ev.connected, 0);
}

int main(void) {
    snprintf(dir, sizeof(dir), "/tmp/sluice-uvt-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/s.sock", dir);
    CHECK_EQ(uv_loop_init(&loop), 0);
    int lfd = listen_unix();
    test_order_and_free_in_callback(lfd);
    test_server_closes(lfd);
    test_reply_to_nothing(lfd);
    test_push(lfd);
    test_missing_socket();
    close(lfd);
    unlink(path);
    rmdir(dir);
    CHECK_EQ(uv_run(&loop, UV_RUN_NOWAIT), 0);
    CHECK_EQ(uv_loop_close(&loop), 0);
    printf("test_uvtransport: ok\n");
    return 0;
}
