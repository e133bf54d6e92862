/* SPDX-License-Identifier: MIT */
/*
 * test_verbs.c - the operator's verbs as commands (sluice/verbs.h): the pause and resume
 * commands and their "already so" reply, the clear call of each backend and the reading of its
 * reply (call again while the function stopped at its bound and deleted something).
 */
#include <string.h>

#include "harness.h"

#include "sluice/verbs.h"

static void test_pause(void) {
    sluice_keys k;
    const char *argv[4];
    CHECK_EQ(sluice_keys_init(&k, "jobs", NULL, 0), 0);
    CHECK_EQ(sluice__pause_command(&k, 1, argv), 4);
    CHECK_STREQ(argv[0], "HSET");
    CHECK_STREQ(argv[1], "sluice:{jobs}:meta");
    CHECK_STREQ(argv[2], "paused");
    CHECK_STREQ(argv[3], "1");
    CHECK_EQ(sluice__pause_command(&k, 0, argv), 3);
    CHECK_STREQ(argv[0], "HDEL");
    CHECK_STREQ(argv[2], "paused");
    redisReply *r = th_resp(":0\r\n");
    CHECK_EQ(sluice__pause_unchanged(r), 1);
    freeReplyObject(r);
    r = th_resp(":1\r\n");
    CHECK_EQ(sluice__pause_unchanged(r), 0);
    freeReplyObject(r);
}

static void test_clear(void) {
    sluice_keys k;
    sluice__clear_call c;
    CHECK_EQ(sluice_keys_init(&k, "jobs", NULL, 0), 0);
    sluice__clear_call_init(&c, &k, SLUICE_BACKEND_STREAM, "workers");
    CHECK_EQ(c.fn, SLUICE_FN_CLEAR);
    CHECK_EQ(c.nkeys, 2);
    CHECK_STREQ(c.keys[0], "sluice:{jobs}:stream");
    CHECK_STREQ(c.keys[1], "sluice:{jobs}:meta");
    CHECK_EQ(c.nargs, 2);
    CHECK_STREQ(c.args[0], "workers");
    CHECK_STREQ(c.args[1], "1000");
    sluice__clear_call_init(&c, &k, SLUICE_BACKEND_LIST, "workers");
    CHECK_EQ(c.fn, SLUICE_FN_LIST_CLEAR);
    CHECK_STREQ(c.keys[0], "sluice:{jobs}:list");
    CHECK_EQ(c.nargs, 1);
    CHECK_STREQ(c.args[0], "1000");

    long long n = 0;
    redisReply *r = th_resp("*3\r\n:1000\r\n:1\r\n:0\r\n"); /* at its bound: again */
    CHECK_EQ(sluice__clear_reply(r, &n), 1);
    freeReplyObject(r);
    r = th_resp("*3\r\n:0\r\n:1\r\n:2\r\n"); /* lanes finished, nothing deleted: again */
    CHECK_EQ(sluice__clear_reply(r, &n), 1);
    freeReplyObject(r);
    r = th_resp("*3\r\n:0\r\n:1\r\n:0\r\n"); /* nothing done at all: stop */
    CHECK_EQ(sluice__clear_reply(r, &n), 0);
    freeReplyObject(r);
    r = th_resp("*3\r\n:7\r\n:0\r\n:0\r\n");
    CHECK_EQ(sluice__clear_reply(r, &n), 0);
    freeReplyObject(r);
    CHECK_EQ(n, 1007);
    r = th_resp("-ERR bad\r\n");
    CHECK_EQ(sluice__clear_reply(r, &n), -1);
    freeReplyObject(r);
    r = th_resp("*2\r\n:1\r\n:0\r\n");
    CHECK_EQ(sluice__clear_reply(r, &n), -1);
    freeReplyObject(r);
    CHECK_EQ(sluice__clear_reply(NULL, &n), -1);
    CHECK_EQ(n, 1007);
}

int main(void) {
    test_pause();
    test_clear();
    puts("test_verbs: ok");
    return 0;
}
