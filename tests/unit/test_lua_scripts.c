/* SPDX-License-Identifier: MIT */
/*
 * test_lua_scripts.c - every function's EVALSHA script carries what it uses.
 *
 * A function's EVALSHA form carries only the modules of its "-- @needs" line (sluice/lua.h). A
 * local of a module it leaves out would be read as a global there, and fail only on the path
 * that reaches it ("Script attempted to access nonexistent global variable"). So each script,
 * and the whole library, is read here as Lua: comments and strings skipped, block scopes
 * followed (function, do, then, repeat), and every name it reads must be a local in scope or one
 * of the few globals Redis gives a script. Each script must also be smaller than the library
 * (it carries some modules, not all), keep the order of the library, and carry the module
 * that sets a function kept in a table when it calls one (the limiter's refunds, limiter_refund;
 * the lanes' K:wake_up and K:ring_repair, lanes); the refunds part registers no initialiser
 * (scripts without it would miss it).
 */
#include <ctype.h>

#include "harness.h"
#include "sluice/lua.h"

#define MAX_NAMES 4096
#define MAX_DEPTH 64
#define NAME_LEN  48

/* The globals a Redis script or function may read. */
static const char *const globals[] = {
    "redis",    "KEYS",  "ARGV",  "string", "math",   "table",        "tonumber",
    "tostring", "type",  "pairs", "ipairs", "unpack", "error",        "next",
    "select",   "pcall", "bit",   "cjson",  "assert", "setmetatable", NULL};

static const char *const keywords[] = {"and",   "break", "do",       "else",   "elseif", "end",
                                       "false", "for",   "function", "if",     "in",     "local",
                                       "nil",   "not",   "or",       "repeat", "return", "then",
                                       "true",  "until", "while",    NULL};

typedef struct {
    char kind; /* 'n' name, 'p' punctuation (text holds it), 'v' a value (string, number) */
    char text[NAME_LEN];
} token;

typedef struct {
    const char *p, *end;
    token cur, next; /* next: one token of look-ahead */
} lexer;

/* The closing of a long bracket opening at p ("[[", "[==["), or NULL if p opens none. */
static const char *long_close(const char *p, const char *end) {
    if (*p != '[') {
        return NULL;
    }
    const char *q = p + 1;
    while (q < end && *q == '=') {
        q++;
    }
    if (q >= end || *q != '[') {
        return NULL;
    }
    size_t level = (size_t)(q - p - 1);
    for (const char *r = q + 1; r < end; r++) {
        if (*r == ']' && (size_t)(end - r) > level + 1 && r[level + 1] == ']') {
            size_t k = 0;
            while (k < level && r[1 + k] == '=') {
                k++;
            }
            if (k == level) {
                return r + level + 2;
            }
        }
    }
    return end;
}

static void lex_one(lexer *l, token *t) {
    for (;;) {
        while (l->p < l->end && isspace((unsigned char)*l->p)) {
            l->p++;
        }
        if (l->end - l->p >= 2 && l->p[0] == '-' && l->p[1] == '-') {
            const char *c = long_close(l->p + 2, l->end);
            if (c != NULL) {
                l->p = c;
            } else {
                while (l->p < l->end && *l->p != '\n') {
                    l->p++;
                }
            }
            continue;
        }
        break;
    }
    t->text[0] = '\0';
    if (l->p >= l->end) {
        t->kind = 'e';
        return;
    }
    const char *s = l->p;
    if (isalpha((unsigned char)*s) || *s == '_') {
        while (l->p < l->end && (isalnum((unsigned char)*l->p) || *l->p == '_')) {
            l->p++;
        }
        t->kind = 'n';
        snprintf(t->text, sizeof(t->text), "%.*s", (int)(l->p - s), s);
    } else if (isdigit((unsigned char)*s)) {
        while (l->p < l->end && (isalnum((unsigned char)*l->p) || *l->p == '.')) {
            l->p++;
        }
        t->kind = 'v';
    } else if (*s == '\'' || *s == '"') {
        for (l->p++; l->p < l->end && *l->p != *s; l->p++) {
            if (*l->p == '\\') {
                l->p++;
            }
        }
        l->p++;
        t->kind = 'v';
    } else if (long_close(s, l->end) != NULL) {
        l->p = long_close(s, l->end);
        t->kind = 'v';
    } else {
        size_t n = 1;
        if (l->end - s >= 2 &&
            (memcmp(s, "..", 2) == 0 || memcmp(s, "==", 2) == 0 || memcmp(s, "~=", 2) == 0 ||
             memcmp(s, "<=", 2) == 0 || memcmp(s, ">=", 2) == 0)) {
            n = 2;
        }
        l->p += n;
        t->kind = 'p';
        snprintf(t->text, sizeof(t->text), "%.*s", (int)n, s);
    }
}

