# SPDX-License-Identifier: MIT
# Shared by the integration tests that start a Sentinel group of their own (sourced after
# lib.sh, not run):
#   sentinel_start MASTER  a primary and one replica (scripts/test-redis, no AOF) and 3 sentinels
#                          (redis-server --sentinel, `sentinel monitor MASTER 127.0.0.1 PORT 2`,
#                          down-after-milliseconds 1000, failover-timeout 5000) on free loopback
#                          ports, every one stopped by its PID on exit; sets surl (the
#                          redis+sentinel://S1,S2,S3/MASTER URL), sports (the sentinels' ports),
#                          pport and rport (the primary's and the replica's); with
#                          SENTINEL_REPLICAS=2 a second replica too (r2port), so that a promoted
#                          replica has one of its own at once (WAIT 1 after a failover)
#   sentinel_kill I        kill -9 of sentinel number I (0..2)
#   sentinel_master M      the address (HOST:PORT) the first sentinel that answers names
#   fake_sentinel_start NAME ARGS...  a scripted sentinel (fake_sentinel.py with ARGS: --host and
#                          --port, or --addr-file) on a free port, killed on exit; sets fport
#   demoted_start          a server of its own (to be demoted under a client with REPLICAOF),
#                          killed on exit; sets dport and writes "127.0.0.1 DPORT" to $tmp/addr
#                          (the address file of a scripted sentinel)
#   wait_failover M OLD SECS  waits (bounded) until every sentinel still running names a
#                          primary other than OLD (HOST:PORT), the same, answering ROLE master;
#                          prints it; fails the test otherwise
sdir=$tmp/sentinel
sports=()
spids=()
pport='' rport='' r2port='' surl=''

sentinel_cleanup() {
    local p
    for p in "${spids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
    "$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$sdir/replica" >/dev/null 2>&1 || true
    "$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$sdir/replica2" >/dev/null 2>&1 || true
    "$SLUICE_SOURCE_DIR/scripts/test-redis" stop "$sdir/primary" >/dev/null 2>&1 || true
    lib_cleanup
}

