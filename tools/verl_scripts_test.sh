#!/bin/bash
# File: tools/verl_scripts_test.sh
#
# verl's own example scripts, converted to flagfiles by
# examples/verl_scripts/convert.sh (model/data paths and GPU counts swapped
# for the embedded defaults), go through `--print_config` of //tools:train
# (//tools:sft for the SFT ones): every key must be known, except those of
# examples/verl_scripts/known_unknown_keys.txt (Megatron sections), and the
# few files of expected_refusals.txt fail with their documented message.
set -u
DIR=examples/verl_scripts
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }
pattern=$(grep -v '^#' "$DIR/known_unknown_keys.txt" | grep -v '^$' | paste -sd'|')
n=0
for f in "$DIR"/*.flags; do
  name=$(basename "$f")
  bin=tools/train
  grep -q "sft_trainer" "$f" && bin=tools/sft
  "$bin" --flagfile="$f" --print_config >"$TMP/out" 2>"$TMP/err"
  rc=$?
  expected=$(grep "^$name|" "$DIR/expected_refusals.txt" | cut -d'|' -f2-)
  if [[ -n "$expected" ]]; then
    [[ $rc -ne 0 ]] || fail "$name: expected a refusal ('$expected'), got exit 0"
    grep -qF -- "$expected" "$TMP/err" || fail "$name: refusal lacks '$expected': $(cat "$TMP/err")"
    continue
  fi
  while IFS= read -r line; do
    key=$(echo "$line" | sed -n "s/.*unknown config key '\([^']*\)'.*/\1/p")
    if [[ -z "$key" ]]; then fail "$name: $line"; fi
    echo "$key" | grep -qxE "$pattern" || fail "$name: unknown key '$key' is not a documented one: $line"
  done <"$TMP/err"
  if [[ ! -s "$TMP/err" ]]; then
    [[ $rc -eq 0 ]] || fail "$name: exited $rc"
    grep -q "^trainer {" "$TMP/out" || fail "$name: no config printed"
  fi
  n=$((n + 1))
done
[[ $n -ge 20 ]] || fail "only $n flagfiles checked"
echo "PASS: $n verl scripts resolved with no undocumented unknown key"
