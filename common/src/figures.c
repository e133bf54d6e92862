/* SPDX-License-Identifier: MIT */
/* figures.c - what a queue holds: commands and reply parsing (see sluice/figures.h). */
#include <string.h>

#include "sluice/figures.h"
#include "sluice/reply.h"
#include "sluice/status.h"

static const char *const counter_names[SLUICE_COUNTER_COUNT_] = {
    "admitted", "rejected", "acked", "retried", "dead", "reclaimed", "limited"};

/* The command slots, in the order they are sent (the same for both backends up to STATS);
 * the last is the list's processing lists or the stream's fair lanes. */
enum {
    CMD_DEPTH,
    CMD_CAPACITY,
    CMD_DELIVERY,
    CMD_DEAD,
    CMD_STATS,
    CMD_PROCS,
    CMD_LANES = CMD_PROCS
};

const char *sluice_counter_name(sluice_counter c) {
    return (unsigned)c < SLUICE_COUNTER_COUNT_ ? counter_names[c] : "unknown";
}

static void cmd(sluice_figures_cmd *c, int argc, const char *a0, const char *a1, const char *a2) {
    c->argc = argc;
    c->argv[0] = a0;
    c->argv[1] = a1;
    c->argv[2] = a2;
}

size_t sluice_figures_commands(const sluice_keys *k, sluice_backend b,
                               sluice_figures_cmd cmds[SLUICE_FIGURES_MAX_CMDS]) {
    int list = b == SLUICE_BACKEND_LIST;
    if (list) {
        cmd(&cmds[CMD_DEPTH], 3, "HGET", k->meta, "list_depth");
        cmd(&cmds[CMD_DELIVERY], 2, "LLEN", k->list, NULL);
    } else {
        cmd(&cmds[CMD_DEPTH], 2, "XLEN", k->stream, NULL);
        cmd(&cmds[CMD_DELIVERY], 3, "XINFO", "GROUPS", k->stream);
    }
    cmd(&cmds[CMD_CAPACITY], 4, "HMGET", k->meta, "capacity");
    cmds[CMD_CAPACITY].argv[3] = "paused";
    cmd(&cmds[CMD_DEAD], 2, "XLEN", k->dead, NULL);
    /* HMGET, not HGETALL: the fields in a known order, and a right producers already have */
    cmd(&cmds[CMD_STATS], 2 + SLUICE_COUNTER_COUNT_, "HMGET", k->stats, counter_names[0]);
    for (int c = 1; c < SLUICE_COUNTER_COUNT_; c++) {
        cmds[CMD_STATS].argv[2 + c] = counter_names[c];
    }
    if (list) {
        cmd(&cmds[CMD_PROCS], 2, "SCARD", k->procs, NULL);
    } else {
        cmd(&cmds[CMD_LANES], 4, "HMGET", k->meta, "lane_depth");
        cmds[CMD_LANES].argv[3] = "lane_wait";
    }
    return CMD_PROCS + 1;
}

void sluice_figures_init(sluice_figures *f) {
    memset(f, 0, sizeof(*f));
    f->capacity = SLUICE_FIGURE_UNSET;
}

static int is_int(const redisReply *r) {
    return r->type == REDIS_REPLY_INTEGER;
}

/* XINFO GROUPS: an array of groups, each a flat array of field, value. */
static int parse_groups(sluice_figures *f, const char *group, const redisReply *r) {
    if (r->type != REDIS_REPLY_ARRAY) {
        return SLUICE_EPROTO;
    }
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *g = r->element[i];
        const redisReply *name = sluice_reply_field(g, "name");
        if (group != NULL &&
            (name == NULL || name->type != REDIS_REPLY_STRING || strcmp(name->str, group) != 0)) {
            continue;
        }
        f->group_exists = 1;
        f->in_flight += sluice_reply_ll(sluice_reply_field(g, "pending"), 0);
        f->consumers += sluice_reply_ll(sluice_reply_field(g, "consumers"), 0);
    }
    return 0;
}