# One sentinel on a free port (a few tries); appends to sports and spids.
sentinel_launch() { # index master
    local i=$1 m=$2 d="$sdir/s$1" port
    mkdir -p "$d"
    for _ in $(seq 1 20); do
        port=$(free_port)
        cat >"$d/sentinel.conf" <<EOF
port $port
bind 127.0.0.1
daemonize no
dir $d
logfile $d/sentinel.log
sentinel monitor $m 127.0.0.1 $pport 2
sentinel down-after-milliseconds $m 1000
sentinel failover-timeout $m 5000
sentinel parallel-syncs $m 1
EOF
        # started from a subshell: not a job of the test's shell, so no "Killed" at the end
        (redis-server "$d/sentinel.conf" --sentinel </dev/null >/dev/null 2>&1 &
            echo $! >"$d/pid")
        local pid
        pid=$(cat "$d/pid")
        # ours when the server answering has its PID: another test's server may hold the port
        mine() { [ "$(redis-cli -p "$port" INFO server 2>/dev/null | tr -d '\r' |
            sed -n 's/^process_id://p')" = "$pid" ]; }
        for _ in $(seq 1 50); do
            mine && break
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.05
        done
        if mine; then
            sports+=("$port")
            spids+=("$pid")
            return 0
        fi
        kill -KILL "$pid" 2>/dev/null || true
    done
    fail "could not start sentinel $i (see $d/sentinel.log)"
}

sentinel_start() {
    local m=$1 i
    trap sentinel_cleanup EXIT
    mkdir -p "$sdir"
    "$SLUICE_SOURCE_DIR/scripts/test-redis" start "$sdir/primary" --no-aof -- \
        --repl-diskless-sync-delay 0 >/dev/null
    pport=$(cat "$sdir/primary/port")
    local nrep=${SENTINEL_REPLICAS:-1} r
    for r in replica replica2; do
        [ "$r" = replica2 ] && [ "$nrep" -lt 2 ] && break
        "$SLUICE_SOURCE_DIR/scripts/test-redis" start "$sdir/$r" --no-aof -- \
            --replicaof 127.0.0.1 "$pport" --repl-diskless-sync-delay 0 >/dev/null
    done
    rport=$(cat "$sdir/replica/port")
    [ "$nrep" -lt 2 ] || r2port=$(cat "$sdir/replica2/port")
    for i in $(seq 1 100); do
        [ "$(redis-cli -p "$pport" INFO replication | grep -c 'state=online')" -ge "$nrep" ] && break
        sleep 0.1
    done
    [ "$(redis-cli -p "$pport" INFO replication | grep -c 'state=online')" -ge "$nrep" ] ||
        fail "the replicas never came online"
    for i in 0 1 2; do sentinel_launch "$i" "$m"; done
    # every sentinel has found the replica and the other sentinels (bounded)
    for i in $(seq 1 100); do
        local ok=0 p
        for p in "${sports[@]}"; do
            redis-cli -p "$p" SENTINEL MASTER "$m" 2>/dev/null |
                awk -v n="$nrep" 'prev == "num-slaves" && $1 >= n { s = 1 } prev == "num-other-sentinels" && $1 >= 2 { o = 1 }
                     { prev = $1 } END { exit !(s && o) }' && ok=$((ok + 1))
        done
        [ "$ok" = 3 ] && break
        sleep 0.1
    done
    [ "$ok" = 3 ] || fail "the sentinels never saw the whole group"
    surl="redis+sentinel://127.0.0.1:${sports[0]},127.0.0.1:${sports[1]},127.0.0.1:${sports[2]}/$m"
}

fake_sentinel_start() { # name args...
    local f="$tmp/$1" i
    shift
    (python3 "$SLUICE_SOURCE_DIR/tests/integration/fake_sentinel.py" --port-file "$f.port" "$@" \
        </dev/null >/dev/null 2>&1 & echo $! >"$f.pid")
    pids+=("$(cat "$f.pid")")
    for i in $(seq 1 50); do [ -s "$f.port" ] && break; sleep 0.1; done
    fport=$(cat "$f.port")
}

demoted_start() {
    "$SLUICE_SOURCE_DIR/scripts/test-redis" start "$tmp/demoted" --no-aof >/dev/null
    pids+=("$(cat "$tmp/demoted/pid")")
    dport=$(cat "$tmp/demoted/port")
    echo "127.0.0.1 $dport" >"$tmp/addr"
}

sentinel_kill() { kill -KILL "${spids[$1]}" 2>/dev/null || true; }

sentinel_master() {
    local p
    for p in "${sports[@]}"; do
        redis-cli -p "$p" SENTINEL GET-MASTER-ADDR-BY-NAME "$1" 2>/dev/null | paste -sd: - |
            grep -E '^[^:]+:[0-9]+$' && return 0
    done
    return 0
}

# The addresses the running sentinels name, one a line, deduplicated.
sentinel_masters() {
    local p
    for p in "${sports[@]}"; do
        redis-cli -p "$p" SENTINEL GET-MASTER-ADDR-BY-NAME "$1" 2>/dev/null | paste -sd: - |
            grep -E '^[^:]+:[0-9]+$' || true
    done | sort -u
}

wait_failover() { # master old-addr seconds
    local i now
    for i in $(seq 1 $(($3 * 10))); do
        now=$(sentinel_masters "$1")
        if [ -n "$now" ] && [ "$(echo "$now" | wc -l)" = 1 ] && [ "$now" != "$2" ] &&
            redis-cli -p "${now##*:}" ROLE 2>/dev/null | head -1 | grep -q '^master$'; then
            echo "$now"
            return 0
        fi
        sleep 0.1
    done
    fail "no failover from $2 within $3 s (sentinels name: $(sentinel_master "$1"))"
}
