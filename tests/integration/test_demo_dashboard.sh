#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/demo --dashboard on the fixture's server with the built binaries, as a person runs it
# (until stopped): it prints the page's URL and the admin token file (mode 0600); the page
# answers at /ui/, the queue's JSON at /v1/queues/{q} shows the overload (a non-zero depth and
# rejections) and the gateway's capacity is the demo's; the printed token pauses and resumes the
# queue through POST /v1/admin/... (401 without it). Stopped (SIGTERM, as Ctrl-C), the demo
# leaves nothing: its queue's keys, its processes, the token file.
. "$(dirname "$0")/lib.sh"
# made here, not only by the child's redirection: the loop below may read it first
: >"$tmp/demo"
SLUICE_BIN_DIR=$bin SLUICE_REDIS_URL=$url timeout 60 "${SLUICE_SOURCE_DIR:?}/scripts/demo" \
    --dashboard --capacity 300 >"$tmp/demo" 2>&1 &
demo=$!
pids+=("$demo")
base="" token=""
for _ in $(seq 1 150); do
    base=$(sed -n 's|^dashboard: \(http://127\.0\.0\.1:[0-9]*/\)ui/ .*|\1|p' "$tmp/demo")
    [ -n "$base" ] && break
    kill -0 "$demo" 2>/dev/null || break
    sleep 0.1
done
[ -n "$base" ] || fail "no dashboard URL printed: $(cat "$tmp/demo")"
q=$(sed -n 's/^queue "\(demo-[0-9]*\)" on .*/\1/p' "$tmp/demo")
[ -n "$q" ] || fail "no queue named: $(cat "$tmp/demo")"
token=$(sed -n 's/^admin token: in \([^ ]*\) (mode 0600.*/\1/p' "$tmp/demo")
[ -n "$token" ] && [ -s "$token" ] || fail "no token file printed: $(cat "$tmp/demo")"
[ "$(stat -c %a "$token")" = 600 ] || fail "token file mode $(stat -c %a "$token")"

code=$(curl -s -o "$tmp/ui" -w '%{http_code}' --max-time 5 "${base}ui/")
[ "$code" = 200 ] && grep -qi '<html' "$tmp/ui" || fail "/ui/ answered $code: $(head -c 300 "$tmp/ui")"

# figure QUEUE-JSON-FILE FIELD: a top-level number or boolean of the queue's JSON
figure() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
ok=0
for _ in $(seq 1 40); do
    curl -s --max-time 5 "${base}v1/queues/$q" >"$tmp/qj" || true
    if [ "$(figure "$tmp/qj" depth 2>/dev/null || echo 0)" -gt 0 ] &&
        [ "$(figure "$tmp/qj" rejected 2>/dev/null || echo 0)" -gt 0 ]; then
        ok=1
        break
    fi
    sleep 0.2
done
[ "$ok" = 1 ] || fail "no depth and rejections in /v1/queues/$q: $(cat "$tmp/qj")"
[ "$(figure "$tmp/qj" capacity)" = 300 ] || fail "capacity: $(cat "$tmp/qj")"

# the printed token works: pause, then resume
admin() { # ACTION: POST it with the token; the status code
    curl -s -o "$tmp/admin" -w '%{http_code}' --max-time 5 -X POST \
        -H "Authorization: Bearer $(cat "$token")" "${base}v1/admin/queues/$q/$1"
}
[ "$(admin pause)" = 200 ] || fail "pause: $(cat "$tmp/admin")"
[ "$(rcli HGET "sluice:{$q}:meta" paused)" = 1 ] || fail "pause did not reach the queue's meta"
[ "$(admin resume)" = 200 ] || fail "resume: $(cat "$tmp/admin")"
[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "${base}v1/admin/queues/$q/pause")" = 401 ] ||
    fail "pause without the token was not refused with 401"

kill -0 "$demo" 2>/dev/null || fail "the demo stopped by itself: $(cat "$tmp/demo")"
row='^ +[0-9]+s +2 +[0-9,]+ +[0-9,]+ +[0-9,]+ +[0-9]+/300 '
for _ in $(seq 1 50); do
    grep -qE "$row" "$tmp/demo" && break
    sleep 0.1
done
grep -qE "$row" "$tmp/demo" || fail "no row of the live table: $(cat "$tmp/demo")"
kill -TERM "$demo"
rc=0
wait "$demo" || rc=$?
[ "$rc" = 130 ] || fail "scripts/demo --dashboard exited $rc on SIGTERM: $(cat "$tmp/demo")"
[ ! -e "$token" ] || fail "the token file $token was left behind"
[ -z "$(rcli --scan --pattern "sluice:{$q}*")" ] || fail "keys of $q left: $(rcli --scan --pattern "sluice:{$q}*")"
! pgrep -f -- "--queue $q" >/dev/null || fail "processes of $q left: $(pgrep -af -- "--queue $q")"
echo "ok: scripts/demo --dashboard prints a live page's URL and a working admin token, stops cleanly"
