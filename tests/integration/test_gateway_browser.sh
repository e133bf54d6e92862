#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The operator's page in a real browser: Debian's chromium, headless, loads /ui/ from a live
# gateway (short polling, ?poll=1: an open event stream would keep a headless load from ever
# finishing) and runs its script under the page's Content-Security-Policy. The rendered DOM shows
# the queue and its depth as `sluice-admin stats --json` has it, and the depth changes once more
# messages are admitted. A screenshot is left in the build directory (artifacts/dashboard.png).
# Then, through the DevTools protocol (cdp.py: chromium's --remote-debugging-pipe, Python's
# standard library only): Pause is disabled until a token is typed, pressing it with the token
# pauses the queue (meta paused; a worker started then takes nothing), the page shows the paused
# badge, and the token is kept in sessionStorage, never in a cookie.
# Skipped, saying so, when chromium is not installed (scripts/setup installs it).
. "$(dirname "$0")/lib.sh"

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "test_gateway_browser: chromium not installed (scripts/setup installs it): skipped"
    exit 0
fi
q="ui-$$"
keys+=($(queue_keys "$q"))

# dom: the page as rendered after its script ran (written to $tmp/dom)
dom() {
    timeout -k 5 60 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$tmp/profile" --virtual-time-budget=3000 \
        --dump-dom "http://127.0.0.1:$port/ui/?poll=1" >"$tmp/dom" 2>"$tmp/browser.log" ||
        fail "chromium: $(tail -5 "$tmp/browser.log")"
}
# sampled N: waits (10 s at most) until /v1/queues has sampled a depth of N
sampled() {
    local i
    for i in $(seq 1 50); do
        curl -s --max-time 5 "http://127.0.0.1:$port/v1/queues" | grep -qF "\"depth\":$1," &&
            return 0
        sleep 0.2
    done
    fail "the gateway did not sample depth $1"
}

secret=ui-token-0123456789abcdef
printf '%s\n' "$secret" >"$tmp/token"
chmod 600 "$tmp/token"
gateway_start --queue "$q:50" --dashboard --admin-token-file "$tmp/token"
for i in 1 2 3; do "$bin/sluice-enqueue" --redis "$url" -q "$q" "m$i" >/dev/null; done
sampled 3
depth=$("$bin/sluice-admin" --redis "$url" stats "$q" --json | grep -oE '"depth":[0-9]+' |
    cut -d: -f2)
[ "$depth" = 3 ] || fail "sluice-admin stats: depth $depth"
dom
grep -qF "data-queue=\"$q\"><td class=\"name\">$q" "$tmp/dom" ||
    fail "the page does not show $q: $(grep -o '<tbody>.*' "$tmp/dom" | head -c 600)"
grep -qF "<span>$depth / 50</span>" "$tmp/dom" ||
    fail "the page does not show depth $depth / 50: $(grep -o '<tbody>.*' "$tmp/dom" | head -c 600)"

for i in 4 5 6 7; do "$bin/sluice-enqueue" --redis "$url" -q "$q" "m$i" >/dev/null; done
sampled 7
dom
grep -qF "<span>7 / 50</span>" "$tmp/dom" ||
    fail "the page did not follow the depth to 7: $(grep -o '<tbody>.*' "$tmp/dom" | head -c 600)"

art="$bin/../artifacts"
mkdir -p "$art"
timeout -k 5 60 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --user-data-dir="$tmp/profile" --virtual-time-budget=3000 --window-size=1280,720 \
    --screenshot="$art/dashboard.png" "http://127.0.0.1:$port/ui/?poll=1" >/dev/null 2>&1 ||
    fail "chromium could not take the screenshot"
[ -s "$art/dashboard.png" ] || fail "no screenshot"

row="document.querySelector('tr[data-queue=\"$q\"]')"
pause="document.querySelector('#admin button[data-action=\"pause\"]')"
CDP_PROFILE="$tmp/cdp-profile" timeout -k 5 120 python3 "$(dirname "$0")/cdp.py" "$browser" \
    "http://127.0.0.1:$port/ui/?poll=1" \
    "$row !== null && ($row.click(), true)" \
    "!document.getElementById('detail').hidden && $pause.disabled === true" \
    "(() => { const t = document.getElementById('token'); t.value = '$secret';
              t.dispatchEvent(new Event('input')); return true; })()" \
    "$pause.disabled === false && ($pause.click(), true)" \
    "document.getElementById('admin-result').textContent.startsWith('200')" \
    "$row.querySelector('.badge.paused') !== null" \
    "sessionStorage.getItem('sluice-admin-token') === '$secret' && document.cookie === ''" \
    2>"$tmp/cdp.log" || fail "the page's Pause: $(tail -5 "$tmp/cdp.log")"
[ "$(rcli HGET "sluice:{$q}:meta" paused)" = 1 ] || fail "Pause on the page did not pause $q"
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler exec:true >"$tmp/worker.log" 2>&1 &
pids+=("$!")
w=$!
sleep 2
n=$(rcli XLEN "sluice:{$q}:stream")
[ "$n" = 7 ] || fail "a worker took entries of the paused queue: $n left: $(cat "$tmp/worker.log")"
kill -TERM "$w"
wait "$w" || true
echo "test_gateway_browser: ok (screenshot: artifacts/dashboard.png)"
