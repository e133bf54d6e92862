/* SPDX-License-Identifier: MIT */
/*
 * test_options.c - the options structs grow without breaking the ABI: _init writes only the
 * caller's struct_size bytes (an older caller's struct is shorter), zeroes what a newer caller
 * has beyond the library's struct, and the library reads a caller's options only up to its
 * struct_size, taking its defaults for the rest. No network.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "conn_internal.h"
#include "harness.h"
#include "sluice/aproducer.h"
#include "sluice/limit.h"
#include "sluice/producer.h"
#include "sluice/redis.h"
#include "sluice/worker.h"

enum { EXTRA = 32 };

/* A caller compiled when the struct ended at `old`: nothing past it is written. */
#define CHECK_OLDER(type, init_sized, old)                                                         \
    do {                                                                                           \
        unsigned char buf[sizeof(type) + EXTRA];                                                   \
        memset(buf, 0xAA, sizeof(buf));                                                            \
        init_sized((type *)(void *)buf, (old));                                                    \
        CHECK_EQ(((type *)(void *)buf)->struct_size, (old));                                       \
        for (size_t i = (old); i < sizeof(buf); i++) {                                             \
            CHECK_EQ(buf[i], 0xAA);                                                                \
        }                                                                                          \
    } while (0)

/* A caller compiled with more fields than the library knows: those are zeroed. */
#define CHECK_NEWER(type, init_sized)                                                              \
    do {                                                                                           \
        unsigned char buf[sizeof(type) + EXTRA];                                                   \
        memset(buf, 0xAA, sizeof(buf));                                                            \
        init_sized((type *)(void *)buf, sizeof(buf));                                              \
        CHECK_EQ(((type *)(void *)buf)->struct_size, sizeof(buf));                                 \
        for (size_t i = sizeof(type); i < sizeof(buf); i++) {                                      \
            CHECK_EQ(buf[i], 0);                                                                   \
        }                                                                                          \
    } while (0)

static void test_init(void) {
    sluice_conn_options co;
    sluice_conn_options_init(&co);
    CHECK_EQ(co.struct_size, sizeof(co));
    CHECK_EQ(co.connect_timeout_ms, 2000);
    CHECK_EQ(co.command_timeout_ms, 5000);

    CHECK_OLDER(sluice_conn_options, sluice_conn_options_init_sized,
                offsetof(sluice_conn_options, command_timeout_ms));
    CHECK_OLDER(sluice_producer_options, sluice_producer_options_init_sized,
                offsetof(sluice_producer_options, queue));
    CHECK_OLDER(sluice_aproducer_options, sluice_aproducer_options_init_sized,
                offsetof(sluice_aproducer_options, max_inflight));
    CHECK_OLDER(sluice_worker_options, sluice_worker_options_init_sized,
                offsetof(sluice_worker_options, group));
    CHECK_OLDER(sluice_limiter_options, sluice_limiter_options_init_sized,
                offsetof(sluice_limiter_options, ns));
    CHECK_OLDER(sluice_worker_pool_options, sluice_worker_pool_options_init_sized,
                offsetof(sluice_worker_pool_options, on_grace_expired));

    CHECK_NEWER(sluice_conn_options, sluice_conn_options_init_sized);
    CHECK_NEWER(sluice_producer_options, sluice_producer_options_init_sized);
    CHECK_NEWER(sluice_aproducer_options, sluice_aproducer_options_init_sized);
    CHECK_NEWER(sluice_worker_options, sluice_worker_options_init_sized);
    CHECK_NEWER(sluice_limiter_options, sluice_limiter_options_init_sized);
    CHECK_NEWER(sluice_worker_pool_options, sluice_worker_pool_options_init_sized);

    sluice_worker_pool_options po;
    sluice_worker_pool_options_init(&po);
    CHECK_EQ(po.struct_size, sizeof(po));
    CHECK_EQ(po.check_ms, 1000);
    CHECK(po.on_grace_expired == NULL);
}

/* What a connection takes from its caller's options (the one copy every connection makes). */
static void test_take(void) {
    sluice_conn_options in, got;
    sluice_conn_options_init(&in);
    in.connect_timeout_ms = 1234;
    in.command_timeout_ms = 777;
    in.backoff_min_ms = 10;
    in.backoff_max_ms = 20;
    sluice__conn_options_fill(&got, &in);
    CHECK_EQ(got.connect_timeout_ms, 1234);
    CHECK_EQ(got.command_timeout_ms, 777);
    CHECK_EQ(got.struct_size, sizeof(got));

    /* an older caller: its struct ends before command_timeout_ms, whatever follows in memory
     * is not its own and the library's default is taken instead */
    in.struct_size = offsetof(sluice_conn_options, command_timeout_ms);
    sluice__conn_options_fill(&got, &in);
    CHECK_EQ(got.connect_timeout_ms, 1234);
    CHECK_EQ(got.command_timeout_ms, 5000);
    CHECK_EQ(got.backoff_min_ms, 100);
    CHECK(got.name == NULL && got.queue == NULL);

    /* struct_size 0: not set up by _init (e.g. a designated initializer), read as it is */
    sluice_conn_options lit = {.connect_timeout_ms = 1500, .command_timeout_ms = 900};
    sluice__conn_options_fill(&got, &lit);
    CHECK_EQ(got.connect_timeout_ms, 1500);
    CHECK_EQ(got.command_timeout_ms, 900);
    CHECK_EQ(got.struct_size, sizeof(got));
}

/* Options added later: an older caller's worker gets the defaults (no handler timeout, fixed
 * concurrency). */
static void test_worker_new_fields(void) {
    sluice_worker_options o;
    sluice_worker_options_init(&o);
    CHECK_EQ(o.handler_timeout_ms, 0);
    CHECK(o.abandon_handler == NULL);
    CHECK_EQ(o.concurrency_min, 0);
    CHECK_OLDER(sluice_worker_options, sluice_worker_options_init_sized,
                offsetof(sluice_worker_options, handler_timeout_ms));
}

int main(void) {
    test_init();
    test_take();
    test_worker_new_fields();
    printf("test_options: 3 groups passed\n");
    return 0;
}
