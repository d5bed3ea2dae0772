#!/bin/bash
# File: tools/flowrl_diversity_test.sh
#
# tools/flowrl_diversity.py on a fixed 3-prompt dump (N = 4), against values
# computed by hand: prompt A collapsed on its top answer (KL = log 3.75),
# prompt B split over its two lowest answers (KL = ½ log 3 + ½ log 2.25), a
# malformed "015" and "x" not counted, prompt C with no valid sample (left
# out of the KL mean); then alpha = 1 smoothing and the bad-input errors.
set -euo pipefail
PY=tools/flowrl_diversity.py
DUMP=tools/testdata/flowrl_diversity/dump.jsonl
python3 "$PY" --n 4 run="$DUMP"
python3 "$PY" --n 4 --json run="$DUMP" >"$TEST_TMPDIR/a0.json"
python3 "$PY" --n 4 --alpha 1 --json run="$DUMP" >"$TEST_TMPDIR/a1.json"
python3 - "$TEST_TMPDIR/a0.json" "$TEST_TMPDIR/a1.json" <<'PY'
import json, math, sys
a0 = json.load(open(sys.argv[1]))["run"]
a1 = json.load(open(sys.argv[2]))["run"]
want = {
    "prompts": 3, "no_valid": 1,
    "mean_reward": (4 + 0.5 + 2 / 3) / 12,
    "valid_rate": 6 / 12,
    "distinct_correct": (1 + 2 + 0) / 3,
    "kl": (math.log(3.75) + 0.5 * math.log(3) + 0.5 * math.log(2.25)) / 2,
    # Σ r²/Σ r: A (0.5 .. 1.0 step 0.125), B and C (0.5 .. 1.0 step 1/6).
    "target_reward": (2.96875 / 3.75 + 2 * (43 / 18) / 3) / 3,
    "target_distinct": 13 / 3,
}
for k, v in want.items():
    if not math.isclose(a0[k], v, rel_tol=1e-9, abs_tol=1e-12):
        sys.exit(f"FAIL: {k} = {a0[k]}, want {v}")
if not math.isclose(a1["kl"], 0.18012293668793403, rel_tol=1e-9):
    sys.exit(f"FAIL: alpha=1 kl = {a1['kl']}")
print("values ok")
PY
# Wrong N mixes prompts; a missing file is named.
fails_with() {  # fails_with <message> <args...>: exit != 0 and the message
  local msg rc=0
  msg=$(python3 "$PY" "${@:2}" 2>&1) || rc=$?
  [ "$rc" != 0 ] && grep -q "$1" <<<"$msg" || { echo "FAIL: ${*:2}: $msg"; exit 1; }
}
fails_with "mix prompts" --n 3 run="$DUMP"
fails_with "not a multiple of n=8" --n 8 run="$DUMP"
fails_with "/nonexistent.jsonl" --n 4 run=/nonexistent.jsonl
fails_with "expected NAME=DUMP" --n 4 "$DUMP"
echo PASS
