/* SPDX-License-Identifier: MIT */
/*
 * cli_entry.h - a queue's entry, or a dead letter, as JSON: the envelope decoded (tenant,
 * headers, the payload up to a byte limit, escaped by the one JSON writer of user text), the
 * admission time, and the state (waiting, or in flight with its consumer, idle time and
 * deliveries).
 *
 * `sluice-admin peek | inspect | dead list --json` print it and the gateway's payload reads
 * (GET /v1/queues/{q}/messages..., /dead) answer with it, so both show the same fields. Not
 * here: reading the entries from Redis (each does its own: blocking or asynchronous). Pure apart
 * from writing to the FILE given (a memory stream for the gateway).
 */
#ifndef SLUICE_CLI_ENTRY_H
#define SLUICE_CLI_ENTRY_H

#include <stddef.h>
#include <stdio.h>

#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One entry to show; strings borrowed from the replies. */
typedef struct sluice_cli_entry {
    const char *id; /* stream id, or the list element's sequence number */
    size_t id_len;
    const char *lane; /* the tenant lane it is in; NULL: the queue's stream or list */
    const char *m;    /* the envelope (NULL: none) */
    size_t mlen;
    int in_flight;
    const char *consumer;          /* in flight: who holds it (NULL unknown) */
    long long idle_ms, deliveries; /* -1 unknown */
} sluice_cli_entry;

/* 1 when s looks like a stream id: MS or MS-SEQ, digits only (at most 20 each). */
int sluice_cli_is_stream_id(const char *s);

/* Fills e from XRANGE entry x (its field `m`) of the stream or lane `lane` (NULL: the queue's
 * stream), its state from the reply p of XPENDING's extended form (NULL: nothing pending). */
void sluice_cli_entry_from_stream(sluice_cli_entry *e, const redisReply *x, const redisReply *p,
                                  const char *lane);

/* Fills e from list element el ("SEQ:envelope", as the list backend pushes it), waiting, or in
 * flight with `consumer` (NULL: waiting). 0, or -1 when el is not such an element. */
int sluice_cli_entry_from_list(sluice_cli_entry *e, const redisReply *el, const char *consumer);

/* Writes {"id":...,"lane":...,"admitted_ms":...,"state":...,"consumer":...,"idle_ms":...,
 * "deliveries":...,<the envelope>} (admitted_ms: from a stream id, null for a list's). */
void sluice_cli_entry_json(FILE *f, const sluice_cli_entry *e, int stream, size_t max_payload);

/* Writes dead letter x (an XRANGE entry of the dead-letter stream) as {"dead_id":...,"id":...,
 * "deliveries":N,"consumer":...,"reason":...,<the envelope>}. */
void sluice_cli_dead_json(FILE *f, const redisReply *x, size_t max_payload);

/* Writes "tenant":...,"headers":{...},"payload":... and, unless max_payload is SIZE_MAX,
 * "payload_bytes":N,"payload_truncated":B: the payload's first max_payload bytes, a JSON
 * string, or {"base64":"..."} when they are not UTF-8; nulls when m does not decode. */
void sluice_cli_envelope_json(FILE *f, const char *m, size_t len, size_t max_payload);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_CLI_ENTRY_H */
