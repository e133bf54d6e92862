#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A Retry-After hold on a partitioned queue holds every partition on a Redis Cluster too: a queue
# of 3 partitions whose slots are on the 3 different primaries, two sluice-worker processes (each
# a worker per partition, 6 in all) draining it into a back end that answers its first request
# with 429, Retry-After: 2; for about two seconds no request reaches it from any partition of
# either process, then every partition delivers again and every message is done. There each
# partition's worker reads its own key, sluice:{Q~i}:hold:HOST:PORT; the process that got the
# answer sets it for each partition (docs/delivery.md#retry-after-holds-the-pool).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
. "$(dirname "$0")/http_lib.sh"
cluster_start
url=$curl # workers_start's
q=$(partitions_apart "hc$$")
backend_start be
"$bin/sluice-admin" --redis "$curl" partitions "$q" 3 >/dev/null
# no tenant: spread over the partitions; 100 ms a request, one at a time per worker, so each
# partition has work for about 1.5 s without a hold
seq 1 90 | xargs "$bin/sluice-enqueue" --redis "$curl" --queue "$q" >/dev/null
xlen() { rc "$(owner "$1")" XLEN "sluice:{$1}:stream"; }
hold_partitions "$q"
