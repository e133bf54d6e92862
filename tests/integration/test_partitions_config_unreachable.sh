#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The configuration of a partitioned queue with one partition unreachable (here a user whose ACL
# leaves out Q~1's keys, the failure of that partition's primary being down): `limit Q set`,
# `fair Q on` and `capacity Q N` fail (exit 3) and a failed call changes nothing - before, each
# wrote partition 0 and then stopped at partition 1, leaving the partitions disagreeing (a
# limit, fair mode or a capacity in partition 0 only) under an error that names no partition.
. "$(dirname "$0")/lib.sh"
q="pcu-$$"
user="pcu-$$"
A() { "$bin/sluice-admin" --redis "$url" "$@"; }
trap 'for i in "" ~1 ~2; do A purge "$q$i" --yes >/dev/null 2>&1 || true; done
      rcli ACL DELUSER "$user" "$user-ro" >/dev/null 2>&1 || true; lib_cleanup' EXIT

run 0 "capacity of $q: 300" A capacity "$q" 300
run 0 'partitions of .*: 3 ' A partitions "$q" 3
seq 1 30 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >"$tmp/e" 2>&1 || fail "$(cat "$tmp/e")"
rcli ACL SETUSER "$user" reset on ">pw" +@all "~sluice:{$q}:*" "~sluice:{$q~2}:*" >/dev/null
uurl=${url/redis:\/\//redis://$user:pw@}
U() { "$bin/sluice-admin" --redis "$uurl" "$@"; }

run 3 "partition $q~1 \\(nothing was written\\)" U limit "$q" set g queue 30/1h
[ "$(rcli HLEN "sluice:{$q}:limits")" = 0 ] ||
    fail "limit set failed at $q~1 but partition 0 has the limit: $(rcli HGETALL "sluice:{$q}:limits" | tr '\n' ' ')"
run 3 "partition $q~1 \\(nothing was written\\)" U fair "$q" on
[ -z "$(rcli HGET "sluice:{$q}:meta" fair)" ] || [ "$(rcli HGET "sluice:{$q}:meta" fair)" = 0 ] ||
    fail "fair on failed at $q~1 but partition 0 is fair"
run 3 "partition $q~1 \\(nothing was written\\)" U capacity "$q" 600
[ "$(rcli HGET "sluice:{$q}:meta" capacity)" = 100 ] ||
    fail "capacity 600 failed at $q~1 but partition 0 has $(rcli HGET "sluice:{$q}:meta" capacity) (total $(rcli HGET "sluice:{$q}:meta" capacity_total))"
# a partition that would refuse the write (a list queue: no fair mode, no drain limit) is found
# before anything is written, and named
rcli HSET "sluice:{$q~2}:meta" backend list >/dev/null
run 2 "partition $q~2 is a list queue: a drain limit needs the stream backend" \
    A limit "$q" set d drain 30/1h
[ "$(rcli HLEN "sluice:{$q}:limits")" = 0 ] || fail "drain limit refused at $q~2 but set in $q"
run 2 "partition $q~2 is a list queue: fair mode needs" A fair "$q" on
[ -z "$(rcli HGET "sluice:{$q}:meta" fair)" ] || fail "fair refused at $q~2 but $q is fair"
rcli HDEL "sluice:{$q~2}:meta" backend >/dev/null
# Q~1 readable but not writable: the check passes and the write stops there, saying what it did
rcli ACL SETUSER "$user-ro" reset on ">pw" +@all "~sluice:{$q}:*" "%R~sluice:{$q~1}:*" \
    "~sluice:{$q~2}:*" >/dev/null
R() { "$bin/sluice-admin" --redis "${url/redis:\/\//redis://$user-ro:pw@}" "$@"; }
run 3 "stopped at partition $q~1: partition $q was written, $q~1 to $q~2 were not" \
    R limit "$q" set g queue 30/1h
echo "test_partitions_config_unreachable: with $q~1 unreachable, limit set, fair on and capacity" \
    "fail and leave partition 0 as it was"
