#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs sluice from a build tree into a temporary prefix, then builds a small producer and a
# small worker outside the tree against that install, once with pkg-config (shared, and static
# with sluice-static.pc: `pkg-config --static` as given, no edits) and once with CMake's
# find_package, compiled as strict C11, and runs each against a private redis-server. The
# shared libraries find each other through RUNPATH $ORIGIN after the install is moved, and
# nothing asks for msgpack-c (a header-only build dependency). Each shared library exports
# exactly the functions and variables its installed headers declare (nm -D against the headers
# as the compiler reads them). Usage: check.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
cleanup() {
    "$root/scripts/test-redis" stop "$work/redis" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "install check: $*" >&2; exit 1; }

prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(find "$prefix" -name sluice.pc | head -n 1)
[ -n "$pc" ] || fail "no sluice.pc installed"
# Moving the install elsewhere must keep it usable: the .pc file finds its prefix itself.
mv "$prefix" "$work/moved"
prefix="$work/moved"
pcdir=$(dirname "${pc/$work\/prefix/$prefix}")
libdir=$(dirname "$pcdir")
for f in include/sluice/producer.h include/sluice/worker.h share/sluice/grafana/sluice.json \
    share/sluice/prometheus/sluice-alerts.yml; do
    [ -e "$prefix/$f" ] || fail "install is missing $f"
done
# The installed include directory is the public API and nothing else (cli.h, lua.h, reply.h,
# figures.h and drain.h are sluice's own), and every public header stands on its own.
public="aproducer.h envelope.h export.h limit.h log.h producer.h queue.h redis.h status.h url.h worker.h worker_http.h"
got=$(cd "$prefix/include/sluice" && ls | sort | tr '\n' ' ')
[ "$got" = "$public " ] || fail "installed headers are '$got', expected '$public '"
for h in $public; do
    printf '#include <sluice/%s>\nint main(void) { return 0; }\n' "$h" >"$work/h.c"
    cc -std=c11 -pedantic -Wall -Werror -I"$prefix/include" -c "$work/h.c" -o "$work/h.o" ||
        fail "public header sluice/$h does not compile on its own"
done
# No public header needs hiredis's or libuv's headers (replies and loops cross the API as
# pointers to declared types).
for h in $public; do
    printf '#include <sluice/%s>\n' "$h" | cc -std=c11 -E -H -I"$prefix/include" - 2>&1 >/dev/null |
        grep -E 'hiredis|uv\.h' && fail "public header sluice/$h includes hiredis or libuv"
done
# Exports = API. declared LIB HEADERS...: the sluice* functions and variables the headers
# declare, read from the preprocessed text of those headers alone (comments and macros gone).
declared() {
    local h
    for h in "$@"; do
        printf '#include <sluice/%s>\n' "$h" | cc -std=c11 -E -I"$prefix/include" - |
            awk -v want="/sluice/$h\"" '/^# [0-9]+ "/ { on = index($0, want) > 0; next } on'
    done | tr '\n' ' ' | sed 's/;/;\n/g' | grep -Ev '^[[:space:]]*typedef' |
        sed -nE -e 's/.*\b(sluice[A-Za-z0-9_]*)[[:space:]]*\([^*].*/\1/p' \
            -e 's/^[[:space:]]*extern .*\b(sluice[A-Za-z0-9_]*)[[:space:]]*(\[[^]]*\])?[[:space:]]*;.*/\1/p' |
        sort -u
}
check_exports() { # LIB HEADERS...
    local lib=$1 exported want
    shift
    exported=$(nm -D --defined-only "$libdir/lib$lib.so" | awk '$3 ~ /^sluice/ { print $3 }' | sort -u)
    want=$(declared "$@")
    [ -n "$want" ] || fail "no declarations found in $*"
    extra=$(comm -23 <(printf '%s\n' "$exported") <(printf '%s\n' "$want") | tr '\n' ' ')
    missing=$(comm -13 <(printf '%s\n' "$exported") <(printf '%s\n' "$want") | tr '\n' ' ')
    [ -z "$extra" ] || fail "lib$lib.so exports what no installed header declares: $extra"
    [ -z "$missing" ] || fail "lib$lib.so does not export what its headers declare: $missing"
    echo "install check: lib$lib.so exports its API, $(printf '%s\n' "$exported" | wc -l) symbols"
}
check_exports sluice envelope.h limit.h log.h queue.h redis.h status.h url.h
check_exports sluice_producer producer.h aproducer.h
check_exports sluice_worker worker.h worker_http.h

