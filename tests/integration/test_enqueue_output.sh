#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sluice-enqueue says what happened, honestly: an oversized argument is named by its place;
# figures Redis never gave are "unknown" (JSON null), not -1; --ids prints payloads whole (NUL
# bytes included); a reused idempotency key says the payload was not queued; a line far over
# --max-payload on standard input is refused without reading it into memory.
. "$(dirname "$0")/lib.sh"
q="enqout-$$"
read -ra qk <<<"$(queue_keys "$q")"
keys+=("${qk[@]}")
keys+=("sluice:{$q}:idem:k-$$")

rc=0
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --max-payload 3 --ids a b c dddd \
    >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" -eq 2 ] || fail "oversized argument: exit $rc, expected 2"
grep -q "payload argument 4: 4 bytes; the limit is 3" "$tmp/err" ||
    fail "oversized argument not named by its place: $(cat "$tmp/err")"
grep -q "admitted=3 rejected=0 depth=3 capacity=1000" "$tmp/out" || fail "summary: $(cat "$tmp/out")"

# nothing reached Redis: figures unknown, JSON null
rc=0
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --max-payload 1 --json toolong \
    >"$tmp/out" 2>/dev/null || rc=$?
grep -q '"depth":null,"capacity":null' "$tmp/out" || fail "JSON figures: $(cat "$tmp/out")"
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --max-payload 1 toolong >"$tmp/out" \
    2>/dev/null || true
grep -q "depth=unknown capacity=unknown" "$tmp/out" || fail "text figures: $(cat "$tmp/out")"

# --ids prints the payload whole, NUL included
printf 'a\0b\n' | "$bin/sluice-enqueue" --redis "$url" --queue "$q" --ids >"$tmp/ids"
head -n 1 "$tmp/ids" | cut -d' ' -f2- | od -An -c | tr -d ' \n' | grep -q 'a\\0b\\n' ||
    fail "--ids cut the payload: $(od -c "$tmp/ids" | head -3)"

# a reused idempotency key: the second payload was not queued, and it is said
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --ids --idempotency-key "k-$$" first \
    >"$tmp/first" 2>&1
"$bin/sluice-enqueue" --redis "$url" --queue "$q" --ids --idempotency-key "k-$$" second \
    >"$tmp/second" 2>"$tmp/second.err"
grep -q "second" "$tmp/second" && fail "the duplicate's payload printed as admitted: $(cat "$tmp/second")"
grep -q "was admitted earlier as $(cut -d' ' -f1 "$tmp/first").*not queued" "$tmp/second.err" ||
    fail "duplicate not explained: $(cat "$tmp/second.err")"
grep -q "duplicates=1" "$tmp/second" || fail "summary lacks duplicates=1: $(cat "$tmp/second")"

# a 64 MiB line against --max-payload 1k under a 40 MiB address-space limit: refused, and
# the next line still admitted
# (under AddressSanitizer the limit cannot apply: its shadow memory needs more address space)
rc=0
(
    [ -n "${ASAN_OPTIONS:-}" ] || ulimit -v 40960
    { head -c $((64 << 20)) /dev/zero | tr '\0' x; printf '\nsmall\n'; } |
        "$bin/sluice-enqueue" --redis "$url" --queue "$q" --max-payload 1k >"$tmp/out" 2>"$tmp/err"
) || rc=$?
[ "$rc" -eq 2 ] || fail "huge line: exit $rc: $(cat "$tmp/err")"
grep -q "line 1: payload is 67108864 bytes; the limit is 1024" "$tmp/err" ||
    fail "huge line not named: $(cat "$tmp/err")"
grep -q "admitted=1" "$tmp/out" || fail "the line after the huge one: $(cat "$tmp/out")"
echo "ok: enqueue output honest; 64 MiB line refused in bounded memory"
