#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Credentials and a db other than 0, through both kinds of connection (its own redis-server, so
# the ACL user and the keys never touch the fixture): an ACL user's redis://user:pass@host/3
# URL, used by sluice-enqueue and sluice-admin (blocking), the gateway and sluice-worker
# (async), is one queue in db 3 and nothing in db 0. A wrong password ends each binary that
# runs once with exit 3 and the server's refusal, never the password: sluice-enqueue,
# sluice-admin, and sluice-worker (at once, as for a missing ACL permission, instead of
# retrying the refused AUTH forever).
. "$(dirname "$0")/lib.sh"
src=${SLUICE_SOURCE_DIR:?run through ctest}
srv="$tmp/redis"
"$src/scripts/test-redis" start "$srv" --no-aof >/dev/null
pids+=("$(cat "$srv/pid")")
rport=$(cat "$srv/port")
url="redis://127.0.0.1:$rport"
rcli ACL SETUSER app on '>app-secret-pw' '~*' '&*' '+@all' >/dev/null
u="redis://app:app-secret-pw@127.0.0.1:$rport/3"
bad="redis://app:not-the-pw-77@127.0.0.1:$rport/3"
q=authdb

# ---- one queue in db 3, whichever connection ----
run 0 "admitted=2 " "$bin/sluice-enqueue" --redis "$u" --queue "$q" e1 e2
gateway_start --redis "$u" --queue "$q" # sets port, the gateway's
for i in 1 2; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -d "g$i" \
        "http://127.0.0.1:$port/v1/queues/$q/messages")
    [ "$code" = 202 ] || fail "gateway POST $i: HTTP $code"
done
run 0 "processed=4 " timeout 30 "$bin/sluice-worker" --redis "$u" --queue "$q" --max-messages 4
run 0 '"acked":4' "$bin/sluice-admin" --redis "$u" stats "$q" --sample 0 --json
[ "$(rcli -n 3 HGET "sluice:{$q}:stats" acked)" = 4 ] || fail "db 3: acked is not 4"
[ "$(rcli -n 0 DBSIZE)" = 0 ] || fail "db 0 has keys: $(rcli -n 0 KEYS '*' | head -5)"

# ---- a wrong password: exit 3, the refusal named, the password never printed ----
nopw() { ! grep -q "not-the-pw-77" "$tmp/out" || fail "$1 printed the password: $(cat "$tmp/out")"; }
run 3 "WRONGPASS" "$bin/sluice-enqueue" --redis "$bad" --queue "$q" x
nopw sluice-enqueue
run 3 "WRONGPASS" "$bin/sluice-admin" --redis "$bad" stats "$q"
nopw sluice-admin
run 3 "authentication failed.*WRONGPASS" timeout 20 "$bin/sluice-worker" --redis "$bad" --queue "$q"
nopw sluice-worker
echo "test_auth_db: ok"
