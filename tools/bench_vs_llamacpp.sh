#!/usr/bin/env bash
# The rollout engine against llama.cpp on the same model (issue #20): a
# Qwen2-shaped HF folder with random weights (//tools:init_model; default
# hidden 512, 8 layers, 8/4 heads, intermediate 1408, tied embeddings, f32)
# is exported to GGUF f32 with the project's exporter (//tools:export_gguf);
# llama.cpp from the npm package node-llama-cpp (installed by tools/setup.sh;
# its prebuilt CPU build, flash attention off, f32 K/V) runs the GGUF file
# and //tools:generate runs the HF folder, in interleaved pairs (ours,
# llama.cpp, ours, ...) at 1/8/32/64 concurrent sequences of PROMPT random
# tokens, GEN greedy tokens each (EOS ignored). Prints each pair and the
# median prefill / decode tok/s ratios (project / llama.cpp) with the load
# average; also the project's decode against llama.cpp's batched forward
# (fixed tokens, node-llama-cpp's per-sequence JavaScript generator loop
# left out, which llama.cpp's own tools do not have) in two forms: with the
# LM head and llama.cpp's greedy pick ("forward+head", the like-for-like
# bound), and without logits ("no head": llama.cpp then skips the LM head,
# so at vocab 151936 this leaves out most of a 1-8 sequence step). Each pair
# also prints the fp32 GEMM peak measured beside it (1024^3 matmul on the
# same thread count, Debian's python3-torch, when installed). Skips (exit
# 0) with one line when node or node-llama-cpp is absent.
#
# usage: tools/bench_vs_llamacpp.sh [--vocab=8192] [--seqs=1,8,32,64]
#          [--prompt=128] [--gen=128] [--pairs=3] [--threads=2]
#          [--preset=qwen2-30m] [--num_kv_heads=4] [--workdir=DIR]
# Run from the repository root (builds the tools with bazel) or set BIN_DIR
# to a folder holding init_model, export_gguf and generate.
set -euo pipefail
vocab=8192 seqs=1,8,32,64 prompt=128 gen=128 pairs=3 threads=2
preset=qwen2-30m kv=4 workdir=""
for arg in "$@"; do
  case "$arg" in
    --vocab=*) vocab="${arg#*=}" ;;
    --seqs=*) seqs="${arg#*=}" ;;
    --prompt=*) prompt="${arg#*=}" ;;
    --gen=*) gen="${arg#*=}" ;;
    --pairs=*) pairs="${arg#*=}" ;;
    --threads=*) threads="${arg#*=}" ;;
    --preset=*) preset="${arg#*=}" ;;
    --num_kv_heads=*) kv="${arg#*=}" ;;
    --workdir=*) workdir="${arg#*=}" ;;
    *) echo "bench_vs_llamacpp: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
npm_root="${NPM_ROOT:-/usr/local/lib/node_modules}"
if ! command -v node >/dev/null || [ ! -d "$npm_root/node-llama-cpp" ]; then
  echo "bench_vs_llamacpp: node-llama-cpp not installed under $npm_root (tools/setup.sh installs it); skipped"
  exit 0
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "${BIN_DIR:-}" ]; then
  bazel build //tools:init_model //tools:export_gguf //tools:generate >&2
  BIN_DIR="$(bazel info bazel-bin)/tools"
fi
[ -n "$workdir" ] || workdir="$(mktemp -d)"
mkdir -p "$workdir"
model="$workdir/model-v$vocab"
if [ ! -d "$model" ]; then
  "$BIN_DIR/init_model" --preset="$preset" --seed=1 --vocab_size="$vocab" \
    --num_kv_heads="$kv" --output_dir="$model" >&2
fi
[ -f "$model.gguf" ] || "$BIN_DIR/export_gguf" --hf_dir="$model" --output="$model.gguf" --outtype=f32 >&2

