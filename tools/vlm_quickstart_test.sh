#!/bin/bash
# File: tools/vlm_quickstart_test.sh
#
# The vision-language quickstart (examples/vlm_quickstart.flags: SFT warm
# start + GRPO on tiny-qwen2.5-vl reading geo_map images) end to end: it
# must exit 0 and the greedy validation reward after the last GRPO step must
# be above the one after the warm start (step 0) by MARGIN, and above what
# the best a policy answering from the question text alone scores on the
# same rows (the most frequent ground truth per prompt). Prints the curve.
set -u
TRAIN=tools/train
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
STEPS="${VLM_QUICKSTART_STEPS:-10}"
MARGIN="${VLM_QUICKSTART_MARGIN:-0.1}"
SEED="${VLM_QUICKSTART_SEED:-1}"  # data.seed (also the init's seed)
export VERL_FILE_LOGGER_PATH="$TMP/vlm_quickstart.jsonl"
"$TRAIN" --flagfile=examples/vlm_quickstart.flags \
  data.seed="$SEED" trainer.total_training_steps="$STEPS" trainer.test_freq=5 \
  trainer.logger='[file]' trainer.default_local_dir="$TMP/ckpt" \
  trainer.validation_data_dir="$TMP/val" \
  >"$TMP/out" 2>&1 || { tail -20 "$TMP/out"; echo "FAIL: train exited $?"; exit 1; }
python3 - "$VERL_FILE_LOGGER_PATH" "$TMP/val" "$STEPS" "$MARGIN" <<'PY'
import collections, json, re, sys
path, val_dir, steps, margin = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
key = "val-core/geo_map/reward/mean@1"
vals = {}
for line in open(path):
    row = json.loads(line)
    if key in row["data"]:
        vals[row["step"]] = row["data"][key]
print(f"vlm quickstart {key}: " + ", ".join(f"step {s} {v:.3f}" for s, v in sorted(vals.items())))
before, after = vals.get(0), vals.get(steps)
if before is None or after is None:
    sys.exit(f"FAIL: validation at steps 0 and {steps} missing")
# Without the image a policy can only answer from the question: its best on
# these rows is the most frequent ground truth of each question form (the
# landmark letters do not tell where the landmarks are), counted on the
# rows themselves.
by_prompt = collections.defaultdict(collections.Counter)
for line in open(f"{val_dir}/0.jsonl"):
    r = json.loads(line)
    form = re.sub(r"\b(landmark|to|from) [A-H]\b", r"\1 X", r["input"])
    by_prompt[form][r["gts"]] += 1
rows = sum(sum(c.values()) for c in by_prompt.values())
no_image = sum(max(c.values()) for c in by_prompt.values()) / rows
print(f"best score without the image: {no_image:.3f} "
      f"({len(by_prompt)} question forms, {rows} rows)")
if after < before + margin or after <= no_image:
    sys.exit(f"FAIL: validation reward {before:.3f} -> {after:.3f} did not "
             f"rise by {margin} or stay above {no_image:.3f}")
print("PASS")
PY
