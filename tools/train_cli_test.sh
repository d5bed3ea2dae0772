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

# Bad inputs write and delete nothing (issue 21 §4): the checkpoint folder
# the bad runs point at holds a user's file, a committed checkpoint and a
# killed save's folder (which a good start would remove); it and the working
# directory (default checkpoint and log locations) must be unchanged.
OUT="$TMP/ckpt_out"
mkdir -p "$OUT/global_step_1/actor" "$OUT/global_step_2.tmp-save"
echo keep >"$OUT/user_notes.txt"
echo 1 >"$OUT/latest_checkpointed_iteration.txt"
echo w >"$OUT/global_step_1/actor/model_world_size_1_rank_0.pt"
tree_state() {
  { find "$OUT" -printf '%p %s %T@\n'; find . -printf '%p %T@\n'; } | sort
}
# unchanged_by <args...>: runs the trainer, then checks the trees.
unchanged_by() {
  local before
  before=$(tree_state)
  "$TRAIN" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  local after
  after=$(tree_state)
  [[ "$after" == "$before" ]] ||
    fail "'$*' changed files: $(diff <(echo "$before") <(echo "$after") | head -5)"
  return $rc
}

# expect_error <needle> <args...>: exit code 2 and exactly one stderr line.
expect_error() {
  local needle="$1"; shift
  unchanged_by "$@"
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
# expect_lines <count> <needle>... -- <args...>: exit code 2, <count> stderr
# lines, each needle present (every problem of a run is reported at once).
expect_lines() {
  local count="$1"; shift
  local needles=()
  while [[ "$1" != "--" ]]; do needles+=("$1"); shift; done
  shift
  unchanged_by "$@"
  local rc=$?
  [[ $rc -eq 2 ]] || fail "'$*' exited $rc, want 2"
  [[ $(wc -l <"$TMP/err") -eq $count ]] || fail "'$*' stderr is not $count lines: $(cat "$TMP/err")"
  for n in "${needles[@]}"; do
    grep -qF -- "$n" "$TMP/err" || fail "'$*' stderr lacks '$n': $(cat "$TMP/err")"
  done
}

# verl's defaults leave the micro-batch sizes to the user: checked before
# training, every role at once.
expect_lines 3 "set 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'" \
  "set 'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu'" \
  "set 'critic.ppo_micro_batch_size_per_gpu'" -- trainer.n_gpus_per_node=1
# Bad values of §4 (issue 21): each named, all in one run, nothing started.
GOOD=(--config=examples/grpo_tiny.textproto trainer.n_gpus_per_node=1
  trainer.default_local_dir="$OUT")
expect_lines 4 "'actor_rollout_ref.actor.ppo_epochs' (-1) must be > 0" \
  "'trainer.total_training_steps' (-2) must be > 0" \
  "'actor_rollout_ref.actor.optim.lr' (nan) must be finite" \
  "'data.train_batch_size' (-16) must be > 0" -- "${GOOD[@]}" \
  actor_rollout_ref.actor.ppo_epochs=-1 trainer.total_training_steps=-2 \
  actor_rollout_ref.actor.optim.lr=nan data.train_batch_size=-16 \
  actor_rollout_ref.actor.use_dynamic_bsz=true
expect_error "'actor_rollout_ref.actor.optim.lr' (-0.001) must be >= 0" \
  "${GOOD[@]}" actor_rollout_ref.actor.optim.lr=-1e-3
expect_lines 3 "unknown config key 'trainer.total_epoch'" "bad value 'x'" \
  "not one of the megatron.* keys" -- --print_config \
  trainer.total_epoch=1 trainer.save_freq=x actor_rollout_ref.actor.megatron.use_te=True
expect_error "expected one of: native, vllm, sglang" "${GOOD[@]}" \
  actor_rollout_ref.rollout.name=hf
# strategy=megatron: a tp that does not divide the ranks is one line up front.
expect_error "'actor_rollout_ref.actor.megatron.tensor_model_parallel_size' (2) must divide the 1 ranks" \
  "${GOOD[@]}" actor_rollout_ref.actor.strategy=megatron actor_rollout_ref.ref.strategy=fsdp \
  actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2
# One source of truth for the process count.
expect_error "--nproc_per_node=2 disagrees with trainer.n_gpus_per_node=1" \
  "${GOOD[@]}" --nproc_per_node=2
# verl's Hydra forms.
expect_error "Hydra YAML configs are not read here" --config-name=ppo_megatron_trainer
expect_error "is a section, not a Hydra config group" --print_config \
  actor_rollout_ref.actor.optim=fsdp
"$TRAIN" --config-name ppo_trainer --print_config \
  global_profiler.global_tool_config.nsys.worker_nsight_options.capture-range=cudaProfilerApi \
  >"$TMP/hydra.txt" || fail "Hydra forms exited $?"
grep -q 'key: "capture-range"' "$TMP/hydra.txt" || fail "dashed map key not applied"
# trainer.nnodes=2 with no second node: rank 0 says whom it waits for every
# few seconds, then the run ends with one error line once the rendezvous
# timeout (verl's nccl_timeout, as torch's init_process_group) has passed.
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
unchanged_by "${GOOD[@]}" trainer.nnodes=2 actor_rollout_ref.nccl_timeout=3 \
  --master_port="$PORT"
rc=$?
[[ $rc -eq 1 ]] || fail "nnodes=2 alone exited $rc, want 1: $(cat "$TMP/err")"
grep -qF "waiting for rank 1 at 127.0.0.1:$PORT, 1 of 2 joined" "$TMP/err" ||
  fail "no 'waiting for' line: $(cat "$TMP/err")"
# (the launcher prefixes "[rank 0] " and adds its own "job failed" line)
[[ $(grep -c 'train: ' "$TMP/err") -eq 1 ]] ||
  fail "not one error line: $(cat "$TMP/err")"
grep -q "train: .*rendezvous at 127.0.0.1:$PORT timed out after 3s: 1 of 2 ranks joined, rank 1 never came" "$TMP/err" ||
  fail "unclear rendezvous error: $(cat "$TMP/err")"

# --help prints a usage text.
"$TRAIN" --help >"$TMP/help" 2>&1
grep -q "Usage:" "$TMP/help" || fail "--help lacks the usage text: $(head -3 "$TMP/help")"
grep -q "docs/config.md" "$TMP/help" || fail "--help lacks the docs pointer"
echo PASS