# libgomp's default wait policy, as users run //tools:generate (threads spin
# briefly between parallel regions, as llama.cpp's own pool does); set
# OMP_WAIT_POLICY=passive on an oversubscribed machine.
export BLIS_NUM_THREADS="$threads"
# The BLIS kernels the project's binaries choose at load time (Zen 5: skx,
# tools/blis_arch.py), for the GEMM peak measured beside them as well.
blis_arch=$(python3 "$(dirname "$0")/blis_arch.py" 2>/dev/null || true)
if [ -n "$blis_arch" ]; then export BLIS_ARCH_TYPE="${BLIS_ARCH_TYPE:-$blis_arch}"; fi
results="$workdir/results.txt"
: > "$results"
# GFLOP/s of the best of three 1024^3 fp32 matmuls ("n/a" without torch).
gemm_peak() {
  /usr/bin/python3 - "$threads" 2>/dev/null <<'PY' || echo n/a
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
best = 1e9
for _ in range(3):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
print("%.0f" % (2 * 1024 ** 3 / best / 1e9))
PY
}
IFS=, read -r -a seq_list <<< "$seqs"
for s in "${seq_list[@]}"; do
  # The same random prompts (ids below vocab - 512, clear of the specials).
  python3 - "$s" "$prompt" "$vocab" > "$workdir/prompts-$s.jsonl" <<'PY'
import json, random, sys
s, p, v = map(int, sys.argv[1:])
rng = random.Random(s)
for _ in range(s):
    print(json.dumps({"prompt_token_ids": [rng.randrange(v - 512) for _ in range(p)]}))
PY
  for ((i = 0; i < pairs; ++i)); do
    ours=$("$BIN_DIR/generate" --model="$model" --input="$workdir/prompts-$s.jsonl" \
      --output="$workdir/out.jsonl" --do_sample=false --ignore_eos --max_tokens="$gen" \
      --threads="$threads" --kv_cache_mb=$((s * (prompt + gen) / 16 + 64)) \
      --max_model_len=$((prompt + gen + 16)) --enable_prefix_caching=false \
      --progress=false | tail -1)
    op=$(sed -E 's/.*prefill_tok_s=([0-9.]+).*/\1/' <<< "$ours")
    od=$(sed -E 's/.*decode_tok_s=([0-9.]+).*/\1/' <<< "$ours")
    theirs=$(node "$here/testdata/llamacpp_bench.mjs" "$model.gguf" "$s" "$prompt" \
      "$gen" "$threads" "$vocab" "$s")
    lp=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["prefill_tok_s"])' "$theirs")
    ld=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["decode_tok_s"])' "$theirs")
    lf=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["forward_tok_s"])' "$theirs")
    lh=$(python3 -c 'import json,sys; print("%.1f" % json.loads(sys.argv[1])["forward_head_tok_s"])' "$theirs")
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    peak=$(gemm_peak)
    echo "seqs $s pair $i: project prefill $op decode $od | llama.cpp prefill $lp decode $ld forward+head $lh no-head $lf | GEMM peak $peak GFLOP/s | load $load"
    echo "$s $op $od $lp $ld $lf $lh" >> "$results"
  done
done
python3 - "$results" "$vocab" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
print(f"vocab {sys.argv[2]}: medians of interleaved pairs (project / llama.cpp)")
print("| sequences | prefill tok/s (project / llama.cpp) | decode tok/s (project / llama.cpp) | decode vs llama.cpp's forward+head | decode vs llama.cpp's forward without the head |")
print("|---|---|---|---|---|")
for s in sorted({int(r[0]) for r in rows}):
    rs = [list(map(float, r[1:])) for r in rows if int(r[0]) == s]
    op, od, lp, ld, lf, lh = (statistics.median(x[i] for x in rs) for i in range(6))
    pr = statistics.median(x[0] / x[2] for x in rs)
    dr = statistics.median(x[1] / x[3] for x in rs)
    fr = statistics.median(x[1] / x[4] for x in rs)
    hr = statistics.median(x[1] / x[5] for x in rs)
    print(f"| {s} | {pr:.2f}x ({op:.0f} / {lp:.0f}) | {dr:.2f}x ({od:.0f} / {ld:.0f}) | {hr:.2f}x ({od:.0f} / {lh:.0f}) | {fr:.2f}x ({od:.0f} / {lf:.0f}) |")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
