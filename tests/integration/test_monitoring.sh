#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The monitoring files of contrib/: the Grafana dashboard (contrib/grafana/sluice.json) parses as
# JSON and every panel has a query; the alert rules (contrib/prometheus/sluice-alerts.yml) pass
# `promtool check rules`, and their unit tests (alerts_test.yml: the alerts fire where they
# should and stay silent where they should not) pass `promtool test rules`. Every sluice_* metric
# either file names is one a live worker (--metrics) or gateway exports: both run here against
# the fixture's server on a partitioned queue with a capacity, so every series is there. The
# worker's queue figures include the capacity and the queue's counters.
# promtool comes with Debian's prometheus package (scripts/setup installs it); without it the
# promtool part is skipped, saying so on stderr - and under CI (CI set) that is a failure.
. "$(dirname "$0")/lib.sh"

src=${SLUICE_SOURCE_DIR:?}
dash=$src/contrib/grafana/sluice.json
rules=$src/contrib/prometheus/sluice-alerts.yml
q="mon-$$"
keys+=($(queue_keys "$q") $(queue_keys "$q~1"))

# ---- the dashboard: JSON, a query in every panel, the metric names of its queries ----
python3 - "$dash" >"$tmp/names" <<'PY' || fail "dashboard: $(cat "$tmp/names")"
import json, re, sys
d = json.load(open(sys.argv[1]))
assert d.get("title") == "sluice" and d.get("uid") == "sluice", "title/uid"
names, n = set(), 0
for p in d["panels"]:
    if p["type"] == "row":
        continue
    exprs = [t["expr"] for t in p.get("targets", [])]
    assert exprs, "panel %r has no query" % p["title"]
    for e in exprs:
        names.update(re.findall(r"\bsluice_[a-z_]*[a-z]\b", e))
    n += 1
assert n >= 10, "only %d panels" % n
print("\n".join(sorted(names)))
PY
[ "$(wc -l <"$tmp/names")" -ge 15 ] || fail "dashboard: few metrics: $(cat "$tmp/names")"
# the rules: every sluice_* word (annotations too), not a wildcard like sluice_queue_*
grep -oE '\bsluice_[a-z_]*[a-z]\b' "$rules" | sort -u >>"$tmp/names"
sort -u -o "$tmp/names" "$tmp/names"

# ---- promtool ----
if command -v promtool >/dev/null; then
    promtool check rules "$rules" >"$tmp/out" 2>&1 || fail "promtool check rules: $(cat "$tmp/out")"
    grep -q 'SUCCESS: [0-9]* rules found' "$tmp/out" || fail "promtool: $(cat "$tmp/out")"
    promtool test rules "$(dirname "$0")/alerts_test.yml" >"$tmp/out" 2>&1 ||
        fail "promtool test rules: $(cat "$tmp/out")"
else
    [ -z "${CI:-}" ] || fail "promtool is not installed (scripts/setup installs prometheus)"
    echo "test_monitoring: SKIPPED the promtool checks: promtool not installed" \
        "(scripts/setup installs Debian's prometheus)" >&2
fi

# ---- a live worker and gateway: every name is one they export ----
"$bin/sluice-admin" --redis "$url" capacity "$q" 10 >/dev/null
"$bin/sluice-admin" --redis "$url" partitions "$q" 2 >/dev/null
seq 1 30 | "$bin/sluice-enqueue" --redis "$url" --queue "$q" >/dev/null 2>&1 || true
: >"$tmp/w.log" # made before the worker: the loop below may read it first
"$bin/sluice-worker" --redis "$url" --queue "$q" --handler sleep:200 --concurrency 2 \
    --metrics 127.0.0.1:0 --log-level info 2>"$tmp/w.log" >/dev/null &
pids+=("$!")
wport=""
for _ in $(seq 1 50); do
    wport=$(sed -n 's/.*event=metrics_listening.* port=\([0-9]*\).*/\1/p' "$tmp/w.log" | head -1)
    [ -n "$wport" ] && break
    sleep 0.1
done
[ -n "$wport" ] || fail "worker: no metrics_listening line: $(cat "$tmp/w.log")"
gateway_start --queue "$q"
curl -s --max-time 5 "http://127.0.0.1:$port/v1/queues/$q/messages" -d x >/dev/null || true
for _ in $(seq 1 50); do # the worker's queue figures come within a second or so
    curl -s --max-time 5 "http://127.0.0.1:$wport/metrics" >"$tmp/wm" || true
    grep -q '^sluice_queue_partition_depth{' "$tmp/wm" && break
    sleep 0.2
done
curl -s --max-time 5 "http://127.0.0.1:$port/metrics" >"$tmp/gm" || fail "gateway /metrics"
cat "$tmp/wm" "$tmp/gm" >"$tmp/all"
missing=""
while read -r n; do
    grep -qE "^(# TYPE )?$n[{ ]" "$tmp/all" || missing+=" $n"
done <"$tmp/names"
[ -z "$missing" ] || fail "named but not exported:$missing (exported: $(grep -v '^#' "$tmp/all" |
    sed 's/[{ ].*//' | sort -u | tr '\n' ' '))"
v=$(sed -n "s/^sluice_queue_capacity{queue=\"$q\",group=\"workers\"} //p" "$tmp/wm")
[ "$v" = 10 ] || fail "sluice_queue_capacity is '$v', expected 10: $(grep capacity "$tmp/wm")"
v=$(sed -n "s/^sluice_queue_rejected_total{queue=\"$q\",group=\"workers\"} //p" "$tmp/wm")
[ -n "$v" ] && [ "$v" -gt 0 ] || fail "sluice_queue_rejected_total is '$v': $(grep rejected "$tmp/wm")"
v=$(sed -n "s/^sluice_queue_admitted_total{queue=\"$q\",group=\"workers\"} //p" "$tmp/wm")
[ -n "$v" ] && [ "$v" -ge 10 ] || fail "sluice_queue_admitted_total is '$v'"
echo "test_monitoring: ok ($(wc -l <"$tmp/names") metric names, all exported)"
