#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A Retry-After hold on a partitioned queue holds every partition: two sluice-worker processes
# drain a queue of 3 partitions (each process a worker per partition, 6 in all) into a back end
# that answers its first request with 429, Retry-After: 2; for about two seconds no request
# reaches it from any partition, then every partition delivers again and every message is done.
# Every partition's worker reads and sets the hold of the queue as a whole,
# sluice:{Q}:hold:HOST:PORT (docs/delivery.md#retry-after-holds-the-pool).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/http_lib.sh"
q="holdp-$$"
backend_start be
use_queue "$q" "sluice:{$q}:hold:127.0.0.1:$bport"
use_queue "$q~1" "sluice:{$q~1}:hold:127.0.0.1:$bport"
use_queue "$q~2" "sluice:{$q~2}:hold:127.0.0.1:$bport"
"$bin/sluice-admin" --redis "$url" partitions "$q" 3 >/dev/null
# no tenant: spread over the partitions; 100 ms a request, one at a time per worker, so each
# partition has work for about 1.5 s without a hold
seq 1 90 | xargs "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null
xlen() { rcli XLEN "sluice:{$1}:stream"; }
hold_partitions "$q"
