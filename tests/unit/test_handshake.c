/* SPDX-License-Identifier: MIT */
/*
 * test_handshake.c - the handshake plan (sluice/handshake.h) without a server: replies built by
 * hand are fed to it, and the commands it yields and what it decides (mode, status, error text)
 * are checked for each kind of server and user: no password, user and password, password only,
 * AUTH refused, a db, single server vs cluster seed vs cluster member, CLUSTER MYID refused by
 * an ACL, the library current / absent / of another version, a server without functions, a
 * user who may not load, force_eval and no_load. No network.
 */
#include "harness.h"

#include "sluice/handshake.h"
#include "sluice/lua.h"
#include "sluice/status.h"

static redisReply *mk(int type, const char *s) {
    redisReply *r = calloc(1, sizeof(*r));
    CHECK(r != NULL);
    r->type = type;
    if (s != NULL) {
        r->str = strdup(s);
        r->len = strlen(s);
    }
    return r;
}

static char err[512];
static char sha[SLUICE_FN_COUNT_][41];

/* A plan for `url` with the common test settings. */
static void start(sluice__hs *p, const char *url, sluice__hs_kind kind, sluice_url *u) {
    char why[256];
    CHECK_EQ(sluice_url_parse(u, url, why, sizeof(why)), 0);
    err[0] = '\0';
    sluice__hs_config cfg = {
        .url = u, .kind = kind, .where = "srv", .sha = sha, .err = err, .errlen = sizeof(err)};
    sluice__hs_start(p, &cfg);
}

/* The next event; on SEND, the command's words joined by spaces into `words` (a script or the
 * library text as "<text>"). */
static sluice__hs_event next(sluice__hs *p, char *words, size_t len) {
    sluice__hs_cmd cmd;
    sluice__hs_event ev = sluice__hs_next(p, &cmd);
    words[0] = '\0';
    if (ev == SLUICE_HS_SEND) {
        size_t at = 0;
        for (int i = 0; i < cmd.argc; i++) {
            const char *w = cmd.lens[i] > 40 ? "<text>" : cmd.argv[i];
            int n = cmd.lens[i] > 40 ? 6 : (int)cmd.lens[i];
            at += (size_t)snprintf(words + at, len - at, "%s%.*s", i ? " " : "", n, w);
        }
    }
    return ev;
}

/* Expects SEND of `want`. */
static void expect_send(sluice__hs *p, const char *want) {
    char words[512];
    CHECK_EQ(next(p, words, sizeof(words)), SLUICE_HS_SEND);
    CHECK_STREQ(words, want);
}

static void expect(sluice__hs *p, sluice__hs_event want) {
    char words[512];
    sluice__hs_event ev = next(p, words, sizeof(words));
    if (ev != want) {
        fprintf(stderr, "event %d, wanted %d (sent: %s)\n", (int)ev, (int)want, words);
    }
    CHECK_EQ(ev, want);
}

static int feed(sluice__hs *p, int type, const char *s) {
    redisReply *r = mk(type, s);
    int st = sluice__hs_feed(p, r);
    freeReplyObject(r);
    return st;
}

#define ERR_REPLY    REDIS_REPLY_ERROR
#define STR_REPLY    REDIS_REPLY_STRING
#define STATUS_REPLY REDIS_REPLY_STATUS

/* One step at a time, as the blocking connection drives it. */
static void test_no_password_current_library(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_SINGLE, &u);
    expect_send(&p, "CLUSTER MYID");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR This instance has cluster support disabled"), 0);
    expect_send(&p, "FCALL sluice_version 0");
    expect(&p, SLUICE_HS_WAIT);
    CHECK_EQ(feed(&p, STR_REPLY, sluice_lua_version()), 0);
    expect(&p, SLUICE_HS_DONE);
    CHECK_EQ(p.mode, SLUICE_HS_MODE_FUNCTION);
    CHECK_STREQ(err, "");
    sluice__hs_free(&p);
}

static void test_auth_words(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://alice:s3cret@127.0.0.1:6379", SLUICE_HS_SINGLE, &u);
    expect_send(&p, "AUTH alice s3cret");
    CHECK_EQ(feed(&p, STATUS_REPLY, "OK"), 0);
    expect_send(&p, "CLUSTER MYID");
    sluice__hs_free(&p);

    start(&p, "redis://:s3cret@127.0.0.1:6379", SLUICE_HS_SINGLE, &u);
    expect_send(&p, "AUTH s3cret");
    sluice__hs_free(&p);
}

