#!/usr/bin/env bash
# tools/check_includes.py on planted trees: a clean one passes; one with
# missing deps, an unowned header and layer violations fails naming each one
# (tools/testdata/check_includes/expected_bad.txt); --fix then adds the
# missing deps so that only the layer violations remain.
set -euo pipefail
dir="$(dirname "$0")"
check="$dir/check_includes.py"
data="$dir/testdata/check_includes"
tmp="${TEST_TMPDIR:-$(mktemp -d)}/tree"

# Copies a testdata tree into $tmp (BUILD.testdata -> BUILD.bazel, so the
# planted packages are not packages of this workspace).
copy_tree() {
  (cd "$1" && find -L . -type f) | while read -r f; do
    dst="$tmp/${f/BUILD.testdata/BUILD.bazel}"
    dst="${dst/WORKSPACE.testdata/WORKSPACE}"
    mkdir -p "$(dirname "$dst")"
    cp "$1/$f" "$dst"
  done
}

rm -rf "$tmp"
copy_tree "$data/clean"
python3 "$check" --root "$tmp" >"$tmp.out" 2>&1 || {
  echo "FAIL: the clean tree does not pass:"; cat "$tmp.out"; exit 1; }
echo "clean tree: $(tail -1 "$tmp.out")"

copy_tree "$data/bad"
if python3 "$check" --root "$tmp" >"$tmp.out" 2>"$tmp.err"; then
  echo "FAIL: the planted violations were not found"; exit 1
fi
diff -u "$data/expected_bad.txt" "$tmp.out" || {
  echo "FAIL: violations differ from expected_bad.txt"; exit 1; }
echo "bad tree: $(cat "$tmp.err")"

python3 "$check" --root "$tmp" --fix >/dev/null 2>&1 || true
# BUILD lines moved with the added deps: compare without line numbers.
python3 "$check" --root "$tmp" 2>/dev/null | sed 's/:[0-9]*:/:/' >"$tmp.out" || true
grep -E "layer violation|owned by no target" "$data/expected_bad.txt" |
  sed 's/:[0-9]*:/:/' >"$tmp.want"
diff -u "$tmp.want" "$tmp.out" || {
  echo "FAIL: --fix left include violations it should have fixed"; exit 1; }
grep -q '"@system//:zlib"' "$tmp/verl/core/BUILD.bazel"
grep -q '"//verl/core:status"' "$tmp/verl/models/BUILD.bazel"
echo "PASS"
