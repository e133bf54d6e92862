#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs sluice from a build tree into a temporary prefix, then builds a small producer and a
# small worker outside the tree against that install, once with pkg-config (shared and static)
# and once with CMake's find_package, compiled as strict C11, and runs each against a private
# redis-server. Usage: tests/install/check.sh BUILD_DIR
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
for f in include/sluice/producer.h include/sluice/worker.h; do
    [ -e "$prefix/$f" ] || fail "install is missing $f"
done
# The installed include directory is the public API and nothing else (cli.h, lua.h, reply.h,
# figures.h and drain.h are sluice's own), and every public header stands on its own.
public="aproducer.h envelope.h limit.h log.h producer.h queue.h redis.h status.h url.h worker.h"
got=$(cd "$prefix/include/sluice" && ls | sort | tr '\n' ' ')
[ "$got" = "$public " ] || fail "installed headers are '$got', expected '$public '"
for h in $public; do
    printf '#include <sluice/%s>\nint main(void) { return 0; }\n' "$h" >"$work/h.c"
    cc -std=c11 -pedantic -Wall -Werror -I"$prefix/include" -c "$work/h.c" -o "$work/h.o" ||
        fail "public header sluice/$h does not compile on its own"
done
soname=$(objdump -p "$libdir/libsluice_producer.so" | awk '/SONAME/ { print $2 }')
[ "$soname" = libsluice_producer.so.0 ] || fail "libsluice_producer.so has SONAME '$soname'"

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
    # static: the same .pc file, with its archives in place of the -l options
    # shellcheck disable=SC2046
    cc "${cflags[@]}" -o "$work/$p-static" "$here/$p.c" $(pkg-config --cflags sluice) \
        $(pkg-config --static --libs sluice | sed "s#-lsluice\(_[a-z]*\)\{0,1\}\b#$libdir/libsluice\1.a#g") ||
        fail "pkg-config --static: $p does not build"
done
LD_LIBRARY_PATH="$libdir" run_pair pkgconfig "$work/producer-pc" "$work/worker-pc"
ldd "$work/producer-static" | grep -q libsluice && fail "static link still needs libsluice"
run_pair static "$work/producer-static" "$work/worker-static"

cmake -S "$here" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_FLAGS="${cflags[*]}" \
    >/dev/null || fail "find_package(sluice) failed"
cmake --build "$work/cm" >/dev/null || fail "CMake: the programs do not build"
LD_LIBRARY_PATH="$libdir" run_pair cmake "$work/cm/producer" "$work/cm/worker"
