#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fair queues (sluice-admin fair Q on): a lane per tenant, served in deficit round robin, so a
# tenant with a backlog cannot starve the others; weights share the reads; drain-tenant and
# inflight-tenant hold one tenant back without holding back the others; switching on or off
# with entries waiting loses nothing; dead letters go back to their lane; a worker killed with -9
# gives its lane entries (and its leases) back after the visibility timeout.
. "$(dirname "$0")/lib.sh"
q="fair-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" --capacity 100000 "$@"; }
worker=("$bin/sluice-worker" --redis "$url" --log-level error) # started directly: $! is its PID
purge() { A purge "$1" --yes >/dev/null 2>&1 || true; }
trap 'for x in "" -w -s -l -k -n; do purge "$q$x"; done; lib_cleanup' EXIT
lane_in_flight() { # Q TENANT: entries of the lane delivered and not yet settled (its PEL)
    local n
    n=$(rcli XPENDING "sluice:{$1}:lane:$2" workers 2>/dev/null | head -n 1)
    case "$n" in '' | *[!0-9]*) echo 0 ;; *) echo "$n" ;; esac
}

# ---- bad input: named, nothing changed ----
run 2 'weight: 0 is out of range 1..1000' A fair "$q" on --weight a=0
run 2 'expected TENANT=W' A fair "$q" on --weight =3
run 2 'usage: fair QUEUE' A fair "$q" sideways
run 0 'fair off' A fair "$q"
[ "$(rcli HGET "sluice:{$q}:meta" fair)" = "" ] || fail "a refused call switched the queue"

# ---- starvation: A queues 2,000, then B 20; one worker, concurrency 1, 2 ms each ----
run 0 'fair .*: on' A fair "$q" on
seq 1 2000 | sed 's/^/a/' | E --queue "$q" --tenant A >/dev/null
seq 1 20 | sed 's/^/b/' | E --queue "$q" --tenant B >/dev/null
run 0 'depth=2021' E --queue "$q" nobody # no tenant: the stream is a lane of its own
run 0 '^A +2000 +0 +0 +1' A fair "$q"
grep -qE '^B +20 ' "$tmp/out" || fail "lane B: $(cat "$tmp/out")"
timeout 30 "${worker[@]}" --queue "$q" --handler sleep:2 --concurrency 1 --record "$tmp/r1" \
    --max-messages 300 >/dev/null
# the place of B's last entry among the first 300 processed
last_b=$(awk '$2 ~ /^b/ { n = NR } END { print n + 0 }' "$tmp/r1")
nb=$(awk '$2 ~ /^b/' "$tmp/r1" | wc -l)
[ "$nb" = 20 ] && [ "$last_b" -le 100 ] || fail "B: $nb of 20 done, the last at place $last_b"
# depth = waiting + in flight, the lanes included
run 0 'depth +1,721 ' A stats "$q" --sample 0

# /metrics: the lanes are in depth and pending, and shown apart (the log created first: the
# loop below may read it before the worker's redirection does)
: >"$tmp/mlog"
"${worker[@]}" --queue "$q" --handler sleep:60000 --concurrency 5 --metrics 127.0.0.1:0 \
    --log-level info 2>"$tmp/mlog" >/dev/null &
mpid=$!
pids+=("$mpid")
mport=""
for i in $(seq 1 100); do
    mport=$(sed -n 's/.*event=metrics_listening.* port=\([0-9]*\).*/\1/p' "$tmp/mlog" | head -1)
    [ -n "$mport" ] && grep -q 'sluice_queue_pending{[^}]*} 5$' "$tmp/m" 2>/dev/null && break
    [ -n "$mport" ] && curl -s --max-time 5 "http://127.0.0.1:$mport/metrics" >"$tmp/m" || true
    sleep 0.1
done
kill -KILL "$mpid" # it held 5 (left pending: this queue is not read again)
lanes=$(rcli HGET "sluice:{$q}:meta" lane_depth)
in_stream=$(rcli XPENDING "sluice:{$q}:stream" workers | head -n 1)
for want in 'sluice_queue_depth{[^}]*} 1721$' "sluice_queue_lane_depth{[^}]*} $lanes\$" \
    'sluice_queue_pending{[^}]*} 5$' "sluice_queue_lane_pending{[^}]*} $((5 - in_stream))\$"; do
    grep -q "$want" "$tmp/m" || fail "/metrics lacks /$want/: $(grep sluice_queue "$tmp/m")"
