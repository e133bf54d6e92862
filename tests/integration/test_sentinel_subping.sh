#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The async connection's +switch-master subscription is checked (a PING on it every few
# seconds): the sentinel holding the subscription of sluice-gateway's producer connection is
# frozen (SIGSTOP: its socket stays up, nothing answers) and the gateway lets that subscription
# go and subscribes through another sentinel within 15 s (bounded, not timed). On a Sentinel
# group of its own (sentinel_lib.sh), stopped by PIDs; the frozen sentinel is let go on
# (SIGCONT) at the end.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/sentinel_lib.sh"
m="sluice-sp$$"
sentinel_start "$m"
frozen=''
thaw() { [ -z "$frozen" ] || kill -CONT "$frozen" 2>/dev/null || true; }
trap 'thaw; sentinel_cleanup' EXIT

# the sentinels' ports the gateway's producer connection subscribed through, one a line, in order
subscribed() { grep -oE 'event=sentinel_subscribed conn=producer .*sentinel=127\.0\.0\.1:[0-9]+' "$tmp/gw.log" |
    grep -oE '[0-9]+$' || true; }
gateway_start --redis "$surl" --queue "subping-$$" --log-level info
wait_log "$tmp/gw.log" 'event=sentinel_subscribed' 10
first=$(subscribed | head -n 1)
[ -n "$first" ] || fail "the gateway did not subscribe to +switch-master: $(tail -n 3 "$tmp/gw.log")"
for i in 0 1 2; do [ "${sports[$i]}" = "$first" ] && frozen=${spids[$i]}; done
[ -n "$frozen" ] || fail "subscribed through $first, not a sentinel of the group (${sports[*]})"
kill -STOP "$frozen"
for i in $(seq 1 150); do # bounded: 15 s
    subscribed | grep -vqx "$first" && break
    sleep 0.1
done
subscribed | grep -vqx "$first" ||
    fail "no subscription through another sentinel within 15 s of freezing $first: $(grep sentinel_ "$tmp/gw.log" | tail -n 3)"
grep -q "event=sentinel_unsubscribed conn=producer sentinel=127\.0\.0\.1:$first .*no answer" "$tmp/gw.log" ||
    fail "the frozen sentinel's subscription was not reported: $(grep sentinel_ "$tmp/gw.log" | tail -n 3)"
thaw
frozen=''
kill -TERM "${pids[-1]}"
wait "${pids[-1]}" || fail "gateway: $(tail -n 3 "$tmp/gw.log")"
echo "test_sentinel_subping: ok"
