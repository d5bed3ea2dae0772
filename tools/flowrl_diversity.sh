#!/bin/bash
# File: tools/flowrl_diversity.sh
#
# The FlowRL diversity experiment (docs/algorithms.md, FlowRL): trains each
# arm in examples/flowrl_diversity/ (GRPO, PPO, REINFORCE++, FlowRL) from the same
# supervised warm start with the same seed and budget, then prints
# tools/flowrl_diversity.py's table of the final validation (N = 32 samples
# per prompt at temperature 1): mean reward, distinct correct answers per
# prompt and KL(empirical || reward-normalised target), plus the warm start
# itself (the step-0 validation, identical in every arm).
#
#   bazel build //tools:train && tools/flowrl_diversity.sh [OUT_DIR] [overrides...]
#
# Overrides (e.g. trainer.total_training_steps=20 data.seed=2) apply to every
# arm; ARMS="grpo flowrl" picks arms; JOBS (default 2) arms run at a time,
# each at `nice -n NICE` (default 10: the machine may be shared); TRAIN names
# the binary (default bazel-bin/tools/train). Logs: OUT_DIR/<arm>.log
# (default /tmp/flowrl_diversity).
set -euo pipefail
cd "$(dirname "$0")/.."
TRAIN="${TRAIN:-bazel-bin/tools/train}"
OUT="${1:-/tmp/flowrl_diversity}"
shift || true
ARMS="${ARMS:-grpo ppo reinforce_pp flowrl}"
JOBS="${JOBS:-2}"
NICE="${NICE:-10}"
N=32  # val_kwargs.n in examples/flowrl_diversity/common.textproto
[ -x "$TRAIN" ] || { echo "flowrl_diversity: $TRAIN missing (bazel build //tools:train)" >&2; exit 2; }
mkdir -p "$OUT"
for arm in $ARMS; do
  [ -f "examples/flowrl_diversity/$arm.flags" ] ||
    { echo "flowrl_diversity: no examples/flowrl_diversity/$arm.flags" >&2; exit 2; }
done
# JOBS arms side by side, one LibTorch thread each (OMP_NUM_THREADS=1: on a
# loaded machine several OpenMP threads per process spin and run many times
# slower than one).
declare -A pids
running=()
for arm in $ARMS; do
  if [ ${#running[@]} -ge "$JOBS" ]; then
    wait "${pids[${running[0]}]}" || true  # the exit code is in <arm>.rc
    running=("${running[@]:1}")
  fi
  rm -rf "${OUT:?}/$arm" "$OUT/$arm.rc"
  (
    OMP_NUM_THREADS=1 VERL_FILE_LOGGER_PATH="$OUT/$arm.metrics.jsonl" \
      nice -n "$NICE" "$TRAIN" \
      --flagfile="examples/flowrl_diversity/$arm.flags" \
      trainer.validation_data_dir="$OUT/$arm" \
      trainer.default_local_dir="$OUT/$arm.ckpt" trainer.save_freq=-1 "$@" \
      >"$OUT/$arm.log" 2>&1
    echo $? >"$OUT/$arm.rc"
  ) &
  pids[$arm]=$!
  running+=("$arm")
done
runs=()
for arm in $ARMS; do
  wait "${pids[$arm]}" 2>/dev/null || true
  [ "$(cat "$OUT/$arm.rc" 2>/dev/null)" = 0 ] ||
    { tail -20 "$OUT/$arm.log" >&2; echo "flowrl_diversity: $arm failed" >&2; exit 1; }
  # The last validation dump is the trained policy; step 0 is the warm start.
  last=$(ls "$OUT/$arm" | sed 's/\.jsonl$//' | sort -n | tail -1)
  echo "flowrl_diversity: $arm done at $(date -u +%T) (final validation step $last)" >&2
  [ ${#runs[@]} -gt 0 ] || runs+=("SFT warm start (step 0)=$OUT/$arm/0.jsonl")
  runs+=("$arm (step $last)=$OUT/$arm/$last.jsonl")
done
python3 tools/flowrl_diversity.py --n "$N" "${runs[@]}"
