#!/bin/bash
# File: tools/quickstart_test.sh
#
# The README's main job, shortened to its first 10 GRPO steps: the embedded
# default (SFT warm start on the built-in arithmetic task, then GRPO) must
# exit 0 and bring the greedy validation reward to GRPO's 10-step level
# (below). Prints the score before and after.
set -u
TRAIN=tools/train
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
export VERL_FILE_LOGGER_PATH="$TMP/quickstart.jsonl"
"$TRAIN" --flagfile=examples/quickstart.flags \
  trainer.total_training_steps=10 trainer.test_freq=10 \
  trainer.logger='[file]' trainer.default_local_dir="$TMP/ckpt" \
  >"$TMP/out" 2>&1 || { tail -20 "$TMP/out"; echo "FAIL: train exited $?"; exit 1; }
python3 - "$VERL_FILE_LOGGER_PATH" <<'PY'
import json, sys
key = "val-core/arithmetic/reward/mean@1"
vals = {}
for line in open(sys.argv[1]):
    row = json.loads(line)
    if key in row["data"]:
        vals[row["step"]] = row["data"][key]
before, after = vals.get(0), vals.get(10)
print(f"quickstart {key}: step 0 {before} -> step 10 {after}")
if before is None or after is None:
    sys.exit("FAIL: validation at steps 0 and 10 missing")
# Where the warm start is weak, GRPO must raise the score clearly; where it
# already reached GRPO's 10-step level (~0.56 on every CPU measured), the
# policy must hold that level. BLIS picks its kernels per CPU and the
# 300-step warm start amplifies last-bit differences: step 0 was 0.22, 0.36
# and 0.565 on three machines, step 10 0.56, 0.565 and 0.57.
if after < min(before + 0.15, 0.5) or after < before - 0.03:
    sys.exit(f"FAIL: validation reward did not reach 0.5 or rise by 0.15, "
             f"or fell ({before} -> {after})")
print("PASS")
PY