int sluice_figures_parse(sluice_figures *f, sluice_backend b, const char *group, size_t i,
                         const redisReply *r) {
    if (r == NULL) {
        return SLUICE_EPROTO;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        /* XINFO on a stream nothing was admitted to yet */
        return strstr(r->str, "no such key") != NULL ? 0
                                                     : sluice_reply_error_status(r->str, r->len);
    }
    int list = b == SLUICE_BACKEND_LIST;
    switch (i) {
    case CMD_DEPTH:
        if (!is_int(r) && r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL) {
            return SLUICE_EPROTO;
        }
        f->depth = sluice_reply_ll(r, 0);
        return 0;
    case CMD_CAPACITY:
        if (r->type == REDIS_REPLY_ARRAY) { /* {capacity, paused} */
            if (r->elements != 2) {
                return SLUICE_EPROTO;
            }
            f->paused = sluice_reply_ll(r->element[1], 0) == 1;
            r = r->element[0];
        }
        if (r->type == REDIS_REPLY_STRING &&
            sluice_capacity_parse(r->str, r->len, &f->capacity) != 0) {
            f->capacity = SLUICE_FIGURE_INVALID;
        }
        return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL ? 0 : SLUICE_EPROTO;
    case CMD_DELIVERY:
        if (!list) {
            return parse_groups(f, group, r);
        }
        f->group_exists = 1;
        f->waiting = sluice_reply_ll(r, 0);
        return is_int(r) ? 0 : SLUICE_EPROTO;
    case CMD_DEAD:
        f->dead = sluice_reply_ll(r, 0);
        return is_int(r) ? 0 : SLUICE_EPROTO;
    case CMD_STATS:
        if (r->type != REDIS_REPLY_ARRAY || r->elements != SLUICE_COUNTER_COUNT_) {
            return SLUICE_EPROTO;
        }
        for (int c = 0; c < SLUICE_COUNTER_COUNT_; c++) {
            f->counters[c] = sluice_reply_ll(r->element[c], 0);
        }
        return 0;
    case CMD_PROCS: /* = CMD_LANES */
        if (!list) {
            if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
                return SLUICE_EPROTO;
            }
            f->lanes_depth = sluice_reply_ll(r->element[0], 0);
            f->lanes_in_flight = f->lanes_depth - sluice_reply_ll(r->element[1], 0);
            if (f->lanes_in_flight < 0) {
                f->lanes_in_flight = 0;
            }
            return 0;
        }
        f->consumers = sluice_reply_ll(r, 0);
        return is_int(r) ? 0 : SLUICE_EPROTO;
    default:
        return SLUICE_EPROTO;
    }
}

void sluice_figures_finish(sluice_figures *f, sluice_backend b) {
    if (b == SLUICE_BACKEND_LIST) {
        f->in_flight = f->depth > f->waiting ? f->depth - f->waiting : 0;
    } else {
        f->depth += f->lanes_depth;
        f->in_flight += f->lanes_in_flight;
        f->waiting = f->depth > f->in_flight ? f->depth - f->in_flight : 0;
    }
}

int sluice_figures_read(sluice_figures *f, sluice_backend b, const char *group,
                        redisReply *const *replies, size_t n, size_t *bad) {
    int rc = 0;
    sluice_figures_init(f);
    for (size_t i = 0; i < n; i++) {
        int st = sluice_figures_parse(f, b, group, i, replies[i]);
        if (st != 0 && rc == 0) {
            rc = st;
            if (bad != NULL) {
                *bad = i;
            }
        }
    }
    sluice_figures_finish(f, b);
    return rc;
}

void sluice_figures_add(sluice_figures *sum, const sluice_figures *f) {
    sum->depth += f->depth;
    sum->in_flight += f->in_flight;
    sum->waiting += f->waiting;
    sum->consumers += f->consumers;
    sum->dead += f->dead;
    sum->capacity =
        sum->capacity >= 0 && f->capacity >= 0 ? sum->capacity + f->capacity : SLUICE_FIGURE_UNSET;
    sum->group_exists |= f->group_exists;
    sum->paused += f->paused;
    sum->lanes_depth += f->lanes_depth;
    sum->lanes_in_flight += f->lanes_in_flight;
    for (int c = 0; c < SLUICE_COUNTER_COUNT_; c++) {
        sum->counters[c] += f->counters[c];
    }
}

void sluice_figures_stream_lane(const sluice_figures *f, long long *depth, long long *waiting) {
    long long in_flight = f->in_flight - f->lanes_in_flight;
    *depth = f->depth - f->lanes_depth;
    *waiting = *depth > in_flight ? *depth - in_flight : 0;
}