done

# ---- weights: A=3, B=1, both backlogged: shares within 5 % of 3:1 ----
qw="$q-w"
run 0 'weight of A on .*: 3' A fair "$qw" on --weight A=3
seq 1 1000 | sed 's/^/a/' | E --queue "$qw" --tenant A >/dev/null
seq 1 1000 | sed 's/^/b/' | E --queue "$qw" --tenant B >/dev/null
timeout 30 "${worker[@]}" --queue "$qw" --handler noop --concurrency 4 --record "$tmp/rw" \
    --max-messages 800 >/dev/null
na=$(awk '$2 ~ /^a/' "$tmp/rw" | wc -l)
nb=$(awk '$2 ~ /^b/' "$tmp/rw" | wc -l)
# 800 served: 600 A and 200 B at 3:1 (5 %: A 570..630)
[ "$na" -ge 570 ] && [ "$na" -le 630 ] || fail "weights 3:1: A=$na B=$nb of 800"

# ---- switching with entries waiting loses nothing; everything drains; counts come back ----
qs="$q-s"
seq 1 50 | sed 's/^/old/' | E --queue "$qs" --tenant T >/dev/null # before: one stream
run 0 'fair .*: on' A fair "$qs" on
seq 1 30 | sed 's/^/x/' | E --queue "$qs" --tenant X >/dev/null
seq 1 30 | sed 's/^/y/' | E --queue "$qs" --tenant Y >/dev/null
run 0 'fair .*: off \(2 tenant lanes still holding entries' A fair "$qs" off
seq 1 10 | sed 's/^/late/' | E --queue "$qs" --tenant X >/dev/null # off: into the stream
run 0 'depth +120 ' A stats "$qs" --sample 0
timeout 30 "${worker[@]}" --queue "$qs" --handler noop --concurrency 8 --record "$tmp/rs" \
    --max-messages 120 >/dev/null
[ "$(awk '{ print $2 }' "$tmp/rs" | sort -u | wc -l)" = 120 ] || fail "switching lost or doubled"
for k in lanes lwait ring lane:X lane:Y; do
    [ "$(rcli EXISTS "sluice:{$qs}:$k")" = 0 ] || fail "$k left after the drain"
done
[ "$(rcli HGET "sluice:{$qs}:meta" lane_depth)" = 0 ] || fail "lane_depth drifted"
run 0 'depth +0 ' A stats "$qs" --sample 0

# ---- a dead letter of a lane goes back to its lane; retries stay in their lane ----
run 0 'fair .*: on' A fair "$qs" on
run 0 'admitted=1' E --queue "$qs" --tenant P poison
timeout 20 "${worker[@]}" --queue "$qs" --handler exec:false --max-deliveries 1 \
    --max-messages 1 >/dev/null || true
[ "$(rcli XLEN "sluice:{$qs}:dead")" = 1 ] || fail "no dead letter"
[ "$(rcli HEXISTS "sluice:{$qs}:lanes" P)" = 0 ] || fail "the dead entry still counted in its lane"
run 0 'replayed' A dead replay "$qs"
[ "$(rcli XLEN "sluice:{$qs}:lane:P")" = 1 ] || fail "the replay did not go back to lane P"
timeout 20 "${worker[@]}" --queue "$qs" --handler noop --max-messages 1 >/dev/null
run 0 'depth +0 ' A stats "$qs" --sample 0

# a retry stays in its lane: reclaimed from it after its backoff, dead after 3 deliveries
run 0 'admitted=1' E --queue "$qs" --tenant R again
timeout 20 "${worker[@]}" --queue "$qs" --handler 'exec:exit 75' --max-deliveries 3 \
    --retry-backoff 50 --visibility-timeout 400 --max-messages 3 >/dev/null
rcli XRANGE "sluice:{$qs}:dead" - + | tr '\n' ' ' >"$tmp/dl"
grep -q 'deliveries 3 .*lane R' "$tmp/dl" || fail "retried lane entry: $(cat "$tmp/dl")"