soname=$(objdump -p "$libdir/libsluice_producer.so" | awk '/SONAME/ { print $2 }')
[ "$soname" = libsluice_producer.so.1 ] || fail "libsluice_producer.so has SONAME '$soname'"
# The shared libraries find libsluice.so.1 next to them, with no LD_LIBRARY_PATH and after the
# move, and none of them needs msgpack-c.
for l in sluice_producer sluice_worker; do
    rp=$(readelf -d "$libdir/lib$l.so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    [ "$rp" = '$ORIGIN' ] || fail "lib$l.so has RUNPATH '$rp', expected \$ORIGIN"
    dep=$(env -u LD_LIBRARY_PATH ldd "$libdir/lib$l.so" | awk '$1 == "libsluice.so.1" { print $3 }')
    [ "$dep" -ef "$libdir/libsluice.so.1" ] ||
        fail "lib$l.so does not find libsluice.so.1 next to it: '$dep'"
done
for l in sluice sluice_producer sluice_worker; do
    readelf -d "$libdir/lib$l.so" | grep -q 'NEEDED.*msgpack' && fail "lib$l.so needs msgpack-c"
done
grep -rqi msgpack "$pcdir" "$libdir/cmake/sluice" && fail "sluice.pc or the CMake package asks for msgpack"

url=$("$root/scripts/test-redis" start "$work/redis" --no-aof)
cflags=(-std=c11 -pedantic -Wall -Wextra -Werror)

run_pair() { # label producer worker
    local label=$1 prod=$2 work_bin=$3 q="install_$1"
    "$prod" "$url" "$q" one two three || fail "$label: producer failed"
    out=$("$work_bin" "$url" "$q" 3) || fail "$label: worker failed"
    [ "$(printf '%s\n' "$out" | sort | tr '\n' ' ')" = "one three two " ] ||
        fail "$label: worker printed '$out'"
    echo "install check: $label ok"
}

export PKG_CONFIG_PATH="$pcdir"
pkg-config --exists sluice || fail "pkg-config does not find sluice"
for p in producer worker; do
    # shellcheck disable=SC2046
    cc "${cflags[@]}" -o "$work/$p-pc" "$here/$p.c" $(pkg-config --cflags --libs sluice) ||
        fail "pkg-config: $p does not build"
    # shellcheck disable=SC2046
    cc "${cflags[@]}" -o "$work/$p-pcs" "$here/$p.c" $(pkg-config --static --cflags --libs sluice) ||
        fail "pkg-config --static sluice: $p does not build"
    # static: sluice-static.pc names the archives (and libuv's); -static links everything in
    # shellcheck disable=SC2046
    cc "${cflags[@]}" -o "$work/$p-static" "$here/$p.c" \
        $(pkg-config --static --cflags --libs sluice-static) ||
        fail "pkg-config --static sluice-static: $p does not build"
    # shellcheck disable=SC2046
    cc "${cflags[@]}" -static -o "$work/$p-full" "$here/$p.c" \
        $(pkg-config --static --cflags --libs sluice-static) 2>"$work/ld.err" ||
        fail "cc -static with pkg-config --static sluice-static: $p does not build: $(cat "$work/ld.err")"
done
LD_LIBRARY_PATH="$libdir" run_pair pkgconfig "$work/producer-pc" "$work/worker-pc"
LD_LIBRARY_PATH="$libdir" run_pair pkgconfig-static-flags "$work/producer-pcs" "$work/worker-pcs"
for p in producer worker; do
    readelf -d "$work/$p-static" | grep -E 'NEEDED.*(libsluice|libuv)' &&
        fail "static link of $p still needs a shared libsluice or libuv"
    readelf -d "$work/$p-full" | grep -q NEEDED && fail "cc -static $p still needs shared libraries"
done
run_pair static "$work/producer-static" "$work/worker-static"
run_pair static-full "$work/producer-full" "$work/worker-full"

cmake -S "$here" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="${cflags[*]}" \
    >/dev/null || fail "find_package(sluice) failed"
cmake --build "$work/cm" >/dev/null || fail "CMake: the programs do not build"
LD_LIBRARY_PATH="$libdir" run_pair cmake "$work/cm/producer" "$work/cm/worker"
