/* SPDX-License-Identifier: MIT */
/*
 * cli_entry.c - a queue's entry as JSON (sluice/cli_entry.h), for sluice-admin and the gateway.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/cli.h"
#include "sluice/cli_entry.h"
#include "sluice/envelope.h"
#include "sluice/reply.h"

int sluice_cli_is_stream_id(const char *s) {
    size_t n = strspn(s, "0123456789");
    if (n == 0 || n > 20) {
        return 0;
    }
    if (s[n] == '\0') {
        return 1;
    }
    size_t m = strspn(s + n + 1, "0123456789");
    return s[n] == '-' && m > 0 && m <= 20 && s[n + 1 + m] == '\0';
}

void sluice_cli_entry_from_stream(sluice_cli_entry *e, const redisReply *x, const redisReply *p,
                                  const char *lane) {
    const redisReply *m = sluice_reply_entry_field(x, "m");
    memset(e, 0, sizeof(*e));
    e->id = x->element[0]->str, e->id_len = x->element[0]->len, e->lane = lane;
    e->m = m ? m->str : NULL, e->mlen = m ? m->len : 0;
    e->idle_ms = e->deliveries = -1;
    for (size_t i = 0; p != NULL && p->type == REDIS_REPLY_ARRAY && i < p->elements; i++) {
        const redisReply *r = p->element[i];
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
            r->element[0]->type == REDIS_REPLY_STRING && strcmp(r->element[0]->str, e->id) == 0) {
            e->in_flight = 1;
            e->consumer = r->element[1]->type == REDIS_REPLY_STRING ? r->element[1]->str : NULL;
            e->idle_ms = sluice_reply_ll(r->element[2], -1);
            e->deliveries = sluice_reply_ll(r->element[3], -1);
        }
    }
}

int sluice_cli_entry_from_list(sluice_cli_entry *e, const redisReply *el, const char *consumer) {
    const char *colon = el->type == REDIS_REPLY_STRING ? memchr(el->str, ':', el->len) : NULL;
    if (colon == NULL) {
        return -1; /* not pushed by sluice */
    }
    size_t sl = (size_t)(colon - el->str);
    memset(e, 0, sizeof(*e));
    e->id = el->str, e->id_len = sl;
    e->m = colon + 1, e->mlen = el->len - sl - 1;
    e->in_flight = consumer != NULL, e->consumer = consumer;
    e->idle_ms = e->deliveries = -1;
    return 0;
}

/* Field `name` of stream entry x as a string ("" when absent). */
static const char *field_str(const redisReply *x, const char *name) {
    const redisReply *v = sluice_reply_entry_field(x, name);
    return v != NULL && v->type == REDIS_REPLY_STRING ? v->str : "";
}

void sluice_cli_dead_json(FILE *f, const redisReply *x, size_t max_payload) {
    const redisReply *m = sluice_reply_entry_field(x, "m");
    const char *id = field_str(x, "id"), *consumer = field_str(x, "consumer"),
               *reason = field_str(x, "reason");
    fprintf(f, "{\"dead_id\":\"%s\",\"id\":", x->element[0]->str);
    sluice_cli_json_str(f, id, strlen(id));
    fprintf(f, ",\"deliveries\":%lld,\"consumer\":",
            sluice_reply_ll(sluice_reply_entry_field(x, "deliveries"), 0));
    sluice_cli_json_str(f, consumer, strlen(consumer));
    fprintf(f, ",\"reason\":");
    sluice_cli_json_str(f, reason, strlen(reason));
    fprintf(f, ",");
    sluice_cli_envelope_json(f, m != NULL ? m->str : NULL, m != NULL ? m->len : 0, max_payload);
    fprintf(f, "}");
}

void sluice_cli_entry_json(FILE *f, const sluice_cli_entry *e, int stream, size_t max_payload) {
    fprintf(f, "{\"id\":");
    sluice_cli_json_str(f, e->id, e->id_len);
    fprintf(f, ",\"lane\":");
    e->lane != NULL ? sluice_cli_json_str(f, e->lane, strlen(e->lane)) : (void)fprintf(f, "null");
    fprintf(f, ",\"admitted_ms\":");
    stream ? fprintf(f, "%lld", strtoll(e->id, NULL, 10)) : fprintf(f, "null");
    fprintf(f, ",\"state\":\"%s\",\"consumer\":", e->in_flight ? "in_flight" : "waiting");
    e->consumer != NULL ? sluice_cli_json_str(f, e->consumer, strlen(e->consumer))
                        : (void)fprintf(f, "null");
    fprintf(f, ",\"idle_ms\":");
    e->idle_ms >= 0 ? fprintf(f, "%lld", e->idle_ms) : fprintf(f, "null");
    fprintf(f, ",\"deliveries\":");
    e->deliveries >= 0 ? fprintf(f, "%lld", e->deliveries) : fprintf(f, "null");
    fprintf(f, ",");
    sluice_cli_envelope_json(f, e->m, e->mlen, max_payload);
    fprintf(f, "}");
}

void sluice_cli_envelope_json(FILE *f, const char *m, size_t len, size_t max_payload) {
    sluice_envelope env;
    sluice_header h[SLUICE_ENVELOPE_MAX_HEADERS];
    int ok = m != NULL && sluice_envelope_decode((const unsigned char *)m, len, 0, &env, h,
                                                 SLUICE_ENVELOPE_MAX_HEADERS, NULL, 0) == 0;
    fprintf(f, "\"tenant\":");
    ok &&env.tenant != NULL ? sluice_cli_json_str(f, env.tenant, env.tenant_len)
                            : (void)fprintf(f, "null");
    fprintf(f, ",\"headers\":");
    if (ok) {
        fprintf(f, "{");
        for (size_t i = 0; i < env.nheaders; i++) {
            fprintf(f, "%s", i > 0 ? "," : "");
            sluice_cli_json_str(f, h[i].name, h[i].name_len);
            fprintf(f, ":");
            sluice_cli_json_str(f, h[i].value, h[i].value_len);
        }
        fprintf(f, "}");
    } else {
        fprintf(f, "null");
    }
    size_t shown = ok && env.payload_len > max_payload ? max_payload : ok ? env.payload_len : 0;
    fprintf(f, ",\"payload\":");
    ok ? sluice_cli_json_str(f, (const char *)env.payload, shown) : (void)fprintf(f, "null");
    if (max_payload != SIZE_MAX) {
        fprintf(f, ",\"payload_bytes\":");
        ok ? fprintf(f, "%zu", env.payload_len) : fprintf(f, "null");
        fprintf(f, ",\"payload_truncated\":%s", ok && shown < env.payload_len ? "true" : "false");
    }
}
