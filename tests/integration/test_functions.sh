#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The server functions called directly, as a client in another language would: sluice_retry of
# an entry that is no longer pending (acked after a reclaim) retries nothing and counts nothing;
# sluice_group registers the consumer and refuses a second group.
. "$(dirname "$0")/lib.sh"
q="fns-$$"
s="sluice:{$q}:stream" m="sluice:{$q}:meta" st="sluice:{$q}:stats"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")

"$bin/sluice-enqueue" --redis "$url" --queue "$q" one >/dev/null # loads the library too
[ "$(rcli FCALL sluice_group 2 "$s" "$m" workers c1)" = 1 ] || fail "group not created"
[ "$(rcli FCALL sluice_group 2 "$s" "$m" workers c2)" = 0 ] || fail "group created twice"
rcli XINFO CONSUMERS "$s" workers | grep -qx c2 || fail "consumer c2 not registered"
rcli FCALL sluice_group 2 "$s" "$m" other c3 2>&1 | grep -q 'drained by group "workers"' ||
    fail "a second group was not refused"
id=$(rcli XREADGROUP GROUP workers c1 COUNT 1 STREAMS "$s" '>' | sed -n 2p)
[ -n "$id" ] || fail "nothing read"
[ "$(rcli FCALL sluice_ack 2 "$s" "$st" workers "$id")" = 1 ] || fail "ack"
[ "$(rcli FCALL sluice_retry 2 "$s" "$st" workers c1 "$id" 0)" = 0 ] ||
    fail "retry of an acked entry claimed something"
[ -z "$(rcli HGET "$st" retried)" ] || fail "retry of an acked entry was counted"
echo "ok: retry counts only pending entries; group registers consumers, refuses a second group"