/* Every step the plan can send before an answer goes out at once (the async link pipelines
 * them); the first refusal decides. */
static void test_auth_refused_pipelined(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://:wrong@127.0.0.1:6379/2", SLUICE_HS_SINGLE, &u);
    expect_send(&p, "AUTH wrong");
    expect_send(&p, "CLUSTER MYID");
    expect_send(&p, "SELECT 2");
    expect_send(&p, "FCALL sluice_version 0");
    expect(&p, SLUICE_HS_WAIT);
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR invalid password"), SLUICE_EAUTH);
    CHECK_STREQ(err, "srv: ERR invalid password");
    CHECK_EQ(feed(&p, ERR_REPLY, "NOAUTH Authentication required."), SLUICE_EAUTH);
    expect(&p, SLUICE_HS_FAILED);
    CHECK_EQ(p.status, SLUICE_EAUTH);
    sluice__hs_free(&p);

    start(&p, "redis://bob:wrong@127.0.0.1:6379", SLUICE_HS_SINGLE, &u);
    expect_send(&p, "AUTH bob wrong");
    CHECK_EQ(feed(&p, ERR_REPLY, "WRONGPASS invalid username-password pair"), SLUICE_EAUTH);
    sluice__hs_free(&p);
}

static void test_select(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://127.0.0.1:6379/3", SLUICE_HS_SINGLE, &u);
    expect_send(&p, "CLUSTER MYID");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR This instance has cluster support disabled"), 0);
    expect_send(&p, "SELECT 3");
    CHECK_EQ(feed(&p, STATUS_REPLY, "OK"), 0);
    expect_send(&p, "FCALL sluice_version 0");
    CHECK_EQ(feed(&p, STR_REPLY, sluice_lua_version()), 0);
    expect(&p, SLUICE_HS_DONE);
    sluice__hs_free(&p);

    start(&p, "redis://127.0.0.1:6379/99", SLUICE_HS_MEMBER, &u);
    expect_send(&p, "SELECT 99");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR DB index is out of range"), SLUICE_EREDIS);
    CHECK_STREQ(err, "srv: SELECT: ERR DB index is out of range");
    expect(&p, SLUICE_HS_FAILED);
    sluice__hs_free(&p);
}

/* CLUSTER MYID against the URL's kind. */
static void test_kinds(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_SINGLE, &u);
    expect_send(&p, "CLUSTER MYID");
    CHECK_EQ(feed(&p, STR_REPLY, "0123456789abcdef0123456789abcdef01234567"), SLUICE_ECLUSTER);
    CHECK_STREQ(err, "srv: this server is a cluster node; use redis+cluster://");
    expect(&p, SLUICE_HS_FAILED);
    sluice__hs_free(&p);

    start(&p, "redis+cluster://127.0.0.1:7000", SLUICE_HS_SEED, &u);
    p.cfg.mode_where = "127.0.0.1:7000";
    expect_send(&p, "CLUSTER MYID");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR This instance has cluster support disabled"),
             SLUICE_ECLUSTER);
    CHECK(strncmp(err, "127.0.0.1:7000: not a cluster node (ERR This instance", 52) == 0);
    sluice__hs_free(&p);

    start(&p, "redis+cluster://127.0.0.1:7000", SLUICE_HS_SEED, &u);
    expect_send(&p, "CLUSTER MYID");
    CHECK_EQ(feed(&p, STR_REPLY, "0123456789abcdef0123456789abcdef01234567"), 0);
    expect_send(&p, "FCALL sluice_version 0");
    sluice__hs_free(&p);

    /* a node the cluster named is not asked; the router's steps go before the probe */
    start(&p, "redis+cluster://127.0.0.1:7000", SLUICE_HS_MEMBER, &u);
    p.cfg.route = 1;
    expect(&p, SLUICE_HS_ROUTE);
    expect_send(&p, "FCALL sluice_version 0");
    sluice__hs_free(&p);
}

