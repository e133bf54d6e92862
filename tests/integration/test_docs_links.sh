#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The documentation holds together: every relative link in README.md, CONTRIBUTING.md and
# docs/*.md names a file of the tree, every #anchor names a heading of its target (GitHub's
# rule: lower case, punctuation dropped, spaces to hyphens, repeats numbered -1, -2), and the
# README stays a front page (at most 400 lines, the two commands in it). Needs no Redis.
set -euo pipefail

src=${SLUICE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src"
export LC_ALL=C.UTF-8
failures=0
bad() {
    echo "FAIL: $*" >&2
    failures=$((failures + 1))
}

# anchors FILE: the anchor of every heading outside code blocks, one a line
anchors() {
    awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" |
        tr '[:upper:]' '[:lower:]' | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g' |
        awk '{ n = seen[$0]++; print (n ? $0 "-" n : $0) }'
}

files=(README.md CONTRIBUTING.md docs/*.md)
links=0
for f in "${files[@]}"; do
    dir=$(dirname "$f")
    # every ](target) outside code blocks, one a line: "LINE TARGET"
    while read -r line target; do
        links=$((links + 1))
        case $target in
        http://* | https://* | mailto:*) continue ;;
        esac
        path=${target%%#*}
        anchor=
        [ "$path" = "$target" ] || anchor=${target#*#}
        if [ -z "$path" ]; then
            to=$f
        else
            to=$dir/$path
            [ -e "$to" ] || { bad "$f:$line: $target: no such file"; continue; }
        fi
        if [ -n "$anchor" ]; then
            case $to in
            *.md) anchors "$to" | grep -qxF -- "$anchor" ||
                bad "$f:$line: $target: no heading with that anchor in $to" ;;
            *) bad "$f:$line: $target: an anchor into a file that is not markdown" ;;
            esac
        fi
    done < <(awk '/^```/ { code = !code; next }
                  !code { s = $0
                          while (match(s, /\]\([^) ]+\)/)) {
                              print NR, substr(s, RSTART + 2, RLENGTH - 3)
                              s = substr(s, RSTART + RLENGTH) } }' "$f")
done
[ "$links" -gt 50 ] || bad "only $links links found: the extraction is broken"

lines=$(wc -l <README.md)
[ "$lines" -le 400 ] || bad "README.md has $lines lines (a front page: at most 400)"
grep -q '^scripts/demo ' README.md || bad "README.md lost the scripts/demo command"
grep -q '^scripts/test ' README.md || bad "README.md lost the scripts/test command"

[ "$failures" -eq 0 ] || exit 1
echo "test_docs_links: ok ($links links in ${#files[@]} files, README.md $lines lines)"
