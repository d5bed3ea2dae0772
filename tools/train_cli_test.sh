#!/bin/bash
# File: tools/train_cli_test.sh
#
# //tools:train's command line: --print_config prints the resolved tree and
# exits 0; a bad key, value, file or flagfile prints one line on stderr and
# exits 2; without --print_config the trainer entry point is called.
set -u
TRAIN=tools/train
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error <needle> <args...>: exit code 2 and exactly one stderr line.
expect_error() {
  local needle="$1"; shift
  "$TRAIN" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [[ $rc -eq 2 ]] || fail "'$*' exited $rc, want 2"
  [[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "'$*' stderr is not one line: $(cat "$TMP/err")"
  grep -qF -- "$needle" "$TMP/err" || fail "'$*' stderr lacks '$needle': $(cat "$TMP/err")"
}

"$TRAIN" --print_config >"$TMP/default.txt" || fail "--print_config exited $?"
grep -q 'adv_estimator: "gae"' "$TMP/default.txt" || fail "default tree lacks adv_estimator"
grep -q 'device: "cpu"' "$TMP/default.txt" || fail "default tree lacks device"

cat >"$TMP/a.flags" <<FLAGS
# comment
--config=examples/grpo_tiny.textproto
--flagfile=$TMP/b.flags
FLAGS
cat >"$TMP/b.flags" <<FLAGS
--actor_rollout_ref.rollout.n=6
FLAGS
"$TRAIN" --flagfile="$TMP/a.flags" --print_config algorithm.gamma=0.5 \
  --trainer.logger='[console,file]' >"$TMP/out.txt" || fail "flagfile run exited $?"
grep -q 'adv_estimator: "grpo"' "$TMP/out.txt" || fail "--config not applied"
grep -q '^    n: 6$' "$TMP/out.txt" || fail "nested flagfile override not applied"
grep -q 'gamma: 0.5' "$TMP/out.txt" || fail "positional override not applied"
grep -q 'logger: "file"' "$TMP/out.txt" || fail "--dotted override not applied"

# The printed tree loads back to the same tree.
"$TRAIN" --config="$TMP/out.txt" --print_config >"$TMP/again.txt" || fail "reload exited $?"
cmp -s "$TMP/out.txt" "$TMP/again.txt" || fail "printed config does not round-trip"

# Every shipped flagfile resolves (keys and values parse).
for f in examples/*.flags; do
  case "$f" in *sft*) continue ;; esac
  "$TRAIN" --flagfile="$f" --print_config >"$TMP/example.txt" || fail "$f: exited $?"
done
grep -q 'max_num_gen_batches: 8' "$TMP/example.txt" ||
  [[ -n "$(grep -l filter_groups examples/*.flags)" ]] || fail "examples lost"

expect_error "did you mean 'trainer.total_epochs'?" --print_config trainer.total_epoch=3
expect_error "expected an integer (int64)" --print_config --trainer.total_epochs=x
expect_error "cannot read config file" --config="$TMP/missing.textproto"
expect_error "cannot read flagfile" --flagfile="$TMP/missing.flags"
printf 'trainer {\n  bogus: 1\n}\n' >"$TMP/bad.textproto"
expect_error "bad.textproto:2:" --config="$TMP/bad.textproto" --print_config
expect_error "unexpected argument 'stray'" stray
# verl's defaults leave the micro-batch size to the user: checked before training.
expect_error "set 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'"
echo PASS
