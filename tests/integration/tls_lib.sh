# SPDX-License-Identifier: MIT
# Shared by the integration tests that talk TLS (sourced after lib.sh, not run): a private CA
# and certificates made with openssl in $tmp, and a redis-server of the test's own that speaks
# TLS only (--port 0), stopped by its PID on exit with lib.sh's pids.
#   tls_certs              $tls_dir/{ca,other-ca}.crt (two CAs), server.{crt,key} for
#                          localhost and 127.0.0.1 (signed by ca), client.{crt,key} (by ca)
#   tls_redis_start [yes|no|optional] [ARGS...]
#                          redis-server on a free loopback --tls-port, --tls-auth-clients as
#                          given (default no), ARGS added; waits until it answers PING over TLS;
#                          sets tls_port and tls_url (rediss://127.0.0.1:PORT)
#   tls_redis_restart [yes|no|optional] [ARGS...]
#                          kill -9 of that server and a new, empty one on the same port
#   tls_cli ARGS...        redis-cli over TLS to it, trusting ca.crt, with the client
#                          certificate
tls_dir=$tmp/tls
tls_port=""
tls_url=""
tls_pid=""

# tls_cert NAME SUBJECT CA [SAN]: NAME.key and NAME.crt signed by CA (or self-signed: "")
tls_cert() {
    local name=$1 subj=$2 ca=$3 san=${4:-} d=$tls_dir
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/$name.key" 2>/dev/null
    if [ -z "$ca" ]; then
        openssl req -x509 -new -key "$d/$name.key" -subj "$subj" -days 2 -out "$d/$name.crt" \
            -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
        return
    fi
    openssl req -new -key "$d/$name.key" -subj "$subj" -out "$d/$name.csr" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n%s\n' \
        "${san:+subjectAltName=$san}" >"$d/$name.ext"
    openssl x509 -req -in "$d/$name.csr" -CA "$d/$ca.crt" -CAkey "$d/$ca.key" \
        -CAcreateserial -days 2 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
}

tls_certs() {
    mkdir -p "$tls_dir"
    tls_cert ca "/CN=sluice test CA" ""
    tls_cert other-ca "/CN=another CA" ""
    tls_cert server "/CN=localhost" ca "DNS:localhost,IP:127.0.0.1"
    tls_cert client "/CN=sluice client" ca ""
    chmod 600 "$tls_dir"/*.key
}

# tls_redis_spawn PORT AUTH [ARGS...]: the TLS-only redis-server on PORT (killed on exit); waits
# until it answers PING over TLS. 0 ready, 1 not (the port taken, or it died).
tls_redis_spawn() {
    local port=$1 auth=$2 j
    shift 2
    redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --dir "$tls_dir" \
        --save "" --appendonly no --daemonize no --logfile "$tls_dir/redis-$port.log" \
        --tls-cert-file "$tls_dir/server.crt" --tls-key-file "$tls_dir/server.key" \
        --tls-ca-cert-file "$tls_dir/ca.crt" --tls-auth-clients "$auth" "$@" &
    pids+=("$!")
    tls_pid=$!
    for j in $(seq 1 50); do
        if tls_cli -p "$port" PING 2>/dev/null | grep -q PONG; then
            return 0
        fi
        kill -0 "$tls_pid" 2>/dev/null || return 1
        sleep 0.1
    done
    kill -KILL "$tls_pid" 2>/dev/null || true
    return 1
}

tls_redis_start() {
    local auth=${1:-no} i
    [ $# -gt 0 ] && shift
    [ -f "$tls_dir/ca.crt" ] || tls_certs
    for i in $(seq 1 20); do
        tls_port=$(free_port)
        if tls_redis_spawn "$tls_port" "$auth" "$@"; then
            tls_url="rediss://127.0.0.1:$tls_port"
            return 0
        fi
    done
    fail "could not start a TLS redis-server: $(tail -n 5 "$tls_dir"/redis-*.log 2>/dev/null)"
}

# tls_redis_restart [yes|no|optional] [ARGS...]: kill -9 of the server, and a new one (empty) on
# the same port
tls_redis_restart() {
    local auth=${1:-no} i
    [ $# -gt 0 ] && shift
    kill -KILL "$tls_pid" 2>/dev/null || true
    wait "$tls_pid" 2>/dev/null || true
    for i in $(seq 1 20); do
        tls_redis_spawn "$tls_port" "$auth" "$@" && return 0
        sleep 0.2
    done
    fail "could not restart the TLS redis-server on $tls_port"
}

tls_cli() {
    redis-cli --tls --cacert "$tls_dir/ca.crt" --cert "$tls_dir/client.crt" \
        --key "$tls_dir/client.key" -h 127.0.0.1 -p "$tls_port" "$@"
}
