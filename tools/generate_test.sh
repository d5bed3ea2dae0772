#!/usr/bin/env bash
# End-to-end check of //tools:generate on a tiny preset with the built-in
# tokenizer: text / chat / token-id prompts, a bad line served alone,
# greedy determinism, n samples with log-probs, and a bad-flag error.
set -euo pipefail
bin=tools/generate
in="$TEST_TMPDIR/in.jsonl"
cat > "$in" <<'JSONL'
{"prompt": "What is 2+3?"}
{"prompt": [{"role": "user", "content": "hello"}]}
{"prompt_token_ids": [5, 6, 7, 8]}
{"prompt_token_ids": []}
{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}
JSONL
common=(--preset=tiny-qwen2 --input="$in" --max_tokens=8 --threads=1
        --kv_cache_mb=16 --max_model_len=512 --progress=false)
"$bin" "${common[@]}" --output="$TEST_TMPDIR/a.jsonl" --do_sample=false \
  > "$TEST_TMPDIR/summary.txt"
grep -q "requests=4 failed=1" "$TEST_TMPDIR/summary.txt"
grep -q "prefix_cache_hit_rate=" "$TEST_TMPDIR/summary.txt"
[ "$(wc -l < "$TEST_TMPDIR/a.jsonl")" = 5 ]
sed -n 4p "$TEST_TMPDIR/a.jsonl" | grep -q '"error":"empty prompt"'
sed -n 3p "$TEST_TMPDIR/a.jsonl" | grep -q '"prompt_token_ids":\[5,6,7,8\]'
grep -q '"finish_reason"' "$TEST_TMPDIR/a.jsonl"
grep -q '"logprobs":\[' "$TEST_TMPDIR/a.jsonl"
# Greedy is deterministic.
"$bin" "${common[@]}" --output="$TEST_TMPDIR/b.jsonl" --do_sample=false >/dev/null
cmp "$TEST_TMPDIR/a.jsonl" "$TEST_TMPDIR/b.jsonl"
# n samples per prompt.
"$bin" "${common[@]}" --output="$TEST_TMPDIR/c.jsonl" --n=3 --seed=1 >/dev/null
[ "$(sed -n 1p "$TEST_TMPDIR/c.jsonl" | grep -o '"finish_reason"' | wc -l)" = 3 ]
# Bad flags: exit 2 with a message naming the problem.
set +e
msg=$("$bin" "${common[@]}" --output="$TEST_TMPDIR/d.jsonl" --top_p=2 2>&1)
rc=$?
set -e
[ "$rc" = 2 ] && echo "$msg" | grep -q "top_p"
[ ! -e "$TEST_TMPDIR/d.jsonl" ]
# Images (a vision-language folder): rows in verl's multimodal format, by
# relative path and as base64 bytes; a count mismatch and a missing file
# are error lines; a text row still works. Greedy output equals the
# engine's own on the same processed inputs; the two images differ.
vl="$TEST_TMPDIR/vl"
mkdir -p "$vl"
tools/generate_vlm_check --mode=setup --dir="$vl"
vcommon=(--threads=1 --kv_cache_mb=16 --max_model_len=512 --max_tokens=6)
"$bin" --model="$vl/tiny_vl" --input="$vl/in.jsonl" --output="$vl/out.jsonl" \
  "${vcommon[@]}" --do_sample=false --ignore_eos --progress=false \
  > "$vl/summary.txt"
grep -q "requests=3 failed=2" "$vl/summary.txt"
sed -n 3p "$vl/out.jsonl" | grep -q '"error":.*2 image.*1'
sed -n 4p "$vl/out.jsonl" | grep -q '"error":.*missing.png'
sed -n 5p "$vl/out.jsonl" | grep -q '"finish_reason"'
tools/generate_vlm_check --mode=check --dir="$vl" --output="$vl/out.jsonl" \
  "${vcommon[@]}"
# The preset route loads too.
"$bin" --preset=tiny-qwen2.5-vl --input="$vl/in.jsonl" \
  --output="$vl/preset.jsonl" "${vcommon[@]}" --progress=false \
  | grep -q "requests=3 failed=2"
echo "generate_test: ok"