/* An ACL without CLUSTER refuses MYID: unknown, no failure, no error text. */
static void test_myid_refused(void) {
    sluice__hs p;
    sluice_url u;
    const char *kinds[] = {"redis://127.0.0.1:6379", "redis+cluster://127.0.0.1:7000"};
    for (int k = 0; k < 2; k++) {
        start(&p, kinds[k], k ? SLUICE_HS_SEED : SLUICE_HS_SINGLE, &u);
        expect_send(&p, "CLUSTER MYID");
        CHECK_EQ(feed(&p, ERR_REPLY,
                      "NOPERM User worker has no permissions to run the 'cluster|myid' command"),
                 0);
        CHECK_STREQ(err, "");
        expect_send(&p, "FCALL sluice_version 0");
        CHECK_EQ(feed(&p, STR_REPLY, sluice_lua_version()), 0);
        expect(&p, SLUICE_HS_DONE);
        sluice__hs_free(&p);
    }
}

/* The library absent or of another version is loaded; with no_load it is used as it is. */
static void test_library_load(void) {
    const char *answers[][2] = {{"e", "ERR Function not found"}, {"s", "1:another"}};
    for (int i = 0; i < 2; i++) {
        for (int no_load = 0; no_load < 2; no_load++) {
            sluice__hs p;
            sluice_url u;
            start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
            p.cfg.no_load = no_load;
            expect_send(&p, "FCALL sluice_version 0");
            CHECK_EQ(feed(&p, answers[i][0][0] == 'e' ? ERR_REPLY : STR_REPLY, answers[i][1]), 0);
            if (!no_load) {
                expect_send(&p, "FUNCTION LOAD REPLACE <text>");
                expect(&p, SLUICE_HS_WAIT);
                CHECK_EQ(feed(&p, STR_REPLY, "sluice"), 0);
            }
            expect(&p, SLUICE_HS_DONE);
            CHECK_EQ(p.mode, SLUICE_HS_MODE_FUNCTION);
            sluice__hs_free(&p);
        }
    }
}

/* A user who may not load still calls; another refusal of FUNCTION LOAD fails. */
static void test_load_refused(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    expect_send(&p, "FCALL sluice_version 0");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR Function not found"), 0);
    expect_send(&p, "FUNCTION LOAD REPLACE <text>");
    CHECK_EQ(feed(&p, ERR_REPLY, "NOPERM User w has no permissions to run 'function|load'"), 0);
    CHECK(strncmp(err, "srv: FUNCTION LOAD: NOPERM", 26) == 0);
    expect(&p, SLUICE_HS_DONE);
    CHECK_EQ(p.mode, SLUICE_HS_MODE_FUNCTION);
    sluice__hs_free(&p);

    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    expect_send(&p, "FCALL sluice_version 0");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR Function not found"), 0);
    expect_send(&p, "FUNCTION LOAD REPLACE <text>");
    CHECK_EQ(feed(&p, ERR_REPLY, "OOM command not allowed"), SLUICE_EOOM);
    CHECK_STREQ(err, "srv: FUNCTION LOAD: OOM command not allowed");
    expect(&p, SLUICE_HS_FAILED);
    sluice__hs_free(&p);

    /* a probe refused for another reason fails the connection */
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    expect_send(&p, "FCALL sluice_version 0");
    CHECK_EQ(feed(&p, ERR_REPLY, "LOADING Redis is loading"), SLUICE_ELOADING);
    CHECK_STREQ(err, "srv: LOADING Redis is loading");
    expect(&p, SLUICE_HS_FAILED);
    sluice__hs_free(&p);

    /* a probe the user may not call: use what is there, the calls will say more */
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    expect_send(&p, "FCALL sluice_version 0");
    CHECK_EQ(feed(&p, ERR_REPLY, "NOPERM no permissions to run 'fcall'"), 0);
    CHECK_STREQ(err, "srv: NOPERM no permissions to run 'fcall'");
    expect(&p, SLUICE_HS_DONE);
    CHECK_EQ(p.mode, SLUICE_HS_MODE_FUNCTION);
    sluice__hs_free(&p);
}

/* Feeds a sha for each SCRIPT LOAD yielded (all pipelined) and expects DONE in EVALSHA mode;
 * `myid_owed`: the answer to CLUSTER MYID is owed before theirs. */
