#!/usr/bin/env bash
# End-to-end check of //tools:prepare_data: outputs, determinism, bad input.
set -euo pipefail
bin=tools/prepare_data
out="$TEST_TMPDIR/out"
"$bin" --task=arithmetic --output_dir="$out" --train_size=30 --val_size=5 --seed=3
[ "$(wc -l < "$out/train.jsonl")" = 30 ] && [ "$(wc -l < "$out/test.jsonl")" = 5 ]
cp "$out/train.jsonl" "$TEST_TMPDIR/first"
"$bin" --task=arithmetic --output_dir="$out" --train_size=30 --val_size=5 --seed=3
cmp "$out/train.jsonl" "$TEST_TMPDIR/first"
"$bin" --task=countdown --output_dir="$out/cd" --train_size=4 --val_size=2
grep -q '"data_source":"countdown"' "$out/cd/train.jsonl"
"$bin" --task=multiples --output_dir="$out/mu" --train_size=6 --val_size=3
[ "$(wc -l < "$out/mu/test.jsonl")" = 3 ]
grep -q '"content":"Name a multiple of [0-9]* between [0-9]* and [0-9]*\."' "$out/mu/train.jsonl"
grep -q '"ground_truth":{"hi":[0-9]*,"k":[0-9]*,"lo":[0-9]*}' "$out/mu/train.jsonl"
# geo_map: images as files next to JSONL rows, inline in Parquet.
"$bin" --task=geo_map --output_dir="$out/geo" --train_size=3 --val_size=2
[ "$(wc -l < "$out/geo/train.jsonl")" = 3 ] && [ "$(head -c 4 "$out/geo/images/test_1.png" | tail -c 3)" = PNG ]
grep -q '"images":\[{"path":"[^"]*/geo/images/train_0.png"}\]' "$out/geo/train.jsonl"
# The VLM quickstart's maps (2x2 grid of 42-px cells, two landmarks) as files.
"$bin" --task=geo_map --output_dir="$out/geoq" --train_size=2 --val_size=3 --geo_grid=2 --geo_cell_px=21 --geo_landmarks=2 --geo_types=distance
grep -q '"grid":2,' "$out/geoq/test.jsonl" && ! grep -q '"label":"C"' "$out/geoq/test.jsonl"
[ "$(od -An -tx1 -j16 -N8 "$out/geoq/images/test_0.png" | tr -d ' \n')" = 0000002a0000002a ]  # 42x42
! "$bin" --task=geo_map --output_dir="$out/geobad" --geo_grid=3 2>/dev/null
"$bin" --task=geo_map --output_dir="$out/geopq" --train_size=3 --val_size=2 --format=parquet
[ "$(head -c 4 "$out/geopq/train.parquet")" = PAR1 ] && [ ! -e "$out/geopq/images" ]
# Parquet output (verl's format): magic at both ends, same rows as JSONL
# (the project's reader is checked against independent writers elsewhere).
"$bin" --task=arithmetic --output_dir="$out/pq" --train_size=30 --val_size=5 --seed=3 --format=parquet
[ "$(head -c 4 "$out/pq/train.parquet")" = PAR1 ] && [ "$(tail -c 4 "$out/pq/test.parquet")" = PAR1 ]
[ ! -e "$out/pq/train.jsonl" ]
set +e
"$bin" --task=arithmetic --output_dir="$out/x" --format=csv 2>/dev/null; [ $? = 2 ] || exit 1
set -e
# gsm8k conversion
mkdir -p "$TEST_TMPDIR/raw"
echo '{"question": "1+1?", "answer": "1+1=2\n#### 2"}' > "$TEST_TMPDIR/raw/train.jsonl"
echo '{"question": "2+2?", "answer": "#### 4"}' > "$TEST_TMPDIR/raw/test.jsonl"
"$bin" --task=gsm8k --input_dir="$TEST_TMPDIR/raw" --output_dir="$out/g"
grep -q '"ground_truth":"2"' "$out/g/train.jsonl"
# MATH-lighteval conversion (verl's math_dataset.py): last boxed answer.
mkdir -p "$TEST_TMPDIR/math"
echo '{"problem": "1+1?", "solution": "so \\boxed{2}", "level": "Level 1", "type": "Algebra"}' > "$TEST_TMPDIR/math/train.jsonl"
echo '{"problem": "x?", "solution": "\\boxed{\\frac{1}{2}}", "level": "Level 2", "type": "Geometry"}' > "$TEST_TMPDIR/math/test.jsonl"
"$bin" --task=math --input_dir="$TEST_TMPDIR/math" --output_dir="$out/m" --format=parquet
[ "$(head -c 4 "$out/m/test.parquet")" = PAR1 ]
"$bin" --task=math --input_dir="$TEST_TMPDIR/math" --output_dir="$out/mj"
grep -q '"ground_truth":"2"' "$out/mj/train.jsonl"
grep -q '"level":"Level 2"' "$out/mj/test.jsonl"
grep -q 'within \\\\boxed{}.' "$out/mj/test.jsonl"
# Bad input: clear error, exit 2, nothing written.
echo '{"question": "x", "answer": "no final"}' > "$TEST_TMPDIR/raw/test.jsonl"
set +e
msg=$("$bin" --task=gsm8k --input_dir="$TEST_TMPDIR/raw" --output_dir="$out/bad" 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && echo "$msg" | grep -q "test.jsonl" && [ ! -e "$out/bad" ]
set +e
"$bin" --task=nope --output_dir="$out/x" 2>/dev/null; [ $? = 2 ] || exit 1
echo "prepare_data_test: ok"