# with a tenant share: the lanes' entries count in it and give their room back
run 0 'per-tenant share' A capacity "$qs" 100 --per-tenant 2
run 1 'admitted=2 rejected=1' E --queue "$qs" --tenant S s1 s2 s3
[ "$(rcli HGET "sluice:{$qs}:tdepth" S)" = 2 ] || fail "share count in a lane"
timeout 20 "${worker[@]}" --queue "$qs" --handler noop --max-messages 2 >/dev/null
[ "$(rcli HEXISTS "sluice:{$qs}:tdepth" S)" = 0 ] || fail "share count left after the acks"

# ---- drain-tenant holds one tenant back, the others keep flowing ----
ql="$q-l"
run 0 'fair .*: on' A fair "$ql" on
run 0 'drain-tenant' A limit "$ql" set slow drain-tenant 5/1s
seq 1 200 | sed 's/^/s/' | E --queue "$ql" --tenant S >/dev/null
seq 1 100 | sed 's/^/f/' | E --queue "$ql" --tenant F >/dev/null
run 0 'inflight-tenant' A limit "$ql" set one inflight-tenant 100000
run 0 'limit one on .* deleted' A limit "$ql" del one
timeout 30 "${worker[@]}" --queue "$ql" --handler noop --concurrency 8 --record "$tmp/rl" \
    --max-messages 30 >/dev/null
ns=$(awk '$2 ~ /^s/' "$tmp/rl" | wc -l)
nf=$(awk '$2 ~ /^f/' "$tmp/rl" | wc -l)
# each lane's rate is its own: S and F (5/1s each: a burst of 5, then one every 200 ms) share the
# first 30 evenly, neither waiting behind the other's backlog
[ "$ns" -ge 13 ] && [ "$nf" -ge 13 ] || fail "drain-tenant 5/1s: S=$ns F=$nf of the first 30"
# and each keeps its rate: its 15th entry comes at least 2 s (10 intervals) after its first
# (minus 50 ms for the time from the read to the record)
for t in s f; do
    span=$(awk -v t="^$t" '$2 ~ t { n++; if (n == 1) a = $3; if (n == 15) b = $3 } END {
        print (n >= 15) ? b - a : 99999 }' "$tmp/rl")
    [ "$span" -ge 1950 ] || [ "$span" = 99999 ] || fail "lane $t: 15 entries in $span ms"
done
[ "$(rcli XLEN "sluice:{$ql}:dead")" = 0 ] || fail "dead letters under drain-tenant"

# ---- the notification sender: drain 10/2s in all, drain-tenant 3/2s per event type, 5 types ----
qn="$q-n"
run 0 'fair .*: on' A fair "$qn" on
run 0 'drain log 10/2s' A limit "$qn" set all drain 10/2s --algorithm log
run 0 'drain-tenant log 3/2s' A limit "$qn" set per-type drain-tenant 3/2s --algorithm log
for t in 1 2 3 4 5; do
    seq 1 8 | sed "s/^/e$t-/" | E --queue "$qn" --tenant "type$t" >/dev/null
done
timeout 30 "${worker[@]}" --queue "$qn" --handler noop --concurrency 8 --record "$tmp/rn" \
    --max-messages 20 >/dev/null
# in any window a little shorter than the period (what a read is recorded after varies by a few
# ms) at most 10 in all and at most 3 of a type; in the first window the 10 come from at least 4
# types (each type with room goes while the others wait)
worst() { # PATTERN: the most records matching it in one 1,900 ms window
    awk -v p="$1" '$2 ~ p { t[++n] = $3 } END { j = 1; m = 0; for (i = 1; i <= n; i++) {
        while (t[i] - t[j] >= 1900) j++; if (i - j + 1 > m) m = i - j + 1 } print m }' "$tmp/rn"
}
all=$(worst '^e')
[ "$all" -le 10 ] || fail "drain 10/2s: $all in one window"
for t in 1 2 3 4 5; do
    n=$(worst "^e$t-")
    [ "$n" -le 3 ] || fail "drain-tenant 3/2s: type$t had $n in one window"
done
types=$(head -n 10 "$tmp/rn" | awk '{ split($2, a, "-"); print a[1] }' | sort -u | wc -l)
[ "$types" -ge 4 ] || fail "the first 10 came from $types types"

