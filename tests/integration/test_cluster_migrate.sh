#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Calls whose queue's slot is being migrated, on its own Redis Cluster (3 primaries, 3 replicas,
# started here and stopped by their PIDs). The slots are moved by hand (SETSLOT IMPORTING /
# MIGRATING, MIGRATE, SETSLOT NODE) and held in each phase while the calls are made.
#
# A function derives keys it is not given (limits and their state, share counts, fair lanes):
# while the slot migrates it must never fail half-way on one ("non local key"), nor read one
# still on the source as absent on the importing node (a limit bypassed), but run when every
# key it needs is on the node and otherwise answer TRYAGAIN, which clients retry within
# their deadline and then report as a migration (sluice-enqueue, the gateway's 503 detail, a
# fair worker's log), never as a raw ASK, a bare timeout or "busy running a script". The
# gateway's admission waits out a migration that ends within its deadline (202, not 503).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
cluster_start
load_library # the calls below made with redis-cli may meet a node no client has used
other_primary() { primaries | grep -vx "$1" | head -n 1; } # port -> another primary
# migrating Q: the slot of Q goes MIGRATING on its owner ($msrc) to $mdst, nothing moved yet
migrating() {
    mslot=$(slot_of "$1")
    msrc=$(slot_owner "$mslot")
    mdst=$(other_primary "$msrc")
    rc "$mdst" CLUSTER SETSLOT "$mslot" IMPORTING "$(rc "$msrc" CLUSTER MYID)" | grep -q OK ||
        fail "IMPORTING $1"
    rc "$msrc" CLUSTER SETSLOT "$mslot" MIGRATING "$(rc "$mdst" CLUSTER MYID)" | grep -q OK ||
        fail "MIGRATING $1"
}
move_keys() { # KEY... from $msrc to $mdst
    rc "$msrc" MIGRATE 127.0.0.1 "$mdst" "" 0 5000 KEYS "$@" | grep -q OK || fail "MIGRATE $*"
}
finish() { # every key of the slot moves, then the slot is $mdst's everywhere
    local ks
    mapfile -t ks < <(rc "$msrc" CLUSTER GETKEYSINSLOT "$mslot" 1000 | grep .)
    [ "${#ks[@]}" -eq 0 ] || move_keys "${ks[@]}"
    local p
    for p in "${ports[@]}"; do
        [ "$p" != "${skip:-}" ] || continue # a node stopped on purpose
        rc "$p" CLUSTER SETSLOT "$mslot" NODE "$(rc "$mdst" CLUSTER MYID)" >/dev/null; done
}
enq() { "$bin/sluice-enqueue" --redis "$curl" "$@"; }
post() { # IDEMPOTENCY-KEY BODY: a gateway POST to $q; prints the HTTP code, the body in $tmp/b
    curl -s --max-time 10 -o "$tmp/b" -w '%{http_code}' -H "Idempotency-Key: $1" -d "$2" \
        "http://127.0.0.1:$port/v1/queues/$q/messages"
}
gateway_up() {
    local i
    for i in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && return 0
        sleep 0.05
    done
}
finish_soon() { # finishes the migration in the background ~300 ms from now; sets $fp
    (sleep 0.3 && finish) >"$tmp/fin" 2>&1 &
    fp=$!
    pids+=("$fp")
}
adm() { "$bin/sluice-admin" --redis "$curl" "$@" >/dev/null; }
migr='being migrated'

# ---- an admission with limits: runs when its keys are here, TRYAGAIN when one is not ----
q=lim$$
adm limit "$q" set per-tenant tenant 10/1h # one unit: a state of 6 min
enq --queue "$q" --tenant t1 a >/dev/null
migrating "$q"
run 0 'admitted=1' enq --queue "$q" --tenant t1 --timeout 2000 b # t1's state is on the source
# a tentative call (stride 3t: the producer may try another partition) reads its triples too
out=$(rc "$msrc" FCALL sluice_admit2 3 "sluice:{$q}:stream" "sluice:{$q}:meta" "sluice:{$q}:stats" \
    1000 0 3t t1 '' tentative 2>&1)
