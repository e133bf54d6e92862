#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The limits-configuration version (meta `limits_v`, docs/data-model.md): admission takes the
# parsed limits it keeps without reading the limits hash while the version it read them with
# stands, so a change through sluice_limits_config or `sluice-admin limit` (which move the
# version) is seen by the very next admission; a hash written directly, past the function, is
# seen within a second; a queue without the version field (configured before it) reads the
# hash on every call, as it always did. The paced read (sluice_take) sees a change at once too.
. "$(dirname "$0")/lib.sh"
q="lver-$$"
keys+=($(queue_keys "$q") "sluice:{$q}:limits")
cleanup_state() { rcli --scan --pattern "sluice:{$q}:qlim:*" | xargs -r redis-cli -u "$url" DEL >/dev/null; }
trap 'cleanup_state; lib_cleanup' EXIT
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
E() { "$bin/sluice-enqueue" --redis "$url" --queue "$q" "$@"; }
meta="sluice:{$q}:meta" lkey="sluice:{$q}:limits"
# one message through sluice_admit2: "id" (admitted) or the refusing limit's name
admit() {
    local r
    r=$(rcli FCALL sluice_admit2 3 "sluice:{$q}:stream" "$meta" "sluice:{$q}:stats" 1000 0 1 m)
    case "$(echo "$r" | sed -n 6p)" in
    *-*) echo id ;;
    *) echo "$r" | sed -n 6p ;;
    esac
}
cfg() { rcli FCALL sluice_limits_config 2 "$lkey" "$meta" "$@"; }
want() { # want WHAT CONTEXT: the next admission gives WHAT
    local got
    got=$(admit)
    [ "$got" = "$1" ] || fail "$2: the admission gave '$got', expected '$1'"
}

run 0 'admitted=1' E --capacity 1000 seed # loads this build's library
# through the function: every change moves the version and the next admission sees it
[ -z "$(rcli HGET "$meta" limits_v)" ] || fail "a queue without limits has a version"
cfg set big queue fixed:1000:3600000 >/dev/null
v1=$(rcli HGET "$meta" limits_v)
[[ "$v1" =~ ^[0-9]+$ ]] || fail "limits_v after a set: '$v1'"
want id 'under big alone'
cfg set one queue log:1:3600000 >/dev/null
v2=$(rcli HGET "$meta" limits_v)
[ "$v2" != "$v1" ] || fail "the version did not move: $v1"
want id 'first under one'
want one 'second under one (1 an hour)'
cfg set one queue log:100:3600000 >/dev/null
want id 'one raised to 100 through sluice_limits_config'
cfg del one >/dev/null
want id 'one deleted'
# through sluice-admin: the same
run 0 'limit one' A limit "$q" set one queue 1/1h --algorithm log
want one 'one set to 1/1h again through sluice-admin (3 counted)'
run 0 'limit one' A limit "$q" set one queue 10/1h --algorithm log
want id 'one raised to 10 through sluice-admin'
run 0 'deleted' A limit "$q" del one
want id 'one deleted through sluice-admin'

# the paced read (sluice_take) takes its drain limits the same way: a change is seen at once
rcli XGROUP CREATE "sluice:{$q}:stream" g 0 >/dev/null
take() { # "read" (an entry read) or "held" (held back by the drain rate)
    local w
    w=$(rcli FCALL sluice_take 2 "sluice:{$q}:stream" "$meta" g c 1 | tail -2 | head -1)
    [ "$w" = 0 ] && echo read || echo held
}
cfg set d drain gcra:1:3600000 >/dev/null
[ "$(take)" = read ] || fail "the first read under d"
[ "$(take)" = held ] || fail "the second read under d (1 an hour) was not held"
cfg set d drain gcra:1000:3600000 >/dev/null
[ "$(take)" = read ] || fail "d raised to 1000 an hour: the next read was held"
cfg del d >/dev/null

# written directly (not through the function, the version does not move): seen within a second
want id 'before the direct write'
rcli HSET "$lkey" one 'queue log:1:3600000' >/dev/null
rcli HSET "$meta" limits 2 >/dev/null # as the function would count it
admit >/dev/null # seen now or not: within a second of the last read of the hash
sleep 1.2
want one 'a second after the direct write'

# a queue without the version field: the hash is read on every call
rcli HDEL "$meta" limits_v >/dev/null
want one 'without the version'
rcli HSET "$lkey" one 'queue log:100:3600000' >/dev/null
want id 'a direct write, without the version: the very next admission'
rcli HSET "$lkey" one 'queue log:1:3600000' >/dev/null
want one 'written back, without the version: the very next admission'
echo "test_limits_version: ok"