static void advance(lexer *l) {
    l->cur = l->next;
    lex_one(l, &l->next);
}

static int is(const token *t, const char *text) {
    return t->kind != 'v' && strcmp(t->text, text) == 0;
}

static int in_list(const char *const *list, const char *name) {
    for (int i = 0; list[i] != NULL; i++) {
        if (strcmp(list[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The locals in scope: names, and where each block's start in it. */
typedef struct {
    char names[MAX_NAMES][NAME_LEN];
    int n;
    int block[MAX_DEPTH];
    int depth;
} scopes;

static void declare(scopes *s, const char *name) {
    CHECK(s->n < MAX_NAMES);
    snprintf(s->names[s->n++], NAME_LEN, "%s", name);
}

static int in_scope(const scopes *s, const char *name) {
    for (int i = s->n - 1; i >= 0; i--) {
        if (strcmp(s->names[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

static void open_block(scopes *s) {
    CHECK(s->depth < MAX_DEPTH);
    s->block[s->depth++] = s->n;
}

static void close_block(scopes *s) {
    CHECK(s->depth > 0);
    s->n = s->block[--s->depth];
}

/* Notes name in bad (space-separated, truncated to badlen). */
static void note(char *bad, size_t badlen, const char *name) {
    size_t n = strlen(bad);
    snprintf(bad + n, badlen - n, "%s ", name);
}

/* A function's parameters, the lexer on its "(": they open the function's block. */
static void params(lexer *l, scopes *s) {
    open_block(s);
    CHECK(is(&l->cur, "("));
    for (advance(l); !is(&l->cur, ")"); advance(l)) {
        if (l->cur.kind == 'n') {
            declare(s, l->cur.text);
        }
    }
}

/* The names `text` reads that are neither a local in scope nor a global of Redis's: written to
 * bad. Returns how many. */
static int free_names(const char *text, size_t len, char *bad, size_t badlen) {
    static scopes s;
    lexer l = {text, text + len, {0}, {0}};
    int found = 0, for_block = 0;
    token prev = {'p', ";"};
    memset(&s, 0, sizeof(s));
    bad[0] = '\0';
    if (len > 2 && memcmp(text, "#!", 2) == 0) { /* the library's shebang, Redis's to read */
        l.p += strcspn(text, "\n");
    }
    lex_one(&l, &l.next);
    for (advance(&l); l.cur.kind != 'e'; prev = l.cur, advance(&l)) {
        token *t = &l.cur;
        if (is(t, "local") && is(&l.next, "function")) {
            advance(&l);
            advance(&l);
            declare(&s, l.cur.text); /* a local function sees itself */
            advance(&l);
            params(&l, &s);
        } else if (is(t, "local")) {
            advance(&l);
            declare(&s, l.cur.text);
            while (is(&l.next, ",")) { /* local a, b, c */
                advance(&l);
                advance(&l);
                declare(&s, l.cur.text);
            }
        } else if (is(t, "function")) {
            if (l.next.kind == 'n') { /* function NAME.field(...): NAME is read */
                advance(&l);
                if (!in_scope(&s, l.cur.text) && !in_list(globals, l.cur.text)) {
                    found++;
                    note(bad, badlen, l.cur.text);
                }
                while (is(&l.next, ".") || is(&l.next, ":")) {
                    advance(&l);
                    advance(&l);
                }
            }
            advance(&l);
            params(&l, &s);
        } else if (is(t, "for")) {
            open_block(&s);
            for_block = 1;
            while (!is(&l.next, "in") && !is(&l.next, "=")) {
                advance(&l);
                if (l.cur.kind == 'n') {
                    declare(&s, l.cur.text);
                }
            }
        } else if (is(t, "do")) {
            if (!for_block) {
                open_block(&s);
            }
            for_block = 0;
        } else if (is(t, "then") || is(t, "repeat")) {
            open_block(&s);
        } else if (is(t, "elseif") || is(t, "end") || is(t, "until")) {
            close_block(&s);
        } else if (is(t, "else")) {
            close_block(&s);
            open_block(&s);
        } else if (t->kind == 'n' && !in_list(keywords, t->text)) {
            int field = is(&prev, ".") || is(&prev, ":");
            int key = (is(&prev, "{") || is(&prev, ",")) && is(&l.next, "=");
            if (!field && !key && !in_scope(&s, t->text) && !in_list(globals, t->text)) {
                found++;
                note(bad, badlen, t->text);
            }
        }
    }
    CHECK_EQ(s.depth, 0);
    return found;
}

int main(void) {
    size_t liblen = 0;
    char bad[512];
    const char *lib = sluice_lua_library(&liblen);
    CHECK(lib != NULL && liblen > 0);

    /* the check finds what it must: a name no module defines, and one defined too late */
    const char *probe = "local function f(a)\n  local b = a .. c -- d\n  return {x = b}, y\nend\n"
                        "local y = 1\n";
    CHECK_EQ(free_names(probe, strlen(probe), bad, sizeof(bad)), 2);
    CHECK_STREQ(bad, "c y ");
    probe = "local t = {}\nfunction t.g(a, b)\n  for i, v in ipairs(a) do b = v .. i end\n"
            "  if b then local z = 1 elseif a then return z end\n  return a:len(), t.x\nend\n";
    CHECK_EQ(free_names(probe, strlen(probe), bad, sizeof(bad)), 1);
    CHECK_STREQ(bad, "z ");

    int n = free_names(lib, liblen, bad, sizeof(bad));
    if (n != 0) {
        fprintf(stderr, "the library reads names it does not define: %s\n", bad);
    }
    CHECK_EQ(n, 0);
    /* the refunds part holds refunds only: state or an initialiser put after them in the
     * limiter's file would be left out of every script without them (sluice_limit's) */
    const char *refund = strstr(lib, "\n-- @module limiter_refund\n");
    CHECK(refund != NULL);
    const char *refund_end = strstr(refund + 1, "\n-- @module ");
    CHECK(refund_end != NULL);
    const char *init = strstr(refund, "on_fresh_state(");
    if (init != NULL && init < refund_end) {
        fprintf(stderr, "limiter_refund registers an initialiser: put it above the refunds\n");
    }
    CHECK(init == NULL || init > refund_end);
    for (int fn = 0; fn < SLUICE_FN_COUNT_; fn++) {
        size_t len = 0;
        char *s = sluice_lua_script((sluice_fn)fn, &len);
        if (s == NULL) {
            fprintf(stderr, "%s: no EVALSHA script (its -- @needs line?)\n",
                    sluice_fn_name((sluice_fn)fn));
        }
        CHECK(s != NULL && len < liblen);
        n = free_names(s, len, bad, sizeof(bad));
        if (n != 0) {
            fprintf(stderr,
                    "%s: its EVALSHA script reads names it does not define: %s(add their "
                    "modules to its -- @needs line)\n",
                    sluice_fn_name((sluice_fn)fn), bad);
        }
        CHECK_EQ(n, 0);
        /* functions kept in tables define no local, so the scope check cannot see them missing:
         * the limiter's refunds (the engines' fourth entry) and the lanes' key functions; a
         * script that calls one carries the module that sets it */
        static const char *const table_fns[][2] = {
            {".refund(", "limiter_refund"}, {":wake_up(", "lanes"}, {":ring_repair(", "lanes"}};
        for (size_t t = 0; t < sizeof(table_fns) / sizeof(table_fns[0]); t++) {
            char line[64];
            snprintf(line, sizeof(line), "\n-- @module %s\n", table_fns[t][1]);
            if (strstr(s, table_fns[t][0]) != NULL && strstr(s, line) == NULL) {
                fprintf(stderr, "%s: its EVALSHA script calls %s without the module %s\n",
                        sluice_fn_name((sluice_fn)fn), table_fns[t][0], table_fns[t][1]);
                CHECK(0);
            }
        }
        /* the modules in library order: each "-- @module" line later in the library */
        const char *at = lib;
        for (const char *m = strstr(s, "-- @module "); m != NULL;
             m = strstr(m + 1, "\n-- @module ")) {
            char line[64];
            const char *b = m[0] == '\n' ? m + 1 : m;
            snprintf(line, sizeof(line), "%.*s", (int)strcspn(b, "\n"), b);
            const char *in_lib = strstr(at, line);
            CHECK(in_lib != NULL);
            at = in_lib + 1;
        }
        free(s);
    }
    printf("ok: the library and the EVALSHA script of each of %d functions read only their own "
           "locals and Redis's globals\n",
           SLUICE_FN_COUNT_);
    return 0;
}