[ "$(printf '%s\n' "$out" | head -n 1)" = 1 ] || fail "stride 3t during MIGRATING: $out"
run 3 "$migr" enq --queue "$q" --tenant t2 --timeout 600 c      # t2 has none yet: TRYAGAIN
! grep -q 'non local' "$tmp/out" || fail "a derived key failed the call: $(cat "$tmp/out")"
finish
run 0 'admitted=1' enq --queue "$q" --tenant t2 d
[ "$(rc "$mdst" XLEN "sluice:{$q}:stream")" = 4 ] || fail "limits: not 4 entries on the target"

# ---- on the importing node, a limit still on the source is never read as absent ----
q=gate$$
adm limit "$q" set whole queue 1/1h
run 0 'admitted=1' enq --queue "$q" a
run 1 'limited=1' enq --queue "$q" b # the queue's one unit is spent
migrating "$q"
move_keys "sluice:{$q}:stream" "sluice:{$q}:meta" "sluice:{$q}:stats" # limits stay: ASK phase
run 3 "$migr" enq --queue "$q" --timeout 600 c
n=$(printf 'ASKING\nXLEN sluice:{%s}:stream\n' "$q" | redis-cli -p "$mdst" | tail -n 1)
[ "$n" = 1 ] || fail "admitted past its limit on the target: XLEN $n"
finish
run 1 'limited=1' enq --queue "$q" d

# ---- a share queue's ack: never half-way (XACK without XDEL) when meta has moved ----
q=share$$
adm capacity "$q" 100 --per-tenant 10
enq --queue "$q" --tenant t1 a >/dev/null
s="sluice:{$q}:stream" st="sluice:{$q}:stats"
[ "$(owner "$q")" != "" ] || fail "no owner"
p0=$(owner "$q")
rc "$p0" XGROUP CREATE "$s" g 0 >/dev/null
id=$(rc "$p0" XREADGROUP GROUP g c1 COUNT 1 STREAMS "$s" '>' | grep -m1 -E '^[0-9]+-[0-9]+$')
migrating "$q"
move_keys "sluice:{$q}:meta"
out=$(rc "$msrc" FCALL sluice_ack 2 "$s" "$st" g "$id" 2>&1)
case $out in TRYAGAIN*) ;; *) fail "ack with meta moved: '$out', expected TRYAGAIN" ;; esac
[ "$(rc "$msrc" XPENDING "$s" g | head -n 1)" = 1 ] || fail "the ack ran half-way: entry not pending"
[ "$(rc "$msrc" XLEN "$s")" = 1 ] || fail "the ack ran half-way: entry deleted"
finish
[ "$(rc "$mdst" FCALL sluice_ack 2 "$s" "$st" g "$id")" = 1 ] || fail "ack after the migration"
[ "$(rc "$mdst" HGET "sluice:{$q}:tdepth" t1)" = "" ] || fail "share count not released"

# ---- a new idempotency key: honest detail in both phases, blocking and gateway ----
q=idem$$
enq --queue "$q" a >/dev/null
gateway_start --redis "$curl" --queue "$q" --timeout 2500 --log-level debug
gateway_up
migrating "$q"
run 3 "$migr" enq --queue "$q" --idempotency-key k1 --timeout 600 b
! grep -q 'deadline passed' "$tmp/out" || fail "a bare timeout: $(cat "$tmp/out")"
code=$(post k2 c) # the migration outlasts the gateway's deadline: 503, its log names the slot
[ "$code" = 503 ] && grep -q 'migrated' "$tmp/b" ||
    fail "gateway during MIGRATING: $code $(cat "$tmp/b")"
grep -q "event=admit_failed .*slot $mslot (the queue's) is being migrated.*tries in" "$tmp/gw.log" ||
    fail "gateway log during MIGRATING: $(grep -m1 admit_failed "$tmp/gw.log")"
