#!/usr/bin/env bash
# //tools:export_gguf end to end: tiny Qwen2, Qwen3 and Llama-3 folders from
# //tools:init_model are exported; llama.cpp itself (the npm package
# node-llama-cpp, installed by tools/setup.sh) loads each file, must tokenize
# the prompts to the project's ids and continue them greedily exactly as
# //tools:generate does for f32 (the chosen tokens' probabilities within
# 1e-3); for q8_0 the first tokens must agree and the top-1 agreement rate is
# printed. Bad input: one line, exit 2, nothing written.
set -euo pipefail
d="$TEST_TMPDIR"
n=12
cat > "$d/prompts.json" <<'JSON'
["What is 12+30? The answer is", "the total of 7 and 8", "  spaces,\n\nnew lines and #### 42", "abc"]
JSON
python3 - "$d/prompts.json" > "$d/prompts.jsonl" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1])): print(json.dumps({"prompt": p}))
PY
# Bad input first: nothing may be written.
tools/init_model --preset=tiny-qwen2-moe --seed=1 --output_dir="$d/moe" >/dev/null
set +e
msg=$(tools/export_gguf --hf_dir="$d/moe" --output="$d/moe.gguf" 2>&1); rc=$?
set -e
[ "$rc" = 2 ] && echo "$msg" | grep -q "MoE models are not supported" && [ ! -e "$d/moe.gguf" ]
set +e
msg=$(tools/export_gguf --hf_dir="$d/moe" --output="$d/x.gguf" --outtype=q4_k 2>&1); rc=$?
set -e
[ "$rc" = 2 ] && echo "$msg" | grep -q "unsupported GGUF tensor type 'q4_k'" && [ ! -e "$d/x.gguf" ]
ls "$d" | grep -q "\.tmp" && { echo "temp file left behind"; exit 1; }

have_llamacpp=1
if ! command -v node >/dev/null || [ ! -d /usr/local/lib/node_modules/node-llama-cpp ]; then
  echo "export_gguf_test: node-llama-cpp missing (tools/setup.sh installs it); llama.cpp checks skipped"
  have_llamacpp=0
fi
for preset in tiny-qwen2 tiny-qwen3 tiny-llama3; do
  tools/init_model --preset="$preset" --seed=7 --output_dir="$d/$preset" >/dev/null
  tools/generate --model="$d/$preset" --input="$d/prompts.jsonl" \
    --output="$d/$preset.ours.jsonl" --do_sample=false --ignore_eos \
    --max_tokens=$n --threads=1 --kv_cache_mb=16 --max_model_len=256 \
    --progress=false >/dev/null
  for type in f32 q8_0; do
    tools/export_gguf --hf_dir="$d/$preset" --output="$d/$preset.$type.gguf" \
      --outtype=$type >/dev/null
    [ "$have_llamacpp" = 1 ] || continue
    node tools/testdata/llamacpp_greedy.mjs "$d/$preset.$type.gguf" \
      "$d/prompts.json" $n > "$d/$preset.$type.llama.jsonl"
    python3 - "$d/$preset.ours.jsonl" "$d/$preset.$type.llama.jsonl" \
      "$preset" "$type" <<'PY'
import json, math, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
preset, typ = sys.argv[3], sys.argv[4]
assert len(ours) == len(theirs), (len(ours), len(theirs))
agree = total = 0
for o, t in zip(ours, theirs):
    assert o["prompt_token_ids"] == t["prompt_token_ids"], (preset, o["prompt_token_ids"], t["prompt_token_ids"])
    mine, lp = o["outputs"][0]["token_ids"], o["outputs"][0]["logprobs"]
    gen = t["token_ids"]
    assert len(gen) >= 1
    if typ == "f32":
        # llama.cpp may stop after an end-of-generation token: compare what it made.
        assert mine[:len(gen)] == gen, (preset, mine, gen)
        for p, l in zip(t["probs"], lp):
            assert abs(p - math.exp(l)) < 1e-3, (preset, p, math.exp(l))
    else:
        assert mine[:2] == gen[:2], (preset, typ, mine, gen)
    k = min(len(mine), len(gen))
    agree += sum(a == b for a, b in zip(mine[:k], gen[:k])); total += k
print(f"export_gguf_test: {preset} {typ}: top-1 agreement with llama.cpp {agree}/{total}")
PY
  done
done
echo "export_gguf_test: ok"