# ---- every lane held: the worker sleeps until the first may go, it does not ask again and
# again (on a server of its own, so its command counts are this worker's alone) ----
own="$tmp/own"
"$SLUICE_SOURCE_DIR/scripts/test-redis" start "$own" --no-aof >/dev/null
trap 'for x in "" -w -s -l -k -n; do purge "$q$x"; done; "$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$own" >/dev/null 2>&1; lib_cleanup' EXIT
ourl=$(cat "$own/url")
"$bin/sluice-admin" --redis "$ourl" fair held on >/dev/null
"$bin/sluice-admin" --redis "$ourl" limit held set slow drain-tenant 1/20s >/dev/null
for t in $(seq 1 200); do
    printf 'h%s-1\nh%s-2\n' "$t" "$t" | "$bin/sluice-enqueue" --redis "$ourl" --queue held \
        --tenant "t$t" >/dev/null
done
"${worker[@]}" --redis "$ourl" --queue held --handler noop --concurrency 8 --record "$tmp/rh" \
    >/dev/null &
hpid=$!
pids+=("$hpid")
wait_lines "$tmp/rh" 200 # the first entry of every lane goes at once (a burst of 1 each)
[ "$(wc -l <"$tmp/rh")" = 200 ] || fail "every lane's first entry: $(wc -l <"$tmp/rh") of 200"
calls() { redis-cli -u "$ourl" INFO commandstats | tr -d '\r' |
    awk -F'[:,=]' '$1 == "cmdstat_fcall" { print $3 }'; }
c0=$(calls)
sleep 1.5
c1=$(calls)
kill -TERM "$hpid"
# 1.5 s of 200 held lanes: a few calls (the meta check each second, the reclaim passes), not
# one read after another
[ $((c1 - c0)) -le 40 ] || fail "with every lane held the worker made $((c1 - c0)) calls in 1.5 s"
[ "$(wc -l <"$tmp/rh")" = 200 ] || fail "a held lane's second entry went early"

# ---- inflight-tenant 2 across 3 workers; a worker killed with -9 gives its leases back ----
qk="$q-k"
run 0 'fair .*: on' A fair "$qk" on
run 0 'inflight-tenant leases 2' A limit "$qk" set lease inflight-tenant 2
seq 1 30 | sed 's/^/k/' | E --queue "$qk" --tenant K >/dev/null
seq 1 30 | sed 's/^/j/' | E --queue "$qk" --tenant J >/dev/null
wk=()
for i in 1 2 3; do
    "${worker[@]}" --queue "$qk" --handler sleep:150 --concurrency 4 --visibility-timeout 1500 \
        --record "$tmp/rk$i" >/dev/null &
    pids+=("$!")
    wk+=("$!")
done
max=0
for i in $(seq 1 40); do # 2 s of samples
    for t in K J; do
        n=$(lane_in_flight "$qk" "$t")
        [ "$n" -gt "$max" ] && max=$n
    done
    sleep 0.05
done
[ "$max" -le 2 ] && [ "$max" -ge 1 ] || fail "a tenant had $max in flight (inflight-tenant 2)"
kill -KILL "${wk[0]}" # holds leases (sleep:150: mid-handler nearly always)
for i in $(seq 1 200); do # everything done within the visibility timeout and the drain time
    [ "$(cat "$tmp"/rk* 2>/dev/null | awk '{ print $2 }' | sort -u | wc -l)" -ge 60 ] && break
    sleep 0.1
done
done_n=$(cat "$tmp"/rk* | awk '{ print $2 }' | sort -u | wc -l)
[ "$done_n" = 60 ] || fail "after kill -9: $done_n of 60 done"
for i in $(seq 1 50); do # the killed worker's last acks may be in flight: settle
    [ "$(rcli HGET "sluice:{$qk}:meta" lane_depth)" = 0 ] && break
    sleep 0.1
done
[ "$(rcli HGET "sluice:{$qk}:meta" lane_depth)" = 0 ] || fail "leases or entries left"
echo "test_fair: ok (B's last at place $last_b of 300; weights 3:1 gave A=$na B=$nb of 800;" \
    "drain-tenant 5/1s: S=$ns F=$nf; 10/2s over 3/2s per type: at most $all in a window," \
    "first 10 from $types types; max in flight per tenant $max of 2)"