run 0 'admitted=1' enq --queue "$q" --timeout 2000 plain # keyless: all its keys are here
mapfile -t ks < <(rc "$msrc" CLUSTER GETKEYSINSLOT "$mslot" 100 | grep .)
move_keys "${ks[@]}" # the ASK phase: everything moved, the slot not yet reassigned
run 3 "$migr" enq --queue "$q" --idempotency-key k3 --timeout 600 d
! grep -qE '(^|: )ASK [0-9]' "$tmp/out" || fail "a raw ASK: $(cat "$tmp/out")"
run 0 'admitted=1' enq --queue "$q" --timeout 2000 plain2 # keyless: through the ASK
finish_soon # the gateway follows the ASK, meets TRYAGAIN there, and tries again until MOVED
code=$(post k4 f)
wait "$fp" || fail "finishing the migration: $(cat "$tmp/fin")"
[ "$code" = 202 ] || fail "gateway in the ASK phase, the migration ending: $code $(cat "$tmp/b")"
run 0 'admitted=1' enq --queue "$q" --idempotency-key k3 e
migrating "$q" # again, back: the source answers TRYAGAIN until the slot is the target's
finish_soon
code=$(post k5 g)
wait "$fp" || fail "finishing the migration: $(cat "$tmp/fin")"
[ "$code" = 202 ] || fail "gateway during MIGRATING, the migration ending: $code $(cat "$tmp/b")"
[ "$(rc "$mdst" XLEN "sluice:{$q}:stream")" = 6 ] || fail "idem: not 6 entries on the target"

# ---- --wait-replicas: the WAIT behind a call sent again after TRYAGAIN goes with the call ----
# The target's replica is stopped: the call runs on the target once the migration ends, and
# its WAIT, sent there after it, times out (503 outcome unknown). Answered by the source, whose
# replica is up, it would confirm a write the target's replica never saw (202).
q=wait$$
enq --queue "$q" a >/dev/null
gateway_start --redis "$curl" --queue "$q" --timeout 2500 --wait-replicas 1 --wait-timeout 200
gateway_up
migrating "$q"
rport=$(replica_of "$mdst")
rpid=$(pid_of "$rport")
[ -n "$rpid" ] || fail "no replica of $mdst"
kill -STOP "$rpid"
skip=$rport
finish_soon
code=$(post k1 b)
wait "$fp" || fail "finishing the migration: $(cat "$tmp/fin")"
kill -CONT "$rpid"
skip=
[ "$code" = 503 ] && grep -q 'outcome unknown' "$tmp/b" ||
    fail "WAIT behind a call sent again: $code $(cat "$tmp/b")"

# ---- a fair queue's worker: no error storm, no 'non local key' while the slot migrates ----
q=fair$$
adm fair "$q" on
for t in a b; do seq -f "$t-%g" 1 200 | enq --queue "$q" --tenant "$t" >/dev/null; done
"$bin/sluice-worker" --redis "$curl" --queue "$q" --handler sleep:5 --concurrency 2 \
    --record "$tmp/rec" >/dev/null 2>"$tmp/w.log" &
wp=$!
pids+=("$wp")
wait_lines "$tmp/rec" 20 10
migrating "$q"
: >"$tmp/w.log"
sleep 2
lines=$(wc -l <"$tmp/w.log")
! grep -q 'non local' "$tmp/w.log" || fail "fair worker: $(grep -m1 'non local' "$tmp/w.log")"
[ "$lines" -lt 200 ] || fail "fair worker: $lines log lines in 2 s of MIGRATING: $(grep -ao "event=[a-z_]*" "$tmp/w.log" | sort | uniq -c | tr "\n" " ") $(tr -d "\000" <"$tmp/w.log" | tail -n 2)"
finish
wait_lines "$tmp/rec" 400 20
kill -TERM "$wp"
wait "$wp" || true
[ "$(awk '{ print $2 }' "$tmp/rec" | sort -u | wc -l)" = 400 ] ||
    fail "fair worker: $(awk '{ print $2 }' "$tmp/rec" | sort -u | wc -l) of 400 processed"
echo "ok"