static void expect_scripts(sluice__hs *p, int myid_owed) {
    char words[512];
    int n = 0;
    while (next(p, words, sizeof(words)) == SLUICE_HS_SEND) {
        CHECK_STREQ(words, "SCRIPT LOAD <text>");
        n++;
    }
    CHECK_EQ(n, SLUICE_FN_COUNT_);
    if (myid_owed) {
        CHECK_EQ(feed(p, ERR_REPLY, "ERR This instance has cluster support disabled"), 0);
    }
    for (int i = 0; i < n; i++) {
        char s[41];
        snprintf(s, sizeof(s), "%040d", i + 1);
        CHECK_EQ(feed(p, i == 3 ? ERR_REPLY : STR_REPLY, i == 3 ? "ERR busy" : s), 0);
    }
    expect(p, SLUICE_HS_DONE);
    CHECK_EQ(p->mode, SLUICE_HS_MODE_EVAL);
    CHECK_STREQ(sha[0], "0000000000000000000000000000000000000001");
    CHECK_STREQ(sha[3], ""); /* refused: calls of it fail */
    CHECK(strstr(err, "SCRIPT LOAD sluice_retry: ERR busy") != NULL);
}

/* A server without functions: unknown FCALL, or unknown FUNCTION LOAD. */
static void test_eval_mode(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    expect_send(&p, "FCALL sluice_version 0");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR unknown command 'FCALL'"), 0);
    expect(&p, SLUICE_HS_DONE); /* the blocking connection loads each script when first used */
    CHECK_EQ(p.mode, SLUICE_HS_MODE_EVAL);
    sluice__hs_free(&p);

    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    p.cfg.preload_scripts = 1; /* the async link loads them all now */
    expect_send(&p, "FCALL sluice_version 0");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR Function not found"), 0);
    expect_send(&p, "FUNCTION LOAD REPLACE <text>");
    CHECK_EQ(feed(&p, ERR_REPLY, "ERR unknown command 'FUNCTION'"), 0);
    expect_scripts(&p, 0);
    sluice__hs_free(&p);
}

static void test_force_eval(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    p.cfg.force_eval = 1;
    expect(&p, SLUICE_HS_DONE);
    CHECK_EQ(p.mode, SLUICE_HS_MODE_EVAL);
    sluice__hs_free(&p);

    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_SINGLE, &u);
    p.cfg.force_eval = 1;
    p.cfg.preload_scripts = 1;
    expect_send(&p, "CLUSTER MYID");
    expect_scripts(&p, 1); /* no probe; the scripts go out without waiting for MYID's answer */
    sluice__hs_free(&p);

    /* with no probe, the scripts' answers are the first that can refuse the connection: a
     * server that wants a password, or is loading, fails the handshake (it used to connect
     * with every sha empty, and every call failed ENOSCRIPT until a reconnect) */
    const char *refusals[] = {"NOAUTH Authentication required.",
                              "LOADING Redis is loading the dataset in memory"};
    const int statuses[] = {SLUICE_EAUTH, SLUICE_ELOADING};
    for (int k = 0; k < 2; k++) {
        start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
        p.cfg.force_eval = 1;
        p.cfg.preload_scripts = 1;
        char words[512];
        while (next(&p, words, sizeof(words)) == SLUICE_HS_SEND) {
        }
        CHECK_EQ(feed(&p, ERR_REPLY, refusals[k]), statuses[k]);
        expect(&p, SLUICE_HS_FAILED);
        CHECK(strstr(err, "SCRIPT LOAD sluice_admit: ") != NULL);
        sluice__hs_free(&p);
    }
    /* a user who may not load scripts still connects (its calls say NOPERM) */
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    p.cfg.force_eval = 1;
    p.cfg.preload_scripts = 1;
    char words[512];
    int n = 0;
    while (next(&p, words, sizeof(words)) == SLUICE_HS_SEND) {
        n++;
    }
    for (int i = 0; i < n; i++) {
        CHECK_EQ(feed(&p, ERR_REPLY, "NOPERM this user has no permissions to run 'script|load'"),
                 0);
    }
    expect(&p, SLUICE_HS_DONE);
    sluice__hs_free(&p);
}

static void test_unexpected_reply(void) {
    sluice__hs p;
    sluice_url u;
    start(&p, "redis://127.0.0.1:6379", SLUICE_HS_MEMBER, &u);
    CHECK_EQ(feed(&p, STATUS_REPLY, "OK"), SLUICE_EPROTO);
    expect(&p, SLUICE_HS_FAILED);
    sluice__hs_free(&p);
}

int main(void) {
    test_no_password_current_library();
    test_auth_words();
    test_auth_refused_pipelined();
    test_select();
    test_kinds();
    test_myid_refused();
    test_library_load();
    test_load_refused();
    test_eval_mode();
    test_force_eval();
    test_unexpected_reply();
    printf("test_handshake: ok\n");
    return 0;
}
